"""GACER-like regulator (Yu et al., arXiv 2304.11745): operator resizing and reordering, online.

GACER regulates the concurrency of several tenants' DNNs on one GPU at operator granularity: it
cuts big operators into pieces that fit the free resources (resizing), reorders the operators of
the concurrent models (scheduling), and picks the granularity with a low-cost search. Here the
"resources" are the system's accelerator instances and its shared off-chip bandwidth, and the
pieces are a layer cut along output channels (K) or output rows (Y), costed by the cost model
(`relmas profile --pieces`, `relmas.sim.costs.PieceTables`).

At each decision point `regulate` (one jitted call) searches a *plan* of the look-ahead window,
the `window` most urgent ready jobs: those that can still meet their deadline by least laxity
(deadline - now - remaining work), then the late ones by least remaining work (triage: a job that
will be late anyway must not take the place of one that can still make it):

- a plan is an order of the window's jobs and a split variant for each job's next layer (jobs
  whose layer is already cut keep their variant and plan their remaining pieces);
- it is decoded by list scheduling: in plan order, each piece goes to the instance where it ends
  first (instances free now or when their running task ends at current rates), and off-chip
  traffic is a shared server: a layer cannot end before all bytes planned up to it (plus the
  running tasks' remaining bytes) have crossed the bandwidth. A job's estimated finish is its
  layer's end plus its remaining work after it (best types, full bandwidth);
- cost, lexicographic: estimated deadline misses in the window, then the sum of estimated
  finishes (GACER's total latency);
- search: hill climbing from the window's order with every layer whole: change one job's variant,
  or swap two adjacent jobs, keep any improvement, until a pass improves nothing or
  `max_evaluations` plans were decoded. The result depends only on the state (no time budget);
- the decision starts the pieces that the best plan puts on idle instances now; pieces planned
  on busy instances wait for a later decision (other jobs may interleave with them), and an idle
  instance that the plan leaves empty stays idle until the next event.

Without piece tables (`CostTables.pieces` None) the only variant is the whole layer and the policy
only reorders. Its cost per decision is the wall time of `decide` (`decision_us`).
"""

from __future__ import annotations

import sys
from typing import NamedTuple

import numpy as np
from numba import njit

from relmas.hw import jit_cache
from relmas.policies.base import Policy, register
from relmas.sim import access, engine_kernels
from relmas.sim.access import (
    accelerator_count,
    accelerator_type,
    bandwidth_capacity,
    busy_left,
    is_idle,
    job_deadline,
    job_next_row,
    job_pieces_left,
    job_split,
    now,
    ready_count,
    ready_job,
    refresh_rates,
    running_job,
    task_demand,
    task_work_left,
)
from relmas.sim.engine import DecisionView, Engine
from relmas.sim.engine_kernels import Pieces, State, Tables, borrowed, entry_point


class _Window(NamedTuple):
    """What a decision plans from: the instances now, and the window's jobs (slots)."""

    types: np.ndarray  # int64[instances]: accelerator type
    free0: np.ndarray  # float64[instances]: time until free (0: idle)
    idle: np.ndarray  # bool[instances]
    bytes0: float  # bytes the running tasks still move
    capacity: float  # B/s
    rows: np.ndarray  # int64[slots]: the job's next layer
    first: np.ndarray  # int64[slots]: its first piece not started yet
    fixed: np.ndarray  # int64[slots]: its split variant if a piece started, else -1
    sibling_end: np.ndarray  # float64[slots]: when its started pieces end
    rem_after: np.ndarray  # float64[slots]: its remaining work after this layer
    slack: np.ndarray  # float64[slots]: time to its deadline


@njit(cache=True)
def _window_jobs(T: Tables, S: State, size: int) -> np.ndarray:
    """The `size` most urgent ready jobs: those that can still meet their deadline (laxity =
    deadline - now - remaining work >= 0) by least laxity, then the late ones by least remaining
    work (ties: lower index). Kept as two ranked lists of at most `size` (most ready jobs are
    neither: sorting them all cost more than the rest of a decision)."""
    time = now(S)
    n = ready_count(S)
    m = min(size, n)
    first_key, first_job = np.empty(m), np.full(m, -1, dtype=np.int64)
    late_key, late_job = np.empty(m), np.full(m, -1, dtype=np.int64)
    firsts, lates = 0, 0
    for k in range(n):
        job = ready_job(S, k)
        remaining = T.remaining_work[job_next_row(S, job)]
        laxity = job_deadline(S, job) - time - remaining
        if laxity >= 0.0:
            firsts = _ranked_insert(first_key, first_job, firsts, laxity, job)
        else:
            lates = _ranked_insert(late_key, late_job, lates, remaining, job)
    taken = min(firsts, m)
    return np.concatenate((first_job[:taken], late_job[: min(lates, m - taken)]))


