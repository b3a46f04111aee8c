"""Rollout improvement of a rule baseline: how much one step of policy iteration lifts it.

Bertsekas's rollout algorithm with a truncated horizon, as a measurement of headroom
(benchmarks/bench_headroom.py, docs/relmas.md "Headroom"): if no single-decision deviation from a
rule pays over the next few job latencies, a learner whose actions are those deviations has little
to find beyond the rule. It is not a policy of the study: a decision simulates up to a few hundred
decisions per candidate.

The rule runs with its placement (`relmas.policies.placement`: a set of types or the bandwidth
rule), so the base can be the agent's teacher, the best rule with its placement on validation.
At each decision point the candidates are the agent's slots (`relmas.rl.observation`) over every
ready job: the rule's own start, the reference (least remaining work), the `candidates` feasible
jobs with the least remaining work and the `candidates` with the earliest deadlines, the hopeless
job with the least remaining work — each on its fastest idle instance of the placement's types,
with `per_type` also on the first idle instance of every other type, those outside the placement
included (one-step placement deviations) — and waiting whenever an event is still to come (a
superset of the agent's wait mask). Each is applied to a copy of the state, which the rule then
runs for `horizon_s`; the copy sees only the jobs arrived so far unless `clairvoyant`. The
candidate whose rollout ends with the most met deadlines minus certain misses among the jobs
known at the decision is taken, the rule's own start on ties. Each rollout stops at the first
event at or after the horizon and is scored there. Feasibility, in the ranking and the score, is
the rule's view of it (its placement's types), as the rule continues every rollout there.
"""

from __future__ import annotations

import sys

import numpy as np
from numba import njit

from relmas import catalog
from relmas.hw import jit_cache
from relmas.policies import heuristic_kernels, make_policy, placement, triage
from relmas.policies import rules as rules_module
from relmas.policies.placement import ALL, Placement
from relmas.policies.rules import RuleBaseline, choose
from relmas.policies.triage import fastest_idle, feasible
from relmas.sim import access, engine_kernels
from relmas.sim.engine import Engine
from relmas.sim.engine_kernels import (
    STATUS_DECISION,
    STATUS_STALLED,
    State,
    Tables,
    advance,
    borrowed,
    on_time,
)
from relmas.sim.engine_kernels import apply_decision as apply

WAIT = -1  # the candidate that starts nothing
NOWHERE = -2  # a job's target when no instance of the rule's placement is idle
FEASIBLE, HOPELESS, ANY = 1, 0, -1  # which ready jobs a ranking looks at


@njit(cache=True)
def _score(T: Tables, D: State, known: int) -> float:
    """Met deadlines minus certain misses (dropped past a firm deadline, finished late, or no
    longer feasible) among the first `known` jobs (by arrival)."""
    now = access.now(D)
    score = 0.0
    for job in range(known):
        deadline = access.job_deadline(D, job)
        finish = access.job_finish(D, job)
        if access.job_dropped(D, job):
            score -= 1.0
        elif finish >= 0.0:
            score += 1.0 if on_time(finish, deadline) else -1.0
        elif not feasible(now, T.remaining_work[access.job_next_row(D, job)], deadline):
            score -= 1.0
    return score


@njit(cache=True)
def _rollout(
    T: Tables,
    view: Tables,
    S: State,
    D: State,
    job: int,
    accelerator: int,
    end: float,
    rule: tuple[int, bool, bool, bool, int, int, np.ndarray, bool],
    clairvoyant: bool,
    out_job: np.ndarray,
    out_acc: np.ndarray,
) -> float:
    """The score of starting `job` on `accelerator` (or waiting) and then following `rule`, which
    reads the costs through `view`, until `end`, simulated on D, a copy of S."""
    access.copy_state(S, D)
    known = access.arrived_count(D)
    if not clairvoyant:
        access.stop_arrivals(D)
    out_job[0], out_acc[0] = job, accelerator
    apply(T, D, out_job, out_acc, 0 if job == WAIT else 1)
    while True:
        status = advance(T, D)
        if status == STATUS_STALLED:
            return -np.inf  # waited with nothing to come
        if status != STATUS_DECISION or access.now(D) >= end:
            return _score(view, D, known)
        out_job[0], out_acc[0] = choose(view, D, *rule)
        apply(T, D, out_job, out_acc, 1 if out_job[0] >= 0 else 0)


@njit(cache=True)
def _least(T: Tables, S: State, by_deadline: bool, which: int, taken: np.ndarray) -> int:
    """The ready job not in `taken` with the least remaining work (or the earliest deadline) among
    the `which` ones (FEASIBLE, HOPELESS or ANY); -1 if none."""
    now = access.now(S)
    best, best_key = -1, np.inf
    for i in range(access.ready_count(S)):
        job = access.ready_job(S, i)
        remaining = T.remaining_work[access.job_next_row(S, job)]
        deadline = access.job_deadline(S, job)
        if which != ANY and feasible(now, remaining, deadline) != (which == FEASIBLE):
            continue
        if np.any(taken == job):
            continue
        key = deadline if by_deadline else remaining
        if best < 0 or key < best_key or (key == best_key and job < best):
            best, best_key = job, key
    return best


