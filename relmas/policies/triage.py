"""When a job can still meet its deadline, and when a start is held back: the one definition of
*feasible*, *patient* and *gated*.

Read by the agent's observation and mask (`relmas.rl.observation`) and the rule baselines
(`relmas.policies.rules`, the agent's teachers), so that the agent's features and mask and its
teacher apply the same tests (docs/relmas.md, "Holding back"; docs/simulator.md, "Rule
baselines").

- *feasible*: the job's remaining work at full speed on the best types still fits before its
  deadline; a job that is not has certainly missed it (no layer runs faster than its `latency_s`).
- *patient* holds back a start whose layer would end sooner on a busy instance, once its running
  task ends, than on the idle instance it would get (`busy_gain` above `HOLD_TOLERANCE`).
- *gated* holds back a start that would push the running layers' full-speed bandwidth demand
  above the shared bandwidth, while something runs (oversubscription slows every running layer).
- *admitted*: the feasible jobs an admission form keeps when a fluid EDF estimate says they cannot
  all meet their deadlines (`admitted`: Moore-Hodgson's sacrifice or an acceptance test); the
  others are given up as if hopeless.
- a tenant's *rate so far* counts its ready jobs that are not feasible as missed
  (`service_rates`): what a target-aware rule measures a tenant's deficit by.
"""

from __future__ import annotations

import sys

import numpy as np
from numba import njit

from relmas.hw import jit_cache
from relmas.sim import access, engine_kernels
from relmas.sim.engine_kernels import State, Tables

HOLD_TOLERANCE = 1e-6  # log ratio: a busy instance must win beyond float32 rounding (the features)
MISS_TOLERANCE = 1e-9  # relative: a miss is certain only beyond rounding of event times


@njit(cache=True)
def _meets(finish: float, deadline: float) -> bool:
    """Whether a job ending at `finish` meets its deadline, beyond rounding of event times."""
    return finish <= deadline + MISS_TOLERANCE * max(1.0, abs(deadline))


@njit(cache=True)
def feasible(now: float, remaining: float, deadline: float) -> bool:
    """Whether the remaining work at full speed still fits before the deadline (a job that does
    not has certainly missed it)."""
    return _meets(now + remaining, deadline)


@njit(cache=True)
def present_jobs(T: Tables, S: State) -> np.ndarray:
    """int64[]: the arrived jobs neither done nor dropped that can still meet their deadline and
    have a layer left to start after what runs now (the others are the rule's hopeless jobs, or
    end with the task they run): what a keeper plans (`relmas.policies.planner`,
    `relmas.rl.keeper`)."""
    now, arrived = access.now(S), access.arrived_count(S)
    present = np.empty(arrived, dtype=np.int64)
    n = 0
    for job in range(arrived):
        if access.job_finish(S, job) >= 0.0 or access.job_dropped(S, job):
            continue
        row = access.job_next_row(S, job)
        if not feasible(now, T.remaining_work[row], access.job_deadline(S, job)):
            continue
        running = access.job_pending_tasks(S, job) > 0 and access.job_pieces_left(S, job) == 0
        if row + running < access.job_end_row(S, job):
            present[n] = job
            n += 1
    return present[:n]


@njit(cache=True, inline="always")
def fastest_idle(T: Tables, S: State, row: int, allowed: np.ndarray) -> int:
    """The idle instance of an `allowed` type (bool[types]) with the lowest latency for layer
    `row` (ties: lowest index), -1 if none: where a chosen job goes."""
    best = -1
    for a in range(access.accelerator_count(S)):
        if (
            access.is_idle(S, a)
            and allowed[access.accelerator_type(S, a)]
            and (
                best < 0
                or T.latency[row, access.accelerator_type(S, a)]
                < T.latency[row, access.accelerator_type(S, best)]
            )
        ):
            best = a
    return best


