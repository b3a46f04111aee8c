"""Parquet I/O shared by every stage: atomic writes, contract checks, key-value metadata.

Outputs are written to a temporary name in the same directory and renamed into place, so an
interrupted job never leaves a half-written file that Snakemake (or a user) could take for a result.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import math
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import dataframely as dy
import polars as pl
import pyarrow.parquet as pq

from relmas.errors import InputError
from relmas.schemas import column_types

# The temporary name of an atomic write: `.relmas-tmp.{target}.{8 random characters}{suffix}`
# (tempfile's mkstemp). The prefix is this writer's mark: `relmas recover` removes the leftovers of
# killed writes by it, and never a user's file that merely looks like a temporary one.
TEMP_PREFIX = ".relmas-tmp."
TEMP_NAME = re.compile(
    rf"^{re.escape(TEMP_PREFIX)}(?P<target>.+)\.(?P<random>[a-z0-9_]{{8}})(?P<suffix>\.[A-Za-z0-9]+)$"
)

# What this process wrote (files) and created (directories) through atomic_path, in order: the
# command line removes them when the command fails, so a failed command leaves no output behind.
_written: list[Path] = []
_created_dirs: list[Path] = []


@contextlib.contextmanager
def atomic_path(path: str | Path, suffix: str = "", *, output: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it onto `path` only if the block succeeds.

    The file gets the permissions of a newly created file (0666 less the umask), not mkstemp's 0600.
    A file that is no command's output (`output=False`: a cache's stamp) stays when the command
    fails; its outputs are removed.
    """
    target = Path(path)
    with _naming(target, None):
        _make_dirs(target.parent)
        fd, tmp = _held_temp(target, suffix or ".tmp")
    tmp_path = Path(tmp)
    try:
        with _naming(target, tmp):
            yield tmp_path
            os.chmod(tmp_path, 0o666 & ~_umask())
            os.replace(tmp_path, target)
        if output:
            _written.append(target)
    finally:
        tmp_path.unlink(missing_ok=True)
        os.close(fd)  # releases the lock


def _held_temp(target: Path, suffix: str) -> tuple[int, str]:
    """A new temporary file beside `target`, under an exclusive lock (flock) held until the write
    ends: `relmas recover` removes only temporary files no live process holds, whichever checkout
    the writer runs from. A sweep that took the lock first (between creation and locking) has
    removed the file by the time the lock is granted (no link left): then make another. On a
    filesystem without locks, no sweep can take one either (it removes nothing there)."""
    while True:
        fd, tmp = tempfile.mkstemp(
            prefix=f"{TEMP_PREFIX}{target.name}.", suffix=suffix, dir=target.parent
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:
            if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP):
                os.close(fd)
                os.unlink(tmp)
                raise
        if os.fstat(fd).st_nlink:
            return fd, tmp
        os.close(fd)


