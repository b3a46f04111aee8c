"""A schedule of a whole trace from the ceiling's LP: serve only the jobs the LP counts as met.

The rules give up a job online, once it can no longer meet its deadline; by then it has taken
instance time and bandwidth that other jobs needed. The LP (relmas.ceiling.bound) chooses the jobs
to meet knowing the whole trace. This schedule runs a rule baseline ordered by deadline on the jobs
the LP counts as met (x_j above one half) alone, and never starts the others; its run is replayed
on the whole trace (relmas.ceiling.plan_replay: the jobs left out start only once every task of the
run has ended), so the count is the engine's own on the trace. It knows the future, like the exact
search's schedule: it is a lower side of the ceiling's sandwich, not a policy (docs/ceiling.md,
"The LP's jobs, served").

The LP packs each window's bytes into the whole of its bandwidth, which an engine schedule, whose
layers run in order, rarely can; so the jobs are also chosen by the LP of the same trace with a
share of the bandwidth (`scales`: fewer jobs, each with room to run), and the best run is kept.
The LP's choice is then moved by a local search whose counts are the engine's (`move_admitted`:
serve a left-out job, give a served one up, where the run then meets more).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from relmas import catalog
from relmas.ceiling.bound import Bound, relaxation_bound
from relmas.ceiling.instance import Instance
from relmas.ceiling.plan import Plan, Schedule, recorded
from relmas.ceiling.plan_replay import PlanReplay, replay
from relmas.policies import make_policy
from relmas.policies.placement import ALL, BANDWIDTH
from relmas.sim import Engine
from relmas.sim.costs import CostTables
from relmas.sim.system import System

ADMITTED = 0.5  # a job the LP counts as met by more than this is served


def plain_rules() -> tuple[str, ...]:
    """Every plain rule form, shortest-work first too (no precedence, no admission): what
    `bench_ceiling_gaps.py --served-by all` serves the LP's jobs with, to measure the ranking."""
    return tuple(p.name for p in catalog.rules() if p.by == "rule" and p.admit == "all")


def deadline_rules(targets: bool = False) -> tuple[str, ...]:
    """The rule baselines that rank by deadline and keep every feasible job: every job served is
    meant to meet its own, and the LP chooses which are served; `targets`: the target-aware ones
    too (their precedence first, then the deadline order)."""
    return tuple(
        parts.name
        for parts in catalog.rules()
        if (targets or parts.by == "rule") and parts.rank == "deadline" and parts.admit == "all"
    )


@dataclass(frozen=True)
class Admission:
    """The schedule that serves the LP's jobs: `met` deadlines on the whole trace (replayed) of
    the `admitted` jobs served, chosen by the LP with the share `scale` of the bandwidth, run by
    `source` (rule@placement; None when the LP counts none)."""

    met: int
    admitted: int
    scale: float
    source: str | None
    seconds: float
    search_runs: int = 0  # the runs `move_admitted` made
    schedule: Schedule | None = None  # the replay on the whole trace, recorded (None: no jobs)


@dataclass(frozen=True, eq=False)
class Run:
    """A rule's run on the jobs served alone (`part`): `met` of them on time."""

    part: pl.DataFrame
    scale: float
    rule: str | None
    placement: str | None
    met: int


def placements(system: System) -> tuple[str, ...]:
    """Where the rules may start layers: the whole system, by the bandwidth, or one type only."""
    types = system.accelerator_types
    return (ALL, BANDWIDTH, *(types if len(types) > 1 else ()))


def serve_lp_jobs(
    system: System,
    tables: CostTables,
    jobs: pl.DataFrame,
    bound: Bound,
    *,
    scales: Sequence[float],
    time_limit_s: float,
    threads: int = 1,
    rules: Sequence[str] | None = None,
    tries: int = 0,
) -> Admission:
    """The best of `best_run` on `jobs` over the jobs the LP counts as met with each of `scales`
    of the system's bandwidth (1: `bound`'s own LP; others solved within `time_limit_s` each),
    moved by `move_admitted` (at most about `tries` runs), replayed on the whole trace. A share
    whose LP counts no more jobs than a run already met is not run, nor any once a run meets
    the bound: neither could meet more. `rules`: the rules `best_run` tries (default
    `deadline_rules`)."""
    if not scales or not all(0 < scale <= 1 for scale in scales):
        raise ValueError(f"shares of the bandwidth in (0, 1], at least one, got {list(scales)}")
    started = time.perf_counter()
    whole = Instance.of(system, tables, jobs)
    best: Run | None = None
    best_shares = bound.shares
    for scale in (1.0,) if whole.dram_gbps is None else scales:  # unlimited: nothing to share
        if best is not None and best.met >= bound.met:  # the ceiling: nothing meets more
            break
        shares = bound.shares
        if scale != 1:
            planned = replace(whole, dram_gbps=whole.dram_gbps * scale)
            shares = relaxation_bound(planned, time_limit_s=time_limit_s, threads=threads).shares
        if best is None or np.count_nonzero(shares > ADMITTED) > best.met:
            run = best_run(system, tables, jobs, whole, shares, scale, rules)
            if best is None or run.met > best.met:
                best, best_shares = run, shares
    assert best is not None  # scales is not empty
    runs = 0
    if best.met < bound.met:
        best, runs = move_admitted(system, tables, jobs, whole, best_shares, best, tries, rules)
    plan = whole_plan(system, tables, whole, best)
    schedule = None if plan is None else recorded(system, tables, jobs, whole, PlanReplay(plan))
    return Admission(
        met=0 if schedule is None else schedule.met,
        admitted=best.part.height,
        scale=best.scale,
        source=None if best.rule is None else f"{best.rule}@{best.placement}",
        seconds=time.perf_counter() - started,
        search_runs=runs,
        schedule=schedule,
    )


