"""The simulator: closed-form schedules, the fluid bandwidth model, invariants of random runs."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numba import njit

from relmas import catalog
from relmas.policies import Policy, available_policies, make_policy
from relmas.schemas import JOB_SCHEMA
from relmas.sim import CostTables, Engine, System, access, load_system
from relmas.sim.engine_kernels import JI_CURSOR, JI_PIECES_LEFT, JI_SPLIT, borrowed
from tests.synthetic import cost_frame, synthetic_costs, synthetic_pieces


def trace(rows: list[tuple[str, float, float, int]], tenant: str = "t") -> pl.DataFrame:
    """Jobs (model, arrival, deadline, priority) with ids in the given order."""
    return pl.DataFrame(
        {
            "job_id": list(range(len(rows))),
            "tenant": [tenant] * len(rows),
            "model": [r[0] for r in rows],
            "arrival_s": [float(r[1]) for r in rows],
            "deadline_s": [float(r[2]) for r in rows],
            "priority": [r[3] for r in rows],
        },
        schema_overrides=JOB_SCHEMA,
    )


def one_system(name: str = "x", count: int = 1, dram_gbps: float | None = None, **kw) -> System:
    return load_system(
        {"instances": [{"name": name, "count": count}], "dram_gbps": dram_gbps, **kw}
    )


def finish_times(result) -> dict[int, float]:
    return dict(
        zip(result.jobs["job_id"].to_list(), result.jobs["finish_s"].to_list(), strict=True)
    )


# ----------------------------------------------------------------------------- closed form


def recorded_tasks(timeline: pl.DataFrame, out: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """One row per task (`keys`) of a recorded timeline: its span, bytes moved and busy time,
    with its job's model, arrival and finish (from the per-job results `out`)."""
    return (
        timeline.group_by(keys)
        .agg(
            pl.col("start_s").min(),
            pl.col("end_s").max(),
            (pl.col("bandwidth_bps") * (pl.col("end_s") - pl.col("start_s"))).sum().alias("bytes"),
            (pl.col("end_s") - pl.col("start_s")).sum().alias("busy"),
        )
        .join(out.select("job_id", "model", "arrival_s", "finish_s"), on="job_id")
    )


@pytest.mark.parametrize(
    ("dram_gbps", "isolated"),
    [
        (None, 1.0),
        # 10 B/s: each 4-byte layer needs >= 0.4 s alone, so fast runs 0.4 + 0.4 + 0.5
        (1e-8, 1.3),
    ],
)
def test_one_job_alone_finishes_at_its_isolated_latency(dram_gbps, isolated):
    # Type "fast" is faster on every layer, so the per-layer choice equals the whole-model choice.
    costs = cost_frame(
        {
            "m": {
                "fast": [(0.3, 4, 1.0), (0.2, 4, 1.0), (0.5, 4, 1.0)],
                "slow": [(0.9, 4, 1.0), (0.4, 4, 1.0), (0.6, 4, 1.0)],
            }
        }
    )
    system = load_system(
        {
            "instances": [{"name": "slow", "count": 2}, {"name": "fast", "count": 1}],
            "dram_gbps": dram_gbps,
        }
    )
    tables = CostTables.from_frame(
        costs, system.accelerator_types, bandwidth_bps=system.bandwidth_bytes_per_s
    )
    assert tables.isolated_latency("m") == pytest.approx(isolated)
    # random picks any idle instance; the learned policies need an agent (tests/test_rl_env.py),
    # the planner a scenario to draw futures of (tests/test_planner.py)
    unplaced = {*catalog.floors(), *catalog.learned(), *catalog.planners()}
    for policy in set(available_policies()) - unplaced:
        jobs = trace([("m", 2.5, 2.5 + isolated, 3)])
        result = Engine(system, tables, jobs).run(make_policy(policy))
        row = result.jobs.row(0, named=True)
        assert row["finish_s"] == pytest.approx(2.5 + isolated, rel=1e-12), policy
        assert row["met"], policy
        assert result.metrics["antt"] == pytest.approx(1.0)
        assert result.metrics["fairness"] == 1.0


