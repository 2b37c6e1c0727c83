"""Exception classes the command line catches, in a module that imports nothing: every start
of `critmem` loads it (the modules that raise them load only where they are used)."""

from __future__ import annotations


class LinuxError(Exception):
    """A one-line error of the Linux commands."""
