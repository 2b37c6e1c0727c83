"""The example scenarios that ship with critmem: `critmem examples` lists them and `critmem
examples copy NAME [DEST]` writes one out, so the commands in `--help` work outside a checkout.

They are the files of the checkout's `examples/` folder, packaged as `critmem/_examples/`.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

__all__ = ["Example", "ExampleError", "bundled", "copy", "text"]

_SUFFIX = ".toml"


class ExampleError(Exception):
    """An unknown example, or a copy that would replace a file or cannot be written."""


@dataclass(frozen=True)
class Example:
    name: str
    """What `critmem examples copy` takes: the file name without `.toml`."""
    summary: str
    """The file's first comment line."""


def _folder() -> Traversable:
    return resources.files("critmem") / "_examples"


def _files() -> dict[str, Traversable]:
    folder = _folder()
    if not folder.is_dir():
        return {}
    found = {f.name[: -len(_SUFFIX)]: f for f in folder.iterdir() if f.name.endswith(_SUFFIX) and f.is_file()}
    return dict(sorted(found.items()))


def _summary(text: str) -> str:
    first = next((line for line in text.splitlines() if line.strip()), "")
    return first.lstrip("#").strip() if first.lstrip().startswith("#") else ""


def bundled() -> list[Example]:
    """Every bundled example, by name."""
    return [Example(name, _summary(f.read_text(encoding="utf-8"))) for name, f in _files().items()]


def text(name: str) -> str:
    """The bundled example `name` (with or without `.toml`)."""
    files = _files()
    key = name.removesuffix(_SUFFIX)
    if key not in files:
        known = ", ".join(files) or "none (this installation has no bundled examples)"
        raise ExampleError(f"no bundled example {name!r}; known: {known}")
    return files[key].read_text(encoding="utf-8")


def copy(name: str, dest: Path) -> Path:
    """Writes the example `name` to `dest` (a folder: as NAME.toml in it) and returns the path
    written; never replaces an existing file."""
    content = text(name)
    key = name.removesuffix(_SUFFIX)
    path = dest / f"{key}{_SUFFIX}" if dest.is_dir() else dest
    try:
        with path.open("x", encoding="utf-8") as f:
            f.write(content)
    except FileExistsError:
        raise ExampleError(f"{path}: exists; critmem never replaces a file with an example") from None
    except OSError as e:
        raise ExampleError(f"cannot write {str(path)!r}: {e.strerror or e}") from None
    return path
