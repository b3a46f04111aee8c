"""Mapping search over many layers at once: one parallel Numba kernel for both families.

The Python side only turns a spec into its architecture vector, calls the kernel on chunks of
layers (so that a long profile reports progress) and wraps the arrays; everything per layer (the
enumeration, the cost of each mapping, the choice) runs compiled, in parallel over layers.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

import numba
import numpy as np
from numba import njit, prange

from relmas.hw import common, eyeriss, jit_cache, problem, simba
from relmas.hw.common import OBJECTIVES, ORDERS
from relmas.hw.spec import EyerissSpec, Spec

EYERISS, SIMBA = 0, 1
# Layers searched per kernel call: enough for both cores to share out, few enough that the
# progress of a profile moves every few seconds.
CHUNK = 32
PARAM_SLOTS = 16
FOOTPRINT_SLOTS = 4


@dataclass(frozen=True)
class SearchResult:
    """The best mapping of every layer: costs, chosen parameters and buffer footprints.

    cycles is -1 for a layer that no mapping fits. `params` columns follow `param_names`,
    `footprints` columns follow `footprint_names` and compare with `capacities`. `transposed`
    marks the layers whose best mapping lays their output rows along the columns.
    """

    cycles: np.ndarray  # int64[n]
    energy_pj: np.ndarray  # float64[n]
    dram_words: np.ndarray  # float64[n]
    evaluations: np.ndarray  # int64[n]
    params: np.ndarray  # int64[n, PARAM_SLOTS]
    footprints: np.ndarray  # int64[n, FOOTPRINT_SLOTS]
    transposed: np.ndarray  # bool[n]
    param_names: tuple[str, ...]
    footprint_names: tuple[str, ...]
    capacities: tuple[int, ...]

    def mapping(self, i: int) -> dict[str, int]:
        """The chosen mapping parameters of layer `i` by name (and whether it is transposed)."""
        names = zip(self.param_names, self.params[i], strict=False)
        return {**{n: int(v) for n, v in names}, "transposed": int(self.transposed[i])}


@njit(cache=True, parallel=True)
def _search(problems, arch, kind, objective):
    n = problems.shape[0]
    cycles = np.empty(n, dtype=np.int64)
    energy = np.empty(n, dtype=np.float64)
    words = np.empty(n, dtype=np.float64)
    evaluations = np.empty(n, dtype=np.int64)
    params = np.zeros((n, PARAM_SLOTS), dtype=np.int64)
    footprints = np.zeros((n, FOOTPRINT_SLOTS), dtype=np.int64)
    for i in prange(n):
        if kind == EYERISS:
            result = eyeriss.eyeriss_layer(problems[i], arch, objective, params[i], footprints[i])
        else:
            result = simba.simba_layer(problems[i], arch, objective, params[i], footprints[i])
        cycles[i], energy[i], words[i], evaluations[i] = result
    return cycles, energy, words, evaluations, params, footprints


_KERNEL_MODULES = (common, eyeriss, problem, simba)
_caches_checked = False


def _refresh_caches_once() -> None:
    global _caches_checked
    if not _caches_checked:
        jit_cache.refresh(_search, (*_KERNEL_MODULES, sys.modules[__name__]))
        _caches_checked = True


def search_layers(
    problems: np.ndarray,
    spec: Spec,
    objective: str = "latency",
    *,
    chunk: int = CHUNK,
    on_chunk: Callable[[int], None] | None = None,
) -> SearchResult:
    """Best mapping of each problem row (relmas.hw.problem.problem_array) on `spec`.

    The rows are searched `chunk` at a time (each layer's search is independent, so the result
    is the same for any chunk), and `on_chunk(rows done)` is called after each: progress."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    model = eyeriss if isinstance(spec, EyerissSpec) else simba
    kind = EYERISS if isinstance(spec, EyerissSpec) else SIMBA
    _refresh_caches_once()
    rows = np.ascontiguousarray(problems, dtype=np.int64)
    # A 1 x 1 stride-1 layer is the same computation with its output rows and columns swapped (a
    # linear layer's tokens as one row instead of one column). With the chip's set shapes, a pass
    # fill or the chip's buffer allocation the two cost differently, so such a layer is searched
    # both ways, right after itself; in the whole space without fill they tie (docs/costmodel.md,
    # "Silicon").
    pointwise = (
        (rows[:, problem.R] == 1) & (rows[:, problem.S] == 1) & (rows[:, problem.STRIDE] == 1)
    )
    swappable = pointwise & (rows[:, problem.P] != rows[:, problem.Q]) & _orientation_matters(spec)
    swapped = rows.copy()
    swapped[:, [problem.P, problem.Q]] = rows[:, [problem.Q, problem.P]]
    both = np.concatenate([rows[:, None, :], swapped[:, None, :]], axis=1)
    searched = np.ascontiguousarray(both.reshape(-1, rows.shape[1])[_keep(swappable)])
    own_rows = np.column_stack([np.ones(len(rows), bool), np.zeros(len(rows), bool)])
    originals = own_rows.reshape(-1)[_keep(swappable)]
    arch = model.arch_vector(spec)
    parts = []
    previous = numba.get_parallel_chunksize()
    numba.set_parallel_chunksize(1)  # layers differ widely in search cost: balance them one by one
    try:
        for start in range(0, max(len(searched), 1), chunk):
            part = searched[start : start + chunk]
            parts.append(_search(part, arch, kind, OBJECTIVES.index(objective)))
            if on_chunk is not None:
                on_chunk(int(originals[start : start + chunk].sum()))
    finally:
        numba.set_parallel_chunksize(previous)
    arrays = [np.concatenate(column) for column in zip(*parts, strict=True)]
    arrays, transposed = _best_orientation(arrays, swappable, OBJECTIVES.index(objective))
    return SearchResult(
        *arrays,
        transposed=transposed,
        param_names=model.PARAM_NAMES,
        footprint_names=model.FOOTPRINT_NAMES,
        capacities=model.capacities(spec),
    )


