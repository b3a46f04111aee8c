"""The admission forms of the rule baselines (issue 50, item 2; `relmas.policies.triage.admitted`):
Moore-Hodgson's sacrifice gives up the long job that would make two short ones miss, the
acceptance test keeps the job that came first; without overload (vision_light too) each is its
base rule, schedule for schedule; the jitted loop and the stepping path agree; on one instance
with every job's work known upfront the sacrifice keeps as many jobs as can meet their deadlines
(brute force)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from relmas import catalog
from relmas.config import load_config
from relmas.policies import make_policy, triage
from relmas.sim import CostTables, Engine, access
from relmas.workload import generate_trace, parse_scenario, scenario_system
from tests.synthetic import both_ways, contended_case, one_type, synthetic_costs, tenant_jobs

ADMISSION_FORMS = [parts.name for parts in catalog.rules() if parts.admit != "all"]
EDF_FORMS = ["edf_feasible", "edf_feasible_patient_gated_ordered"]


def one_instance() -> tuple:
    """Model A: two layers of 1 s, B: one layer of 1 s, C: one layer of 0.5 s; one instance."""
    return one_type({"A": [1.0, 1.0], "B": [1.0], "C": [0.5]})


def met(name: str, rows: list[tuple[str, str, float, float]]) -> list[bool]:
    system, tables = one_instance()
    jobs = tenant_jobs(rows, [False] * len(rows))
    return Engine(system, tables, jobs).run(make_policy(name)).jobs.sort("job_id")["met"].to_list()


def base_rule(name: str) -> str:
    return replace(catalog.rule(name), admit="all").name


# At 0 s: job 0 (A, 2 s, due 2.0), jobs 1 and 2 (C, 0.5 s, due 2.2 and 2.4), all feasible alone.
# EDF runs job 0 first: it meets at 2 s, and both short jobs are hopeless by then. The estimate
# in EDF order: job 0 ends at 2, job 1 at 2.5 > 2.2: give up the longest so far, job 0; job 2
# then ends at 1.0. The sacrifice runs the short ones first: two deadlines met instead of one.
SACRIFICE_CASE = [("t", "A", 0.0, 2.0), ("t", "C", 0.0, 2.2), ("t", "C", 0.0, 2.4)]


@pytest.mark.parametrize("base", EDF_FORMS)
def test_the_sacrifice_gives_up_the_long_job_that_would_make_two_short_ones_miss(base):
    assert met(base, SACRIFICE_CASE) == [True, False, False]
    assert met(f"{base}_sacrifice", SACRIFICE_CASE) == [False, True, True]


# Job 0 (A, 2 s, due 2.2) starts at 0 s alone; job 1 (B, 1 s, due 2.0) arrives at 0.5 s. At 1 s
# EDF starts job 1 (earlier deadline), which meets, and job 0 ends at 3, late. The acceptance
# test admitted job 0 first; with job 1 (in EDF order first) job 0 would end at 3 > 2.2, so job 1
# is given up and job 0 meets. The sacrifice, on equal work, gives up the later deadline: job 0.
ACCEPT_CASE = [("t", "A", 0.0, 2.2), ("t", "B", 0.5, 2.0)]


@pytest.mark.parametrize("base", EDF_FORMS)
def test_the_acceptance_test_keeps_the_earlier_job_and_gives_up_the_later_one(base):
    assert met(base, ACCEPT_CASE) == [False, True]
    assert met(f"{base}_accept", ACCEPT_CASE) == [True, False]
    assert met(f"{base}_sacrifice", ACCEPT_CASE) == [False, True]


def test_without_overload_each_admission_form_is_its_base_rule():
    """Generous slack: every job fits in the estimate, nothing is given up."""
    system, tables, jobs = contended_case(11, 60, {"a": 3, "b": 6}, 6.0, (20.0, 40.0))
    for name in ADMISSION_FORMS:
        expected = Engine(system, tables, jobs).run(make_policy(base_rule(name)))
        result = Engine(system, tables, jobs).run(make_policy(name))
        assert result.jobs.equals(expected.jobs), name
        assert result.metrics["decisions"] == expected.metrics["decisions"], name


def test_jitted_loop_and_stepping_give_the_same_schedule():
    """Every admission form on a loaded contended trace: the same schedule both ways; the
    admission changes the schedule of some."""
    system, tables, jobs = contended_case(11, 60, {"a": 3, "b": 6}, 6.0, (1.0, 3.0))
    differs = 0
    for name in ADMISSION_FORMS:
        fast = both_ways(system, tables, jobs, name)
        base = Engine(system, tables, jobs).run(make_policy(base_rule(name)))
        differs += not fast.jobs.equals(base.jobs)
    assert differs >= 2


def most_on_time(work: np.ndarray, due: np.ndarray) -> int:
    """The most jobs that can all meet their deadlines on one instance from 0 (brute force: a set
    can if and only if it does in EDF order)."""
    for size in range(len(work), 0, -1):
        for subset in itertools.combinations(np.argsort(due, kind="stable"), size):
            if np.all(np.cumsum(work[list(subset)]) <= due[list(subset)]):
                return size
    return 0


def kept_at_first_decision(work: np.ndarray, due: np.ndarray, accept: bool) -> np.ndarray:
    """The jobs `triage.admitted` keeps at the first decision of one instance, every job (one
    layer of `work`, due at `due`) arrived at 0 s and nothing running."""
    n = len(work)
    system, tables = one_type({f"m{j}": [float(work[j])] for j in range(n)})
    jobs = tenant_jobs([("t", f"m{j}", 0.0, float(due[j])) for j in range(n)], [False] * n)
    engine = Engine(system, tables, jobs)
    assert engine.next_decision() is not None
    view, allowed, _ = make_policy("edf_feasible_sacrifice").placed(engine.tables)
    state = engine.state
    assert access.ready_count(state) == n
    ready = np.array([access.ready_job(state, i) for i in range(n)])
    mask = np.zeros(n, dtype=np.bool_)
    triage.admitted(view, state, accept, allowed, mask)
    return np.sort(ready[mask])


def test_the_sacrifice_on_one_instance_keeps_as_many_jobs_as_can_meet_their_deadlines():
    """Moore-Hodgson on 200 tiny random cases, short and long jobs mixed (giving up the job that
    misses instead of the longest loses on some): the kept set is as large as a brute-force
    maximum; the accepted set meets every deadline in EDF order and is no larger."""
    rng = np.random.default_rng(50)
    for _ in range(200):
        n = int(rng.integers(4, 8))
        work = np.where(rng.random(n) < 0.4, rng.uniform(1.0, 3.0, n), rng.uniform(0.1, 0.5, n))
        due = rng.uniform(0.5, 0.6 * work.sum() + 0.5, n)
        sacrificed = kept_at_first_decision(work, due, accept=False)
        assert len(sacrificed) == most_on_time(work, due), (work, due)
        accepted = kept_at_first_decision(work, due, accept=True)
        on_time = accepted[np.argsort(due[accepted], kind="stable")]
        assert np.all(np.cumsum(work[on_time]) <= due[on_time]), (work, due)
        assert len(accepted) <= len(sacrificed)


def test_on_vision_light_each_admission_form_is_its_base_rule():
    """The default study's vision_light (its models, tenants, light Poisson load and bandwidth),
    150 jobs on synthetic cost tables of its models: nothing is overloaded, so each admission
    form schedules as its base rule, job for job (at 10x the load they differ)."""
    config = load_config(Path(__file__).parents[1] / "config" / "config.yaml")
    raw = config["scenarios"]["vision_light"] | {"jobs": 150}
    system = scenario_system(config, "vision_light")
    types = system.accelerator_types
    costs = synthetic_costs(dict.fromkeys(raw["models"], 12), types, seed=5)
    tables = CostTables.from_frame(costs, types, bandwidth_bps=system.bandwidth_bytes_per_s)
    scenario = parse_scenario("vision_light", raw, list(raw["models"]))
    jobs = generate_trace("vision_light", scenario, system, tables, 1000)
    for name in ADMISSION_FORMS:
        expected = Engine(system, tables, jobs).run(make_policy(base_rule(name)))
        result = Engine(system, tables, jobs).run(make_policy(name))
        assert result.jobs.equals(expected.jobs), name
        assert result.metrics["decisions"] == expected.metrics["decisions"], name
