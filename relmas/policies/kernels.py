"""Jitted decision rules of the heuristic policies, and the fused simulate-and-decide loop.

Each heuristic is a *job rule* (which ready job goes first) and an *accelerator rule* (which idle
instance it goes to). `plan` computes one decision, a list of (job, accelerator) pairs filling the
idle instances, without changing the schedule (jobs and instances it picks are only marked
while it plans); `run_heuristic` alternates `advance` and `plan` + `start_layer` entirely in Numba.
The Python stepping path (`Engine.step` with the pairs from `plan`) does exactly the same, so both
paths give the same schedule.

Time-invariant job rules (fcfs, sjf, edf, llf) peek at the engine's ready heap: O(log n) per
assignment. Rules whose order changes with time (prema, sdrm3, planaria, herald) scan the ready
jobs: O(ready jobs) per assignment. Ties always go to the earlier arrival (lower internal job
index).
"""

from __future__ import annotations

import sys

import numpy as np
from numba import njit

from relmas.hw import jit_cache
from relmas.sim import kernels as engine_kernels
from relmas.sim.kernels import (
    AF_RATE,
    AF_WORK,
    AI_JOB,
    AI_PLANNED,
    AI_TYPE,
    JF_DEADLINE,
    JF_ISOLATED,
    JF_PRIORITY,
    JF_READY_SINCE,
    JF_WAITED,
    JI_CURSOR,
    JI_PLANNED,
    SF_NOW,
    SI_DECISIONS,
    SI_HEAP_N,
    SI_IDLE,
    SI_READY_N,
    SI_WAITING,
    STATUS_DECISION,
    State,
    Tables,
    advance,
    heap_push,
    heap_remove,
    refresh_rates,
    start_layer,
)

CODE_FCFS, CODE_SJF, CODE_EDF, CODE_LLF = 0, 1, 2, 3  # job order from the ready heap
CODE_PREMA, CODE_SDRM3, CODE_PLANARIA, CODE_HERALD, CODE_RANDOM = 4, 5, 6, 7, 8
PLANARIA_SLACK_FLOOR_S = 1e-9  # slack of late jobs, so that their score stays finite
PREMA_THRESHOLDS = (9.0, 3.0, 1.0)


