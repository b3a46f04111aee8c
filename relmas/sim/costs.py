"""Cost tables indexed for simulation: latency, DRAM demand, energy per (model, layer, type).

The simulator, the policies and the workload generator all need the same derived quantities (a job's
isolated latency, its remaining work), so they are computed here once, from one definition:

- *alone latency* of a layer on a type: `max(latency_s, dram_bytes / bandwidth)`, its time when it
  has the system's whole off-chip bandwidth to itself (just `latency_s` with unlimited bandwidth);
- *isolated latency* of a model: the sum of its layers' alone latencies on the accelerator type that
  runs the whole model fastest (the model alone on its best accelerator with full bandwidth);
- *remaining work* of a job: the sum of its remaining layers' alone latencies, each on its own
  fastest type.

Using the alone latency, not `latency_s`, matters when bandwidth is scarce: a deadline computed from
the bandwidth-free latency of a bandwidth-bound model could not be met even by the model alone.

Layers are stored as rows of 2-D arrays (row × type); each model occupies `n_layers + 1` consecutive
rows, the last one a sentinel meaning "finished", so that a job's progress is a single row cursor.

Optionally, `PieceTables` hold the costs of the same layers cut into pieces (operator resizing,
docs/gacer.md): `{accelerator}.pieces.parquet` beside each cost table, written by
`relmas profile --pieces` from the same layer table and spec.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import dataframely as dy
import numpy as np
import polars as pl

from relmas.errors import InputError
from relmas.hw.spec import META_SPEC_JSON, spec_from_json
from relmas.io import ROW, read_metadata, read_parquet
from relmas.paths import cost_table, piece_table
from relmas.schemas import COST_SCHEMA, MAX_LAYER_MACS, CostTable, column_types
from relmas.sim.system import System

SPLIT_DIMS = ("K", "Y")

# How far latency_s may be from cycles / clock, relative: relmas.profile divides in float64 (its
# tables are within 1.2e-16); one part in a million also passes latencies written out with seven
# significant digits, and is far finer than the cost models' agreement with silicon (percents,
# docs/costmodel.md).
CLOCK_TOLERANCE = 1e-6


class PieceTable(CostTable):
    """`costs/{accelerator}.pieces.parquet`: the costs of layer pieces, COST_SCHEMA's columns plus
    the cut (dimension K or Y, split factor `splits` >= 2), the number of `pieces` it makes of this
    layer (min(splits, units of dim)), the 0-based `piece` and the piece's MACs."""

    model = dy.String(primary_key=True)
    layer = dy.Int32(primary_key=True, min=0)
    accelerator = dy.String(primary_key=True)
    dim = dy.String(primary_key=True)
    splits = dy.Int32(primary_key=True, min=2)
    pieces = dy.Int32(min=1)
    piece = dy.Int32(primary_key=True, min=0)
    macs = dy.Int64(min=1, max=MAX_LAYER_MACS)

    @dy.rule()
    def dim__known(cls) -> pl.Expr:
        """a cut along one of K, Y"""
        return pl.col("dim").is_in(SPLIT_DIMS)

    @dy.rule()
    def pieces__at_most_splits(cls) -> pl.Expr:
        """1 <= pieces <= splits"""
        return pl.col("pieces") <= pl.col("splits")

    @dy.rule()
    def piece__below_pieces(cls) -> pl.Expr:
        """0 <= piece < pieces"""
        return pl.col("piece") < pl.col("pieces")


# The columns in their file order: the cost table's keys, the cut, then its costs.
PIECE_SCHEMA: dict[str, pl.DataType] = {
    name: column_types(PieceTable)[name]
    for name in ("model", "layer", "accelerator", "dim", "splits", "pieces", "piece", "macs")
} | {k: v for k, v in COST_SCHEMA.items() if k not in ("model", "layer", "accelerator")}

WHOLE = "whole"  # the label of split variant 0: the layer in one piece


