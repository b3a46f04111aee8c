"""Numba kernels of the simulator engine: the state arrays and the event loop that advances them.

The whole engine state lives in a handful of numpy arrays grouped in the `State` namedtuple, and the
cost tables in `Tables`; the state's column layout is private to `relmas.sim` (policies read the
state through `relmas.sim.access`). The same kernels serve the Python stepping API
(`relmas.sim.engine.Engine`, one kernel call per step) and the run loops of the jitted policies
(`advance`, then `apply_decision` at each decision point), so both paths produce identical
schedules.

Timeline ("Decima's timeline, nothing clever"): the events are job arrivals (a pointer into the
jobs, sorted by arrival) and layer completions (one running task per accelerator instance, at most a
few dozen: their completion times move whenever bandwidth shares change, so they are found by a scan
of the running tasks rather than kept in a heap that would need re-keying at every rate change). The
ready jobs are a dense list (O(1) insert/remove), and the jobs that became ready since the previous
decision point a second list, from which a policy keeps its own index of the ready jobs (e.g. the
heuristics' priority heap) up to date in O(1) per change.

Bandwidth is a fluid: a task alone progresses at rate 1 (one second of `latency_s` work per second)
and demands `dram_bytes / latency_s`; when the running tasks demand more than the capacity, each
gets a share (proportional to demand, or max-min fair) and progresses at rate share / demand. Rates
are recomputed lazily whenever the running set has changed, before time advances.

A *task* (an accelerator running a piece of a job's layer, with its own work and demand) is kept
apart from a job's progress (its next layer, its count of pending tasks and of pieces not yet
started), so that a layer may run as several pieces (operator resizing, `start_piece`): a job whose
layer has pieces left stays ready while its started pieces run, other jobs may interleave with it,
and the layer completes when its last piece does. `start_layer` is the unsplit case.

Firm deadlines (docs/simulator.md): a job with a firm deadline (JI_FIRM) that is past it (beyond
the rounding tolerance of `on_time`, the test of a met deadline) and has no task running is
*dropped* at the event where that is first seen: it leaves the ready list, is never started again,
counts as done (`done_log`) and has a NaN finish time. Every decision point comes right after an
event, so no job starts past its firm deadline. A job with a layer (or pieces) running when its
deadline passes starts nothing more and is dropped when they end (its last layer too: a firm job
meets its deadline or is dropped, it never finishes late). The ready jobs are scanned for late
ones only at an event past SF_FIRM_NEXT, the earliest deadline of a firm job made ready since the
last scan (inf without firm jobs: one comparison per event).

Service counters: per tenant (State.tc, rows in the order of `Engine.tenants`), the jobs arrived,
met (finished by their deadline) and missed (finished late, or dropped), counted when it happens.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from numba import njit
from numba.core import cgutils, types
from numba.extending import intrinsic

# Job float columns (State.jf[job, column]).
JF_ARRIVAL, JF_DEADLINE, JF_ISOLATED, JF_PRIORITY = 0, 1, 2, 3
JF_START, JF_FINISH, JF_READY_SINCE, JF_WAITED = 4, 5, 6, 7
JF_COLUMNS = 8  # 64 bytes a job: a scan of the ready jobs reads one cache line each
# Job integer columns (State.ji[job, column]): the row cursor (next layer), the model's end row, ...
JI_CURSOR, JI_END, JI_STATE, JI_PENDING = 0, 1, 2, 3
# ... the split variant of the current layer and its pieces not yet started (0: none pending).
JI_SPLIT, JI_PIECES_LEFT = 4, 5
# ... whether its deadline is firm (1: dropped once passed) and its tenant (row of State.tc).
JI_FIRM, JI_TENANT = 6, 7
JI_COLUMNS = 8
# Job states (JOB_DROPPED: past its firm deadline, out of the system unfinished).
JOB_FUTURE, JOB_READY, JOB_RUNNING, JOB_DONE, JOB_DROPPED = 0, 1, 2, 3, 4
# Accelerator float columns: remaining work (seconds at rate 1), demand (B/s), rate, busy time.
AF_WORK, AF_DEMAND, AF_RATE, AF_BUSY = 0, 1, 2, 3
AF_COLUMNS = 4
# Accelerator integer columns: type, running job (-1 idle), its row, the running task's split
# variant (0 = whole layer) and piece index.
AI_TYPE, AI_JOB, AI_ROW, AI_SPLIT, AI_PIECE = 0, 1, 2, 3, 4
AI_COLUMNS = 5
# Scalar floats: time, bandwidth capacity and use (B/s), bytes moved, dynamic energy, and the
# earliest deadline of a firm job made ready since the last scan for late ones (inf: none).
SF_NOW, SF_CAPACITY, SF_BW_IN_USE, SF_BYTES_MOVED, SF_ENERGY, SF_FIRM_NEXT = 0, 1, 2, 3, 4, 5
SF_COLUMNS = 6
# Scalar integers (SI_NEWLY_READY_N: length of State.newly_ready; SI_AT_DECISION: `advance` last
# stopped at a decision point). The last two are the Python engine's, in the state so that a
# snapshot holds them: SI_REPORTED, the finished jobs `Engine.pop_finished` reported;
# SI_TIMELINE, the engine's last flushed timeline chunk (-1: none). SI_DONE counts the finished and
# the dropped jobs (`done_log`), SI_DROPPED the dropped ones.
SI_NEXT_ARRIVAL, SI_DONE, SI_DECISIONS, SI_ASSIGNMENTS = 0, 1, 2, 3
SI_RUNNING, SI_IDLE, SI_READY_N, SI_NEWLY_READY_N = 4, 5, 6, 7
SI_WAITING, SI_DIRTY, SI_SHARING, SI_AT_DECISION, SI_RECORD, SI_RECORD_N = 8, 9, 10, 11, 12, 13
SI_REPORTED, SI_TIMELINE, SI_DROPPED = 14, 15, 16
SI_COLUMNS = 17
# Tenant counters (State.tc[tenant, column]): jobs arrived, met, missed (finished late or dropped).
TC_ARRIVED, TC_MET, TC_MISSED = 0, 1, 2
TC_COLUMNS = 3
# Bandwidth sharing modes.
SHARING_PROPORTIONAL, SHARING_MAXMIN = 0, 1
# What `advance` stopped at.
STATUS_DECISION, STATUS_DONE, STATUS_STALLED, STATUS_FLUSH = 0, 1, 2, 3
# Timeline record columns: start, end, accelerator, job, row, bandwidth share (B/s), split, piece.
RECORD_COLUMNS = 8
# Relative time tolerance under which completions count as simultaneous.
TIME_TOL = 1e-12


class Tables(NamedTuple):
    """Cost arrays (rows = model layers with one sentinel row per model, columns = types)."""

    latency: np.ndarray  # float64[rows, types]
    demand: np.ndarray  # float64[rows, types]
    energy: np.ndarray  # float64[rows, types]
    best_latency: np.ndarray  # float64[rows]
    remaining_work: np.ndarray  # float64[rows]


class Pieces(NamedTuple):
    """Costs of layers run as pieces: variant v of row r has `count[r, v]` pieces, piece p in
    column `offset[v] + p` of the [rows, columns, types] arrays; variant 0 is the whole layer."""

    count: np.ndarray  # int64[rows, variants]
    offset: np.ndarray  # int64[variants]
    latency: np.ndarray  # float64[rows, columns, types]
    demand: np.ndarray  # float64[rows, columns, types]
    energy: np.ndarray  # float64[rows, columns, types]


class State(NamedTuple):
    """Mutable engine state; see the column constants above."""

    jf: np.ndarray  # float64[jobs, JF_COLUMNS]
    ji: np.ndarray  # int64[jobs, JI_COLUMNS]
    af: np.ndarray  # float64[accelerators, AF_COLUMNS]
    ai: np.ndarray  # int64[accelerators, AI_COLUMNS]
    sf: np.ndarray  # float64[SF_COLUMNS]
    si: np.ndarray  # int64[SI_COLUMNS]
    ready: np.ndarray  # int64[jobs]: dense list of ready jobs
    ready_pos: np.ndarray  # int64[jobs]: position in `ready`, -1 if absent
    newly_ready: np.ndarray  # int64[jobs]: jobs that became ready since the last decision point
    done_log: np.ndarray  # int64[jobs]: jobs in order of completion (finish or drop)
    tc: np.ndarray  # int64[tenants, TC_COLUMNS]: service counters per tenant
    jt: np.ndarray  # float64[jobs]: deadline-hit-rate targets, NaN: none (jf stays 64 B a job)
    record: np.ndarray  # float64[capacity, RECORD_COLUMNS]: timeline buffer


def entry_point(kernel: Callable[..., object], *args: object) -> Callable[..., object]:
    """`kernel`'s compiled function for the types of `args`, called without Numba's per-call type
    dispatch (several microseconds for namedtuple arguments): for the Python stepping path."""
    return kernel.compile(tuple(kernel.typeof_pyval(arg) for arg in args))


def _unowned(context: object, builder: object, kind: types.Type, value: object) -> object:
    """`value` of Numba type `kind` with every array in it (through nested tuples) stripped of
    its reference count (a null meminfo)."""
    if isinstance(kind, types.Array):
        array = context.make_array(kind)(context, builder, value=value)
        array.meminfo = cgutils.get_null_value(array.meminfo.type)
        return array._getvalue()
    if isinstance(kind, types.BaseTuple):
        for i, member in enumerate(kind.types):
            inner = _unowned(context, builder, member, builder.extract_value(value, i))
            value = builder.insert_value(value, inner, i)
    return value


@intrinsic
def borrowed(typingctx: object, value: types.Type) -> tuple[object, Callable[..., object]]:
    """`value` (an array, or a tuple of arrays and tuples: `State`, `Tables`, ...) as references
    Numba does not count, for the whole of a jitted loop that holds the counted ones.

    Why: Numba increments and decrements the reference count of *every* array of a tuple argument
    on each call of a function with branches, with atomic instructions; passing `State` and
    `Tables` (18 arrays) down a decision's helpers made those most of a rule's run
    (docs/benchmarks.md, "Borrowed state"). A null count makes each a test of a null pointer.
    Safe while the caller's own arguments keep the arrays alive: use it at the top of a jitted
    loop on its arguments, and never return what it gives (or a view of it) to Python.
    """

    def codegen(context: object, builder: object, signature: object, args: list) -> object:
        return _unowned(context, builder, value, args[0])

    return value(value), codegen


@njit(cache=True)
def copy_state(S: State, D: State) -> None:
    """D ← S, in place, but for the timeline: D keeps its own buffer (recording if it has one)
    and holds none of S's buffered rows. D is a state of the same trace and system."""
    D.jf[:] = S.jf
    D.ji[:] = S.ji
    D.af[:] = S.af
    D.ai[:] = S.ai
    D.sf[:] = S.sf
    D.si[:] = S.si
    D.ready[:] = S.ready
    D.ready_pos[:] = S.ready_pos
    D.newly_ready[:] = S.newly_ready
    D.done_log[:] = S.done_log
    D.tc[:] = S.tc
    D.jt[:] = S.jt
    D.si[SI_RECORD] = 1 if D.record.shape[0] > 0 else 0
    D.si[SI_RECORD_N] = 0


