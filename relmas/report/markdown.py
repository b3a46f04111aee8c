"""Markdown primitives of the report: tables, means with their interval, ratios, figure links."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl


def markdown_table(frame: pl.DataFrame, digits: int = 3) -> str:
    """A GitHub-flavoured Markdown table of `frame` (floats rounded to `digits`)."""

    def cell(value: Any) -> str:
        if isinstance(value, float):
            return "nan" if math.isnan(value) else f"{value:.{digits}g}"
        return str(value)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + " --- |" * frame.width]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.iter_rows()]
    return "\n".join(lines)


def mean_text(mean: float, half: float, digits: int = 3) -> str:
    """A mean as a table prints it: with its 95% interval, or alone where there is none (n = 1);
    n/a without one (a metric no run defined, such as the ANTT where no job finished)."""
    if math.isnan(mean):
        return "n/a"
    if math.isnan(half):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {half:.{digits}f}"


def mean_column(metric: str) -> pl.Expr:
    """`metric` of an aggregate as text, with its interval where there is one (mean_text)."""
    return pl.struct(metric, f"{metric}_ci95").map_elements(
        lambda row: mean_text(row[metric], row[f"{metric}_ci95"]), return_dtype=pl.String
    )


def interval(
    ratio: float | None, low: float | None, high: float | None, seeds: int, *, say_n: bool = True
) -> str:
    """A ratio with its 95% interval; with one seed no interval, but the number of seeds (unless
    `say_n` is false: the sentence around it says it)."""
    if ratio is None or math.isnan(ratio):
        return "n/a"
    if seeds < 2:
        return f"{ratio:.3f} (n = {seeds})" if say_n else f"{ratio:.3f}"
    return f"{ratio:.3f} [{low:.3f}, {high:.3f}]"


def image_markdown(figures: Mapping[str, Path], out_dir: Path, name: str, caption: str) -> str:
    return f"![{caption}]({figures[name].relative_to(out_dir)})\n\n*{caption}*\n"
