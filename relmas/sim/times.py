"""The times of a job trace as the engine keeps them: relative to its origin, a whole second.

A float64 time t resolves about t x 2^-52 s: a trace in UNIX epoch seconds (t ~ 1.7e9) resolves
0.4 us, no finer than the latency of a small layer, and every event time computed from it
(finish = now + work) would be rounded that coarsely, as would the engine's tolerance of equal
event times (relative to the times' size). The engine therefore subtracts the trace's *origin*,
the whole second at or before its first arrival, from every time before simulating, and the
results add it back: a trace gives the same schedule and metrics wherever it sits on the clock
(exactly, when it moves by whole seconds and its times are exact at either place). The origin of a
trace that starts within its first second, as generated ones do, is 0: their times are unchanged.

A trace's times are refused beyond `MAX_TIME_S` (relmas.schemas.JobTrace), where they no longer
resolve a microsecond (and an arrival at 1e300 s would make a makespan of 1e300 s).
"""

from __future__ import annotations

import math

MAX_TIME_S = 2.0**32  # ~136 years: epoch seconds up to 2106, resolved to 2^-20 s (< 1 us)


def time_origin(first_arrival_s: float) -> float:
    """The origin of a trace whose earliest arrival is `first_arrival_s`: the whole second at or
    before it."""
    return float(math.floor(first_arrival_s))
