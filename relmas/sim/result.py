"""One simulation's result: per-job rows, per-accelerator busy time, metrics, timeline."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from relmas.sim import kernels
from relmas.sim.metrics import (
    deadline_met,
    energy_breakdown,
    job_metrics,
    sla_by_group,
    utilisation,
)
from relmas.sim.service import service_groups, service_summary

if TYPE_CHECKING:
    from relmas.sim.engine import Engine

JOB_RESULT_SCHEMA: dict[str, pl.DataType] = {
    "job_id": pl.Int64(),
    "tenant": pl.String(),
    "model": pl.String(),
    "priority": pl.Int32(),
    "arrival_s": pl.Float64(),
    "start_s": pl.Float64(),
    "finish_s": pl.Float64(),
    "deadline_s": pl.Float64(),
    "isolated_s": pl.Float64(),
    "turnaround_s": pl.Float64(),
    "met": pl.Boolean(),
    # dropped past its firm deadline (relmas.sim.kernels): never finished, finish_s NaN, not met
    "dropped": pl.Boolean(),
}

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
    arrival = S.jf[:, kernels.JF_ARRIVAL]
    finish = S.jf[:, kernels.JF_FINISH]
    deadline = S.jf[:, kernels.JF_DEADLINE]
    isolated = S.jf[:, kernels.JF_ISOLATED]
    start = S.jf[:, kernels.JF_START]
    gone = S.ji[:, kernels.JI_STATE] == kernels.JOB_DROPPED
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
    end = float(S.sf[kernels.SF_NOW])
    metrics: dict[str, float | None] = dict(job_metrics(arrival, finish, deadline, isolated, end))
    service = service_groups(frame.with_columns(jobs["target"], jobs["model_target"]))
    metrics.update(service_summary(service, jobs.height))
    metrics["dropped"] = int(gone.sum())
    makespan = metrics["makespan_s"]
    busy = S.af[:, kernels.AF_BUSY].copy()
    util = utilisation(busy, makespan)
    types = engine.system.instance_types
    static_w = np.array([engine.static_w[name] for name in types])
    decisions = engine.decisions
    metrics.update(
        energy_breakdown(
            float(S.sf[kernels.SF_ENERGY]), static_w, makespan, engine.decision_energy_j
        )
    )
    metrics.update(
        {
            "utilization": float(util.mean()),
            "decisions": float(decisions),
            "assignments": float(S.si[kernels.SI_ASSIGNMENTS]),
            "decision_us": 1e6 * engine.decision_seconds / max(decisions, 1),
            "bytes_moved": float(S.sf[kernels.SF_BYTES_MOVED]),
            "mean_bandwidth_gbps": float(S.sf[kernels.SF_BYTES_MOVED]) / makespan / 1e9
            if makespan > 0
            else 0.0,
        }
    )
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
