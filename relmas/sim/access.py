"""What a policy may read of the engine state, and what it may do besides starting work.

The engine's state arrays (`relmas.sim.engine_kernels.State`) and their column layout are private to
`relmas.sim`: policies, the agent's observation and the genetic algorithm's decoder read them only
through these functions, so that the layout can change without touching a policy. Every accessor
is a jitted function, cheap enough to call inside a policy's own kernels (Numba inlines them), and
callable from Python too (with Numba's per-call dispatch cost).

`state` is the engine's `State` (`engine.state`); jobs are internal job indices (arrival order),
accelerators are instance indices, rows index the cost tables (`Tables`: a job's next layer is
`job_next_row`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from relmas.sim.engine_kernels import (
    AF_DEMAND,
    AF_RATE,
    AF_WORK,
    AI_JOB,
    AI_TYPE,
    JF_ARRIVAL,
    JF_DEADLINE,
    JF_FINISH,
    JF_ISOLATED,
    JF_PRIORITY,
    JF_READY_SINCE,
    JF_START,
    JF_WAITED,
    JI_CURSOR,
    JI_END,
    JI_FIRM,
    JI_PENDING,
    JI_PIECES_LEFT,
    JI_SPLIT,
    JI_STATE,
    JI_TENANT,
    JOB_DROPPED,
    JOB_READY,
    SF_BW_IN_USE,
    SF_CAPACITY,
    SF_NOW,
    SI_DECISIONS,
    SI_DONE,
    SI_DROPPED,
    SI_IDLE,
    SI_NEWLY_READY_N,
    SI_NEXT_ARRIVAL,
    SI_READY_N,
    SI_RUNNING,
    SI_WAITING,
    TC_ARRIVED,
    TC_MET,
    TC_MISSED,
    State,
    copy_state,
    refresh_rates,
)

__all__ = [
    "accelerator_count",
    "accelerator_type",
    "arrived_count",
    "bandwidth_capacity",
    "bandwidth_in_use",
    "busy_left",
    "can_wait",
    "copy_state",
    "count_decision",
    "decision_count",
    "dropped_count",
    "finished_count",
    "finished_job",
    "idle_count",
    "is_idle",
    "job_arrival",
    "job_count",
    "job_deadline",
    "job_deadlines",
    "job_dropped",
    "job_end_row",
    "job_finish",
    "job_finish_times",
    "job_firm",
    "job_is_ready",
    "job_isolated",
    "job_next_row",
    "job_next_rows",
    "job_pending_tasks",
    "job_pieces_left",
    "job_priorities",
    "job_priority",
    "job_ready_since",
    "job_split",
    "job_start",
    "job_target",
    "job_tenant",
    "job_waited",
    "newly_ready_count",
    "newly_ready_job",
    "now",
    "ready_count",
    "ready_job",
    "refresh_rates",
    "request_wait",
    "running_count",
    "running_job",
    "stop_arrivals",
    "task_demand",
    "task_rate",
    "task_work_left",
    "tenant_achieved",
    "tenant_arrived",
    "tenant_count",
    "tenant_met",
    "tenant_missed",
]

# ----------------------------------------------------------------------------- system


@njit(cache=True)
def now(state: State) -> float:
    """Simulated time (s)."""
    return state.sf[SF_NOW]


@njit(cache=True)
def bandwidth_capacity(state: State) -> float:
    """The shared off-chip bandwidth (B/s)."""
    return state.sf[SF_CAPACITY]


@njit(cache=True)
def bandwidth_in_use(state: State) -> float:
    """Bandwidth used by the running tasks (B/s) as of the last `refresh_rates`."""
    return state.sf[SF_BW_IN_USE]


@njit(cache=True)
def decision_count(state: State) -> int:
    return state.si[SI_DECISIONS]


@njit(cache=True)
def finished_count(state: State) -> int:
    """Jobs done so far: finished, or dropped past a firm deadline (`job_dropped`)."""
    return state.si[SI_DONE]


@njit(cache=True)
def finished_job(state: State, i: int) -> int:
    """The `i`-th job to finish or be dropped (0 <= i < finished_count)."""
    return state.done_log[i]


@njit(cache=True)
def dropped_count(state: State) -> int:
    """Jobs dropped so far, past their firm deadline (relmas.sim.engine_kernels)."""
    return state.si[SI_DROPPED]


@njit(cache=True)
def arrived_count(state: State) -> int:
    """Jobs arrived so far: the first `arrived_count` jobs (internal indices follow arrival)."""
    return state.si[SI_NEXT_ARRIVAL]


@njit(cache=True)
def can_wait(state: State) -> bool:
    """Whether waiting is allowed: something runs or a job is still to arrive."""
    return state.si[SI_RUNNING] > 0 or state.si[SI_NEXT_ARRIVAL] < state.jf.shape[0]


# ----------------------------------------------------------------------------- ready jobs


@njit(cache=True)
def ready_count(state: State) -> int:
    return state.si[SI_READY_N]


@njit(cache=True)
def ready_job(state: State, i: int) -> int:
    """The `i`-th ready job, 0 <= i < ready_count (in no particular order)."""
    return state.ready[i]


@njit(cache=True)
def newly_ready_count(state: State) -> int:
    """Jobs that became ready (arrived or finished a layer) since the previous decision point."""
    return state.si[SI_NEWLY_READY_N]


@njit(cache=True)
def newly_ready_job(state: State, i: int) -> int:
    """The `i`-th of them, 0 <= i < newly_ready_count; a policy that keeps its own index of the
    ready jobs adds these at each decision point. Jobs leave the ready set by starting, or by
    being dropped past a firm deadline (one of these may have been since: `job_is_ready`)."""
    return state.newly_ready[i]


# ----------------------------------------------------------------------------- accelerators


@njit(cache=True)
def accelerator_count(state: State) -> int:
    return state.ai.shape[0]


@njit(cache=True)
def idle_count(state: State) -> int:
    return state.si[SI_IDLE]


@njit(cache=True)
def running_count(state: State) -> int:
    return state.si[SI_RUNNING]


@njit(cache=True)
def accelerator_type(state: State, accelerator: int) -> int:
    """The instance's accelerator type (column of the cost tables)."""
    return state.ai[accelerator, AI_TYPE]


