"""Hand-made layer-table rows for the profiling and resizing tests, one place for the zoo's
conventions (conv: K total, C per group; matmul: one product per head in groups)."""

from __future__ import annotations

from typing import Any


def layer(
    model: str,
    index: int,
    op: str,
    *,
    n: int = 1,
    k: int = 1,
    c: int = 1,
    y: int = 1,
    x: int = 1,
    r: int = 1,
    s: int = 1,
    stride: int = 1,
    groups: int = 1,
    pad: int = 0,
    size_in: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """One LAYER_SCHEMA row. Its input is `size_in` (rows, columns) if given, else the smallest
    input of a y × x output, (y − 1) × stride + r − 2 × pad rows (an even input into a stride-2
    layer is one row and one column larger: the last ones no output reads)."""
    h_in, w_in = size_in or ((y - 1) * stride + r - 2 * pad, (x - 1) * stride + s - 2 * pad)
    per_product = 1 if op != "matmul" else groups
    return {
        "model": model,
        "layer": index,
        "name": f"{op}{index}",
        "op": op,
        "N": n,
        "K": k,
        "C": c,
        "Y": y,
        "X": x,
        "R": r,
        "S": s,
        "stride": stride,
        "groups": groups,
        "macs": n * k * c * y * x * r * s * per_product,
        "in_elems": n * c * (groups if op != "linear" else 1) * h_in * w_in,
        "w_elems": (k * c * r * s) * per_product,
        "out_elems": n * k * y * x * per_product,
    }
