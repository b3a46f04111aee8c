"""Service levels: how far each tenant got from the deadline-hit rate it was promised.

A job with a target (JOB_SCHEMA `target` not null) counts towards one *service group*: the jobs of
its tenant and model ("tenant/model") when the target is the model's own (the tenant's `targets`,
`model_target` true), else all of its tenant's other jobs with a target ("tenant"). A group meets
its target when the fraction of its jobs that met their deadline (dropped jobs count as missed)
reaches it. Over the groups g of a trace of N jobs (docs/simulator.md, "Service levels"):

- targets_met: the groups meeting their target; targets: the number of groups;
- shortfall = sum_g (n_g / N) max(0, target_g - achieved_g): each group's gap weighted by its share
  of the trace's jobs, i.e. the deadlines that would have to be met in addition to reach every
  target, as a fraction of all jobs (a small group's gap of 10 points weighs less than a large
  one's, in proportion to the jobs it would take to close it);
- worst_ratio = min_g achieved_g / target_g, and jain_target = Jain's index of those ratios
  (groups of target 0 are met by any schedule and left out of both).

A trace without targets has no groups, and all these metrics are null.
"""

from __future__ import annotations

import sys

import dataframely as dy
import numpy as np
import polars as pl
from numba import njit

from relmas.hw import jit_cache
from relmas.schemas import column_types, group_key


class ServiceGroups(dy.Schema):
    """One row per service group of a simulation (relmas.sim.result, the evaluation's groups
    file: relmas.report.service.RunGroups)."""

    group = dy.String(primary_key=True)
    tenant = dy.String()
    model = dy.String(nullable=True)  # the model of a per-model target, null for the tenant's own
    jobs = dy.Int64(min=1)
    met = dy.Int64(min=0)
    achieved = dy.Float64(min=0, max=1)
    target = dy.Float64(min=0, max=1)

    @dy.rule()
    def met__at_most_jobs(cls) -> pl.Expr:
        """0 <= met <= jobs"""
        return pl.col("met") <= pl.col("jobs")


GROUP_SCHEMA = column_types(ServiceGroups)

# The summary metrics of the service levels (SUMMARY_SCHEMA columns).
SERVICE_METRICS = ("targets_met", "targets", "shortfall", "worst_ratio", "jain_target")

# A rate counts as reaching its target up to this much below it: float rounding of a target
# written as arithmetic (3 of 10 jobs reach a target of 0.1 x 3 = 0.30000000000000004).
RATE_TOL = 1e-9


def _dropped(jobs: pl.DataFrame) -> pl.Expr:
    """Whether each job of per-job results `jobs` was dropped past its firm deadline (results
    without a `dropped` column have none)."""
    return pl.col("dropped") if "dropped" in jobs.columns else pl.lit(False)


def service_groups(jobs: pl.DataFrame) -> pl.DataFrame:
    """GROUP_SCHEMA rows of per-job results `jobs` (columns tenant, model, target, model_target,
    met, and `dropped` if any), sorted by group."""
    hit = pl.col("met") & ~_dropped(jobs)
    rows = (
        jobs.filter(pl.col("target").is_not_null())
        .with_columns(group=group_key(), hit=hit)
        .group_by("group")
        .agg(
            pl.col("tenant").first(),
            pl.when(pl.col("model_target")).then(pl.col("model")).first().alias("model"),
            pl.len().alias("jobs"),
            pl.col("hit").sum().alias("met"),
            pl.col("target").first(),
        )
        .with_columns(achieved=pl.col("met") / pl.col("jobs"))
    )
    return rows.select(pl.col(name).cast(dtype) for name, dtype in GROUP_SCHEMA.items()).sort(
        "group"
    )


@njit(cache=True)
def shortfall(size: np.ndarray, met: np.ndarray, target: np.ndarray, jobs: int) -> float:
    """The shortfall of groups of `size` jobs of which `met` met their deadline, of `target`s, on
    a trace of `jobs` jobs: sum_g (n_g / N) max(0, target_g - achieved_g). Jitted: the learner's
    reward charges it at the end of an episode (relmas.rl.env), from the same formula."""
    total = 0.0
    for g in range(size.shape[0]):
        achieved = met[g] / size[g]
        # a group that meets its target lacks nothing, also when rounding put it a hair below
        if achieved < target[g] - RATE_TOL:
            total += size[g] / jobs * (target[g] - achieved)
    return total


def service_summary(groups: pl.DataFrame, jobs: int) -> dict[str, float | int | None]:
    """The SERVICE_METRICS of `groups` (service_groups' rows) of a trace of `jobs` jobs."""
    if groups.height == 0:
        return dict.fromkeys(SERVICE_METRICS)
    achieved = groups["achieved"].to_numpy()
    target = groups["target"].to_numpy()
    size, met_jobs = groups["jobs"].to_numpy(), groups["met"].to_numpy()
    met = achieved >= target - RATE_TOL
    ratio = achieved[target > 0] / target[target > 0]
    return {
        "targets_met": int(np.sum(met)),
        "targets": groups.height,
        "shortfall": shortfall(size, met_jobs, target, jobs),
        "worst_ratio": float(ratio.min()) if ratio.size else None,
        "jain_target": jain(ratio) if ratio.size else None,
    }


# Like every cached kernel of relmas, recompiled once after an edit of its sources.
jit_cache.refresh(shortfall, (sys.modules[__name__],), stamp="relmas-sim-service.sha256")


def jain(values: np.ndarray) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all are equal (all zero too), 1/n
    when one has everything."""
    squares = float(np.sum(values**2))
    return float(np.sum(values)) ** 2 / (values.size * squares) if squares > 0 else 1.0