@njit(cache=True)
def running_job(state: State, accelerator: int) -> int:
    """The job whose task runs on the instance, -1 if it is idle."""
    return state.ai[accelerator, AI_JOB]


@njit(cache=True)
def is_idle(state: State, accelerator: int) -> bool:
    return state.ai[accelerator, AI_JOB] < 0


@njit(cache=True)
def task_work_left(state: State, accelerator: int) -> float:
    """Work left of the running task, in seconds at rate 1 (0 when idle)."""
    return state.af[accelerator, AF_WORK]


@njit(cache=True)
def task_rate(state: State, accelerator: int) -> float:
    """Progress rate of the running task (1 = full bandwidth) as of the last `refresh_rates`."""
    return state.af[accelerator, AF_RATE]


@njit(cache=True)
def task_demand(state: State, accelerator: int) -> float:
    """Bandwidth demand of the running task at full speed (B/s)."""
    return state.af[accelerator, AF_DEMAND]


@njit(cache=True)
def busy_left(state: State, accelerator: int) -> float:
    """Time until the running task ends at the rates of the last `refresh_rates`; 0 when idle."""
    if state.ai[accelerator, AI_JOB] < 0:
        return 0.0
    return state.af[accelerator, AF_WORK] / state.af[accelerator, AF_RATE]


# ----------------------------------------------------------------------------- jobs


@njit(cache=True)
def job_count(state: State) -> int:
    return state.jf.shape[0]


@njit(cache=True)
def job_arrival(state: State, job: int) -> float:
    return state.jf[job, JF_ARRIVAL]


@njit(cache=True)
def job_deadline(state: State, job: int) -> float:
    return state.jf[job, JF_DEADLINE]


@njit(cache=True)
def job_priority(state: State, job: int) -> float:
    return state.jf[job, JF_PRIORITY]


@njit(cache=True)
def job_isolated(state: State, job: int) -> float:
    """The job's model alone on its fastest type (s)."""
    return state.jf[job, JF_ISOLATED]


@njit(cache=True)
def job_ready_since(state: State, job: int) -> float:
    """When the job last became ready (arrived, finished a layer or started a piece)."""
    return state.jf[job, JF_READY_SINCE]


@njit(cache=True)
def job_waited(state: State, job: int) -> float:
    """Time the job spent ready before its current wait (add now - job_ready_since for all)."""
    return state.jf[job, JF_WAITED]


@njit(cache=True)
def job_start(state: State, job: int) -> float:
    """When the job's first layer started, -1 before."""
    return state.jf[job, JF_START]


@njit(cache=True)
def job_finish(state: State, job: int) -> float:
    """When the job finished, -1 before, NaN if it was dropped."""
    return state.jf[job, JF_FINISH]


@njit(cache=True)
def job_dropped(state: State, job: int) -> bool:
    """Whether the job was dropped past its firm deadline: done, never to finish."""
    return state.ji[job, JI_STATE] == JOB_DROPPED


