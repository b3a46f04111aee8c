"""What the benchmarks' command lines share: the study and scenarios their options name, their
table printed under the options it was measured with, and a bad input's one-line refusal."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Collection
from typing import NoReturn

import polars as pl

from relmas.config import load_config
from relmas.errors import InputError
from relmas.report import markdown_table
from relmas.study import Study

# The default study's loaded scenarios (issue 50): where a scheduler has deadlines to give up.
LOADED = "vision_heavy,bursty,transformer_heavy,mixed_overload,bandwidth_scarce"


def study_scenarios(args: argparse.Namespace) -> tuple[Study, list[str]]:
    """The study of `args.config` and the scenarios of `args.scenarios` (comma-separated; None:
    every configured one), each checked before any is measured (an InputError names
    `--scenarios`)."""
    study = Study(load_config(args.config), args.config)
    names = args.scenarios.split(",") if args.scenarios else list(study.config["scenarios"])
    return study, [study.check_scenario(name, "--scenarios") for name in names]


def print_table(
    args: argparse.Namespace, rows: list[dict], hidden: Collection[str] = ()
) -> pl.DataFrame:
    """The command's options on one line (but the `hidden` ones, e.g. functions), then `rows` as
    a Markdown table; the table."""
    print(" ".join(f"{key} {value}" for key, value in vars(args).items() if key not in hidden))
    table = pl.DataFrame(rows)
    print(markdown_table(table))
    return table


def run(main: Callable[[], int]) -> NoReturn:
    """Exit with `main()`'s code; a bad option or input (InputError) is one line on stderr and
    code 2, not a traceback."""
    try:
        code = main()
    except InputError as error:
        print(error, file=sys.stderr)
        code = 2
    sys.exit(code)
