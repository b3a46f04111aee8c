"""Profiling library: layer table -> cost table, its metadata, stale-table rejection, the figure."""

from __future__ import annotations

from pathlib import Path

import matplotlib.figure
import numpy as np
import polars as pl
import pytest

from relmas import profile
from relmas.errors import InputError
from relmas.figures.costs import plot_layer_costs
from relmas.hw.spec import parse_spec, spec_from_json
from relmas.io import read_metadata
from relmas.profile import (
    layers_hash,
    profile_layers,
    read_cost_table,
    write_cost_table,
)
from relmas.schemas import COST_SCHEMA, LAYER_SCHEMA
from tests.layers import layer
from tests.test_hw import EYERISS_168, SIMBA_CHIPLET

EYERISS_RAW = dict(EYERISS_168, clock_ghz=0.2)
EYERISS = parse_spec("eyeriss_168", EYERISS_RAW, None)
SIMBA = parse_spec("simba_chiplet", SIMBA_CHIPLET, None)


LAYERS = pl.DataFrame(
    [
        layer("cnn", 0, "conv", k=32, c=3, y=112, x=112, r=3, s=3, stride=2, pad=1),
        layer("cnn", 1, "dwconv", k=32, c=1, y=112, x=112, r=3, s=3, groups=32, pad=1),
        layer("cnn", 2, "conv", k=64, c=32, y=112, x=112),
        layer("cnn", 3, "conv", k=64, c=32, y=56, x=56, r=3, s=3, groups=2, pad=1),
        layer("cnn", 4, "linear", k=1000, c=1024),
        layer("bert", 0, "linear", k=768, c=768, y=128),
        layer("bert", 1, "matmul", k=128, c=64, y=128, groups=12),
        layer("bert", 2, "matmul", k=64, c=128, y=128, groups=12),
    ],
    schema=LAYER_SCHEMA,
)


@pytest.fixture(scope="module")
def tables() -> dict[str, tuple[pl.DataFrame, dict]]:
    return {
        "eyeriss_168": profile_layers(LAYERS, "eyeriss_168", EYERISS),
        "simba_chiplet": profile_layers(LAYERS, "simba_chiplet", SIMBA),
    }


def test_cost_table_follows_the_contract(tables):
    for name, (table, stats) in tables.items():
        spec = EYERISS if name == "eyeriss_168" else SIMBA
        assert dict(table.schema) == COST_SCHEMA
        assert table["accelerator"].unique().to_list() == [name]
        assert table.select("model", "layer").equals(LAYERS.select("model", "layer"))
        assert np.allclose(table["latency_s"], table["cycles"] / (spec.clock_ghz * 1e9))
        utilization = table["utilization"].to_numpy()
        assert np.all((utilization > 0) & (utilization <= 1))
        floor = LAYERS.select(pl.col("in_elems") + pl.col("w_elems") + pl.col("out_elems"))
        floor_bytes = floor.to_series().to_numpy() * spec.word_bits / 8
        assert np.all(table["dram_bytes"].to_numpy() >= floor_bytes)
        assert np.all(table["energy_j"].to_numpy() > 0)
        assert all(len(m) > 20 for m in table["mapping"])
        assert stats["layers"] == LAYERS.height
        assert stats["mappings_evaluated"] >= LAYERS.height
        assert stats["seconds"] > 0
        assert stats["mean_utilization"] == pytest.approx(float(np.mean(utilization)))
        for model in ("cnn", "bert"):
            rows = table.filter(pl.col("model") == model)
            assert stats[f"{model}.latency_s"] == pytest.approx(rows["latency_s"].sum())
            assert stats[f"{model}.energy_j"] == pytest.approx(rows["energy_j"].sum())


def test_the_two_families_prefer_different_layers(tables):
    """In cycles, depthwise layers run faster on the Eyeriss-like, dense ones on the Simba-like."""
    eyeriss = tables["eyeriss_168"][0]["cycles"].to_numpy()
    simba = tables["simba_chiplet"][0]["cycles"].to_numpy()
    assert eyeriss[1] < simba[1]  # depthwise
    assert np.all(simba[[2, 3, 5]] < eyeriss[[2, 3, 5]])  # dense conv, grouped conv, linear


