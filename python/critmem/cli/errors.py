"""The command's errors and exit codes: every failure a user can cause ends as one line
`critmem: error: ...` on stderr and exit code 2, never a traceback."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

# The reader of stdout closed it early; nothing is printed (rich's console does the same).
EXIT_CLOSED_OUTPUT = 1
EXIT_USAGE = 2
# An exception that is not the user's fault: a bug in critmem.
EXIT_INTERNAL = 70


class CliError(Exception):
    """A user error, reported as one line."""


class _Parser(argparse.ArgumentParser):
    # argparse prints usage plus the error over several lines; we want one line.
    def error(self, message: str) -> NoReturn:
        raise CliError(f"{message} (see '{self.prog} --help')")


_MAX_ERROR_CHARS = 2000


def _fail(message: str, code: int = EXIT_USAGE) -> int:
    one_line = " ".join(message.split())
    # A value echoed from the input can be megabytes long; the line stays readable. Its middle
    # goes: a long path comes first and the reason last, and both must stay.
    if len(one_line) > _MAX_ERROR_CHARS:
        head, tail = _MAX_ERROR_CHARS * 3 // 5, _MAX_ERROR_CHARS * 2 // 5
        left_out = len(one_line) - head - tail
        one_line = f"{one_line[:head]} … ({left_out} more characters) … {one_line[-tail:]}"
    print(f"critmem: error: {one_line}", file=sys.stderr)
    return code


def _fail_os(e: OSError) -> int:
    where = f"{e.filename or repr(e.filename)}: " if e.filename is not None else ""
    return _fail(f"{where}{e.strerror or e}")
