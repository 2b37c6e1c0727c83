"""Argument types: each parses one command-line value or says in one line why it cannot."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

_U64_MAX = 2**64 - 1


def seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 <= value <= _U64_MAX:
        raise argparse.ArgumentTypeError(f"must be between 0 and 2**64 - 1 (got {text})")
    return value


def gantt_window(text: str) -> tuple[float, float]:
    start, sep, end = text.partition(":")
    try:
        window = (float(start), float(end))
    except ValueError:
        window = (math.nan, math.nan)
    if not sep or not all(math.isfinite(x) for x in window) or not 0 <= window[0] < window[1]:
        raise argparse.ArgumentTypeError(f"expected START:END in ms with 0 <= START < END (got {text!r})")
    return window


def out_dir(text: str) -> str:
    # An empty name would silently mean the current directory.
    if not text:
        raise argparse.ArgumentTypeError("must name a folder (got an empty string)")
    return text


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argument type for whole numbers from `minimum` up."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum} (got {text})")
        return value

    return parse


def sara_pair(text: str) -> tuple[str, str]:
    """`SRT+NRT`: a soft real-time app and a non-real-time app of `critmem reproduce sara --platform linux`."""
    from critmem.reproduce.sara.machine import parse_pair

    try:
        return parse_pair(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def scheduler_address(text: str) -> str:
    # Dask names its schedulers by URL; a bare host:port would be read as something else.
    if "://" not in text or not text.split("://", 1)[1]:
        raise argparse.ArgumentTypeError(f"must be a scheduler address like tcp://HOST:PORT (got {text!r})")
    return text


def _positive(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive {what.removeprefix('a ')} (got {text})")
    return value


def positive_number(text: str) -> float:
    return _positive(text, "a number")


def positive_ms(text: str) -> float:
    return _positive(text, "a number of milliseconds")