@njit(cache=True, inline="always")
def _ranked_insert(keys: np.ndarray, jobs: np.ndarray, count: int, key: float, job: int) -> int:
    """Insert (key, job) into the ascending list `keys`/`jobs` of `count` entries, capacity
    len(keys), if it ranks (ties: lower job first); returns the new count."""
    capacity = keys.shape[0]
    if capacity == 0:
        return count
    if count == capacity and not (
        key < keys[count - 1] or (key == keys[count - 1] and job < jobs[count - 1])
    ):
        return count
    i = min(count, capacity - 1)
    while i > 0 and (key < keys[i - 1] or (key == keys[i - 1] and job < jobs[i - 1])):
        keys[i] = keys[i - 1]
        jobs[i] = jobs[i - 1]
        i -= 1
    keys[i] = key
    jobs[i] = job
    return min(count + 1, capacity)


@njit(cache=True)
def _window(T: Tables, P: Pieces, S: State, jobs: np.ndarray) -> _Window:
    refresh_rates(S)
    accelerators = accelerator_count(S)
    types = np.empty(accelerators, dtype=np.int64)
    free0 = np.zeros(accelerators)
    idle = np.zeros(accelerators, dtype=np.bool_)
    bytes0 = 0.0
    for a in range(accelerators):
        types[a] = accelerator_type(S, a)
        if is_idle(S, a):
            idle[a] = True
        else:
            free0[a] = busy_left(S, a)
            bytes0 += task_work_left(S, a) * task_demand(S, a)
    m = jobs.shape[0]
    rows = np.empty(m, dtype=np.int64)
    first = np.zeros(m, dtype=np.int64)
    fixed = np.full(m, -1, dtype=np.int64)
    sibling_end = np.zeros(m)
    rem_after = np.empty(m)
    slack = np.empty(m)
    for i in range(m):
        job = jobs[i]
        rows[i] = job_next_row(S, job)
        rem_after[i] = T.remaining_work[rows[i] + 1]
        slack[i] = job_deadline(S, job) - now(S)
        left = job_pieces_left(S, job)
        if left > 0:
            fixed[i] = job_split(S, job)
            first[i] = P.count[rows[i], fixed[i]] - left
            for a in range(accelerators):
                if running_job(S, a) == job:
                    sibling_end[i] = max(sibling_end[i], free0[a])
    capacity = bandwidth_capacity(S)
    return _Window(
        types, free0, idle, bytes0, capacity, rows, first, fixed, sibling_end, rem_after, slack
    )


@njit(cache=True, inline="always")
def _decode(
    P: Pieces, W: _Window, order: np.ndarray, variant: np.ndarray, out: np.ndarray
) -> tuple[int, float, int]:
    """List-schedule the plan (order, variant): (estimated misses, sum of estimated finishes,
    pieces started now). Pieces started now go to `out` as (window slot, instance) rows."""
    free = W.free0.copy()
    moved = W.bytes0
    misses = 0
    total = 0.0
    now_count = 0
    for i in order:
        row, v = W.rows[i], variant[i]
        end = W.sibling_end[i]
        for piece in range(W.first[i], P.count[row, v]):
            column = P.offset[v] + piece
            best, best_end = -1, np.inf
            for a in range(free.shape[0]):
                finish = free[a] + P.latency[row, column, W.types[a]]
                if finish < best_end:
                    best, best_end = a, finish
            if free[best] == 0.0 and W.idle[best]:
                out[now_count, 0] = i
                out[now_count, 1] = best
                now_count += 1
            free[best] = best_end
            moved += P.demand[row, column, W.types[best]] * P.latency[row, column, W.types[best]]
            end = max(end, best_end)
        end = max(end, moved / W.capacity)
        finish = end + W.rem_after[i]
        total += finish
        if finish > W.slack[i]:
            misses += 1
    return misses, total, now_count


@njit(cache=True, inline="always")
def _better(a: tuple[int, float, int], b: tuple[int, float, int]) -> bool:
    """Plan cost a below b: fewer estimated misses, then a lower sum of finishes."""
    return a[0] < b[0] or (a[0] == b[0] and a[1] < b[1])


