"""An online admission planner over sampled futures: what a scheduler that does not know the
future can win by giving jobs up (docs/simulator.md, "Giving jobs up: the sampled-futures
planner").

The LP's jobs served (relmas.ceiling.admission) meet more deadlines than every rule by choosing,
knowing the whole trace, which jobs never to start. An online scheduler knows the jobs that have
arrived and the arrival process, not the arrivals to come. This planner, at each decision point
after new arrivals, draws `samples` futures of the scenario's arrival process (traces of the
workload generator with seeds of their own, never the trace being run), solves the ceiling's LP
(relmas.ceiling.bound) on the present jobs (what is left of each) plus each future, and gives up
(`Engine.give_up`) the present jobs that can still meet their deadline but that fewer than
`keep_share` of the solutions serve; a rule baseline with its placement schedules the rest. Fed
the real future instead of samples (`RealFuture`), the same code is the clairvoyant admission.

It solves LPs at its decision points: tenths of a second per plan, not microseconds. It is a
measurement of the online headroom (benchmarks/bench_online_headroom.py), not a competitor of the
microsecond policies.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np
import polars as pl

from relmas.ceiling.admission import ADMITTED
from relmas.ceiling.bound import relaxation_bound
from relmas.ceiling.instance import Instance
from relmas.ceiling.targets import has_targets, served_for_targets
from relmas.errors import InputError
from relmas.policies import triage
from relmas.policies.base import Policy, register
from relmas.policies.placement import ALL
from relmas.sim import access
from relmas.sim.costs import CostTables
from relmas.sim.engine import DecisionView, Engine
from relmas.sim.system import System
from relmas.workload import Scenario, generate_trace

# The seeds of the sampled futures start here: far from any study's trace seeds, so that a sample
# is never the trace being run.
FUTURE_SEED_BASE = 2**40
# what Instance.of reads, and the targets the labels count (relmas.ceiling.targets)
_PLANNED = ["job_id", "tenant", "model", "arrival_s", "deadline_s", "target"]


@dataclass(frozen=True)
class PlannerConfig:
    """The planner's knobs, chosen on validation traces (benchmarks/bench_online_headroom.py)."""

    samples: int = 2  # futures drawn per plan (K)
    horizon_jobs: int = 40  # arrivals in each future
    keep_share: float = 0.5  # a present job is kept if at least this share of the plans serve it
    lp_time_limit_s: float = 2.0  # per LP solve
    # the share of the bandwidth the LP plans with: the LP packs each window's bytes into all of
    # it, which layers run in order rarely can (relmas.ceiling.admission's `scales`)
    bandwidth_share: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.samples < 1 or self.horizon_jobs < 0:
            raise ValueError(f"samples ≥ 1 and horizon_jobs ≥ 0, got {self}")
        if not 0.0 < self.keep_share <= 1.0 or not 0.0 < self.bandwidth_share <= 1.0:
            raise ValueError(f"keep_share and bandwidth_share in (0, 1], got {self}")


class Futures(Protocol):
    """Where the planner's futures come from: the jobs (JOB_SCHEMA's planned columns) arriving
    after the engine's present, on the engine's clock plus its origin (absolute seconds)."""

    def __call__(self, engine: Engine, sample: int) -> pl.DataFrame: ...


class SampledFutures:
    """Futures drawn from the scenario's arrival process: the `horizon_jobs` arrivals after a
    random point of a trace of the workload generator (one trace per sample, generated once),
    moved so that the point is now. Nothing of the trace being run is read but the present."""

    def __init__(
        self,
        name: str,
        scenario: Scenario,
        system: System,
        tables: CostTables,
        config: PlannerConfig,
    ) -> None:
        seeds = FUTURE_SEED_BASE + config.seed * config.samples + np.arange(config.samples)
        self.pool = [
            generate_trace(name, scenario, system, tables, int(s)).select(_PLANNED) for s in seeds
        ]
        self.horizon = config.horizon_jobs
        self.rng = np.random.default_rng([FUTURE_SEED_BASE, config.seed])

    def __call__(self, engine: Engine, sample: int) -> pl.DataFrame:
        trace = self.pool[sample]
        if self.horizon == 0:
            return trace.clear()
        # the arrival before the window stands for now: a window starts at a random arrival
        last = max(1, trace.height - self.horizon)
        start = int(self.rng.integers(1, last + 1))
        window = trace.slice(start, self.horizon)
        now = engine.origin_s + engine.now
        shift = now - trace["arrival_s"][start - 1]
        return window.with_columns(
            pl.col("arrival_s") + shift,
            pl.col("deadline_s") + shift,
            job_id=-1 - pl.int_range(window.height, dtype=pl.Int64),  # not a real job's id
        )


