"""Turning what a caller passes as a scenario into text, a source name and a format."""

from __future__ import annotations

import errno
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias

from critmem._core import ScenarioError

Format: TypeAlias = Literal["toml", "json"]
ScenarioInput: TypeAlias = str | os.PathLike[str] | Mapping[str, Any]
"""A path to a .toml/.json file, TOML text, or the scenario's structure as a dict."""

_SUFFIX_FORMATS: dict[str, Format] = {".toml": "toml", ".json": "json"}
MAX_SCENARIO_BYTES = 16 << 20


@dataclass(frozen=True)
class ScenarioSource:
    text: str
    # Shown in error messages and in the result's "scenario" field.
    name: str
    format: Format
    # A scenario file's directory, where its `file.py:Class` names start (None: the cwd).
    directory: Path | None = None


def looks_like_path(s: str) -> bool:
    """A one-line string is a path when it names something existing, ends in .toml/.json, or
    has no `=` (no one-line TOML without one is a scenario)."""
    if not s or "\n" in s:
        return False
    # os.path.exists is False (not an exception) for NUL bytes or over-long names.
    return Path(s).suffix.lower() in _SUFFIX_FORMATS or os.path.exists(s) or ("=" not in s and not s.lstrip().startswith("{"))


def read_path(path: str | os.PathLike[str]) -> ScenarioSource:
    """Reads a scenario file; OSError (missing, a directory, unreadable) propagates with its name."""
    p = Path(path)
    # A name that is not UTF-8 reaches Python with its stray bytes as surrogates, which
    # cannot be printed or passed on as text: they are shown as U+FFFD.
    name = os.fspath(path).encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    if not name:
        raise FileNotFoundError(errno.ENOENT, "no such file (the name is empty)", name)
    if "\x00" in name:
        # open() would raise ValueError; to a user this is just a file that cannot exist.
        raise FileNotFoundError(errno.ENOENT, "no such file (the name contains a NUL byte)", name)
    if p.is_dir():
        # open() on a directory gives a less helpful message on some platforms.
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a scenario file", name)
    try:
        with p.open("rb") as f:
            # Bounded, so /dev/zero or a runaway pipe gives an error instead of exhausting memory.
            data = f.read(MAX_SCENARIO_BYTES + 1)
    except OSError as e:
        # Some errors (EIO from /proc files, for one) come without the file's name.
        if e.filename is None:
            raise OSError(e.errno, e.strerror, name) from None
        raise
    if len(data) > MAX_SCENARIO_BYTES:
        raise ScenarioError(f"{name}: larger than {MAX_SCENARIO_BYTES // (1 << 20)} MiB, too large for a scenario file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ScenarioError(f"{name}: not UTF-8 text (invalid byte at offset {e.start})") from None
    return ScenarioSource(text, name, _SUFFIX_FORMATS.get(p.suffix.lower(), "toml"), p.parent)


def resolve(scenario: ScenarioInput) -> ScenarioSource:
    """Accepts a path, TOML (or JSON) text, or a dict; see `ScenarioInput`."""
    if isinstance(scenario, Mapping):
        text = json.dumps(_plain(scenario, ""), allow_nan=False)
        return ScenarioSource(text, "<dict>", "json")
    if isinstance(scenario, os.PathLike):
        return read_path(scenario)
    if isinstance(scenario, str):
        if looks_like_path(scenario):
            return read_path(scenario)
        # TOML cannot start with "{", so such text can only be meant as JSON.
        fmt: Format = "json" if scenario.lstrip().startswith("{") else "toml"
        return ScenarioSource(scenario, "<string>", fmt)
    raise TypeError(f"scenario must be a path, TOML text or a dict, not {type(scenario).__name__}")


def _plain(value: Any, key: str) -> Any:
    """`value` as JSON can hold it: numpy scalars and arrays become numbers and lists; a value
    that cannot be a scenario's (NaN, infinity, an object) is a ScenarioError naming its key,
    written as the loader writes keys (`task[0].period_ms`)."""
    if type(value).__module__ == "numpy":
        # Arrays become lists, scalars Python numbers; no numpy import for plain dicts.
        value = value.tolist() if hasattr(value, "shape") and value.shape != () else value.item()
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ScenarioError(f"<dict>: {key or 'top level'}: keys must be strings (got {k!r})")
            out[k] = _plain(v, f"{key}.{k}" if key else k)
        return out
    if isinstance(value, (list, tuple)):
        return [_plain(v, f"{key}[{i}]") for i, v in enumerate(value)]
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ScenarioError(f"<dict>: {key}: must be a finite number (got {value})")
        return value
    raise ScenarioError(f"<dict>: {key}: a {type(value).__name__} cannot be written in a scenario")