@njit(cache=True)
def job_firm(state: State, job: int) -> bool:
    """Whether the job's deadline is firm (it is dropped once the deadline has passed)."""
    return state.ji[job, JI_FIRM] != 0


@njit(cache=True)
def job_target(state: State, job: int) -> float:
    """The deadline-hit-rate target the job counts towards, NaN if none."""
    return state.jt[job]


@njit(cache=True)
def job_tenant(state: State, job: int) -> int:
    """The job's tenant: an index into `Engine.tenants` (sorted names) and the tenant counters."""
    return state.ji[job, JI_TENANT]


@njit(cache=True)
def job_next_row(state: State, job: int) -> int:
    """Cost-table row of the job's next (or current) layer."""
    return state.ji[job, JI_CURSOR]


@njit(cache=True)
def job_end_row(state: State, job: int) -> int:
    """The row past the job's last layer (its model's sentinel row)."""
    return state.ji[job, JI_END]


@njit(cache=True)
def job_is_ready(state: State, job: int) -> bool:
    return state.ji[job, JI_STATE] == JOB_READY


@njit(cache=True)
def job_pending_tasks(state: State, job: int) -> int:
    """Started tasks (pieces) of the job's current layer still running."""
    return state.ji[job, JI_PENDING]


@njit(cache=True)
def job_pieces_left(state: State, job: int) -> int:
    """Pieces of the job's current layer not started yet (0: the layer has not started)."""
    return state.ji[job, JI_PIECES_LEFT]


@njit(cache=True)
def job_split(state: State, job: int) -> int:
    """Split variant of the job's current layer once a piece of it started (0: whole)."""
    return state.ji[job, JI_SPLIT]


@njit(cache=True)
def job_finish_times(state: State) -> np.ndarray:
    """Every job's finish time (-1 if not finished, NaN if dropped), a view."""
    return state.jf[:, JF_FINISH]


@njit(cache=True)
def job_deadlines(state: State) -> np.ndarray:
    """Every job's deadline, a view."""
    return state.jf[:, JF_DEADLINE]


@njit(cache=True)
def job_arrivals(state: State) -> np.ndarray:
    """Every job's arrival time, a view."""
    return state.jf[:, JF_ARRIVAL]


@njit(cache=True)
def job_isolated_times(state: State) -> np.ndarray:
    """Every job's `job_isolated`, a view."""
    return state.jf[:, JF_ISOLATED]


@njit(cache=True)
def job_priorities(state: State) -> np.ndarray:
    """Every job's priority, a view."""
    return state.jf[:, JF_PRIORITY]


@njit(cache=True)
def job_next_rows(state: State) -> np.ndarray:
    """Every job's next row (`job_next_row`), a view that follows the simulation."""
    return state.ji[:, JI_CURSOR]


# ----------------------------------------------------------------------------- tenants


@njit(cache=True)
def tenant_count(state: State) -> int:
    return state.tc.shape[0]


@njit(cache=True)
def tenant_arrived(state: State, tenant: int) -> int:
    """The tenant's jobs arrived so far."""
    return state.tc[tenant, TC_ARRIVED]


@njit(cache=True)
def tenant_met(state: State, tenant: int) -> int:
    """The tenant's jobs finished by their deadline so far."""
    return state.tc[tenant, TC_MET]


@njit(cache=True)
def tenant_missed(state: State, tenant: int) -> int:
    """The tenant's jobs certain to have missed their deadline: finished late or dropped so far
    (a job still ready or running past its soft deadline counts once it finishes)."""
    return state.tc[tenant, TC_MISSED]


@njit(cache=True)
def tenant_achieved(state: State, tenant: int) -> float:
    """The tenant's deadline-hit rate so far, met / (met + missed); 1 while none is decided (no
    miss yet: no deficit against any target)."""
    met = state.tc[tenant, TC_MET]
    decided = met + state.tc[tenant, TC_MISSED]
    return met / decided if decided > 0 else 1.0


# ----------------------------------------------------------------------------- decisions


@njit(cache=True)
def count_decision(state: State) -> None:
    """Count one decision (a jitted loop's; `Engine.step` counts its own)."""
    state.si[SI_DECISIONS] += 1


@njit(cache=True)
def request_wait(state: State) -> None:
    """Start nothing now: the next decision point comes after the next event."""
    state.si[SI_WAITING] = 1


# ----------------------------------------------------------------------------- look-ahead


@njit(cache=True)
def stop_arrivals(state: State) -> None:
    """No job arrives any more in `state`: a look-ahead on a copy (`copy_state`) that sees only
    the jobs arrived so far."""
    state.si[SI_NEXT_ARRIVAL] = state.jf.shape[0]
