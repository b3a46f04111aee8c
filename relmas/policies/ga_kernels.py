"""Numba kernels of the offline genetic algorithm: a plan -> its simulated schedule.

Only the decoding loop is jitted (Numba's sorts and multi-dimensional copies take long to compile
and are cheap in numpy): building plans and restoring the initial state stay in numpy.

A *gene* is one layer of one job (genes are numbered job by job, layer by layer, jobs in the
engine's internal order). A *plan* (built by `relmas.policies.ga_offline.build_plans`) is, per
accelerator instance, the sequence of the genes it runs, in order: `sequence[start[a]:start[a+1]]`
for instance `a`, and a release time per gene (`release[g]`, -inf for a layer that is not held).

The plan is executed by the engine's own kernels (`advance`, `apply_decision`): at each decision
point every idle instance starts its next planned layer if that layer's job is ready (arrived,
previous layer finished) and its release time has come, and otherwise stays idle (the plan may
insert idle time: to keep an instance free for an urgent job that arrives later, for a faster
instance about to free, or to keep a start off the saturated DRAM bandwidth); when nothing starts,
the decoder waits for the next event. Decision points are events (arrivals, completions), as for
every online policy, so a hold ends at the first event at or after its release time; when no
event can come any more (nothing runs, no job is to arrive), the holds are lifted, so that no
plan can stall. (`plan_decision` asks for that only when nothing started: an accessor call in
`plan_starts`, or at every decision, made decoding 1.5-5x slower.)
"""

from __future__ import annotations

import sys

import numpy as np
from numba import njit

from relmas.hw import jit_cache
from relmas.sim import access, engine_kernels
from relmas.sim.access import (
    accelerator_count,
    can_wait,
    is_idle,
    job_dropped,
    job_is_ready,
    job_next_row,
    now,
)
from relmas.sim.engine_kernels import (
    STATUS_DECISION,
    State,
    Tables,
    advance,
    apply_decision,
    borrowed,
)


@njit(cache=True)
def plan_starts(
    S: State,
    sequence: np.ndarray,
    start: np.ndarray,
    position: np.ndarray,
    gene_job: np.ndarray,
    gene_row: np.ndarray,
    release: np.ndarray,
    held: np.ndarray,
    out_job: np.ndarray,
    out_acc: np.ndarray,
    until: float,
) -> int:
    """One decision: every idle instance whose next planned layer is ready and released by
    `until` (now, or +inf to lift the holds) starts it.

    Fills `out_job`/`out_acc`, returns the number of pairs, and moves the instances' positions in
    their sequences past them (the caller starts them). Sets `held[g]` for a layer that only its
    release time kept from starting (the holds a schedule needs). Layers of a job dropped past its
    firm deadline are skipped: they never run.
    """
    count = 0
    for a in range(accelerator_count(S)):
        if not is_idle(S, a):
            continue
        while position[a] < start[a + 1] and job_dropped(S, gene_job[sequence[position[a]]]):
            position[a] += 1
        if position[a] == start[a + 1]:
            continue
        g = sequence[position[a]]
        job = gene_job[g]
        if job_is_ready(S, job) and job_next_row(S, job) == gene_row[g]:
            if release[g] > until:
                held[g] = True
                continue
            out_job[count] = job
            out_acc[count] = a
            position[a] += 1
            count += 1
    return count


@njit(cache=True)
def plan_decision(
    S: State,
    sequence: np.ndarray,
    start: np.ndarray,
    position: np.ndarray,
    gene_job: np.ndarray,
    gene_row: np.ndarray,
    release: np.ndarray,
    held: np.ndarray,
    out_job: np.ndarray,
    out_acc: np.ndarray,
) -> int:
    """The plan's decision at the current decision point (`plan_starts`' output): holds end at
    the current time; only when they alone keep the ready layers waiting (nothing can start, and
    nothing else can happen) are they lifted (release up to inf)."""
    count = 0
    for until in (now(S), np.inf):
        count = plan_starts(
            S, sequence, start, position, gene_job, gene_row, release, held, out_job, out_acc, until
        )
        if count > 0 or can_wait(S):
            break
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
    release: np.ndarray,
    held: np.ndarray,
    out_job: np.ndarray,
    out_acc: np.ndarray,
) -> int:
    """Simulate to the end (or to a full timeline buffer) following the plan."""
    T, S, sequence, start, position = borrowed((T, S, sequence, start, position))
    gene_job, gene_row, release, held = borrowed((gene_job, gene_row, release, held))
    out_job, out_acc = borrowed((out_job, out_acc))
    while True:
        status = advance(T, S)
        if status != STATUS_DECISION:
            return status
        count = plan_decision(
            S, sequence, start, position, gene_job, gene_row, release, held, out_job, out_acc
        )
        apply_decision(T, S, out_job, out_acc, count)


# The cached kernels embed the engine's kernels and accessors (relmas/sim), whose edits Numba's
# cache would not notice: drop this module's cache when any of these sources changed.
jit_cache.refresh(
    run_plan,
    (engine_kernels, access, sys.modules[__name__]),
    stamp="relmas-ga-kernels.sha256",
)
