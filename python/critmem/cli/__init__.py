"""The `critmem` command, one module per command group: `run`, `analyze` (with `validate`,
`init`, `generate`), `reproduce` (with `study`), `sweep`, `linux` (`run --platform linux`'s tables,
`agent`, `agent-config`, `swap`, `profile`, `hires`), `examples` and `schema`. Each adds its
own subcommands in `register`; `parser.build_parser` calls them and `main.main` runs the
result.

Every failure a user can cause (a bad file, scenario, argument or output folder) ends as
one line `critmem: error: ...` on stderr and exit code 2; never a traceback.
"""

from __future__ import annotations

from critmem.cli.main import main
from critmem.cli.parser import build_parser

__all__ = ["build_parser", "main"]
