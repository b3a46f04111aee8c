"""Progress lines of long commands in a log (not a terminal): count, rate, ETA, spaced in time."""

from __future__ import annotations

import io
import re

from relmas.progress import advance_to, progress


def test_a_log_gets_whole_lines_with_rate_and_eta_at_intervals() -> None:
    log = io.StringIO()
    bar = progress(1000, "train mixed relmas", "step", stream=log, every_s=3600)
    for step in range(10, 1001, 10):
        advance_to(bar, step, {"loss": 0.5})
    bar.close()
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue()
    # an hour between lines: the first, and the last at close, not one per update
    assert 2 <= len(lines) <= 3
    last = lines[-1]
    assert last.startswith("train mixed relmas: 1000/1000 step (100%)")
    assert re.search(r"ETA \d\d:\d\d, [\d.]+step/s, loss=0\.5$", last), last