# ----------------------------------------------------------------------------- job life cycle


@njit(cache=True)
def met_by(deadline: float | np.ndarray) -> float | np.ndarray:
    """The latest time on the engine's clock (seconds since its origin, relmas.sim.times) that
    meets `deadline` (as many as given): the deadline widened by float rounding of the event times,
    relative to their size on that clock. The one rule of "met": `on_time`, and the ceiling's bounds
    that must count every deadline the engine meets (relmas.ceiling), call it."""
    return deadline + TIME_TOL * np.maximum(1.0, np.abs(deadline))


@njit(cache=True)
def on_time(time: float, deadline: float) -> bool:
    """Whether `time` is by `deadline` up to float rounding of the event times (`met_by`): a job
    finishing then meets it (`relmas.sim.metrics.deadline_met`), a firm job is not dropped then.
    False for a NaN time (a dropped job's finish), made +inf first: a vectorised `<=` on NaN raises
    the invalid-operation flag (numpy's warning) even where a branch would skip it."""
    if time != time:
        time = math.inf
    return time <= met_by(deadline)


@njit(cache=True)
def on_time_each(times: np.ndarray, deadlines: np.ndarray) -> np.ndarray:
    """`on_time` of each (time, deadline) pair of two 1-d arrays; here, so that Numba's cache of
    it (keyed on this file) follows `on_time`'s edits."""
    out = np.empty(times.shape[0], dtype=np.bool_)
    for i in range(times.shape[0]):
        out[i] = on_time(times[i], deadlines[i])
    return out


