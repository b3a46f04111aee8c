"""The baseline policies: their exact rules on hand-computed cases, the registry, and the identity
of the jitted run loop with the Python stepping path."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from relmas.errors import InputError
from relmas.policies import Policy, available_policies, make_policy, register
from relmas.policies.rollout import improve_by_rollout
from relmas.sim import CostTables, Engine, load_system
from relmas.sim.engine import DecisionView
from tests.synthetic import cost_frame, job_trace, one_type, stepped_result, synthetic_costs
from tests.test_placement import schedule, three_types

HEURISTICS = ("fcfs", "sjf", "edf", "llf", "prema", "sdrm3", "herald", "planaria", "random")


def finish_times(result) -> dict[int, float]:
    return dict(
        zip(result.jobs["job_id"].to_list(), result.jobs["finish_s"].to_list(), strict=True)
    )


def finishes(policy: str, system, tables: CostTables, jobs: pl.DataFrame) -> dict[int, float]:
    """Each job's finish time when `policy` schedules `jobs`."""
    return finish_times(Engine(system, tables, jobs).run(make_policy(policy)))


def single_accelerator():
    return one_type({"A": [2.0, 2.0], "B": [1.0], "C": [3.0]})


def contended_case(jobs: int = 300, sharing: str = "proportional"):
    types = ["e", "s"]
    costs = synthetic_costs({"a": 12, "b": 30, "c": 5}, types, seed=7)
    system = load_system(
        {
            "instances": [{"name": "e", "count": 2}, {"name": "s", "count": 2}],
            "dram_gbps": 6.0,
            "sharing": sharing,
        }
    )
    tables = CostTables.from_frame(costs, types)
    rng = np.random.default_rng(3)
    models = rng.choice(["a", "b", "c"], jobs)
    isolated = np.array([tables.isolated_latency(m) for m in models])
    arrival = np.cumsum(rng.exponential(isolated.mean() / 3.0, jobs))
    rows = [
        (m, a, a + s * i, p)
        for m, a, s, i, p in zip(
            models,
            arrival,
            rng.uniform(1.5, 8, jobs),
            isolated,
            rng.choice([1, 3, 9], jobs),
            strict=True,
        )
    ]
    return system, tables, job_trace(rows)


def test_registry_has_the_heuristics_and_rejects_unknown_names():
    assert set(HEURISTICS) <= set(available_policies())
    for name in HEURISTICS:
        assert make_policy(name).name == name
    with pytest.raises(InputError, match=r"policy: expected one of the available policies.*'nope'"):
        make_policy("nope")
    with pytest.raises(ValueError, match="not a policy of relmas.catalog"):
        register("my_policy")


@pytest.mark.parametrize("sharing", ["proportional", "maxmin"])
@pytest.mark.parametrize("policy", HEURISTICS)
def test_jitted_loop_and_python_stepping_give_the_same_schedule(policy, sharing):
    system, tables, jobs = contended_case(sharing=sharing)
    fast = Engine(system, tables, jobs).run(make_policy(policy, seed=5))
    slow = stepped_result(system, tables, jobs, make_policy(policy, seed=5), policy)
    assert slow.jobs.equals(fast.jobs)
    for key in ("decisions", "assignments", "energy_j", "bytes_moved"):
        assert slow.metrics[key] == fast.metrics[key], key
    assert fast.metrics["sla_rate"] < 1.0  # the case is contended enough to discriminate


def test_random_is_seeded():
    system, tables, jobs = contended_case(jobs=100)
    runs = [Engine(system, tables, jobs).run(make_policy("random", seed=s)).jobs for s in (1, 1, 2)]
    assert runs[0].equals(runs[1])
    assert not runs[0].equals(runs[2])


