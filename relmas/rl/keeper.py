"""The learned keeper as a kernel: which present jobs a RELMAS agent gives up before it chooses
(issue 50; docs/relmas.md, "Giving jobs up").

At each decision point after new arrivals, every present job (arrived, neither done nor dropped,
still able to meet its deadline at full speed, with a layer left to start) is scored by a small
MLP over online features (`FEATURES`); the ready ones with nothing running whose score is below
the threshold are given up (`Engine.give_up`), and the agent, or its teacher, chooses among the
rest. The same kernel serves the fused evaluation loop (`relmas.rl.policy.run_agent`), the
training environment (`relmas.rl.env`) and the Python keeper that labels and evaluates it
(`relmas.rl.hindsight`), so that all three give up the same jobs.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numba import njit

from relmas.hw import jit_cache
from relmas.policies import heuristic_kernels, placement, rules, triage
from relmas.policies.base import Policy
from relmas.policies.planner import GivingUp
from relmas.policies.rules import RuleBaseline, choose
from relmas.policies.triage import present_jobs
from relmas.sim import access, engine_kernels
from relmas.sim.engine import Engine
from relmas.sim.engine_kernels import (
    STATUS_DECISION,
    State,
    Tables,
    advance,
    apply_decision,
    borrowed,
    give_up,
)

# Per present job, what an online scheduler sees: its slack over its remaining work, its
# progress, a fluid EDF estimate of its lateness (the work due before it shared by the
# instances, plus its own, over its slack), the whole queue's work over its slack, the crowd
# (present jobs per instance), its priority, its place in SJF order and its age; ratios in log
# scale. Last, where jobs carry service targets, its tenant's deficit: the job's target less the
# tenant's rate so far (`triage.service_rates`), 0 without a target.
FEATURES = (
    "log_slack_ratio",
    "progress",
    "log_edf_lateness",
    "log_queue_load",
    "crowd",
    "priority",
    "sjf_rank",
    "log_age",
    "tenant_deficit",
)
SERVICE_FEATURES = 1  # the last of FEATURES: 0 on every job of a trace without targets
COUNT_PLANNED, COUNT_PLANS, COUNT_GIVEN_UP, COUNT_SCORED = 0, 1, 2, 3  # KeeperArrays.counts


class KeeperArrays(NamedTuple):
    """A keeper as its kernels read it; no hidden units: it keeps every job."""

    first: np.ndarray  # float64[hidden, FEATURES]: the hidden layer's weights
    first_bias: np.ndarray  # float64[hidden]
    second: np.ndarray  # float64[hidden]: the output's weights
    scalars: np.ndarray  # float64[2]: the output's bias, the threshold on P(served)
    mean: np.ndarray  # float64[FEATURES]: the features' standardisation
    std: np.ndarray  # float64[FEATURES]
    counts: np.ndarray  # int64[4]: arrivals planned for, plans, jobs given up, jobs scored


@njit(cache=True)
def keeper_features(T: Tables, S: State, present: np.ndarray) -> np.ndarray:
    """float64[present, FEATURES]: each present job's online features."""
    n, now = present.shape[0], access.now(S)
    instances = access.accelerator_count(S)
    work, slack = np.empty(n), np.empty(n)
    for i in range(n):
        job = present[i]
        work[i] = T.remaining_work[access.job_next_row(S, job)]
        slack[i] = max(access.job_deadline(S, job) - now, 1e-12)
    ahead = np.empty(n)  # the work due before each job, in deadline order
    due = 0.0
    for i in np.argsort(slack, kind="mergesort"):
        ahead[i] = due
        due += work[i]
    rank = np.empty(n)
    for place, i in enumerate(np.argsort(work, kind="mergesort")):
        rank[i] = place / n
    rates = np.empty(access.tenant_count(S))
    triage.service_rates(T, S, rates, np.empty_like(rates))
    out = np.empty((n, len(FEATURES)))
    for i in range(n):
        job = present[i]
        isolated = access.job_isolated(S, job)
        out[i, 0] = np.log(slack[i] / work[i])
        out[i, 1] = 1.0 - work[i] / isolated
        out[i, 2] = np.log((ahead[i] / instances + work[i]) / slack[i])
        out[i, 3] = np.log(due / instances / slack[i])
        out[i, 4] = n / instances
        out[i, 5] = access.job_priority(S, job) / 10.0
        out[i, 6] = rank[i]
        out[i, 7] = np.log1p((now - access.job_arrival(S, job)) / isolated)
        target = access.job_target(S, job)
        out[i, 8] = 0.0 if np.isnan(target) else target - rates[access.job_tenant(S, job)]
    return out