def best_run(
    system: System,
    tables: CostTables,
    jobs: pl.DataFrame,
    whole: Instance,
    shares: np.ndarray,
    scale: float = 1.0,
    rules: Sequence[str] | None = None,
) -> Run:
    """The run of `deadline_rules` × `placements` meeting the most deadlines on the jobs of `jobs`
    (`whole`, its instance) whose `shares` (an LP's x_j in the engine's order: Bound.shares, the
    LP with the share `scale` of the bandwidth) exceed ADMITTED, those jobs alone."""
    if shares.shape != (whole.n_jobs,):
        raise ValueError(f"{shares.shape[0]} shares for a trace of {whole.n_jobs} jobs")
    part = jobs.filter(pl.col("job_id").is_in(whole.job_id[shares > ADMITTED].tolist()))
    if part.height == 0:
        return Run(part, scale, None, None, 0)
    best = Run(part, scale, None, None, -1)
    for rule in deadline_rules() if rules is None else rules:
        for where in placements(system):
            result = Engine(system, tables, part).run(make_policy(rule, placement=where))
            met = int(result.jobs["met"].sum())
            if met > best.met:
                best = Run(part, scale, rule, where, met)
            if met == part.height:  # no run meets more
                return best
    return best


def move_admitted(
    system: System,
    tables: CostTables,
    jobs: pl.DataFrame,
    whole: Instance,
    shares: np.ndarray,
    start: Run,
    tries: int,
    rules: Sequence[str] | None = None,
) -> tuple[Run, int]:
    """A local search over which jobs are served, from `start` (a run of `best_run` on `jobs`,
    `whole` its instance): job by job, the LP's least sure first (`shares` nearest ADMITTED),
    serve a left-out job or give up a served one wherever the run's rule@placement then meets
    more (giving up a job that meets pays when it lets two others meet); once a pass over every
    job gains nothing, choose the rule and placement again (`best_run`) and go on while that
    gains. At most about `tries` runs (a pass's end may add a `best_run`); the best run and the
    runs made. The LP keeps jobs by its fluid byte budget, which the rules' runs cannot always
    realise: the search lets the engine's own runs say which jobs fit."""
    if start.rule is None:
        return start, 0
    best, runs = start, 0
    served = np.isin(whole.job_id, start.part["job_id"].to_numpy())
    order = np.argsort(np.abs(shares - ADMITTED), kind="stable")  # the LP's least sure first
    while runs < tries:
        gained = False
        for j in order:
            if runs >= tries:
                break
            candidate = served.copy()
            candidate[j] = not served[j]
            if not candidate.any():
                continue
            runs += 1
            part = jobs.filter(pl.col("job_id").is_in(whole.job_id[candidate].tolist()))
            policy = make_policy(best.rule, placement=best.placement)
            met = int(Engine(system, tables, part).run(policy).jobs["met"].sum())
            if met > best.met:
                best, served, gained = replace(best, part=part, met=met), candidate, True
        if not gained:
            chosen = best_run(system, tables, jobs, whole, served.astype(float), best.scale, rules)
            runs += len(rules or deadline_rules()) * len(placements(system))
            if chosen.met <= best.met:
                break
            best = chosen
    return best, runs


def replayed(
    system: System, tables: CostTables, jobs: pl.DataFrame, whole: Instance, run: Run
) -> int:
    """Deadlines met on the whole trace `jobs` (`whole`, its instance) when the engine replays
    `run` there (relmas.ceiling.plan_replay): its jobs at the run's times, the others once every
    task of the run has ended."""
    plan = whole_plan(system, tables, whole, run)
    return 0 if plan is None else replay(system, tables, jobs, plan)


def whole_plan(system: System, tables: CostTables, whole: Instance, run: Run) -> Plan | None:
    """`run` as a timed plan of the whole trace (`whole`): what `replayed` replays; None for a
    run of no jobs."""
    if run.rule is None:
        return None
    engine = Engine(system, tables, run.part, record=True)
    engine.run(make_policy(run.rule, placement=run.placement))
    part = Instance.of(system, tables, run.part)
    plan = Plan.of_run(part, engine, f"{run.rule}@{run.placement}")
    return on_whole(plan, part, whole)


def on_whole(plan: Plan, part: Instance, whole: Instance) -> Plan:
    """`plan` (a timed run of the jobs of `part`) as a plan of the trace `whole` holding them:
    jobs and layers renumbered, times moved to the whole trace's clock, the other jobs late."""
    position = {int(j): k for k, j in enumerate(whole.job_id)}
    job = np.array([position[int(j)] for j in part.job_id], dtype=np.int64)
    shift = part.origin_s - whole.origin_s  # whole seconds: both origins are
    tasks = tuple(
        replace(
            task,
            job=int(job[task.job]),
            op=int(whole.first_op[job[task.job]] + task.op - part.first_op[task.job]),
            start_s=task.start_s + shift,
            end_s=task.end_s + shift,
        )
        for task in plan.tasks
    )
    on_time = np.zeros(whole.n_jobs, dtype=np.bool_)
    on_time[job] = plan.on_time
    return replace(
        plan, tasks=tasks, on_time=on_time, job_id=whole.job_id.copy(), origin_s=whole.origin_s
    )