class RealFuture:
    """The trace's own next `horizon_jobs` arrivals (None: all): the clairvoyant planner, for
    tests and to measure what knowing the future is worth."""

    def __init__(self, horizon_jobs: int | None = None) -> None:
        self.horizon = horizon_jobs

    def __call__(self, engine: Engine, sample: int) -> pl.DataFrame:
        arrived = access.arrived_count(engine.state)
        return engine.jobs.select(_PLANNED).slice(arrived, self.horizon)


class Keeper(Protocol):
    """Which of the `present` jobs (internal indices, `present_jobs`) to keep, bool[present]."""

    def __call__(self, engine: Engine, present: np.ndarray) -> np.ndarray: ...


class FutureVotes:
    """Keeps the present jobs that at least `keep_share` of the LPs over `samples` futures serve:
    the planner's keeper."""

    def __init__(self, futures: Futures, config: PlannerConfig) -> None:
        self.futures = futures
        self.config = config

    def __call__(self, engine: Engine, present: np.ndarray) -> np.ndarray:
        votes = np.zeros(present.size)
        for sample in range(self.config.samples):
            votes += served(engine, present, self.futures(engine, sample), self.config)
        return votes >= self.config.keep_share * self.config.samples


class GivingUp(Policy):
    """`rule` (a rule baseline made by `relmas.policies.make_policy`, with its placement) on the
    jobs `keeper` keeps: at each decision point after new arrivals, the ready present jobs it
    does not keep are given up (`Engine.give_up`)."""

    def __init__(self, rule: Policy, keeper: Keeper, name: str) -> None:
        self.rule = rule
        self.keeper = keeper
        self.name = name

    def reset(self, engine: Engine) -> None:
        self.rule.reset(engine)
        self.planned_arrivals = 0
        self.plans = 0
        self.given_up = 0

    def decide(self, view: DecisionView) -> list[tuple[int, ...]]:
        engine = view.engine
        arrived = access.arrived_count(engine.state)
        if arrived > self.planned_arrivals:
            present = present_jobs(engine)
            if present.size:
                self.give_up(engine, present[~self.keeper(engine, present)])
            self.planned_arrivals = arrived
        if access.ready_count(engine.state) == 0:
            return []
        return self.rule.decide(view)

    def give_up(self, engine: Engine, jobs: np.ndarray) -> None:
        """Give up those of `jobs` that are ready with nothing running."""
        self.plans += 1
        S = engine.state
        for job in jobs:
            if access.job_is_ready(S, job) and access.job_pending_tasks(S, job) == 0:
                engine.give_up(int(job))
                self.given_up += 1


def planner(rule: Policy, futures: Futures, config: PlannerConfig) -> GivingUp:
    """The sampled-futures planner (`futures`: `SampledFutures`; `RealFuture`: clairvoyant)."""
    return GivingUp(rule, FutureVotes(futures, config), "planner")


@register("planner")
class SampledFuturesPlanner(GivingUp):
    """The catalog's `planner`: `rule` at `placement` on the jobs the LPs over futures of the
    scenario `scenario` (its arrival process `arrivals`) keep, with the knobs of
    `evaluation.planner` (`PlannerConfig`); the futures are drawn from `seed`, the trace's."""

    name = "planner"

    def __init__(
        self,
        seed: int = 0,
        *,
        rule: str | None = None,
        placement: str = ALL,
        scenario: str | None = None,
        arrivals: Scenario | None = None,
        **knobs: float,
    ) -> None:
        from relmas.policies import make_policy

        if rule is None or scenario is None or arrivals is None:
            expected = (
                "a policy that needs no scenario: the planner draws futures of a configured "
                "scenario and plans for its agent's rule (relmas evaluate)"
            )
            raise InputError(None, "--policy", expected, self.name)
        self.rule = make_policy(rule, placement=placement)
        self.config = PlannerConfig(**knobs, seed=seed)
        self.scenario, self.arrivals = scenario, arrivals

    def reset(self, engine: Engine) -> None:
        # the futures of this engine's system and cost tables
        futures = SampledFutures(
            self.scenario, self.arrivals, engine.system, engine.tables, self.config
        )
        self.keeper = FutureVotes(futures, self.config)
        super().reset(engine)

    def overhead_counts(self) -> dict[str, float]:
        """Its plans and the jobs they gave up (its decision time is mostly the plans' LPs)."""
        return {"planner_plans": float(self.plans), "planner_given_up": float(self.given_up)}


def present_jobs(engine: Engine) -> np.ndarray:
    """The jobs a keeper plans (internal indices; `relmas.policies.triage.present_jobs`)."""
    return triage.present_jobs(engine.kernel_tables, engine.state)


