"""Progress of long commands (train, evaluate, sweep, GA): a tqdm bar on stderr when it is a
terminal; in a pipeline job's log (a Snakemake job's `log:`), one line with count, rate and ETA at
most every `every_s` seconds, so that `tail -f results/logs/...` shows a study moving; nowhere
else, so that progress never mixes with what a script prints (`bench_silicon.py > table.md`) and
stderr carries nothing but errors.

tqdm (not a hand-rolled counter) computes the smoothed rate and ETA and draws the bar.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import IO, Any

from tqdm import tqdm

from relmas.tracking import pipeline_id

# Seconds between two progress lines in a log, and what a line says (no bar: a log is read later).
LOG_EVERY_S = 10.0
LOG_FORMAT = (
    "{desc}: {n_fmt}/{total_fmt} {unit} ({percentage:.0f}%) in {elapsed}, ETA {remaining},"
    " {rate_fmt}{postfix}"
)

# Cursor movements tqdm writes for nested bars.
_CURSOR = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# Set inside `hidden()`.
_HIDDEN: ContextVar[bool] = ContextVar("relmas_progress_hidden", default=False)


class _Lines:
    """tqdm's status line as one log line per refresh: a log file has no carriage return, no
    cursor movement, and needs the closing line only once."""

    def __init__(self, stream: IO[str]):
        self.stream = stream
        self.last = ""

    def write(self, text: str) -> None:
        line = _CURSOR.sub("", text).strip("\r\n").rstrip()
        if line and line != self.last:
            self.stream.write(line + "\n")
            self.last = line

    def flush(self) -> None:
        self.stream.flush()


@contextlib.contextmanager
def hidden(hide: bool = True) -> Iterator[None]:
    """No progress from the calls inside (if `hide`): for a library function that was not asked
    to show the progress of the long functions it calls."""
    token = _HIDDEN.set(hide or _HIDDEN.get())
    try:
        yield
    finally:
        _HIDDEN.reset(token)


def progress(
    total: int | None,
    desc: str,
    unit: str = "it",
    *,
    stream: IO[str] | None = None,
    every_s: float = LOG_EVERY_S,
) -> tqdm:
    """A tqdm progress bar: redrawn in place on stderr when it is a terminal; otherwise one line
    per `every_s` seconds (and the last one) on `stream`, by default stdout in a pipeline job (its
    log, which takes stdout and stderr) and nowhere in any other process (a script's stdout is its
    output; stderr stays for the one-line error of bad input). None inside `hidden()`."""
    if _HIDDEN.get():
        return tqdm(total=total, disable=True)
    if stream is None and not sys.stderr.isatty():
        if not pipeline_id():
            return tqdm(total=total, disable=True)
        stream = sys.stdout
    stream = stream or sys.stderr
    if stream.isatty():
        return tqdm(total=total, desc=desc, unit=unit, file=stream, dynamic_ncols=True)
    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        file=_Lines(stream),
        mininterval=every_s,
        maxinterval=every_s,
        miniters=1,
        bar_format=LOG_FORMAT,
        position=0,  # a bar inside another (GA in evaluate) is a line of its own, not one above
    )


def advance_to(bar: tqdm, done: int, metrics: Mapping[str, Any] | None = None) -> None:
    """Move `bar` to `done` (a step count reported from inside a loop), showing up to four of
    `metrics` beside it."""
    if metrics:
        bar.set_postfix({k: f"{v:.4g}" for k, v in list(metrics.items())[:4]}, refresh=False)
    bar.update(done - bar.n)
