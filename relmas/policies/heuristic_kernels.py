"""Jitted decision rules of the heuristic policies, and their state.

Each heuristic is a *job rule* (which ready job goes first) and an *accelerator rule* (which idle
instance it goes to). `plan` computes one decision, a list of (job, accelerator) pairs filling the
idle instances, without changing the schedule (jobs and instances it picks are only marked, in the
policy's own `Planner`, while it plans). `run_heuristic` runs the engine's loop (`advance`, then
`apply_decision` of `plan`'s pairs at each decision point) entirely in Numba; the Python stepping
path (`Engine.step` with the pairs from `plan`) does exactly the same, so both paths give the same
schedule.

Time-invariant job rules (fcfs, sjf, edf, llf) peek at the policy's heap of the ready jobs, kept up
to date from the jobs that became ready since the previous decision point (jobs that started are
dropped when they reach the top): O(log n) per assignment. Rules whose order changes with time
(prema, sdrm3, planaria, herald) scan the ready jobs: O(ready jobs) per assignment. Ties always go
to the earlier arrival (lower internal job index).
"""

from __future__ import annotations

import sys
from typing import NamedTuple

import numpy as np
from numba import njit

from relmas.hw import jit_cache
from relmas.policies import triage
from relmas.policies.triage import feasible
from relmas.sim import access, engine_kernels
from relmas.sim.access import (
    accelerator_count,
    accelerator_type,
    busy_left,
    idle_count,
    is_idle,
    job_arrival,
    job_deadline,
    job_is_ready,
    job_isolated,
    job_next_row,
    job_priority,
    job_ready_since,
    job_waited,
    newly_ready_count,
    newly_ready_job,
    now,
    ready_count,
    ready_job,
    refresh_rates,
)
from relmas.sim.engine_kernels import (
    STATUS_DECISION,
    State,
    Tables,
    advance,
    apply_decision,
    borrowed,
)

CODE_FCFS, CODE_SJF, CODE_EDF, CODE_LLF = 0, 1, 2, 3  # job order from the ready heap
CODE_PREMA, CODE_SDRM3, CODE_PLANARIA, CODE_HERALD, CODE_RANDOM = 4, 5, 6, 7, 8
PREMA_THRESHOLDS = (9.0, 3.0, 1.0)


