"""Parquet I/O shared by every stage: atomic writes, schema checks, key-value metadata.

Outputs are written to a temporary name in the same directory and renamed into place, so an
interrupted job never leaves a half-written file that Snakemake (or a user) could take for a result.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from relmas.errors import InputError


@contextlib.contextmanager
def atomic_path(path: str | Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it onto `path` only if the block succeeds."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=suffix or ".tmp", dir=target.parent
    )
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, target)
    finally:
        tmp_path.unlink(missing_ok=True)


def write_parquet(
    frame: pl.DataFrame, path: str | Path, metadata: Mapping[str, str] | None = None
) -> None:
    """Write `frame` as zstd Parquet atomically, with optional string key-value file metadata."""
    table = frame.to_arrow()
    if metadata:
        merged = dict(table.schema.metadata or {})
        merged.update({k.encode(): v.encode() for k, v in metadata.items()})
        table = table.replace_schema_metadata(merged)
    with atomic_path(path, suffix=".parquet") as tmp:
        pq.write_table(table, tmp, compression="zstd")


def read_metadata(path: str | Path) -> dict[str, str]:
    """The string key-value metadata of a Parquet file (empty if none)."""
    try:
        raw = pq.read_schema(path).metadata or {}
    except FileNotFoundError:
        raise InputError(path, None, "an existing Parquet file") from None
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise InputError(path, None, "a readable Parquet file", type(exc).__name__) from None
    return {k.decode(): v.decode() for k, v in raw.items() if not k.startswith(b"ARROW")}


def read_parquet(path: str | Path, schema: Mapping[str, pl.DataType]) -> pl.DataFrame:
    """Read a Parquet file and check that it has at least `schema`'s columns with those types.

    Integer and float columns are cast to the exact contract type when the cast is lossless in kind
    (a hand-written int64 `layer` column becomes int32), so users may write tables with any tool.
    """
    if not Path(path).is_file():
        raise InputError(path, None, "an existing Parquet file")
    try:
        frame = pl.read_parquet(path)
    except Exception as exc:
        raise InputError(path, None, "a readable Parquet file", type(exc).__name__) from None
    return check_columns(frame, schema, path)


def check_columns(
    frame: pl.DataFrame, schema: Mapping[str, pl.DataType], path: str | Path | None
) -> pl.DataFrame:
    """Check/cast the columns of `frame` against `schema`; extra columns are kept."""
    casts = []
    for column, dtype in schema.items():
        if column not in frame.columns:
            raise InputError(path, column, f"a column {column!r} of type {dtype}", "missing")
        actual = frame.schema[column]
        if actual == dtype:
            continue
        same_kind = (actual.is_integer() and dtype.is_integer()) or (
            actual.is_numeric() and dtype.is_float()
        )
        if not same_kind:
            raise InputError(path, column, f"type {dtype}", str(actual))
        casts.append(pl.col(column).cast(dtype, strict=True))
    if casts:
        try:
            frame = frame.with_columns(casts)
        except Exception:
            raise InputError(
                path, None, f"values that fit the contract types {dict(schema)}"
            ) from None
    return frame
