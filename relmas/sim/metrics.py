"""Scheduling metrics of a finished simulation, from per-job times and per-accelerator busy times.

Definitions (docs/simulator.md):
- SLA satisfaction rate: fraction of jobs finishing by their deadline (overall and per tenant); a
  job dropped past its firm deadline (NaN finish) counts as missed;
- normalised progress NP_i = isolated_i / turnaround_i (PREMA), turnaround = finish - arrival;
- ANTT = mean(1 / NP_i); STP = sum(NP_i); fairness = min(NP) / max(NP), and the turnaround
  percentiles: over the finished jobs only (a dropped job has no turnaround); where no job
  finished (every one dropped past its firm deadline) they are undefined, None (null in a
  summary's Parquet), and STP is 0;
- makespan = end of the run (the last task's end: the last finish, or later if the last tasks
  were a dropped job's) - first arrival; utilisation of an instance = busy time / makespan, where
  busy means a task is assigned to it (possibly slowed down by bandwidth contention);
- energy = dynamic energy of the executed layers + static power x makespan of every instance
  + the scheduler's own energy per decision.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from relmas.sim.engine_kernels import TIME_TOL as TIME_TOL  # the tolerance of `deadline_met`
from relmas.sim.engine_kernels import on_time_each


def deadline_met(finish_s: np.ndarray, deadline_s: np.ndarray) -> np.ndarray:
    """Whether each job finished by its deadline (arrays broadcast together), up to float
    rounding of the event times; never for a dropped job's NaN finish. Jitted code tests one job
    with `relmas.sim.engine_kernels.on_time`, the same test."""
    finish, deadline = np.broadcast_arrays(
        np.asarray(finish_s, dtype=np.float64), np.asarray(deadline_s, dtype=np.float64)
    )
    return on_time_each(finish.ravel(), deadline.ravel()).reshape(finish.shape)


def job_metrics(
    arrival_s: np.ndarray,
    finish_s: np.ndarray,
    deadline_s: np.ndarray,
    isolated_s: np.ndarray,
    end_s: float,
) -> dict[str, float | None]:
    """SLA rate over all jobs, dropped ones (NaN finish) missed; ANTT, STP, fairness and
    turnaround percentiles over the finished ones (None where none finished: a NaN would be
    refused by the summary's contract one stage later); makespan to the run's end `end_s`."""
    finished = ~np.isnan(finish_s)
    turnaround = finish_s[finished] - arrival_s[finished]
    progress = isolated_s[finished] / turnaround
    some = turnaround.size > 0

    def over_finished(value: Callable[[], float]) -> float | None:
        return float(value()) if some else None

    return {
        "jobs": float(arrival_s.size),
        "sla_rate": float(np.mean(deadline_met(finish_s, deadline_s))),
        "antt": over_finished(lambda: np.mean(1.0 / progress)),
        "stp": float(np.sum(progress)),
        "fairness": over_finished(lambda: progress.min() / progress.max()),
        "makespan_s": float(end_s - arrival_s.min()),
        "turnaround_mean_s": over_finished(turnaround.mean),
        "turnaround_p50_s": over_finished(lambda: np.percentile(turnaround, 50)),
        "turnaround_p95_s": over_finished(lambda: np.percentile(turnaround, 95)),
        "turnaround_p99_s": over_finished(lambda: np.percentile(turnaround, 99)),
    }


def sla_by_group(groups: np.ndarray, met: np.ndarray) -> dict[str, float]:
    """SLA satisfaction rate of each group (e.g. tenant)."""
    names, inverse = np.unique(groups, return_inverse=True)
    rates = np.bincount(inverse, weights=met.astype(float)) / np.bincount(inverse)
    return {str(name): float(rate) for name, rate in zip(names, rates, strict=True)}


def utilisation(busy_s: np.ndarray, makespan_s: float) -> np.ndarray:
    return busy_s / makespan_s if makespan_s > 0 else np.zeros_like(busy_s)


def energy_breakdown(
    dynamic_j: float, static_w: np.ndarray, makespan_s: float, overhead_j: float
) -> dict[str, float]:
    static_j = float(np.sum(static_w) * makespan_s)
    return {
        "energy_j": dynamic_j + static_j + overhead_j,
        "energy_dynamic_j": dynamic_j,
        "energy_static_j": static_j,
        "energy_overhead_j": overhead_j,
    }