def rng_state(seed: int) -> int:
    """A non-zero 64-bit xorshift state from `seed` (splitmix64), for seeded random decisions."""
    mask = (1 << 64) - 1
    z = (seed + 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    z ^= z >> 31
    return z or 1


class Planner(NamedTuple):
    """A heuristic's own state beside the engine's (`new_planner`)."""

    key: np.ndarray  # float64[jobs]: heap key of each job in the heap
    heap: np.ndarray  # int64[jobs]: binary heap of ready jobs by (key, job), stale ones lazily out
    heap_pos: np.ndarray  # int64[jobs]: position in `heap`, -1 if absent
    heap_size: np.ndarray  # int64[1]
    planned: np.ndarray  # bool[jobs]: picked in the decision being planned
    planned_on: np.ndarray  # int64[accelerators]: job planned on the instance + 1 (0: none)
    rng: np.ndarray  # uint64[1]: xorshift64* state of the random rule
    out_job: np.ndarray  # int64[accelerators]: the decision's jobs ...
    out_acc: np.ndarray  # int64[accelerators]: ... and their instances


def new_planner(jobs: int, accelerators: int, seed: int) -> Planner:
    """An empty planner for a trace of `jobs` jobs on `accelerators` instances."""
    return Planner(
        key=np.zeros(jobs),
        heap=np.full(jobs, -1, dtype=np.int64),
        heap_pos=np.full(jobs, -1, dtype=np.int64),
        heap_size=np.zeros(1, dtype=np.int64),
        planned=np.zeros(jobs, dtype=np.bool_),
        planned_on=np.zeros(accelerators, dtype=np.int64),
        rng=np.array([rng_state(seed)], dtype=np.uint64),
        out_job=np.zeros(accelerators, dtype=np.int64),
        out_acc=np.zeros(accelerators, dtype=np.int64),
    )


@njit(cache=True)
def _random_below(P: Planner, n: int) -> int:
    """Uniform integer in [0, n) from the planner's xorshift64* generator."""
    x = P.rng[0]
    x ^= x >> np.uint64(12)
    x ^= x << np.uint64(25)
    x ^= x >> np.uint64(27)
    P.rng[0] = x
    return int(((x * np.uint64(2685821657736338717)) >> np.uint64(11)) % np.uint64(n))


# ----------------------------------------------------------------------------- ready heap


@njit(cache=True)
def _heap_less(P: Planner, a: int, b: int) -> bool:
    ka = P.key[a]
    kb = P.key[b]
    return ka < kb or (ka == kb and a < b)


@njit(cache=True)
def _heap_place(P: Planner, i: int, job: int) -> None:
    P.heap[i] = job
    P.heap_pos[job] = i


@njit(cache=True)
def _sift_up(P: Planner, i: int) -> None:
    job = P.heap[i]
    while i > 0:
        parent = (i - 1) >> 1
        other = P.heap[parent]
        if not _heap_less(P, job, other):
            break
        _heap_place(P, i, other)
        i = parent
    _heap_place(P, i, job)


@njit(cache=True)
def _sift_down(P: Planner, i: int) -> None:
    n = P.heap_size[0]
    job = P.heap[i]
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and _heap_less(P, P.heap[child + 1], P.heap[child]):
            child += 1
        if not _heap_less(P, P.heap[child], job):
            break
        _heap_place(P, i, P.heap[child])
        i = child
    _heap_place(P, i, job)


@njit(cache=True)
def _heap_push(P: Planner, job: int) -> None:
    n = P.heap_size[0]
    P.heap_size[0] = n + 1
    _heap_place(P, n, job)
    _sift_up(P, n)


@njit(cache=True)
def _heap_remove(P: Planner, job: int) -> None:
    i = P.heap_pos[job]
    n = P.heap_size[0] - 1
    P.heap_size[0] = n
    P.heap_pos[job] = -1
    if i == n:
        return
    moved = P.heap[n]
    _heap_place(P, i, moved)
    if i > 0 and _heap_less(P, moved, P.heap[(i - 1) >> 1]):
        _sift_up(P, i)
    else:
        _sift_down(P, i)


@njit(cache=True)
def _static_key(T: Tables, S: State, job: int, code: int) -> float:
    """The time-invariant priority key of a ready job for the heap rules (smaller first)."""
    if code == CODE_FCFS:
        return job_arrival(S, job)
    remaining = T.remaining_work[job_next_row(S, job)]
    if code == CODE_SJF:
        return remaining
    if code == CODE_EDF:
        return job_deadline(S, job)
    return job_deadline(S, job) - remaining  # laxity + now, and now is common to all jobs


@njit(cache=True)
def _heap_add(T: Tables, S: State, P: Planner, job: int, code: int) -> None:
    """(Re-)enter a job that became ready, keyed for its next layer."""
    if P.heap_pos[job] >= 0:
        _heap_remove(P, job)
    P.key[job] = _static_key(T, S, job, code)
    _heap_push(P, job)


@njit(cache=True)
def reset_heap(T: Tables, S: State, P: Planner, code: int) -> None:
    """Index the jobs ready now (the rules with a heap; the others need none)."""
    while P.heap_size[0] > 0:
        _heap_remove(P, P.heap[0])
    if code <= CODE_LLF:
        for k in range(ready_count(S)):
            _heap_add(T, S, P, ready_job(S, k), code)


@njit(cache=True)
def _heap_top(S: State, P: Planner) -> int:
    """The unplanned ready job first by the heap's key, -1 if none."""
    while P.heap_size[0] > 0:
        job = P.heap[0]
        if job_is_ready(S, job):
            return job
        _heap_remove(P, job)  # started since it entered
    return -1


@njit(cache=True)
def _free(S: State, P: Planner, acc: int) -> bool:
    return is_idle(S, acc) and P.planned_on[acc] == 0


@njit(cache=True)
def _fastest_free(T: Tables, S: State, P: Planner, job: int) -> int:
    """The free instance with the lowest latency for the job's next layer (ties: lowest index)."""
    row = job_next_row(S, job)
    best = -1
    best_latency = np.inf
    for a in range(accelerator_count(S)):
        if _free(S, P, a):
            latency = T.latency[row, accelerator_type(S, a)]
            if latency < best_latency:
                best, best_latency = a, latency
    return best


@njit(cache=True)
def _random_free(S: State, P: Planner, planned: int) -> int:
    k = _random_below(P, idle_count(S) - planned)
    for a in range(accelerator_count(S)):
        if _free(S, P, a):
            if k == 0:
                return a
            k -= 1
    return -1


@njit(cache=True)
def _random_job(S: State, P: Planner, planned: int) -> int:
    """A uniformly random unplanned ready job (rejection of the few planned ones)."""
    count = ready_count(S)
    if count <= planned:
        return -1
    while True:
        job = ready_job(S, _random_below(P, count))
        if not P.planned[job]:
            return job


@njit(cache=True, inline="always")
def token_growth(S: State, job: int, time: float) -> float:
    """1 + time the job spent waiting ready / its isolated latency: what PREMA's tokens are per
    unit of priority, accrued continuously (the sum of the per-decision increments waited /
    isolated). The target-aware token rule scales it by a tenant's deficit instead."""
    waited = job_waited(S, job) + time - job_ready_since(S, job)
    return 1.0 + waited / job_isolated(S, job)


@njit(cache=True, inline="always")
def _prema_tokens(S: State, job: int, time: float) -> float:
    """priority x token_growth: PREMA's tokens."""
    return job_priority(S, job) * token_growth(S, job, time)


@njit(cache=True, inline="always")
def _score(T: Tables, S: State, job: int, code: int, alpha: float, time: float) -> float:
    """Higher is served first, for the scanning rules."""
    row = job_next_row(S, job)
    remaining = T.remaining_work[row]
    if code == CODE_PREMA:
        return -remaining
    deadline = job_deadline(S, job)
    to_deadline = deadline - time
    if code == CODE_SDRM3:
        # past the deadline the urgency is negative, -inf at it (the late side's limit)
        if to_deadline > 0.0:
            urgency = min(1.0, remaining / to_deadline)
        elif to_deadline == 0.0:
            urgency = -np.inf
        else:
            urgency = remaining / to_deadline
        waited = time - job_ready_since(S, job)
        return urgency + alpha * waited / T.best_latency[row]
    # planaria: the feasible jobs by priority / time to deadline (> 0), then the late ones by
    # priority / remaining work, scored -remaining / priority < 0 to rank after every feasible one
    priority = job_priority(S, job)
    if feasible(time, remaining, deadline):
        return priority / to_deadline
    return -remaining / priority


@njit(cache=True)
def _prema(T: Tables, S: State, P: Planner) -> int:
    """PREMA's pick: of the unplanned ready jobs whose tokens reach the highest threshold that the
    most tokens reach (all of them below the lowest), the one with the least remaining work. One
    pass: the best job at or above each threshold is kept, and the threshold chosen at the end."""
    time = now(S)
    levels = len(PREMA_THRESHOLDS)
    best = np.full(levels + 1, -1, dtype=np.int64)  # at or above each threshold, then any
    best_score = np.full(levels + 1, -np.inf)
    most = -np.inf
    for k in range(ready_count(S)):
        job = ready_job(S, k)
        if P.planned[job]:
            continue
        tokens = _prema_tokens(S, job, time)
        most = max(most, tokens)
        score = _score(T, S, job, CODE_PREMA, 0.0, time)
        for level in range(levels + 1):
            if level < levels and tokens < PREMA_THRESHOLDS[level]:
                continue
            if _better(score, job, best_score[level], best[level]):
                best[level], best_score[level] = job, score
    for level in range(levels):
        if most >= PREMA_THRESHOLDS[level]:
            return best[level]
    return best[levels]


@njit(cache=True)
def _better(score: float, job: int, best_score: float, best: int) -> bool:
    """A higher score first, ties to the earlier arrival (the lower job index)."""
    return best < 0 or score > best_score or (score == best_score and job < best)


@njit(cache=True)
def _scan(T: Tables, S: State, P: Planner, code: int, alpha: float) -> int:
    """The unplanned ready job with the highest score (prema: among those at the threshold)."""
    if code == CODE_PREMA:
        return _prema(T, S, P)
    time = now(S)
    best = -1
    best_score = -np.inf
    for k in range(ready_count(S)):
        job = ready_job(S, k)
        if P.planned[job]:
            continue
        score = _score(T, S, job, code, alpha, time)
        if _better(score, job, best_score, best):
            best, best_score = job, score
    return best


@njit(cache=True)
def _herald(T: Tables, S: State, P: Planner) -> tuple[int, int]:
    """Earliest-arrived job whose Herald target instance is free, and that instance; a job whose
    target is busy waits for it.

    Load of an instance = time until it is free (its running task at current rates, or the layer
    planned on it in this decision; 0 if free). p* = the instance with the lowest latency for the
    job's next layer (ties: least loaded), q = the least loaded one (ties: lowest latency); the
    target is q if q != p* and latency(q) < 2 latency(p*), else p*. (One kernel: the loads as an
    array returned by a helper cost a quarter more time.)
    """
    refresh_rates(S)
    load = np.zeros(accelerator_count(S))
    for a in range(load.shape[0]):
        planned = P.planned_on[a] - 1
        if planned >= 0:
            load[a] = T.latency[job_next_row(S, planned), accelerator_type(S, a)]
        else:
            load[a] = busy_left(S, a)
    best_job, best_acc = -1, -1
    # the target depends on the job's layer row alone, and the ready jobs share few rows
    targets = np.full(T.latency.shape[0], -1, dtype=np.int64)
    for k in range(ready_count(S)):
        job = ready_job(S, k)
        if P.planned[job] or (best_job >= 0 and job > best_job):
            continue
        row = job_next_row(S, job)
        if targets[row] >= 0:
            if _free(S, P, targets[row]):
                best_job, best_acc = job, targets[row]
            continue
        latency = T.latency[row]
        p, q = 0, 0
        for a in range(1, load.shape[0]):
            lat = latency[accelerator_type(S, a)]
            lat_p = latency[accelerator_type(S, p)]
            lat_q = latency[accelerator_type(S, q)]
            if lat < lat_p or (lat == lat_p and load[a] < load[p]):
                p = a
            if load[a] < load[q] or (load[a] == load[q] and lat < lat_q):
                q = a
        lat_p = latency[accelerator_type(S, p)]
        lat_q = latency[accelerator_type(S, q)]
        target = q if q != p and lat_q < 2.0 * lat_p else p
        targets[row] = target
        if _free(S, P, target):
            best_job, best_acc = job, target
    return best_job, best_acc


@njit(cache=True)
def _select(
    T: Tables, S: State, P: Planner, code: int, alpha: float, planned: int
) -> tuple[int, int]:
    if code <= CODE_LLF:
        job = _heap_top(S, P)
        return (job, _fastest_free(T, S, P, job)) if job >= 0 else (-1, -1)
    if code == CODE_HERALD:
        return _herald(T, S, P)
    if code == CODE_RANDOM:
        job = _random_job(S, P, planned)
        return (job, _random_free(S, P, planned)) if job >= 0 else (-1, -1)
    job = _scan(T, S, P, code, alpha)
    return (job, _fastest_free(T, S, P, job)) if job >= 0 else (-1, -1)


@njit(cache=True)
def plan(T: Tables, S: State, P: Planner, code: int, alpha: float) -> int:
    """One decision of heuristic `code`: fills `P.out_job`/`P.out_acc`, returns the pairs' count."""
    if code <= CODE_LLF:
        for k in range(newly_ready_count(S)):
            _heap_add(T, S, P, newly_ready_job(S, k), code)
    count = 0
    while count < idle_count(S):
        job, acc = _select(T, S, P, code, alpha, count)
        if job < 0:
            break
        P.out_job[count] = job
        P.out_acc[count] = acc
        count += 1
        P.planned[job] = True
        P.planned_on[acc] = job + 1
        if code <= CODE_LLF:
            _heap_remove(P, job)
    for k in range(count):
        P.planned[P.out_job[k]] = False
        P.planned_on[P.out_acc[k]] = 0
        if code <= CODE_LLF:
            _heap_push(P, P.out_job[k])
    return count


@njit(cache=True)
def run_heuristic(T: Tables, S: State, P: Planner, code: int, alpha: float) -> int:
    """Simulate to the end (or to a full timeline buffer) deciding with heuristic `code`."""
    T, S, P = borrowed((T, S, P))
    while True:
        status = advance(T, S)
        if status != STATUS_DECISION:
            return status
        apply_decision(T, S, P.out_job, P.out_acc, plan(T, S, P, code, alpha))


# The cached kernels embed the engine's and the accessors', whose edits Numba's cache would not
# notice: drop this module's cache when any of their sources changed.
jit_cache.refresh(run_heuristic, (engine_kernels, access, triage, sys.modules[__name__]))
