"""The sweep's cache on disk: one JSON file per result, so a cache folder holds data only and
reading one back runs no code (a folder shared with others, or copied from elsewhere, is safe
to resume from).

A result is plain data (None, bools, ints, floats, strings, lists, tuples and dicts) and reads
back exactly as it was stored, types included: JSON carries what it cannot say by itself under a
tag, an object of one key starting with `$`:

- a tuple is `{"$tuple": [...]}`;
- a float that is not finite is `{"$float": "nan"}` (or `"inf"`, `"-inf"`);
- a dict with a key that is not a string, or that starts with `$`, is
  `{"$dict": [[key, value], ...]}`;
- a numpy number (what pandas' and numpy's reductions return) is `{"$numpy": ["float64",
  "0.25"]}`: its type's name, one of a fixed set of bools, integers and floats, and its value.

Anything else (a dataclass, a numpy array, a subclass of a plain type) is refused when stored,
naming where it sits in the result. An entry that does not decode (cut short, edited, written
by something else) is a miss: the result is computed again and the entry replaced.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["CacheError", "ResultCache", "decode", "encode"]

_TUPLE, _FLOAT, _DICT, _NUMPY = "$tuple", "$float", "$dict", "$numpy"
# The numpy scalar types a result may hold, by name: built from the name alone, nothing else.
_NUMPY_TYPES = frozenset(
    ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64"]
)
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
_SUFFIX = ".json"


class CacheError(ValueError):
    """A result the cache cannot store: it holds something other than plain data."""


def encode(value: Any) -> Any:
    """`value` as JSON-able data that `decode` turns back into an equal value of the same types;
    CacheError naming the part (`[...]` from the top) that is not plain data."""
    try:
        return _encode(value)
    except _Unstorable as e:
        t = type(e.value)
        where = "the result" + "".join(reversed(e.path))
        raise CacheError(
            f"{where} is a {t.__module__}.{t.__qualname__}; a cached result holds only None, bools, ints, floats, strings, "
            "lists, tuples and dicts"
        ) from None


class _Unstorable(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value
        self.path: list[str] = []  # innermost first, filled in as the recursion unwinds


def _encode(value: Any) -> Any:
    t = type(value)
    if value is None or t is bool or t is int or t is str:
        return value
    if t is float:
        return value if math.isfinite(value) else {_FLOAT: repr(value)}
    if t is list or t is tuple:
        out = []
        for i, v in enumerate(value):
            try:
                out.append(_encode(v))
            except _Unstorable as e:
                e.path.append(f"[{i}]")
                raise
        return out if t is list else {_TUPLE: out}
    if t is dict:
        plain = all(type(k) is str and not k.startswith("$") for k in value)
        pairs = []
        for k, v in value.items():
            try:
                pairs.append((k if plain else _encode(k), _encode(v)))
            except _Unstorable as e:
                e.path.append(f"[{k!r}]")
                raise
        return dict(pairs) if plain else {_DICT: [list(p) for p in pairs]}
    if t.__module__ == "numpy" and t.__name__ in _NUMPY_TYPES:
        kind = value.dtype.kind
        # repr of the float64 a smaller float widens to reads back to the same bits.
        text = value.item() if kind in "biu" else repr(float(value))
        return {_NUMPY: [t.__name__, text]}
    raise _Unstorable(value)


def decode(data: Any) -> Any:
    """The value `encode` made `data` from; ValueError for data it cannot have made."""
    if isinstance(data, list):
        return [decode(v) for v in data]
    if not isinstance(data, dict):
        return data
    tags = [k for k in data if k.startswith("$")]
    if not tags:
        return {k: decode(v) for k, v in data.items()}
    if len(data) != 1:
        raise ValueError(f"{tags[0]} beside other keys")
    ((tag, body),) = data.items()
    if tag == _TUPLE and isinstance(body, list):
        return tuple(decode(v) for v in body)
    if tag == _FLOAT and isinstance(body, str) and body in _NON_FINITE:
        return _NON_FINITE[body]
    if tag == _DICT and isinstance(body, list) and all(isinstance(p, list) and len(p) == 2 for p in body):
        out = {}
        for k, v in body:
            key = decode(k)
            if isinstance(key, (list, dict)):  # not hashable: the entry is not one encode wrote
                raise ValueError(f"a {type(key).__name__} as a dict key")  # noqa: TRY004 — a bad entry, like the others
            out[key] = decode(v)
        return out
    if tag == _NUMPY and isinstance(body, list) and len(body) == 2 and body[0] in _NUMPY_TYPES:
        import numpy as np

        name, text = body
        kind = np.dtype(name).kind
        if (kind == "b" and type(text) is not bool) or (kind in "iu" and type(text) is not int) or (kind == "f" and type(text) is not str):
            raise ValueError(f"{name} {text!r}")
        return np.dtype(name).type(float(text) if kind == "f" else text)
    raise ValueError(f"not a tag of the sweep cache: {tag}")


@functools.cache
def _umask() -> int:
    """This process's umask, read without setting it (os.umask would change it for a moment,
    under every thread's feet)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def _refuse_constant(name: str) -> Any:
    # encode writes non-finite floats under a tag; a bare NaN was not written by it.
    raise ValueError(f"bare {name}")


class ResultCache:
    """Results stored one JSON file per key under `directory/<fingerprint>/`; the folders of
    other fingerprints (other versions of the code) are removed when the cache is opened.
    Raises OSError for a folder that cannot be used."""

    def __init__(self, directory: Path, fingerprint: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for old in directory.iterdir():
            if old.is_dir() and old.name != fingerprint:
                shutil.rmtree(old)
        self.directory = directory / fingerprint
        self.directory.mkdir(exist_ok=True)

    def path(self, key: str) -> Path:
        return self.directory / f"{key}{_SUFFIX}"

    def get(self, key: str) -> tuple[bool, Any]:
        """(True, the result) if the entry of `key` is there and decodes, else (False, None)."""
        try:
            text = self.path(key).read_text(encoding="utf-8")
            entry = json.loads(text, parse_constant=_refuse_constant)
            if not isinstance(entry, dict) or set(entry) != {"key", "result"} or entry["key"] != key:
                return False, None
            return True, decode(entry["result"])
        except (OSError, UnicodeDecodeError, ValueError, OverflowError, RecursionError):
            return False, None  # missing or unreadable: computed again and replaced

    def put(self, key: str, value: Any) -> None:
        """Stores `value` under `key`; CacheError if it is not plain data."""
        # The key is stored too: an entry renamed or copied under another key is not taken.
        text = json.dumps({"key": key, "result": encode(value)}, allow_nan=False, separators=(",", ":"))
        # Written whole, then renamed: an interrupted write never leaves a partial entry.
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=f".{key}.", suffix=".tmp")
        try:
            # mkstemp makes the file private; an entry is as readable as any file this process
            # writes, so a cache folder can be shared.
            os.fchmod(fd, 0o666 & ~_umask())
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, self.path(key))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
