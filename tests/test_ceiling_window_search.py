"""The window search (relmas.ceiling.window_search): windows of a schedule of the whole trace
re-solved by CP-SAT with the rest fixed, each new schedule replayed in the engine; it only keeps
what meets more, and never meets more than the proven optimum."""

from __future__ import annotations

import numpy as np
import pytest

from relmas import catalog
from relmas.ceiling.admission import serve_lp_jobs
from relmas.ceiling.bound import relaxation_bound
from relmas.ceiling.exact import solve_exact
from relmas.ceiling.instance import Instance
from relmas.ceiling.plan import recorded
from relmas.ceiling.plan_replay import PlanReplay
from relmas.ceiling.window_search import search_windows, windows
from relmas.policies import make_policy
from tests.synthetic import memory_bound_case
from tests.test_ceiling_admission import _one_instance
from tests.test_ceiling_exact import _met, _trace

OPTIONS = {"window_jobs": 8, "time_limit_s": 10.0, "budget_s": 60.0}


def _moved(system, tables, jobs):
    """The LP's jobs served, moved (`serve_lp_jobs` with a local search): where it starts."""
    bound = relaxation_bound(Instance.of(system, tables, jobs), time_limit_s=10.0)
    options = {"scales": (1.0, 0.85), "time_limit_s": 10.0, "tries": 300}
    return bound, serve_lp_jobs(system, tables, jobs, bound, **options)


def test_the_search_finds_a_schedule_the_rules_and_the_moved_lp_jobs_miss():
    """A contended burst (8 jobs, memory binding) whose optimum, 6, the exact search proves: every
    rule meets at most 4, the LP's jobs served and moved 5. Re-solving the window of the late job
    and those it competes with meets 6 — replayed in the engine, whose count it is."""
    system, tables, jobs = memory_bound_case(54, 8)
    assert max(_met(system, tables, jobs, make_policy(r)) for r in catalog.of_kind("rule")) == 4
    exact = solve_exact(system, tables, jobs, time_limit_s=10.0, max_jobs=8)
    assert exact.exact and exact.lower == 6
    bound, moved = _moved(system, tables, jobs)
    assert moved.met == 5 and bound.met >= 6
    searched = search_windows(system, tables, jobs, moved.schedule, shares=bound.shares, **OPTIONS)
    assert (searched.met, searched.kept) == (6, 1) and searched.windows >= 1
    whole = Instance.of(system, tables, jobs)
    replay = recorded(system, tables, jobs, whole, PlanReplay(searched.schedule.plan))
    assert replay.met == 6 and np.array_equal(replay.plan.on_time, searched.schedule.plan.on_time)


@pytest.mark.parametrize("seed", [19, 24, 56, 3])
def test_it_meets_the_proven_optimum_never_more_never_less_than_where_it_starts(seed):
    system, tables, jobs = memory_bound_case(seed, 8)
    exact = solve_exact(system, tables, jobs, time_limit_s=10.0, max_jobs=8)
    bound, moved = _moved(system, tables, jobs)
    searched = search_windows(system, tables, jobs, moved.schedule, **OPTIONS)
    assert exact.exact and moved.met <= searched.met == exact.upper


def test_a_window_is_a_late_job_and_those_it_competes_with():
    """One instance: a long job from 0 (1.5 s, due 2) that EDF starts first, two short ones at
    0.1 (0.5 s, due 1.2) late behind it, and one at 3 that meets and competes with nobody. A
    late short job's window of 2 holds the long job (it held the instance the whole time); of 3,
    the other short one too; the job at 3 comes last, nearest by arrival."""
    system, tables = _one_instance({"long": 1.5, "short": 0.5})
    jobs = _trace(
        [("long", 0.0, 2.0), ("short", 0.1, 1.2), ("short", 0.1, 1.2), ("short", 3.0, 4.0)]
    )
    whole = Instance.of(system, tables, jobs)
    run = recorded(system, tables, jobs, whole, make_policy("edf_feasible"))
    assert run.plan.on_time.tolist() == [True, False, False, True]
    assert [w.tolist() for w in windows(whole, run, 2)] == [[0, 1], [0, 2]]
    assert [w.tolist() for w in windows(whole, run, 3)] == [[0, 1, 2]]
    assert [w.tolist() for w in windows(whole, run, 4)] == [[0, 1, 2, 3]]
    shares = np.array([0.0, 0.2, 0.9, 1.0])  # the LP's surer late job first
    assert [w.tolist() for w in windows(whole, run, 2, shares)] == [[0, 2], [0, 1]]


def test_where_no_window_can_meet_more_every_window_is_closed_and_the_schedule_kept():
    """One instance, two jobs of 0.6 s both due at 1: one meets, the other cannot with it. The
    window of both cannot meet two, with the bandwidth or without (CP-SAT proves it): closed,
    converged, the schedule the one it started from."""
    system, tables = _one_instance({"one": 0.6})
    jobs = _trace([("one", 0.0, 1.0), ("one", 0.0, 1.0)])
    whole = Instance.of(system, tables, jobs)
    run = recorded(system, tables, jobs, whole, make_policy("edf_feasible"))
    searched = search_windows(system, tables, jobs, run, **OPTIONS)
    assert (searched.met, searched.windows, searched.kept, searched.closed) == (1, 1, 0, 1)
    assert searched.converged and searched.passes == 1 and searched.schedule is run
    # a job that cannot meet alone is no window's: nothing to re-solve
    lost = _trace([("one", 0.0, 1.0), ("one", 0.0, 0.5)])
    whole = Instance.of(system, tables, lost)
    run = recorded(system, tables, lost, whole, make_policy("edf_feasible"))
    assert run.plan.on_time.tolist() == [True, False]
    searched = search_windows(system, tables, lost, run, **OPTIONS)
    assert (searched.met, searched.windows, searched.converged) == (1, 0, True)


def test_bad_options_are_refused():
    system, tables = _one_instance({"one": 0.6})
    jobs = _trace([("one", 0.0, 1.0)])
    run = recorded(system, tables, jobs, Instance.of(system, tables, jobs), make_policy("edf"))
    for bad in ({"window_jobs": 0}, {"time_limit_s": 0.0}, {"budget_s": -1.0}):
        with pytest.raises(ValueError, match="window_jobs >= 1"):
            search_windows(system, tables, jobs, run, **(OPTIONS | bad))
