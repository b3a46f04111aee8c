"""The most deadlines any schedule the engine allows can meet, on small traces (CP-SAT).

The engine's problem with unlimited bandwidth is a flexible job shop with release dates and due
dates: each layer (or, with piece tables, each piece of its chosen split variant) runs on one
instance, non-preemptively, after the job's previous layer; maximise the jobs that finish by their
deadline. Late jobs need no modelling: the replay runs them after every on-time one.

CP-SAT needs integer times, so the problem is solved twice on a grid of `tick_s` seconds:

- the *relaxation* (releases and durations rounded down, deadlines up): every engine schedule maps
  to one of its schedules by flooring start times, so its optimum (or CP-SAT's proven bound) is an
  upper bound on the engine's count;
- the *restriction* (releases and durations rounded up, deadlines down, and, with a bandwidth
  limit, a cumulative constraint that the running tasks never demand more than the bandwidth): its
  schedules, replayed in the engine by `relmas.ceiling.plan_replay.PlanReplay`, finish every task no
  later than planned, so the replay meets at least its count.

The lower bound is the count a replayed plan meets in the engine (the restriction's, or the best
run of the seed policies, which also hints both models), the upper bound the relaxation's; the
optimum is proven when they are equal. Coarse grids solve much faster, so the grid starts coarse
and is refined while only rounding parts the two. docs/ceiling.md has the arguments and sizes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import polars as pl
from ortools.sat.python import cp_model

from relmas import catalog
from relmas.ceiling.instance import Instance
from relmas.ceiling.plan import Plan, Task
from relmas.ceiling.plan_replay import replay_met
from relmas.errors import InputError
from relmas.policies import make_policy
from relmas.sim.costs import CostTables
from relmas.sim.engine import Engine
from relmas.sim.engine_kernels import TIME_TOL, met_by
from relmas.sim.system import System

BANDWIDTH_UNITS = 1_000_000  # the cumulative's capacity: the bandwidth in millionths
# How the relaxation's byte windows count a layer's bytes: on its thriftiest type and cut
# ("least"), on the types its tasks are placed on ("placed", tighter), or not at all ("none": the
# bandwidth only through the alone latencies). Both counts bound every engine schedule.
BYTE_ROWS = ("least", "placed", "none")


@dataclass(frozen=True)
class ExactResult:
    """Proven bounds on the deadlines met: `lower` by `plan`, replayed in the engine, `upper` by
    the relaxation; `exact` when they are equal. `status` says which, in one line."""

    lower: int
    upper: int
    jobs: int
    exact: bool
    status: str
    relaxation: str  # CP-SAT's status name on the relaxation
    restriction: str  # ... and on the restriction (SKIPPED: a seed's run meets the bound)
    plan: Plan  # the schedule that meets `lower`: the restriction's or a seed policy's run
    solve_s: float  # seeds, solves and replays
    tick_s: float  # the last grid solved


@dataclass(frozen=True)
class _Grid:
    """Integer times of one model: per job release and deadline, per (op, variant, piece, type)
    duration, per (op, variant) the pieces; variant 0 is the whole layer."""

    release: np.ndarray  # int64[jobs]
    deadline: np.ndarray  # int64[jobs]
    duration: list[list[np.ndarray]]  # [op][variant] -> int64[pieces, types]
    usage: list[list[np.ndarray]] | None  # same shape: bandwidth units, restriction only
    tick_s: float
    relaxed: bool


def default_seed_policies() -> tuple[str, ...]:
    """The online policies whose runs seed the search: the fixed heuristics and the rule
    baselines (jitted, quick), without the random floor and the rules' admission forms
    (`catalog.search_seeds`)."""
    return catalog.search_seeds("heuristic", "rule")


def solve_exact(
    system: System,
    tables: CostTables,
    jobs: pl.DataFrame,
    *,
    time_limit_s: float,
    max_jobs: int,
    threads: int = 1,
    max_operations: int = 300,
    tick_s: float | None = None,
    seed_policies: Sequence[str] | None = None,
    seed_plans: Sequence[Plan] = (),
    trace: str = "trace",
    byte_rows: str = "placed",
) -> ExactResult:
    """The most deadlines any engine schedule of `jobs` can meet, or proven bounds on it.

    Each CP-SAT solve gets `time_limit_s` seconds and `threads` workers. The grid is `tick_s`, or
    by default ~10^3 ticks over the horizon, refined twice tenfold while both models solve to
    OPTIMAL and are still apart (coarse grids solve much faster; only rounding can part them
    then). The runs of `seed_policies` (default `default_seed_policies()`; () for none) give the
    models a first solution, and the lower bound when one meets more than the restriction's plan;
    `seed_plans`, timed plans of other runs of `jobs` (`Plan.of_run`: a rule with a placement, a
    search), compete with them alike.
    A trace of more than `max_jobs` jobs or `max_operations` layers is refused (InputError naming
    `trace`). `byte_rows` (BYTE_ROWS): how the relaxation's byte windows count a layer's bytes.
    """
    _check_options(time_limit_s, threads, tick_s)
    _check_byte_rows(byte_rows)
    instance = Instance.of(system, tables, jobs)
    if instance.n_jobs > max_jobs:
        expected = f"at most {max_jobs} jobs for the exact search (max_jobs)"
        raise InputError(trace, "jobs", expected, instance.n_jobs)
    if instance.n_ops > max_operations:
        expected = f"at most {max_operations} layers for the exact search (max_operations)"
        raise InputError(trace, "layers", expected, instance.n_ops)
    started = time.perf_counter()
    names = default_seed_policies() if seed_policies is None else tuple(seed_policies)
    seeds = [_seed_plan(system, tables, jobs, instance, name) for name in names]
    seeds += list(seed_plans)
    best = max(seeds, key=lambda seed: seed.count, default=None)
    lower, plan = -1, best
    if best is not None:
        lower, plan = _replayed(system, tables, jobs, best)
    eps = time_margin(instance)
    upper = instance.n_jobs
    for tick in grid_ticks(instance, tick_s):
        bound, relaxation, relaxed = _solve_relaxation(
            instance, tick, eps, time_limit_s, threads, plan, byte_rows
        )
        upper = min(upper, bound)
        if relaxed is not None:  # its schedule may well run in the engine too: try it
            met, candidate = _replayed(system, tables, jobs, relaxed)
            if met > lower:
                lower, plan = met, candidate
        if lower >= upper:  # a plan already meets the bound
            restriction = "SKIPPED"
            break
        found, restriction = _solve_restriction(
            instance, tick, eps, time_limit_s, threads, upper, plan
        )
        met, candidate = _replayed(system, tables, jobs, found)
        if met < found.count:
            raise RuntimeError(
                f"the replay of the restriction's plan met {met} deadlines, fewer than its "
                f"{found.count}: the exact search is wrong"
            )
        if met > lower:
            lower, plan = met, candidate
        if lower >= upper or not relaxation == restriction == "OPTIMAL":
            break
    if lower > upper:
        raise RuntimeError(f"{plan.source}'s plan met {lower} deadlines, above the bound {upper}")
    exact = lower == upper
    status = "optimal" if exact else f"bounds: relaxation {relaxation}, restriction {restriction}"
    return ExactResult(
        lower=lower,
        upper=upper,
        jobs=instance.n_jobs,
        exact=exact,
        status=status,
        relaxation=relaxation,
        restriction=restriction,
        plan=plan,
        solve_s=time.perf_counter() - started,
        tick_s=tick,
    )


def relaxation_upper(
    system: System,
    tables: CostTables,
    jobs: pl.DataFrame,
    *,
    tick_s: float,
    time_limit_s: float,
    threads: int = 1,
    byte_rows: str = "placed",
    hint: Plan | None = None,
) -> tuple[int, str]:
    """The relaxation's proven upper bound on the deadlines met of `jobs` on one grid of `tick_s`
    seconds, its byte windows counted as `byte_rows` (BYTE_ROWS) says, and CP-SAT's status name:
    for measuring what each part of the bandwidth's relaxation costs (docs/ceiling.md). `hint`
    (e.g. `solve_exact`'s plan) gives CP-SAT a first solution."""
    _check_options(time_limit_s, threads, tick_s)
    _check_byte_rows(byte_rows)
    instance = Instance.of(system, tables, jobs)
    upper, status, _ = _solve_relaxation(
        instance, tick_s, time_margin(instance), time_limit_s, threads, hint, byte_rows
    )
    return upper, status


def _check_byte_rows(byte_rows: str) -> None:
    if byte_rows not in BYTE_ROWS:
        raise InputError(None, "byte_rows", f"one of {', '.join(BYTE_ROWS)}", byte_rows)


def time_margin(instance: Instance) -> float:
    """The float margin of both grids: 64 x TIME_TOL x the largest time on the engine's clock."""
    return 64.0 * TIME_TOL * max(1.0, float(np.abs(instance.deadline_s).max()))


def grid_ticks(instance: Instance, tick_s: float | None = None) -> list[float]:
    """The grids to try: `tick_s` alone, or ~10^3 ticks over the horizon, then finer."""
    if tick_s is not None:
        return [tick_s]
    horizon = max(float(instance.deadline_s.max()), 1e-9)
    first = 10.0 ** math.ceil(math.log10(horizon / 1e3))
    return [first, first / 10, first / 100]


def _replayed(
    system: System, tables: CostTables, jobs: pl.DataFrame, plan: Plan
) -> tuple[int, Plan]:
    """The deadlines `plan` meets in the engine, and the plan with those as its on-time jobs."""
    met = replay_met(system, tables, jobs, plan)
    return int(met.sum()), replace(plan, on_time=met)


def _seed_plan(
    system: System, tables: CostTables, jobs: pl.DataFrame, instance: Instance, name: str
) -> Plan:
    engine = Engine(system, tables, jobs, record=True)
    engine.run(make_policy(name))
    return Plan.of_run(instance, engine, name)


def _check_options(time_limit_s: float, threads: int, tick_s: float | None) -> None:
    checked = [("time_limit_s", time_limit_s)] + (
        [("tick_s", tick_s)] if tick_s is not None else []
    )
    for key, value in checked:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(None, key, "a positive number of seconds", value)
        if not math.isfinite(value) or value <= 0:
            raise InputError(None, key, "a positive number of seconds", value)
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise InputError(None, "threads", "a positive number of solver workers", threads)


# ----------------------------------------------------------------------------- the two grids


def _durations_s(instance: Instance) -> list[list[np.ndarray]]:
    """Alone time of every task in seconds: [op][variant] -> float[pieces, types]."""
    return [
        [instance.alone_s[op][None, :]] + [alone for alone, _, _ in instance.cuts(op)]
        for op in range(instance.n_ops)
    ]


def _usage(instance: Instance) -> list[list[np.ndarray]]:
    """Bandwidth units of every task under the restriction: its demand (capped at the capacity,
    which a task alone gets) in millionths of the bandwidth, rounded up."""
    capacity = instance.bandwidth_bps
    out = []
    for op in range(instance.n_ops):
        variants = [instance.demand_bps[op][None, :]]
        variants += [demand for _, demand, _ in instance.cuts(op)]
        share = [np.minimum(d, capacity) / capacity for d in variants]
        out.append([np.ceil(s * BANDWIDTH_UNITS).astype(np.int64) for s in share])
    return out


def _grid(instance: Instance, tick_s: float, eps: float, relaxed: bool) -> _Grid:
    seconds = _durations_s(instance)
    if relaxed:
        # Times the engine may count as met, and float rounding on top.
        release = np.floor(np.maximum(instance.arrival_s - eps, 0.0) / tick_s)
        deadline = np.floor((met_by(instance.deadline_s) + eps) / tick_s)
        duration = [[np.floor(np.maximum(d - eps, 0.0) / tick_s) for d in op] for op in seconds]
    else:
        release = np.ceil((instance.arrival_s + eps) / tick_s)
        deadline = np.floor((instance.deadline_s - eps) / tick_s)
        duration = [[np.maximum(np.ceil((d + eps) / tick_s), 1.0) for d in op] for op in seconds]
    if float(np.max(deadline)) > 2.0**52:
        raise InputError(None, "tick_s", "a tick that puts the deadlines under 2**52 ticks", tick_s)
    limited = not relaxed and instance.dram_gbps is not None
    return _Grid(
        release=release.astype(np.int64),
        deadline=deadline.astype(np.int64),
        duration=[[d.astype(np.int64) for d in op] for op in duration],
        usage=_usage(instance) if limited else None,
        tick_s=tick_s,
        relaxed=relaxed,
    )


# ----------------------------------------------------------------------------- the CP-SAT model


@dataclass
class _Model:
    model: cp_model.CpModel
    on_time: list[cp_model.IntVar]
    # (job, op, variant, piece) -> (start, end, {type: presence})
    tasks: dict[tuple[int, int, int, int], tuple[cp_model.IntVar, cp_model.IntVar, dict]]
    possible: int  # jobs whose shortest chain fits between release and deadline
    # op -> (layer start, layer end, one literal per split variant)
    layers: dict[int, tuple[cp_model.IntVar, cp_model.IntVar, list[cp_model.IntVar]]]


def _shortest_chain(instance: Instance, grid: _Grid, job: int) -> int:
    """A lower bound on the job's time from release to finish in this grid: per layer the
    quickest variant, its pieces in parallel on their quickest types."""
    return sum(min(int(d.min(axis=1).max()) for d in grid.duration[op]) for op in instance.ops(job))


def _build(instance: Instance, grid: _Grid, byte_rows: str = "placed") -> _Model:
    """The CP-SAT model of `grid`; on the relaxation's grid with a bandwidth limit, `byte_rows`
    (BYTE_ROWS) says how its byte windows count each layer's bytes."""
    model = cp_model.CpModel()
    on_time: list[cp_model.IntVar] = []
    tasks: dict = {}
    layers: dict = {}
    by_type: list[list[cp_model.IntervalVar]] = [[] for _ in instance.types]
    bandwidth: list[tuple[cp_model.IntervalVar, int]] = []
    possible = 0
    for job in range(instance.n_jobs):
        release, deadline = int(grid.release[job]), int(grid.deadline[job])
        on = model.NewBoolVar(f"on{job}")
        on_time.append(on)
        if release + _shortest_chain(instance, grid, job) > deadline:
            model.Add(on == 0)
            continue
        possible += 1
        previous_end = None
        for op in instance.ops(job):
            layer_start = model.NewIntVar(release, deadline, f"s{op}")
            layer_end = model.NewIntVar(release, deadline, f"e{op}")
            if previous_end is not None:
                model.Add(layer_start >= previous_end)
            chosen = []
            for variant, duration in enumerate(grid.duration[op]):
                use = model.NewBoolVar(f"v{op}.{variant}")
                chosen.append(use)
                previous_start = None
                for piece in range(duration.shape[0]):
                    start = model.NewIntVar(release, deadline, f"s{op}.{variant}.{piece}")
                    end = model.NewIntVar(release, deadline, f"e{op}.{variant}.{piece}")
                    model.Add(start >= layer_start).OnlyEnforceIf(use)
                    model.Add(end <= layer_end).OnlyEnforceIf(use)
                    if previous_start is not None:  # the engine starts pieces in order
                        model.Add(start >= previous_start).OnlyEnforceIf(use)
                    previous_start = start
                    present = {}
                    for t in range(len(instance.types)):
                        here = model.NewBoolVar(f"x{op}.{variant}.{piece}.{t}")
                        size = int(duration[piece, t])
                        name = f"i{op}.{variant}.{piece}.{t}"
                        interval = model.NewOptionalIntervalVar(start, size, end, here, name)
                        by_type[t].append(interval)
                        if grid.usage is not None and grid.usage[op][variant][piece, t] > 0:
                            bandwidth.append((interval, int(grid.usage[op][variant][piece, t])))
                        present[t] = here
                    model.Add(sum(present.values()) == use)
                    tasks[(job, op, variant, piece)] = (start, end, present)
            model.Add(sum(chosen) == on)
            layers[op] = (layer_start, layer_end, chosen)
            previous_end = layer_end
    for t, intervals in enumerate(by_type):
        if int(instance.count[t]) == 1:
            model.AddNoOverlap(intervals)
        elif intervals:
            model.AddCumulative(intervals, [1] * len(intervals), int(instance.count[t]))
    if bandwidth:
        intervals, demands = zip(*bandwidth, strict=True)
        model.AddCumulative(list(intervals), list(demands), BANDWIDTH_UNITS)
    if grid.relaxed and instance.dram_gbps is not None and byte_rows != "none":
        placed = _placed_kilobytes(instance, tasks) if byte_rows == "placed" else None
        _byte_windows(instance, grid, model, on_time, placed)
    model.Maximize(sum(on_time))
    return _Model(model, on_time, tasks, possible, layers)


def _least_bytes(instance: Instance) -> np.ndarray:
    """Per job, the fewest DRAM bytes its layers move (each on its thriftiest type and cut)."""
    pieces = instance.pieces
    least = instance.dram_bytes.min(axis=1)
    if pieces is not None:
        for v in range(1, len(pieces.variants)):
            columns = pieces.offset[v] + np.arange(int(pieces.count.max(axis=0)[v]))
            rows = instance.op_row
            inside = np.arange(columns.size)[None, :] < pieces.count[rows, v][:, None]
            cut = np.where(inside[:, :, None], pieces.dram_bytes[rows][:, columns], 0.0)
            least = np.minimum(least, cut.sum(axis=1).min(axis=1))
    return np.add.reduceat(least, instance.first_op[:-1]) if instance.n_ops else least


def _placed_kilobytes(instance: Instance, tasks: dict) -> list[tuple[int, cp_model.LinearExpr]]:
    """Per job, the most kB it can move (each layer on its costliest variant and types), and its
    kB on the types its tasks are placed on (rounded down per task), a linear expression of the
    presence literals: 0 for a job not on time, none of its tasks being present."""
    dram = [
        [instance.dram_bytes[op][None, :]] + [d for _, _, d in instance.cuts(op)]
        for op in range(instance.n_ops)
    ]
    kilobytes = [[np.floor(d / 1e3).astype(np.int64) for d in op] for op in dram]
    most = np.zeros(instance.n_jobs, dtype=np.int64)
    for op, variants in enumerate(kilobytes):
        most[instance.op_job[op]] += max(int(k.max(axis=1).sum()) for k in variants)
    terms: list[list] = [[] for _ in range(instance.n_jobs)]
    for (job, op, variant, piece), (_, _, present) in tasks.items():
        row = kilobytes[op][variant][piece]
        terms[job] += [int(row[t]) * here for t, here in present.items() if row[t] > 0]
    return [(int(most[j]), sum(terms[j])) for j in range(instance.n_jobs)]


def _byte_windows(
    instance: Instance,
    grid: _Grid,
    model: cp_model.CpModel,
    on_time: list[cp_model.IntVar],
    placed: list[tuple[int, cp_model.LinearExpr]] | None = None,
) -> None:
    """The relaxation's bandwidth rows: the on-time jobs that arrive and are due inside a window
    move their bytes inside it, at most bandwidth x its length (whatever the sharing: the running
    tasks never move more than the bandwidth together). Bytes in kB, rounded down; capacities
    rounded up. Each job's bytes are its fewest (every layer on its thriftiest type and cut) times
    its on-time literal, or with `placed` (`_placed_kilobytes`) those of the types its tasks are
    placed on."""
    kilobytes = np.floor(_least_bytes(instance) / 1e3).astype(np.int64)
    if placed is None:
        most = kilobytes
        moved = [int(kilobytes[j]) * on_time[j] for j in range(instance.n_jobs)]
    else:
        # One variable per job equal to its placed kB: a window's row then has a term per job, not
        # one per task and type of every job inside it (the same model, far fewer terms).
        most = np.array([m for m, _ in placed], dtype=np.int64)
        moved = []
        for j, (bound, expression) in enumerate(placed):
            job_kb = model.NewIntVar(0, bound, f"kb{j}")
            model.Add(job_kb == expression)
            moved.append(job_kb)
    per_tick = instance.bandwidth_bps * grid.tick_s / 1e3
    for t1 in np.unique(grid.release):
        for t2 in np.unique(grid.deadline[grid.deadline >= t1]):
            inside = np.flatnonzero((grid.release >= t1) & (grid.deadline <= t2) & (most > 0))
            capacity = math.ceil(per_tick * float(t2 + 1 - t1))  # jobs end before t2 + 1
            if inside.size and most[inside].sum() > capacity:
                model.Add(sum(moved[j] for j in inside) <= capacity)


def _solve(solver: cp_model.CpSolver, model: cp_model.CpModel) -> tuple[int, str]:
    """CP-SAT's status and its name; a solver that raises is a failed solve (MODEL_INVALID, its
    message in the name), which the callers turn into bounds that need no solver."""
    try:
        status = solver.Solve(model)
    except (RuntimeError, ValueError, OverflowError) as error:
        return cp_model.MODEL_INVALID, f"FAILED ({' '.join(str(error).split())})"
    return status, solver.StatusName(status)


def _solver(time_limit_s: float, threads: int) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit_s)
    solver.parameters.num_workers = int(threads)
    return solver