def test_pieces_of_a_layer_cost_no_more_than_the_whole():
    """Operator splitting profiles pieces cut along K or Y with the same function."""
    whole = layer("m", 0, "conv", k=64, c=64, y=56, x=56, r=3, s=3, pad=1)

    def half(index: int, **cut: int) -> dict:
        """A half of `whole` (half its MACs and outputs), with the sizes `cut` changes."""
        halved = {"macs": whole["macs"] // 2, "out_elems": whole["out_elems"] // 2}
        return dict(whole, layer=index, **halved, **cut)

    along_k = half(1, K=32, w_elems=whole["w_elems"] // 2)
    along_y = half(2, Y=28, in_elems=64 * 30 * 58)
    frame = pl.DataFrame([whole, along_k, along_y], schema=LAYER_SCHEMA)
    for spec in (EYERISS, SIMBA):
        cycles = profile_layers(frame, "x", spec)[0]["cycles"].to_numpy()
        assert cycles[1] <= cycles[0] and cycles[2] <= cycles[0]
        assert cycles[1] + cycles[2] >= cycles[0] * 0.9


def test_write_and_read_back_with_metadata(tmp_path: Path, tables):
    table = tables["eyeriss_168"][0]
    path = tmp_path / "costs" / "eyeriss_168.parquet"
    digest = layers_hash(LAYERS)
    write_cost_table(table, path, "eyeriss_168", EYERISS, digest)
    back = read_cost_table(path, spec=EYERISS, layers_hash=digest, objective="latency")
    assert back.equals(table)
    metadata = read_metadata(path)
    assert metadata["relmas.spec_name"] == "eyeriss_168"
    assert spec_from_json(metadata["relmas.spec_json"]) == EYERISS
    assert metadata["relmas.cost_model_version"] == profile.COST_MODEL_VERSION
    assert [p.name for p in path.parent.iterdir()] == ["eyeriss_168.parquet"]


def test_stale_or_mismatched_tables_are_rejected(tmp_path: Path, tables, monkeypatch):
    path = tmp_path / "eyeriss_168.parquet"
    digest = layers_hash(LAYERS)
    write_cost_table(tables["eyeriss_168"][0], path, "eyeriss_168", EYERISS, digest)
    cases = [
        ({"spec": SIMBA}, "metadata.relmas.spec_hash"),
        ({"layers_hash": layers_hash(LAYERS.head(3))}, "metadata.relmas.layers_hash"),
        ({"objective": "energy"}, "metadata.relmas.objective"),
    ]
    for kwargs, key in cases:
        with pytest.raises(InputError) as info:
            read_cost_table(path, **kwargs)
        message = str(info.value)
        assert (
            message.startswith(f"{path}: {key}: expected ") and "re-run relmas profile" in message
        )
        assert "\n" not in message
    monkeypatch.setattr(profile, "COST_MODEL_VERSION", "0-older")
    with pytest.raises(InputError, match="metadata.relmas.cost_model_version"):
        read_cost_table(path)


def test_layers_hash_is_content_based(tmp_path: Path):
    path = tmp_path / "layers.parquet"
    LAYERS.write_parquet(path, compression="snappy")
    assert layers_hash(path) == layers_hash(LAYERS)
    changed = LAYERS.with_columns(
        pl.when(pl.col("layer") == 0).then(5).otherwise(pl.col("K")).cast(pl.Int32).alias("K")
    )
    assert layers_hash(changed) != layers_hash(LAYERS)


def test_bad_layers_and_objective_are_input_errors():
    wrong_macs = LAYERS.with_columns(pl.col("macs") + 1)
    with pytest.raises(InputError, match="layers.parquet: macs: expected N\\*K\\*C"):
        profile_layers(wrong_macs, "x", SIMBA, source="layers.parquet")
    uneven = pl.DataFrame([layer("m", 0, "conv", k=6, c=2, groups=4)], schema=LAYER_SCHEMA)
    with pytest.raises(InputError, match="K: expected a multiple of groups"):
        profile_layers(uneven, "x", SIMBA)
    with pytest.raises(InputError, match="profile.objective"):
        profile_layers(LAYERS, "x", SIMBA, objective="speed")


def test_layer_no_mapping_fits_names_the_buffer():
    small = parse_spec("tiny", dict(SIMBA_CHIPLET, weight_buf_kib=0.5), None)  # 64 words per lane
    big_kernel = pl.DataFrame(
        [layer("m", 0, "conv", k=8, c=8, y=8, x=8, r=7, s=7)], schema=LAYER_SCHEMA
    )
    with pytest.raises(InputError, match=r"accelerators\.tiny\.weight_buf_kib: expected room for"):
        profile_layers(big_kernel, "tiny", small)


def test_plot_layer_costs(tables):
    costs = {name: table for name, (table, _) in tables.items()}
    fig = plot_layer_costs(costs, "cnn")
    assert isinstance(fig, matplotlib.figure.Figure)
    latency, energy = fig.axes
    assert len(latency.lines) == len(energy.lines) == 2
    assert [line.get_label() for line in latency.lines] == list(costs)
    with pytest.raises(InputError, match="gpt"):
        plot_layer_costs(costs, "gpt")


def test_the_search_in_chunks_gives_the_same_table_and_reports_each(tables) -> None:
    """`relmas profile` searches a few layers per kernel call to report progress: any chunk gives
    the same costs and mappings as one call over all layers."""
    from relmas.hw.problem import problem_array
    from relmas.hw.search import search_layers

    problems = problem_array(LAYERS)
    whole = search_layers(problems, SIMBA, chunk=len(LAYERS))
    done: list[int] = []
    chunked = search_layers(problems, SIMBA, chunk=3, on_chunk=done.append)
    assert done == [3, 3, 2]
    for field in ("cycles", "energy_pj", "dram_words", "evaluations", "params", "footprints"):
        assert np.array_equal(getattr(whole, field), getattr(chunked, field)), field
    table, _ = tables["simba_chiplet"]  # profile_layers, default chunk
    assert table["cycles"].to_list() == whole.cycles.tolist()