@njit(cache=True)
def _make_ready(S: State, job: int) -> None:
    if S.ji[job, JI_FIRM] != 0:
        S.sf[SF_FIRM_NEXT] = min(S.sf[SF_FIRM_NEXT], S.jf[job, JF_DEADLINE])
    S.ji[job, JI_STATE] = JOB_READY
    S.jf[job, JF_READY_SINCE] = S.sf[SF_NOW]
    n = S.si[SI_READY_N]
    S.ready[n] = job
    S.ready_pos[job] = n
    S.si[SI_READY_N] = n + 1
    # Between two decision points a job becomes ready at most once: nothing starts in between.
    S.newly_ready[S.si[SI_NEWLY_READY_N]] = job
    S.si[SI_NEWLY_READY_N] += 1


@njit(cache=True)
def _remove_ready(S: State, job: int) -> None:
    i = S.ready_pos[job]
    last = S.si[SI_READY_N] - 1
    moved = S.ready[last]
    S.ready[i] = moved
    S.ready_pos[moved] = i
    S.ready_pos[job] = -1
    S.si[SI_READY_N] = last


@njit(cache=True)
def start_task(
    S: State, acc: int, job: int, row: int, split: int, piece: int, work: float, demand: float
) -> None:
    """Put a task (piece `piece` of split variant `split` of `job`'s layer `row`) on `acc`."""
    S.ai[acc, AI_JOB] = job
    S.ai[acc, AI_ROW] = row
    S.ai[acc, AI_SPLIT] = split
    S.ai[acc, AI_PIECE] = piece
    S.af[acc, AF_WORK] = work
    S.af[acc, AF_DEMAND] = demand
    S.af[acc, AF_RATE] = 1.0
    S.si[SI_RUNNING] += 1
    S.si[SI_IDLE] -= 1
    S.si[SI_DIRTY] = 1


