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

import numpy as np
from numba import njit

from relmas.hw import jit_cache
from relmas.policies.base import Policy, register
from relmas.sim import kernels as engine_kernels
from relmas.sim.engine import DecisionView, Engine
from relmas.sim.kernels import (
    AF_DEMAND,
    AF_RATE,
    AF_WORK,
    AI_JOB,
    AI_TYPE,
    JF_DEADLINE,
    JI_CURSOR,
    JI_PIECES_LEFT,
    JI_SPLIT,
    SF_CAPACITY,
    SF_NOW,
    SI_READY_N,
    Pieces,
    State,
    Tables,
    entry_point,
    refresh_rates,
)


@njit(cache=True)
def _window(T: Tables, S: State, size: int) -> np.ndarray:
    """The `size` most urgent ready jobs: those that can still meet their deadline (laxity =
    deadline - now - remaining work >= 0) by least laxity, then the late ones by least remaining
    work (ties: lower index)."""
    now = S.sf[SF_NOW]
    n = S.si[SI_READY_N]
    jobs = np.sort(S.ready[:n])
    remaining = np.empty(n)
    laxity = np.empty(n)
    for k in range(n):
        remaining[k] = T.remaining_work[S.ji[jobs[k], JI_CURSOR]]
        laxity[k] = S.jf[jobs[k], JF_DEADLINE] - now - remaining[k]
    feasible = laxity >= 0.0
    first = jobs[feasible][np.argsort(laxity[feasible], kind="mergesort")]
    late = jobs[~feasible][np.argsort(remaining[~feasible], kind="mergesort")]
    return np.concatenate((first, late))[: min(size, n)]


