"""The cost models against published silicon: the chips' specs and papers' layers, side by side.

`relmas/hw/silicon.yaml` holds the measurements and their sources. The comparison profiles each
network's layers on the chip's spec and sets the model beside the chip per layer:

- processing latency: the model's cycles at the chip's clock (DRAM overlapped, the cost table's
  meaning) against the chip's latency with DRAM traffic fully overlapped;
- total latency (Eyeriss): the same plus the feature maps moved over the chip's DRAM link, during
  which the chip stops processing, against the latency as measured;
- ResNet-50 on the Simba package (batch 1): the sum of the layers' latencies on all chiplets
  against the published images per second.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from relmas.hw.spec import Spec, parse_spec
from relmas.progress import hidden
from relmas.schemas import LAYER_SCHEMA

REFERENCE = Path(__file__).with_name("silicon.yaml")


def load_reference(path: Path = REFERENCE) -> dict[str, Any]:
    """The reference measurements (see the file's comments for each source)."""
    from relmas.yaml_load import load_yaml

    return load_yaml(path)


def chip_spec(reference: dict[str, Any], chip: str = "eyeriss") -> Spec:
    """The chip's spec as the cost models read it."""
    return parse_spec(chip, reference[chip]["spec"], REFERENCE, key_prefix=f"{chip}.spec")


def network_layers(network: str, batch: int, layers: list[dict[str, Any]]) -> pl.DataFrame:
    """The layer-table rows of a network's reference layers at the paper's batch size."""
    from relmas.zoo.extract import layer_row

    rows = []
    for index, layer in enumerate(layers):
        shape = {key: layer[key] for key in ("K", "C", "Y", "X", "R", "S", "stride", "groups")}
        k, c, r, s = shape["K"], shape["C"], shape["R"], shape["S"]
        row = layer_row(
            "conv",
            N=batch,
            **shape,
            in_elems=batch * c * shape["groups"] * layer["H"] * layer["W"],
            w_elems=k * c * r * s,
            out_elems=batch * k * shape["Y"] * shape["X"],
        )
        rows.append({**row, "model": network, "layer": index, "name": layer["name"]})
    return pl.DataFrame(rows, schema=LAYER_SCHEMA)


def compare_eyeriss(
    reference: dict[str, Any] | None = None, objective: str = "latency", *, progress: bool = False
) -> pl.DataFrame:
    """Model against chip per layer of every Eyeriss reference network (ms, MB, relative gaps);
    the profiling's progress (`relmas.progress`) only if asked."""
    from relmas.profile import profile_layers

    reference = reference or load_reference()
    chip = reference["eyeriss"]
    spec = chip_spec(reference)
    link_bytes_per_s = chip["link_gbps"] * 1e9
    frames = []
    for network, entry in chip["networks"].items():
        layers = network_layers(network, entry["batch"], entry["layers"])
        with hidden(not progress):
            costs, _ = profile_layers(layers, "eyeriss", spec, objective=objective)
        fmap_bytes = (layers["in_elems"] + layers["out_elems"]) * (spec.word_bits // 8)
        measured = pl.DataFrame(entry["layers"]).select(
            "name", "processing_ms", "total_ms", "active_pes", "dram_mb"
        )
        frames.append(
            measured.with_columns(
                network=pl.lit(network),
                model_processing_ms=costs["latency_s"] * 1e3,
                model_total_ms=costs["latency_s"] * 1e3 + fmap_bytes / link_bytes_per_s * 1e3,
                model_utilization=costs["utilization"],
                model_dram_mb=costs["dram_bytes"] / 1e6,
                mapping=costs["mapping"],
            )
        )
    table = pl.concat(frames)
    return table.with_columns(
        processing_gap=pl.col("model_processing_ms") / pl.col("processing_ms") - 1,
        total_gap=pl.col("model_total_ms") / pl.col("total_ms") - 1,
    ).select(
        "network",
        "name",
        "processing_ms",
        "model_processing_ms",
        "processing_gap",
        "total_ms",
        "model_total_ms",
        "total_gap",
        "active_pes",
        "model_utilization",
        "dram_mb",
        "model_dram_mb",
        "mapping",
    )


def network_totals(table: pl.DataFrame) -> pl.DataFrame:
    """Per network: the sums of measured and modelled latencies and their relative gaps."""
    sums = table.group_by("network", maintain_order=True).agg(
        pl.col("processing_ms", "model_processing_ms", "total_ms", "model_total_ms").sum()
    )
    return sums.with_columns(
        processing_gap=pl.col("model_processing_ms") / pl.col("processing_ms") - 1,
        total_gap=pl.col("model_total_ms") / pl.col("total_ms") - 1,
    )


def compare_simba(
    reference: dict[str, Any] | None = None, *, progress: bool = False
) -> pl.DataFrame:
    """The zoo's ResNet-50 at batch 1 on the Simba package against each published figure; the
    profiling's progress only if asked."""
    from relmas.profile import profile_layers
    from relmas.zoo import layer_table

    reference = reference or load_reference()
    chip = reference["simba"]
    spec = chip_spec(reference, "simba")
    with hidden(not progress):
        costs, _ = profile_layers(layer_table({"resnet50": {}}), "simba", spec)
    latency_s = float(costs["latency_s"].sum())
    rows = [
        {
            "source": entry["source"],
            "images_per_s": float(entry["images_per_s"]),
            "model_images_per_s": 1.0 / latency_s,
            "model_latency_ms": latency_s * 1e3,
            "model_utilization": float(
                (costs["utilization"] * costs["latency_s"]).sum() / latency_s
            ),
        }
        for entry in chip["resnet50"]
    ]
    return pl.DataFrame(rows).with_columns(
        gap=pl.col("model_images_per_s") / pl.col("images_per_s") - 1
    )
