"""The rule baselines: online rules exact over *all* ready jobs, each with a placement; the best of
them on validation is the agent's reference slot and teacher, run by this module's `choose`
inside the agent's observation kernel (docs/simulator.md, "Rule baselines"; docs/relmas.md, "The
decision").

Each rule is declared once, by its parts, in `relmas.catalog.RULES` (`RuleParts`: its name is
derived from them); this module registers one `RuleBaseline` per declaration, all run by `choose`.

`sjf_feasible` starts the feasible job with the least remaining work, `edf_feasible` the one with
the earliest deadline; when no job is feasible both start the reference, SJF's pick over all ready
jobs. Feasible, patient and gated are `relmas.policies.triage`'s.

The holding forms (`_patient`, `_patient_gated`) try, in this order, the rule's pick, the
reference, the other feasible jobs by least remaining work, then the hopeless job with the least
remaining work, and start the first
they do not hold back. When they hold back all of them they wait, if waiting is allowed as in the
agent's mask (something runs or a job is still to arrive, and no candidate could start on an
instance of its fastest type or none would start without oversubscribing the bandwidth);
otherwise they start the rule's pick. `_patient_gated_ordered` holds back for the bandwidth only
where it may wait: when something will start anyway, it tries its candidates in the same order
holding back only for a busy instance.

The target-aware baselines (catalog kind `target`, docs/simulator.md "Target-aware baselines")
are rule baselines with a precedence class before the rule's order among the feasible jobs (`by`):
the tenant furthest below its target first (`_deficit`), every tenant below its target first,
alike (`_below`), the jobs at the token threshold (tokens grow with the deficit and the time
waited, as PREMA's with the priority; `_tokens`), or the highest target first (static priority).
A tenant's deficit is its target minus its rate so far counting its hopeless ready jobs as missed
(`triage.service_rates`, the agent's); a job without a target comes after every job with one.
Without targets every job is in one class, and each is its base rule.

The admission forms (`_sacrifice`, `_accept`) keep only the feasible jobs that a fluid EDF
estimate of their placement's instances says can meet their deadlines together
(`triage.admitted`: Moore-Hodgson's sacrifice, or an acceptance test in arrival order); the jobs
given up are treated as hopeless ones are. Under no overload each is its base rule. The estimate
costs O(feasible ready jobs²) per decision at worst.

One decision starts at most one job, as the agent's does, so the next decision (at the same time
while an instance is idle and a job ready) sees it running: the agent taking its teacher's action
at every decision gives the rule baseline's schedule (tested). Each
decision scans the ready jobs once, the holding forms twice when they hold back their first picks:
O(ready x instances).
"""

from __future__ import annotations

import sys
from functools import partial

import numpy as np
from numba import njit

from relmas import catalog
from relmas.catalog import ADMITS, PRECEDENCES, RANKS, RuleParts
from relmas.hw import jit_cache
from relmas.policies import heuristic_kernels, placement, triage
from relmas.policies.base import Policy, register
from relmas.policies.heuristic_kernels import token_growth
from relmas.policies.placement import ALL, Placement, place
from relmas.policies.triage import (
    admitted,
    busy_gain,
    earliest_finish,
    fastest_idle,
    feasible,
    oversubscribes,
    scan_instances,
    service_rates,
    waits_for_busy,
)
from relmas.sim import access, engine_kernels
from relmas.sim.costs import CostTables
from relmas.sim.engine import DecisionView, Engine
from relmas.sim.engine_kernels import (
    STATUS_DECISION,
    State,
    Tables,
    advance,
    apply_decision,
    borrowed,
)

# The kernel's codes of a rule's parts (`catalog.RuleParts`). Its order among feasible jobs:
# remaining work, deadline.
RANK_SJF, RANK_EDF = RANKS.index("work"), RANKS.index("deadline")
# Which feasible jobs go before the rule's order (docs/simulator.md, "Target-aware baselines"):
# none (the rule itself), the tenant furthest below its target, the highest target, the jobs at
# the token threshold, or the tenants below their targets alike.
BY_RULE, BY_DEFICIT, BY_TARGET, BY_TOKENS, BY_BELOW = (
    PRECEDENCES.index(by) for by in ("rule", "deficit", "target", "tokens", "below")
)
# Which feasible jobs it keeps (`triage.admitted`): all, Moore-Hodgson's sacrifice, or an
# acceptance test; the others are treated as hopeless.
ADMIT_ALL, ADMIT_SACRIFICE, ADMIT_ACCEPT = (
    ADMITS.index(admit) for admit in ("all", "sacrifice", "accept")
)
TOKEN_LEVELS = 3.0  # a job is a token candidate with at least 1 / this of the most tokens
UNKNOWN = -2  # a layer row's instance not yet asked (-1: held back)