@njit(cache=True)
def _decode(
    P: Pieces,
    types: np.ndarray,
    free0: np.ndarray,
    idle: np.ndarray,
    bytes0: float,
    capacity: float,
    rows: np.ndarray,
    first: np.ndarray,
    sibling_end: np.ndarray,
    rem_after: np.ndarray,
    slack: np.ndarray,
    order: np.ndarray,
    variant: np.ndarray,
    out: np.ndarray,
) -> tuple[int, float, int]:
    """List-schedule the plan (order, variant): (estimated misses, sum of estimated finishes,
    pieces started now). Pieces started now go to `out` as (window slot, instance) rows."""
    free = free0.copy()
    moved = bytes0
    misses = 0
    total = 0.0
    now_count = 0
    for i in order:
        row, v = rows[i], variant[i]
        end = sibling_end[i]
        for piece in range(first[i], P.count[row, v]):
            column = P.offset[v] + piece
            best, best_end = -1, np.inf
            for a in range(free.shape[0]):
                finish = free[a] + P.latency[row, column, types[a]]
                if finish < best_end:
                    best, best_end = a, finish
            if free[best] == 0.0 and idle[best]:
                out[now_count, 0] = i
                out[now_count, 1] = best
                now_count += 1
            free[best] = best_end
            moved += P.demand[row, column, types[best]] * P.latency[row, column, types[best]]
            end = max(end, best_end)
        end = max(end, moved / capacity)
        finish = end + rem_after[i]
        total += finish
        if finish > slack[i]:
            misses += 1
    return misses, total, now_count


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
) -> tuple[int, int]:
    """One decision: search the plan of the look-ahead window (module doc), write the pieces to
    start now to `out_*`; returns (their count, plans decoded)."""
    refresh_rates(S)
    now = S.sf[SF_NOW]
    capacity = S.sf[SF_CAPACITY]
    accelerators = S.ai.shape[0]
    types = S.ai[:, AI_TYPE].copy()
    free0 = np.zeros(accelerators)
    idle = np.zeros(accelerators, dtype=np.bool_)
    bytes0 = 0.0
    for a in range(accelerators):
        if S.ai[a, AI_JOB] < 0:
            idle[a] = True
        else:
            free0[a] = S.af[a, AF_WORK] / S.af[a, AF_RATE]
            bytes0 += S.af[a, AF_WORK] * S.af[a, AF_DEMAND]
    jobs = _window(T, S, window)
    m = jobs.shape[0]
    rows = np.empty(m, dtype=np.int64)
    first = np.zeros(m, dtype=np.int64)
    fixed = np.full(m, -1, dtype=np.int64)
    sibling_end = np.zeros(m)
    rem_after = np.empty(m)
    slack = np.empty(m)
    for i in range(m):
        job = jobs[i]
        rows[i] = S.ji[job, JI_CURSOR]
        rem_after[i] = T.remaining_work[rows[i] + 1]
        slack[i] = S.jf[job, JF_DEADLINE] - now
        left = S.ji[job, JI_PIECES_LEFT]
        if left > 0:
            fixed[i] = S.ji[job, JI_SPLIT]
            first[i] = P.count[rows[i], fixed[i]] - left
            for a in range(accelerators):
                if S.ai[a, AI_JOB] == job:
                    sibling_end[i] = max(sibling_end[i], free0[a])
    order = np.arange(m)
    variant = np.where(fixed >= 0, fixed, 0)
    out = np.empty((accelerators, 2), dtype=np.int64)
    misses, total, _ = _decode(
        P, types, free0, idle, bytes0, capacity, rows, first, sibling_end, rem_after, slack,
        order, variant, out,
    )  # fmt: skip
    evaluations = 1
    improved = True
    while improved and evaluations < max_evaluations:
        improved = False
        for i in range(m):
            if fixed[i] >= 0:
                continue
            for v in range(P.count.shape[1]):
                if v == variant[i] or (v > 0 and P.count[rows[i], v] < 2):
                    continue
                if evaluations >= max_evaluations:
                    break
                keep = variant[i]
                variant[i] = v
                tm, tt, _ = _decode(
                    P, types, free0, idle, bytes0, capacity, rows, first, sibling_end,
                    rem_after, slack, order, variant, out,
                )  # fmt: skip
                evaluations += 1
                if tm < misses or (tm == misses and tt < total):
                    misses, total, improved = tm, tt, True
                else:
                    variant[i] = keep
        for k in range(m - 1):
            if evaluations >= max_evaluations:
                break
            order[k], order[k + 1] = order[k + 1], order[k]
            tm, tt, _ = _decode(
                P, types, free0, idle, bytes0, capacity, rows, first, sibling_end, rem_after,
                slack, order, variant, out,
            )  # fmt: skip
            evaluations += 1
            if tm < misses or (tm == misses and tt < total):
                misses, total, improved = tm, tt, True
            else:
                order[k], order[k + 1] = order[k + 1], order[k]
    _, _, count = _decode(
        P, types, free0, idle, bytes0, capacity, rows, first, sibling_end, rem_after, slack,
        order, variant, out,
    )  # fmt: skip
    for k in range(count):
        i = out[k, 0]
        out_job[k] = jobs[i]
        out_acc[k] = out[k, 1]
        out_split[k] = variant[i]
    return count, evaluations


# The cached search embeds the engine kernels (refresh_rates, state layout constants) of
# relmas/sim/kernels.py: drop its cache when either source changed.
jit_cache.refresh(regulate, (engine_kernels, sys.modules[__name__]), stamp="relmas-gacer.sha256")


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
        count = engine.state.ai.shape[0]
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
        engine = view.engine
        count, evaluations = self._regulate(*self._arguments)
        self.evaluations += evaluations
        jobs = self._jobs[:count]
        new_cut = (self._splits[:count] > 0) & (engine.state.ji[jobs, JI_PIECES_LEFT] == 0)
        self.split_layers += np.unique(jobs[new_cut]).size
        return list(
            zip(
                self._jobs[:count].tolist(),
                self._accelerators[:count].tolist(),
                self._splits[:count].tolist(),
                strict=True,
            )
        )