def test_herald_balances_within_twice_the_best_latency_and_waits_beyond():
    # One fast and one slow instance. M runs 1.5x slower on the slow one, N 3x slower.
    costs = cost_frame(
        {
            "M": {"f": [(1.0, 0, 0.0)], "s": [(1.5, 0, 0.0)]},
            "N": {"f": [(1.0, 0, 0.0)], "s": [(3.0, 0, 0.0)]},
        }
    )
    system = load_system({"instances": [{"name": "f", "count": 1}, {"name": "s", "count": 1}]})
    tables = CostTables.from_frame(costs, ["f", "s"])
    jobs = job_trace([("M", 0, 9, 1), ("N", 0, 9, 1), ("M", 0, 9, 1)])
    # herald: j0 -> f (p* = q = f); j1: p* = f is taken, q = s but 3 >= 2 x 1 -> waits for f;
    # j2: q = s and 1.5 < 2 -> s [0,1.5]; then j1 -> f [1,2].
    assert finishes("herald", system, tables, jobs) == pytest.approx({0: 1.0, 1: 2.0, 2: 1.5})
    # fcfs is work-conserving: j1 takes the slow instance [0,3], j2 waits for f [1,2].
    assert finishes("fcfs", system, tables, jobs) == pytest.approx({0: 1.0, 1: 3.0, 2: 2.0})


def test_sdrm3_serves_long_waiting_jobs_before_urgent_new_ones():
    system, tables = single_accelerator()
    # j0 runs [0,3]. At 3: j1 score = 1/97 + 2.5/1 (waited / next layer) = 2.51,
    # j2 score = min(1, 4/4) + 0.1/2 = 1.05 -> j1 [3,4]; then j2 [4,6] [6,8].
    jobs = job_trace([("C", 0.0, 100.0, 1), ("B", 0.5, 100.0, 1), ("A", 2.9, 7.0, 1)])
    assert finishes("sdrm3", system, tables, jobs) == pytest.approx({0: 3.0, 1: 4.0, 2: 8.0})
    assert finishes("edf", system, tables, jobs) == pytest.approx({0: 3.0, 1: 8.0, 2: 7.0})


def test_sdrm3_ranks_a_job_past_its_deadline_low_and_lowest_at_it():
    system, tables = single_accelerator()
    # j0 runs [0,3]. At 3: j1 is past its deadline, urgency 1 / (2.9 - 3) = -10, score -10 + 0.5
    # = -9.5; j2 scores 1/97 + 0.1 = 0.11 -> j2 [3,4]; then j1 [4,5]. (Urgency 1 once late would
    # serve j1 first: 1.5.)
    jobs = job_trace([("C", 0.0, 100.0, 1), ("B", 2.5, 2.9, 1), ("B", 2.9, 100.0, 1)])
    assert finishes("sdrm3", system, tables, jobs) == pytest.approx({0: 3.0, 1: 5.0, 2: 4.0})
    # At 3, j1 is exactly at its deadline: urgency -inf, after j2, late by 0.05 (1 / -0.05 + 0.1
    # = -19.9); a finite urgency at the deadline (0: score 0.5) would serve j1 first.
    jobs = job_trace([("C", 0.0, 100.0, 1), ("B", 2.5, 3.0, 1), ("B", 2.9, 2.95, 1)])
    assert finishes("sdrm3", system, tables, jobs) == pytest.approx({0: 3.0, 1: 5.0, 2: 4.0})


def test_planaria_ranks_every_job_that_can_meet_its_deadline_before_every_late_one():
    system, tables = single_accelerator()
    # j0 runs [0,3]. At 3, j1 (priority 9) can no longer meet its deadline (3 + 1 > 3.5), j2
    # (priority 1) can: j2 [3,5] [5,7], then j1 [7,8]. (Slack floored for late jobs served j1
    # first.)
    jobs = job_trace([("C", 0.0, 100.0, 1), ("B", 0.5, 3.5, 9), ("A", 1.0, 20.0, 1)])
    assert finishes("planaria", system, tables, jobs) == pytest.approx({0: 3.0, 1: 8.0, 2: 7.0})
    # Among feasible jobs, priority / time to deadline: at 3 j1 1 / 7 = 0.14 < j2 9 / 17 = 0.53;
    # among late ones priority / remaining work: at 3 j1 1 / 1 < j2 9 / 4 (both late).
    for deadlines, expected in (((10.0, 20.0), {1: 8.0, 2: 7.0}), ((3.5, 6.0), {1: 8.0, 2: 7.0})):
        rows = [("C", 0.0, 100.0, 1), ("B", 0.5, deadlines[0], 1), ("A", 1.0, deadlines[1], 9)]
        assert finishes("planaria", system, tables, job_trace(rows)) == pytest.approx(
            {0: 3.0, **expected}
        )


