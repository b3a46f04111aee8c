"""A lower side that searches: windows of a whole trace's schedule re-solved by CP-SAT.

The LP's jobs served (relmas.ceiling.admission) are run by a rule, so they are only as good as
the schedules some rule makes. This large-neighbourhood search starts from such a schedule (an
engine run of the whole trace, recorded) and frees a *window*: a job that misses its deadline
and could meet it alone, with the jobs it competes with (those whose tasks run longest between
its arrival and its deadline). Every other on-time job keeps its tasks where the engine ran them;
the window's jobs are planned anew by CP-SAT on what those tasks leave: each instance's free
time, and the bandwidth the engine's recorded rates leave, each task at its alone latency (the
exact search's restriction, relmas.ceiling.exact, around a fixed rest), at least one more of the
window's deadlines met than now. Where that is infeasible, the window is planned again on the
instances alone (the engine shares the bandwidth; the restriction never lets tasks demand more
than it). The merged plan is replayed in the engine (relmas.ceiling.plan_replay: the rest's tasks
no earlier than the engine ran them, the window's as soon as the tasks planned to end before
them have) and kept only when the replay meets more deadlines on the whole trace: the models
propose, the engine counts. Jobs that miss are replayed after every planned task, so a kept plan
may give up a job that met (when that lets two meet) and serve one that was left out.

A window that CP-SAT proves cannot meet one more even on the instances alone (INFEASIBLE) is
*closed*: around the rest as the engine ran it, no schedule of its jobs meets more. A pass
re-solves every window; the search stops when a pass keeps nothing (converged when it closed
every window) or its time is up. docs/ceiling.md, "The window search", has the figures.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from ortools.sat.python import cp_model

from relmas.ceiling.exact import BANDWIDTH_UNITS, time_margin
from relmas.ceiling.instance import Instance
from relmas.ceiling.plan import Plan, Schedule, Task, recorded
from relmas.ceiling.plan_replay import PlanReplay
from relmas.sim.costs import CostTables
from relmas.sim.system import System

# A window's grid step: this share of its jobs' least mean layer time (so that rounding each of
# a chain's dozens of layers up to the grid costs about that share of it), unless that makes more
# than MAX_TICKS steps over the window's span (a coarser grid solves faster).
ROUNDING = 0.01
MAX_TICKS = 2**22
# The fixed tasks' bandwidth is rounded up to a multiple of 1/LEVELS of the capacity: thousands
# of rate changes become far fewer steps (a cumulative's propagation scans every one).
LEVELS = 8


@dataclass(frozen=True)
class Searched:
    """What the window search did: the best `schedule` (`met` on the whole trace, replayed),
    windows re-solved, kept (the replay met more), closed (CP-SAT proved none more, even on the
    instances alone), passes, and whether it converged (a last pass that kept nothing and closed
    every window)."""

    schedule: Schedule
    windows: int
    kept: int
    closed: int
    tight: int  # windows the restriction proved none more for, with the bandwidth shared
    passes: int
    converged: bool
    seconds: float

    @property
    def met(self) -> int:
        return self.schedule.met


def windows(
    whole: Instance, schedule: Schedule, size: int, shares: np.ndarray | None = None
) -> list[np.ndarray]:
    """The windows worth re-solving, one per late job that could meet its deadline alone (the
    others cannot meet more), the LP's surest first (`shares`, its x_j, when given), then by
    arrival: the job and the `size` - 1 others whose tasks run longest between its arrival and
    its deadline (those it competes with for instances and bandwidth; then those arriving
    nearest it), sorted; each window once."""
    plan = schedule.plan
    chance = whole.arrival_s + _shortest_chain_s(whole) <= whole.deadline_s
    job = np.array([task.job for task in plan.tasks], dtype=np.int64)
    start = np.array([task.start_s for task in plan.tasks])
    end = np.array([task.end_s for task in plan.tasks])
    late = np.flatnonzero(chance & ~plan.on_time)
    if shares is not None:
        late = late[np.argsort(-shares[late], kind="stable")]
    out: dict[tuple[int, ...], np.ndarray] = {}
    for one in late.tolist():
        lo, hi = whole.arrival_s[one], whole.deadline_s[one]
        overlap = np.clip(np.minimum(end, hi) - np.maximum(start, lo), 0.0, None)
        held = np.bincount(job, weights=overlap, minlength=whole.n_jobs)
        held[one] = -1.0
        near = np.abs(whole.arrival_s - lo)
        others = np.lexsort((near, -held))[: size - 1]
        window = np.sort(np.r_[one, others])
        out.setdefault(tuple(window.tolist()), window)
    return list(out.values())


def search_windows(
    system: System,
    tables: CostTables,
    jobs: pl.DataFrame,
    start: Schedule,
    *,
    window_jobs: int,
    time_limit_s: float,
    budget_s: float,
    shares: np.ndarray | None = None,
    threads: int = 1,
) -> Searched:
    """The window search from `start` (a recorded run of `jobs`): windows of `window_jobs` jobs
    (`windows`, the LP's `shares` ordering them), at most `time_limit_s` of CP-SAT (`threads`
    workers) per model, passes while one keeps a plan and `budget_s` seconds last (a window
    started within them ends its solves within them; its replay may run over)."""
    if window_jobs < 1 or not time_limit_s > 0 or not budget_s >= 0:
        raise ValueError("window_jobs >= 1, time_limit_s > 0 and budget_s >= 0 expected")
    started = time.perf_counter()

    def limit() -> float:  # CP-SAT's seconds for the next model: what is left, at most its own
        return max(min(time_limit_s, budget_s - (time.perf_counter() - started)), 1e-3)

    whole = Instance.of(system, tables, jobs)
    best, solved, kept, closed, tight, passes, converged = start, 0, 0, 0, 0, 0, False
    while time.perf_counter() - started < budget_s:
        passes += 1
        tried, closed_here, kept_here = windows(whole, best, window_jobs, shares), 0, 0
        for window in tried:
            if time.perf_counter() - started >= budget_s:
                break
            plan, status = _resolve(whole, best, window, limit(), threads)
            if status == cp_model.INFEASIBLE and whole.dram_gbps is not None:
                tight += 1
                plan, status = _resolve(whole, best, window, limit(), threads, shared=False)
            solved += 1
            closed_here += status == cp_model.INFEASIBLE
            if plan is None:
                continue
            candidate = recorded(system, tables, jobs, whole, PlanReplay(plan))
            if candidate.met > best.met:
                best, kept_here = candidate, kept_here + 1
        kept, closed = kept + kept_here, closed + closed_here
        if kept_here == 0:
            converged = closed_here == len(tried)  # every window closed: nothing more here
            break
    seconds = time.perf_counter() - started
    return Searched(best, solved, kept, closed, tight, passes, converged, seconds)


def configured_search(
    system: System,
    tables: CostTables,
    jobs: pl.DataFrame,
    start: Schedule,
    shares: np.ndarray,
    options: Mapping[str, Any],
    budget_s: float | None = None,
) -> Searched:
    """`search_windows` with the `evaluation.ceiling` `options` (`search_window_jobs`,
    `search_window_s`, `threads`, and `search_s` unless `budget_s` is given): the bound stage's
    search, and a benchmark's with more time."""
    return search_windows(
        system,
        tables,
        jobs,
        start,
        window_jobs=options["search_window_jobs"],
        time_limit_s=options["search_window_s"],
        budget_s=options["search_s"] if budget_s is None else budget_s,
        shares=shares,
        threads=options["threads"],
    )