@njit(cache=True)
def served_chance(K: KeeperArrays, features: np.ndarray) -> np.ndarray:
    """float64[rows]: the MLP's P(served) of each row of `features`."""
    x = (features - K.mean) / K.std
    hidden = np.maximum(x @ K.first.T + K.first_bias, 0.0)
    return 1.0 / (1.0 + np.exp(-(hidden @ K.second + K.scalars[0])))


@njit(cache=True)
def give_up_unkept(T: Tables, S: State, K: KeeperArrays) -> None:
    """At a decision point after new arrivals: give up the ready present jobs with nothing
    running whose P(served) is below the threshold (none without a keeper)."""
    arrived = access.arrived_count(S)
    if K.first.shape[0] == 0 or arrived <= K.counts[COUNT_PLANNED]:
        return
    K.counts[COUNT_PLANNED] = arrived
    present = present_jobs(T, S)
    if present.shape[0] == 0:
        return
    K.counts[COUNT_PLANS] += 1
    K.counts[COUNT_SCORED] += present.shape[0]
    chance = served_chance(K, keeper_features(T, S, present))
    for i in range(present.shape[0]):
        job = present[i]
        if (
            chance[i] < K.scalars[1]
            and access.job_is_ready(S, job)
            and access.job_pending_tasks(S, job) == 0
        ):
            give_up(S, job)
            K.counts[COUNT_GIVEN_UP] += 1


@njit(cache=True)
def advance_keeping(T: Tables, S: State, K: KeeperArrays) -> int:
    """`advance` to the next decision point at which a job is left ready once the keeper has
    given up what it does not keep; a point where it gave up every ready job counts as a
    decision to wait (as `GivingUp`'s empty decision on the stepping path)."""
    while True:
        status = advance(T, S)
        if status != STATUS_DECISION:
            return status
        give_up_unkept(T, S, K)
        if access.ready_count(S) > 0:
            return status
        access.count_decision(S)
        access.request_wait(S)


@njit(cache=True)
def run_kept_rule(
    T: Tables,
    S: State,
    K: KeeperArrays,
    view: Tables,
    out_job: np.ndarray,
    out_acc: np.ndarray,
    rank: int,
    patient: bool,
    gated: bool,
    ordered: bool,
    by: int,
    admit: int,
    allowed: np.ndarray,
    bandwidth: bool,
) -> int:
    """`relmas.policies.rules.run_rule` with the keeper `K` giving jobs up before the rule
    decides (`advance_keeping`): the schedule of `KeptRule`'s stepping path in one jitted loop."""
    T, S, K, view = borrowed((T, S, K, view))
    out_job, out_acc, allowed = borrowed((out_job, out_acc, allowed))
    while True:
        status = advance_keeping(T, S, K)
        if status != STATUS_DECISION:
            return status
        out_job[0], out_acc[0] = choose(
            view, S, rank, patient, gated, ordered, by, admit, allowed, bandwidth
        )
        apply_decision(T, S, out_job, out_acc, 1 if out_job[0] >= 0 else 0)


# The cached kernels embed the engine's, the triage's and the rules' (with their placement):
# recompile when one of them changes.
jit_cache.refresh(
    advance_keeping,
    (engine_kernels, access, triage, heuristic_kernels, placement, rules, sys.modules[__name__]),
    stamp="relmas-rl-keeper.sha256",
)


