"""The target-aware baselines (catalog kind `target`, relmas.policies.rules): deficit-first,
below-target first, the token rule and static priority by target, on hand cases; without targets
each is its base rule, schedule for schedule; the jitted loop and the stepping path agree, firm
deadlines included. Each deficit-first and below-target form equals the agent's slot rule of its
name: tests/test_rl_service.py."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl
import pytest

from relmas import catalog
from relmas.policies import make_policy
from relmas.sim import Engine
from tests.synthetic import both_ways, contended_case, one_type, tenant_jobs

TARGET_AWARE = catalog.of_kind("target")
DEFICIT_FORMS = [name for name in TARGET_AWARE if name.endswith("_deficit")]


def one_instance() -> tuple:
    """Model A: two layers of 1 s, B: one layer of 1 s, C: one layer of 0.5 s; one instance."""
    return one_type({"A": [1.0, 1.0], "B": [1.0], "C": [0.5]})


def jobs_frame(
    rows: list[tuple[str, str, float, float, bool]], targets: dict[str, float]
) -> pl.DataFrame:
    """Jobs (tenant, model, arrival, deadline, firm) in id order, each with its tenant's target
    (none for a tenant not in `targets`)."""
    return tenant_jobs([r[:4] for r in rows], [r[4] for r in rows], targets)


def started_in_order(result) -> list[int]:
    """The jobs that started, in the order they did."""
    started = result.jobs.filter(pl.col("start_s").is_finite())
    return started.sort("start_s", "job_id")["job_id"].to_list()


# The hand case. Job 0 (gold, 1 s, due 0.5) cannot make it: it runs 0-1 s alone and
# misses, so at 1 s gold has achieved 0 of its 0.9 and bronze, nothing decided, 1 (deficit -0.5).
# Then job 1 (bronze, 1 s, due 2) and job 2 (gold, 2 s, due 3.2) are both feasible, and only one
# can make it. SJF and EDF start job 1 (shorter, earlier): it meets, job 2 ends at 4, late. Deficit
# first starts job 2 (gold is furthest below): it meets at 3, job 1 ends at 4, late.
HAND = [
    ("gold", "B", 0.0, 0.5, False),
    ("bronze", "B", 0.5, 2.0, False),
    ("gold", "A", 0.5, 3.2, False),
]
HAND_TARGETS = {"gold": 0.9, "bronze": 0.5}


@pytest.mark.parametrize("name", DEFICIT_FORMS)
def test_deficit_first_serves_the_tenant_below_its_target_and_falls_less_short(name):
    system, tables = one_instance()
    jobs = jobs_frame(HAND, HAND_TARGETS)
    base = replace(catalog.rule(name), by="rule").name  # the rule it puts the deficits before
    rule = Engine(system, tables, jobs).run(make_policy(base))
    deficit = Engine(system, tables, jobs).run(make_policy(name))
    assert rule.jobs.sort("job_id")["met"].to_list() == [False, True, False]
    assert deficit.jobs.sort("job_id")["met"].to_list() == [False, False, True]
    assert rule.metrics["sla_rate"] == deficit.metrics["sla_rate"] == pytest.approx(1 / 3)
    # shortfall = sum over tenants of (jobs / 3) x max(0, target - achieved):
    # the rule: gold 2/3 x (0.9 - 0) = 0.6, bronze 1 >= 0.5; deficit first: gold 2/3 x
    # (0.9 - 0.5) = 0.2667, bronze 1/3 x (0.5 - 0) = 0.1667
    assert rule.metrics["shortfall"] == pytest.approx(0.6)
    assert deficit.metrics["shortfall"] == pytest.approx(2 / 3 * 0.4 + 1 / 3 * 0.5)
    assert deficit.metrics["shortfall"] < rule.metrics["shortfall"]


# Four tenants. Jobs 0 (copper) and 1 (silver) are firm and hopeless (due 0.1): job 0 runs 0-1 s
# and is dropped when it ends, job 1 is dropped at 0.5 s, so at 1 s copper (target 0.8) and silver
# (target s) have achieved 0, gold (0.9) and bronze (0.5) nothing decided: deficits 0.8, s, -0.1,
# -0.5. Jobs 2-6 arrived at 0.5 s, all feasible; free has no target.
RANKED = [
    ("copper", "B", 0.0, 0.1, True),
    ("silver", "B", 0.0, 0.1, True),
    ("gold", "A", 0.5, 20.0, False),
    ("silver", "B", 0.5, 20.0, False),
    ("copper", "A", 0.5, 20.0, False),
    ("bronze", "C", 0.5, 20.0, False),
    ("free", "C", 0.5, 20.0, False),
]


def ranked(silver: float) -> pl.DataFrame:
    return jobs_frame(RANKED, {"gold": 0.9, "silver": silver, "copper": 0.8, "bronze": 0.5})


def first_start_at_one_second(name: str, jobs: pl.DataFrame) -> int:
    system, tables = one_instance()
    result = Engine(system, tables, jobs).run(make_policy(name))
    (job,) = result.jobs.filter(pl.col("start_s") == 1.0)["job_id"].to_list()
    return job


def test_the_token_rule_takes_the_shortest_job_at_the_threshold():
    """Tokens at 1 s (waited 0.5 s): copper's job 4 (2 s alone) 0.8 x (1 + 0.5 / 2) = 1.0, the
    threshold 1.0 / 3; silver's job 3 (1 s alone) s x (1 + 0.5 / 1) = 1.5 s; no other job has
    tokens (no deficit). With s = 0.6 job 3 has 0.9, a candidate, and shorter than job 4; with
    s = 0.2 it has 0.3, below the threshold, and copper's job goes first."""
    assert first_start_at_one_second("sjf_feasible_tokens", ranked(0.6)) == 3
    assert first_start_at_one_second("sjf_feasible_tokens", ranked(0.2)) == 4
    # deficit first takes copper (0.8 > 0.6), sjf_feasible the shortest (job 5, ties to bronze)
    assert first_start_at_one_second("sjf_feasible_deficit", ranked(0.6)) == 4
    assert first_start_at_one_second("sjf_feasible", ranked(0.6)) == 5


