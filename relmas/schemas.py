"""Column contracts of the Parquet files exchanged between stages (docs/design.md, "data files")."""

from __future__ import annotations

from typing import Any

import polars as pl

LAYER_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.String(),
    "layer": pl.Int32(),
    "name": pl.String(),
    "op": pl.String(),
    "N": pl.Int32(),
    "K": pl.Int32(),
    "C": pl.Int32(),
    "Y": pl.Int32(),
    "X": pl.Int32(),
    "R": pl.Int32(),
    "S": pl.Int32(),
    "stride": pl.Int32(),
    "groups": pl.Int32(),
    "macs": pl.Int64(),
    "in_elems": pl.Int64(),
    "w_elems": pl.Int64(),
    "out_elems": pl.Int64(),
}

LAYER_OPS = ("conv", "dwconv", "linear", "matmul")

COST_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.String(),
    "layer": pl.Int32(),
    "accelerator": pl.String(),
    "cycles": pl.Int64(),
    "latency_s": pl.Float64(),
    "dram_bytes": pl.Int64(),
    "energy_j": pl.Float64(),
    "utilization": pl.Float64(),
    "mapping": pl.String(),
}

JOB_SCHEMA: dict[str, pl.DataType] = {
    "job_id": pl.Int64(),
    "tenant": pl.String(),
    "model": pl.String(),
    "arrival_s": pl.Float64(),
    "deadline_s": pl.Float64(),
    "priority": pl.Int32(),
    # the deadline-hit-rate target the job counts towards (docs/simulator.md, "Service levels");
    # null: none
    "target": pl.Float64(),
    # whether that target is its model's own (tenants[*].targets, service group "tenant/model")
    # rather than its tenant's (group "tenant"); relmas.sim.service.group_key
    "model_target": pl.Boolean(),
    # whether the job's deadline is firm: once it has passed, the engine drops the job
    "firm": pl.Boolean(),
}

# The JOB_SCHEMA columns a trace may leave out (a hand-written one, one written before service
# levels), with the value each job then has: no target (or its tenant's), a soft deadline.
JOB_DEFAULTS: dict[str, Any] = {"target": None, "model_target": False, "firm": False}


def with_job_defaults(jobs: pl.DataFrame) -> pl.DataFrame:
    """`jobs` with every JOB_DEFAULTS column it lacks filled in, and those columns of their
    JOB_SCHEMA types: where job frames enter the system (trace files, the engine), so that frames
    built by hand without service levels run as before."""
    return jobs.with_columns(
        pl.col(name).cast(JOB_SCHEMA[name])
        if name in jobs.columns
        else pl.lit(default, JOB_SCHEMA[name]).alias(name)
        for name, default in JOB_DEFAULTS.items()
    )


SUMMARY_SCHEMA: dict[str, pl.DataType] = {
    "scenario": pl.String(),
    "policy": pl.String(),
    # where a rule baseline starts layers (relmas.policies.placement: all, bandwidth or types
    # joined by +), chosen on the validation traces; null for a policy that takes no placement
    "placement": pl.String(),
    "seed": pl.Int64(),
    "jobs": pl.Int64(),
    "sla_rate": pl.Float64(),
    "antt": pl.Float64(),
    "stp": pl.Float64(),
    "fairness": pl.Float64(),
    "utilization": pl.Float64(),
    "energy_j": pl.Float64(),
    "makespan_s": pl.Float64(),
    "decision_us": pl.Float64(),
    # jobs dropped past their firm deadline (0 without firm deadlines)
    "dropped": pl.Int64(),
    # the service levels (relmas.sim.service): null on a trace without targets
    "targets_met": pl.Int64(),
    "targets": pl.Int64(),
    "shortfall": pl.Float64(),
    "worst_ratio": pl.Float64(),
    "jain_target": pl.Float64(),
}
