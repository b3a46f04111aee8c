"""Numba kernels of the offline genetic algorithm: a plan -> its simulated schedule.

Only the decoding loop is jitted (Numba's sorts and multi-dimensional copies take long to compile
and are cheap in numpy): building plans and restoring the initial state stay in numpy.

A *gene* is one layer of one job (genes are numbered job by job, layer by layer, jobs in the
engine's internal order). A *plan* (built by `relmas.policies.ga_offline.build_plans`) is, per
accelerator instance, the sequence of the genes it runs, in order: `sequence[start[a]:start[a+1]]`
for instance `a`.

The plan is executed by the engine's own kernels (`advance`, `start_layer`): at each decision point
every idle instance starts its next planned layer if that layer's job is ready (arrived, previous
layer finished), and otherwise stays idle (the plan may insert idle time, e.g. to keep an instance
free for an urgent job that arrives later); when nothing starts, the decoder waits for the next
event.
"""

from __future__ import annotations

import sys

import numpy as np
from numba import njit

from relmas.hw import jit_cache
from relmas.sim import kernels as engine_kernels
from relmas.sim.kernels import (
    AI_JOB,
    JI_CURSOR,
    JI_STATE,
    JOB_READY,
    SI_DECISIONS,
    SI_WAITING,
    STATUS_DECISION,
    State,
    Tables,
    advance,
    start_layer,
)


@njit(cache=True)
def plan_starts(
    S: State,
    sequence: np.ndarray,
    start: np.ndarray,
    position: np.ndarray,
    gene_job: np.ndarray,
    gene_row: np.ndarray,
    out_job: np.ndarray,
    out_acc: np.ndarray,
) -> int:
    """One decision: every idle instance whose next planned layer is ready starts it.

    Fills `out_job`/`out_acc`, returns the number of pairs, and moves the instances' positions in
    their sequences past them (the caller starts them).
    """
    count = 0
    for a in range(S.ai.shape[0]):
        if S.ai[a, AI_JOB] >= 0 or position[a] == start[a + 1]:
            continue
        g = sequence[position[a]]
        job = gene_job[g]
        if S.ji[job, JI_STATE] == JOB_READY and S.ji[job, JI_CURSOR] == gene_row[g]:
            out_job[count] = job
            out_acc[count] = a
            position[a] += 1
            count += 1
    return count


@njit(cache=True)
def run_plan(
    T: Tables,
    S: State,
    sequence: np.ndarray,
    start: np.ndarray,
    position: np.ndarray,
    gene_job: np.ndarray,
    gene_row: np.ndarray,
    out_job: np.ndarray,
    out_acc: np.ndarray,
) -> int:
    """Simulate to the end (or to a full timeline buffer) following the plan."""
    while True:
        status = advance(T, S)
        if status != STATUS_DECISION:
            return status
        count = plan_starts(S, sequence, start, position, gene_job, gene_row, out_job, out_acc)
        S.si[SI_DECISIONS] += 1
        if count == 0:
            S.si[SI_WAITING] = 1
        for k in range(count):
            start_layer(T, S, out_job[k], out_acc[k])


# The cached kernels embed the engine kernels of relmas/sim/kernels.py, whose edits Numba's cache
# would not notice: drop this module's cache when either source changed.
jit_cache.refresh(
    run_plan,
    (engine_kernels, sys.modules[__name__]),
    stamp="relmas-ga-kernels.sha256",
)
