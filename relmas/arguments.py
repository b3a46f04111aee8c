"""Command-line values: the parser and value types of `relmas` and of the benchmark scripts.

A bad option value (a negative time limit, a NaN load, a seed as text) is then one usage line with
exit status 2, like every other bad input, never a traceback from deep inside a solver.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable, Sequence
from typing import TypeVar

SEED_MAX = 2**32 - 1  # numpy's SeedSequence takes any non-negative int; traces name it in paths
NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse's: a value, not an option

T = TypeVar("T", int, float)


class Parser(argparse.ArgumentParser):
    """argparse with its usage errors on one line (exit 2), like every other bad input, and an
    unknown option named first: argparse reports it only once the rest parsed, so `relmas
    --versio` was answered "the following arguments are required: command"."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        given = list(sys.argv[1:] if args is None else args)
        unknown = self._unknown_option(given)
        if unknown is not None:
            self.error(f"unrecognized option {unknown}")
        return super().parse_known_args(given, namespace)

    def _unknown_option(self, args: list[str]) -> str | None:
        """The first argument this parser reads itself that argparse takes for an option (a
        leading `-`, no space, no negative number) and that is no option of it (`--name=value`
        and `-xVALUE` included) nor abbreviates one (argparse reports an ambiguous abbreviation).
        A parser reads up to `--` and, with subcommands, up to the first argument that is no
        option (the subcommand's parser reads the rest); the argument after an option that takes
        one value is that value (argparse: "expected one argument")."""
        own = args[: args.index("--")] if "--" in args else args
        if self._subparsers is not None:
            own = own[: next((i for i, arg in enumerate(own) if arg[:1] != "-"), len(own))]
        actions = {option: action for action in self._actions for option in action.option_strings}
        value = False
        for arg in own:
            if value or arg[:1] != "-" or arg == "-" or " " in arg or NEGATIVE_NUMBER.match(arg):
                value = False
                continue
            name = arg.split("=", 1)[0]
            matches = [option for option in actions if option == name]
            if not matches and self.allow_abbrev and name.startswith("--"):
                matches = [option for option in actions if option.startswith(name)]
            if not matches and arg[:2] not in actions:
                return arg
            value = name == arg and len(matches) == 1 and actions[matches[0]].nargs is None
        return None


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


def share(text: str) -> float:
    """A share in (0, 1] (of the DRAM bandwidth)."""
    return _value(text, float, lambda v: 0 < v <= 1, "a number in (0, 1]")  # nan is not > 0


def rate(text: str) -> float:
    """A rate in [0, 1] (a service target)."""
    return _value(text, float, lambda v: 0 <= v <= 1, "a rate in [0, 1]")


def listed(kind: Callable[[str], T]) -> Callable[[str], list[T]]:
    """Comma-separated values of `kind` (one of the types above: a bad one is its usage line)."""

    def values(text: str) -> list[T]:
        return [kind(part) for part in text.split(",")]

    return values