@dataclass(frozen=True)
class KeeperWeights:
    """A learned keeper as an agent stores it (agent.json, `relmas.rl.agent`)."""

    first: tuple[tuple[float, ...], ...]
    first_bias: tuple[float, ...]
    second: tuple[float, ...]
    second_bias: float
    mean: tuple[float, ...]
    std: tuple[float, ...]
    threshold: float

    def arrays(self) -> KeeperArrays:
        """Fresh kernel arrays of this keeper (counts at 0: one per run)."""
        return KeeperArrays(
            np.array(self.first, dtype=np.float64).reshape(-1, len(FEATURES)),
            np.array(self.first_bias, dtype=np.float64),
            np.array(self.second, dtype=np.float64),
            np.array([self.second_bias, self.threshold]),
            np.array(self.mean, dtype=np.float64),
            np.array(self.std, dtype=np.float64),
            np.zeros(4, dtype=np.int64),
        )

    def layers(self, jobs: int) -> list[tuple[str, int, int, int]]:
        """(name, runs, in, out) of the linear layers a plan scoring `jobs` present jobs runs,
        as `served_chance` runs them (priced by `relmas.rl.overhead`)."""
        hidden = len(self.first_bias)
        return [("keeper.hidden", jobs, len(FEATURES), hidden), ("keeper.out", jobs, hidden, 1)]

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> KeeperWeights:
        """From agent.json's `keeper` (shapes checked: a hand-edited keeper is refused)."""
        weights = cls(
            first=tuple(tuple(float(v) for v in row) for row in raw["first"]),
            first_bias=tuple(float(v) for v in raw["first_bias"]),
            second=tuple(float(v) for v in raw["second"]),
            second_bias=float(raw["second_bias"]),
            mean=tuple(float(v) for v in raw["mean"]),
            std=tuple(float(v) for v in raw["std"]),
            threshold=float(raw["threshold"]),
        )
        hidden = len(weights.first_bias)
        shapes_ok = (
            all(len(row) == len(FEATURES) for row in weights.first)
            and len(weights.first) == hidden == len(weights.second)
            and len(weights.mean) == len(weights.std) == len(FEATURES)
            and min(weights.std) > 0.0
            and 0.0 <= weights.threshold <= 1.0
        )
        if not shapes_ok:
            raise ValueError(
                f"a keeper of {len(FEATURES)} features, positive std and a threshold in [0, 1] "
                "(a keeper learned before its ninth feature: train the agent again)"
            )
        return weights


def no_keeper() -> KeeperArrays:
    """Kernel arrays of a keeper that keeps every job (an agent without one)."""
    empty = np.zeros(0)
    features = np.ones(len(FEATURES))
    return KeeperArrays(
        np.zeros((0, len(FEATURES))), empty, empty, np.zeros(2), features, features,
        np.zeros(4, dtype=np.int64),
    )  # fmt: skip


class KernelKeeper:
    """The keeper of `arrays` on the stepping path (`relmas.policies.planner.Keeper`): the
    kernel's features and scores, so that it keeps exactly what the fused loops keep."""

    def __init__(self, arrays: KeeperArrays) -> None:
        self.arrays = arrays

    def chance(self, engine: Engine, present: np.ndarray) -> np.ndarray:
        """P(served) of each of `present`."""
        T, S = engine.kernel_tables, engine.state
        return served_chance(self.arrays, keeper_features(T, S, present.astype(np.int64)))

    def __call__(self, engine: Engine, present: np.ndarray) -> np.ndarray:
        return self.chance(engine, present) >= self.arrays.scalars[1]


class KeptRule(GivingUp):
    """`rule` giving up the jobs the keeper of `arrays` does not keep (`GivingUp` with
    `KernelKeeper`); a rule baseline runs to the end in one jitted loop (`run_kept_rule`), the
    same schedule as the stepping path, in a fraction of its time."""

    def __init__(self, rule: Policy, arrays: KeeperArrays, name: str) -> None:
        super().__init__(rule, KernelKeeper(arrays), name)
        self.arrays = arrays

    def reset(self, engine: Engine) -> None:
        super().reset(engine)
        self.arrays.counts[:] = 0

    def run_to_completion(self, engine: Engine) -> bool:
        if not isinstance(self.rule, RuleBaseline):
            return False
        engine.run_jitted(run_kept_rule, self.arrays, *self.rule.kernel_arguments())
        self.plans = int(self.arrays.counts[COUNT_PLANS])
        self.given_up = int(self.arrays.counts[COUNT_GIVEN_UP])
        return True
