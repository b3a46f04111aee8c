"""What the benchmarks' command lines share: the study and scenarios their options name, their
table printed under the options it was measured with, and a bad input's one-line refusal."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import polars as pl

from relmas import catalog
from relmas.config import load_config
from relmas.errors import InputError
from relmas.evaluate import best_placed, read_placements
from relmas.io import read_parquet
from relmas.paths import validation_file
from relmas.report import markdown_table
from relmas.report.stats import best_baselines
from relmas.rl.agent import read_agent_info
from relmas.schemas import SummaryRows
from relmas.sim.costs import CostTables
from relmas.sim.system import System
from relmas.study import Study

# `--planned-by` / `--kept-by` naming the rule of the study's agent (`study_choices`)
AGENT_RULE = "agent"
AGENT_POLICY = next(name for name in catalog.learned() if not catalog.entry(name).resizing)
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


@dataclass(frozen=True)
class Choices:
    """What a study chose for one scenario on its validation traces: its best baseline, every
    placed baseline's placement, and the best placed baseline (`rule` at `where`) unless an
    option named another rule@placement or the agent's (AGENT_RULE)."""

    system: System
    tables: CostTables
    best: str
    placements: dict[str, str]
    rule: str
    where: str


def study_agent(study: Study, scenario: str) -> Path:
    """The study's `relmas` agent of `scenario` (the learned policy that does not cut layers)."""
    return study.paths.agent(scenario, AGENT_POLICY)


def study_choices(
    study: Study, scenario: str, args: argparse.Namespace, rule_option: str | None
) -> Choices:
    """`scenario`'s Choices from `args.validation` (`add_validated_study`), its rule replaced by
    `rule_option` when given: RULE@PLACEMENT, or AGENT_RULE for the teacher of the study's
    `relmas` agent of `scenario` at its placement (with its keeper, the rule it gives jobs up
    beside)."""
    path = validation_file(args.validation, scenario)
    system, tables = study.system(scenario), study.costs(scenario, args.costs)
    best, _ = best_baselines(read_parquet(path, SummaryRows))[scenario]
    rule, where = best_placed(path, scenario, tables.types)
    if rule_option == AGENT_RULE:
        agent = study_agent(study, scenario)
        info = read_agent_info(agent)
        if info.teacher is None:
            raise InputError(
                agent,
                "teacher",
                "an agent trained with a teacher (for --planned-by or --kept-by agent)",
            )
        rule, where = info.teacher, info.observation.placement
    elif rule_option:
        rule, where = rule_option.split("@", 1)
    placements = read_placements(path, scenario, tables.types)
    return Choices(system, tables, best, placements, rule, where)


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
