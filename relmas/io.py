"""Parquet I/O shared by every stage: atomic writes, schema checks, key-value metadata.

Outputs are written to a temporary name in the same directory and renamed into place, so an
interrupted job never leaves a half-written file that Snakemake (or a user) could take for a result.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from relmas.errors import InputError

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
    path: str | Path, schema: Mapping[str, pl.DataType], max_rows: int | None = None
) -> pl.DataFrame:
    """Read a Parquet file and check that it has at least `schema`'s columns with those types.

    Integer and float columns are cast to the exact contract type when the cast is lossless in kind
    (a hand-written int64 `layer` column becomes int32), so users may write tables with any tool.
    A table without rows is refused, and one of more than `max_rows` rows before it is loaded.
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
    frame = check_columns(frame, schema, path)
    if frame.height == 0:
        raise InputError(path, None, "a table with at least one row", "0 rows")
    return frame


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
