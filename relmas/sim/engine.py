"""The simulation engine: one job trace on one system, driven step by step or by a policy.

Two users: heuristics run to completion inside one jitted loop (`run`), and the
reinforcement-learning environment steps it: `next_decision()` advances to the next decision point
and returns a `DecisionView` of the state, `step(assignments)` applies one decision (assignments, or
none = wait for the next event), `pop_finished()` reports the jobs finished (or dropped past a firm
deadline, relmas.sim.engine_kernels) since the last call.
`snapshot()` and `restore()` go back to an earlier point, e.g. for a search over decisions. Such a
search covers the schedules the engine allows, in which layers start only at events (arrivals,
completions, a wait's end): a continuous-time model that may start a layer at any instant can
score above them, so it bounds the engine's best schedule rather than equals it.

Jobs are held internally in arrival order (ties by job_id); the public API speaks of internal job
indices (positions in `engine.jobs`), and `engine.jobs["job_id"]` maps them back. Tenants are
indexed in the order of `engine.tenants`, their names sorted: the same tenant has the same index on
every trace of a scenario that has all its tenants (not so in order of first arrival).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from relmas.hw import jit_cache
from relmas.schemas import with_job_defaults
from relmas.sim import access, engine_kernels
from relmas.sim.costs import CostTables, PieceTables
from relmas.sim.metrics import deadline_met
from relmas.sim.result import SimResult, build_result
from relmas.sim.system import SHARING_MODES, System
from relmas.sim.times import time_origin

# A cached kernel's index names its argument types by module (the engine's `State`): were one of
# them moved, Numba would fail to read the old index instead of recompiling. So the engine's kernel
# caches go whenever one of their sources changes, as relmas.policies' and relmas.rl's do.
jit_cache.refresh(
    engine_kernels.advance, (engine_kernels, access), stamp="relmas-sim-engine.sha256"
)

if TYPE_CHECKING:
    from relmas.policies.base import Policy


class Engine:
    """Discrete-event simulation of `jobs` (JOB_SCHEMA; without `target` or `firm`: none, soft
    deadlines) on `system` with the costs of `tables`.

    `static_w` maps accelerator names to static power (W, default 0); `record` keeps the timeline of
    running tasks and their bandwidth (for Gantt charts and tests) at the cost of memory.
    Inside (state, views, `now`, `timeline()`) times are seconds since `origin_s`; the result is
    in the trace's own times (relmas.sim.times).
    """

    def __init__(
        self,
        system: System,
        tables: CostTables,
        jobs: pl.DataFrame,
        *,
        static_w: Mapping[str, float] | None = None,
        record: bool = False,
        record_buffer: int = 1 << 14,
    ) -> None:
        if jobs.height == 0:
            raise ValueError("a simulation needs at least one job")
        if set(tables.types) != set(system.accelerator_types):
            # Estimates (isolated latency, remaining work) must only count the system's types.
            types = system.accelerator_types
            raise ValueError(f"cost tables indexed for {tables.types}, the system has {types}")
        self.system = system
        self.tables = tables
        self.jobs = with_job_defaults(jobs).sort(["arrival_s", "job_id"])
        self.tenants: tuple[str, ...] = tuple(sorted(set(self.jobs["tenant"].to_list())))
        # the engine's clock reads seconds since origin_s (relmas.sim.times); results add it back
        self.origin_s = time_origin(self.jobs["arrival_s"][0])
        self.static_w = {name: float((static_w or {}).get(name, 0.0)) for name in tables.types}
        self.kernel_tables = engine_kernels.Tables(
            tables.latency_s,
            tables.demand_bps,
            tables.energy_j,
            tables.best_latency_s,
            tables.remaining_work_s,
        )
        pieces = tables.pieces if tables.pieces is not None else PieceTables.whole(tables)
        self.split_variants = pieces.variants
        self.kernel_pieces = engine_kernels.Pieces(
            pieces.count, pieces.offset, pieces.latency_s, pieces.demand_bps, pieces.energy_j
        )
        self.state = _initial_state(
            system, tables, self.jobs, self.tenants, self.origin_s, record, record_buffer
        )
        T, S = self.kernel_tables, self.state
        self._advance_kernel = engine_kernels.entry_point(engine_kernels.advance, T, S)
        self._start_layer = engine_kernels.entry_point(engine_kernels.start_layer, T, S, 0, 0)
        self._start_piece = engine_kernels.entry_point(
            engine_kernels.start_piece, self.kernel_pieces, S, 0, 0, 0
        )
        self._refresh_rates = engine_kernels.entry_point(engine_kernels.refresh_rates, S)
        self._give_up = engine_kernels.entry_point(engine_kernels.give_up, S, 0)
        self.decision_seconds = 0.0
        self.decision_energy_j = 0.0
        self.overhead_counts: dict[str, float] = {}  # the policy's own, after a run
        # Flushed timeline chunks, each with the chunk recorded before it: a tree of the branches
        # a search took (`restore`), read from the state's last chunk back (SI_TIMELINE).
        self._chunks: list[np.ndarray] = []
        self._chunk_parent: list[int] = []

    # ------------------------------------------------------------------------- stepping API

    @property
    def now(self) -> float:
        return float(self.state.sf[engine_kernels.SF_NOW])

    @property
    def finished(self) -> bool:
        """Whether every job has finished or been dropped."""
        return int(self.state.si[engine_kernels.SI_DONE]) == self.jobs.height

    @property
    def decisions(self) -> int:
        return int(self.state.si[engine_kernels.SI_DECISIONS])

    def next_decision(self) -> DecisionView | None:
        """Advance to the next decision point and describe it; None once all jobs are done."""
        status = self._advance(self._advance_kernel)
        return DecisionView(self) if status == engine_kernels.STATUS_DECISION else None

    def step(self, assignments: Iterable[tuple[int, ...]]) -> None:
        """Apply one decision: start each (job, accelerator) or (job, accelerator, split), or
        wait if there are none."""
        pairs = list(assignments)
        self.state.si[engine_kernels.SI_DECISIONS] += 1
        if not pairs:
            self.wait()
        for assignment in pairs:
            self.assign(*assignment)

    def assign(self, job: int, accelerator: int, split: int = 0) -> None:
        """Start the ready `job`'s next layer on the idle `accelerator` (instance index).

        `split` > 0 cuts the layer into the pieces of variant `split_variants[split]` and starts
        the first; the job stays ready until every piece has started, each further `assign` of it
        starting its next piece (with `split` 0 or the variant already chosen).
        """
        S = self.state
        if (
            not 0 <= job < S.ji.shape[0]
            or S.ji[job, engine_kernels.JI_STATE] != engine_kernels.JOB_READY
        ):
            raise ValueError(f"job {job} is not ready")
        if not 0 <= accelerator < S.ai.shape[0] or S.ai[accelerator, engine_kernels.AI_JOB] >= 0:
            raise ValueError(f"accelerator {accelerator} is not idle")
        ongoing = S.ji[job, engine_kernels.JI_PIECES_LEFT] > 0
        if split == 0 and not ongoing:
            self._start_layer(self.kernel_tables, S, job, accelerator)
            return
        if not 0 <= split < len(self.split_variants):
            raise ValueError(f"split {split} is not one of the variants {self.split_variants}")
        if ongoing and split not in (0, S.ji[job, engine_kernels.JI_SPLIT]):
            split_by = S.ji[job, engine_kernels.JI_SPLIT]
            raise ValueError(f"job {job}'s layer is already split by variant {split_by}")
        self._start_piece(self.kernel_pieces, S, job, accelerator, split)

    def wait(self) -> None:
        """Let time run to the next event (an arrival or a completion) before the next decision."""
        S = self.state
        if (
            S.si[engine_kernels.SI_RUNNING] == 0
            and S.si[engine_kernels.SI_NEXT_ARRIVAL] == self.jobs.height
            and S.si[engine_kernels.SI_READY_N] > 0  # none: every job is done (`give_up`)
        ):
            raise RuntimeError("cannot wait: nothing is running and no job will arrive")
        S.si[engine_kernels.SI_WAITING] = 1

    def give_up(self, job: int) -> None:
        """Drop the ready `job` (internal index) unfinished: a policy's admission decision. It is
        never started again and counts as missed, like a firm job past its deadline; a job with
        a piece of its layer running cannot be given up (the piece must end first)."""
        S = self.state
        if (
            not 0 <= job < S.ji.shape[0]
            or S.ji[job, engine_kernels.JI_STATE] != engine_kernels.JOB_READY
            or S.ji[job, engine_kernels.JI_PENDING] > 0
        ):
            raise ValueError(f"job {job} is not ready with nothing running")
        self._give_up(S, job)

    def pop_finished(self) -> tuple[np.ndarray, np.ndarray]:
        """Jobs (internal indices) finished or dropped since the last call, and whether each met
        its SLA (a dropped job never does)."""
        si = self.state.si
        done = int(si[engine_kernels.SI_DONE])
        jobs = self.state.done_log[si[engine_kernels.SI_REPORTED] : done].copy()
        si[engine_kernels.SI_REPORTED] = done
        jf = self.state.jf
        return jobs, deadline_met(
            jf[jobs, engine_kernels.JF_FINISH], jf[jobs, engine_kernels.JF_DEADLINE]
        )

    # ------------------------------------------------------------------------- whole runs

    def run(self, policy: Policy) -> SimResult:
        """Run `policy` to completion, calling it only at decision points."""
        policy.reset(self)
        if not policy.run_to_completion(self):
            spent = 0.0
            while (view := self.next_decision()) is not None:
                start = time.perf_counter()
                assignments = policy.decide(view)
                spent += time.perf_counter() - start
                self.step(assignments)
            self.decision_seconds = spent
        self.decision_energy_j = policy.overhead_energy_j(self.decisions)
        self.overhead_counts = policy.overhead_counts()
        return self.result(policy.name)

    def run_jitted(self, loop: Callable[..., int], *args: object) -> None:
        """Run a fused jitted loop `loop(tables, state, *args) -> status` to the end.

        Its wall time counts as decision time: a jitted loop interleaves deciding and simulating.
        """
        start = time.perf_counter()
        self._advance(loop, *args)
        self.decision_seconds = time.perf_counter() - start

    def snapshot(self) -> engine_kernels.State:
        """Everything the engine will need to come back to this point (`Engine.restore`): its
        state, which finished jobs it reported, where its recorded timeline ends.

        The copy records nothing itself (no timeline buffer: its size is O(jobs)), so a jitted
        search may also simulate from it again and again (`restore(scratch, snapshot)`, then its
        loop), e.g. to evaluate many candidate plans."""
        self._flush()
        state = engine_kernels.State(
            *(array.copy() for array in self.state[:-1]),
            record=np.zeros((0, engine_kernels.RECORD_COLUMNS)),
        )
        state.si[engine_kernels.SI_RECORD] = 0
        return state

    def restore(self, snapshot: engine_kernels.State) -> None:
        """Go back to `snapshot` (this engine's, taken at any earlier point of any branch): the
        same decisions then give the same decision points, finished-job reports, results and
        timeline as if nothing had happened since. Views taken before are stale."""
        if any(a.shape != b.shape for a, b in zip(self.state[:-1], snapshot[:-1], strict=True)):
            raise ValueError("a snapshot of another engine (its jobs or instances differ)")
        self._copy_state(snapshot, self.state)

    def result(self, policy: str) -> SimResult:
        if not self.finished:
            raise RuntimeError("the simulation has not finished")
        return build_result(self, policy, self.timeline())

    def timeline(self) -> pl.DataFrame | None:
        """Recorded intervals: accelerator, job_id, layer, start_s, end_s, bandwidth_bps, and the
        task's split variant (0 = whole layer) and piece."""
        if not self.state.si[engine_kernels.SI_RECORD]:
            return None
        self._flush()
        chunks = []
        chunk = int(self.state.si[engine_kernels.SI_TIMELINE])
        while chunk >= 0:
            chunks.append(self._chunks[chunk])
            chunk = self._chunk_parent[chunk]
        rows = (
            np.concatenate(chunks[::-1]) if chunks else np.zeros((0, engine_kernels.RECORD_COLUMNS))
        )
        job = rows[:, 3].astype(np.int64)
        row = rows[:, 4].astype(np.int64)
        first = self.tables.first_row[self.model_indices[job]]
        return pl.DataFrame(
            {
                "accelerator": rows[:, 2].astype(np.int64),
                "job_id": self.jobs["job_id"].to_numpy()[job],
                "layer": (row - first).astype(np.int64),
                "start_s": rows[:, 0],
                "end_s": rows[:, 1],
                "bandwidth_bps": rows[:, 5],
                "split": rows[:, 6].astype(np.int64),
                "piece": rows[:, 7].astype(np.int64),
            }
        )

    @cached_property
    def _copy_state(self) -> Callable[[engine_kernels.State, engine_kernels.State], None]:
        return engine_kernels.entry_point(engine_kernels.copy_state, self.state, self.state)

    @cached_property
    def model_indices(self) -> np.ndarray:
        index = {name: i for i, name in enumerate(self.tables.models)}
        return np.array([index[m] for m in self.jobs["model"].to_list()], dtype=np.int64)

    def _advance(self, loop: Callable[..., int], *args: object) -> int:
        while True:
            status = loop(self.kernel_tables, self.state, *args)
            if status == engine_kernels.STATUS_FLUSH:
                self._flush()
                continue
            if status == engine_kernels.STATUS_STALLED:
                raise RuntimeError("the policy waited although no event can happen any more")
            return status

    def _flush(self) -> None:
        si = self.state.si
        count = int(si[engine_kernels.SI_RECORD_N])
        if count:
            self._chunks.append(self.state.record[:count].copy())
            self._chunk_parent.append(int(si[engine_kernels.SI_TIMELINE]))
            si[engine_kernels.SI_TIMELINE] = len(self._chunks) - 1
            si[engine_kernels.SI_RECORD_N] = 0


def restore(state: engine_kernels.State, snapshot: engine_kernels.State) -> None:
    """Put `state` back to `snapshot` (`Engine.snapshot`) in place, keeping its own timeline
    buffer: for a jitted search's scratch copy; an engine goes back with `Engine.restore`."""
    engine_kernels.copy_state(snapshot, state)


class DecisionView:
    """The engine at one decision point, as policies see it; stale once the engine moves on.

    Per ready job (aligned with `ready_jobs`): ids, deadlines, slack, remaining work (best type per
    layer), waiting time, next layer's latency and bandwidth demand on each accelerator type, its
    tenant's index and its target. Per accelerator instance: type, idle flag, busy time left,
    current bandwidth share. Per tenant (`engine.tenants`' order): jobs arrived, met, missed and
    the rate achieved so far (relmas.sim.access).
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.now = engine.now

    @cached_property
    def ready_jobs(self) -> np.ndarray:
        S = self.engine.state
        return S.ready[: S.si[engine_kernels.SI_READY_N]].copy()

    @cached_property
    def idle_accelerators(self) -> np.ndarray:
        return np.flatnonzero(self.engine.state.ai[:, engine_kernels.AI_JOB] < 0)

    @property
    def queue_length(self) -> int:
        return int(self.engine.state.si[engine_kernels.SI_READY_N])

    @cached_property
    def job_ids(self) -> np.ndarray:
        return self.engine.jobs["job_id"].to_numpy()[self.ready_jobs]

    @cached_property
    def arrival_s(self) -> np.ndarray:
        return self.engine.state.jf[self.ready_jobs, engine_kernels.JF_ARRIVAL]

    @cached_property
    def deadline_s(self) -> np.ndarray:
        return self.engine.state.jf[self.ready_jobs, engine_kernels.JF_DEADLINE]

    @cached_property
    def priority(self) -> np.ndarray:
        return self.engine.state.jf[self.ready_jobs, engine_kernels.JF_PRIORITY]

    @cached_property
    def slack_s(self) -> np.ndarray:
        """Time left to the deadline (negative once missed)."""
        return self.deadline_s - self.now

    @cached_property
    def tenant_index(self) -> np.ndarray:
        """Each ready job's tenant, an index into `engine.tenants` and the per-tenant arrays."""
        return self.engine.state.ji[self.ready_jobs, engine_kernels.JI_TENANT]

    @cached_property
    def target(self) -> np.ndarray:
        """Each ready job's deadline-hit-rate target (NaN: none)."""
        return self.engine.state.jt[self.ready_jobs]

    @cached_property
    def tenant_arrived(self) -> np.ndarray:
        return self.engine.state.tc[:, engine_kernels.TC_ARRIVED].copy()

    @cached_property
    def tenant_met(self) -> np.ndarray:
        """Jobs of each tenant finished by their deadline so far."""
        return self.engine.state.tc[:, engine_kernels.TC_MET].copy()

    @cached_property
    def tenant_missed(self) -> np.ndarray:
        """Jobs of each tenant finished late or dropped so far."""
        return self.engine.state.tc[:, engine_kernels.TC_MISSED].copy()

    @cached_property
    def tenant_achieved(self) -> np.ndarray:
        """Each tenant's deadline-hit rate so far (`relmas.sim.access.tenant_achieved`)."""
        S = self.engine.state
        return np.array([access.tenant_achieved(S, k) for k in range(S.tc.shape[0])])

    @cached_property
    def pieces_left(self) -> np.ndarray:
        """Pieces of the next layer not started yet (0: the layer has not started)."""
        return self.engine.state.ji[self.ready_jobs, engine_kernels.JI_PIECES_LEFT]

    @cached_property
    def next_rows(self) -> np.ndarray:
        return self.engine.state.ji[self.ready_jobs, engine_kernels.JI_CURSOR]

    @cached_property
    def remaining_work_s(self) -> np.ndarray:
        return self.engine.tables.remaining_work_s[self.next_rows]

    @cached_property
    def waited_s(self) -> np.ndarray:
        """Time since the job became ready (arrived or finished its previous layer)."""
        return self.now - self.engine.state.jf[self.ready_jobs, engine_kernels.JF_READY_SINCE]

    @cached_property
    def next_latency_s(self) -> np.ndarray:
        """[ready job, accelerator type] latency of the next layer at full bandwidth."""
        return self.engine.tables.latency_s[self.next_rows]

    @cached_property
    def next_demand_bps(self) -> np.ndarray:
        """[ready job, accelerator type] bandwidth demand of the next layer at full speed, B/s."""
        return self.engine.tables.demand_bps[self.next_rows]

    @property
    def accelerator_types(self) -> np.ndarray:
        return self.engine.state.ai[:, engine_kernels.AI_TYPE]

    @cached_property
    def busy_left_s(self) -> np.ndarray:
        """Time until each instance's running task ends at current rates (0 when idle)."""
        S = self._rates()
        running = S.ai[:, engine_kernels.AI_JOB] >= 0
        left = np.zeros(S.ai.shape[0])
        left[running] = (
            S.af[running, engine_kernels.AF_WORK] / S.af[running, engine_kernels.AF_RATE]
        )
        return left

    @cached_property
    def bandwidth_share_bps(self) -> np.ndarray:
        S = self._rates()
        running = S.ai[:, engine_kernels.AI_JOB] >= 0
        return np.where(
            running, S.af[:, engine_kernels.AF_DEMAND] * S.af[:, engine_kernels.AF_RATE], 0.0
        )

    @property
    def bandwidth_in_use_bps(self) -> float:
        return float(self._rates().sf[engine_kernels.SF_BW_IN_USE])

    @property
    def bandwidth_capacity_bps(self) -> float:
        return float(self.engine.state.sf[engine_kernels.SF_CAPACITY])

    @property
    def can_wait(self) -> bool:
        """Whether waiting is allowed: something runs or a job is still to arrive."""
        S = self.engine.state
        return bool(
            S.si[engine_kernels.SI_RUNNING] > 0
            or S.si[engine_kernels.SI_NEXT_ARRIVAL] < self.engine.jobs.height
        )

    def _rates(self) -> engine_kernels.State:
        self.engine._refresh_rates(self.engine.state)
        return self.engine.state


def _initial_state(
    system: System,
    tables: CostTables,
    jobs: pl.DataFrame,
    tenants: tuple[str, ...],
    origin_s: float,
    record: bool,
    record_buffer: int,
) -> engine_kernels.State:
    n = jobs.height
    index = {name: i for i, name in enumerate(tables.models)}
    models = np.array([index[m] for m in jobs["model"].to_list()], dtype=np.int64)
    tenant = {name: i for i, name in enumerate(tenants)}
    jf = np.zeros((n, engine_kernels.JF_COLUMNS))
    jf[:, engine_kernels.JF_ARRIVAL] = jobs["arrival_s"].to_numpy() - origin_s
    jf[:, engine_kernels.JF_DEADLINE] = jobs["deadline_s"].to_numpy() - origin_s
    jf[:, engine_kernels.JF_ISOLATED] = tables.isolated_s[models]
    jf[:, engine_kernels.JF_PRIORITY] = jobs["priority"].to_numpy()
    jf[:, engine_kernels.JF_START] = -1.0
    jf[:, engine_kernels.JF_FINISH] = -1.0
    ji = np.zeros((n, engine_kernels.JI_COLUMNS), dtype=np.int64)
    ji[:, engine_kernels.JI_CURSOR] = tables.first_row[models]
    ji[:, engine_kernels.JI_END] = tables.first_row[models] + tables.n_layers[models]
    ji[:, engine_kernels.JI_FIRM] = jobs["firm"].to_numpy()
    ji[:, engine_kernels.JI_TENANT] = [tenant[name] for name in jobs["tenant"].to_list()]
    types = [tables.types.index(name) for name in system.instance_types]
    accelerators = len(types)
    ai = np.zeros((accelerators, engine_kernels.AI_COLUMNS), dtype=np.int64)
    ai[:, engine_kernels.AI_TYPE] = types
    ai[:, engine_kernels.AI_JOB] = -1
    ai[:, engine_kernels.AI_ROW] = -1
    sf = np.zeros(engine_kernels.SF_COLUMNS)
    sf[engine_kernels.SF_NOW] = jf[0, engine_kernels.JF_ARRIVAL]
    sf[engine_kernels.SF_CAPACITY] = system.bandwidth_bytes_per_s
    sf[engine_kernels.SF_FIRM_NEXT] = np.inf
    si = np.zeros(engine_kernels.SI_COLUMNS, dtype=np.int64)
    si[engine_kernels.SI_IDLE] = accelerators
    si[engine_kernels.SI_SHARING] = SHARING_MODES.index(system.sharing)
    si[engine_kernels.SI_RECORD] = int(record)
    si[engine_kernels.SI_TIMELINE] = -1
    capacity = max(record_buffer, accelerators) if record else 0
    return engine_kernels.State(
        jf=jf,
        ji=ji,
        af=np.zeros((accelerators, engine_kernels.AF_COLUMNS)),
        ai=ai,
        sf=sf,
        si=si,
        ready=np.full(n, -1, dtype=np.int64),
        ready_pos=np.full(n, -1, dtype=np.int64),
        newly_ready=np.full(n, -1, dtype=np.int64),
        done_log=np.full(n, -1, dtype=np.int64),
        tc=np.zeros((len(tenants), engine_kernels.TC_COLUMNS), dtype=np.int64),
        jt=jobs["target"].fill_null(np.nan).to_numpy().astype(np.float64),
        record=np.zeros((capacity, engine_kernels.RECORD_COLUMNS)),
    )
