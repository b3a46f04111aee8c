"""Layers x accelerator -> cost table (COST_SCHEMA), with the metadata that keeps it honest.

A cost table is the expensive, reusable artefact of the pipeline, so its file records what it was
computed from: the accelerator spec (JSON and hash), the cost-model version, the mapping objective,
the layer table's hash and the hash of the `models:` config that layer table was extracted from
(which `relmas zoo` records in it). `read_cost_table` rejects a table whose record differs from the
inputs at hand, and `check_cost_tables` one that differs from a configuration's (what every stage
that reads cost tables for a config checks), instead of silently simulating with stale costs.

`profile_layers` takes any LAYER_SCHEMA frame, so it also costs pieces of layers (a layer cut along
K or Y for operator resizing, `split_layers`) with the same search: `profile_pieces` writes the
piece table (PIECE_SCHEMA) that sits beside the cost table.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from relmas.errors import InputError
from relmas.hashing import config_hash
from relmas.hw.common import OBJECTIVES
from relmas.hw.problem import MACS, R, S, problem_array
from relmas.hw.search import describe_mapping, search_layers
from relmas.hw.spec import (
    META_SPEC_JSON,
    EyerissSpec,
    Spec,
    parse_spec,
    spec_from_json,
    spec_hash,
    spec_json,
)
from relmas.io import read_metadata, read_parquet, write_parquet
from relmas.paths import cost_table
from relmas.progress import progress
from relmas.schemas import COST_SCHEMA, LAYER_SCHEMA, LayerTable
from relmas.sim.costs import PIECE_SCHEMA, SPLIT_DIMS, read_cost_file

# Bump whenever a change to relmas.hw can change a cost: older tables are then rejected.
COST_MODEL_VERSION = "1"

META_SPEC_NAME = "relmas.spec_name"
META_SPEC_HASH = "relmas.spec_hash"
META_VERSION = "relmas.cost_model_version"
META_OBJECTIVE = "relmas.objective"
META_LAYERS_HASH = "relmas.layers_hash"
META_MODELS_HASH = "relmas.models_hash"  # in the layer table (relmas zoo) and the cost tables
META_RESIZING = "relmas.resizing"


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
    bar = progress(layers.height, f"profile {name}", "layer")
    result = search_layers(problems, spec, objective, on_chunk=bar.update)
    bar.close()
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


def split_layers(layers: pl.DataFrame, splits: Sequence[int], dims: Sequence[str]) -> pl.DataFrame:
    """The pieces of every layer for each cut (dim, k), k > 1 in `splits`, dim in `dims`.

    A cut along K gives each piece whole output channels (whole groups for grouped and depthwise
    convolutions); along Y, whole output rows. A dimension of u units makes min(k, u) pieces, the
    first u mod k of them one unit larger. Pieces keep everything else, so splitting is not free:
    a K piece re-reads the whole input (a grouped one only its groups' channels), a Y piece the
    whole weights and its input rows with their halo: the input elements scale by
    rows(piece) / rows(layer), rounded up, with rows(y) = (y - 1) x stride + max(R, stride), so
    that the pieces together read at least the layer's input. MACs add up exactly.
    Returns LAYER_SCHEMA columns plus dim, splits, pieces, piece.
    """
    unknown = sorted(set(dims) - set(SPLIT_DIMS))
    if unknown:
        raise InputError(None, "resizing.dims", f"dimensions among {list(SPLIT_DIMS)}", unknown[0])
    cuts = [(dim, int(k)) for dim in dims for k in sorted(set(splits)) if k > 1]
    rows = []
    for layer in layers.select(list(LAYER_SCHEMA)).iter_rows(named=True):
        for dim, k in cuts:
            sizes = _piece_units(_split_units(layer, dim), k)
            for piece, units in enumerate(sizes):
                shape = _piece_shape(layer, dim, units)
                cut = {"dim": dim, "splits": k, "pieces": len(sizes), "piece": piece}
                rows.append({**layer, **shape, **cut})
    cut_schema = {name: PIECE_SCHEMA[name] for name in ("dim", "splits", "pieces", "piece")}
    schema = LAYER_SCHEMA | cut_schema
    return pl.DataFrame(rows, schema=schema)


def _split_units(layer: Mapping[str, Any], dim: str) -> int:
    if dim == "Y":
        return layer["Y"]
    grouped = layer["op"] in ("conv", "dwconv") and layer["groups"] > 1
    return layer["groups"] if grouped else layer["K"]


def _piece_units(units: int, k: int) -> list[int]:
    count = min(k, units)
    base, extra = divmod(units, count)
    return [base + 1] * extra + [base] * (count - extra)


def _piece_shape(layer: Mapping[str, Any], dim: str, units: int) -> dict[str, int]:
    """The columns of one piece that differ from its layer."""
    if dim == "Y":
        stride, whole = layer["stride"], layer["Y"]

        def rows(y: int) -> int:
            return (y - 1) * stride + max(layer["R"], stride)

        return {
            "Y": units,
            "macs": layer["macs"] // whole * units,
            "in_elems": -(-layer["in_elems"] * rows(units) // rows(whole)),
            "out_elems": layer["out_elems"] // whole * units,
        }
    if layer["op"] in ("conv", "dwconv") and layer["groups"] > 1:
        groups = layer["groups"]
        return {
            "K": layer["K"] // groups * units,
            "groups": units,
            "macs": layer["macs"] // groups * units,
            "in_elems": layer["in_elems"] // groups * units,
            "w_elems": layer["w_elems"] // groups * units,
            "out_elems": layer["out_elems"] // groups * units,
        }
    whole = layer["K"]
    return {
        "K": units,
        "macs": layer["macs"] // whole * units,
        "w_elems": -(-layer["w_elems"] * units // whole),
        "out_elems": layer["out_elems"] // whole * units,
    }


def profile_pieces(
    layers: pl.DataFrame,
    name: str,
    spec: Spec,
    splits: Sequence[int],
    dims: Sequence[str],
    objective: str = "latency",
    source: str | Path | None = None,
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Best mapping of every piece of `split_layers(layers, splits, dims)` on `spec`.

    Pieces of equal shape are profiled once. Returns the piece table (PIECE_SCHEMA) and the
    statistics of `profile_layers` (over the distinct shapes) plus `pieces`.
    """
    pieces = split_layers(layers, splits, dims)
    shape = [c for c in LAYER_SCHEMA if c not in ("model", "layer", "name")]
    distinct = pieces.unique(subset=shape, keep="first", maintain_order=True)
    table, stats = profile_layers(
        distinct.select(list(LAYER_SCHEMA)), name, spec, objective, source=source
    )
    costs = [c for c in PIECE_SCHEMA if c in COST_SCHEMA and c not in ("model", "layer")]
    costed = pl.concat([distinct.select(shape), table.select(costs)], how="horizontal")
    joined = pieces.join(costed, on=shape, how="left", nulls_equal=True, maintain_order="left")
    stats["pieces"] = pieces.height
    return joined.select(list(PIECE_SCHEMA)).cast(PIECE_SCHEMA), stats


def layers_hash(layers: str | Path | pl.DataFrame) -> str:
    """sha256 of a layer table's contract columns (content, not file bytes or compression)."""
    frame = read_parquet(layers, LayerTable) if not isinstance(layers, pl.DataFrame) else layers
    canonical = frame.select(list(LAYER_SCHEMA)).write_csv()
    return hashlib.sha256(canonical.encode()).hexdigest()


def models_hash(layers: str | Path, config: Mapping[str, Any] | None) -> str | None:
    """The models hash that a cost table profiled from the layer table `layers` records: the one
    `relmas zoo` recorded in it (refused if it differs from `config`'s: a layer table of other
    models), else `config`'s models (when profiling for a config), else None (a hand-made layer
    table profiled for a spec file)."""
    recorded = read_metadata(layers).get(META_MODELS_HASH)
    if config is None:
        return recorded
    expected = config_hash(config["models"])
    if recorded is not None and recorded != expected:
        what = "the table was extracted for other `models:`: re-run relmas zoo"
        raise InputError(layers, f"metadata.{META_MODELS_HASH}", f"{expected} ({what})", recorded)
    return expected


def write_cost_table(
    table: pl.DataFrame,
    path: str | Path,
    spec_name: str,
    spec: Spec,
    layers_hash: str,
    objective: str = "latency",
    resizing: Mapping[str, Any] | None = None,
    models_hash: str | None = None,
) -> None:
    """Write a cost table atomically with the metadata `read_cost_table` checks.

    With `resizing` (the cuts profiled: splits, dims) it is a piece table (PIECE_SCHEMA);
    `models_hash` (`models_hash()`) ties it to the `models:` config of its layer table.
    """
    schema = COST_SCHEMA if resizing is None else PIECE_SCHEMA
    extra = {} if resizing is None else {META_RESIZING: json.dumps(resizing, sort_keys=True)}
    if models_hash is not None:
        extra[META_MODELS_HASH] = models_hash
    write_parquet(
        table.select(list(schema)),
        path,
        metadata=extra
        | {
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
    expected = {META_VERSION: COST_MODEL_VERSION}
    if spec is not None:
        expected[META_SPEC_HASH] = spec_hash(spec)
    if layers_hash is not None:
        expected[META_LAYERS_HASH] = layers_hash
    if objective is not None:
        expected[META_OBJECTIVE] = objective
    _check_metadata(path, read_metadata(path), expected)
    return read_cost_file(path)


def check_cost_tables(
    directory: str | Path,
    accelerators: Sequence[str],
    config: Mapping[str, Any],
    source: str | Path | None = None,
    *,
    required: bool = False,
) -> None:
    """Refuse a cost table of `directory` that was profiled for other inputs than `config`'s:
    another cost model, spec of its accelerator, objective, or layer table (`models:`).

    Tables that record no provenance at all (written by hand or by a script, as
    examples/handwritten/) are the user's word and pass, unless `required`: the stages whose
    results are reported as of the configured accelerators (evaluate, bound, sweep: static power
    from the configured spec) refuse them. Missing tables are left to the loader.
    """
    for name in dict.fromkeys(accelerators):
        path = cost_table(directory, name)
        if not path.is_file():
            continue
        metadata = read_metadata(path)
        if META_VERSION not in metadata and not required:
            continue
        spec = parse_spec(name, config["accelerators"][name], source)
        expected = {
            META_VERSION: COST_MODEL_VERSION,
            META_SPEC_HASH: spec_hash(spec),
            META_OBJECTIVE: config["profile"]["objective"],
            META_MODELS_HASH: config_hash(config["models"]),
        }
        _check_metadata(path, metadata, expected)


# why a table whose metadata entry differs is stale, by entry
_STALE = {
    META_VERSION: "profiled by another cost model",
    META_SPEC_HASH: "profiled for another spec of the accelerator",
    META_OBJECTIVE: "profiled for another objective",
    META_LAYERS_HASH: "profiled from another layer table",
    META_MODELS_HASH: "profiled from the layer table of another `models:` config",
}


def _check_metadata(
    path: str | Path, metadata: Mapping[str, str], expected: Mapping[str, str]
) -> None:
    """Refuse `path` if an entry of its `metadata` differs from `expected`, saying why."""
    for key, value in expected.items():
        stored = metadata.get(key)
        if stored != value:
            # an entry left out is no sign of other inputs: a table written by hand records none
            missing = "lacks the provenance metadata relmas profile writes"
            why = f"was {_STALE[key]}" if stored is not None else missing
            raise InputError(
                path,
                f"metadata.{key}",
                f"{_short(value)} (the table {why}: re-run relmas profile)",
                _short(stored) if stored is not None else "missing",
            )


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


def recorded_static_power(costs: Path, names: Sequence[str]) -> dict[str, float]:
    """Static power per accelerator from the spec recorded in its cost table (0 if hand-written).

    A missing table is left for the simulator's input checks, which name the system key.
    """
    power = {}
    for name in names:
        path = cost_table(costs, name)
        recorded = read_metadata(path).get(META_SPEC_JSON) if path.is_file() else None
        power[name] = spec_from_json(recorded, path).static_w if recorded else 0.0
    return power


def configured_static_power(
    config: Mapping[str, Any], costs: Path, names: Sequence[str], source: str
) -> dict[str, float]:
    """Static power of the configured specs, after `check_profiled`."""
    check_profiled(config, costs, names, source)
    return {name: parse_spec(name, config["accelerators"][name], source).static_w for name in names}


def check_profiled(
    config: Mapping[str, Any], costs: Path, names: Sequence[str], source: str
) -> None:
    """Refuse a cost table not profiled from the configured spec of its accelerator, one written
    by hand too: evaluate, bound and sweep report their results as of the configured system (its
    static power, its accelerators)."""
    check_cost_tables(costs, names, config, source, required=True)
