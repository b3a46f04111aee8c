"""Firm deadlines and the tenants' service counters of the engine (relmas.sim.engine_kernels): a
firm job past its deadline is dropped and frees its instance, it never starts again, its running
layer may finish but no other follows; every policy runs under it; the counters say what
happened."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from relmas import catalog
from relmas.policies import make_policy
from relmas.sim import CostTables, Engine, access, load_system
from relmas.sim.engine_kernels import TIME_TOL
from relmas.workload import parse_scenario
from tests.synthetic import (
    contended_case,
    cost_frame,
    one_type,
    synthetic_costs,
    synthetic_pieces,
    tenant_jobs,
)

AGENTS = Path(__file__).with_name("golden") / "agents" / "mixed"


def jobs_frame(rows: list[tuple[str, str, float, float]], firm: bool | list[bool]) -> pl.DataFrame:
    """Jobs (tenant, model, arrival, deadline) with ids in the given order, priority 1."""
    return tenant_jobs(rows, firm if isinstance(firm, list) else [firm] * len(rows))


def one_instance(count: int = 1) -> tuple:
    """Model A: two layers of 1 s, model B: one layer of 1 s, on `count` instances of type x."""
    return one_type({"A": [1.0, 1.0], "B": [1.0]}, count)


def by_job(result, column: str) -> list:
    return result.jobs.sort("job_id")[column].to_list()


@pytest.mark.parametrize("policy", ["fcfs", "edf"])
def test_a_hopeless_firm_job_is_dropped_and_frees_the_instance_for_the_next(policy):
    """The issue's two-job case: job 0 cannot make its deadline (0.9 s for 2 s of work); its
    first layer runs past the deadline and ends at 1 s, when job 1 (arrived at 0.5 s, due at
    2.2 s) waits. Firm: job 0 is dropped there, job 1 runs 1-2 s and meets its deadline. Soft:
    the policy runs job 0's second layer first (earlier arrival, earlier deadline) and job 1
    ends at 3 s, late."""
    system, tables = one_instance()
    rows = [("u", "A", 0.0, 0.9), ("v", "B", 0.5, 2.2)]
    firm = Engine(system, tables, jobs_frame(rows, True), record=True)
    result = firm.run(make_policy(policy))
    assert by_job(result, "dropped") == [True, False]
    assert by_job(result, "met") == [False, True]
    assert np.isnan(by_job(result, "finish_s")[0]) and by_job(result, "finish_s")[1] == 2.0
    assert by_job(result, "start_s") == [0.0, 1.0]
    # the running layer finished past the deadline; no layer of job 0 followed it
    assert result.timeline.filter(pl.col("job_id") == 0)["layer"].unique().to_list() == [0]
    assert result.metrics["dropped"] == 1.0 and result.metrics["sla_rate"] == 0.5
    # ANTT and turnaround over the finished job only; the makespan to the run's end
    assert result.metrics["antt"] == 1.5 and result.metrics["turnaround_mean_s"] == 1.5
    assert result.metrics["makespan_s"] == 2.0 and result.metrics["utilization"] == 1.0
    assert result.sla_by_tenant == {"u": 0.0, "v": 1.0}
    soft = Engine(system, tables, jobs_frame(rows, False)).run(make_policy(policy))
    assert by_job(soft, "met") == [False, False] and by_job(soft, "finish_s") == [2.0, 3.0]
    assert not soft.jobs["dropped"].any()


def test_a_firm_job_whose_last_layer_ends_past_its_deadline_is_dropped_not_late():
    """Its only layer runs to its end (a task is not preempted), and then the job is dropped: a
    firm job meets its deadline or is dropped. The instance was busy until then: the makespan
    and utilisation count that time."""
    system, tables = one_instance()
    result = Engine(system, tables, jobs_frame([("u", "B", 0.0, 0.5)], True), record=True).run(
        make_policy("fcfs")
    )
    assert by_job(result, "dropped") == [True] and np.isnan(by_job(result, "finish_s")[0])
    assert result.timeline["end_s"].max() == 1.0
    assert result.metrics["makespan_s"] == 1.0 and result.metrics["utilization"] == 1.0
    assert result.metrics["antt"] is None and result.metrics["stp"] == 0.0  # none finished


def test_a_waiting_firm_job_is_dropped_at_the_first_event_past_its_deadline():
    """Job 1 (firm, due at 1.5 s) is ready at 1 s, when the one instance goes on with job 0's
    second layer; the next event is that layer's end at 2 s: job 1 is dropped there without
    having started, and is never offered again. A soft job in its place stays ready."""
    system, tables = one_instance()
    for firm in (True, False):
        engine = Engine(
            system, tables, jobs_frame([("u", "A", 0.0, 9.0), ("v", "B", 0.5, 1.5)], firm)
        )
        view = engine.next_decision()
        engine.step([(0, 0)])
        view = engine.next_decision()
        assert view.now == 1.0 and sorted(view.ready_jobs.tolist()) == [0, 1]
        engine.step([(0, 0)])  # job 0's second layer; job 1 waits
        view = engine.next_decision()
        assert (view is None) == firm
        assert access.job_dropped(engine.state, 1) == firm
        assert access.dropped_count(engine.state) == int(firm)
        if not firm:
            assert view.now == 2.0 and view.ready_jobs.tolist() == [1]
            engine.step([(1, 0)])
            assert engine.next_decision() is None
        jobs, met = engine.pop_finished()
        assert sorted(jobs.tolist()) == [0, 1] and met[jobs == 1].tolist() == [False]
        result = engine.result("stepped")
        assert by_job(result, "dropped") == [False, firm]
        assert np.isnan(by_job(result, "start_s")[1]) == firm


def test_a_job_with_pieces_running_past_its_deadline_starts_no_more_and_is_dropped_after():
    """A layer cut in two: its first piece runs when the deadline passes; at the next event (an
    arrival) the job leaves the ready list with its second piece unstarted, although an
    instance is idle, and is dropped when the first piece ends."""
    costs = cost_frame({"A": {"x": [(2.0, 0, 0.0)]}, "B": {"x": [(0.1, 0, 0.0)]}})
    system = load_system({"instances": [{"name": "x", "count": 2}]})
    tables = CostTables.from_frame(costs, ["x"])
    tables = tables.with_pieces(synthetic_pieces(costs, splits=(2,)))
    jobs = jobs_frame([("u", "A", 0.0, 0.5), ("u", "B", 0.6, 9.0)], True)
    engine = Engine(system, tables, jobs, record=True)
    split = next(
        v for v in range(1, len(engine.split_variants)) if engine.kernel_pieces.count[0, v] == 2
    )
    engine.next_decision()
    engine.step([(0, 0, split)])  # first piece (1-1.5 s of work) on instance 0
    assert engine.next_decision().ready_jobs.tolist() == [0]  # its second piece may start
    engine.step([])  # wait: the next event is job 1's arrival at 0.6 s
    view = engine.next_decision()
    assert view.now == 0.6 and view.ready_jobs.tolist() == [1]
    assert view.idle_accelerators.tolist() == [1]
    assert not access.job_dropped(engine.state, 0) and access.job_pieces_left(engine.state, 0) == 1
    engine.step([(1, 1)])
    assert engine.next_decision() is None
    result = engine.result("stepped")
    assert by_job(result, "dropped") == [True, False]
    pieces = result.timeline.filter(pl.col("job_id") == 0)["piece"].unique().to_list()
    assert pieces == [0]


def test_the_tenant_counters_by_hand():
    """Tenants sorted by name (a: 0, b: 1). One instance, B jobs of 1 s in arrival order (fcfs):
    job 0 (b) 0-1 s met; job 1 (a, soft, due 1.5) 1-2 s late; job 2 (b, firm, due 1.8) is dropped
    at 2 s; job 3 (a, due 9) 2-3 s met."""
    system, tables = one_instance()
    rows = [("b", "B", 0.0, 5.0), ("a", "B", 0.1, 1.5), ("b", "B", 0.2, 1.8), ("a", "B", 0.3, 9.0)]
    engine = Engine(system, tables, jobs_frame(rows, [False, False, True, False]))
    assert engine.tenants == ("a", "b")
    policy = make_policy("fcfs")
    policy.reset(engine)
    seen = []
    while (view := engine.next_decision()) is not None:
        S = engine.state
        counters = [
            [access.tenant_arrived(S, k), access.tenant_met(S, k), access.tenant_missed(S, k)]
            for k in range(access.tenant_count(S))
        ]
        assert (
            counters
            == np.stack([view.tenant_arrived, view.tenant_met, view.tenant_missed], 1).tolist()
        )
        seen.append((view.now, counters, view.tenant_achieved.tolist()))
        engine.step(policy.decide(view))
    assert seen == [
        (0.0, [[0, 0, 0], [1, 0, 0]], [1.0, 1.0]),  # 0/0 decided: achieved 1
        (1.0, [[2, 0, 0], [2, 1, 0]], [1.0, 1.0]),
        (2.0, [[2, 0, 1], [2, 1, 1]], [0.0, 0.5]),  # job 1 late, job 2 dropped
    ]
    assert engine.state.tc.tolist() == [[2, 1, 1], [2, 1, 1]]
    tenants = engine.jobs["tenant"].to_list()
    assert [access.job_tenant(engine.state, j) for j in range(4)] == [1, 0, 1, 0]
    assert [engine.tenants[access.job_tenant(engine.state, j)] for j in range(4)] == tenants


def test_targets_reach_the_state_and_the_view():
    system, tables = one_instance(count=1)
    jobs = jobs_frame([("u", "B", 0.0, 5.0), ("v", "B", 0.0, 5.0)], False)
    jobs = jobs.with_columns(target=pl.Series([0.9, None], dtype=pl.Float64()))
    engine = Engine(system, tables, jobs)
    view = engine.next_decision()
    order = np.argsort(view.ready_jobs)
    assert view.target[order][0] == 0.9 and np.isnan(view.target[order][1])
    assert view.tenant_index[order].tolist() == [0, 1]
    assert access.job_target(engine.state, 0) == 0.9 and not access.job_firm(engine.state, 0)
    # a trace without the columns: no target, soft deadlines
    bare = Engine(system, tables, jobs.drop("target", "firm"))
    assert np.isnan(access.job_target(bare.state, 0)) and not access.job_firm(bare.state, 0)


def firm_case(learned: bool) -> tuple:
    """A small overloaded firm trace of two tenants (on the golden agents' accelerator types for
    the learned policies, which deploy those agents), with piece tables for the resizing ones."""
    system, tables, jobs = contended_case(21, 16, {"a": 3, "b": 5}, 8.0, (2.0, 5.0), splits=(2,))
    if learned:
        types = ["eyeriss_168", "simba_chiplet"]
        system = load_system({"instances": [{"name": n, "count": 1} for n in types]})
        costs = synthetic_costs({"a": 3, "b": 5}, types, seed=21)
        pieces = synthetic_pieces(costs, (2,)).filter(pl.col("dim") == "K")  # the agent's cuts
        tables = CostTables.from_frame(costs, types).with_pieces(pieces)
    tenants = ["gold" if i % 3 == 0 else "bronze" for i in range(jobs.height)]
    return system, tables, jobs.with_columns(firm=pl.lit(True), tenant=pl.Series(tenants))


def planned_firm_case(system) -> tuple[CostTables, dict]:
    """The planner's tables and options on firm_case: futures of the trace's models, planned for
    a deadline rule; its LPs need the tables indexed at the system's bandwidth, as the study's
    are."""
    costs = synthetic_costs({"a": 3, "b": 5}, ["e", "s"], seed=21)
    tables = CostTables.from_frame(costs, ["e", "s"], bandwidth_bps=system.bandwidth_bytes_per_s)
    raw = {
        "models": {"a": 1, "b": 1},
        "tenants": [{"name": "gold", "priority": 1, "slack": 3.0, "share": 1.0}],
        "arrival": {"process": "poisson", "load": 1.5},
        "jobs": 30,
    }
    arrivals = parse_scenario("firm", raw, ["a", "b"])
    options = {"rule": "edf_feasible", "scenario": "firm", "arrivals": arrivals}
    return tables, options | {"samples": 1, "horizon_jobs": 5}


@pytest.mark.parametrize("name", catalog.names())
def test_every_policy_runs_to_completion_under_firm_deadlines(name):
    """Every job is finished or dropped, no task starts past its job's firm deadline, a dropped
    job is missed with no finish time, and the counters add up to the per-job results."""
    learned = name in catalog.learned()
    system, tables, jobs = firm_case(learned)
    options = {"agent": str(AGENTS / name)} if learned else {}
    if name == "ga_offline":
        options = {"population": 6, "generations": 3, "time_limit_s": None}
    if name in catalog.planners():
        tables, options = planned_firm_case(system)
    engine = Engine(system, tables, jobs, record=True)
    result = engine.run(make_policy(name, seed=3, **options))
    out = result.jobs.sort("job_id")
    assert engine.finished and out["dropped"].any()
    finished = ~out["dropped"]
    assert (out["finish_s"].is_nan() == out["dropped"]).all()
    assert (out["met"] != out["dropped"]).all()  # a firm job meets its deadline or is dropped
    assert (out.filter(finished)["finish_s"] >= out.filter(finished)["arrival_s"]).all()
    tasks = result.timeline.group_by("accelerator", "job_id", "layer", "piece").agg(
        pl.col("start_s").min()
    )
    starts = tasks.join(out.select("job_id", "deadline_s"), on="job_id")
    tolerance = TIME_TOL * starts["deadline_s"].abs().clip(1.0)
    assert (starts["start_s"] <= starts["deadline_s"] + tolerance).all(), name
    per_tenant = out.group_by("tenant").agg(
        pl.len().alias("arrived"), pl.col("met").sum().alias("met")
    )
    for row in per_tenant.iter_rows(named=True):
        k = engine.tenants.index(row["tenant"])
        counters = engine.state.tc[k].tolist()
        assert counters == [row["arrived"], row["met"], row["arrived"] - row["met"]], name
    assert np.isfinite([result.metrics[m] for m in ("antt", "stp", "makespan_s", "energy_j")]).all()