@njit(cache=True)
def start_layer(T: Tables, S: State, job: int, acc: int) -> None:
    """Run the ready `job`'s next layer, whole, on the idle accelerator `acc`."""
    row = S.ji[job, JI_CURSOR]
    acc_type = S.ai[acc, AI_TYPE]
    now = S.sf[SF_NOW]
    _remove_ready(S, job)
    S.jf[job, JF_WAITED] += now - S.jf[job, JF_READY_SINCE]
    if S.jf[job, JF_START] < 0.0:
        S.jf[job, JF_START] = now
    S.ji[job, JI_STATE] = JOB_RUNNING
    S.ji[job, JI_PENDING] = 1
    start_task(S, acc, job, row, 0, 0, T.latency[row, acc_type], T.demand[row, acc_type])
    S.sf[SF_ENERGY] += T.energy[row, acc_type]
    S.si[SI_ASSIGNMENTS] += 1


@njit(cache=True)
def start_piece(P: Pieces, S: State, job: int, acc: int, split: int) -> None:
    """Run the next piece of the ready `job`'s layer on the idle accelerator `acc`.

    If the layer has no piece started yet it is cut by variant `split` (0 = whole); otherwise the
    variant chosen at its first piece continues. The job stays ready while pieces are left.
    """
    row = S.ji[job, JI_CURSOR]
    acc_type = S.ai[acc, AI_TYPE]
    now = S.sf[SF_NOW]
    if S.ji[job, JI_PIECES_LEFT] == 0:
        S.ji[job, JI_SPLIT] = split
        S.ji[job, JI_PIECES_LEFT] = P.count[row, split]
        S.ji[job, JI_PENDING] = 0
        if S.jf[job, JF_START] < 0.0:
            S.jf[job, JF_START] = now
    split = S.ji[job, JI_SPLIT]
    piece = P.count[row, split] - S.ji[job, JI_PIECES_LEFT]
    S.ji[job, JI_PIECES_LEFT] -= 1
    S.ji[job, JI_PENDING] += 1
    S.jf[job, JF_WAITED] += now - S.jf[job, JF_READY_SINCE]
    S.jf[job, JF_READY_SINCE] = now
    if S.ji[job, JI_PIECES_LEFT] == 0:
        _remove_ready(S, job)
        S.ji[job, JI_STATE] = JOB_RUNNING
    column = P.offset[split] + piece
    start_task(
        S,
        acc,
        job,
        row,
        split,
        piece,
        P.latency[row, column, acc_type],
        P.demand[row, column, acc_type],
    )
    S.sf[SF_ENERGY] += P.energy[row, column, acc_type]
    S.si[SI_ASSIGNMENTS] += 1


