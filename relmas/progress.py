"""Progress of long commands (train, evaluate, sweep, GA): a tqdm bar when run by hand on a
terminal; in a log file (a Snakemake job's `log:`), one line with count, rate and ETA at most
every `every_s` seconds, so that `tail -f results/logs/...` shows a study moving.

tqdm (not a hand-rolled counter) computes the smoothed rate and ETA and draws the bar.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from typing import IO, Any

from tqdm import tqdm

# Seconds between two progress lines in a log, and what a line says (no bar: a log is read later).
LOG_EVERY_S = 10.0
LOG_FORMAT = (
    "{desc}: {n_fmt}/{total_fmt} {unit} ({percentage:.0f}%) in {elapsed}, ETA {remaining},"
    " {rate_fmt}{postfix}"
)

# Cursor movements tqdm writes for nested bars.
_CURSOR = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


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


def progress(
    total: int | None,
    desc: str,
    unit: str = "it",
    *,
    stream: IO[str] | None = None,
    every_s: float = LOG_EVERY_S,
) -> tqdm:
    """A tqdm progress bar: redrawn in place on a terminal (stderr), otherwise one line per
    `every_s` seconds (and the last one) on `stream`, by default stdout — stderr stays for the
    one-line error of bad input (a Snakemake job's log takes both)."""
    stream = stream or (sys.stderr if sys.stderr.isatty() else sys.stdout)
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
