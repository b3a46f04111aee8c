"""What the benchmarks' command lines share: the study and scenarios their options name, their
table printed under the options it was measured with, and a bad input's one-line refusal."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Collection
from pathlib import Path
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


def add_validated_study(parser: argparse.ArgumentParser) -> None:
    """The options of a benchmark measured against a finished study's choices: its config, cost
    tables, validation rows (`relmas validate`'s files), scenarios and evaluation seeds."""
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--costs", default=None, help="cost tables (default: the study's)")
    parser.add_argument("--validation", type=Path, default=None, help="the study's validation/")
    parser.add_argument("--scenarios", default=LOADED)
    parser.add_argument("--seeds", default=None, help="evaluation seeds, comma-separated")


def validated_study(args: argparse.Namespace, seeds: int | None) -> tuple[Study, list[str]]:
    """`study_scenarios` for the options of `add_validated_study`, with `args.validation` the
    study's own by default and `args.seeds` the first `seeds` of `evaluation.seeds` (None: all)
    unless given."""
    study, scenarios = study_scenarios(args)
    if args.validation is None:
        args.validation = study.paths.validation_dir
    chosen = study.config["evaluation"]["seeds"][:seeds]
    args.seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else chosen
    return study, scenarios


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
