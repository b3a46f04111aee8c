"""Command-line values: the parser and value types of `relmas` and of the benchmark scripts.

A bad option value (a negative time limit, a NaN load, a seed as text) is then one usage line with
exit status 2, like every other bad input, never a traceback from deep inside a solver.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TypeVar

SEED_MAX = 2**32 - 1  # numpy's SeedSequence takes any non-negative int; traces name it in paths

T = TypeVar("T", int, float)


class Parser(argparse.ArgumentParser):
    """argparse with its usage errors on one line (exit 2), like every other bad input."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


def _value(text: str, kind: Callable[[str], T], valid: Callable[[T], bool], expected: str) -> T:
    """`text` as `kind` if `valid`, else argparse's usage error `expected ..., got ...`."""
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or not valid(value):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def seed(text: str) -> int:
    """A random seed: an integer in [0, SEED_MAX]."""
    return _value(text, int, lambda v: 0 <= v <= SEED_MAX, f"a seed in [0, {SEED_MAX}]")


def finite(text: str) -> float:
    """A finite number (not nan, not inf)."""
    return _value(text, float, math.isfinite, "a finite number")


def positive(text: str) -> float:
    """A finite number > 0 (a time limit, a load)."""
    return _value(text, float, lambda v: math.isfinite(v) and v > 0, "a finite number > 0")


def positive_or_inf(text: str) -> float:
    """A number > 0, inf allowed (a horizon: to the end)."""
    return _value(text, float, lambda v: v > 0, "a number > 0 (or inf)")  # nan is not > 0


def positive_int(text: str) -> int:
    """An integer > 0 (a count of jobs, traces, repeats)."""
    return _value(text, int, lambda v: v > 0, "an integer > 0")


def count(text: str) -> int:
    """An integer >= 0 (generations, of which none is a valid number)."""
    return _value(text, int, lambda v: v >= 0, "an integer >= 0")
