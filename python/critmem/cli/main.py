"""The `critmem` entry point: parses the command line, runs the command and turns every
failure into one line and an exit code."""

from __future__ import annotations

import argparse
import os
import select
import sys
from collections.abc import Callable, Sequence

from critmem._core import ScenarioError
from critmem._errors import LinuxError
from critmem.cli.errors import EXIT_CLOSED_OUTPUT, EXIT_INTERNAL, CliError, _fail, _fail_os
from critmem.cli.parser import build_parser
from critmem.plugins import PluginError


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe or socket whose reader has closed it (poll reports POLLERR)."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # replaced by an object without a descriptor
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def _quiet_closed_stdout() -> int:
    """The reader of stdout went away (`critmem ... | head`): stop quietly, as rich does."""
    # Python would otherwise fail again flushing stdout at exit and print a traceback.
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
    return EXIT_CLOSED_OUTPUT


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit code (0 ok, 1 stdout closed early, 2 user
    error, 70 internal error)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # `--debug` anywhere before a `--`: users add it to the command that failed.
    own = argv[: argv.index("--")] if "--" in argv else argv
    debug = "--debug" in own
    if debug:
        argv.remove("--debug")
        # The Linux platform's controller process prints its traceback itself.
        os.environ["CRITMEM_DEBUG"] = "1"
    try:
        # The command: the first word that is not an option (none for `--version`, `--help`).
        command = next((a for a in argv if not a.startswith("-")), None)
        parser = build_parser(command)
        after: list[str] = []
        if argv[:1] in (["hires"], ["profile"]) and "--" in argv:
            argv, after = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
        args, unknown = parser.parse_known_args(argv)
        if after:
            args.command_after = after
        if unknown:
            # parse_args would blame the top-level parser and point to 'critmem --help'.
            raise CliError(f"unrecognized arguments: {' '.join(unknown)} (see '{parser.prog} {args.command} --help')")
        handler: Callable[[argparse.Namespace], int] = args.handler
        code = handler(args)
        # Flushed here, not at exit, so a closed pipe is seen while it can still be handled.
        sys.stdout.flush()
        # A large write cut short by the reader leaving can return without an error.
        return _quiet_closed_stdout() if _stdout_reader_gone() else code
    except SystemExit as e:  # --help and --version; rich's console exits 1 on a closed pipe
        return e.code if isinstance(e.code, int) else 0
    except BrokenPipeError as e:
        if _stdout_reader_gone():
            return _quiet_closed_stdout()
        return _fail_os(e)
    except CliError as e:
        return _fail(str(e))
    except ScenarioError as e:
        return _fail(str(e))
    except LinuxError as e:
        return _fail(str(e))
    except PluginError as e:
        if debug:
            import traceback

            traceback.print_exception(e.__cause__ or e, file=sys.stderr)
        return _fail(str(e))
    except OSError as e:
        return _fail_os(e)
    except KeyboardInterrupt:
        return 130
    except BaseException as e:  # noqa: BLE001 — includes pyo3's PanicException
        return _fail(f"internal error ({type(e).__name__}: {e}); please report it", EXIT_INTERNAL)