@njit(cache=True)
def _before(key: float, job: int, best_key: float, best: int) -> bool:
    """(key, job) ranks before the best so far (ties: lower job index, i.e. earlier arrival)."""
    return best < 0 or key < best_key or (key == best_key and job < best)


@njit(cache=True)
def _ahead(
    level: float, key: float, job: int, best_level: float, best_key: float, best: int
) -> bool:
    """(level, key, job) ranks before the best so far: the precedence class `level` first, then
    `_before`."""
    if best >= 0 and level != best_level:
        return level < best_level
    return _before(key, job, best_key, best)


@njit(cache=True, inline="always")
def _deficit(S: State, job: int, rates: np.ndarray) -> float:
    """The job's target minus its tenant's rate so far (`rates`, `triage.service_rates`');
    -inf for a job without a target."""
    target = access.job_target(S, job)
    if np.isnan(target):
        return -np.inf
    return target - rates[access.job_tenant(S, job)]


@njit(cache=True, inline="always")
def _tokens(S: State, job: int, now: float, rates: np.ndarray) -> float:
    """The token rule's tokens: the deficit above 0 x PREMA's growth with waiting
    (`heuristic_kernels.token_growth`); 0 for a tenant at or above its target, or a job without
    one."""
    return max(0.0, _deficit(S, job, rates)) * token_growth(S, job, now)


@njit(cache=True)
def _token_threshold(T: Tables, S: State, now: float, rates: np.ndarray) -> float:
    """The most tokens of a feasible ready job / TOKEN_LEVELS (0 when no job has any)."""
    most = 0.0
    for i in range(access.ready_count(S)):
        job = access.ready_job(S, i)
        remaining = T.remaining_work[access.job_next_row(S, job)]
        if feasible(now, remaining, access.job_deadline(S, job)):
            most = max(most, _tokens(S, job, now, rates))
    return most / TOKEN_LEVELS


@njit(cache=True, inline="always")
def _precedence(
    S: State, job: int, by: int, now: float, threshold: float, rates: np.ndarray
) -> float:
    """The job's precedence class among the feasible jobs, lower first (`by`: BY_*); a job
    without a target last (inf) wherever a target decides."""
    if by == BY_DEFICIT:
        return -_deficit(S, job, rates)  # furthest below its target first
    if by == BY_BELOW:
        deficit = _deficit(S, job, rates)
        return np.inf if deficit == -np.inf else (0.0 if deficit > 0.0 else 1.0)
    if by == BY_TARGET:
        target = access.job_target(S, job)
        return np.inf if np.isnan(target) else -target
    if by == BY_TOKENS:
        return 0.0 if _tokens(S, job, now, rates) >= threshold else 1.0
    return 0.0


@njit(cache=True)
def _target(
    T: Tables,
    S: State,
    job: int,
    patient: bool,
    gated: bool,
    running_demand: float,
    busy_left: np.ndarray,
    allowed: np.ndarray,
    bandwidth: bool,
) -> int:
    """The instance a holding form starts `job` on (its placement's, `placement.place`), -1 if it
    holds the start back. The bandwidth placement's own test (end before the fastest type frees
    up) subsumes *patient* on the instances it would use, so *patient* is not asked there: on
    the others, which it refuses, a busy instance would hold every start back for nothing."""
    row = access.job_next_row(S, job)
    target = place(T, S, row, allowed, bandwidth, running_demand, busy_left)
    if target < 0:
        return -1
    latency = T.latency[row, access.accelerator_type(S, target)]
    if patient and not bandwidth:
        earliest = earliest_finish(T, S, row, busy_left, allowed)
        if waits_for_busy(busy_gain(latency, earliest)):
            return -1
    demand = T.demand[row, access.accelerator_type(S, target)]
    if gated and oversubscribes(running_demand, demand, access.bandwidth_capacity(S)):
        return -1
    return target