def _hint(instance: Instance, grid: _Grid, built: _Model, plan: Plan | None) -> None:
    """Give CP-SAT `plan` (a seed policy's run) as a first solution, on the model's grid."""
    if plan is None:
        return
    rounding = np.floor if grid.relaxed else np.ceil
    on_time = [
        bool(plan.on_time[job]) and op in built.layers
        for job, op in enumerate(instance.first_op[:-1])
    ]
    for job, on in enumerate(built.on_time):
        built.model.AddHint(on, on_time[job])
    spans: dict[int, list[int]] = {}
    for task in plan.tasks:
        if not on_time[task.job]:
            continue
        start, end, present = built.tasks[(task.job, task.op, task.split, task.piece)]
        t = int(instance.instance_type[task.instance])
        tick = int(rounding(task.start_s / grid.tick_s))
        size = int(grid.duration[task.op][task.split][task.piece, t])
        built.model.AddHint(start, tick)
        built.model.AddHint(end, tick + size)
        for other, here in present.items():
            built.model.AddHint(here, other == t)
        span = spans.setdefault(task.op, [tick, tick + size, task.split])
        span[0], span[1] = min(span[0], tick), max(span[1], tick + size)
    for op, (first, last, split) in spans.items():
        layer_start, layer_end, chosen = built.layers[op]
        built.model.AddHint(layer_start, first)
        built.model.AddHint(layer_end, last)
        for variant, use in enumerate(chosen):
            built.model.AddHint(use, variant == split)


