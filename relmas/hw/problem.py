"""Layer rows -> the integer problem arrays the cost-model kernels read.

The kernels see every operator as `G` independent problems (groups, attention heads) of `N` images,
each a convolution of `K` output channels, `C` input channels, a `P` x `Q` output and an `R` x `S`
kernel at a stride: conv, dwconv and grouped conv map onto it directly, linear is a 1x1
convolution over `Y` rows of tokens, and a matmul is a linear layer whose second operand (an
activation) takes the weight role. Any LAYER_SCHEMA frame works, including the pieces of a layer
cut along K or Y, so that operator splitting can be costed with the same code.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from relmas.errors import InputError
from relmas.io import check_frame
from relmas.schemas import LAYER_SCHEMA, LayerRows

# Columns of a problem array, in order.
G, N, K, C, P, Q, R, S, STRIDE, IN_ELEMS, W_ELEMS, OUT_ELEMS, MACS = range(13)


def problem_array(layers: pl.DataFrame, source: str | Path | None = None) -> np.ndarray:
    """One int64 row per layer: G, N, K and C per group, P, Q, R, S, stride, elements and MACs.

    Conventions of the layer table (relmas.zoo): K counts all groups for convolutions and one
    product for matmul; C is per group; macs = N*K*C*Y*X*R*S (times groups for matmul). Rows that
    break them (relmas.schemas.LayerRows, and the MACs) raise an InputError naming the column.
    """
    layers = check_frame(layers, LayerRows, source)
    groups = layers.get_column("groups").cast(pl.Int64).to_numpy()
    k_total = layers.get_column("K").cast(pl.Int64).to_numpy()
    split = (layers.get_column("op") != "matmul").to_numpy()
    k_group = np.where(split, k_total // np.maximum(groups, 1), k_total)
    columns = {
        name: layers.get_column(name).cast(pl.Int64).to_numpy()
        for name in LAYER_SCHEMA
        if LAYER_SCHEMA[name].is_integer()
    }
    problems = np.column_stack(
        [
            groups,
            columns["N"],
            k_group,
            columns["C"],
            columns["Y"],
            columns["X"],
            columns["R"],
            columns["S"],
            columns["stride"],
            columns["in_elems"],
            columns["w_elems"],
            columns["out_elems"],
            columns["macs"],
        ]
    ).astype(np.int64)
    expected = (
        problems[:, G]
        * problems[:, N]
        * problems[:, K]
        * problems[:, C]
        * problems[:, P]
        * problems[:, Q]
        * problems[:, R]
        * problems[:, S]
    )
    wrong = expected != problems[:, MACS]
    if wrong.any():
        i = int(np.argmax(wrong))
        raise InputError(
            source,
            "macs",
            "N*K*C*Y*X*R*S (times groups for matmul)",
            _row(layers, i, int(problems[i, MACS])),
        )
    return np.ascontiguousarray(problems)


def _row(layers: pl.DataFrame, i: int, value: object) -> str:
    return f"{value} at row {i} ({layers['model'][i]} layer {layers['layer'][i]})"