@njit(cache=True)
def _log_done(S: State, job: int, met: bool) -> None:
    """Count the finished or dropped `job` done, and met or missed for its tenant."""
    S.done_log[S.si[SI_DONE]] = job
    S.si[SI_DONE] += 1
    S.tc[S.ji[job, JI_TENANT], TC_MET if met else TC_MISSED] += 1


@njit(cache=True)
def _drop(S: State, job: int) -> None:
    """Take `job`, with no task running, out of the system unfinished (a firm job past its
    deadline, or one a policy gives up: `give_up`)."""
    if S.ji[job, JI_STATE] == JOB_READY:
        _remove_ready(S, job)
    S.ji[job, JI_STATE] = JOB_DROPPED
    S.jf[job, JF_FINISH] = np.nan
    S.si[SI_DROPPED] += 1
    _log_done(S, job, False)


@njit(cache=True)
def give_up(S: State, job: int) -> None:
    """Drop the ready `job`, with no task running, as a policy's admission decision: it is never
    started again and counts as missed, like a firm job past its deadline."""
    _drop(S, job)


@njit(cache=True)
def _drop_late(S: State) -> None:
    """At an event past SF_FIRM_NEXT: drop the ready firm jobs past their deadline (one with pieces
    of its layer running starts no more and is dropped when they end) and lower SF_FIRM_NEXT to
    the earliest deadline of the firm jobs left ready."""
    now = S.sf[SF_NOW]
    earliest = math.inf
    i = 0
    while i < S.si[SI_READY_N]:
        job = S.ready[i]
        deadline = S.jf[job, JF_DEADLINE]
        if S.ji[job, JI_FIRM] == 0 or on_time(now, deadline):
            if S.ji[job, JI_FIRM] != 0:
                earliest = min(earliest, deadline)
            i += 1
        elif S.ji[job, JI_PENDING] > 0:
            _remove_ready(S, job)  # the last ready job moves to position i
            S.ji[job, JI_STATE] = JOB_RUNNING
        else:
            _drop(S, job)
    S.sf[SF_FIRM_NEXT] = earliest


