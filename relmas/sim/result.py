"""One simulation's result: per-job rows, per-accelerator busy time, metrics, timeline."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import dataframely as dy
import numpy as np
import polars as pl

from relmas.schemas import MAX_RESULT_S, MIN_LAYER_S, PRIORITIES, column_types
from relmas.sim import engine_kernels
from relmas.sim.metrics import (
    deadline_met,
    energy_breakdown,
    job_metrics,
    sla_by_group,
    utilisation,
)
from relmas.sim.service import service_groups, service_summary
from relmas.sim.times import MAX_TIME_S

if TYPE_CHECKING:
    from relmas.sim.engine import Engine


def _result_time(column: str, dropped_nan: bool) -> pl.Expr:
    """`column` within MAX_RESULT_S (or NaN on a dropped job, where `dropped_nan`)."""
    within = pl.col(column).is_between(0.0, MAX_RESULT_S)
    return (within | pl.col("dropped")) if dropped_nan else within


class JobResults(dy.Schema):
    """`eval/{scenario}/{policy}/seed{n}.parquet`: one row per job of the trace. A job dropped
    past its firm deadline (relmas.sim.engine_kernels) never finished: finish_s and turnaround_s
    NaN, not met, and start_s NaN if it never started."""

    job_id = dy.Int64(primary_key=True)
    tenant = dy.String()
    model = dy.String()
    priority = dy.Int32(is_in=PRIORITIES)
    arrival_s = dy.Float64(min=0, max=MAX_TIME_S)
    start_s = dy.Float64(allow_nan=True)
    finish_s = dy.Float64(allow_nan=True)
    deadline_s = dy.Float64(min=0, max=MAX_TIME_S)
    isolated_s = dy.Float64(min=MIN_LAYER_S, max=MAX_RESULT_S)
    turnaround_s = dy.Float64(allow_nan=True)
    met = dy.Bool()
    dropped = dy.Bool()

    @dy.rule()
    def start_s__within(cls) -> pl.Expr:
        """a start time in [0, MAX_RESULT_S] (NaN only on a dropped job)"""
        return _result_time("start_s", dropped_nan=True)

    @dy.rule()
    def finish_s__within(cls) -> pl.Expr:
        """a finish time in [0, MAX_RESULT_S] (NaN only on a dropped job)"""
        return _result_time("finish_s", dropped_nan=True)

    @dy.rule()
    def turnaround_s__within(cls) -> pl.Expr:
        """a turnaround in [0, MAX_RESULT_S] (NaN only on a dropped job)"""
        return _result_time("turnaround_s", dropped_nan=True)


JOB_RESULT_SCHEMA = column_types(JobResults)

ACCELERATOR_RESULT_SCHEMA: dict[str, pl.DataType] = {
    "instance": pl.String(),
    "accelerator": pl.String(),
    "busy_s": pl.Float64(),
    "utilization": pl.Float64(),
}


@dataclass(frozen=True)
class SimResult:
    """Everything one simulation produced; `metrics` holds at least the SUMMARY_SCHEMA metrics
    (the service levels' null on a trace without targets); `service`: the trace's service groups
    (relmas.sim.service.GROUP_SCHEMA, no rows without targets)."""

    policy: str
    jobs: pl.DataFrame
    accelerators: pl.DataFrame
    metrics: dict[str, float | None]
    sla_by_tenant: dict[str, float]
    service: pl.DataFrame
    bandwidth_capacity_bps: float
    timeline: pl.DataFrame | None = None


def build_result(engine: Engine, policy: str, timeline: pl.DataFrame | None) -> SimResult:
    """The result of `engine`'s finished run: metrics from its times (since its origin), per-job
    rows and `timeline` in the trace's own times (the origin added back). A dropped job has NaN
    finish and turnaround, and a NaN start if it never started."""
    S = engine.state
    arrival = S.jf[:, engine_kernels.JF_ARRIVAL]
    finish = S.jf[:, engine_kernels.JF_FINISH]
    deadline = S.jf[:, engine_kernels.JF_DEADLINE]
    isolated = S.jf[:, engine_kernels.JF_ISOLATED]
    start = S.jf[:, engine_kernels.JF_START]
    gone = S.ji[:, engine_kernels.JI_STATE] == engine_kernels.JOB_DROPPED
    met = deadline_met(finish, deadline)
    jobs = engine.jobs
    origin = engine.origin_s
    frame = pl.DataFrame(
        {
            "job_id": jobs["job_id"],
            "tenant": jobs["tenant"],
            "model": jobs["model"],
            "priority": jobs["priority"],
            "arrival_s": jobs["arrival_s"],
            "start_s": np.where(start >= 0.0, start + origin, np.nan),
            "finish_s": finish + origin,
            "deadline_s": jobs["deadline_s"],
            "isolated_s": isolated,
            "turnaround_s": finish - arrival,
            "met": met,
            "dropped": gone,
        },
        schema=JOB_RESULT_SCHEMA,
    )
    if timeline is not None:
        timeline = timeline.with_columns(pl.col("start_s", "end_s") + origin)
    end = float(S.sf[engine_kernels.SF_NOW])
    metrics: dict[str, float | None] = dict(job_metrics(arrival, finish, deadline, isolated, end))
    service = service_groups(frame.with_columns(jobs["target"], jobs["model_target"]))
    metrics.update(service_summary(service, jobs.height))
    metrics["dropped"] = int(gone.sum())
    makespan = metrics["makespan_s"]
    busy = S.af[:, engine_kernels.AF_BUSY].copy()
    util = utilisation(busy, makespan)
    types = engine.system.instance_types
    static_w = np.array([engine.static_w[name] for name in types])
    decisions = engine.decisions
    metrics.update(
        energy_breakdown(
            float(S.sf[engine_kernels.SF_ENERGY]), static_w, makespan, engine.decision_energy_j
        )
    )
    metrics.update(
        {
            "utilization": float(util.mean()),
            "decisions": float(decisions),
            "assignments": float(S.si[engine_kernels.SI_ASSIGNMENTS]),
            "decision_us": 1e6 * engine.decision_seconds / max(decisions, 1),
            "bytes_moved": float(S.sf[engine_kernels.SF_BYTES_MOVED]),
            "mean_bandwidth_gbps": float(S.sf[engine_kernels.SF_BYTES_MOVED]) / makespan / 1e9
            if makespan > 0
            else 0.0,
        }
    )
    metrics.update(engine.overhead_counts)
    accelerators = pl.DataFrame(
        {
            "instance": list(engine.system.instance_labels),
            "accelerator": list(types),
            "busy_s": busy,
            "utilization": util,
        },
        schema=ACCELERATOR_RESULT_SCHEMA,
    )
    return SimResult(
        policy=policy,
        jobs=frame,
        accelerators=accelerators,
        metrics=metrics,
        sla_by_tenant=sla_by_group(jobs["tenant"].to_numpy(), met),
        service=service,
        bandwidth_capacity_bps=engine.system.bandwidth_bytes_per_s,
        timeline=timeline,
    )