@njit(cache=True, inline="always")  # no call overhead per decision
def scan_instances(S: State) -> tuple[float, np.ndarray, np.ndarray]:
    """One pass over the instances: (the running layers' full-speed bandwidth demand, the time
    until each instance is free at current rates, the types of the idle ones). The rates must be
    fresh (`access.refresh_rates`)."""
    instances = access.accelerator_count(S)
    running_demand = 0.0
    busy_left = np.zeros(instances)
    idle_types = np.empty(instances, dtype=np.int64)
    idle = 0
    for a in range(instances):
        if access.is_idle(S, a):
            idle_types[idle] = access.accelerator_type(S, a)
            idle += 1
        else:
            running_demand += access.task_demand(S, a)
            busy_left[a] = access.busy_left(S, a)
    return running_demand, busy_left, idle_types[:idle]


@njit(cache=True, inline="always")
def earliest_finish(
    T: Tables, S: State, row: int, busy_left: np.ndarray, allowed: np.ndarray
) -> float:
    """When layer `row` would end at the earliest on any instance of an `allowed` type, a busy one
    starting it once its running task ends (`busy_left`, at current rates)."""
    best = np.inf
    for a in range(access.accelerator_count(S)):
        kind = access.accelerator_type(S, a)
        if allowed[kind]:
            best = min(best, busy_left[a] + T.latency[row, kind])
    return best


@njit(cache=True)
def busy_gain(latency: float, earliest: float) -> float:
    """log(latency on the target instance / the earliest finish on any instance): above 0 when a
    busy instance would end the layer sooner."""
    return np.log(latency / earliest)


@njit(cache=True)
def waits_for_busy(gain: float) -> bool:
    """*patient*: hold the start back for a busy instance (`gain` from `busy_gain`)."""
    return gain > HOLD_TOLERANCE


@njit(cache=True)
def oversubscribes(running: float, demand: float, capacity: float) -> bool:
    """*gated*: starting a layer demanding `demand` beside the running layers' full-speed demand
    `running` would exceed `capacity` (any common unit; never while nothing runs)."""
    return running > 0.0 and running + demand > capacity


@njit(cache=True)
def _fluid_finish(now: float, work: float, total: float, servers: int) -> float:
    """When a job of remaining `work` ends in the fluid estimate: not before it runs alone at full
    speed, nor before `servers` instances have done the `total` work queued up to it."""
    return now + max(work, total / servers)


@njit(cache=True)
def _on_time(
    edf: np.ndarray,
    kept: np.ndarray,
    work: np.ndarray,
    due: np.ndarray,
    now: float,
    busy: float,
    servers: int,
) -> bool:
    """Whether every `kept` job meets its deadline in the fluid estimate, served in `edf` order
    after the running layers' `busy` work."""
    total = busy
    for c in edf:
        if kept[c]:
            total += work[c]
            if not _meets(_fluid_finish(now, work[c], total, servers), due[c]):
                return False
    return True


