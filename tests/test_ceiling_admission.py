"""The LP's jobs served (relmas.ceiling.admission): a schedule of the whole trace, replayed in the
engine, that may beat every online rule (it knows the future) and never the proven ceiling."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from relmas import catalog
from relmas.ceiling.admission import (
    best_run,
    deadline_rules,
    on_whole,
    placements,
    replayed,
    serve_lp_jobs,
)
from relmas.ceiling.bound import relaxation_bound
from relmas.ceiling.exact import solve_exact
from relmas.ceiling.instance import Instance
from relmas.ceiling.plan import Plan
from relmas.policies import make_policy
from relmas.sim import CostTables, Engine, load_system
from tests.synthetic import cost_frame, memory_bound_case
from tests.test_ceiling_exact import _met, _trace


def _one_instance(models: dict[str, float]):
    """One instance of one type `x`, one-layer models of the given latencies, no DRAM limit."""
    frame = cost_frame({m: {"x": [(latency, 0, 0.0)]} for m, latency in models.items()})
    return load_system({"instances": [{"name": "x", "count": 1}]}), CostTables.from_frame(
        frame, ["x"]
    )


def _served(system, tables, jobs, scales=(1.0,)):
    bound = relaxation_bound(Instance.of(system, tables, jobs), time_limit_s=10.0)
    return bound, serve_lp_jobs(system, tables, jobs, bound, scales=scales, time_limit_s=10.0)


def test_the_rules_are_the_rule_baselines_ranked_by_deadline():
    rules = deadline_rules()
    assert len(rules) == 4 and set(rules) <= set(catalog.of_kind("rule"))
    edf, sjf = catalog.rule("edf_feasible").rank, catalog.rule("sjf_feasible").rank
    assert edf != sjf and all(catalog.rule(rule).rank == edf for rule in rules)


def test_serving_the_lp_s_jobs_beats_every_rule_where_the_future_matters():
    # One instance. A long job (1.5 s) alone at 0, due at 2; two short ones (0.5 s) at 0.1, due
    # at 1.2. Online, every rule starts the long one at 0 (the only job there, and it can meet
    # its deadline), so both short ones are late: 1 met. The window [0, 2] holds 2 s of work,
    # not 2.5: the LP keeps the two short jobs (bound 2), and serving only them meets both; the
    # long one starts once they are done, late.
    system, tables = _one_instance({"long": 1.5, "short": 0.5})
    jobs = _trace([("long", 0.0, 2.0), ("short", 0.1, 1.2), ("short", 0.1, 1.2)])
    assert max(_met(system, tables, jobs, make_policy(r)) for r in catalog.of_kind("rule")) == 1
    bound, served = _served(system, tables, jobs)
    assert (bound.met, served.met, served.admitted, served.scale) == (2, 2, 2, 1.0)
    assert served.source is not None and served.source.split("@")[0] in deadline_rules()


def test_a_run_of_some_jobs_replays_at_its_own_times_on_the_whole_trace():
    # The first job cannot meet its deadline alone, so the LP never counts it: the jobs served
    # start after the whole trace's origin (0) on a clock of their own (origin 1). Moved to the
    # whole trace, the run's tasks must start when they did: 1.5 and 2.0 there.
    system, tables = _one_instance({"one": 0.5, "lost": 2.0})
    jobs = _trace([("lost", 0.2, 1.0), ("one", 1.5, 3.0), ("one", 1.5, 3.0)])
    whole = Instance.of(system, tables, jobs)
    part_jobs = jobs.filter(jobs["job_id"] > 0)
    part = Instance.of(system, tables, part_jobs)
    assert (whole.origin_s, part.origin_s) == (0.0, 1.0)
    engine = Engine(system, tables, part_jobs, record=True)
    engine.run(make_policy("edf_feasible"))
    plan = on_whole(Plan.of_run(part, engine, "edf_feasible"), part, whole)
    assert sorted(task.start_s for task in plan.tasks) == pytest.approx([1.5, 2.0])
    assert plan.on_time.tolist() == [False, True, True]
    bound = relaxation_bound(whole, time_limit_s=10.0)
    assert bound.shares.round(6).tolist() == [0.0, 1.0, 1.0]
    assert (
        replayed(system, tables, jobs, whole, best_run(system, tables, jobs, whole, bound.shares))
        == 2
    )


@pytest.mark.parametrize("seed", [1, 3, 6])
def test_a_share_of_the_bandwidth_serves_fewer_jobs_and_meets_more_never_above_the_optimum(seed):
    # Bursts where memory binds (tests/synthetic.py), their optimum proven by the exact search:
    # on these, the LP of the whole bandwidth packs in jobs that the rules' runs cannot all
    # meet; the LP with 90 % of it counts fewer, and serving those meets more.
    system, tables, jobs = memory_bound_case(seed, 8)
    exact = solve_exact(system, tables, jobs, time_limit_s=10.0, max_jobs=8)
    assert exact.exact
    bound, full = _served(system, tables, jobs)
    _, tried = _served(system, tables, jobs, scales=(1.0, 0.9))
    assert full.met < tried.met <= exact.lower <= bound.met
    assert (full.scale, tried.scale) == (1.0, 0.9) and tried.admitted <= full.admitted
    whole = Instance.of(system, tables, jobs)
    planned = replace(whole, dram_gbps=whole.dram_gbps * 0.9)
    shares = relaxation_bound(planned, time_limit_s=10.0).shares
    assert tried.admitted == np.count_nonzero(shares > 0.5)


def test_nothing_counted_serves_nothing_and_bad_shares_are_refused():
    system, tables = _one_instance({"lost": 2.0})
    jobs = _trace([("lost", 0.0, 1.0)])
    bound, served = _served(system, tables, jobs)
    assert (bound.met, served.met, served.admitted, served.source) == (0, 0, 0, None)
    for scales in ((), (0.0,), (1.5,)):
        with pytest.raises(ValueError, match="shares of the bandwidth in"):
            serve_lp_jobs(system, tables, jobs, bound, scales=scales, time_limit_s=1.0)
    with pytest.raises(ValueError, match="2 shares for a trace of 1 jobs"):
        best_run(system, tables, jobs, Instance.of(system, tables, jobs), np.ones(2))


def test_moving_the_admitted_set_finds_a_schedule_the_rules_and_the_lp_s_choice_miss():
    """A contended burst (8 jobs, memory binding) where the LP keeps jobs whose bytes the rules'
    runs cannot fit: serving its choice meets 3 (every rule alone at most 1). Giving up some of
    them and serving others, by the engine's own runs, meets 6 — replayed on the whole trace,
    never above the ceiling."""
    system, tables, jobs = memory_bound_case(56, 8)
    assert max(_met(system, tables, jobs, make_policy(r)) for r in catalog.of_kind("rule")) == 1
    bound = relaxation_bound(Instance.of(system, tables, jobs), time_limit_s=10.0)
    options = {"scales": (1.0, 0.85), "time_limit_s": 10.0}
    chosen = serve_lp_jobs(system, tables, jobs, bound, **options)
    moved = serve_lp_jobs(system, tables, jobs, bound, **options, tries=300)
    assert (chosen.met, chosen.search_runs, moved.met, bound.met) == (3, 0, 6, 7)
    assert 0 < moved.search_runs <= 300 + len(deadline_rules()) * len(placements(system))
    assert moved.admitted != chosen.admitted or moved.source != chosen.source
