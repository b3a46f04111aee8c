"""Which of the RELMAS agent's actions are valid at a decision point.

A pair is valid iff the slot holds a job and the type has an idle instance (a split variant >= 1
also only for a layer not started yet that it really cuts). Wait is valid only when waiting cannot
deadlock (something runs or a job is still to arrive) and either no candidate could start on an
instance of its own fastest type, or every candidate would push the running layers' bandwidth
demand above the shared bandwidth on the fastest idle instance (docs/relmas.md, "Holding back"),
or the teacher waits (a placement may hold work back while an instance of a type it does not use
is idle).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from relmas.policies import triage
from relmas.policies.triage import fastest_idle
from relmas.sim import access
from relmas.sim.engine_kernels import Pieces, State, Tables


@njit(cache=True, inline="always")  # no call overhead per step
def build_mask(
    T: Tables,
    P: Pieces,
    S: State,
    slots: np.ndarray,
    idle_of_type: np.ndarray,
    can_wait: bool,
    teacher_waits: bool,
    running_demand: float,
    mask: np.ndarray,
) -> None:
    """Valid actions: every filled slot whole on every type with an idle instance; each split
    variant that really cuts a layer not started yet; wait only if `can_wait` and the teacher
    waits, or no candidate could start on an instance of its fastest type, or each would
    oversubscribe the bandwidth on its fastest idle instance."""
    n_slots, n_types = slots.shape[0], idle_of_type.shape[0]
    variants = (mask.shape[0] - 1) // (n_slots * n_types)
    capacity = access.bandwidth_capacity(S)
    everywhere = np.ones(n_types, dtype=np.bool_)
    best_type_idle = False
    fits = False  # some candidate starts without oversubscribing the bandwidth
    mask[:] = False
    for s in range(n_slots):
        job = slots[s]
        if job < 0:
            continue
        row = access.job_next_row(S, job)
        unstarted = access.job_pieces_left(S, job) == 0
        for kind in range(n_types):
            if idle_of_type[kind] == 0:
                continue
            first = (s * n_types + kind) * variants
            mask[first] = True
            for v in range(1, variants):
                mask[first + v] = unstarted and P.count[row, v] > 1
        kind = access.accelerator_type(S, fastest_idle(T, S, row, everywhere))
        best_type_idle = best_type_idle or T.latency[row, kind] <= T.best_latency[row]
        demand = T.demand[row, kind]
        fits = fits or not triage.oversubscribes(running_demand, demand, capacity)
    wait = mask.shape[0] - 1
    mask[wait] = can_wait and (teacher_waits or not best_type_idle or not fits)
