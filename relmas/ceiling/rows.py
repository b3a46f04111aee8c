"""The ceiling's rows beside the policies' rows (report/summary.parquet, a sweep point's file).

One place for what every file that mixes them needs: each row's kind (the policy's catalog kind,
or the reference's own), the policies' rows alone for any table or figure, and the refusal of a
ceiling below a policy's count on the same trace: a wrong bound must never pass as a proven one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from relmas import catalog
from relmas.errors import InputError

# The kinds of the reference rows, beside the catalog's kinds of policies.
CEILING, BEST_KNOWN = "ceiling", "best_known"


def met_counts(summary: pl.DataFrame) -> pl.DataFrame:
    """Deadlines met per summary row (the SLA rate is met / jobs)."""
    return summary.with_columns(met=(pl.col("sla_rate") * pl.col("jobs")).round().cast(pl.Int64))


def with_kinds(summary: pl.DataFrame, references: pl.DataFrame) -> pl.DataFrame:
    """The policies' rows with their catalog kind, then the reference rows (with theirs)."""
    kinds = {name: catalog.entry(name).kind for name in summary["policy"].unique()}
    rows = summary.with_columns(kind=pl.col("policy").replace_strict(kinds, return_dtype=pl.String))
    return pl.concat([rows, references], how="diagonal_relaxed")


def policy_rows(frame: pl.DataFrame) -> pl.DataFrame:
    """The rows of `frame` (with `kind`) that are a policy's, not a reference's."""
    return frame.filter(pl.col("kind").is_in(catalog.KINDS))


def best_under(
    runs: pl.DataFrame, ceiling_met: int, trace: str, source: Path | None = None
) -> dict[str, Any] | None:
    """The row of `runs` (summary rows of one trace) that met the most deadlines (of equals, the
    first policy in catalog order, then the first row), None without rows; refuses a ceiling
    below its count, naming the policy and `trace`: a bound read from the file `source` as bad
    input (InputError), a bound just computed as a bug (RuntimeError)."""
    if not runs.height:
        return None
    rows = met_counts(runs).iter_rows(named=True)
    best = min(rows, key=lambda row: (-row["met"], catalog.position(row["policy"])))
    if best["met"] > ceiling_met:
        if source is not None:
            raise InputError(
                source,
                "ceiling_met",
                f"at least the {best['met']} deadlines {best['policy']} meets on {trace} (a "
                "ceiling below a schedule's count is a wrong bound)",
                ceiling_met,
            )
        raise RuntimeError(
            f"{best['policy']} meets {best['met']} deadlines on {trace}, above the ceiling "
            f"{ceiling_met}: the bound is wrong"
        )
    return best
