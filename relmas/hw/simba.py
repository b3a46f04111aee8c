"""Simba-like cost model: weight-stationary chiplets of vector-MAC PEs (Shao et al., MICRO 2019).

Inside a PE, each of the `lanes` vector MACs owns one output channel at a time and multiplies a
vector of `vector_width` input channels, broadcast from the input buffer to every lane, by weights
held stationary while a tile of output pixels streams past; partial sums collect in the lane's
accumulation buffer. Across PEs of a chiplet the mapping splits output channels (pk), input
channels (pc, partial sums reduced over the network), output rows (pp) and instances (pn); across
chiplets output channels (ck), output rows (cp) and instances (cn). The PE tile is k_t output
channels per lane and c_t input-channel vectors resident in the weight buffer
(`k_t * c_t * vector_width * R * S` words per lane), with the largest pixel tile the accumulation
buffer (`k_t * pixels <= accum_buf_entries`) and the input buffer (its input window) allow. Each
PE receives at most `vector_width` words per cycle from the network, which bounds layers with
little weight reuse (a fully-connected layer on one token).

Depthwise layers have one input and one output channel per group: one MAC of each vector and one
lane of each PE do useful work, so they run far below peak here, by construction of the dataflow.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from relmas.hw.common import (
    DRAM_PARAM_NAMES,
    cdiv,
    dram_floor_energy,
    dram_level,
    factors,
    improves,
    layer_dims,
    new_incumbent,
    scratch_size,
    search_result,
    take_if_better,
)
from relmas.hw.problem import MACS, STRIDE, C, G, K, N, P, Q, R, S
from relmas.hw.spec import SIMBA_PSUM_WORDS, SimbaSpec

(
    A_CHIPLETS,
    A_PES,
    A_LANES,
    A_VECTOR,
    A_WEIGHT_LANE,
    A_INPUT,
    A_ACCUM,
    A_GLB,
    A_PSUM_WORDS,
    A_E_MAC,
    A_E_WEIGHT,
    A_E_INPUT,
    A_E_ACCUM,
    A_E_NOC,
    A_E_GLB,
    A_E_NOP,
    A_E_DRAM,
) = range(17)

PARAM_NAMES = (
    "cn",
    "ck",
    "cp",
    "pk",
    "pc",
    "pp",
    "pn",
    "k_t",
    "c_t",
    "p_t",
    "q_t",
    *DRAM_PARAM_NAMES,
)
FOOTPRINT_NAMES = ("weight_buf_lane", "input_buf", "accum_buf_lane", "glb")


def arch_vector(spec: SimbaSpec) -> np.ndarray:
    """The spec as the float64 vector `simba_layer` reads."""
    e = spec.energy_pj
    return np.array(
        [
            spec.chiplets,
            spec.pes_per_chiplet,
            spec.lanes,
            spec.vector_width,
            spec.weight_words_per_lane,
            spec.input_buf_words,
            spec.accum_buf_entries,
            spec.glb_words,
            SIMBA_PSUM_WORDS,
            e["mac"],
            e["weight_buf"],
            e["input_buf"],
            e["accum_buf"],
            e["noc"],
            e["glb"],
            e["nop"],
            e["dram"],
        ],
        dtype=np.float64,
    )


def capacities(spec: SimbaSpec) -> tuple[int, ...]:
    """Capacities matching FOOTPRINT_NAMES."""
    return (
        spec.weight_words_per_lane,
        spec.input_buf_words,
        spec.accum_buf_entries,
        spec.glb_words,
    )


@njit(cache=True)
def pixel_tile(p_rows, q_cols, r_all, s_all, stride, channels, pixels, input_words):
    """Largest p_t x q_t output tile of <= `pixels` outputs whose input window fits (else 0, 0).

    Whole rows first (q_t = Q), then as many rows as fit; a single partial row otherwise.
    """
    q_t = min(q_cols, pixels)
    p_t = min(p_rows, pixels // q_t)
    width = (q_t - 1) * stride + s_all
    fit_rows = input_words // (channels * width)
    if fit_rows >= r_all:
        p_t = min(p_t, (fit_rows - r_all) // stride + 1)
        return p_t, q_t
    fit_cols = input_words // (channels * r_all)
    if fit_cols < s_all:
        return 0, 0
    return 1, min(q_t, (fit_cols - s_all) // stride + 1)


@njit(cache=True)
def splits(prob, chiplets, pes, scratch):
    """Every spatial split (cn, ck, cp, pk, pc, pp, pn) over chiplets and PEs, widest first."""
    n_inst = prob[G] * prob[N]
    k_all, c_all, p_all = prob[K], prob[C], prob[P]
    found = []
    n_cn = factors(n_inst, chiplets, scratch[0])
    for icn in range(n_cn - 1, -1, -1):
        cn = scratch[0, icn]
        n_ck = factors(k_all, chiplets // cn, scratch[1])
        for ick in range(n_ck - 1, -1, -1):
            ck = scratch[1, ick]
            n_cp = factors(p_all, chiplets // (cn * ck), scratch[2])
            for icp in range(n_cp - 1, -1, -1):
                cp = scratch[2, icp]
                n_pk = factors(cdiv(k_all, ck), pes, scratch[3])
                for ipk in range(n_pk - 1, -1, -1):
                    pk = scratch[3, ipk]
                    n_pc = factors(c_all, pes // pk, scratch[4])
                    for ipc in range(n_pc - 1, -1, -1):
                        pc = scratch[4, ipc]
                        n_pp = factors(cdiv(p_all, cp), pes // (pk * pc), scratch[5])
                        for ipp in range(n_pp - 1, -1, -1):
                            pp = scratch[5, ipp]
                            n_pn = factors(cdiv(n_inst, cn), pes // (pk * pc * pp), scratch[6])
                            for ipn in range(n_pn - 1, -1, -1):
                                found.append((cn, ck, cp, pk, pc, pp, scratch[6, ipn]))
    return found


@njit(cache=True)
def simba_layer(prob, arch, objective, params, footprint):
    """Search the weight-stationary mapping space of a layer; write the best to params/footprint.

    Returns (cycles, energy_pj, dram_words, evaluations); cycles = -1 when nothing fits.
    """
    lanes, vector = int(arch[A_LANES]), int(arch[A_VECTOR])
    weight_lane, accum = int(arch[A_WEIGHT_LANE]), int(arch[A_ACCUM])
    # DRAM word, global-buffer word, package-network word, weight fill (network + weight buffer).
    energies = (arch[A_E_DRAM], arch[A_E_GLB], arch[A_E_NOP], arch[A_E_WEIGHT] + arch[A_E_NOC])
    taps = prob[R] * prob[S]
    dims = layer_dims(prob)
    scratch = np.empty((12, scratch_size(dims[:9])), dtype=np.int64)
    best_int, best_float = new_incumbent()
    c_max = weight_lane // (vector * taps)
    if c_max < 1:
        return -1, 0.0, 0.0, best_int[1]
    for split in splits(prob, int(arch[A_CHIPLETS]), int(arch[A_PES]), scratch):
        cn, ck, cp, pk, pc, pp, pn = split
        floor = dram_floor_energy(dims, (cn, ck, cp), pp * cp, energies)
        compute, core = split_cost(prob, arch, split)
        if not improves(objective, compute, core + floor, best_int, best_float):
            continue
        c_vectors = cdiv(cdiv(prob[C], pc), vector)
        k_lane = cdiv(cdiv(cdiv(prob[K], ck), pk), lanes)
        n_ct = factors(c_vectors, c_max, scratch[7])
        for ict in range(n_ct - 1, -1, -1):
            c_t = scratch[7, ict]
            k_max = min(k_lane, weight_lane // (c_t * vector * taps), accum)
            n_kt = factors(k_lane, k_max, scratch[8])
            for ikt in range(n_kt - 1, -1, -1):
                k_t = scratch[8, ikt]
                channels = min(c_t * vector, cdiv(prob[C], pc))
                p_t, q_t = pixel_tile(
                    cdiv(cdiv(prob[P], cp), pp),
                    prob[Q],
                    prob[R],
                    prob[S],
                    prob[STRIDE],
                    channels,
                    accum // k_t,
                    int(arch[A_INPUT]),
                )
                if p_t < 1:
                    continue
                best_int[1] += 1
                tile = (c_t, k_t, p_t, q_t)
                cycles, on_chip = tile_cost(prob, arch, split, tile, compute, core)
                if not improves(objective, cycles, on_chip + floor, best_int, best_float):
                    continue
                dram = dram_level(
                    dims,
                    (cn * pn, ck * pk * lanes * k_t, pc * vector * c_t, cp * pp * p_t),
                    (cn, ck, cp),
                    cn * pn,
                    int(arch[A_GLB]),
                    int(arch[A_PSUM_WORDS]),
                    True,
                    pp * cp,
                    energies,
                    scratch[9:12],
                )
                chosen = split + (k_t, c_t, p_t, q_t)
                if not take_if_better(
                    objective, cycles, on_chip, dram, chosen, best_int, best_float, params
                ):
                    continue
                window = ((p_t - 1) * prob[STRIDE] + prob[R]) * ((q_t - 1) * prob[STRIDE] + prob[S])
                footprint[0] = k_t * c_t * vector * taps
                footprint[1] = channels * window
                footprint[2] = k_t * p_t * q_t
                footprint[3] = dram[7]
    return search_result(best_int, best_float)


@njit(cache=True)
def split_cost(prob, arch, split):
    """Compute cycles of a spatial split and the energy every tiling of it pays (MACs, input-buffer
    reads broadcast to the lanes, accumulation-buffer read-modify-writes)."""
    cn, ck, cp, pk, pc, pp, pn = split
    lanes, vector = int(arch[A_LANES]), int(arch[A_VECTOR])
    k_pe = cdiv(cdiv(prob[K], ck), pk)
    per_pe = (
        cdiv(cdiv(prob[G] * prob[N], cn), pn)
        * cdiv(k_pe, lanes)
        * cdiv(cdiv(prob[C], pc), vector)
        * prob[R]
        * prob[S]
        * cdiv(cdiv(prob[P], cp), pp)
        * prob[Q]
    )
    active = cn * ck * cp * pk * pc * pp * pn
    core = prob[MACS] * arch[A_E_MAC] + active * per_pe * (
        vector * arch[A_E_INPUT] + 2 * min(lanes, k_pe) * arch[A_E_ACCUM]
    )
    return per_pe, core


@njit(cache=True)
def tile_cost(prob, arch, split, tile, compute, core):
    """Cycles and on-chip energy (pJ, without DRAM-level traffic) of a split with a PE tile.

    Per PE: weights of (k_t per lane, c_t vectors) stay while each pixel tile streams its input
    window in from the global buffer; partial sums go back to the buffer between channel chunks
    when there is more than one pixel tile, and across PEs when channels are split (pc > 1).
    """
    cn, ck, cp, pk, pc, pp, pn = split
    c_t, k_t, p_t, q_t = tile
    lanes, vector = int(arch[A_LANES]), int(arch[A_VECTOR])
    psum_words = int(arch[A_PSUM_WORDS])
    stride = prob[STRIDE]
    inst_pe = cdiv(cdiv(prob[G] * prob[N], cn), pn)
    k_pe = cdiv(cdiv(prob[K], ck), pk)
    c_pe = cdiv(prob[C], pc)
    p_pe = cdiv(cdiv(prob[P], cp), pp)
    c_vectors = cdiv(c_pe, vector)
    k_lane = cdiv(k_pe, lanes)
    active = cn * ck * cp * pk * pc * pp * pn
    c_chunks = cdiv(c_vectors, c_t)
    tiles = cdiv(p_pe, p_t) * cdiv(prob[Q], q_t)
    window = ((p_t - 1) * stride + prob[R]) * ((q_t - 1) * stride + prob[S])
    fills = inst_pe * cdiv(k_lane, k_t) * c_chunks * tiles * min(c_t * vector, c_pe) * window
    outputs = inst_pe * k_pe * p_pe * prob[Q]
    spill = c_chunks > 1 and tiles > 1
    spilled = outputs * 2 * (c_chunks - 1) if spill else 0
    weights = cdiv(inst_pe, prob[N]) * k_pe * c_pe * prob[R] * prob[S]
    ingress = fills + weights + (spilled // 2) * psum_words
    cycles = max(compute, cdiv(ingress, vector))
    weight_reads = inst_pe * k_lane * c_vectors * prob[R] * prob[S] * tiles * min(lanes, k_pe)
    reducers = active // pc
    glb_psum = outputs * reducers + spilled * active * psum_words
    reduced = outputs * (active - reducers) * psum_words
    energy = core + active * weight_reads * vector * arch[A_E_WEIGHT]
    energy += active * fills * (arch[A_E_INPUT] + arch[A_E_NOC])
    energy += (fills * (active // pk) + glb_psum) * arch[A_E_GLB]
    energy += (glb_psum + reduced) * arch[A_E_NOC]
    return cycles, energy
