"""The `critmem` parser: each command group's module adds its own commands."""

from __future__ import annotations

import argparse
import importlib

from critmem import __version__
from critmem.cli.errors import _Parser

# The modules that add commands, in the order `critmem --help` lists them, and the module of each
# command: a command line with a known command builds only its module's parsers (the others'
# imports would slow every start).
COMMAND_MODULES = ("run", "analyze", "reproduce", "sweep", "linux", "schema", "examples")
MODULE_OF_COMMAND = {
    "run": "run",
    "analyze": "analyze",
    "validate": "analyze",
    "generate": "analyze",
    "init": "analyze",
    "reproduce": "reproduce",
    "study": "reproduce",
    "sweep": "sweep",
    "agent": "linux",
    "agent-config": "linux",
    "swap": "linux",
    "profile": "linux",
    "hires": "linux",
    "schema": "schema",
    "examples": "examples",
}

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


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of `command`'s module alone when it names one."""
    fmt = argparse.RawDescriptionHelpFormatter
    parser = _Parser(prog="critmem", description=_DESCRIPTION, epilog=_EPILOG, formatter_class=fmt)
    parser.add_argument("--version", action="version", version=f"critmem {__version__}")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="on an error in your own Python code (a controller, a scheduler), print its full traceback too; may come anywhere on the line",
    )
    commands = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND", required=True)

    module = MODULE_OF_COMMAND.get(command) if command is not None else None
    for name in (module,) if module is not None else COMMAND_MODULES:
        importlib.import_module(f"critmem.cli.{name}").register(commands)
    return parser