def remove_if_unheld(path: Path) -> bool:
    """Remove the temporary file `path` of an atomic write unless a live writer holds it (its
    lock); False when one does, or the file is gone or is no regular file (a link is not
    followed)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if not os.path.samestat(os.fstat(fd), os.stat(path, follow_symlinks=False)):
            return False  # renamed into place, and the name taken again, since it was opened
        path.unlink()
        return True
    except OSError:  # held (BlockingIOError), or renamed into place meanwhile
        return False
    finally:
        os.close(fd)


@contextlib.contextmanager
def _naming(target: Path, tmp: str | None) -> Iterator[None]:
    """Report an OS error about the hidden temporary file (or no file) as one about `target`."""
    try:
        yield
    except OSError as exc:
        named = exc.filename is not None and exc.filename2 != str(target)
        if named and exc.filename != tmp and not _is_temp_of(Path(exc.filename), target):
            raise
        raise OSError(exc.errno, exc.strerror or str(exc), str(target)) from None


def _is_temp_of(path: Path, target: Path) -> bool:
    match = TEMP_NAME.match(path.name)
    return match is not None and match["target"] == target.name


def discard_outputs() -> None:
    """Remove what atomic_path wrote and created in this process (newest first), then forget it."""
    for path in reversed(_written):
        path.unlink(missing_ok=True)
    for directory in reversed(_created_dirs):
        with contextlib.suppress(OSError):
            directory.rmdir()  # only if empty
    forget_outputs()


def forget_outputs() -> None:
    """Start a new record of outputs (a command's outputs are its own)."""
    _written.clear()
    _created_dirs.clear()


def _make_dirs(directory: Path) -> None:
    missing = []
    while not directory.exists() and directory != directory.parent:
        missing.append(directory)
        directory = directory.parent
    for made in reversed(missing):
        made.mkdir(exist_ok=True)
        _created_dirs.append(made)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


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


def copy_file(source: str | Path, target: str | Path) -> None:
    """Copy `source` onto `target` atomically: a full disk leaves no truncated copy behind."""
    data = Path(source).read_bytes()
    with atomic_path(target, suffix=Path(target).suffix) as tmp:
        tmp.write_bytes(data)


def read_metadata(path: str | Path) -> dict[str, str]:
    """The string key-value metadata of a Parquet file (empty if none)."""
    try:
        raw = pq.read_schema(path).metadata or {}
    except FileNotFoundError:
        raise InputError(path, None, "an existing Parquet file") from None
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise InputError(path, None, "a readable Parquet file", type(exc).__name__) from None
    return {k.decode(): v.decode() for k, v in raw.items() if not k.startswith(b"ARROW")}


def read_parquet(
    path: str | Path,
    contract: type[dy.Schema],
    *,
    max_rows: int | None = None,
    defaults: Mapping[str, Any] | None = None,
    first: Callable[[pl.DataFrame], object] | None = None,
) -> pl.DataFrame:
    """Read a Parquet file and check it against its `contract` (relmas.schemas): `check_frame`.

    The columns of `defaults` may be left out of the file (they are filled in with these values).
    A table without rows is refused, and one of more than `max_rows` rows from its footer, before
    it is read. `first`: a check of the typed frame before the contract's rules (of what the
    contract cannot know, e.g. the names a trace may use), so that it names a fault first.
    """
    if not Path(path).is_file():
        raise InputError(path, None, "an existing Parquet file")
    try:
        rows = pq.read_metadata(path).num_rows
        if max_rows is not None and rows > max_rows:
            raise InputError(path, None, f"at most {max_rows} rows", rows)
        frame = pl.read_parquet(path)
    except InputError:
        raise
    except Exception as exc:
        raise InputError(path, None, "a readable Parquet file", type(exc).__name__) from None
    frame = _with_types(frame, contract, path, defaults or {})
    if frame.height == 0:
        raise InputError(path, None, "a table with at least one row", "0 rows")
    if first is not None:
        first(frame)
    _check_rules(frame, contract, path)
    return frame


def check_frame(
    frame: pl.DataFrame, contract: type[dy.Schema], source: str | Path | None
) -> pl.DataFrame:
    """`frame` with `contract`'s columns of its types (extra columns kept), or an InputError naming
    `source`, the column and the first row that breaks the contract.

    Integer and float columns are cast to the exact contract type when the cast is lossless in kind
    (a hand-written int64 `layer` column becomes int32), so users may write tables with any tool.
    """
    frame = _with_types(frame, contract, source, {})
    _check_rules(frame, contract, source)
    return frame


def _with_types(
    frame: pl.DataFrame,
    contract: type[dy.Schema],
    source: str | Path | None,
    defaults: Mapping[str, Any],
) -> pl.DataFrame:
    casts = []
    for column, spec in contract.columns().items():
        dtype = spec.dtype
        if column not in frame.columns:
            if column not in defaults:
                raise InputError(source, column, f"a column {column!r} of type {dtype}", "missing")
            casts.append(pl.lit(defaults[column], dtype).alias(column))
            continue
        actual = frame.schema[column]
        if actual == dtype:
            continue
        same_kind = (actual.is_integer() and dtype.is_integer()) or (
            actual.is_numeric() and dtype.is_float()
        )
        if not same_kind:
            raise InputError(source, column, f"type {dtype}", str(actual))
        casts.append(pl.col(column).cast(dtype, strict=True))
    if casts:
        try:
            frame = frame.with_columns(casts)
        except Exception:
            raise InputError(
                source, None, f"values that fit the contract types {column_types(contract)}"
            ) from None
    return frame


ROW = "relmas_row_"  # the row number a check reports (0-based, as polars counts)


@functools.cache
def _numbered(contract: type[dy.Schema]) -> type[dy.Schema]:
    """`contract` with a row-number column, so that a failure names its row."""
    return type(contract.__name__, (contract,), {ROW: dy.UInt32()})


def _check_rules(frame: pl.DataFrame, contract: type[dy.Schema], source: str | Path | None) -> None:
    """Refuse `frame` at the first row that breaks a rule of `contract`: its column (a rule's name
    starts with it), what the rule expects, and the row's number and keys."""
    numbered = frame.select(contract.column_names()).with_row_index(ROW)
    _, failure = _numbered(contract).filter(numbered)
    counts = failure.counts()
    if not counts:
        return
    first = failure.details().sort(ROW).row(0, named=True)
    # a value's own fault (its column's check) before a rule between columns, in column order
    order = {name: i for i, name in enumerate(contract.column_names())}
    broken = [r for r in counts if first[r] == "invalid"]
    rule = min(broken, key=lambda r: ("|" not in r, order.get(r.split("|")[0].split("__")[0], 0)))
    keys = contract.primary_key()
    if rule == "primary_key":
        column = ", ".join(keys)
        expected = f"one row per {column}"
        got = f"a repeated {', '.join(str(first[k]) for k in keys)} (row {first[ROW]})"
    else:
        column = rule.split("|")[0].split("__")[0]
        expected = _expected(contract, rule)
        where = "".join(f", {k} {first[k]}" for k in keys if k != column)
        value = "null" if first[column] is None else first[column]
        got = f"{value} (row {first[ROW]}{where})"
    raise InputError(source, column, expected, got)


def _expected(contract: type[dy.Schema], rule: str) -> str:
    """What `rule` of `contract` expects: a column's whole definition (`column|check`), or a rule's
    docstring."""
    column, _, _ = rule.partition("|")
    if _:
        return describe(contract.columns()[column])
    for klass in contract.__mro__:
        if rule in vars(klass):
            return " ".join((vars(klass)[rule].validation_fn.__doc__ or rule).split())
    return rule


def describe(column: dy.Column) -> str:
    """A column's definition in words: `finite Float64 values in [0, 1], or null`."""
    dtype = column.dtype
    finite = dtype.is_float() and not (column.allow_nan or column.allow_inf)
    text = f"{'finite ' if finite else ''}{dtype} values"
    keys = ("min", "min_exclusive", "max", "max_exclusive")
    bounds = [getattr(column, key, None) for key in keys]
    low, low_open, high, high_open = bounds
    if any(bound is not None for bound in bounds):
        left = f"[{_number(low)}" if low is not None else f"({_number(low_open, -math.inf)}"
        right = f"{_number(high)}]" if high is not None else f"{_number(high_open)})"
        text += f" in {left}, {right}"
    if getattr(column, "is_in", None) is not None:
        text += f" of {list(column.is_in)}"
    return text + (", or null" if column.nullable else ", not null")


def _number(value: float | None, unbounded: float = math.inf) -> str:
    """A bound as written in relmas.schemas: a power of two as one (2^32), others as %g; None is
    no bound, `unbounded` (-inf on the left of a range)."""
    value = unbounded if value is None else value
    if math.isinf(value):
        return f"{value:g}"
    exponent = math.log2(abs(value)) if value else 0.0
    if abs(exponent) >= 10 and exponent == int(exponent):
        return f"{'-' if value < 0 else ''}2^{int(exponent)}"
    return f"{value:g}"