@njit(cache=True)
def _complete_task(S: State, acc: int) -> None:
    job = S.ai[acc, AI_JOB]
    S.ai[acc, AI_JOB] = -1
    S.ai[acc, AI_ROW] = -1
    S.af[acc, AF_WORK] = 0.0
    S.af[acc, AF_RATE] = 0.0
    S.si[SI_RUNNING] -= 1
    S.si[SI_IDLE] += 1
    S.si[SI_DIRTY] = 1
    S.ji[job, JI_PENDING] -= 1
    if S.ji[job, JI_PENDING] > 0:
        return
    now = S.sf[SF_NOW]
    if S.ji[job, JI_FIRM] != 0 and not on_time(now, S.jf[job, JF_DEADLINE]):
        _drop(S, job)
        return
    if S.ji[job, JI_PIECES_LEFT] > 0:
        return
    S.ji[job, JI_CURSOR] += 1
    if S.ji[job, JI_CURSOR] == S.ji[job, JI_END]:
        S.ji[job, JI_STATE] = JOB_DONE
        S.jf[job, JF_FINISH] = now
        _log_done(S, job, on_time(now, S.jf[job, JF_DEADLINE]))
    else:
        _make_ready(S, job)


# ----------------------------------------------------------------------------- bandwidth


@njit(cache=True)
def refresh_rates(S: State) -> None:
    """Recompute every running task's rate and the bandwidth in use, if the running set changed."""
    if S.si[SI_DIRTY] == 0:
        return
    S.si[SI_DIRTY] = 0
    ai, af = S.ai, S.af
    total = 0.0
    for a in range(ai.shape[0]):
        if ai[a, AI_JOB] >= 0:
            af[a, AF_RATE] = 1.0
            total += af[a, AF_DEMAND]
    capacity = S.sf[SF_CAPACITY]
    if total <= capacity:
        S.sf[SF_BW_IN_USE] = total
        return
    S.sf[SF_BW_IN_USE] = capacity
    if S.si[SI_SHARING] == SHARING_PROPORTIONAL:
        rate = capacity / total
        for a in range(ai.shape[0]):
            if ai[a, AI_JOB] >= 0 and af[a, AF_DEMAND] > 0.0:
                af[a, AF_RATE] = rate
        return
    # Max-min fair (water-filling): serve demands in increasing order, each up to an equal share.
    demands = np.empty(ai.shape[0])
    order = np.empty(ai.shape[0], dtype=np.int64)
    count = 0
    for a in range(ai.shape[0]):
        if ai[a, AI_JOB] >= 0 and af[a, AF_DEMAND] > 0.0:
            demands[count] = af[a, AF_DEMAND]
            order[count] = a
            count += 1
    ranks = np.argsort(demands[:count], kind="mergesort")
    left = capacity
    for k in range(count):
        a = order[ranks[k]]
        share = min(af[a, AF_DEMAND], left / (count - k))
        af[a, AF_RATE] = share / af[a, AF_DEMAND]
        left -= share


# ----------------------------------------------------------------------------- event loop


@njit(cache=True)
def _record_interval(S: State, t0: float, t1: float) -> None:
    k = S.si[SI_RECORD_N]
    for a in range(S.ai.shape[0]):
        job = S.ai[a, AI_JOB]
        if job >= 0:
            S.record[k, 0] = t0
            S.record[k, 1] = t1
            S.record[k, 2] = a
            S.record[k, 3] = job
            S.record[k, 4] = S.ai[a, AI_ROW]
            S.record[k, 5] = S.af[a, AF_DEMAND] * S.af[a, AF_RATE]
            S.record[k, 6] = S.ai[a, AI_SPLIT]
            S.record[k, 7] = S.ai[a, AI_PIECE]
            k += 1
    S.si[SI_RECORD_N] = k


