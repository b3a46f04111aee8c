"""Layers x accelerator -> cost table (COST_SCHEMA), with the metadata that keeps it honest.

A cost table is the expensive, reusable artefact of the pipeline, so its file records what it was
computed from: the accelerator spec (JSON and hash), the cost-model version, the mapping objective
and the layer table's hash. `read_cost_table` rejects a table whose record differs from the inputs
at hand instead of silently simulating with stale costs.

`profile_layers` takes any LAYER_SCHEMA frame, so it also costs pieces of layers (a layer cut along
K or Y for operator splitting) with the same search.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from relmas.errors import InputError
from relmas.hw.common import OBJECTIVES
from relmas.hw.problem import MACS, R, S, problem_array
from relmas.hw.search import describe_mapping, search_layers
from relmas.hw.spec import EyerissSpec, Spec, spec_hash, spec_json
from relmas.io import read_metadata, read_parquet, write_parquet
from relmas.schemas import COST_SCHEMA, LAYER_SCHEMA

# Bump whenever a change to relmas.hw can change a cost: older tables are then rejected.
COST_MODEL_VERSION = "1"

META_SPEC_NAME = "relmas.spec_name"
META_SPEC_JSON = "relmas.spec_json"
META_SPEC_HASH = "relmas.spec_hash"
META_VERSION = "relmas.cost_model_version"
META_OBJECTIVE = "relmas.objective"
META_LAYERS_HASH = "relmas.layers_hash"


def profile_layers(
    layers: pl.DataFrame,
    name: str,
    spec: Spec,
    objective: str = "latency",
    source: str | Path | None = None,
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Best mapping of every layer on `spec`: the cost table and run statistics for tracking.

    `source` names the layer file in error messages. Stats: layers, mappings_evaluated, seconds,
    mean_utilization, and per model `{model}.latency_s` / `{model}.energy_j` (sums over layers).
    """
    if objective not in OBJECTIVES:
        raise InputError(source, "profile.objective", f"one of {list(OBJECTIVES)}", objective)
    start = time.perf_counter()
    problems = problem_array(layers, source)
    result = search_layers(problems, spec, objective)
    seconds = time.perf_counter() - start
    _check_feasible(result.cycles, layers, problems, name, spec)
    cycles = result.cycles
    macs = problems[:, MACS].astype(np.float64)
    table = pl.DataFrame(
        {
            "model": layers.get_column("model"),
            "layer": layers.get_column("layer"),
            "accelerator": [name] * layers.height,
            "cycles": cycles,
            "latency_s": cycles / (spec.clock_ghz * 1e9),
            "dram_bytes": np.ceil(result.dram_words * spec.word_bits / 8).astype(np.int64),
            "energy_j": result.energy_pj * 1e-12,
            "utilization": macs / (cycles * float(spec.mac_units)),
            "mapping": [describe_mapping(spec, result.mapping(i)) for i in range(layers.height)],
        },
        schema=COST_SCHEMA,
    )
    stats: dict[str, Any] = {
        "layers": layers.height,
        "mappings_evaluated": int(result.evaluations.sum()),
        "seconds": seconds,
        "mean_utilization": float(table["utilization"].mean()) if layers.height else 0.0,
    }
    sums = table.group_by("model", maintain_order=True).agg(
        pl.col("latency_s").sum(), pl.col("energy_j").sum()
    )
    for row in sums.iter_rows(named=True):
        stats[f"{row['model']}.latency_s"] = row["latency_s"]
        stats[f"{row['model']}.energy_j"] = row["energy_j"]
    return table, stats


def layers_hash(layers: str | Path | pl.DataFrame) -> str:
    """sha256 of a layer table's contract columns (content, not file bytes or compression)."""
    frame = read_parquet(layers, LAYER_SCHEMA) if not isinstance(layers, pl.DataFrame) else layers
    canonical = frame.select(list(LAYER_SCHEMA)).write_csv()
    return hashlib.sha256(canonical.encode()).hexdigest()


def write_cost_table(
    table: pl.DataFrame,
    path: str | Path,
    spec_name: str,
    spec: Spec,
    layers_hash: str,
    objective: str = "latency",
) -> None:
    """Write a cost table atomically with the metadata `read_cost_table` checks."""
    write_parquet(
        table.select(list(COST_SCHEMA)),
        path,
        metadata={
            META_SPEC_NAME: spec_name,
            META_SPEC_JSON: spec_json(spec),
            META_SPEC_HASH: spec_hash(spec),
            META_VERSION: COST_MODEL_VERSION,
            META_OBJECTIVE: objective,
            META_LAYERS_HASH: layers_hash,
        },
    )


def read_cost_table(
    path: str | Path,
    *,
    spec: Spec | None = None,
    layers_hash: str | None = None,
    objective: str | None = None,
) -> pl.DataFrame:
    """Read a cost table, rejecting one computed by another cost model or for other inputs.

    The cost-model version is always checked; the spec, layer-table hash and objective when given.
    """
    metadata = read_metadata(path)
    expected = {META_VERSION: COST_MODEL_VERSION}
    if spec is not None:
        expected[META_SPEC_HASH] = spec_hash(spec)
    if layers_hash is not None:
        expected[META_LAYERS_HASH] = layers_hash
    if objective is not None:
        expected[META_OBJECTIVE] = objective
    for key, value in expected.items():
        stored = metadata.get(key)
        if stored != value:
            raise InputError(
                path,
                f"metadata.{key}",
                f"{_short(value)} (the table is stale or for other inputs: re-run relmas profile)",
                _short(stored) if stored is not None else "missing",
            )
    return read_parquet(path, COST_SCHEMA)


def _short(value: str) -> str:
    return value if len(value) <= 16 else value[:12] + "…"


def _check_feasible(
    cycles: np.ndarray, layers: pl.DataFrame, problems: np.ndarray, name: str, spec: Spec
) -> None:
    """Name the buffer that is too small for a layer no mapping fits."""
    bad = np.flatnonzero(cycles < 0)
    if not bad.size:
        return
    i = int(bad[0])
    where = f"{layers['model'][i]} layer {layers['layer'][i]} ({layers['name'][i]})"
    if isinstance(spec, EyerissSpec):
        key, what = "glb_kib", "one input row and one partial-sum row"
    else:
        taps = int(problems[i, R] * problems[i, S])
        if spec.weight_words_per_lane < spec.vector_width * taps:
            key, what = "weight_buf_kib", f"one weight vector per lane for {taps} kernel taps"
        elif spec.input_buf_words < taps:
            key, what = "input_buf_kib", "one input window"
        else:
            key, what = "glb_kib", "one input row and one partial-sum row"
    raise InputError(
        None, f"accelerators.{name}.{key}", f"room for {what} of {where}", getattr(spec, key)
    )
