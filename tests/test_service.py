"""Service levels (relmas.sim.service): the groups and the target metrics on hand-made results."""

from __future__ import annotations

import polars as pl
import pytest

from relmas.sim.service import GROUP_SCHEMA, SERVICE_METRICS, service_groups, service_summary


def results(rows: list[tuple]) -> pl.DataFrame:
    """Per-job results of (tenant, model, target, model_target, met, dropped) rows."""
    columns = ("tenant", "model", "target", "model_target", "met", "dropped")
    return pl.DataFrame(rows, schema=columns, orient="row")


# Ten jobs. gold: target 0.75, its model b 1.0 (its own group); silver: target 0.5; free: none.
# gold/b's second job finished in time by its clock but was dropped: it counts as missed.
TEN_JOBS = results(
    [
        ("gold", "a", 0.75, False, True, False),
        ("gold", "a", 0.75, False, True, False),
        ("gold", "a", 0.75, False, True, False),
        ("gold", "a", 0.75, False, False, False),
        ("gold", "b", 1.0, True, True, False),
        ("gold", "b", 1.0, True, True, True),
        ("silver", "a", 0.5, False, False, False),
        ("silver", "a", 0.5, False, False, False),
        ("silver", "b", 0.5, False, True, False),
        ("free", "a", None, False, True, False),
    ]
)


def test_groups_of_a_hand_made_trace() -> None:
    groups = service_groups(TEN_JOBS)
    assert groups.schema == pl.Schema(GROUP_SCHEMA)
    assert groups.rows() == [
        ("gold", "gold", None, 4, 3, 0.75, 0.75),
        ("gold/b", "gold", "b", 2, 1, 0.5, 1.0),
        ("silver", "silver", None, 3, 1, 1 / 3, 0.5),
    ]


def test_target_metrics_of_a_hand_made_trace() -> None:
    summary = service_summary(service_groups(TEN_JOBS), TEN_JOBS.height)
    # gold meets 0.75 exactly; gold/b (0.5 of 1.0) and silver (1/3 of 0.5) miss.
    assert (summary["targets_met"], summary["targets"]) == (1, 3)
    # gold/b lacks 1 job of the 10 (0.1), silver half a job (3/10 x (0.5 - 1/3) = 0.05)
    assert summary["shortfall"] == pytest.approx(0.15, abs=1e-15)
    # achieved / target: 1, 0.5, 2/3; Jain: (13/6)^2 / (3 x 61/36) = 169/183
    assert summary["worst_ratio"] == 0.5
    assert summary["jain_target"] == pytest.approx(169 / 183, abs=1e-15)


def test_a_target_reached_up_to_rounding_is_met_and_zero_targets_have_no_ratio() -> None:
    jobs = results(
        [("t", "a", 0.1 * 3, False, i < 3, False) for i in range(10)]
        + [("z", "a", 0.0, False, False, False)]
    )
    summary = service_summary(service_groups(jobs), jobs.height)
    assert (summary["targets_met"], summary["targets"]) == (2, 2)
    assert summary["shortfall"] == 0.0
    # only t's ratio (0.3 / 0.30000000000000004) enters: z's target 0 has none
    assert summary["worst_ratio"] == pytest.approx(1.0) and summary["jain_target"] == 1.0


def test_results_without_targets_or_drops_have_null_metrics() -> None:
    jobs = results([("t", "a", None, False, True, False)]).drop("dropped")
    groups = service_groups(jobs)
    assert groups.height == 0 and groups.schema == pl.Schema(GROUP_SCHEMA)
    assert service_summary(groups, jobs.height) == dict.fromkeys(SERVICE_METRICS)