@pytest.mark.parametrize(
    ("sharing", "finish_a", "finish_b"),
    [
        # proportional: demands 10 and 20 B/s exceed 15 B/s, both run at 15/30 = 1/2;
        # a (1 s of work) ends at 2 s; b has 1 s of its 2 s left, alone at 15/20 -> 4/3 s more.
        ("proportional", 2.0, 2.0 + 4.0 / 3.0),
        # max-min fair: equal shares of 7.5 B/s: a at 0.75 ends at 4/3 s, b at 0.375 has done
        # 0.5 s of work; then b alone at 0.75 needs 1.5 / 0.75 = 2 s more.
        ("maxmin", 4.0 / 3.0, 4.0 / 3.0 + 2.0),
    ],
)
def test_two_bandwidth_bound_layers_follow_the_fluid_model(sharing, finish_a, finish_b):
    costs = cost_frame({"a": {"x": [(1.0, 10, 0.0)]}, "b": {"x": [(2.0, 40, 0.0)]}})
    system = one_system(count=2, dram_gbps=15e-9, sharing=sharing)
    tables = CostTables.from_frame(costs, ["x"])
    jobs = trace([("a", 0.0, 9.0, 1), ("b", 0.0, 9.0, 1)])
    result = Engine(system, tables, jobs, record=True).run(make_policy("fcfs"))
    assert finish_times(result) == pytest.approx({0: finish_a, 1: finish_b}, rel=1e-12)
    # Both move exactly their bytes; the 50 bytes at 15 B/s keep the bus saturated until the end.
    moved = result.timeline.group_by("job_id").agg(
        (pl.col("bandwidth_bps") * (pl.col("end_s") - pl.col("start_s"))).sum().alias("bytes")
    )
    assert dict(moved.iter_rows()) == pytest.approx({0: 10.0, 1: 40.0}, rel=1e-12)
    assert result.metrics["bytes_moved"] == pytest.approx(50.0)
    assert result.metrics["makespan_s"] == pytest.approx(50.0 / 15.0)


# One accelerator, unlimited bandwidth. Models: A = two layers of 2 s, B = one layer of 1 s,
# C = one layer of 3 s (isolated latencies 4, 1, 3). Jobs (model, arrival, deadline, priority):
HAND_TRACE = [("A", 0.0, 10.0, 1), ("C", 1.0, 5.0, 3), ("B", 1.5, 9.0, 1), ("B", 4.9, 20.0, 9)]
HAND_FINISH = {
    # t=0 j0.L0 [0,2]; t=2 oldest j0.L1 [2,4]; j1 [4,7]; j2 [7,8]; j3 [8,9].
    "fcfs": {0: 4.0, 1: 7.0, 2: 8.0, 3: 9.0},
    # t=2 remaining j0 2, j1 3, j2 1 -> j2 [2,3]; j0.L1 [3,5];
    # t=5 j3 (1) before j1 (3): [5,6], [6,9].
    "sjf": {0: 5.0, 1: 9.0, 2: 3.0, 3: 6.0},
    # t=2 deadlines 10, 5, 9 -> j1 [2,5]; t=5 j2 (9) [5,6]; j0 (10) before j3 (20): [6,8], [8,9].
    "edf": {0: 8.0, 1: 5.0, 2: 6.0, 3: 9.0},
    # t=2 laxities 10-2-2=6, 5-2-3=0, 9-2-1=6 -> j1 [2,5]; t=5 laxities j0 3, j2 3, j3 14: tie to
    # the earlier arrival j0 [5,7]; t=7 j2 (1) [7,8]; j3 [8,9].
    "llf": {0: 7.0, 1: 5.0, 2: 8.0, 3: 9.0},
    # t=2 tokens j0 1, j1 3(1+1/3)=4, j2 1(1+0.5/1)=1.5 -> threshold 3 -> j1 [2,5];
    # t=5 tokens j0 1(1+3/4), j2 1(1+3.5)=4.5, j3 9(1+0.1)=9.9 -> threshold 9 -> j3 [5,6];
    # t=6 tokens j0 1(1+4/4)=2, j2 5.5 -> threshold 3 -> j2 [6,7]; j0.L1 [7,9].
    "prema": {0: 9.0, 1: 5.0, 2: 7.0, 3: 6.0},
}


