"""A plan of a trace: its tasks on engine instances at planned times, and the jobs it meets.

The exact search's restriction plans one (relmas.ceiling.exact), an engine run of a policy is
one (`Plan.of_run`; `recorded` keeps the run's bandwidth too, for the window search), and
relmas.ceiling.plan_replay runs one in the engine: a module of its own so that the replay and the
admission schedule need not import the searches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from relmas.ceiling.instance import Instance
from relmas.policies.base import Policy
from relmas.sim.costs import CostTables
from relmas.sim.engine import Engine
from relmas.sim.system import System


@dataclass(frozen=True)
class Task:
    """One planned task: piece `piece` of split variant `split` (0 = the whole layer) of layer
    `op` (an Instance operation) of internal job `job`, on engine instance `instance`, planned
    over [start_s, end_s) (on the engine's clock: seconds since its origin, relmas.sim.times)."""

    job: int
    op: int
    split: int
    piece: int
    instance: int
    start_s: float
    end_s: float
    timed: bool = False  # the replay starts it no earlier than start_s (an engine run's time)


@dataclass(frozen=True)
class Plan:
    """A schedule of the on-time jobs, tasks by start (then job, layer, piece): the restriction's,
    an engine run of a policy (every task timed: at its recorded time), or both (the window
    search's: the rest's tasks timed, the window's planned)."""

    tasks: tuple[Task, ...]
    on_time: np.ndarray  # bool[jobs]: jobs the plan meets the deadline of
    job_id: np.ndarray  # int64[jobs]: the trace's ids in the engine's internal order
    origin_s: float  # the engine's origin (absolute) that the tasks' times count from
    source: str  # "restriction", or the policy whose run this is

    @property
    def count(self) -> int:
        return int(self.on_time.sum())

    @classmethod
    def of_run(cls, instance: Instance, engine: Engine, policy: str) -> Plan:
        """The finished `engine`'s run (recorded) as a timed plan of all its jobs: its timeline
        is on the engine's clock, the plan's too."""
        rows = (
            engine.timeline()
            .group_by("accelerator", "job_id", "layer", "split", "piece")
            .agg(pl.col("start_s").min(), pl.col("end_s").max())
            .sort("start_s", "job_id", "layer", "piece")
        )
        internal = {int(j): k for k, j in enumerate(instance.job_id)}
        result = engine.result(policy).jobs
        met = dict(zip(result["job_id"].to_list(), result["met"].to_list(), strict=True))
        tasks = []
        for accelerator, job_id, layer, split, piece, start, end in rows.iter_rows():
            job = internal[job_id]
            op = int(instance.first_op[job]) + layer
            tasks.append(Task(job, op, split, piece, accelerator, start, end, timed=True))
        on_time = np.array([bool(met[int(j)]) for j in instance.job_id])
        return cls(tuple(tasks), on_time, instance.job_id.copy(), engine.origin_s, policy)


@dataclass(frozen=True)
class Schedule:
    """An engine run of the whole trace, recorded: its timed plan (every task at its recorded
    time, `plan.on_time` the jobs that met) and its bandwidth segments (internal job, start,
    end, B/s: the rates the engine gave each task while they held)."""

    plan: Plan
    segment_job: np.ndarray  # int64[segments]
    segment_start_s: np.ndarray  # float64[segments], the engine's clock
    segment_end_s: np.ndarray
    segment_bps: np.ndarray

    @property
    def met(self) -> int:
        return self.plan.count


def recorded(
    system: System, tables: CostTables, jobs: pl.DataFrame, whole: Instance, policy: Policy
) -> Schedule:
    """`policy`'s run on `jobs` (`whole`, its instance), recorded as a Schedule."""
    engine = Engine(system, tables, jobs, record=True)
    engine.run(policy)
    line = engine.timeline()
    position = {int(j): k for k, j in enumerate(whole.job_id)}
    return Schedule(
        plan=Plan.of_run(whole, engine, policy.name),
        segment_job=np.array([position[int(j)] for j in line["job_id"]], dtype=np.int64),
        segment_start_s=line["start_s"].to_numpy(),
        segment_end_s=line["end_s"].to_numpy(),
        segment_bps=line["bandwidth_bps"].to_numpy(),
    )
