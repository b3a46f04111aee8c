"""What the report reads: the summary rows, the validation rows, the sweep points (each file
checked against its contract, relmas.schemas) and the agents' learning curves."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import dataframely as dy
import polars as pl

from relmas import catalog
from relmas.errors import InputError
from relmas.io import read_parquet
from relmas.paths import agent_dir, sweep_file, validation_file
from relmas.schemas import SUMMARY_SCHEMA, SummaryRows
from relmas.study import evaluation_runs, point_label, sweep_points


class RefusedSummaries(InputError):
    """Several bad summary files: one line for each (file: column of policy, seed: expected)."""

    def __init__(self, errors: Sequence[InputError], files: int) -> None:
        first = errors[0]
        super().__init__(first.file, first.key, first.expected, first.got)
        lines = [f"{len(errors)} of {files} summary files are refused:", *map(str, errors)]
        self.args = ("\n".join(lines),)


def read_summaries(
    paths: Sequence[str | Path], contract: type[dy.Schema] = SummaryRows
) -> list[pl.DataFrame]:
    """Summary rows of every file in `paths`, each checked against its `contract`
    (relmas.schemas.SummaryRows: a NaN SLA rate would rank its policy first, a NaN shortfall
    choose another baseline); every bad file is named, one line each, before any is used."""
    frames, errors = [], []
    for path in paths:
        try:
            frames.append(read_parquet(path, contract))
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
    from relmas.schemas import column_types
    from relmas.sweep import SweepRows

    points = [sweep_file(sweeps_dir, name, point_label(v)) for name, v in sweep_points(config)]
    if not points:
        return pl.DataFrame(schema=column_types(SweepRows))
    frames = read_summaries(points, SweepRows)
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
        reference = info.observation.reference
        title = scenario if catalog.entry(policy).base is None else f"{scenario} ({policy})"
        learning[title] = {
            "policy": policy,
            "curve": read_curve(directory / CURVE),
            "reference": (reference, info.teachers_validation.get(reference, math.nan)),
            "validation": info.validation.get("sla_rate", math.nan),
            "teacher": info.teacher,
            "teacher_validation": info.teachers_validation.get(info.teacher or "", math.nan),
            "share_split": info.validation.get("share_split"),
        }
    return learning