@njit(cache=True)
def _candidates(T: Tables, S: State, first: int, k: int, out: np.ndarray) -> int:
    """Fill `out` with the distinct candidate jobs, `first` (the rule's start, if any) first;
    returns their count."""
    out[:] = -1
    n = 0
    if first >= 0:
        out[n] = first
        n += 1
    for by_deadline in (False, True):
        for _ in range(k):
            job = _least(T, S, by_deadline, FEASIBLE, out)
            if job < 0:
                break
            out[n] = job
            n += 1
    for job in (_least(T, S, False, ANY, out[:0]), _least(T, S, False, HOPELESS, out[:0])):
        if job >= 0 and not np.any(out[:n] == job):
            out[n] = job
            n += 1
    return n


@njit(cache=True)
def run_rollout(
    T: Tables,
    S: State,
    D: State,
    view: Tables,
    rule: tuple[int, bool, bool, bool, int, int, np.ndarray, bool],
    horizon_s: float,
    candidates: int,
    clairvoyant: bool,
    per_type: bool,
    stats: np.ndarray,
) -> int:
    """Simulate to the end deciding by rollouts of `rule` (`RuleBaseline.parameters` then its
    placement), which reads the costs through `view` (`RuleBaseline.placed`); D is scratch state
    of S's shape. stats[0] counts the decisions that left the rule, stats[1] all."""
    T, S, D, view, rule, stats = borrowed((T, S, D, view, rule, stats))
    out_job, out_acc = np.zeros(1, np.int64), np.zeros(1, np.int64)
    jobs = np.empty(2 * candidates + 4, np.int64)  # + rule, reference, hopeless, wait
    allowed = rule[6]
    while True:
        status = advance(T, S)
        if status != STATUS_DECISION:
            return status
        first, first_acc = choose(view, S, *rule)
        end = access.now(S) + horizon_s
        n = _candidates(view, S, first, candidates, jobs)
        args = (T, view, S, D)
        best = _rollout(*args, first, first_acc, end, rule, clairvoyant, out_job, out_acc)
        chosen, chosen_acc = first, first_acc
        if first >= 0 and access.can_wait(S):
            jobs[n] = WAIT
            n += 1
        for c in range(n):
            job = jobs[c]
            if job == WAIT:
                target = WAIT
            else:
                target = fastest_idle(view, S, access.job_next_row(S, job), allowed)
                if target < 0:  # no idle instance of the placement's types
                    target = NOWHERE
            if target != NOWHERE and (job != first or target != first_acc):  # first: scored
                value = _rollout(*args, job, target, end, rule, clairvoyant, out_job, out_acc)
                if value > best:
                    best, chosen, chosen_acc = value, job, target
            if not per_type or job == WAIT:
                continue
            for acc in range(access.accelerator_count(S)):
                if _first_idle_of_other_type(S, acc, target):
                    value = _rollout(*args, job, acc, end, rule, clairvoyant, out_job, out_acc)
                    if value > best:
                        best, chosen, chosen_acc = value, job, acc
        if chosen != first or chosen_acc != first_acc:
            stats[0] += 1
        stats[1] += 1
        out_job[0], out_acc[0] = chosen, chosen_acc
        apply(T, S, out_job, out_acc, 0 if chosen == WAIT else 1)


@njit(cache=True)
def _first_idle_of_other_type(S: State, acc: int, target: int) -> bool:
    """`acc` is idle, of another type than `target` (any type if NOWHERE), and the first idle
    instance of its type."""
    if not access.is_idle(S, acc):
        return False
    kind = access.accelerator_type(S, acc)
    if target != NOWHERE and kind == access.accelerator_type(S, target):
        return False
    for other in range(acc):
        if access.is_idle(S, other) and access.accelerator_type(S, other) == kind:
            return False
    return True


# The cached kernels embed the engine's accessors, the triage tests, the placements and the rules:
# recompile on their edits.
jit_cache.refresh(
    run_rollout,
    (
        engine_kernels,
        access,
        triage,
        heuristic_kernels,
        placement,
        rules_module,
        sys.modules[__name__],
    ),
    stamp="relmas-policies-rollout.sha256",
)


def improve_by_rollout(
    engine: Engine,
    rule: str,
    horizon_s: float,
    *,
    placement: str | Placement = ALL,
    candidates: int = 2,
    clairvoyant: bool = False,
    per_type: bool = False,
) -> tuple[int, int]:
    """Run `engine` to the end deciding by rollouts of the rule baseline `rule` with its
    `placement` (`Placement.parse`'s forms); returns (decisions that left the rule, decisions)."""
    if rule not in catalog.placed():
        raise ValueError(f"rollouts follow a rule baseline, not {rule!r}")
    policy = make_policy(rule, placement=placement)
    assert isinstance(policy, RuleBaseline)
    view, allowed, bandwidth = policy.placed(engine.tables)
    stats = np.zeros(2, dtype=np.int64)
    engine.run_jitted(
        run_rollout,
        engine.snapshot(),
        view,
        (*policy.parameters, allowed, bandwidth),
        float(horizon_s),
        int(candidates),
        bool(clairvoyant),
        bool(per_type),
        stats,
    )
    return int(stats[0]), int(stats[1])