@pytest.mark.parametrize("policy", sorted(HAND_FINISH))
def test_single_accelerator_reproduces_hand_computed_schedules(policy):
    costs = cost_frame(
        {
            "A": {"x": [(2.0, 0, 0.0), (2.0, 0, 0.0)]},
            "B": {"x": [(1.0, 0, 0.0)]},
            "C": {"x": [(3.0, 0, 0.0)]},
        }
    )
    tables = CostTables.from_frame(costs, ["x"])
    result = Engine(one_system(), tables, trace(HAND_TRACE)).run(make_policy(policy))
    assert finish_times(result) == pytest.approx(HAND_FINISH[policy], rel=1e-12)


def test_metrics_follow_their_definitions():
    costs = cost_frame({"A": {"x": [(2.0, 0, 0.5), (2.0, 0, 0.5)]}, "B": {"x": [(1.0, 0, 0.25)]}})
    tables = CostTables.from_frame(costs, ["x"])
    jobs = trace([("A", 0.0, 4.0, 1), ("B", 0.0, 2.0, 1)])
    engine = Engine(one_system(), tables, jobs, static_w={"x": 2.0})
    result = engine.run(make_policy("fcfs"))
    # fcfs: A [0,4] then B [4,5]: NP = 4/4 and 1/5.
    assert result.metrics["sla_rate"] == 0.5
    assert result.metrics["antt"] == pytest.approx((1.0 + 5.0) / 2)
    assert result.metrics["stp"] == pytest.approx(1.0 + 0.2)
    assert result.metrics["fairness"] == pytest.approx(0.2)
    assert result.metrics["makespan_s"] == pytest.approx(5.0)
    assert result.metrics["utilization"] == pytest.approx(1.0)
    assert result.metrics["energy_dynamic_j"] == pytest.approx(1.25)
    assert result.metrics["energy_static_j"] == pytest.approx(10.0)
    assert result.metrics["energy_j"] == pytest.approx(11.25)
    assert result.sla_by_tenant == {"t": 0.5}
    assert result.metrics["decisions"] == 3 and result.metrics["assignments"] == 3


# ----------------------------------------------------------------------------- stepping API


def test_stepping_api_reports_state_and_events():
    costs = cost_frame({"A": {"x": [(2.0, 4, 0.0), (2.0, 0, 0.0)]}, "B": {"x": [(1.0, 8, 0.0)]}})
    tables = CostTables.from_frame(costs, ["x"])
    engine = Engine(
        one_system(count=2, dram_gbps=2e-9), tables, trace([("A", 0, 9, 1), ("B", 0, 1, 3)])
    )
    view = engine.next_decision()
    assert view.now == 0.0 and view.queue_length == 2
    assert view.can_wait is False  # nothing runs and no job is still to arrive
    assert sorted(view.job_ids.tolist()) == [0, 1]
    order = np.argsort(view.job_ids)
    assert view.remaining_work_s[order].tolist() == [4.0, 1.0]
    assert view.next_demand_bps[order, 0].tolist() == [2.0, 8.0]
    with pytest.raises(ValueError, match="not idle"):
        engine.assign(0, 5)
    engine.step([(0, 0), (1, 1)])
    with pytest.raises(ValueError, match="not ready"):
        engine.assign(0, 1)
    # Demands 2 + 8 B/s on 2 B/s: both at rate 0.2 (proportional). B ends at 5 s, when A's first
    # layer has 1 s of work left, which it then does alone at full speed: next decision at 6 s.
    view = engine.next_decision()
    assert view.now == pytest.approx(6.0) and view.job_ids.tolist() == [0]
    assert view.busy_left_s.tolist() == [0.0, 0.0] and view.bandwidth_in_use_bps == 0.0
    jobs, met = engine.pop_finished()
    assert jobs.tolist() == [1] and met.tolist() == [False]
    assert engine.pop_finished()[0].size == 0


