"""The learning curve of a training run as a file of its agent directory: `curve.parquet`.

One row per (step, metric) that the learner reported: `val_<metric>` (validation), `loss`,
`q_mean`, `epsilon`, `episode_return`, `episode_length`. The same numbers go to MLflow; the file
lets the report draw learning curves without querying a tracking store. The rows also travel in
last.pt, and the file is rewritten from them (atomically) at every checkpoint, so a resumed run
continues the curve exactly where its checkpoint left it and the file may be a declared workflow
output (deleted before a rerun, rebuilt from last.pt).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import dataframely as dy
import polars as pl

from relmas.io import read_parquet, write_parquet
from relmas.schemas import column_types

CURVE = "curve.parquet"


class Curve(dy.Schema):
    """`curve.parquet`: one row per (step, metric) reported."""

    step = dy.Int64(min=0)
    metric = dy.String()
    # rates, losses, Q-values, returns: beyond 2^53 a float64 no longer counts whole units, and no
    # metric of a run that learned anything gets there
    value = dy.Float64(min=-(2.0**53), max=2.0**53)


CURVE_SCHEMA = column_types(Curve)

CurveRows = list[tuple[int, str, float]]


def curve_rows(metrics: Mapping[str, float], step: int) -> CurveRows:
    """The rows of one report of `metrics` at `step`."""
    return [(int(step), str(name), float(value)) for name, value in metrics.items()]


def write_curve(path: str | Path, rows: Sequence[tuple[int, str, float]]) -> None:
    """Write the curve atomically (CURVE_SCHEMA, in the order reported)."""
    steps, metrics, values = zip(*rows, strict=True) if rows else ((), (), ())
    frame = pl.DataFrame({"step": steps, "metric": metrics, "value": values}, schema=CURVE_SCHEMA)
    write_parquet(frame, path)


def read_curve(path: str | Path) -> pl.DataFrame:
    """A curve written by `write_curve` (an InputError names the file if it is missing or bad)."""
    return read_parquet(path, Curve)