def served(
    engine: Engine, present: np.ndarray, future: pl.DataFrame, config: PlannerConfig
) -> np.ndarray:
    """Whether the LP of what is left of the `present` jobs plus `future` serves each present
    job (x_j above ADMITTED), bool[present]; where jobs carry service targets, the LP that
    leaves their tenants least short first (`served_for_targets`, over each tenant's jobs
    decided so far)."""
    jobs = pl.concat([engine.jobs.select(_PLANNED)[present], future])
    instance = Instance.of(engine.system, engine.tables, jobs)
    position = {int(j): i for i, j in enumerate(instance.job_id)}
    mine = np.array([position[int(j)] for j in jobs["job_id"][: present.size]], dtype=np.int64)
    done = np.zeros(instance.n_jobs, dtype=np.int64)
    done[mine] = _layers_run(engine, present)
    release = instance.arrival_s.copy()
    release[mine] = engine.origin_s + _ready_at(engine, present) - instance.origin_s
    left = instance.remaining(done, release)
    if left.dram_gbps is not None:
        left = replace(left, dram_gbps=left.dram_gbps * config.bandwidth_share)
    if has_targets(jobs):
        order = np.array([position[int(j)] for j in jobs["job_id"]], dtype=np.int64)
        group, job_target = np.empty(instance.n_jobs, dtype=np.int64), np.empty(instance.n_jobs)
        group[order] = _tenant_of(engine, jobs)
        job_target[order] = jobs["target"].fill_nan(None).fill_null(0.0).to_numpy()
        target, decided, met = _tenants_so_far(engine, group, job_target)
        shares = served_for_targets(
            left, group, target, decided, met, time_limit_s=config.lp_time_limit_s
        )
    else:
        shares = relaxation_bound(left, time_limit_s=config.lp_time_limit_s).shares
    return shares[mine] > ADMITTED


def _tenant_of(engine: Engine, jobs: pl.DataFrame) -> np.ndarray:
    """Each of `jobs`' service group: its tenant's index in `engine.tenants` where it carries a
    target, -1 otherwise (a tenant's jobs are taken to share one target: the mean of theirs)."""
    index = {name: k for k, name in enumerate(engine.tenants)}
    tenants, targets = jobs["tenant"].to_list(), jobs["target"].fill_nan(None).to_list()
    return np.array(
        [
            -1 if target is None else index.get(tenant, -1)
            for tenant, target in zip(tenants, targets, strict=True)
        ],
        dtype=np.int64,
    )


def _tenants_so_far(
    engine: Engine, group: np.ndarray, job_target: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per tenant: its target (the mean of its planned jobs', 0 without one), and its jobs
    decided and met so far, as the target-aware baselines count them (`triage.tenant_decided`:
    a ready job that can no longer meet its deadline is decided, missed). A job running its
    last layer is neither decided nor planned; with per-model targets the counts are the
    tenant's, coarser than the metric's groups."""
    S, T = engine.state, engine.kernel_tables
    tenants = access.tenant_count(S)
    decided = np.empty(tenants)
    triage.tenant_decided(T, S, decided, np.empty(tenants))
    met = np.array([access.tenant_met(S, k) for k in range(tenants)], dtype=np.float64)
    planned = group >= 0
    sums = np.bincount(group[planned], weights=job_target[planned], minlength=tenants)
    sizes = np.bincount(group[planned], minlength=tenants)
    target = np.divide(sums, sizes, out=np.zeros(tenants), where=sizes > 0)
    return target, decided, met


def _running(engine: Engine, jobs: np.ndarray) -> np.ndarray:
    """Whether each of `jobs` runs its current layer's last tasks (none left to start)."""
    S = engine.state
    return np.array(
        [access.job_pending_tasks(S, j) > 0 and access.job_pieces_left(S, j) == 0 for j in jobs],
        dtype=bool,
    )


def _layers_run(engine: Engine, jobs: np.ndarray) -> np.ndarray:
    """Layers of each of `jobs` ended or running with nothing left to start."""
    first_row = engine.tables.first_row[engine.model_indices[jobs]]
    return access.job_next_rows(engine.state)[jobs] - first_row + _running(engine, jobs)


def _ready_at(engine: Engine, jobs: np.ndarray) -> np.ndarray:
    """When each of `jobs` can next start a layer, on the engine's clock: now, or once its
    running tasks end at their current rates."""
    busy_left = DecisionView(engine).busy_left_s
    S = engine.state
    running = np.array([access.running_job(S, a) for a in range(access.accelerator_count(S))])
    at = np.full(jobs.size, engine.now)
    for i, job in enumerate(jobs):
        busy = busy_left[running == job]
        if busy.size:
            at[i] += busy.max()
    return at