def test_accessors_read_what_the_view_shows_and_list_the_newly_ready_jobs():
    """Policies read the engine only through relmas.sim.access: the accessors must agree with the
    DecisionView, and the jobs ready at a decision point are those left ready at the previous one
    plus the newly ready ones (what the heuristics' own heaps are kept up to date from)."""
    costs = synthetic_costs({"a": 4, "b": 7}, ["x", "y"], seed=3, mean_latency_s=1e-2)
    tables = CostTables.from_frame(costs, ["x", "y"])
    system = load_system(
        {"instances": [{"name": "x", "count": 2}, {"name": "y", "count": 1}], "dram_gbps": 1.0}
    )
    rng = np.random.default_rng(0)
    arrival = np.cumsum(rng.exponential(0.01, 30))
    models = rng.choice(["a", "b"], 30)
    rows = [(m, a, a + 0.1, 1) for m, a in zip(models, arrival, strict=True)]
    engine = Engine(system, tables, trace(rows))
    policy = make_policy("random", seed=1)
    policy.reset(engine)
    left_ready: set[int] = set()
    while (view := engine.next_decision()) is not None:
        S = engine.state
        ready = {access.ready_job(S, i) for i in range(access.ready_count(S))}
        newly = {access.newly_ready_job(S, i) for i in range(access.newly_ready_count(S))}
        assert ready == set(view.ready_jobs.tolist()) == left_ready | newly
        assert access.now(S) == view.now and access.can_wait(S) == view.can_wait
        busy = view.busy_left_s  # refreshes the rates first
        assert [access.busy_left(S, a) for a in range(3)] == busy.tolist()
        assert [access.is_idle(S, a) for a in range(3)] == (busy == 0.0).tolist()
        assert [access.job_deadline(S, j) for j in view.ready_jobs] == view.deadline_s.tolist()
        assert [access.job_next_row(S, j) for j in view.ready_jobs] == view.next_rows.tolist()
        pairs = policy.decide(view)
        engine.step(pairs)
        left_ready = ready - {job for job, _ in pairs}
    assert access.finished_count(engine.state) == 30
    finish = engine.result("random").jobs.sort("job_id")["finish_s"].to_numpy()
    assert access.job_finish_times(engine.state).tolist() == finish.tolist()


def test_waiting_with_nothing_to_wait_for_is_an_error():
    costs = cost_frame({"B": {"x": [(1.0, 0, 0.0)]}})
    engine = Engine(one_system(), CostTables.from_frame(costs, ["x"]), trace([("B", 0, 1, 1)]))
    assert engine.next_decision().can_wait is False
    with pytest.raises(RuntimeError, match="cannot wait"):
        engine.step([])


# ----------------------------------------------------------------------------- invariants


def scenarios():
    """(system, cost tables, jobs, policy, seed) of random small simulations."""
    return scenarios_with_costs().map(
        lambda case: (case[0], CostTables.from_frame(case[1], case[2]), *case[3:])
    )