@njit(cache=True)
def _search(
    P: Pieces,
    W: _Window,
    order: np.ndarray,
    variant: np.ndarray,
    out: np.ndarray,
    max_evaluations: int,
) -> int:
    """Hill-climb (order, variant) in place from the given plan (module doc); returns the plans
    decoded."""
    best = _decode(P, W, order, variant, out)
    evaluations = 1
    improved = True
    while improved and evaluations < max_evaluations:
        improved = False
        for i in range(order.shape[0]):
            if W.fixed[i] >= 0:
                continue
            for v in range(P.count.shape[1]):
                if v == variant[i] or (v > 0 and P.count[W.rows[i], v] < 2):
                    continue
                if evaluations >= max_evaluations:
                    break
                keep = variant[i]
                variant[i] = v
                cost = _decode(P, W, order, variant, out)
                evaluations += 1
                if _better(cost, best):
                    best, improved = cost, True
                else:
                    variant[i] = keep
        for k in range(order.shape[0] - 1):
            if evaluations >= max_evaluations:
                break
            order[k], order[k + 1] = order[k + 1], order[k]
            cost = _decode(P, W, order, variant, out)
            evaluations += 1
            if _better(cost, best):
                best, improved = cost, True
            else:
                order[k], order[k + 1] = order[k + 1], order[k]
    return evaluations


@njit(cache=True)
def regulate(
    T: Tables,
    P: Pieces,
    S: State,
    window: int,
    max_evaluations: int,
    out_job: np.ndarray,
    out_acc: np.ndarray,
    out_split: np.ndarray,
) -> tuple[int, int, int]:
    """One decision: search the plan of the look-ahead window (module doc), write the pieces to
    start now to `out_*`; returns (their count, plans decoded, layers it cuts)."""
    T, P, S, out_job, out_acc, out_split = borrowed((T, P, S, out_job, out_acc, out_split))
    jobs = _window_jobs(T, S, window)
    W = _window(T, P, S, jobs)
    order = np.arange(jobs.shape[0])
    variant = np.where(W.fixed >= 0, W.fixed, 0)
    out = np.empty((W.types.shape[0], 2), dtype=np.int64)
    evaluations = _search(P, W, order, variant, out, max_evaluations)
    _, _, count = _decode(P, W, order, variant, out)
    cuts = 0
    for k in range(count):
        i = out[k, 0]
        out_job[k] = jobs[i]
        out_acc[k] = out[k, 1]
        out_split[k] = variant[i]
        first_piece = out_split[k] > 0 and W.fixed[i] < 0
        if first_piece and jobs[i] not in out_job[:k]:
            cuts += 1
    return count, evaluations, cuts


# The cached kernels embed the engine's accessors: recompile on their edits (an index of a cached
# kernel also names its argument types by module, which Numba cannot read once they move).
jit_cache.refresh(
    regulate, (engine_kernels, access, sys.modules[__name__]), stamp="relmas-policies-gacer.sha256"
)


@register("gacer")
class Gacer(Policy):
    """GACER-like operator resizing + reordering over a look-ahead window (module doc).

    `window`: ready jobs planned per decision (least laxity first); `max_evaluations`: plans
    decoded per decision at most. `evaluations` (plans decoded) and `split_layers` (layers cut
    into pieces) accumulate over a run, for reports.
    """

    name = "gacer"

    def __init__(self, seed: int = 0, window: int = 6, max_evaluations: int = 64) -> None:
        if window < 1 or max_evaluations < 1:
            raise ValueError("window and max_evaluations must be positive")
        self.seed = seed
        self.window = window
        self.max_evaluations = max_evaluations

    def reset(self, engine: Engine) -> None:
        count = len(engine.system.instance_types)
        self._jobs = np.zeros(count, dtype=np.int64)
        self._accelerators = np.zeros(count, dtype=np.int64)
        self._splits = np.zeros(count, dtype=np.int64)
        # The engine's kernel tables and state live as long as the engine, and `regulate` writes
        # its decision into the output arrays: one argument tuple compiles it and feeds every call.
        self._arguments = (
            engine.kernel_tables,
            engine.kernel_pieces,
            engine.state,
            self.window,
            self.max_evaluations,
            self._jobs,
            self._accelerators,
            self._splits,
        )
        self._regulate = entry_point(regulate, *self._arguments)
        self.evaluations = 0
        self.split_layers = 0

    def decide(self, view: DecisionView) -> list[tuple[int, int, int]]:
        count, evaluations, cuts = self._regulate(*self._arguments)
        self.evaluations += evaluations
        self.split_layers += cuts
        return list(
            zip(
                self._jobs[:count].tolist(),
                self._accelerators[:count].tolist(),
                self._splits[:count].tolist(),
                strict=True,
            )
        )
