"""Scheduling metrics of a finished simulation, from per-job times and per-accelerator busy times.

Definitions (docs/simulator.md):
- SLA satisfaction rate: fraction of jobs finishing by their deadline (overall and per tenant);
- normalised progress NP_i = isolated_i / turnaround_i (PREMA), turnaround = finish - arrival;
- ANTT = mean(1 / NP_i); STP = sum(NP_i); fairness = min(NP) / max(NP);
- makespan = last finish - first arrival; utilisation of an instance = busy time / makespan, where
  busy means a task is assigned to it (possibly slowed down by bandwidth contention);
- energy = dynamic energy of the executed layers + static power x makespan of every instance
  + the scheduler's own energy per decision.
"""

from __future__ import annotations

import numpy as np
from numba import vectorize

from relmas.sim.kernels import TIME_TOL


@vectorize(["boolean(float64, float64)"], cache=True)
def deadline_met(finish_s: float, deadline_s: float) -> bool:
    """Whether each job finished by its deadline (up to float rounding of the event times); a
    ufunc, so that jitted code (a rollout's score) uses the same test on one job."""
    return finish_s <= deadline_s + TIME_TOL * max(1.0, abs(deadline_s))


def job_metrics(
    arrival_s: np.ndarray, finish_s: np.ndarray, deadline_s: np.ndarray, isolated_s: np.ndarray
) -> dict[str, float]:
    """SLA rate, ANTT, STP, fairness, makespan and turnaround percentiles of finished jobs."""
    turnaround = finish_s - arrival_s
    progress = isolated_s / turnaround
    return {
        "jobs": float(arrival_s.size),
        "sla_rate": float(np.mean(deadline_met(finish_s, deadline_s))),
        "antt": float(np.mean(1.0 / progress)),
        "stp": float(np.sum(progress)),
        "fairness": float(progress.min() / progress.max()),
        "makespan_s": float(finish_s.max() - arrival_s.min()),
        "turnaround_mean_s": float(turnaround.mean()),
        "turnaround_p50_s": float(np.percentile(turnaround, 50)),
        "turnaround_p95_s": float(np.percentile(turnaround, 95)),
        "turnaround_p99_s": float(np.percentile(turnaround, 99)),
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