def test_default_accelerator_choice_is_the_fastest_free_instance():
    costs = cost_frame({"M": {"f": [(1.0, 0, 0.0)], "s": [(4.0, 0, 0.0)]}})
    system = load_system({"instances": [{"name": "s", "count": 1}, {"name": "f", "count": 1}]})
    tables = CostTables.from_frame(costs, ["f", "s"])
    engine = Engine(system, tables, job_trace([("M", 0, 9, 1), ("M", 0, 9, 1)]))
    policy = make_policy("edf")
    policy.reset(engine)
    view = engine.next_decision()
    assert policy.decide(view) == [(0, 1), (1, 0)]  # job 0 to the fast instance (index 1)


class OldestFirstPython(Policy):
    """A policy written in plain Python, with an energy cost per decision."""

    name = "fcfs"
    decision_energy_j = 0.25

    def decide(self, view: DecisionView) -> list[tuple[int, int]]:
        jobs = np.sort(view.ready_jobs)  # internal indices follow arrival order
        return list(zip(jobs.tolist(), view.idle_accelerators.tolist(), strict=False))


def test_python_policies_step_through_the_engine_and_pay_their_energy():
    system, tables = single_accelerator()
    jobs = job_trace(
        [("A", 0.0, 10.0, 1), ("C", 1.0, 5.0, 3), ("B", 1.5, 9.0, 1), ("B", 4.9, 20.0, 9)]
    )
    python = Engine(system, tables, jobs).run(OldestFirstPython())
    jitted = Engine(system, tables, jobs).run(make_policy("fcfs"))
    assert python.jobs.equals(jitted.jobs)
    assert python.metrics["energy_overhead_j"] == pytest.approx(0.25 * python.metrics["decisions"])
    assert python.metrics["energy_j"] == pytest.approx(
        jitted.metrics["energy_j"] + python.metrics["energy_overhead_j"]
    )
    assert python.metrics["decision_us"] > 0.0


def sdrm3_score(view: DecisionView) -> np.ndarray:
    to_deadline = view.deadline_s - view.now
    with np.errstate(divide="ignore"):
        late = np.where(to_deadline == 0, -np.inf, view.remaining_work_s / to_deadline)
        urgency = np.where(to_deadline > 0, np.minimum(1.0, late), late)
    return -(urgency + view.waited_s / view.next_latency_s.min(axis=1))


def planaria_score(view: DecisionView) -> np.ndarray:
    deadline, remaining = view.deadline_s, view.remaining_work_s
    feasible = view.now + remaining <= deadline + 1e-9 * np.maximum(1.0, np.abs(deadline))
    # feasible first by priority / time to deadline, then late by priority / remaining work
    return np.where(
        feasible,
        -view.priority / np.where(feasible, deadline - view.now, 1.0),
        remaining / view.priority,
    )


@pytest.mark.parametrize(
    ("policy", "key", "checked"),
    [
        ("fcfs", lambda v: v.arrival_s, None),
        ("sjf", lambda v: v.remaining_work_s, None),
        ("edf", lambda v: v.deadline_s, None),
        ("llf", lambda v: v.deadline_s - v.remaining_work_s, None),
        ("sdrm3", sdrm3_score, 1),
        ("planaria", planaria_score, 1),
    ],
)
def test_rules_pick_the_best_ready_jobs_at_every_decision(policy, key, checked):
    """An independent numpy evaluation of each rule at every decision point of a contended run."""
    system, tables, jobs = contended_case()
    engine = Engine(system, tables, jobs)
    chosen = make_policy(policy)
    chosen.reset(engine)
    while (view := engine.next_decision()) is not None:
        pairs = chosen.decide(view)
        order = np.lexsort((view.ready_jobs, key(view)))
        count = len(pairs) if checked is None else min(checked, len(pairs))
        assert [job for job, _ in pairs[:count]] == view.ready_jobs[order[:count]].tolist()
        engine.step(pairs)


