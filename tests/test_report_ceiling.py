"""The report's ceiling section: the reference rows (best known, ceiling), the refusal of a bound
below a policy, and the headroom arithmetic."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from relmas.ceiling.rows import best_under, with_kinds
from relmas.ceiling.stage import BOUND_SCHEMA
from relmas.errors import InputError
from relmas.report.ceiling import ceiling_markdown, ceiling_table, reference_rows

BOUNDS = Path("my/bounds")  # where `relmas report --bounds` read the bound rows


def _summary(rows: list[tuple[str, int, float]], jobs: int = 100) -> pl.DataFrame:
    """Summary rows (policy, seed, sla_rate) of scenario `s`."""
    return pl.DataFrame(
        {
            "scenario": ["s"] * len(rows),
            "policy": [r[0] for r in rows],
            "seed": [r[1] for r in rows],
            "jobs": [jobs] * len(rows),
            "sla_rate": [r[2] for r in rows],
            "agent_scenario": [None] * len(rows),
        },
        schema_overrides={"agent_scenario": pl.String},
    )


def _bounds(
    ceilings: dict[int, int],
    exact: dict[int, int] | None = None,
    served: dict[int, int] | None = None,
    searched: dict[int, int] | None = None,
) -> pl.DataFrame:
    rows = [
        {
            "scenario": "s",
            "seed": seed,
            "jobs": 100,
            "ceiling_met": met,
            "ceiling_sla": met / 100,
            "relaxation_met": met,
            "relaxation_value": met + 0.4,
            "relaxation_status": "converged",
            "relaxation_rounds": 2,
            "relaxation_windows": 10,
            "relaxation_s": 1.0,
            "exact_lower": (exact or {}).get(seed),
            "admitted": met,
            "admission_met": (served or {}).get(seed, 0),
            "admission_bandwidth": 1.0,
            "admission_by": "edf_feasible@all",
            "admission_s": 0.5,
            "searched_met": (searched or served or {}).get(seed, 0),
            "search_windows": 0,
            "search_kept": 0,
            "search_closed": 0,
            "search_s": 0.0,
            "solver": "test",
        }
        for seed, met in ceilings.items()
    ]
    return pl.DataFrame(rows, schema=BOUND_SCHEMA)


def test_best_known_is_the_best_count_of_any_policy_or_of_the_bound_stages_schedules():
    summary = _summary(
        [
            ("sjf", 1, 0.70),
            ("relmas", 1, 0.74),
            ("sjf", 2, 0.60),
            ("relmas", 2, 0.5),
            ("sjf", 3, 0.60),
            ("sjf", 4, 0.60),
        ]
    )
    bounds = _bounds(
        {1: 80, 2: 90, 3: 90, 4: 90},
        exact={2: 66, 3: 70},
        served={1: 73, 2: 65, 3: 71, 4: 71},
        searched={1: 73, 2: 65, 3: 71, 4: 74},
    )
    refs = reference_rows(summary, bounds, BOUNDS)
    known = refs.filter(pl.col("kind") == "best_known").sort("seed")
    assert known["sla_rate"].to_list() == [0.74, 0.66, 0.71, 0.74]
    assert known["best_known_by"].to_list() == [
        "relmas",
        "exact search",
        "LP's jobs served",
        "window search",
    ]
    ceiling = refs.filter(pl.col("kind") == "ceiling").sort("seed")
    assert ceiling["sla_rate"].to_list() == [0.80, 0.90, 0.90, 0.90]
    kinds = with_kinds(summary, refs)
    assert kinds.filter(pl.col("policy") == "sjf")["kind"].unique().to_list() == ["heuristic"]
    assert kinds.height == summary.height + 8


def test_a_ceiling_below_a_policy_is_refused_as_wrong_naming_the_bound_file():
    """A bound file is a user's input (`relmas report --bounds`): one line naming it (issue 39,
    item 7: an 18-line RuntimeError named no file)."""
    summary = _summary([("sjf", 1, 0.81)])
    with pytest.raises(InputError) as error:
        reference_rows(summary, _bounds({1: 80}), BOUNDS)
    assert str(error.value) == (
        "my/bounds/s/seed1.parquet: ceiling_met: expected at least the 81 deadlines sjf meets on "
        "s, seed 1 (a ceiling below a schedule's count is a wrong bound), got 80"
    )


def test_a_ceiling_computed_below_a_policy_is_a_bug():
    """A bound just computed (a sweep point's) is no input: below a policy's count, a bug."""
    summary = _summary([("sjf", 1, 0.81)])
    with pytest.raises(RuntimeError, match="sjf meets 81 deadlines on s, seed 1, above the ceil"):
        best_under(summary, 80, "s, seed 1")


def test_a_bound_of_another_trace_is_refused():
    summary = _summary([("sjf", 1, 0.5)], jobs=40)
    with pytest.raises(InputError, match="seed1.parquet: jobs: expected the 40 jobs its policies"):
        reference_rows(summary, _bounds({1: 80}), BOUNDS)


def test_headroom_and_what_a_learned_policy_takes_of_it_in_points():
    # Per seed: rule 0.60 / 0.70, relmas 0.62 / 0.74, ceiling 0.70 / 0.80.
    summary = _summary(
        [
            ("sjf_feasible", 1, 0.60),
            ("sjf_feasible", 2, 0.70),
            ("relmas", 1, 0.62),
            ("relmas", 2, 0.74),
        ]
    )
    bounds = _bounds({1: 70, 2: 80}, served={1: 65, 2: 71})
    refs = reference_rows(summary, bounds, BOUNDS)
    table = ceiling_table(summary, refs, {"s": ("sjf_feasible", 0.65)}, bounds)
    row = table.row(0, named=True)
    assert row["policy"] == "relmas"
    assert row["served_sla"] == pytest.approx(0.68)  # the LP's jobs served: 65 and 71
    assert row["served_gain"] == pytest.approx(3.0)  # 5 and 1 points above the rule
    assert row["headroom"] == pytest.approx(10.0)  # ceiling − rule: 10 and 10 points
    assert row["gain"] == pytest.approx(3.0)  # 2 and 4 points
    assert row["taken"] == pytest.approx(0.3)
    assert row["width"] == pytest.approx(5.5)  # ceiling − best known (served, relmas): 5 and 6


def test_the_planner_shows_what_giving_jobs_up_wins_online_and_what_relmas_takes_of_it():
    # Per seed: rule 0.60 / 0.70, relmas 0.62 / 0.74, planner 0.64 / 0.76 (4 and 6 points).
    rows = [("sjf_feasible", 1, 0.60), ("sjf_feasible", 2, 0.70), ("relmas", 1, 0.62)]
    rows += [("relmas", 2, 0.74), ("planner", 1, 0.64), ("planner", 2, 0.76)]
    summary = _summary(rows).with_columns(
        decision_us=pl.when(pl.col("policy") == "planner").then(2000.0).otherwise(20.0)
    )
    bounds = _bounds({1: 70, 2: 80}, served={1: 65, 2: 71})
    refs = reference_rows(summary, bounds, BOUNDS)
    table = ceiling_table(summary, refs, {"s": ("sjf_feasible", 0.65)}, bounds)
    row = table.row(0, named=True)
    assert row["policy"] == "relmas" and table.height == 1  # the planner is no learned row
    assert row["planner_sla"] == pytest.approx(0.70)
    assert row["planner_gain"] == pytest.approx(5.0)
    assert row["taken_online"] == pytest.approx(0.6)  # relmas's 3 of the planner's 5 points
    assert row["planner_us"] == pytest.approx(2000.0)
    page = "\n".join(ceiling_markdown(table, bounds))
    assert "| planner (online) | planner − rule (points) |" in page
    # one row per learned policy: met deadlines and paired difference of each schedule
    assert (
        "| s | sjf_feasible | 0.650 | relmas | 0.680 | +3.0 ± 12.7 | 0.680 | +3.0 ± 25.4 |" in page
    )
    assert "| 0.700 | +5.0 ± 12.7 |" in page  # the planner's
    assert (
        "3.0 by giving jobs up knowing the future (the LP's jobs served), "
        "5.0 online (the planner, 2.0 ms per decision)" in page
    )
    assert "relmas takes 30 % of it, 60 % of the planner's (+3.0 ± 12.7)" in page
    # without a planner: no planner columns, and the report says where it is measured
    alone = summary.filter(pl.col("policy") != "planner")
    table = ceiling_table(
        alone, reference_rows(alone, bounds, BOUNDS), {"s": ("sjf_feasible", 0.65)}, bounds
    )
    page = "\n".join(ceiling_markdown(table, bounds))
    assert "planner (online)" not in page and "not evaluated here" in page
