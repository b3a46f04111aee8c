"""Operator resizing: piece shapes and costs, piece tables, engine pieces, the gacer policy."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import yaml

from relmas.config import validate_config
from relmas.errors import InputError
from relmas.hw.spec import parse_spec
from relmas.policies import make_policy
from relmas.policies.gacer import Gacer
from relmas.profile import profile_layers, profile_pieces, split_layers, write_cost_table
from relmas.schemas import LAYER_SCHEMA
from relmas.sim import CostTables, Engine, load_system
from relmas.sim.costs import PIECE_SCHEMA, load_costs
from relmas.study import policy_options
from tests.layers import layer
from tests.synthetic import cost_frame
from tests.test_hw import EYERISS_168
from tests.test_sim import trace


def layer_table() -> pl.DataFrame:
    """A conv (with halo), a depthwise conv, a strided 1x1 conv, a linear layer and a matmul; the
    strided layers read even inputs (14 x 14, 10 x 10), as in the zoo."""
    rows = [
        layer("m", 0, "conv", k=32, c=16, y=14, x=14, r=3, s=3, pad=1),
        layer("m", 1, "dwconv", k=24, y=7, x=7, r=3, s=3, stride=2, groups=24, size_in=(14, 14)),
        layer("m", 2, "conv", k=10, c=8, y=5, x=5, stride=2, size_in=(10, 10)),
        layer("m", 3, "linear", k=30, c=64, y=9),
        layer("m", 4, "matmul", k=9, c=16, y=9, groups=4),
    ]
    return pl.DataFrame(rows, schema=LAYER_SCHEMA)


# ----------------------------------------------------------------------------- piece shapes


def test_pieces_conserve_macs_and_never_read_less_than_the_layer():
    layers = layer_table()
    pieces = split_layers(layers, [1, 2, 4, 3], ["K", "Y"])
    sums = pieces.group_by("layer", "dim", "splits").agg(
        pl.len().alias("n"),
        *(pl.col(c).sum() for c in ("macs", "in_elems", "w_elems", "out_elems")),
    )
    whole = sums.join(
        layers.select("layer", "Y", "macs", "in_elems", "w_elems", "out_elems"),
        on="layer",
        suffix="_whole",
    )
    assert whole.height == layers.height * 2 * 3  # k = 1 is the layer itself, not a cut
    assert (whole["macs"] == whole["macs_whole"]).all()
    assert (whole["out_elems"] == whole["out_elems_whole"]).all()
    for column in ("in_elems", "w_elems"):
        assert (whole[column] >= whole[f"{column}_whole"]).all()
    # A 3x3 conv cut into 2 x 7 rows reads 2 x (6 + 3) of 13 + 3 input rows: the halo.
    conv_y2 = pieces.filter(
        (pl.col("layer") == 0) & (pl.col("dim") == "Y") & (pl.col("splits") == 2)
    )
    assert conv_y2["Y"].to_list() == [7, 7]
    assert conv_y2["in_elems"].to_list() == [-(-16 * 14 * 14 * 9 // 16)] * 2
    # K pieces re-read the whole input, Y pieces the whole weights...
    conv_k4 = pieces.filter(
        (pl.col("layer") == 0) & (pl.col("dim") == "K") & (pl.col("splits") == 4)
    )
    assert conv_k4["K"].to_list() == [8] * 4 and conv_k4["in_elems"].to_list() == [16 * 14 * 14] * 4
    assert (conv_y2["w_elems"] == 32 * 16 * 9).all()
    # ...but depthwise K pieces take whole groups: their own channels' inputs only.
    dw_k4 = pieces.filter((pl.col("layer") == 1) & (pl.col("dim") == "K") & (pl.col("splits") == 4))
    assert dw_k4["groups"].to_list() == [6] * 4 and dw_k4["in_elems"].sum() == 24 * 14 * 14
    # Uneven cuts: the first pieces are one unit larger; fewer units than k give fewer pieces.
    assert pieces.filter((pl.col("layer") == 2) & (pl.col("dim") == "Y") & (pl.col("splits") == 3))[
        "Y"
    ].to_list() == [2, 2, 1]
    assert pieces.filter((pl.col("layer") == 3) & (pl.col("dim") == "K") & (pl.col("splits") == 4))[
        "K"
    ].to_list() == [8, 8, 7, 7]
    with pytest.raises(InputError, match="resizing.dims"):
        split_layers(layers, [2], ["X"])


def test_piece_costs_come_from_the_cost_model_and_pay_for_the_split():
    spec = parse_spec("e", EYERISS_168, None)
    layers = layer_table()
    pieces, stats = profile_pieces(layers, "e", spec, [2, 4], ["K", "Y"])
    assert dict(pieces.schema) == PIECE_SCHEMA
    assert stats["pieces"] == pieces.height == split_layers(layers, [2, 4], ["K", "Y"]).height
    # Each piece costs exactly what the cost model says for its shape (not the layer's / k).
    shapes = split_layers(layers, [2, 4], ["K", "Y"]).select(list(LAYER_SCHEMA))
    direct, _ = profile_layers(shapes, "e", spec)
    assert pieces["cycles"].to_list() == direct["cycles"].to_list()
    assert pieces["dram_bytes"].to_list() == direct["dram_bytes"].to_list()
    # Never below the unsplit layer's compulsory traffic (weights + inputs + outputs once).
    floor = layers.select(
        "layer", floor=(pl.col("in_elems") + pl.col("w_elems") + pl.col("out_elems")) * 2
    )
    sums = pieces.group_by("layer", "dim", "splits").agg(
        pl.col("dram_bytes").sum(), pl.col("macs").sum()
    )
    sums = sums.join(floor, on="layer").join(
        layers.select("layer", pl.col("macs").alias("whole")), on="layer"
    )
    assert (sums["dram_bytes"] >= sums["floor"]).all()
    assert (sums["macs"] == sums["whole"]).all()
    # Splitting is not free: some cut moves strictly more bytes than the layer does whole.
    whole, _ = profile_layers(layers, "e", spec)
    more = sums.join(whole.select("layer", pl.col("dram_bytes").alias("one")), on="layer")
    assert (more["dram_bytes"] > more["one"]).any()


def write_tables(directory, layers, spec_name: str = "e") -> None:
    spec = parse_spec(spec_name, EYERISS_168, None)
    table, _ = profile_layers(layers, spec_name, spec)
    write_cost_table(table, directory / f"{spec_name}.parquet", spec_name, spec, "hash-a")
    pieces, _ = profile_pieces(layers, spec_name, spec, [2], ["K"])
    resizing = {"splits": [2], "dims": ["K"]}
    path = directory / f"{spec_name}.pieces.parquet"
    write_cost_table(pieces, path, spec_name, spec, "hash-a", resizing=resizing)


def test_piece_tables_load_beside_the_cost_tables_and_stale_ones_are_refused(tmp_path):
    layers = layer_table()
    write_tables(tmp_path, layers)
    system = load_system({"instances": [{"name": "e", "count": 2}], "dram_gbps": 16.0})
    tables = load_costs(tmp_path, system)
    pieces = tables.pieces
    assert pieces is not None and pieces.variants == ("whole", "K2")
    assert pieces.count[: layers.height].tolist() == [[1, 2]] * layers.height
    assert np.array_equal(pieces.latency_s[:, 0, :], tables.latency_s)
    # A piece table of another layer table (other hash) is stale.
    spec = parse_spec("e", EYERISS_168, None)
    table, _ = profile_layers(layers, "e", spec)
    write_cost_table(table, tmp_path / "e.parquet", "e", spec, "hash-b")
    with pytest.raises(InputError, match=r"e.pieces.parquet: metadata.relmas.layers_hash"):
        load_costs(tmp_path, system)
    # A missing piece is refused, naming the column.
    frame = pl.read_parquet(tmp_path / "e.pieces.parquet").filter(pl.col("piece") == 0)
    with pytest.raises(InputError, match="piece"):
        tables.with_pieces(frame, "p.parquet")


# ----------------------------------------------------------------------------- engine


def one_layer(latency: float, dram: int, piece_latency: float, piece_dram: int):
    """One model of one big layer on type x, and its K2 pieces."""
    costs = cost_frame({"big": {"x": [(latency, dram, 1.0)]}})
    pieces = pl.DataFrame(
        {
            "model": ["big"] * 2,
            "layer": [0, 0],
            "accelerator": ["x"] * 2,
            "dim": ["K"] * 2,
            "splits": [2, 2],
            "pieces": [2, 2],
            "piece": [0, 1],
            "macs": [0, 0],
            "cycles": [0, 0],
            "latency_s": [piece_latency] * 2,
            "dram_bytes": [piece_dram] * 2,
            "energy_j": [0.6] * 2,
            "utilization": [1.0] * 2,
            "mapping": ["piece"] * 2,
        },
        schema=PIECE_SCHEMA,
    )
    return costs, pieces


def run_one(costs, pieces, dram_gbps, split: int):
    system = load_system({"instances": [{"name": "x", "count": 2}], "dram_gbps": dram_gbps})
    tables = CostTables.from_frame(costs, ["x"], bandwidth_bps=system.bandwidth_bytes_per_s)
    engine = Engine(system, tables.with_pieces(pieces), trace([("big", 0, 1.0, 9)]), record=True)
    view = engine.next_decision()
    engine.step([(0, 0, split)] if split else [(0, 0)])
    if split:
        # The job stays ready with one piece left; the second piece goes to the other instance.
        view = engine.next_decision()
        assert view.ready_jobs.tolist() == [0] and view.pieces_left.tolist() == [1]
        engine.step([(0, 1)])
    assert engine.next_decision() is None
    return engine.result("manual")


def test_splitting_a_big_layer_over_an_idle_second_instance_helps():
    costs, pieces = one_layer(1.0, 0, 0.55, 0)
    whole = run_one(costs, pieces, None, split=0)
    split = run_one(costs, pieces, None, split=1)
    assert whole.jobs["finish_s"][0] == pytest.approx(1.0)
    assert split.jobs["finish_s"][0] == pytest.approx(0.55)  # both pieces at once
    assert split.metrics["energy_dynamic_j"] == pytest.approx(1.2)  # the pieces' own energy
    assert split.timeline.sort("accelerator")["piece"].to_list() == [0, 1]
    assert split.metrics["assignments"] == 2
    assert split.metrics["sla_rate"] == 1.0 and whole.metrics["sla_rate"] == 1.0


def test_splitting_a_bandwidth_bound_layer_hurts():
    # Whole: 10 B over 10 B/s = 1 s. Pieces re-read 3 B each: 16 B at 10 B/s = 1.6 s.
    costs, pieces = one_layer(1.0, 10, 0.5, 8)
    whole = run_one(costs, pieces, 1e-8, split=0)
    split = run_one(costs, pieces, 1e-8, split=1)
    assert whole.jobs["finish_s"][0] == pytest.approx(1.0)
    assert split.jobs["finish_s"][0] == pytest.approx(1.6)
    assert split.metrics["bytes_moved"] == pytest.approx(16.0)


def test_gacer_splits_where_it_helps_and_not_where_it_hurts():
    for (lat, dram, plat, pdram, gbps), expect in (
        ((1.0, 0, 0.55, 0, None), [(0, 0, 1), (0, 1, 1)]),
        ((1.0, 10, 0.5, 8, 1e-8), [(0, 0, 0)]),
    ):
        costs, pieces = one_layer(lat, dram, plat, pdram)
        system = load_system({"instances": [{"name": "x", "count": 2}], "dram_gbps": gbps})
        tables = CostTables.from_frame(costs, ["x"], bandwidth_bps=system.bandwidth_bytes_per_s)
        engine = Engine(system, tables.with_pieces(pieces), trace([("big", 0, 1.0, 9)]))
        policy = make_policy("gacer")
        policy.reset(engine)
        assert policy.decide(engine.next_decision()) == expect


def test_assign_rejects_a_second_variant_for_a_split_layer():
    costs, pieces = one_layer(1.0, 0, 0.55, 0)
    system = load_system({"instances": [{"name": "x", "count": 3}]})
    tables = CostTables.from_frame(costs, ["x"]).with_pieces(pieces)
    engine = Engine(system, tables, trace([("big", 0, 1.0, 9)]))
    engine.next_decision()
    with pytest.raises(ValueError, match="not one of the variants"):
        engine.assign(0, 0, 2)
    engine.assign(0, 0, 1)
    assert engine.split_variants == ("whole", "K2")
    engine.assign(0, 1, 1)  # the second piece; the job has no piece left and is no longer ready
    with pytest.raises(ValueError, match="not ready"):
        engine.assign(0, 2, 1)


# ----------------------------------------------------------------------------- configuration


def test_the_configured_window_reaches_the_search(quick_config):
    raw = yaml.safe_load(quick_config.read_text())
    assert policy_options(validate_config(raw), "gacer") == {"window": 6, "max_evaluations": 64}
    raw["evaluation"]["gacer"] = {"window": 1}
    options = policy_options(validate_config(raw), "gacer")
    assert options == {"window": 1, "max_evaluations": 64}  # the other one from the schema
    # Two jobs, one big layer each, two idle instances: a window of one plans job 0 alone and cuts
    # it over both instances; a window of two plans both jobs and runs them whole side by side.
    costs, pieces = one_layer(1.0, 0, 0.55, 0)
    system = load_system({"instances": [{"name": "x", "count": 2}]})
    tables = CostTables.from_frame(costs, ["x"]).with_pieces(pieces)
    decisions = {}
    for settings in (options, dict(options, window=2)):
        policy = make_policy("gacer", seed=0, **settings)
        assert isinstance(policy, Gacer) and policy.window == settings["window"]
        engine = Engine(system, tables, trace([("big", 0, 1.0, 9), ("big", 0, 1.0, 9)]))
        policy.reset(engine)
        decisions[policy.window] = policy.decide(engine.next_decision())
    assert decisions == {1: [(0, 0, 1), (0, 1, 1)], 2: [(0, 0, 0), (1, 1, 0)]}