def _shortest_chain_s(whole: Instance) -> np.ndarray:
    """Per job, its layers one after another each on its quickest type, alone."""
    quickest = whole.alone_s.min(axis=1)
    return np.add.reduceat(quickest, whole.first_op[:-1])


@dataclass(frozen=True)
class _Grid:
    """A window's integer times: tick k is `origin_s` + k x `tick_s` on the engine's clock; `eps`
    the exact search's margin for float rounding (exact.time_margin)."""

    origin_s: float
    tick_s: float
    eps: float
    end: int  # the horizon's last tick

    def floor(self, seconds: np.ndarray | float) -> np.ndarray:
        return np.floor((np.asarray(seconds) - self.origin_s) / self.tick_s).astype(np.int64)

    def ceil(self, seconds: np.ndarray | float) -> np.ndarray:
        return np.ceil((np.asarray(seconds) - self.origin_s) / self.tick_s).astype(np.int64)


def _resolve(
    whole: Instance,
    schedule: Schedule,
    window: np.ndarray,
    time_limit_s: float,
    threads: int,
    shared: bool = True,
) -> tuple[Plan | None, int]:
    """The plan of `schedule` with `window`'s jobs planned anew by CP-SAT (None when it found
    no plan meeting more of them), and CP-SAT's status; `shared`: the bandwidth is shared with
    the rest (otherwise only the instances are)."""
    plan = schedule.plan
    met_here = int(plan.on_time[window].sum())
    origin = float(whole.arrival_s[window].min())
    layers = np.diff(whole.first_op)[window]
    step = ROUNDING * float((_shortest_chain_s(whole)[window] / layers).min())
    span = max(float(whole.deadline_s[window].max()) - origin, 1e-9)
    tick = max(step, span / MAX_TICKS)
    grid = _Grid(origin, tick, time_margin(whole), math.ceil(span / tick))
    fixed_jobs = plan.on_time.copy()
    fixed_jobs[window] = False
    model = cp_model.CpModel()
    by_instance: list[list] = [[] for _ in range(whole.n_instances)]
    # (interval, units) of the cumulative; None where the bandwidth is not modelled
    bandwidth: list[tuple] | None = [] if shared and whole.dram_gbps is not None else None
    _fix_rest(whole, schedule, fixed_jobs, grid, model, by_instance, bandwidth)
    on, tasks = _plan_window(whole, window, grid, model, by_instance, bandwidth)
    for intervals in by_instance:
        if len(intervals) > 1:
            model.AddNoOverlap(intervals)
    if bandwidth:
        intervals, demands = zip(*bandwidth, strict=True)
        model.AddCumulative(list(intervals), list(demands), BANDWIDTH_UNITS)
    model.Add(sum(on.values()) >= met_here + 1)
    model.Maximize(sum(on.values()))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit_s)
    solver.parameters.num_workers = int(threads)
    # Probing the thousands of fixed intervals takes the whole time limit on a study's trace,
    # before any search; without it, CP-SAT closes or solves most windows within it.
    solver.parameters.cp_model_probing_level = 0
    status = solver.Solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, status
    return _merged(plan, fixed_jobs, grid, solver, on, tasks), status