def _solve_relaxation(
    instance: Instance,
    tick_s: float,
    eps: float,
    time_limit_s: float,
    threads: int,
    hint: Plan | None,
    byte_rows: str = "placed",
) -> tuple[int, str, Plan | None]:
    """The relaxation's proven upper bound, CP-SAT's status name and its best schedule (None
    without one). The bound is its optimum, or CP-SAT's bound when time ran out after a first
    solution; without one (UNKNOWN, whose bound means nothing) or when the solver failed, the jobs
    that fit between arrival and deadline alone."""
    grid = _grid(instance, tick_s, eps, relaxed=True)
    built = _build(instance, grid, byte_rows)
    _hint(instance, grid, built, hint)
    solver = _solver(time_limit_s, threads)
    status, name = _solve(solver, built.model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return built.possible, name, None
    bound = solver.ObjectiveValue() if status == cp_model.OPTIMAL else solver.BestObjectiveBound()
    upper = min(built.possible, int(math.floor(bound + 1e-6)))
    return upper, name, _plan(instance, grid, built, solver, "relaxation")


def _solve_restriction(
    instance: Instance,
    tick_s: float,
    eps: float,
    time_limit_s: float,
    threads: int,
    upper: int,
    hint: Plan | None,
) -> tuple[Plan, str]:
    """The restriction's best schedule found (none when the solver found none) and its status;
    capped at the relaxation's bound, so that reaching it ends the search."""
    grid = _grid(instance, tick_s, eps, relaxed=False)
    built = _build(instance, grid)
    _hint(instance, grid, built, hint)
    built.model.Add(sum(built.on_time) <= upper)
    solver = _solver(time_limit_s, threads)
    status, name = _solve(solver, built.model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        empty = np.zeros(instance.n_jobs, dtype=bool)
        return Plan((), empty, instance.job_id.copy(), instance.origin_s, "restriction"), name
    return _plan(instance, grid, built, solver, "restriction"), name


def _plan(
    instance: Instance, grid: _Grid, built: _Model, solver: cp_model.CpSolver, source: str
) -> Plan:
    """The solution as tasks on engine instances: CP-SAT places tasks on types (at most `count`
    at a time); each gets the instance of its type that has been free longest (interval
    colouring in order of start, which never needs more instances than the overlap)."""
    on_time = np.array([bool(solver.Value(on)) for on in built.on_time])
    placed = []
    for (job, op, variant, piece), (start, end, present) in built.tasks.items():
        if not on_time[job]:
            continue
        for t, here in present.items():
            if solver.Value(here):
                placed.append((solver.Value(start), solver.Value(end), job, op, variant, piece, t))
    placed.sort(key=lambda p: (p[0], p[2], p[3], p[5]))
    free_at = np.full(instance.n_instances, -1, dtype=np.int64)
    tasks = []
    for start, end, job, op, variant, piece, t in placed:
        candidates = np.flatnonzero((instance.instance_type == t) & (free_at <= start))
        if candidates.size == 0:
            # Tasks of no length on the relaxation's grid take no capacity in CP-SAT's cumulative,
            # so more than `count` may share an instant: the one freed first (the replay, whose
            # count is what is claimed, starts it when it is free).
            candidates = np.flatnonzero(instance.instance_type == t)
        chosen = int(candidates[np.argmin(free_at[candidates])])
        free_at[chosen] = end
        start_s, end_s = start * grid.tick_s, end * grid.tick_s
        tasks.append(Task(job, op, variant, piece, chosen, start_s, end_s))
    return Plan(tuple(tasks), on_time, instance.job_id.copy(), instance.origin_s, source)
