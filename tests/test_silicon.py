"""The cost models against the published silicon (relmas/hw/silicon.yaml, docs/costmodel.md).

Eyeriss (JSSC 2017): AlexNet's five convolution layers within 20 % of the chip's measured latency
each and 15 % in total, with DRAM overlapped (processing latency) and as measured (total latency);
VGG-16's deeper layers within 25 %. The chip's own mapping rules decide this: the whole mapping
space, without them, is 30 % too fast on CONV2 (tested below as well).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest

from relmas.hw import eyeriss as row_stationary
from relmas.hw.problem import C, G, K, N, P, Q, problem_array
from relmas.hw.search import search_layers
from relmas.hw.silicon import (
    chip_spec,
    compare_eyeriss,
    load_reference,
    network_layers,
    network_totals,
)


def cdiv(a: int, b: int) -> int:
    return -(-int(a) // int(b))


@pytest.fixture(scope="module")
def reference():
    return load_reference()


@pytest.fixture(scope="module")
def eyeriss_table(reference):
    return compare_eyeriss(reference)


def test_alexnet_layers_within_20_percent_and_total_within_15(eyeriss_table):
    alexnet = eyeriss_table.filter(pl.col("network") == "alexnet")
    assert alexnet.height == 5
    for gap in ("processing_gap", "total_gap"):
        assert alexnet[gap].abs().max() <= 0.20, alexnet.select("name", gap)
    totals = network_totals(eyeriss_table).filter(pl.col("network") == "alexnet").row(0, named=True)
    assert abs(totals["processing_gap"]) <= 0.15
    assert abs(totals["total_gap"]) <= 0.15


def test_vgg16_deeper_layers_within_25_percent(eyeriss_table):
    deep = eyeriss_table.filter(
        (pl.col("network") == "vgg16") & pl.col("name").str.contains("^CONV[45]-")
    )
    assert deep.height == 6
    assert deep["processing_gap"].abs().max() <= 0.25, deep.select("name", "processing_gap")


def test_chip_sets_are_the_papers_pe_sets(reference):
    """AlexNet's sets as JSSC 2017 section IV-A draws them: all R filter rows, all E output rows
    when they fit the 14 columns (3 x 13 for CONV3-5), strip-mined when they do not."""
    spec = chip_spec(reference)
    entry = reference["eyeriss"]["networks"]["alexnet"]
    layers = network_layers("alexnet", entry["batch"], entry["layers"])
    result = search_layers(problem_array(layers), spec)
    shapes = [(result.mapping(i)["h"], result.mapping(i)["e"]) for i in range(layers.height)]
    assert [h for h, _ in shapes] == [11, 5, 3, 3, 3]
    assert [e for _, e in shapes[2:]] == [13, 13, 13]
    assert all(e <= spec.pe_cols for _, e in shapes[:2])
    free = search_layers(problem_array(layers), dataclasses.replace(spec, set_shapes="any"))
    assert free.mapping(0)["h"] < 11  # the whole space folds CONV1's 11 rows to fill the array


def test_fill_time_is_the_filter_words_of_every_pass(reference):
    """With a fill rate each pass first writes p * q * s_t words into the filter scratchpads."""
    spec = chip_spec(reference)
    entry = reference["eyeriss"]["networks"]["alexnet"]
    layers = network_layers("alexnet", entry["batch"], entry["layers"][2:3])  # CONV3
    problems = problem_array(layers)
    no_fill = search_layers(problems, dataclasses.replace(spec, fill_words_per_cycle=0.0))
    filled = search_layers(problems, spec)
    m = filled.mapping(0)
    prob = problems[0]
    passes = (
        cdiv(prob[G] * prob[N], m["sn"])
        * cdiv(cdiv(prob[K], m["sk"]), m["p"])
        * cdiv(cdiv(prob[C], m["sc"]), m["q"])
        * m["folds"]
        * m["s_folds"]
        * cdiv(prob[P], m["e"])
    )
    compute = passes * prob[Q] * m["q"] * m["s_t"] * m["p"]
    assert filled.cycles[0] == compute + passes * m["p"] * m["q"] * m["s_t"]
    assert filled.cycles[0] > no_fill.cycles[0]
    assert np.all(filled.cycles >= no_fill.cycles)


def test_without_the_chips_rules_the_model_is_too_fast(reference):
    """The issue's finding, kept as a check that the rules are what closes the gap."""
    free = dict(reference["eyeriss"], spec=dict(reference["eyeriss"]["spec"]))
    free["spec"].update(set_shapes="any", fill_words_per_cycle=0)
    table = compare_eyeriss({**reference, "eyeriss": free})
    conv2 = table.filter(pl.col("name") == "CONV2").row(0, named=True)
    assert conv2["processing_gap"] < -0.25


def test_pointwise_layers_are_searched_in_both_orientations(reference):
    """A linear layer over 128 tokens (a 1 x 1 convolution of 128 rows of width 1) is the same
    computation laid as one row of 128: with the chip's rules the search takes the cheaper, and
    in the whole space without fill it keeps the layer as given."""
    linear = {"name": "fc", "K": 768, "C": 768, "Y": 128, "X": 1, "R": 1, "S": 1, "stride": 1}
    layers = network_layers("bert", 1, [dict(linear, groups=1, H=128, W=1)])
    problems = problem_array(layers)
    spec = chip_spec(reference)
    laid_as_row = problems[0].copy()
    laid_as_row[[P, Q]] = laid_as_row[[Q, P]]
    arch = row_stationary.arch_vector(spec)

    def cycles_of(row: np.ndarray) -> int:
        params, footprint = np.zeros(16, np.int64), np.zeros(4, np.int64)
        return row_stationary.eyeriss_layer(row, arch, 0, params, footprint)[0]

    as_given, as_row = cycles_of(problems[0]), cycles_of(laid_as_row)
    chip = search_layers(problems, spec)
    assert as_row < as_given  # every filter word used for 128 tokens, not one, per pass
    assert chip.cycles[0] == as_row and chip.mapping(0)["transposed"] == 1
    free_spec = dataclasses.replace(spec, set_shapes="any", fill_words_per_cycle=0.0)
    assert search_layers(problems, free_spec).mapping(0)["transposed"] == 0