def _merged(
    plan: Plan,
    fixed_jobs: np.ndarray,
    grid: _Grid,
    solver: cp_model.CpSolver,
    on: dict[int, cp_model.IntVar],
    tasks: dict[tuple[int, int, int], tuple],
) -> Plan:
    """`plan`'s tasks of the `fixed_jobs` with the window's solved ones (`_plan_window`'s
    variables), by start."""
    chosen = [job for job, here in on.items() if solver.Value(here)]
    new = []
    for (job, op, instance), (start, size, present) in tasks.items():
        if job in chosen and solver.Value(present):
            first = solver.Value(start)  # both ends from ticks: a layer's end is its next's start
            begin, end = (grid.origin_s + tick * grid.tick_s for tick in (first, first + size))
            new.append(Task(job, op, 0, 0, instance, begin, end))
    kept = [task for task in plan.tasks if fixed_jobs[task.job]]
    ordered = sorted(kept + new, key=lambda t: (t.start_s, t.job, t.op, t.piece))
    on_time = fixed_jobs.copy()
    on_time[chosen] = True
    return Plan(tuple(ordered), on_time, plan.job_id, plan.origin_s, "window search")


def _fix_rest(
    whole: Instance,
    schedule: Schedule,
    fixed_jobs: np.ndarray,
    grid: _Grid,
    model: cp_model.CpModel,
    by_instance: list[list],
    bandwidth: list[tuple] | None,
) -> None:
    """The fixed tasks as the window sees them: each instance busy over the ticks its fixed tasks
    touch (merged), and (into `bandwidth`, unless None) the bandwidth the fixed segments took
    (their recorded rates, each over the ticks it touches, summed, rounded up to a level and
    capped at the capacity), as fixed intervals."""
    end_tick = grid.end + 1
    busy: list[list[tuple[int, int]]] = [[] for _ in range(whole.n_instances)]
    for task in schedule.plan.tasks:
        if fixed_jobs[task.job] and task.end_s > grid.origin_s:
            lo, hi = int(grid.floor(task.start_s)), int(grid.ceil(task.end_s))
            lo, hi = max(lo, 0), min(hi, end_tick)
            if lo < hi:
                busy[task.instance].append((lo, hi))
    for instance, spans in enumerate(busy):
        for lo, hi in _union(spans):
            by_instance[instance].append(model.NewIntervalVar(lo, hi - lo, hi, f"f{instance}"))
    if bandwidth is None:
        return
    inside = fixed_jobs[schedule.segment_job] & (schedule.segment_end_s > grid.origin_s)
    if not inside.any():
        return
    lo = np.clip(grid.floor(schedule.segment_start_s[inside]), 0, end_tick)
    hi = np.clip(grid.ceil(schedule.segment_end_s[inside]), 0, end_tick)
    use = schedule.segment_bps[inside] / whole.bandwidth_bps * BANDWIDTH_UNITS
    ticks, where = np.unique(np.r_[lo, hi], return_inverse=True)
    change = np.zeros(ticks.size)
    np.add.at(change, where, np.r_[use, -use])
    share = np.clip(np.ceil(np.cumsum(change) / BANDWIDTH_UNITS * LEVELS - 1e-6), 0, LEVELS)
    units = (share * (BANDWIDTH_UNITS // LEVELS)).astype(np.int64)
    level = units[:-1]  # over [ticks[k], ticks[k + 1])
    steps = np.r_[0, 1 + np.flatnonzero(np.diff(level))]  # where it changes
    ends = np.r_[ticks[steps[1:]], ticks[-1]]
    for first, last, taken in zip(ticks[steps], ends, level[steps], strict=True):
        if taken > 0 and last > first:
            interval = model.NewIntervalVar(int(first), int(last - first), int(last), "fb")
            bandwidth.append((interval, int(taken)))


def _union(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _plan_window(
    whole: Instance,
    window: np.ndarray,
    grid: _Grid,
    model: cp_model.CpModel,
    by_instance: list[list],
    bandwidth: list[tuple] | None,
) -> tuple[dict[int, cp_model.IntVar], dict[tuple[int, int, int], tuple]]:
    """The window's jobs in the model, as the exact search's restriction has them (releases and
    durations rounded up, deadlines down, each whole layer at its alone latency and, unless
    `bandwidth` is None, demand on one instance): per job whether it meets its deadline, per
    (job, op, instance) the task's start, length in ticks and presence."""
    capacity = whole.bandwidth_bps
    on: dict[int, cp_model.IntVar] = {}
    tasks: dict[tuple[int, int, int], tuple] = {}
    for job in window.tolist():
        release = max(0, int(grid.ceil(whole.arrival_s[job] + grid.eps)))
        deadline = int(grid.floor(whole.deadline_s[job] - grid.eps))
        ops = whole.ops(job)
        alone = whole.alone_s[ops.start : ops.stop]
        size = np.ones(alone.shape, dtype=np.int64)
        finite = np.isfinite(alone)
        size[finite] = np.maximum(np.ceil((alone[finite] + grid.eps) / grid.tick_s), 1)
        if release + int(np.where(finite, size, 2**40).min(axis=1).sum()) > deadline:
            continue
        here_on = on[job] = model.NewBoolVar(f"on{job}")
        previous_end = None
        for k, op in enumerate(ops):
            start = model.NewIntVar(release, deadline, f"s{op}")
            end = model.NewIntVar(release, deadline, f"e{op}")
            if previous_end is not None:
                model.Add(start >= previous_end)
            previous_end = end
            present = []
            for instance, t in enumerate(whole.instance_type.tolist()):
                if not finite[k, t]:
                    continue
                here = model.NewBoolVar(f"x{op}.{instance}")
                length = int(size[k, t])
                interval = model.NewOptionalIntervalVar(start, length, end, here, f"i{op}")
                by_instance[instance].append(interval)
                if bandwidth is not None and whole.demand_bps[op, t] > 0:
                    share = min(float(whole.demand_bps[op, t]), capacity) / capacity
                    bandwidth.append((interval, math.ceil(share * BANDWIDTH_UNITS)))
                present.append(here)
                tasks[(job, op, instance)] = (start, length, here)
            model.Add(sum(present) == here_on)
    return on, tasks
