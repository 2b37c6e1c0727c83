"""`critmem examples`: the bundled example scenarios listed, or one copied out."""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path

from critmem.cli.errors import CliError, _Parser
from critmem.cli.tables import _console, _table


def _cmd_examples(args: argparse.Namespace) -> int:
    from critmem import examples

    if args.action is None:
        rows = [[e.name, e.summary] for e in examples.bundled()]
        _console().print(_table(["example", "what it shows"], rows, left=2))
        return 0
    try:
        written = examples.copy(args.name, Path(args.dest) if args.dest is not None else Path())
    except examples.ExampleError as e:
        raise CliError(str(e)) from None
    command = next((e.command for e in examples.bundled() if e.name == args.name.removesuffix(".toml")), "run")
    print(f"wrote {written}: run it with `critmem {command} {written}`")
    if command == "sweep":
        scenario = tomllib.loads(written.read_text(encoding="utf-8")).get("scenario")
        if isinstance(scenario, str) and not (written.parent / scenario).exists():
            name = Path(scenario).stem
            print(
                f"it simulates {written.parent / scenario}, which is not there yet: `critmem examples copy {name}` beside the sweep folder"
            )
    return 0


def register(commands: argparse._SubParsersAction[_Parser]) -> None:
    """Adds `critmem examples` and `critmem examples copy`."""
    fmt = argparse.RawDescriptionHelpFormatter
    examples = commands.add_parser(
        "examples",
        help="list the bundled example scenarios and sweep specs, or copy one out",
        description="List the example scenarios and sweep specs that ship with critmem (name and first comment\n"
        "line), or write one to the current folder (or DEST) with `copy`; an existing file is never\n"
        "replaced. A sweep spec (sweep/NAME) is written as sweep/NAME.toml and simulates the scenario\n"
        "beside that folder, so copy that scenario too.",
        epilog="examples:\n  critmem examples\n  critmem examples copy quickstart\n  critmem run quickstart.toml\n"
        "  critmem examples copy sweep/sweep\n  critmem sweep sweep/sweep.toml",
        formatter_class=fmt,
    )
    examples.set_defaults(handler=_cmd_examples, action=None)
    examples_actions = examples.add_subparsers(dest="action", metavar="ACTION")
    copy = examples_actions.add_parser(
        "copy",
        help="write the example NAME to the current folder (or DEST)",
        description="Write the bundled example NAME as NAME.toml in the current folder, or to DEST (a folder\n"
        "or a file name); an existing file is never replaced. A sweep spec sweep/NAME goes to\n"
        "sweep/NAME.toml in the folder.",
        formatter_class=fmt,
    )
    copy.add_argument("name", metavar="NAME", help="an example's name, as `critmem examples` lists it")
    copy.add_argument("dest", metavar="DEST", nargs="?", help="folder or file to write (default: the current folder)")