@st.composite
def scenarios_with_costs(draw):
    types = ["t0", "t1", "t2"][: draw(st.integers(1, 3))]
    layers = {f"m{i}": draw(st.integers(1, 5)) for i in range(draw(st.integers(1, 3)))}
    costs = synthetic_costs(layers, types, seed=draw(st.integers(0, 10_000)), mean_latency_s=1e-2)
    instances = [{"name": t, "count": draw(st.integers(1, 2))} for t in types]
    gbps = draw(st.sampled_from([None, 0.5, 2.0, 8.0]))
    sharing = draw(st.sampled_from(["proportional", "maxmin"]))
    system = load_system({"instances": instances, "dram_gbps": gbps, "sharing": sharing})
    count = draw(st.integers(1, 14))
    rows = [
        (
            draw(st.sampled_from(sorted(layers))),
            draw(st.floats(0.0, 0.1)),
            draw(st.floats(0.0, 0.3)),
            draw(st.sampled_from([1, 3, 9])),
        )
        for _ in range(count)
    ]
    jobs = trace([(m, a, a + d, p) for m, a, d, p in rows])
    # the planner needs a scenario to draw futures of (tests/test_planner.py)
    drawn = set(available_policies()) - {*catalog.learned(), *catalog.planners()}
    policy = draw(st.sampled_from(sorted(drawn)))
    return system, costs, types, jobs, policy, draw(st.integers(0, 99))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_simulation_invariants(case):
    system, tables, jobs, policy, seed = case
    static_w = {name: 0.5 + i for i, name in enumerate(tables.types)}
    engine = Engine(system, tables, jobs, static_w=static_w, record=True, record_buffer=8)
    result = engine.run(make_policy(policy, seed=seed))
    out = result.jobs.sort("job_id")

    # Every job finishes exactly once, after it arrived.
    assert sorted(engine.state.done_log.tolist()) == list(range(jobs.height))
    assert (out["finish_s"] > out["arrival_s"]).all() and (out["start_s"] >= out["arrival_s"]).all()

    timeline = result.timeline
    tasks = recorded_tasks(timeline, out, ["accelerator", "job_id", "layer"])
    # Each layer runs exactly once, as one uninterrupted task.
    assert tasks.select("job_id", "layer").is_unique().all()
    assert np.allclose(tasks["busy"], tasks["end_s"] - tasks["start_s"], rtol=1e-9, atol=1e-15)
    instance_type = np.array([tables.types.index(n) for n in system.instance_types])
    dynamic = 0.0
    for job in tasks.partition_by("job_id"):
        job = job.sort("start_s")
        model = job["model"][0]
        m = tables.model_index(model)
        # Layers in order, each after the previous one, all of them, the last at the job's finish.
        assert job["layer"].to_list() == list(range(int(tables.n_layers[m])))
        starts, ends = job["start_s"].to_numpy(), job["end_s"].to_numpy()
        assert starts[0] >= job["arrival_s"][0]
        assert np.all(starts[1:] >= ends[:-1] - 1e-12)
        assert ends[-1] == pytest.approx(job["finish_s"][0], rel=1e-12)
        rows = tables.first_row[m] + job["layer"].to_numpy()
        kinds = instance_type[job["accelerator"].to_numpy()]
        # Each layer moves exactly its bytes, never faster than its unlimited-bandwidth latency.
        expected = tables.dram_bytes[rows, kinds]
        assert np.allclose(job["bytes"], expected, rtol=1e-6, atol=1e-6)
        latency = tables.latency_s[rows, kinds]
        assert np.all(ends - starts >= latency * (1 - 1e-9))
        if system.dram_gbps is None:
            assert np.allclose(ends - starts, latency, rtol=1e-9)
        dynamic += tables.energy_j[rows, kinds].sum()

    # No instance runs two tasks at once.
    for acc in tasks.partition_by("accelerator"):
        acc = acc.sort("start_s")
        assert np.all(acc["start_s"].to_numpy()[1:] >= acc["end_s"].to_numpy()[:-1] - 1e-12)

    # The bandwidth in use never exceeds the capacity.
    in_use = timeline.group_by("start_s", "end_s").agg(pl.col("bandwidth_bps").sum())
    assert in_use["bandwidth_bps"].max() <= system.bandwidth_bytes_per_s * (1 + 1e-9)

    # Energy adds up: dynamic energy of the executed layers + static power x makespan.
    makespan = result.metrics["makespan_s"]
    static = sum(static_w[name] for name in system.instance_types) * makespan
    assert result.metrics["energy_dynamic_j"] == pytest.approx(dynamic, rel=1e-9)
    assert result.metrics["energy_static_j"] == pytest.approx(static, rel=1e-9)
    assert result.metrics["energy_j"] == pytest.approx(dynamic + static, rel=1e-9)
    busy = result.accelerators["busy_s"].to_numpy()
    assert np.all(busy <= makespan * (1 + 1e-9))

    # Same seed, same result.
    again = Engine(system, tables, jobs, static_w=static_w).run(make_policy(policy, seed=seed))
    assert again.jobs.equals(result.jobs)
    assert math.isclose(again.metrics["energy_j"], result.metrics["energy_j"], rel_tol=0, abs_tol=0)


