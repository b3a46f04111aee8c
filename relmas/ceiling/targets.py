"""Can the service targets all be met? The ceiling's relaxation with one count per service group.

A service group g (the jobs of a tenant, or of a tenant and model, that carry target t_g) meets
its target when met_g >= t_g n_g. The relaxation of relmas.ceiling.bound (x_j: job j counted as
met; chains, window capacities, bandwidth) gets a shortfall column s_g >= 0 per group and the rows

    s_g + sum_{j in g} x_j >= need_g                          need_g = t_g n_g (`_needs`)
    s_g + (1 - frac_g) sum_{j in g} x_j >= (1 - frac_g) c_g   c_g = need_g + frac_g, an integer

and minimises sum_g s_g, where c_g is the least met_g that reaches the target. Every engine
schedule, with x_j its met flags and s_g = max(0, need_g - met_g), is a feasible point
(docs/ceiling.md, "Can the targets be met?"), so the LP's minimum is a lower bound on every
schedule's total shortfall in jobs; the second row holds because met_g is an integer, and it makes
the minimum positive exactly when some group cannot reach c_g in the LP. The bound reported is
the weak-duality certificate of the solver's duals, as for the ceiling: a certificate above 0
proves the targets unreachable; anything else proves nothing (the relaxation is looser than the
engine)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import polars as pl

from relmas.ceiling.bound import Relaxation, WindowCounts, check_time_limit, solve_by_separation
from relmas.ceiling.instance import Instance
from relmas.schemas import group_key, with_job_defaults
from relmas.sim.service import RATE_TOL

# Certificates within this many jobs of 0 prove nothing (the LP's own float error is far below).
_MARGIN = 1e-6

UNREACHABLE, NOT_PROVEN = "unreachable", "not proven"


@dataclass(frozen=True)
class Shortfall:
    """The proven lower bound on the service groups' total shortfall on one trace."""

    jobs: float  # sum_g max(0, t_g n_g - met_g) of every schedule is at least this
    shortfall: float  # jobs / the trace's jobs: a lower bound on the `shortfall` metric
    groups: int
    reachable: str  # UNREACHABLE (proven) or NOT_PROVEN
    # as Bound.status: converged, time_limit, "solver: ..." (all proven)
    status: str
    rounds: int
    windows: int
    seconds: float


def has_targets(jobs: pl.DataFrame) -> bool:
    """Whether any job of the trace `jobs` carries a target (a trace without has no groups)."""
    return "target" in jobs.columns and jobs["target"].is_not_null().any()