@njit(cache=True)
def _may_wait(
    T: Tables,
    S: State,
    candidates: np.ndarray,
    hopeless: int,
    running_demand: float,
    allowed: np.ndarray,
) -> bool:
    """The agent's wait mask over the candidates (the feasible jobs, `candidates`, and
    `hopeless`): waiting is allowed, and no candidate could start on an instance of its fastest
    type or none would start without oversubscribing the bandwidth."""
    if not access.can_wait(S):
        return False
    capacity = access.bandwidth_capacity(S)
    best_type_idle, fits = False, False
    # a candidate's answer depends on its layer row alone, and the ready jobs share few rows
    seen = np.zeros(T.latency.shape[0], dtype=np.bool_)
    for i in range(candidates.shape[0] + 1):
        job = candidates[i] if i < candidates.shape[0] else hopeless
        if job < 0:
            continue
        row = access.job_next_row(S, job)
        if seen[row]:
            continue
        seen[row] = True
        kind = access.accelerator_type(S, fastest_idle(T, S, row, allowed))
        best_type_idle = best_type_idle or T.latency[row, kind] <= T.best_latency[row]
        fits = fits or not oversubscribes(running_demand, T.demand[row, kind], capacity)
    return not best_type_idle or not fits


@njit(cache=True)
def _any_idle(S: State, allowed: np.ndarray) -> bool:
    """Whether an instance of an `allowed` type is idle."""
    for a in range(access.accelerator_count(S)):
        if access.is_idle(S, a) and allowed[access.accelerator_type(S, a)]:
            return True
    return False


@njit(cache=True)
def choose(
    T: Tables,
    S: State,
    rank: int,
    patient: bool,
    gated: bool,
    ordered: bool,
    by: int,
    admit: int,
    allowed: np.ndarray,
    bandwidth: bool,
) -> tuple[int, int]:
    """One decision of a rule baseline: (job, instance) to start, or (-1, -1) to wait. `by`
    (BY_*) puts a precedence class before the rule's order among the feasible jobs; `admit`
    (ADMIT_*) keeps some of them, the others given up as if hopeless; `allowed`
    (bool[types]) and `bandwidth` are its placement (relmas.policies.placement), `T` the rule's
    view of the costs (`Placement.tables`)."""
    if not _any_idle(S, allowed):  # the system of the allowed types alone has no decision here
        return -1, -1
    access.refresh_rates(S)
    now = access.now(S)
    rates = np.empty(access.tenant_count(S) if by != BY_RULE and by != BY_TARGET else 0)
    if rates.shape[0] > 0:
        service_rates(T, S, rates, np.empty_like(rates))
    threshold = _token_threshold(T, S, now, rates) if by == BY_TOKENS else 0.0
    first, first_level, first_key = -1, np.inf, np.inf  # the rule's pick among the feasible jobs
    reference, reference_work = -1, np.inf  # SJF's pick among all ready jobs
    hopeless, hopeless_work = -1, np.inf  # the hopeless job with the least remaining work
    kept = np.empty(access.ready_count(S) if admit != ADMIT_ALL else 0, dtype=np.bool_)
    if admit != ADMIT_ALL:
        admitted(T, S, admit == ADMIT_ACCEPT, allowed, kept)
    # the feasible ready jobs in ready order: the holding forms scan them again, and under
    # overload most ready jobs are hopeless
    feasible_jobs = np.empty(access.ready_count(S), dtype=np.int64)
    feasible_count = 0
    for i in range(access.ready_count(S)):
        job = access.ready_job(S, i)
        remaining = T.remaining_work[access.job_next_row(S, job)]
        deadline = access.job_deadline(S, job)
        if _before(remaining, job, reference_work, reference):
            reference, reference_work = job, remaining
        if feasible(now, remaining, deadline) and (admit == ADMIT_ALL or kept[i]):
            feasible_jobs[feasible_count] = job
            feasible_count += 1
            key = remaining if rank == RANK_SJF else deadline
            level = _precedence(S, job, by, now, threshold, rates)
            if _ahead(level, key, job, first_level, first_key, first):
                first, first_level, first_key = job, level, key
        elif _before(remaining, job, hopeless_work, hopeless):
            hopeless, hopeless_work = job, remaining
    preferred = first if first >= 0 else reference
    if patient or gated or bandwidth:
        running_demand, busy_left, _ = scan_instances(S)
        # the bandwidth placement waits wherever waiting is possible; the gated forms where the
        # agent's mask lets them
        candidates = feasible_jobs[:feasible_count]
        may_wait = (
            access.can_wait(S)
            if bandwidth and not gated
            else _may_wait(T, S, candidates, hopeless, running_demand, allowed)
        )
        gated = gated and not (ordered and not may_wait)
        args = (patient, gated, running_demand, busy_left, allowed, bandwidth)
        for job in (first, reference):
            if job >= 0:
                target = _target(T, S, job, *args)
                if target >= 0:
                    return job, target
        # the other feasible jobs, by precedence class then least remaining work; where a job
        # would start depends on its layer row alone (`targets`: UNKNOWN until asked), and the
        # ready jobs share few rows
        targets = np.full(T.latency.shape[0], UNKNOWN, dtype=np.int64)
        other, other_level, other_work, other_target = -1, np.inf, np.inf, -1
        for job in candidates:
            row = access.job_next_row(S, job)
            remaining = T.remaining_work[row]
            level = _precedence(S, job, by, now, threshold, rates)
            if _ahead(level, remaining, job, other_level, other_work, other):
                if targets[row] == UNKNOWN:
                    targets[row] = _target(T, S, job, *args)
                target = targets[row]
                if target >= 0:
                    other, other_level, other_work, other_target = job, level, remaining, target
        if other < 0 and hopeless >= 0:
            other, other_target = hopeless, _target(T, S, hopeless, *args)
        if other >= 0 and other_target >= 0:
            return other, other_target
        if may_wait:
            return -1, -1
    return preferred, fastest_idle(T, S, access.job_next_row(S, preferred), allowed)


