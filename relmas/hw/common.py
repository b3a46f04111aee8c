"""Numba kernels shared by both cost models: factor enumeration, the objective, the DRAM level.

Both families keep inputs and partial sums in an on-chip global buffer and stream weights from DRAM
into PE-level storage (as in Timeloop's eyeriss-like and simba-like architectures), so the tiling
at the DRAM boundary is one shared search: given the granule the on-chip mapping processes at a
time, pick the global-buffer tile (instances x K x C x output rows, full rows) and the loop order
that minimise DRAM energy while the tile fits.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from relmas.hw.problem import IN_ELEMS, OUT_ELEMS, STRIDE, W_ELEMS, C, G, K, N, P, Q, R, S

OBJECTIVES = ("latency", "energy", "edp")
LATENCY, ENERGY, EDP = range(3)

# Loop orders at the DRAM boundary: which tensor stays in place while the innermost loop runs.
ORDERS = ("output-stationary", "input-stationary", "weight-stationary")
OUTPUT_STATIONARY, INPUT_STATIONARY, WEIGHT_STATIONARY = range(3)

INT_MAX = np.iinfo(np.int64).max
# The DRAM level's part of a chosen mapping (`dram_level`'s tile and order), after the model's own.
DRAM_PARAM_NAMES = ("tile_i", "tile_k", "tile_c", "tile_p", "order")


@njit(cache=True)
def cdiv(a, b):
    return (a + b - 1) // b


@njit(cache=True)
def scratch_size(dims):
    """Room for every distinct ceil(d / f) of the largest of `dims` (at most 2 sqrt(d) + 1)."""
    largest = 1
    for d in dims:
        largest = max(largest, d)
    return 2 * int(np.sqrt(largest)) + 4


@njit(cache=True)
def factors(total, limit, out):
    """Fill `out` with the smallest f <= limit for each distinct ceil(total / f), ascending.

    Any other f is dominated: it needs as many steps as the smallest f with the same step count
    while occupying more hardware (spatial) or more buffer (temporal). Returns the count.
    """
    count = 0
    f = 1
    top = min(total, limit)
    while f <= top:
        out[count] = f
        count += 1
        steps = cdiv(total, f)
        if steps <= 1:
            break
        f = cdiv(total, steps - 1)
    return count


@njit(cache=True)
def better(objective, cycles, energy, best_cycles, best_energy):
    """True if (cycles, energy) beats the incumbent under `objective`; ties keep the incumbent."""
    if objective == LATENCY:
        return cycles < best_cycles or (cycles == best_cycles and energy < best_energy)
    if objective == ENERGY:
        return energy < best_energy or (energy == best_energy and cycles < best_cycles)
    if best_cycles == INT_MAX:
        return True
    edp = cycles * energy
    best_edp = best_cycles * best_energy
    return edp < best_edp or (edp == best_edp and cycles < best_cycles)


@njit(cache=True)
def layer_dims(prob):
    """(instances, images, K, C, P, Q, R, S, stride, inputs, weights, outputs) of a problem row.

    Instances are the groups times the images: independent problems except that the images of a
    group share its weights.
    """
    return (
        prob[G] * prob[N],
        prob[N],
        prob[K],
        prob[C],
        prob[P],
        prob[Q],
        prob[R],
        prob[S],
        prob[STRIDE],
        prob[IN_ELEMS],
        prob[W_ELEMS],
        prob[OUT_ELEMS],
    )


@njit(cache=True)
def dram_floor_energy(dims, chips, w_rep, energies):
    """Energy of the compulsory traffic (every tensor moved once): a bound for pruning.

    Same terms as `dram_level`: chips = (by instance, by filter, by row), energies = (DRAM word,
    global-buffer word, package-network word, weight fill into the PEs).
    """
    inputs, weights, outputs = dims[9], dims[10], dims[11]
    e_dram, e_glb, e_nop, e_fill = energies
    energy = (inputs + weights + outputs) * e_dram + (inputs + outputs) * e_glb
    energy += weights * w_rep * e_fill
    if chips[0] * chips[1] * chips[2] > 1:
        energy += (inputs * chips[1] + weights * chips[2] + outputs) * e_nop
    return energy


@njit(cache=True)
def new_incumbent():
    """The search state: ints [cycles, evaluations], floats [energy pJ, DRAM words]."""
    return np.array([INT_MAX, 0], dtype=np.int64), np.array([np.inf, 0.0])


@njit(cache=True)
def improves(objective, cycles, energy, best_int, best_float):
    """`better` against the incumbent."""
    return better(objective, cycles, energy, best_int[0], best_float[0])


@njit(cache=True)
def take_if_better(objective, cycles, on_chip, dram, mapping, best_int, best_float, params):
    """Count the DRAM level's evaluations; if the on-chip `mapping` (cycles, `on_chip` energy)
    with its DRAM level `dram` (`dram_level`'s result) beats the incumbent, make it the incumbent
    and write `mapping` and the DRAM level's tile and order to `params` (True)."""
    best_int[1] += dram[8]
    energy = on_chip + dram[0]
    if dram[0] == np.inf or not improves(objective, cycles, energy, best_int, best_float):
        return False
    best_int[0], best_float[0], best_float[1] = cycles, energy, dram[1]
    chosen = mapping + (dram[2], dram[3], dram[4], dram[5], dram[6])
    for j in range(len(chosen)):
        params[j] = chosen[j]
    return True


@njit(cache=True)
def search_result(best_int, best_float):
    """A layer search's result: (cycles, energy_pj, dram_words, evaluations); cycles = -1 when
    no mapping fits."""
    if best_int[0] == INT_MAX:
        return -1, 0.0, 0.0, best_int[1]
    return best_int[0], best_float[0], best_float[1], best_int[1]


@njit(cache=True)
def dram_level(
    dims,
    granule,
    chips,
    images_per_pass,
    glb_words,
    psum_words,
    weights_stay,
    w_rep,
    energies,
    scratch,
    one_pass=False,
):
    """Best global-buffer tile and DRAM loop order for an on-chip mapping.

    The tile holds multiples of the on-chip `granule` (instances, filters, channels, output rows)
    split over `chips` = (by instance, by filter, by row) chiplets, each with its own `glb_words`
    buffer holding its inputs (with halo) and partial sums (`psum_words` words each). Weights
    bypass the buffer and are reloaded for every output-row tile and image pass, unless the
    weight-stationary order keeps one granule of weights in the PEs (`weights_stay`: the on-chip
    mapping holds a granule's weights for the whole pass). Every word of weights reaches `w_rep`
    PEs. `one_pass` fills the buffer as the Eyeriss chip does (JSSC 2017 Table III): one granule's
    channels and output rows of inputs beside the partial sums of the instances and filters picked,
    kept until complete (output-stationary). Returns (energy, words, ti, tk, tc, tp, order,
    glb_used, evaluations); energy is inf when no tile fits.
    """
    n_inst, images, k_all, c_all, p_all, q_all, r_all, s_all, stride, inputs, weights, outputs = (
        dims
    )
    gi, gk, gc, gp = (
        min(granule[0], n_inst),
        min(granule[1], k_all),
        min(granule[2], c_all),
        min(granule[3], p_all),
    )
    chips_i, chips_k, chips_p = chips
    e_dram, e_glb, e_nop, e_fill = energies
    rows_per_granule = cdiv(gp, chips_p)
    width_in = (q_all - 1) * stride + s_all
    rows_full = (p_all - 1) * stride + r_all
    multi_chip = chips_i * chips_k * chips_p > 1
    weight_passes = cdiv(images, min(images, images_per_pass))

    best_energy = np.inf
    best_words = 0.0
    best = (0, 0, 0, 0, 0, 0)
    evaluations = 0
    buf_i, buf_k, buf_c = scratch[0], scratch[1], scratch[2]
    n_mi = factors(cdiv(n_inst, gi), INT_MAX, buf_i)
    n_mk = factors(cdiv(k_all, gk), INT_MAX, buf_k)
    n_mc = factors(cdiv(c_all, gc), 1 if one_pass else INT_MAX, buf_c)
    for a in range(n_mi):
        ti = min(n_inst, buf_i[a] * gi)
        ti_chip = cdiv(ti, chips_i)
        for b in range(n_mk):
            tk = min(k_all, buf_k[b] * gk)
            tk_chip = cdiv(tk, chips_k)
            for c in range(n_mc):
                tc = min(c_all, buf_c[c] * gc)
                in_row = ti_chip * tc * width_in
                out_row = ti_chip * tk_chip * q_all * psum_words
                room = glb_words - in_row * (r_all - stride)
                if room < in_row * stride + out_row:
                    continue
                rows_max = room // (in_row * stride + out_row)
                mp = min(rows_max // rows_per_granule, 1 if one_pass else cdiv(p_all, gp))
                if mp < 1:
                    continue
                tp = min(p_all, mp * gp)
                rows_chip = cdiv(tp, chips_p)
                glb_used = in_row * ((rows_chip - 1) * stride + r_all) + out_row * rows_chip
                n_k = cdiv(k_all, tk)
                n_c = cdiv(c_all, tc)
                n_p = cdiv(p_all, tp)
                fetched_rows = n_p * cdiv(tp, rows_chip) * ((rows_chip - 1) * stride + r_all)
                halo = max(1.0, fetched_rows / rows_full)
                in_once = inputs * halo
                spilled = outputs * (1.0 + 2.0 * (n_c - 1) * psum_words)
                w_reloaded = weights * n_p * weight_passes * 1.0
                for order in range(1 if one_pass else len(ORDERS)):  # output-stationary first
                    if order == OUTPUT_STATIONARY:
                        in_tr, out_tr, w_tr = in_once * n_k, outputs * 1.0, w_reloaded
                    elif order == INPUT_STATIONARY:
                        in_tr, w_tr = in_once, w_reloaded
                        out_tr = spilled if n_k > 1 else outputs * 1.0
                    else:
                        if not weights_stay or tk > gk or tc > gc:
                            continue
                        in_tr, out_tr, w_tr = in_once * n_k, spilled, weights * 1.0
                    evaluations += 1
                    words = in_tr + out_tr + w_tr
                    energy = words * e_dram + (in_tr + out_tr) * e_glb + w_tr * w_rep * e_fill
                    if multi_chip:
                        energy += (in_tr * chips_k + w_tr * chips_p + out_tr) * e_nop
                    if energy < best_energy or (energy == best_energy and words < best_words):
                        best_energy = energy
                        best_words = words
                        best = (ti, tk, tc, tp, order, glb_used)
    ti, tk, tc, tp, order, glb_used = best
    return best_energy, best_words, ti, tk, tc, tp, order, glb_used, evaluations
