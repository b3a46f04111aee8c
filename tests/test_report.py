"""Report statistics: confidence intervals, the ratio to the best heuristic, the ranking table."""

from __future__ import annotations

import polars as pl
import pytest

from relmas.config import load_config
from relmas.report import aggregate, heuristic_ranking, mean_ci, ratio_to_best_heuristic


def summary(values: dict[str, list[float]], scenario: str = "mixed") -> pl.DataFrame:
    rows = [
        {"scenario": scenario, "policy": policy, "seed": seed, "sla_rate": value}
        for policy, series in values.items()
        for seed, value in enumerate(series)
    ]
    metrics = ("antt", "stp", "fairness", "utilization", "energy_j", "decision_us")
    return pl.DataFrame(rows).with_columns(pl.lit(1.0).alias(m) for m in metrics)


def test_mean_ci_is_student_t() -> None:
    mean, half = mean_ci([1.0, 2.0, 3.0])
    assert mean == 2.0
    assert half == pytest.approx(4.302653 / 3**0.5, rel=1e-6)  # t(0.975, 2) * s / sqrt(n)
    assert mean_ci([0.7]) == (0.7, 0.0)


def test_ratio_is_against_the_best_heuristic_not_random_or_the_offline_bound() -> None:
    frame = summary(
        {
            "sjf": [0.5, 0.6],
            "edf": [0.4, 0.4],
            "random": [0.9, 0.9],  # a reference, never "the best heuristic"
            "ga_offline": [1.0, 1.0],
            "relmas": [0.55, 0.66],
        }
    )
    (row,) = ratio_to_best_heuristic(frame).iter_rows(named=True)
    assert row["best_heuristic"] == "sjf"
    assert row["ratio"] == pytest.approx(1.1)
    # the per-seed ratio is 1.1 on both seeds, so every bootstrap resample gives 1.1
    assert row["ratio_ci_low"] == pytest.approx(1.1) and row["ratio_ci_high"] == pytest.approx(1.1)


def test_ranking_orders_heuristics_by_sla_rate(quick_config) -> None:
    config = load_config(quick_config)
    frame = summary({"fcfs": [0.2, 0.4], "sjf": [0.8, 0.6], "relmas": [0.9, 0.9]})
    (row,) = heuristic_ranking(config, aggregate(frame)).iter_rows(named=True)
    assert row["ranking (SLA rate)"] == "sjf 0.700, fcfs 0.300"
    assert row["spread"] == pytest.approx(0.4)
    assert row["load"] == config["scenarios"]["mixed"]["arrival"]["load"]