@dataclass(frozen=True, eq=False)
class PieceTables:
    """Per-piece costs of the layers of a `CostTables`, for every split variant.

    Variant 0 is the whole layer (one piece, the cost table's own costs); variant v > 0 cuts a
    layer along `variants[v]` (e.g. `K2`: output channels, at most 2 pieces; fewer when the
    dimension has fewer units). Piece p of variant v is column `offset[v] + p`.
    """

    variants: tuple[str, ...]  # labels: whole, K2, K4, Y2, ...
    count: np.ndarray  # int64[rows, variants]: pieces of each row under each variant
    offset: np.ndarray  # int64[variants]
    latency_s: np.ndarray  # float64[rows, columns, types]
    dram_bytes: np.ndarray  # float64[rows, columns, types]
    demand_bps: np.ndarray  # float64[rows, columns, types]
    energy_j: np.ndarray  # float64[rows, columns, types]

    @property
    def most_pieces(self) -> tuple[int, ...]:
        """The most pieces each variant makes of any layer (its split factor; 1 for whole)."""
        return tuple(int(n) for n in self.count.max(axis=0))

    @classmethod
    def whole(cls, tables: CostTables) -> PieceTables:
        """Only variant 0: every layer in one piece (what a system without resizing runs)."""
        rows = tables.latency_s.shape[0]
        return cls(
            variants=(WHOLE,),
            count=np.ones((rows, 1), dtype=np.int64),
            offset=np.zeros(1, dtype=np.int64),
            latency_s=tables.latency_s[:, None, :].copy(),
            dram_bytes=tables.dram_bytes[:, None, :].copy(),
            demand_bps=tables.demand_bps[:, None, :].copy(),
            energy_j=tables.energy_j[:, None, :].copy(),
        )

    @classmethod
    def from_frame(
        cls, pieces: pl.DataFrame, tables: CostTables, source: str | Path | None = None
    ) -> PieceTables:
        """Index `pieces` (PIECE_SCHEMA rows of all of `tables`' types) like `tables`.

        Every layer of every model needs pieces 0..n-1 of every variant present, on every type,
        with the same n on every type.
        """
        pieces = pieces.filter(pl.col("accelerator").is_in(list(tables.types)))
        cuts = pieces.select("dim", "splits").unique().sort("dim", "splits").rows()
        labels = (WHOLE, *(f"{dim}{k}" for dim, k in cuts))
        offset = np.concatenate(([0], 1 + np.cumsum([0] + [k for _, k in cuts])[:-1]))
        offset = offset.astype(np.int64)
        rows, types = tables.latency_s.shape
        columns = 1 + sum(k for _, k in cuts)
        shape = (rows, columns, types)
        latency, dram, energy = np.zeros(shape), np.zeros(shape), np.zeros(shape)
        for array, whole in ((latency, tables.latency_s), (dram, tables.dram_bytes)):
            array[:, 0, :] = whole
        energy[:, 0, :] = tables.energy_j
        count = np.zeros((rows, len(labels)), dtype=np.int64)
        count[:, 0] = 1
        layer_rows = np.flatnonzero(_layer_mask(tables))
        variant_of = {cut: v + 1 for v, cut in enumerate(cuts)}
        for t, name in enumerate(tables.types):
            part = pieces.filter(
                (pl.col("accelerator") == name) & pl.col("model").is_in(list(tables.models))
            )
            model = np.array([tables.model_index(m) for m in part["model"].to_list()], dtype=int)
            layer = part["layer"].to_numpy().astype(np.int64)
            if np.any(layer >= tables.n_layers[model]):
                raise InputError(source, "layer", f"layers of the cost table on {name!r}")
            row = tables.first_row[model] + layer
            cut = part.select("dim", "splits").rows()
            variant = np.array([variant_of[c] for c in cut], dtype=np.int64)
            piece = part["piece"].to_numpy().astype(np.int64)
            column = offset[variant] + piece
            here = np.zeros_like(count)
            np.add.at(here, (row, variant), 1)
            seen = np.zeros((rows, columns), dtype=np.int64)
            np.add.at(seen, (row, column), 1)
            complete = np.all(here[layer_rows, 1:] > 0) and np.all(seen <= 1)
            top = np.zeros_like(count)
            np.maximum.at(top, (row, variant), part["pieces"].to_numpy())
            if not complete or not np.array_equal(top, here) or np.any(piece >= top[row, variant]):
                expected = (
                    f"pieces 0..n-1 of every cut {list(labels[1:])} of every layer on {name!r}"
                )
                raise InputError(source, "piece", expected, "missing or repeated pieces")
            if t == 0:
                count[:, 1:] = here[:, 1:]
            elif not np.array_equal(count[:, 1:], here[:, 1:]):
                raise InputError(source, "piece", "the same pieces on every accelerator")
            latency[row, column, t] = part["latency_s"].to_numpy()
            dram[row, column, t] = part["dram_bytes"].to_numpy()
            energy[row, column, t] = part["energy_j"].to_numpy()
        sentinel = ~_layer_mask(tables)
        count[sentinel, 1:] = 1
        with np.errstate(divide="ignore", invalid="ignore"):
            demand = np.where(latency > 0, dram / latency, 0.0)
        return cls(labels, count, offset, latency, dram, demand, energy)