def _groups(instance: Instance, jobs: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Each job's service group in `instance`'s job order (-1: no target), and each group's
    target: the groups of relmas.sim.service (a trace's contract, relmas.schemas.JobTrace, has
    one target per group)."""
    keyed = with_job_defaults(jobs).select("job_id", "target", group=group_key())
    targets = (
        keyed.drop_nulls("group").group_by("group").agg(pl.col("target").first()).sort("group")
    )
    names = targets["group"].to_list()
    index = dict(zip(keyed["job_id"], keyed["group"], strict=True))
    position = {name: g for g, name in enumerate(names)}
    group = [position.get(index[j], -1) for j in instance.job_id.tolist()]
    return np.array(group, dtype=np.int64), targets["target"].to_numpy().astype(np.float64)


def _needs(
    target: np.ndarray, size: np.ndarray, met: np.ndarray | float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Per group of `size` jobs with `met` of them met already: the deadlines still to meet that
    reach its target (c_g: the least met_g whose rate is at least t_g - RATE_TOL, as
    service_summary counts a target met, less those met) and need_g = min(t_g n_g - met, c_g),
    the shortfall in jobs when no more is met (at most the metric's: a lower bound)."""
    count = np.maximum(np.ceil(size * (target - RATE_TOL)) - met, 0.0)
    return count, np.clip(target * size - met, 0.0, count)


def _group_rows(
    instance: Instance,
    threads: int,
    group: np.ndarray,
    count: np.ndarray,
    need: np.ndarray,
    counted: np.ndarray | None = None,
) -> Relaxation:
    """The ceiling's relaxation of `instance` with a shortfall column per group that can fall
    short (count_g > 0) and its rows (the module's docstring); no objective set."""
    active = np.nonzero(count > 0)[0]
    lp = Relaxation(instance, threads, counted=counted, extra_upper=need[active])
    lower_rows, upper_rows, cols, vals = [], [], [], []
    for column, g in enumerate(active.tolist(), start=lp.extra_start):
        members = np.nonzero(group == g)[0]
        frac = count[g] - need[g]
        rows = [(1.0, need[g])] + ([(1.0 - frac, (1.0 - frac) * count[g])] if frac > 0 else [])
        for weight, least in rows:
            lower_rows.append(least)
            upper_rows.append(np.inf)
            cols.append(np.append(members, column))
            vals.append(np.append(np.full(members.size, weight), 1.0))
    if cols:
        lp.add_rows(lower_rows, upper_rows, cols, vals)
    return lp


def shortfall_bound(
    instance: Instance,
    jobs: pl.DataFrame,
    *,
    time_limit_s: float,
    threads: int = 1,
    per_round: int = 200,
    counts: bool = True,
) -> Shortfall:
    """The proven lower bound on the total shortfall of the service groups of the trace `jobs`
    (`instance` is its Instance), and whether their targets are proven unreachable
    (docs/ceiling.md, "Can the targets be met?"); `counts`: with the ceiling's count rows."""
    check_time_limit(time_limit_s)
    started = time.perf_counter()
    group, target = _groups(instance, jobs)
    size = np.bincount(group[group >= 0], minlength=target.size).astype(np.float64)
    count, need = _needs(target, size)
    # Groups whose target every schedule reaches (none met is enough) add nothing.
    lp = _group_rows(instance, threads, group, count, need, counted=group >= 0)
    # Without the LP: a group meets at most its jobs that fit between arrival and deadline alone.
    fits = np.bincount(
        group[group >= 0], weights=lp.upper[: instance.n_jobs][group >= 0], minlength=target.size
    )
    lower = float(np.maximum(need - fits, 0.0).sum())
    cost = np.zeros(lp.columns)
    cost[lp.extra_start :] = 1.0
    lp.minimise(cost)
    solved = solve_by_separation(
        lp,
        lower,
        started=started,
        time_limit_s=time_limit_s,
        per_round=per_round,
        counts=WindowCounts(lp) if counts else None,
    )
    jobs = max(0.0, solved.lower - _MARGIN)
    return Shortfall(
        jobs=jobs,
        shortfall=jobs / instance.n_jobs,
        groups=int(target.size),
        reachable=UNREACHABLE if jobs > 0 else NOT_PROVEN,
        status=solved.status,
        rounds=solved.rounds,
        windows=solved.windows,
        seconds=time.perf_counter() - started,
    )


def served_for_targets(
    instance: Instance,
    group: np.ndarray,
    target: np.ndarray,
    decided: np.ndarray,
    met: np.ndarray,
    *,
    time_limit_s: float,
    threads: int = 1,
    per_round: int = 200,
) -> np.ndarray:
    """x_j of the relaxation that leaves the service groups least short, then meets the most
    deadlines: the planner's labels where jobs carry targets (relmas.policies.planner.served).

    `instance` holds the jobs not yet decided (`group`: each one's group, -1 without a target);
    each group g has `decided[g]` jobs decided so far, `met[g]` of them met, and `target[g]`.
    Its shortfall column s_g counts the deadlines it misses of its target over its decided jobs
    and these, and costs more than every job together, so that the LP serves a job of a group
    with a cushion only where that costs no group its target."""
    check_time_limit(time_limit_s)
    started = time.perf_counter()
    size = decided + np.bincount(group[group >= 0], minlength=target.size)
    count, need = _needs(target, size.astype(np.float64), met)
    lp = _group_rows(instance, threads, group, count, need)
    n = instance.n_jobs
    cost = np.zeros(lp.columns)
    cost[:n] = -1.0
    cost[lp.extra_start :] = n + 1.0
    lp.minimise(cost)
    solved = solve_by_separation(
        lp,
        -float(np.count_nonzero(lp.upper[:n])),
        started=started,
        time_limit_s=time_limit_s,
        per_round=per_round,
        counts=WindowCounts(lp),
    )
    if solved.solution is None:
        return np.zeros(n)
    return np.clip(solved.solution[:n], 0.0, 1.0)