def test_rollout_leaves_sjf_where_the_shorter_job_would_make_the_longer_one_late():
    # One instance. L (2 s, deadline 2.1) and S (1 s, deadline 5) both ready at 0: SJF among
    # feasible jobs starts S and L ends at 3, late; the rollout of starting L meets both.
    costs = cost_frame({"L": {"x": [(2.0, 0, 0.0)]}, "S": {"x": [(1.0, 0, 0.0)]}})
    system = load_system({"instances": [{"name": "x", "count": 1}]})
    tables = CostTables.from_frame(costs, ["x"])
    jobs = job_trace([("L", 0, 2.1, 1), ("S", 0, 5.0, 1)])
    assert finishes("sjf_feasible", system, tables, jobs) == pytest.approx({0: 3.0, 1: 1.0})
    engine = Engine(system, tables, jobs)
    assert improve_by_rollout(engine, "sjf_feasible", horizon_s=10.0) == (1, 2)
    assert finish_times(engine.result("rollout")) == pytest.approx({0: 2.0, 1: 3.0})
    with pytest.raises(ValueError, match="rule baseline"):
        improve_by_rollout(Engine(system, tables, jobs), "sjf", horizon_s=10.0)


@pytest.mark.parametrize("per_type", [False, True])
def test_rollouts_of_the_gated_rule_meet_more_deadlines_than_it(per_type):
    system, tables, jobs = contended_case(jobs=80)
    rule = Engine(system, tables, jobs).run(make_policy("sjf_feasible_patient_gated"))
    engine = Engine(system, tables, jobs)
    horizon = 3 * float(tables.isolated_s.mean())
    left, decisions = improve_by_rollout(
        engine, "sjf_feasible_patient_gated", horizon, per_type=per_type
    )
    assert decisions == engine.decisions and 0 < left < decisions
    # on this case the rollouts meet 2 (4 with every type) more of the 80 deadlines
    assert engine.result("rollout").metrics["sla_rate"] > rule.metrics["sla_rate"]


def test_rollouts_of_a_rule_on_a_set_of_types_are_its_rollouts_on_those_types_alone():
    """Rolling out a rule restricted to some types, without trying other types, is rolling out
    the rule on the system of those types alone, decision for decision (the rule's view of the
    costs in its rollouts, its ranking and its score: its placement's)."""
    kept = ["e", "t"]
    whole, tables, jobs = three_types()
    alone, alone_tables, _ = three_types(kept)
    instances = [k for k, name in enumerate(whole.instance_types) if name in kept]
    horizon = 3 * float(tables.isolated_s.mean())
    rule = "sjf_feasible_patient_gated"
    placed = Engine(whole, tables, jobs, record=True)
    placed_stats = improve_by_rollout(placed, rule, horizon, placement="+".join(kept))
    own = Engine(alone, alone_tables, jobs, record=True)
    own_stats = improve_by_rollout(own, rule, horizon)
    # the same decisions left the rule (the whole system has more decision points: its other
    # instances idle, where the rule has none)
    assert placed_stats[0] == own_stats[0] > 0
    assert schedule(placed, list(range(len(whole.instance_types)))).equals(schedule(own, instances))


@pytest.mark.parametrize("per_type", [False, True])
def test_rollouts_of_a_rule_on_one_type_try_the_other_types_with_per_type(per_type):
    """EDF restricted to the `s` instances of the contended case: its rollouts start layers on
    the `e` instances only when every type is tried, and then meet more deadlines than it."""
    system, tables, jobs = contended_case(jobs=80)
    rule = Engine(system, tables, jobs).run(make_policy("edf_feasible", placement="s"))
    engine = Engine(system, tables, jobs, record=True)
    horizon = 3 * float(tables.isolated_s.mean())
    improve_by_rollout(engine, "edf_feasible", horizon, placement="s", per_type=per_type)
    types = np.array(system.instance_types)[engine.timeline()["accelerator"].to_numpy()]
    assert np.any(types == "e") == per_type
    met, rule_met = engine.result("rollout").jobs["met"].sum(), rule.jobs["met"].sum()
    # on this case the rollouts meet 1 (3 with every type) more of the 80 deadlines
    assert met > rule_met if per_type else met >= rule_met