@njit(cache=True)
def admitted(T: Tables, S: State, accept: bool, allowed: np.ndarray, kept: np.ndarray) -> None:
    """kept[i]: whether the i-th ready job is feasible and admitted, recomputed from the state.

    The estimate is a fluid of the instances of the `allowed` types (its placement's), already
    busy for their running layers' time left, serving the feasible jobs' remaining work at full
    speed (`T.remaining_work`, the rule's view) in EDF order: job k ends at now + max(its work,
    (the busy time + the kept work up to k) / the instances). Optimistic (full speed, no
    bandwidth sharing), so a job given up would have missed under any real schedule of the kept.
    - sacrifice (`accept` False; Moore-Hodgson's rule, the overload answer of Shepherd's and
      Koren-Shasha's D-over): in EDF order, whenever a kept job misses, give up the kept job with
      the most remaining work up to it (ties: the later in EDF order); on one instance this keeps
      the most jobs on time. O(n^2) at worst, n the feasible ready jobs.
    - accept (Spring's guarantee, RED's acceptance test): in arrival order (job index), admit a
      job only if the admitted set with it stays on time. A job given up may be admitted at a
      later decision, when capacity frees up (RED's recovery). O(n^2).
    """
    now = access.now(S)
    _, busy_left, _ = scan_instances(S)
    servers, busy = 0, 0.0
    for a in range(access.accelerator_count(S)):
        if allowed[access.accelerator_type(S, a)]:
            servers += 1
            busy += busy_left[a]
    ready = access.ready_count(S)
    slot = np.empty(ready, dtype=np.int64)  # the feasible jobs' ready index, job, work, deadline
    jobs = np.empty(ready, dtype=np.int64)
    work = np.empty(ready)
    due = np.empty(ready)
    n = 0
    for i in range(ready):
        kept[i] = False
        job = access.ready_job(S, i)
        remaining = T.remaining_work[access.job_next_row(S, job)]
        deadline = access.job_deadline(S, job)
        if feasible(now, remaining, deadline):
            slot[n], jobs[n], work[n], due[n] = i, job, remaining, deadline
            n += 1
    arrival = np.argsort(jobs[:n])  # job indices are in arrival order
    edf = arrival[np.argsort(due[arrival], kind="mergesort")]  # ties: earlier arrival
    keep = np.zeros(n, dtype=np.bool_)
    if accept:
        for c in arrival:
            keep[c] = True
            keep[c] = _on_time(edf, keep, work, due, now, busy, servers)
    else:
        total = busy
        for k in range(n):
            keep[edf[k]] = True
            total += work[edf[k]]
            if not _meets(_fluid_finish(now, work[edf[k]], total, servers), due[edf[k]]):
                drop = -1
                for c in edf[: k + 1]:
                    if keep[c] and (drop < 0 or work[c] >= work[drop]):
                        drop = c
                keep[drop] = False
                total -= work[drop]
    for c in range(n):
        kept[slot[c]] = keep[c]


@njit(cache=True)
def tenant_decided(T: Tables, S: State, decided: np.ndarray, ready: np.ndarray) -> None:
    """Per tenant: its jobs decided so far into `decided`, met + missed + its ready jobs that can
    no longer meet their deadline; its ready jobs into `ready`. The counts of `service_rates`,
    and of the planner's labels where jobs carry targets (relmas.policies.planner)."""
    now = access.now(S)
    ready[:] = 0.0
    for tenant in range(decided.shape[0]):
        decided[tenant] = access.tenant_met(S, tenant) + access.tenant_missed(S, tenant)
    for i in range(access.ready_count(S)):
        job = access.ready_job(S, i)
        tenant = access.job_tenant(S, job)
        ready[tenant] += 1.0
        remaining = T.remaining_work[access.job_next_row(S, job)]
        if not feasible(now, remaining, access.job_deadline(S, job)):
            decided[tenant] += 1.0


@njit(cache=True)
def service_rates(T: Tables, S: State, rates: np.ndarray, ready: np.ndarray) -> None:
    """Per tenant: its deadline-hit rate so far into `rates`, met / (met + missed + its ready jobs
    that can no longer meet their deadline), 1 while none is decided; its ready jobs into `ready`.

    Why the ready jobs that cannot make it count as missed: the engine counts a soft job's miss
    when it finishes (`access.tenant_achieved`), and a rule that serves the feasible jobs first
    puts the hopeless ones off to the end of a loaded trace, so by the engine's counters alone
    every tenant looks on target until then (measured: docs/relmas.md, "Service levels"). The
    one rate of the target-aware baselines, the agent's service features and its reward."""
    tenant_decided(T, S, rates, ready)  # `rates` holds the decided counts until divided
    for tenant in range(rates.shape[0]):
        decided = rates[tenant]
        rates[tenant] = access.tenant_met(S, tenant) / decided if decided > 0 else 1.0


# The cached kernels embed the engine's accessors: drop their cache when a source changed.
jit_cache.refresh(
    scan_instances,
    (engine_kernels, access, sys.modules[__name__]),
    stamp="relmas-policies-triage.sha256",
)