def test_below_target_takes_the_shortest_job_of_any_tenant_below_its_target():
    """At 1 s copper (0.8) and silver (s) have achieved 0: with s = 0.6 both are below their
    targets, and the below-target rule takes the shorter of their jobs (silver's job 3, 1 s)
    where deficit first takes copper's (job 4, 2 s); with s = 0 silver is at its target and
    copper's job goes first."""
    assert first_start_at_one_second("sjf_feasible_below", ranked(0.6)) == 3
    assert first_start_at_one_second("sjf_feasible_below", ranked(0.0)) == 4


# A certain miss counts before the job finishes. At 0 s job 0 (gold, 1 s, due 0.5) cannot make
# it and job 1 (bronze, 1 s) can: every rule starts job 1. At 1 s gold's job 0 is still ready and
# hopeless: gold's rate counts it, 0 of 1 (deficit 0.5), where the engine's counters, which
# decide a soft miss at its finish, still read 1 (deficit -0.5, bronze's -0.1 ahead of it). So
# both target-aware forms start gold's job 3 (1 s), not bronze's shorter job 2 (0.5 s).
CERTAIN_MISS = [
    ("gold", "B", 0.0, 0.5, False),
    ("bronze", "B", 0.0, 10.0, False),
    ("bronze", "C", 0.5, 10.0, False),
    ("gold", "B", 0.5, 10.0, False),
]


@pytest.mark.parametrize("name", ["sjf_feasible_deficit", "sjf_feasible_below"])
def test_a_hopeless_ready_job_counts_as_missed_in_its_tenant_s_rate(name):
    jobs = jobs_frame(CERTAIN_MISS, {"gold": 0.5, "bronze": 0.9})
    assert first_start_at_one_second(name, jobs) == 3
    assert first_start_at_one_second("sjf_feasible", jobs) == 2


def test_static_priority_serves_the_highest_target_first_and_no_target_last():
    """From 1 s, by target whatever has been achieved: gold (0.9), copper (0.8), silver (0.6),
    bronze (0.5), then free's job without a target; sjf_feasible by remaining work."""
    system, tables = one_instance()
    jobs = ranked(0.6)
    static = Engine(system, tables, jobs).run(make_policy("sjf_feasible_by_target"))
    assert started_in_order(static)[1:] == [2, 4, 3, 5, 6]
    rule = Engine(system, tables, jobs).run(make_policy("sjf_feasible"))
    assert started_in_order(rule)[1:] == [5, 6, 3, 2, 4]


def with_targets(jobs: pl.DataFrame, firm: bool) -> pl.DataFrame:
    """Three tenants in turn, targets 0.95, 0.8 and none."""
    tenants = np.array(["gold", "silver", "free"])[np.arange(jobs.height) % 3]
    targets = {"gold": 0.95, "silver": 0.8}
    return jobs.with_columns(
        tenant=pl.Series(tenants),
        target=pl.Series([targets.get(t) for t in tenants], dtype=pl.Float64()),
        firm=pl.lit(firm),
    )


@pytest.mark.parametrize("firm", [False, True], ids=["soft", "firm"])
def test_jitted_loop_and_stepping_give_the_same_schedule(firm):
    """Every target-aware baseline, on a contended trace with targets: the same schedule both
    ways; the targets change the schedule of some."""
    system, tables, jobs = contended_case(11, 60, {"a": 3, "b": 6}, 6.0, (1.5, 5.0))
    jobs = with_targets(jobs, firm)
    rule = Engine(system, tables, jobs).run(make_policy("sjf_feasible"))
    differs = 0
    for name in TARGET_AWARE:
        fast = both_ways(system, tables, jobs, name)
        assert fast.metrics["targets"] == 2, name
        assert (fast.metrics["dropped"] > 0) == firm, name
        differs += not fast.jobs.equals(rule.jobs)
    assert differs >= 3


def test_without_targets_each_is_its_base_rule():
    """On a trace without targets (a tenant with none, and a trace without the column) the
    deficit forms, the token rule and static priority give their base rule's schedule."""
    system, tables, jobs = contended_case(11, 60, {"a": 3, "b": 6}, 6.0, (1.5, 5.0))
    tenants = pl.Series(np.array(["u", "v"])[np.arange(jobs.height) % 2])
    for trace in (jobs.with_columns(tenant=tenants), jobs.drop("target", strict=False)):
        for name in TARGET_AWARE:
            base = replace(catalog.rule(name), by="rule").name
            expected = Engine(system, tables, trace).run(make_policy(base))
            result = Engine(system, tables, trace).run(make_policy(name))
            assert result.jobs.equals(expected.jobs), name
            assert result.metrics["decisions"] == expected.metrics["decisions"], name