# ----------------------------------------------------------------------------- operator resizing


class RandomSplitter(Policy):
    """Starts random ready jobs on random idle instances, cutting each new layer by a random
    variant: drives the engine through states no heuristic reaches (for the invariants below)."""

    name = "random_splitter"

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def decide(self, view):
        S, count = view.engine.state, view.engine.kernel_pieces.count
        left = {int(job): int(S.ji[job, JI_PIECES_LEFT]) for job in view.ready_jobs}
        split = {job: int(S.ji[job, JI_SPLIT]) for job in left}
        started = []
        for acc in view.idle_accelerators:
            if not left or (view.can_wait and self.rng.random() < 0.1):
                break
            job = sorted(left)[self.rng.integers(len(left))]
            if left[job] == 0:  # a new layer: cut it by any variant
                split[job] = int(self.rng.integers(count.shape[1]))
                left[job] = count[S.ji[job, JI_CURSOR], split[job]]
            started.append((job, int(acc), split[job]))
            left[job] -= 1
            if left[job] == 0:
                del left[job]
        return started


GRID_S = 2.0**-20  # times on this grid stay exact when moved by whole seconds below 2^32 s


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.integers(1, 2_000_000_000))
def test_a_trace_moved_along_the_clock_is_scheduled_the_same(case, offset):
    """The same trace at UNIX-epoch times (issue 32: +1.7e9 s made SLA 1.000 of 0.925): the same
    schedule, met flags and metrics, exactly, and per-job times moved by the offset (to the
    rounding of the moved times, 2^-21 s at most). Exactly, because the times are on a grid of
    2^-20 s that a move by whole seconds keeps exact; a finer time would be rounded by the move
    itself, and the schedules could then differ where two events tie."""
    system, tables, jobs, policy, seed = case
    jobs = jobs.with_columns((pl.col("arrival_s", "deadline_s") / GRID_S).round() * GRID_S)
    moved = jobs.with_columns(pl.col("arrival_s", "deadline_s") + float(offset))
    base, far = (
        Engine(system, tables, trace, record=True).run(make_policy(policy, seed=seed))
        for trace in (jobs, moved)
    )
    tasks = ["accelerator", "job_id", "layer", "split", "piece"]
    assert far.timeline.select(tasks).equals(base.timeline.select(tasks))
    assert far.jobs["met"].equals(base.jobs["met"])
    assert far.jobs["turnaround_s"].equals(base.jobs["turnaround_s"])
    timed = [name for name in base.metrics if name != "decision_us"]  # wall time
    np.testing.assert_equal(
        {name: far.metrics[name] for name in timed}, {name: base.metrics[name] for name in timed}
    )
    assert far.sla_by_tenant == base.sla_by_tenant
    for column in ("arrival_s", "deadline_s", "start_s", "finish_s"):
        back = far.jobs[column].to_numpy() - offset
        assert np.allclose(back, base.jobs[column].to_numpy(), rtol=0.0, atol=2.0**-21), column


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios_with_costs(), st.booleans())
def test_simulation_invariants_with_splitting(case, use_gacer):
    system, costs, types, jobs, _, seed = case
    tables = CostTables.from_frame(costs, types)
    tables = tables.with_pieces(synthetic_pieces(costs, splits=(2, 3), seed=seed))
    pieces = tables.pieces
    policy = make_policy("gacer", window=3) if use_gacer else RandomSplitter(seed)
    static_w = {name: 0.5 + i for i, name in enumerate(tables.types)}
    engine = Engine(system, tables, jobs, static_w=static_w, record=True, record_buffer=8)
    result = engine.run(policy)
    out = result.jobs.sort("job_id")

    assert sorted(engine.state.done_log.tolist()) == list(range(jobs.height))
    assert (out["finish_s"] > out["arrival_s"]).all() and (out["start_s"] >= out["arrival_s"]).all()
    tasks = recorded_tasks(
        result.timeline, out, ["accelerator", "job_id", "layer", "split", "piece"]
    )
    # Each piece runs once, uninterrupted; a layer runs whole or as all pieces of one variant.
    assert tasks.select("job_id", "layer", "split", "piece").is_unique().all()
    assert np.allclose(tasks["busy"], tasks["end_s"] - tasks["start_s"], rtol=1e-9, atol=1e-15)
    instance_type = np.array([tables.types.index(n) for n in system.instance_types])
    dynamic = 0.0
    for job in tasks.partition_by("job_id"):
        m = tables.model_index(job["model"][0])
        layers = job.group_by("layer").agg(
            pl.col("split").unique(), pl.col("piece").sort(), pl.col("start_s").min(),
            pl.col("end_s").max(),
        ).sort("layer")  # fmt: skip
        assert layers["layer"].to_list() == list(range(int(tables.n_layers[m])))
        rows = tables.first_row[m] + layers["layer"].to_numpy()
        for row, split, piece in zip(rows, layers["split"], layers["piece"], strict=True):
            assert len(split) == 1 and piece.to_list() == list(range(pieces.count[row, split[0]]))
        starts, ends = layers["start_s"].to_numpy(), layers["end_s"].to_numpy()
        assert starts[0] >= job["arrival_s"][0]
        assert np.all(starts[1:] >= ends[:-1] - 1e-12)
        assert ends[-1] == pytest.approx(job["finish_s"][0], rel=1e-12)
        # Each piece moves exactly its bytes, never faster than its unlimited-bandwidth latency.
        row = tables.first_row[m] + job["layer"].to_numpy()
        column = pieces.offset[job["split"].to_numpy()] + job["piece"].to_numpy()
        kind = instance_type[job["accelerator"].to_numpy()]
        assert np.allclose(job["bytes"], pieces.dram_bytes[row, column, kind], rtol=1e-6, atol=1e-6)
        duration = (job["end_s"] - job["start_s"]).to_numpy()
        assert np.all(duration >= pieces.latency_s[row, column, kind] * (1 - 1e-9))
        dynamic += pieces.energy_j[row, column, kind].sum()
    for acc in tasks.partition_by("accelerator"):
        acc = acc.sort("start_s")
        assert np.all(acc["start_s"].to_numpy()[1:] >= acc["end_s"].to_numpy()[:-1] - 1e-12)
    in_use = result.timeline.group_by("start_s", "end_s").agg(pl.col("bandwidth_bps").sum())
    assert in_use["bandwidth_bps"].max() <= system.bandwidth_bytes_per_s * (1 + 1e-9)
    assert result.metrics["assignments"] == tasks.height
    assert result.metrics["energy_dynamic_j"] == pytest.approx(dynamic, rel=1e-9)


@njit  # not cached: it embeds engine_kernels' intrinsic
def _write_through_borrowed(pair: tuple[np.ndarray, tuple[np.ndarray, float]]) -> float:
    """Write to both arrays of `pair` through their borrowed views; their sum as seen there."""
    outer, (inner, scale) = borrowed(pair)
    outer[0] = 2.0
    inner[1] = 3.0 * scale
    return outer.sum() + inner.sum()


def test_borrowed_arrays_are_the_callers_own_through_nested_tuples():
    # engine_kernels.borrowed strips the reference counts, nothing else: a copy would lose the
    # writes, a wrong member the values (the loops' schedules are pinned by the goldens)
    outer, inner = np.zeros(2), np.ones(3)
    seen = _write_through_borrowed((outer, (inner, 2.0)))
    assert outer.tolist() == [2.0, 0.0]
    assert inner.tolist() == [1.0, 6.0, 1.0]
    assert seen == 2.0 + 8.0
