"""The example scenarios that ship with critmem: `critmem examples` lists them and `critmem
examples copy NAME [DEST]` writes one out, so the commands in `--help` work outside a checkout.

They are the files of the checkout's `examples/` folder, packaged as `critmem/_examples/`: its
scenarios (`NAME.toml`, for `critmem run`), the sweep specs in its `sweep/` folder
(`sweep/NAME.toml`, for `critmem sweep`), whose scenarios are those beside the folder
(`scenario = "../quickstart.toml"`): copied into one folder, they keep that layout; and the
policies written in Python, a folder each (`python-controller/NAME.toml` with the `.py` files
its scenario names), copied as a folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

__all__ = ["Example", "ExampleError", "bundled", "copy", "text"]

_SUFFIX = ".toml"
_SWEEP_FOLDER = "sweep"
# Folders of a scenario with the Python policies it names (`python-controller/`).
_POLICY_FOLDER_PREFIX = "python-"


class ExampleError(Exception):
    """An unknown example, or a copy that would replace a file or cannot be written."""


@dataclass(frozen=True)
class Example:
    name: str
    """What `critmem examples copy` takes: the file name without `.toml`."""
    summary: str
    """The file's first comment line."""
    command: str = "run"
    """The command that takes it: `run` for a scenario, `sweep` for a sweep spec."""


def _folder() -> Traversable:
    return resources.files("critmem") / "_examples"


def _tomls(folder: Traversable, prefix: str) -> dict[str, Traversable]:
    if not folder.is_dir():
        return {}
    return {prefix + f.name[: -len(_SUFFIX)]: f for f in folder.iterdir() if f.name.endswith(_SUFFIX) and f.is_file()}


def _policy_folders(folder: Traversable) -> list[Traversable]:
    if not folder.is_dir():
        return []
    return sorted((f for f in folder.iterdir() if f.is_dir() and f.name.startswith(_POLICY_FOLDER_PREFIX)), key=lambda f: f.name)


def _files() -> dict[str, Traversable]:
    """Every example by name: the scenarios, then the sweep specs (`sweep/NAME`), then the
    scenarios of the Python policy folders (`python-controller/NAME`)."""
    folder = _folder()
    scenarios = sorted(_tomls(folder, "").items())
    specs = sorted(_tomls(folder / _SWEEP_FOLDER, f"{_SWEEP_FOLDER}/").items())
    policies = [item for f in _policy_folders(folder) for item in sorted(_tomls(f, f"{f.name}/").items())]
    return dict(scenarios + specs + policies)


def _summary(text: str) -> str:
    first = next((line for line in text.splitlines() if line.strip()), "")
    return first.lstrip("#").strip() if first.lstrip().startswith("#") else ""


def bundled() -> list[Example]:
    """Every bundled example, by name."""
    return [
        Example(name, _summary(f.read_text(encoding="utf-8")), "sweep" if name.startswith(f"{_SWEEP_FOLDER}/") else "run")
        for name, f in _files().items()
    ]


def text(name: str) -> str:
    """The bundled example `name` (with or without `.toml`)."""
    files = _files()
    key = name.removesuffix(_SUFFIX)
    if key not in files:
        known = ", ".join(files) or "none (this installation has no bundled examples)"
        raise ExampleError(f"no bundled example {name!r}; known: {known}")
    return files[key].read_text(encoding="utf-8")


def _write_new(path: Path, content: str) -> None:
    try:
        with path.open("x", encoding="utf-8") as f:
            f.write(content)
    except FileExistsError:
        raise ExampleError(f"{path}: exists; critmem never replaces a file with an example") from None
    except OSError as e:
        raise ExampleError(f"cannot write {str(path)!r}: {e.strerror or e}") from None


def copy(name: str, dest: Path) -> Path:
    """Writes the example `name` to `dest` (a folder: as NAME.toml in it, a sweep spec as
    sweep/NAME.toml, a Python policy's scenario as FOLDER/NAME.toml with the folder's `.py`
    files beside it) and returns the path of the scenario or spec; never replaces an existing
    file."""
    content = text(name)
    key = name.removesuffix(_SUFFIX)
    folder = key.split("/")[0] if "/" in key else None
    if folder is not None and folder.startswith(_POLICY_FOLDER_PREFIX) and not dest.is_dir():
        raise ExampleError(f"{name} comes with the Python files of its folder: copy it to a folder, not to a file name")
    path = dest / f"{key}{_SUFFIX}" if dest.is_dir() else dest
    if dest.is_dir() and path.parent != dest:
        try:
            path.parent.mkdir(exist_ok=True)  # sweep/, so the spec's ../SCENARIO.toml is beside it
        except OSError as e:
            raise ExampleError(f"cannot make the folder {str(path.parent)!r}: {e.strerror or e}") from None
    _write_new(path, content)
    if folder is not None and folder.startswith(_POLICY_FOLDER_PREFIX):
        for source in sorted((_folder() / folder).iterdir(), key=lambda f: f.name):
            if source.name.endswith(".py") and source.is_file() and not (path.parent / source.name).exists():
                _write_new(path.parent / source.name, source.read_text(encoding="utf-8"))
    return path