def _orientation_matters(spec: Spec) -> bool:
    return isinstance(spec, EyerissSpec) and (
        spec.set_shapes == "chip" or spec.fill_words_per_cycle > 0 or spec.glb_allocation == "chip"
    )


def _keep(swappable: np.ndarray) -> np.ndarray:
    """Which of the interleaved (layer, layer swapped) rows are searched."""
    return np.column_stack([np.ones(len(swappable), dtype=bool), swappable]).reshape(-1)


def _best_orientation(
    arrays: list[np.ndarray], swappable: np.ndarray, objective: int
) -> tuple[list[np.ndarray], np.ndarray]:
    """Per layer, the better of its two searches (a layer no mapping fits loses)."""
    where = np.cumsum(1 + swappable) - 1 - swappable  # index of each layer's own search
    own = [column[where] for column in arrays]
    transposed = np.zeros(len(swappable), dtype=bool)
    cycles, energy = arrays[0], arrays[1]
    for i in np.flatnonzero(swappable):
        j = where[i] + 1
        if cycles[j] < 0:
            continue
        if own[0][i] < 0 or common.better(objective, cycles[j], energy[j], own[0][i], own[1][i]):
            transposed[i] = True
            for column, source in zip(own, arrays, strict=True):
                column[i] = source[j]
    return own, transposed


def describe_mapping(spec: Spec, mapping: dict[str, int]) -> str:
    """A one-line, human-readable description of a chosen mapping."""
    m = mapping
    order = ORDERS[m["order"]]
    tile = f"tile[i{m['tile_i']} k{m['tile_k']} c{m['tile_c']} rows{m['tile_p']}] {order}"
    if m.get("transposed"):
        tile += "; output rows and columns swapped"
    if isinstance(spec, EyerissSpec):
        return (
            f"RS set {m['h']}x{m['e']} (R folds {m['folds']}), sets c{m['sc']} k{m['sk']} "
            f"i{m['sn']}; PE p{m['p']} q{m['q']} s{m['s_t']}; {tile}"
        )
    return (
        f"WS chiplets k{m['ck']} rows{m['cp']} i{m['cn']}; PEs k{m['pk']} c{m['pc']} "
        f"rows{m['pp']} i{m['pn']}; lane k{m['k_t']} c{m['c_t']}x{spec.vector_width} "
        f"pixels {m['p_t']}x{m['q_t']}; {tile}"
    )
