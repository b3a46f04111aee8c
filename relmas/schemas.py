"""Column contracts of the Parquet files exchanged between stages (docs/design.md, "data files")."""

from __future__ import annotations

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
}

SUMMARY_SCHEMA: dict[str, pl.DataType] = {
    "scenario": pl.String(),
    "policy": pl.String(),
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
}