@njit(cache=True)
def advance(T: Tables, S: State) -> int:
    """Process events until a decision point (an idle accelerator and a ready job) or the end.

    Takes the cost tables like every loop the engine drives (`Engine._advance`), unused here.

    A pending `wait` (SI_WAITING) makes the first event happen before the next decision point.
    At each event: tasks complete (a firm job past its deadline is dropped instead of becoming
    ready), jobs arrive, then late firm jobs are dropped from the ready list.

    Returns a STATUS_* code; STATUS_FLUSH asks the caller to empty the timeline buffer and to call
    again.
    """
    S = borrowed(S)  # called once per step from Python (`Engine._advance`)
    jf, af, ai, sf, si = S.jf, S.af, S.ai, S.sf, S.si
    jobs = jf.shape[0]
    if si[SI_AT_DECISION] != 0:
        si[SI_AT_DECISION] = 0
        si[SI_NEWLY_READY_N] = 0
    while True:
        if si[SI_WAITING] == 0 and si[SI_IDLE] > 0 and si[SI_READY_N] > 0:
            si[SI_AT_DECISION] = 1
            return STATUS_DECISION
        refresh_rates(S)
        now = sf[SF_NOW]
        nxt = si[SI_NEXT_ARRIVAL]
        t_next = jf[nxt, JF_ARRIVAL] if nxt < jobs else math.inf
        for a in range(ai.shape[0]):
            if ai[a, AI_JOB] >= 0:
                t_next = min(t_next, now + af[a, AF_WORK] / af[a, AF_RATE])
        if t_next == math.inf:
            return STATUS_STALLED if si[SI_READY_N] > 0 else STATUS_DONE
        dt = t_next - now
        if si[SI_RECORD] != 0 and si[SI_RUNNING] > 0 and dt > 0.0:
            if si[SI_RECORD_N] + si[SI_RUNNING] > S.record.shape[0]:
                return STATUS_FLUSH
            _record_interval(S, now, t_next)
        sf[SF_NOW] = t_next
        sf[SF_BYTES_MOVED] += sf[SF_BW_IN_USE] * dt
        tolerance = TIME_TOL * max(1.0, t_next)
        for a in range(ai.shape[0]):
            if ai[a, AI_JOB] < 0:
                continue
            af[a, AF_BUSY] += dt
            rate = af[a, AF_RATE]
            if now + af[a, AF_WORK] / rate <= t_next + tolerance:
                _complete_task(S, a)
            else:
                af[a, AF_WORK] -= rate * dt
        while nxt < jobs and jf[nxt, JF_ARRIVAL] <= t_next:
            S.tc[S.ji[nxt, JI_TENANT], TC_ARRIVED] += 1
            _make_ready(S, nxt)
            nxt += 1
        si[SI_NEXT_ARRIVAL] = nxt
        si[SI_WAITING] = 0
        if t_next > sf[SF_FIRM_NEXT] and not on_time(t_next, sf[SF_FIRM_NEXT]):
            _drop_late(S)  # (the first test alone, always false without firm jobs, is cheaper)


@njit(cache=True)
def apply_decision(
    T: Tables, S: State, jobs: np.ndarray, accelerators: np.ndarray, count: int
) -> None:
    """Apply one decision in a jitted policy's loop (`advance` until it returns another status
    than STATUS_DECISION, `apply_decision` at each decision point): start the first `count`
    (job, accelerator) pairs, whole layers, or wait for the next event if there are none.
    `Engine.step` does the same for the decisions of the Python stepping path."""
    S.si[SI_DECISIONS] += 1
    if count == 0:
        S.si[SI_WAITING] = 1
    for k in range(count):
        start_layer(T, S, jobs[k], accelerators[k])
