"""benchmarks/bench_ceiling_medium.py: its windows of a trace, and on a small one the order of
what it reports (the rule's run below the exact search's schedule, both below every bound)."""

from __future__ import annotations

import argparse
import runpy
from pathlib import Path

import polars as pl
import pytest

from relmas.errors import InputError
from relmas.schemas import JOB_SCHEMA
from tests.synthetic import memory_bound_case

BENCH = runpy.run_path(
    str(Path(__file__).resolve().parents[1] / "benchmarks" / "bench_ceiling_medium.py")
)


def test_windows_are_consecutive_jobs_in_the_engines_order_with_shared_centres():
    # Ten jobs listed out of order, two arriving together (the engine breaks ties by job_id).
    arrival = [5.0, 1.0, 3.0, 3.0, 0.0, 9.0, 7.0, 2.0, 8.0, 6.0]
    jobs = pl.DataFrame(
        {
            "job_id": [7, 1, 3, 2, 0, 9, 6, 4, 8, 5],
            "tenant": ["t"] * 10,
            "model": ["a"] * 10,
            "arrival_s": arrival,
            "deadline_s": [a + 1.0 for a in arrival],
            "priority": [1] * 10,
        },
        schema_overrides=JOB_SCHEMA,
    )
    windows = BENCH["windows"](jobs, 3, 2)
    assert [first for first, _ in windows] == [2, 6]  # centred on jobs 3 and 7
    assert [w["job_id"].to_list() for _, w in windows] == [[4, 2, 3], [5, 6, 8]]
    assert [w["arrival_s"].to_list() for _, w in windows] == [[2.0, 3.0, 3.0], [6.0, 7.0, 8.0]]
    assert BENCH["window_starts"](1000, 100, 3) == [200, 450, 700]
    assert BENCH["window_starts"](1000, 50, 3) == [225, 475, 725]  # the middles of those
    assert BENCH["window_starts"](10, 10, 3) == [0, 0, 0]
    with pytest.raises(InputError, match="--jobs: expected at most the trace's 10 jobs"):
        BENCH["window_starts"](10, 11, 1)


def test_on_a_small_window_the_rule_is_below_the_schedule_and_the_schedule_below_both_bounds():
    system, tables, jobs = memory_bound_case(0, 8)
    args = argparse.Namespace(
        time_limit=10.0,
        lp_time_limit=10.0,
        threads=1,
        tick=1e-4,
        placements=["all", "bandwidth", "types"],
    )
    assert BENCH["placements"](system, args.placements) == ["all", "bandwidth", "e", "s"]
    row = BENCH["measure"](args, system, tables, jobs, "memory-bound burst")
    assert row["rule"] <= row["cp lower"] <= row["cp upper"]
    assert row["cp lower"] <= row["lp"] <= row["lp value"] + 1e-6
    assert row["lp-cp upper"] == row["lp"] - row["cp upper"]
    assert row["cp upper-cp lower"] == row["cp upper"] - row["cp lower"]
    assert row["cp lower-rule"] == row["cp lower"] - row["rule"]
    assert row["tick s"] == 1e-4 and 0 < min(row["grid keeps"], row["default grid keeps"]) <= 1
    assert row["by"].split("@")[1] in ("all", "bandwidth", "e", "s")