@njit(cache=True)
def run_rule(
    T: Tables,
    S: State,
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
    """Simulate to the end (or to a full timeline buffer) deciding with a rule baseline, which
    reads the costs through `view` (its placement's, `Placement.tables`)."""
    T, S, view, out_job, out_acc, allowed = borrowed((T, S, view, out_job, out_acc, allowed))
    while True:
        status = advance(T, S)
        if status != STATUS_DECISION:
            return status
        out_job[0], out_acc[0] = choose(
            view, S, rank, patient, gated, ordered, by, admit, allowed, bandwidth
        )
        apply_decision(T, S, out_job, out_acc, 1 if out_job[0] >= 0 else 0)


# The cached kernels embed the engine's accessors, the triage tests and the placement: recompile
# on their edits.
jit_cache.refresh(
    run_rule,
    (engine_kernels, access, triage, heuristic_kernels, placement, sys.modules[__name__]),
    stamp="relmas-policies-rules.sha256",
)


class RuleBaseline(Policy):
    """A rule baseline: its parts (`catalog.RuleParts`: its ranking among feasible jobs, what it
    holds back, the precedence before its order, which feasible jobs it keeps) and where it starts
    layers (`placement`, `Placement.parse`'s forms: a parameter of the kernel, not a policy of its
    own)."""

    def __init__(self, parts: RuleParts, seed: int = 0, placement: str | Placement = ALL) -> None:
        self.parts = parts
        self.name = parts.name
        self.seed = seed  # deterministic: accepted like every policy's
        self.placement = Placement.parse(placement)

    def reset(self, engine: Engine) -> None:
        view, allowed, bandwidth = self.placed(engine.tables)
        self._view, self._where = view, (allowed, bandwidth)
        self._choose = engine_kernels.entry_point(
            choose, self._view, engine.state, *self.parameters, *self._where
        )
        self._out = (np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64))

    def placed(self, tables: CostTables) -> tuple[Tables, np.ndarray, bool]:
        """(the rule's view of the engine's cost `tables`, the types it may start layers on,
        whether it places by the bandwidth): its placement as `choose` takes it."""
        allowed = self.placement.allowed(tables.types)
        return self.placement.tables(tables, allowed), allowed, self.placement.bandwidth

    @property
    def parameters(self) -> tuple[int, bool, bool, bool, int, int]:
        """(rank, patient, gated, ordered, by, admit): `choose`'s arguments after the engine's
        arrays and before the placement's."""
        parts = self.parts
        rank, by = RANKS.index(parts.rank), PRECEDENCES.index(parts.by)
        return rank, parts.patient, parts.gated, parts.ordered, by, ADMITS.index(parts.admit)

    def decide(self, view: DecisionView) -> list[tuple[int, int]]:
        job, accelerator = self._choose(
            self._view, view.engine.state, *self.parameters, *self._where
        )
        return [] if job < 0 else [(int(job), int(accelerator))]

    def kernel_arguments(self) -> tuple[object, ...]:
        """What `run_rule` takes after the engine's tables and state (after `reset`): a fused
        loop that runs this rule with more (`relmas.rl.keeper.run_kept_rule`) takes the same."""
        return (self._view, *self._out, *self.parameters, *self._where)

    def run_to_completion(self, engine: Engine) -> bool:
        engine.run_jitted(run_rule, *self.kernel_arguments())
        return True


def register_rule(parts: RuleParts) -> None:
    """Make the rule baseline of `parts` available under its derived name (it must be in the
    catalog: `catalog.RULES` declares every rule once)."""
    register(parts.name)(partial(RuleBaseline, parts))


for _parts in catalog.rules():
    register_rule(_parts)
