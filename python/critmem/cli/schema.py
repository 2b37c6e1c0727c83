"""`critmem schema`: the JSON Schema of scenario files, or of a `--json` output."""

from __future__ import annotations

import argparse
import sys

from critmem import output_schemas
from critmem.cli.errors import _Parser


def _cmd_schema(args: argparse.Namespace) -> int:
    sys.stdout.write(output_schemas.schema_command_output(args.output))
    return 0


def register(commands: argparse._SubParsersAction[_Parser]) -> None:
    """Adds `critmem schema`."""
    fmt = argparse.RawDescriptionHelpFormatter
    schema = commands.add_parser(
        "schema",
        help="print the JSON Schema of scenario files",
        description="Print the JSON Schema (draft 2020-12) of scenario files: every key, its type and each\n"
        "choice key's accepted values, derived from the loader itself. Editors use it to complete\n"
        "and check scenarios as they are written; rules across keys are the loader's alone\n"
        "(`critmem validate FILE`).",
        epilog="examples:\n  critmem schema > scenario.schema.json",
        formatter_class=fmt,
    )
    schema.add_argument(
        "--output",
        metavar="KIND",
        choices=output_schemas.OUTPUT_SCHEMA_NAMES,
        help=f"print the JSON Schema of an output instead: {', '.join(output_schemas.OUTPUT_SCHEMA_NAMES)}",
    )
    schema.set_defaults(handler=_cmd_schema)
