"""The `critmem` parser: each command group's module adds its own commands."""

from __future__ import annotations

import argparse

from critmem import __version__
from critmem.cli import analyze, examples, linux, reproduce, run, schema, sweep
from critmem.cli.errors import _Parser

_DESCRIPTION = """\
critmem: predictable memory management for mixed-criticality real-time systems.
Simulates scenario files (TOML) deterministically and analyses their schedulability."""

_EPILOG = """\
examples:
  critmem examples
  critmem examples copy quickstart
  critmem run quickstart.toml
  critmem run quickstart.toml --seed 7 --out results/quickstart
  critmem examples copy rm-textbook
  critmem run rm-textbook.toml --json
  critmem analyze rm-textbook.toml
  critmem reproduce shared-pages
  critmem examples copy sweep/sweep
  critmem sweep sweep/sweep.toml
  critmem examples copy linux-sara
  sudo critmem run linux-sara.toml --platform linux --duration 60s
  sudo critmem swap setup --size 4G

`critmem examples copy NAME` writes a bundled example to the current folder (a checkout
has them all in examples/).

Errors print one line on stderr and exit with code 2."""


def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = _Parser(prog="critmem", description=_DESCRIPTION, epilog=_EPILOG, formatter_class=fmt)
    parser.add_argument("--version", action="version", version=f"critmem {__version__}")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="on an error in your own Python code (a controller, a scheduler), print its full traceback too; may come anywhere on the line",
    )
    commands = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND", required=True)

    # In the order `critmem --help` lists them.
    run.register(commands)
    analyze.register(commands)
    reproduce.register(commands)
    sweep.register(commands)
    linux.register(commands)
    schema.register(commands)
    examples.register(commands)
    return parser
