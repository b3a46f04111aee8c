"""Eyeriss-like cost model: row-stationary dataflow (Chen et al., ISCA 2016 / JSSC 2017).

A logical PE set computes one 2-D convolution plane: its `h` PE rows hold `h` filter rows (R folded
into ceil(R / h) passes when it does not fit), its `e` PE columns produce `e` output rows, each PE
runs a 1-D convolution (one filter row over one input row). Sets replicate over the physical
`pe_rows` x `pe_cols` array: stacked vertically they may split the input channels (their partial
sums add up along the column) and, anywhere, the filters or the independent instances (groups,
images). Inside a PE the scratchpads bound the pass: `q` channels x `s_t` taps of ifmap
(`q * s_t <= ifmap_spad`), `p` filters of those (`p * q * s_t <= filter_spad`) and `p` partial
sums (`p <= psum_spad`). Passes stream ifmap rows and partial sums through the global buffer and
filters from DRAM; the array port moves `pe_cols` words per cycle each way (Timeloop's
eyeriss-like moves 16 for 14 columns), which bounds passes with little reuse.

The mapping space: fold height h, strip width e, channel sets sc, filter sets sk, instance sets sn,
PE tile (p, q), then the DRAM-level tile and loop order (relmas.hw.common.dram_level), which
with `glb_allocation: chip` is the chip's: one pass's ifmap rows beside partial sums that stay in
the global buffer until complete (JSSC 2017 Table III). That allocation never changes cycles: a
mapping fits it exactly when its pass fits the buffer at all, and cycles do not depend on the tile.
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
from relmas.hw.spec import EYERISS_PSUM_WORDS, EyerissSpec

# Layout of the architecture vector the kernel reads.
(
    A_ROWS,
    A_COLS,
    A_IFMAP,
    A_FILTER,
    A_PSUM,
    A_GLB,
    A_PORT,
    A_PSUM_WORDS,
    A_E_MAC,
    A_E_SPAD,
    A_E_NOC,
    A_E_GLB,
    A_E_DRAM,
    A_CHIP_SETS,
    A_FILL_RATE,
    A_CHIP_GLB,
) = range(16)

# Layout of the chosen mapping (params) and of its buffer footprints (in words or entries).
PARAM_NAMES = (
    "h",
    "folds",
    "e",
    "sc",
    "sk",
    "sn",
    "p",
    "q",
    "s_t",
    "s_folds",
    *DRAM_PARAM_NAMES,
)
FOOTPRINT_NAMES = ("ifmap_spad", "filter_spad", "psum_spad", "glb")


def arch_vector(spec: EyerissSpec) -> np.ndarray:
    """The spec as the float64 vector `eyeriss_layer` reads."""
    e = spec.energy_pj
    return np.array(
        [
            spec.pe_rows,
            spec.pe_cols,
            spec.ifmap_spad,
            spec.filter_spad,
            spec.psum_spad,
            spec.glb_words,
            spec.pe_cols,
            EYERISS_PSUM_WORDS,
            e["mac"],
            e["spad"],
            e["noc"],
            e["glb"],
            e["dram"],
            1.0 if spec.set_shapes == "chip" else 0.0,
            spec.fill_words_per_cycle,
            1.0 if spec.glb_allocation == "chip" else 0.0,
        ],
        dtype=np.float64,
    )


def capacities(spec: EyerissSpec) -> tuple[int, ...]:
    """Capacities matching FOOTPRINT_NAMES."""
    return (spec.ifmap_spad, spec.filter_spad, spec.psum_spad, spec.glb_words)


@njit(cache=True)
def set_arrangements(prob, rows, cols, chip_sets, scratch):
    """Every (h, folds, e, sc, sk, sn) arrangement of PE sets on the array, most parallel first.

    h filter rows per set (R in `folds` passes), e output rows per set, sc channel sets stacked
    vertically, then sk filter sets and sn instance sets on the remaining set slots. With
    `chip_sets`, as the JSSC 2017 chip maps a layer (section IV-A): a set holds all filter rows
    (folded only when R exceeds the rows) and all output rows when they fit the array's width
    (strip-mined into narrower sets only when they do not).
    """
    n_inst = prob[G] * prob[N]
    k_all, c_all, p_all, r_all = prob[K], prob[C], prob[P], prob[R]
    found = []
    previous_h = 0
    last_fold = cdiv(r_all, rows) if chip_sets else r_all
    for fold_try in range(cdiv(r_all, rows), last_fold + 1):
        h = cdiv(r_all, fold_try)
        if h == previous_h:
            continue
        previous_h = h
        v_sets = rows // h
        n_e = factors(p_all, cols, scratch[0])
        first_e = n_e - 1 if chip_sets and p_all <= cols else 0
        for ie in range(n_e - 1, first_e - 1, -1):
            e = scratch[0, ie]
            n_sc = factors(c_all, v_sets, scratch[1])
            for isc in range(n_sc - 1, -1, -1):
                sc = scratch[1, isc]
                slots = (v_sets // sc) * (cols // e)
                n_sk = factors(k_all, slots, scratch[2])
                for isk in range(n_sk - 1, -1, -1):
                    sk = scratch[2, isk]
                    n_sn = factors(n_inst, slots // sk, scratch[3])
                    for isn in range(n_sn - 1, -1, -1):
                        found.append((h, cdiv(r_all, h), e, sc, sk, scratch[3, isn]))
    return found


@njit(cache=True)
def eyeriss_layer(prob, arch, objective, params, footprint):
    """Search the row-stationary mapping space of a layer; write the best to params/footprint.

    Returns (cycles, energy_pj, dram_words, evaluations); cycles = -1 when nothing fits.
    """
    rows, cols = int(arch[A_ROWS]), int(arch[A_COLS])
    ifmap_cap, filter_cap = int(arch[A_IFMAP]), int(arch[A_FILTER])
    psum_cap = int(arch[A_PSUM])
    dims = layer_dims(prob)
    n_inst = dims[0]
    scratch = np.empty((9, scratch_size(dims[:9])), dtype=np.int64)
    best_int, best_float = new_incumbent()
    # DRAM word, global-buffer word, no package network, filter fill into a scratchpad.
    energies = (arch[A_E_DRAM], arch[A_E_GLB], 0.0, arch[A_E_SPAD])
    s_t = min(prob[S], ifmap_cap, filter_cap)
    mac_energy = prob[MACS] * (arch[A_E_MAC] + (2.0 + 2.0 * arch[A_PSUM_WORDS]) * arch[A_E_SPAD])
    chip_sets = arch[A_CHIP_SETS] > 0
    fill_rate = arch[A_FILL_RATE]
    for h, folds, e, sc, sk, sn in set_arrangements(prob, rows, cols, chip_sets, scratch):
        c_set = cdiv(prob[C], sc)
        k_set = cdiv(prob[K], sk)
        floor = dram_floor_energy(dims, (1, 1, 1), e, energies)
        # Every (filter, channel) pair passes through a PE row window: MACs, and the fill if any.
        rows_taps = cdiv(n_inst, sn) * folds * cdiv(prob[S], s_t) * cdiv(prob[P], e) * s_t
        ideal = rows_taps * k_set * c_set * prob[Q]
        if fill_rate > 0:
            ideal += int(rows_taps * k_set * c_set / fill_rate)
        if not improves(objective, ideal, mac_energy + floor, best_int, best_float):
            continue
        n_q = factors(c_set, min(c_set, ifmap_cap // s_t, filter_cap // s_t), scratch[4])
        for iq in range(n_q - 1, -1, -1):
            q = scratch[4, iq]
            n_p = factors(k_set, min(k_set, psum_cap, filter_cap // (q * s_t)), scratch[5])
            for ip in range(n_p - 1, -1, -1):
                mapping = (h, folds, e, sc, sk, sn, scratch[5, ip], q, s_t)
                best_int[1] += 1
                cycles, on_chip = pass_cost(prob, arch, mapping)
                if not improves(objective, cycles, on_chip + floor, best_int, best_float):
                    continue
                dram = dram_level(
                    dims,
                    (sn, sk * mapping[6], sc * q, e),
                    (1, 1, 1),
                    sn,
                    int(arch[A_GLB]),
                    int(arch[A_PSUM_WORDS]),
                    folds == 1 and s_t == prob[S],
                    e,
                    energies,
                    scratch[6:9],
                    arch[A_CHIP_GLB] > 0,
                )
                chosen = mapping + (cdiv(prob[S], s_t),)
                if not take_if_better(
                    objective, cycles, on_chip, dram, chosen, best_int, best_float, params
                ):
                    continue
                footprint[0] = q * s_t
                footprint[1] = mapping[6] * q * s_t
                footprint[2] = mapping[6]
                footprint[3] = dram[7]
    return search_result(best_int, best_float)


@njit(cache=True)
def pass_cost(prob, arch, mapping):
    """Cycles and on-chip energy (pJ, without DRAM-level traffic) of one on-chip mapping.

    Passes run every (instance, filter, channel, fold) group over all output-row strips with the
    group's filters held in the PEs; each pass streams its ifmap rows from the global buffer and
    sends its partial sums there (and reads them back until the reduction is complete). With a
    fill rate, a pass first writes its p * q * s_t filter words into every filter scratchpad.
    """
    h, folds, e, sc, sk, sn, p, q, s_t = mapping
    n_inst = prob[G] * prob[N]
    q_all, stride = prob[Q], prob[STRIDE]
    psum_words = arch[A_PSUM_WORDS]
    inst_passes = cdiv(n_inst, sn)
    k_passes = cdiv(cdiv(prob[K], sk), p)
    strips = cdiv(prob[P], e)
    reductions = cdiv(cdiv(prob[C], sc), q) * folds * cdiv(prob[S], s_t)
    groups = inst_passes * k_passes * reductions
    passes = groups * strips
    width_in = (q_all - 1) * stride + s_t
    rows_in = min((e - 1) * stride + h, e * h)
    psum_pass = sk * sn * p * e * q_all
    glb_ifmap = passes * sc * sn * q * rows_in * width_in
    psum_out = passes * psum_pass
    psum_in = inst_passes * k_passes * strips * (reductions - 1) * psum_pass
    filters = groups * h * s_t * p * q * sc * sk * cdiv(sn, prob[N])
    port_in = glb_ifmap + psum_in * psum_words + filters
    port_out = psum_out * psum_words
    fill = 0
    if arch[A_FILL_RATE] > 0:
        fill = int(np.ceil(p * q * s_t / arch[A_FILL_RATE]))
    cycles = max(
        passes * (q_all * q * s_t * p + fill),
        int(np.ceil(port_in / arch[A_PORT])),
        int(np.ceil(port_out / arch[A_PORT])),
    )
    energy = prob[MACS] * (arch[A_E_MAC] + (2.0 + 2.0 * psum_words) * arch[A_E_SPAD])
    energy += passes * (h * e * sc * sk * sn) * q * width_in * arch[A_E_SPAD]
    energy += psum_out * (h * sc - 1) * psum_words * arch[A_E_NOC]
    energy += (glb_ifmap + (psum_out + psum_in) * psum_words) * arch[A_E_GLB]
    return cycles, energy
