"""Where commands write: the output folder of `run --out` (made if missing, and never a folder
holding files critmem did not write) and the single files of `init` and `agent-config`."""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from pathlib import Path

from critmem.cli.errors import CliError
from critmem.cli.tables import _visible


def _prepare_out_dir(out: str) -> Path:
    path = Path(out)
    # mkdir would say "File exists" for a file in the way; name the real problem.
    if path.exists() and not path.is_dir():
        raise CliError(f"cannot write results to {out!r}: it exists and is not a folder")
    if path.is_symlink():
        # mkdir would say "File exists" for a link to nowhere too.
        try:
            os.stat(path)
        except OSError as e:
            reason = {
                errno.ENOENT: f"it is a symbolic link to {os.readlink(path)!r}, which does not exist",
                errno.ELOOP: "it is a symbolic link that loops",
            }.get(e.errno or 0, e.strerror or str(e))
            raise CliError(f"cannot write results to {out!r}: {reason}") from None
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CliError(f"cannot write results to {out!r}: {e.strerror or e}") from None
    if not os.access(path, os.W_OK):
        raise CliError(f"cannot write results to {out!r}: permission denied")
    return path


# `run --out` keeps the names of the files it wrote here, so a later run knows which files in
# the folder are critmem's own.
_MANIFEST = ".critmem-out"
# Every file `run --out` may write, on either platform.
_OUT_NAMES = frozenset(
    {
        "jobs.csv",
        "segments.csv",
        "summary.json",
        "gantt.png",
        "gantt.svg",
        "gantt.pdf",
        "trace.json",
        "jobs.parquet",
        "segments.parquet",
        "memory_timeline.parquet",
        "memory_timeline.csv",
        "control_timeline.csv",
        "memory.png",
        "waits.csv",
        "servers.csv",
        "server_supply.csv",
        "timeline.csv",
        "csv-metadata.json",
        _MANIFEST,
    }
)


def _claim_out_dir(out: str, path: Path, force: bool) -> None:
    """Refuses a folder holding anything but critmem's own files of an earlier run; with
    `force`, removes those (and only those) so no stale file sits beside the new results."""
    entries = sorted(os.listdir(path))
    if not entries:
        return
    try:
        listed = set((path / _MANIFEST).read_text(encoding="utf-8").splitlines())
    except FileNotFoundError:
        listed = set()
    except OSError as e:
        raise CliError(f"cannot write results to {out!r}: {_MANIFEST}: {e.strerror or e}") from None
    own = [n for n in entries if n == _MANIFEST or (n in listed and n in _OUT_NAMES and (path / n).is_file())]
    foreign = [n for n in entries if n not in own]
    if not force:
        if foreign:
            shown = ", ".join(_visible(n) for n in foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            raise CliError(
                f"cannot write results to {out!r}: it holds files critmem did not write ({shown}); "
                "choose an empty or new folder, or give --force to replace only critmem's files of an earlier run"
            )
        raise CliError(f"cannot write results to {out!r}: it holds the results of an earlier run; give --force to replace them")
    clash = sorted(set(foreign) & _OUT_NAMES)
    if clash:
        raise CliError(f"cannot write results to {out!r}: {_visible(clash[0])} is in the way and critmem did not write it")
    try:
        for name in own:
            (path / name).unlink()
    except OSError as e:
        raise CliError(f"cannot write results to {out!r}: {e.strerror or e}") from None


def _record_out(out_dir: Path, written: Sequence[Path]) -> None:
    """Lists the files this run wrote in the folder's manifest."""
    try:
        (out_dir / _MANIFEST).write_text("".join(f"{p.name}\n" for p in written), encoding="utf-8")
    except OSError as e:
        raise CliError(f"cannot write results to {str(out_dir)!r}: {e.strerror or e}") from None


def _write_file(name: str, text: str, force: bool) -> None:
    """Writes `text` to the file `name`; one that exists only with `force`."""
    try:
        with open(name, "w" if force else "x", encoding="utf-8") as f:
            f.write(text)
    except FileExistsError:
        raise CliError(f"{name}: exists; give --force to replace it") from None
    except OSError as e:
        raise CliError(f"cannot write {name!r}: {e.strerror or e}") from None
