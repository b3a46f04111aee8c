"""What the report reads: the summary rows, the validation rows, the sweep points (each file
checked: schema, finite values, rates in [0, 1]) and the agents' learning curves."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from relmas import catalog
from relmas.ceiling.rows import CEILING
from relmas.errors import InputError
from relmas.io import read_parquet
from relmas.paths import agent_dir, sweep_file, validation_file
from relmas.schemas import SUMMARY_SCHEMA
from relmas.study import evaluation_runs, point_label, sweep_points

# What each contract column of a summary row may hold (docs/design.md, "Summary row"): the
# report ranks and divides by these values, so a file with any other (a NaN SLA rate would rank
# its policy first) is refused rather than reported.
BOUNDS: dict[str, tuple[float, float, str]] = {
    "seed": (0, math.inf, "a seed ≥ 0"),
    "jobs": (1, math.inf, "a count ≥ 1"),
    **dict.fromkeys(("sla_rate", "fairness", "utilization"), (0, 1, "a finite rate in [0, 1]")),
    **dict.fromkeys(
        ("antt", "stp", "energy_j", "makespan_s", "decision_us"),
        (0, math.inf, "a finite value ≥ 0"),
    ),
}


# The columns a reference row (the ceiling of a trace) has of BOUNDS.
REFERENCE_COLUMNS = ("seed", "jobs", "sla_rate")


class RefusedSummaries(InputError):
    """Several bad summary files: one line for each (file: column of policy, seed: expected)."""

    def __init__(self, errors: Sequence[InputError], files: int) -> None:
        first = errors[0]
        super().__init__(first.file, first.key, first.expected, first.got)
        lines = [f"{len(errors)} of {files} summary files are refused:", *map(str, errors)]
        self.args = ("\n".join(lines),)


def check_summary(frame: pl.DataFrame, path: str | Path) -> None:
    """Refuse `frame`, read from `path`, at its first value outside BOUNDS: an InputError naming
    the column and the row's policy and seed. A ceiling row (a sweep point's, `kind` ceiling) has
    only a seed, a job count and an SLA rate to check."""
    ceiling = pl.col("kind").eq_missing(CEILING) if "kind" in frame.columns else pl.lit(False)
    for column, (low, high, expected) in BOUNDS.items():
        values = pl.col(column)
        bad = values.is_null() | ~values.is_between(low, high)
        if frame.schema[column].is_float():
            bad = bad | ~values.is_finite()
        bad = bad.fill_null(True)
        rows = frame.filter(bad if column in REFERENCE_COLUMNS else bad & ~ceiling)
        if rows.height:
            row = rows.row(0, named=True)
            value = "null" if row[column] is None else row[column]
            key = f"{column} of policy {row['policy']}, seed {row['seed']}"
            raise InputError(path, key, expected, value)


def read_summaries(
    paths: Sequence[str | Path], schema: Mapping[str, pl.DataType] = SUMMARY_SCHEMA
) -> list[pl.DataFrame]:
    """Summary rows of every file in `paths` (`schema`'s columns at least, each checked by
    check_summary); every bad file is named, one line each, before any is used."""
    frames, errors = [], []
    for path in paths:
        try:
            frame = read_parquet(path, schema)
            check_summary(frame, path)
            frames.append(frame)
        except InputError as error:
            errors.append(error)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise RefusedSummaries(errors, len(paths))
    return frames


def collect_summaries(paths: Sequence[str | Path]) -> pl.DataFrame:
    """All one-row summaries in one frame (contract columns first), sorted for stable output."""
    summary = pl.concat(read_summaries(paths), how="diagonal_relaxed")
    ordered = list(SUMMARY_SCHEMA) + [c for c in summary.columns if c not in SUMMARY_SCHEMA]
    return summary.select(ordered).sort(
        "scenario", "policy", "agent_scenario", "seed", nulls_last=True
    )


def read_validation(validation_dir: Path, scenarios: Sequence[str]) -> pl.DataFrame:
    """The baselines' summary rows on each scenario's validation traces (`relmas validate`)."""
    frames = read_summaries([validation_file(validation_dir, s) for s in scenarios])
    return pl.concat([f.select(list(SUMMARY_SCHEMA)) for f in frames])


def collect_sweeps(config: Mapping[str, Any], sweeps_dir: Path) -> pl.DataFrame:
    """The rows of every configured sweep point (`relmas sweep` outputs: the policies' rows and
    each trace's ceiling, told apart by `kind`) in one frame; empty without sweeps."""
    from relmas.sweep import SWEEP_COLUMNS

    schema = dict(SUMMARY_SCHEMA) | SWEEP_COLUMNS
    points = [sweep_file(sweeps_dir, name, point_label(v)) for name, v in sweep_points(config)]
    if not points:
        return pl.DataFrame(schema=schema)
    frames = read_summaries(points, schema)
    return pl.concat(frames, how="diagonal_relaxed").sort("sweep", "value", "policy", "seed")


def read_learning(config: Mapping[str, Any], agents_dir: Path) -> dict[str, dict[str, Any]]:
    """Per evaluated agent (titled by scenario, and policy if not relmas): its learning curve,
    its best validation SLA rate, the best heuristic on its validation traces and its teacher."""
    from relmas.rl.agent import read_agent_info
    from relmas.rl.curve import CURVE, read_curve

    learning = {}
    for scenario, policy in evaluation_runs(config):
        if policy not in catalog.learned():
            continue
        directory = agent_dir(agents_dir, scenario, policy)
        info = read_agent_info(directory)
        rates = info.heuristics_validation  # agent.json's keys are sorted by name: ties by catalog
        heuristic = max(sorted(rates, key=catalog.position), key=rates.__getitem__)
        title = scenario if catalog.entry(policy).base is None else f"{scenario} ({policy})"
        learning[title] = {
            "policy": policy,
            "curve": read_curve(directory / CURVE),
            "best_heuristic": (heuristic, info.heuristics_validation[heuristic]),
            "validation": info.validation.get("sla_rate", math.nan),
            "teacher": info.teacher,
            "teacher_validation": info.rules_validation.get(info.teacher or "", math.nan),
            "share_split": info.validation.get("share_split"),
        }
    return learning