def rng_state(seed: int) -> int:
    """A non-zero 64-bit xorshift state from `seed` (splitmix64), for seeded random decisions."""
    mask = (1 << 64) - 1
    z = (seed + 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    z ^= z >> 31
    return z or 1


@njit(cache=True)
def _random_below(S: State, n: int) -> int:
    """Uniform integer in [0, n) from the engine's xorshift64* generator."""
    x = S.rng[0]
    x ^= x >> np.uint64(12)
    x ^= x << np.uint64(25)
    x ^= x >> np.uint64(27)
    S.rng[0] = x
    return int(((x * np.uint64(2685821657736338717)) >> np.uint64(11)) % np.uint64(n))


@njit(cache=True)
def _free(S: State, acc: int) -> bool:
    return S.ai[acc, AI_JOB] < 0 and S.ai[acc, AI_PLANNED] == 0


@njit(cache=True)
def _fastest_free(T: Tables, S: State, job: int) -> int:
    """The free instance with the lowest latency for the job's next layer (ties: lowest index)."""
    row = S.ji[job, JI_CURSOR]
    best = -1
    best_latency = np.inf
    for a in range(S.ai.shape[0]):
        if _free(S, a):
            latency = T.latency[row, S.ai[a, AI_TYPE]]
            if latency < best_latency:
                best, best_latency = a, latency
    return best


@njit(cache=True)
def _random_free(S: State, planned: int) -> int:
    k = _random_below(S, S.si[SI_IDLE] - planned)
    for a in range(S.ai.shape[0]):
        if _free(S, a):
            if k == 0:
                return a
            k -= 1
    return -1


@njit(cache=True)
def _random_job(S: State, planned: int) -> int:
    """A uniformly random unplanned ready job (rejection of the few planned ones)."""
    count = S.si[SI_READY_N]
    if count <= planned:
        return -1
    while True:
        job = S.ready[_random_below(S, count)]
        if S.ji[job, JI_PLANNED] == 0:
            return job


@njit(cache=True)
def _prema_tokens(S: State, job: int, now: float) -> float:
    """priority x (1 + time spent waiting / isolated latency): PREMA's tokens, accrued continuously,
    equal to the sum of the per-decision increments priority x waited / isolated."""
    waited = S.jf[job, JF_WAITED] + now - S.jf[job, JF_READY_SINCE]
    return S.jf[job, JF_PRIORITY] * (1.0 + waited / S.jf[job, JF_ISOLATED])


@njit(cache=True)
def _score(T: Tables, S: State, job: int, code: int, alpha: float, now: float) -> float:
    """Higher is served first, for the scanning rules."""
    row = S.ji[job, JI_CURSOR]
    remaining = T.remaining_work[row]
    if code == CODE_PREMA:
        return -remaining
    to_deadline = S.jf[job, JF_DEADLINE] - now
    if code == CODE_SDRM3:
        urgency = 1.0 if to_deadline <= 0.0 else min(1.0, remaining / to_deadline)
        waited = now - S.jf[job, JF_READY_SINCE]
        return urgency + alpha * waited / T.best_latency[row]
    slack = max(to_deadline - remaining, PLANARIA_SLACK_FLOOR_S)
    return S.jf[job, JF_PRIORITY] / (slack * remaining)


@njit(cache=True)
def _scan(T: Tables, S: State, code: int, alpha: float) -> int:
    """The unplanned ready job with the highest score (prema: among those at the threshold)."""
    now = S.sf[SF_NOW]
    threshold = -np.inf
    if code == CODE_PREMA:
        most = -np.inf
        for k in range(S.si[SI_READY_N]):
            job = S.ready[k]
            if S.ji[job, JI_PLANNED] == 0:
                most = max(most, _prema_tokens(S, job, now))
        for level in PREMA_THRESHOLDS:
            if most >= level:
                threshold = level
                break
    best = -1
    best_score = -np.inf
    for k in range(S.si[SI_READY_N]):
        job = S.ready[k]
        if S.ji[job, JI_PLANNED] != 0:
            continue
        if code == CODE_PREMA and _prema_tokens(S, job, now) < threshold:
            continue
        score = _score(T, S, job, code, alpha, now)
        if best < 0 or score > best_score or (score == best_score and job < best):
            best, best_score = job, score
    return best


@njit(cache=True)
def _herald(T: Tables, S: State) -> tuple[int, int]:
    """Earliest-arrived job whose Herald target instance is free, and that instance.

    Load of an instance = time until it is free (its running task at current rates, or the layer
    planned on it in this decision; 0 if free). p* = the instance with the lowest latency for the
    layer (ties: least loaded), q = the least loaded one (ties: lowest latency); the target is q if
    q != p* and latency(q) < 2 latency(p*), else p*. A job whose target is busy waits for it.
    """
    refresh_rates(S)
    accelerators = S.ai.shape[0]
    load = np.zeros(accelerators)
    for a in range(accelerators):
        planned = S.ai[a, AI_PLANNED] - 1
        if planned >= 0:
            load[a] = T.latency[S.ji[planned, JI_CURSOR], S.ai[a, AI_TYPE]]
        elif S.ai[a, AI_JOB] >= 0:
            load[a] = S.af[a, AF_WORK] / S.af[a, AF_RATE]
    best_job, best_acc = -1, -1
    for k in range(S.si[SI_READY_N]):
        job = S.ready[k]
        if S.ji[job, JI_PLANNED] != 0 or (best_job >= 0 and job > best_job):
            continue
        row = S.ji[job, JI_CURSOR]
        p, q = 0, 0
        for a in range(1, accelerators):
            lat = T.latency[row, S.ai[a, AI_TYPE]]
            lat_p = T.latency[row, S.ai[p, AI_TYPE]]
            lat_q = T.latency[row, S.ai[q, AI_TYPE]]
            if lat < lat_p or (lat == lat_p and load[a] < load[p]):
                p = a
            if load[a] < load[q] or (load[a] == load[q] and lat < lat_q):
                q = a
        lat_p = T.latency[row, S.ai[p, AI_TYPE]]
        lat_q = T.latency[row, S.ai[q, AI_TYPE]]
        target = q if q != p and lat_q < 2.0 * lat_p else p
        if _free(S, target):
            best_job, best_acc = job, target
    return best_job, best_acc


@njit(cache=True)
def _select(T: Tables, S: State, code: int, alpha: float, planned: int) -> tuple[int, int]:
    if code <= CODE_LLF:
        if S.si[SI_HEAP_N] == 0:
            return -1, -1
        job = S.heap[0]
        return job, _fastest_free(T, S, job)
    if code == CODE_HERALD:
        return _herald(T, S)
    if code == CODE_RANDOM:
        job = _random_job(S, planned)
        return (job, _random_free(S, planned)) if job >= 0 else (-1, -1)
    job = _scan(T, S, code, alpha)
    return (job, _fastest_free(T, S, job)) if job >= 0 else (-1, -1)


@njit(cache=True)
def plan(
    T: Tables, S: State, code: int, alpha: float, out_job: np.ndarray, out_acc: np.ndarray
) -> int:
    """One decision of heuristic `code`: fill `out_job`/`out_acc`, return the number of pairs."""
    count = 0
    while count < S.si[SI_IDLE]:
        job, acc = _select(T, S, code, alpha, count)
        if job < 0:
            break
        out_job[count] = job
        out_acc[count] = acc
        count += 1
        S.ji[job, JI_PLANNED] = 1
        S.ai[acc, AI_PLANNED] = job + 1
        if code <= CODE_LLF:
            heap_remove(S, job)
    for k in range(count):
        S.ji[out_job[k], JI_PLANNED] = 0
        S.ai[out_acc[k], AI_PLANNED] = 0
        if code <= CODE_LLF:
            heap_push(S, out_job[k])
    return count


@njit(cache=True)
def run_heuristic(
    T: Tables, S: State, code: int, alpha: float, out_job: np.ndarray, out_acc: np.ndarray
) -> int:
    """Simulate to the end (or to a full timeline buffer) deciding with heuristic `code`."""
    while True:
        status = advance(T, S)
        if status != STATUS_DECISION:
            return status
        count = plan(T, S, code, alpha, out_job, out_acc)
        S.si[SI_DECISIONS] += 1
        if count == 0:
            S.si[SI_WAITING] = 1
        for k in range(count):
            start_layer(T, S, out_job[k], out_acc[k])


# The cached fused loop embeds the engine kernels of relmas/sim/kernels.py, whose edits Numba's
# cache would not notice: drop this module's cache when either source changed.
jit_cache.refresh(run_heuristic, (engine_kernels, sys.modules[__name__]))
