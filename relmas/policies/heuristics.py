"""The heuristic baseline schedulers (docs/design.md, "Policies"), each a job rule plus an
accelerator rule evaluated by the Numba kernels of `relmas.policies.heuristic_kernels`.

Estimates come from the cost tables (`relmas.sim.costs`): *remaining work* = sum of the job's
remaining layers' latency, each on its fastest accelerator type, at full bandwidth; *isolated
latency* = the model alone on its fastest accelerator type. Unless stated otherwise a job goes to
the *fastest free instance*: the idle instance with the lowest `latency_s` for the job's next layer
(ties: lowest index). Ties between jobs go to the earlier arrival (then the lower job_id).
"""

from __future__ import annotations

from typing import Any, ClassVar

from relmas.policies import heuristic_kernels
from relmas.policies.base import Policy, register
from relmas.sim.engine import DecisionView, Engine
from relmas.sim.engine_kernels import entry_point


class HeuristicPolicy(Policy):
    """A policy whose decisions come from one jitted rule (`code`) of
    `relmas.policies.heuristic_kernels`; its heap, plan marks and random state are its own
    (`heuristic_kernels.Planner`)."""

    code: ClassVar[int]
    alpha: float = 0.0

    def __init_subclass__(cls, *, name: str, code: int, **kwargs: Any) -> None:
        """A heuristic is declared in one line: its contract `name` (registered under it) and its
        rule's `code` in the kernels."""
        super().__init_subclass__(**kwargs)
        cls.name, cls.code = name, code
        register(name)(cls)

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def reset(self, engine: Engine) -> None:
        self._planner = heuristic_kernels.new_planner(
            engine.jobs.height, len(engine.system.instance_types), self.seed
        )
        heuristic_kernels.reset_heap(engine.kernel_tables, engine.state, self._planner, self.code)
        self._plan = entry_point(
            heuristic_kernels.plan,
            engine.kernel_tables,
            engine.state,
            self._planner,
            self.code,
            self.alpha,
        )

    @property
    def planner(self) -> heuristic_kernels.Planner:
        """Its state since `reset`: for a kernel that calls `heuristic_kernels.plan` itself (the RL
        environment's reference slot)."""
        return self._planner

    def decide(self, view: DecisionView) -> list[tuple[int, int]]:
        engine, planner = view.engine, self._planner
        count = self._plan(engine.kernel_tables, engine.state, planner, self.code, self.alpha)
        return list(
            zip(planner.out_job[:count].tolist(), planner.out_acc[:count].tolist(), strict=True)
        )

    def run_to_completion(self, engine: Engine) -> bool:
        engine.run_jitted(heuristic_kernels.run_heuristic, self._planner, self.code, self.alpha)
        return True


class FCFS(HeuristicPolicy, name="fcfs", code=heuristic_kernels.CODE_FCFS):
    """First come, first served: the earliest-arrived ready job first, to the fastest free one."""


class SJF(HeuristicPolicy, name="sjf", code=heuristic_kernels.CODE_SJF):
    """Shortest job first: the least remaining work first, onto the fastest free instance."""


class EDF(HeuristicPolicy, name="edf", code=heuristic_kernels.CODE_EDF):
    """Earliest deadline first, onto the fastest free instance."""


class LLF(HeuristicPolicy, name="llf", code=heuristic_kernels.CODE_LLF):
    """Least laxity first (deadline - now - remaining work), onto the fastest free instance."""


class PREMA(HeuristicPolicy, name="prema", code=heuristic_kernels.CODE_PREMA):
    """PREMA (Choi & Rhu, HPCA 2020), onto the fastest free instance.

    A job's tokens start at its priority (1, 3, 9) and grow by priority x waited / isolated latency
    while it waits ready; the threshold is the highest of 9, 3, 1 that some ready job's tokens
    reach; among the jobs at or above it, the one with the least remaining work goes first.
    """


class SDRM3(HeuristicPolicy, name="sdrm3", code=heuristic_kernels.CODE_SDRM3):
    """SDRM3 (Kim et al., arXiv 2212.03414, 2022, as ported in the Dysta suite), onto the fastest
    free instance.

    score = urgency + alpha x (waited / next layer's best latency), waited = the time since the job
    became ready; urgency = min(1, remaining work / (deadline - now)) before the deadline, and past
    it remaining work / (deadline - now) < 0, -inf at the deadline (the port's sign: a job that
    missed its deadline ranks low, recovering as time passes); highest score first.
    """

    def __init__(self, seed: int = 0, alpha: float = 1.0) -> None:
        super().__init__(seed)
        self.alpha = float(alpha)


class Planaria(HeuristicPolicy, name="planaria", code=heuristic_kernels.CODE_PLANARIA):
    """Planaria (Ghodrati et al., MICRO 2020) as its authors' scheduler ranks tasks, onto the
    fastest free instance.

    The jobs that can still meet their deadline (`triage.feasible`) first, by highest priority /
    (slack x resources) with slack = deadline - now and resources = the fewest instances that
    still meet the deadline, always 1 here (instances do not fission); then the late ones, by
    highest priority / remaining work.
    """


class Herald(HeuristicPolicy, name="herald", code=heuristic_kernels.CODE_HERALD):
    """Herald-like (Kwon et al., HPCA 2021, balanced): jobs in arrival order, each to its target.

    For a job's next layer, p* = the instance with the lowest latency (ties: least loaded) and q =
    the least-loaded instance (ties: lowest latency), load = time until the instance is free; the
    layer goes to q if q != p* and latency(q) < 2 x latency(p*), else to p*. If that target is busy
    the job waits for it and later jobs are considered (not work-conserving).
    """


class Random(HeuristicPolicy, name="random", code=heuristic_kernels.CODE_RANDOM):
    """Sanity floor: a uniformly random ready job onto a uniformly random idle instance (seeded)."""