@dataclass(frozen=True, eq=False)
class CostTables:
    """Per-layer costs of every model on every accelerator type of one system."""

    types: tuple[str, ...]
    models: tuple[str, ...]
    first_row: np.ndarray  # int64[models]: row of each model's layer 0
    n_layers: np.ndarray  # int64[models]
    latency_s: np.ndarray  # float64[rows, types]
    dram_bytes: np.ndarray  # float64[rows, types]
    demand_bps: np.ndarray  # float64[rows, types]: dram_bytes / latency_s, bytes per second
    energy_j: np.ndarray  # float64[rows, types]
    alone_s: np.ndarray  # float64[rows, types]: max(latency_s, dram_bytes / bandwidth)
    best_latency_s: np.ndarray  # float64[rows]: min over types of alone_s
    remaining_work_s: np.ndarray  # float64[rows]: best latencies from this row to the model's end
    model_latency_s: np.ndarray  # float64[models, types]: whole model alone on one type
    isolated_s: np.ndarray  # float64[models]: min over types of model_latency_s
    pieces: PieceTables | None = None  # costs of layers cut into pieces, if profiled

    def with_pieces(self, pieces: pl.DataFrame, source: str | Path | None = None) -> CostTables:
        """These tables with the piece costs of `pieces` (PIECE_SCHEMA) attached."""
        return replace(self, pieces=PieceTables.from_frame(pieces, self, source))

    def estimates_on(self, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(best latency, remaining work) of every row counting only the types where `allowed`
        (bool[types]) is set: the estimates of the system of those types alone, for a rule
        restricted to them (relmas.policies.placement)."""
        return _estimates(self.alone_s[:, allowed], self.first_row, self.n_layers)

    def model_index(self, model: str) -> int:
        return self.models.index(model)

    def isolated_latency(self, model: str) -> float:
        """The model alone on its fastest accelerator type with full bandwidth, in seconds."""
        return float(self.isolated_s[self.model_index(model)])

    def isolated_by_model(self) -> dict[str, float]:
        return {m: float(s) for m, s in zip(self.models, self.isolated_s, strict=True)}

    @classmethod
    def from_frame(
        cls,
        costs: pl.DataFrame,
        types: Sequence[str],
        models: Sequence[str] | None = None,
        source: str | Path | None = None,
        bandwidth_bps: float = np.inf,
    ) -> CostTables:
        """Index `costs` (COST_SCHEMA rows of all accelerators) for the accelerator `types`.

        Every model must have the same layers 0..L-1 on every type; the values are as the cost
        table's contract has them (`read_cost_tables` checks a file's: relmas.schemas.CostTable).
        `models` defaults to every model in the table.
        `bandwidth_bps` (the system's off-chip bandwidth) sets the alone latencies of the estimates.
        """
        if not types:
            raise InputError(source, "accelerator", "at least one accelerator type")
        present = set(costs.get_column("accelerator").unique().to_list())
        for name in types:
            if name not in present:
                raise InputError(source, "accelerator", f"cost rows for accelerator {name!r}")
        costs = costs.filter(pl.col("accelerator").is_in(list(types)))
        model_names = (
            tuple(models) if models is not None else tuple(sorted(costs["model"].unique()))
        )
        blocks = [_model_block(costs, model, types, source) for model in model_names]
        sizes = np.array([block[0].shape[0] for block in blocks], dtype=np.int64)
        first_row = np.concatenate(([0], np.cumsum(sizes + 1)[:-1])).astype(np.int64)
        rows = int(np.sum(sizes + 1))
        latency = np.zeros((rows, len(types)))
        dram = np.zeros((rows, len(types)))
        energy = np.zeros((rows, len(types)))
        for start, (lat, byt, ene) in zip(first_row, blocks, strict=True):
            end = start + lat.shape[0]
            latency[start:end], dram[start:end], energy[start:end] = lat, byt, ene
        sentinel = np.zeros(rows, dtype=bool)
        sentinel[first_row + sizes] = True
        with np.errstate(divide="ignore", invalid="ignore"):
            demand = np.where(sentinel[:, None], 0.0, dram / latency)
        alone = np.maximum(latency, dram / bandwidth_bps)
        best, remaining = _estimates(alone, first_row, sizes)
        model_latency = np.zeros((len(model_names), len(types)))
        for m, (start, size) in enumerate(zip(first_row, sizes, strict=True)):
            model_latency[m] = alone[start : start + size].sum(axis=0)
        return cls(
            types=tuple(types),
            models=model_names,
            first_row=first_row,
            n_layers=sizes,
            latency_s=latency,
            dram_bytes=dram,
            demand_bps=demand,
            energy_j=energy,
            alone_s=alone,
            best_latency_s=best,
            remaining_work_s=remaining,
            model_latency_s=model_latency,
            isolated_s=model_latency.min(axis=1),
        )


def _estimates(
    alone: np.ndarray, first_row: np.ndarray, sizes: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the best alone latency over the types (columns) of `alone`, and the remaining work
    (the sum of the best latencies from the row to its model's end; 0 on the sentinel rows)."""
    best = alone.min(axis=1)
    remaining = np.zeros(alone.shape[0])
    for start, size in zip(first_row, sizes, strict=True):
        block = best[start : start + size]
        remaining[start : start + size] = np.cumsum(block[::-1])[::-1]
    return best, remaining


def read_cost_file(path: str | Path, contract: type[CostTable] = CostTable) -> pl.DataFrame:
    """A cost or piece table checked against its `contract`, and its latencies against its cycles
    at the clock of the spec it records (relmas.profile's metadata): an edited column, or a table
    profiled at another clock, would be simulated as quietly wrong latencies. A table without a
    recorded spec (written by hand, examples/handwritten) has no clock to hold them to."""
    frame = read_parquet(path, contract)
    recorded = read_metadata(path).get(META_SPEC_JSON)
    if recorded is None:
        return frame
    clock_ghz = spec_from_json(recorded, path).clock_ghz
    cycles = pl.col("cycles")
    off = (pl.col("latency_s") * (clock_ghz * 1e9) - cycles).abs() > CLOCK_TOLERANCE * cycles
    wrong = frame.with_row_index(ROW).filter(off)
    if wrong.height:
        row = wrong.row(0, named=True)
        keys = "".join(f", {key} {row[key]}" for key in contract.primary_key())
        expected = (
            f"cycles / ({clock_ghz:g} GHz x 1e9) within {CLOCK_TOLERANCE:g} of it "
            f"(the clock of the spec in metadata.{META_SPEC_JSON})"
        )
        got = f"{row['latency_s']} (row {row[ROW]}{keys}, cycles {row['cycles']})"
        raise InputError(path, "latency_s", expected, got)
    return frame


def read_cost_tables(directory: str | Path, accelerators: Sequence[str]) -> pl.DataFrame:
    """Concatenate `{directory}/{name}.parquet` of each accelerator, checking the name column."""
    frames = []
    for name in dict.fromkeys(accelerators):
        path = cost_table(directory, name)
        frame = read_cost_file(path)
        wrong = frame.filter(pl.col("accelerator") != name)
        if wrong.height:
            raise InputError(path, "accelerator", f"{name!r} in every row", wrong["accelerator"][0])
        frames.append(frame.select(list(COST_SCHEMA)))
    return pl.concat(frames)


def load_costs(
    directory: str | Path,
    system: System,
    system_source: str | Path | None = None,
    models: tuple[str, ...] | list[str] | None = None,
) -> CostTables:
    """Cost tables `{directory}/{accelerator}.parquet` of the system's types, indexed."""
    for i, instance in enumerate(system.instances):
        path = cost_table(directory, instance.name)
        if not path.is_file():
            raise InputError(
                system_source,
                f"instances[{i}].name",
                f"an accelerator with a cost table {path}",
                instance.name,
            )
    frame = read_cost_tables(directory, system.accelerator_types)
    tables = CostTables.from_frame(
        frame,
        system.accelerator_types,
        models,
        source=directory,
        bandwidth_bps=system.bandwidth_bytes_per_s,
    )
    names = system.accelerator_types
    if all(piece_table(directory, name).is_file() for name in names):
        tables = tables.with_pieces(read_piece_tables(directory, names), directory)
    return tables


def read_piece_tables(directory: str | Path, accelerators: Sequence[str]) -> pl.DataFrame:
    """Concatenate `{directory}/{name}.pieces.parquet`, each checked against its cost table.

    A piece table must come from the same inputs as the cost table beside it: every metadata
    entry of the cost table (spec, layer-table hash, cost-model version, objective) is repeated in
    it, so that stale pieces are refused rather than simulated.
    """
    frames = []
    for name in dict.fromkeys(accelerators):
        path = piece_table(directory, name)
        own = read_metadata(path)
        for key, value in read_metadata(cost_table(directory, name)).items():
            if own.get(key) != value:
                expected = f"{value[:12]} as in {name}.parquet (re-run relmas profile --pieces)"
                raise InputError(path, f"metadata.{key}", expected, own.get(key, "missing"))
        frame = read_cost_file(path, PieceTable)
        wrong = frame.filter(pl.col("accelerator") != name)
        if wrong.height:
            raise InputError(path, "accelerator", f"{name!r} in every row", wrong["accelerator"][0])
        frames.append(frame.select(list(PIECE_SCHEMA)))
    return pl.concat(frames)


def _layer_mask(tables: CostTables) -> np.ndarray:
    """True for rows that are layers, False for the models' sentinel rows."""
    mask = np.ones(tables.latency_s.shape[0], dtype=bool)
    mask[tables.first_row + tables.n_layers] = False
    return mask


def _model_block(
    costs: pl.DataFrame, model: str, types: Sequence[str], source: str | Path | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Latency, DRAM bytes and energy of `model`'s layers (rows) on each type (columns)."""
    rows = costs.filter(pl.col("model") == model)
    columns: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for name in types:
        part = rows.filter(pl.col("accelerator") == name).sort("layer")
        layers = part["layer"].to_numpy()
        if part.height == 0:
            raise InputError(source, "model", f"cost rows of model {model!r} on {name!r}", "none")
        if not np.array_equal(layers, np.arange(part.height)):
            first = int(np.flatnonzero(layers != np.arange(part.height))[0])
            problem = (
                f"layer {first} missing" if layers[first] > first else f"layer {first} repeated"
            )
            expected = f"layers 0, 1, ... once each for {model!r} on {name!r}"
            raise InputError(source, "layer", expected, problem)
        columns.append(
            (
                part["latency_s"].to_numpy().astype(np.float64),
                part["dram_bytes"].to_numpy().astype(np.float64),
                part["energy_j"].to_numpy().astype(np.float64),
            )
        )
    counts = {c[0].shape[0] for c in columns}
    if len(counts) != 1:
        raise InputError(source, "layer", f"the same number of layers of {model!r} on every type")
    return tuple(np.stack([c[k] for c in columns], axis=1) for k in range(3))  # type: ignore[return-value]
