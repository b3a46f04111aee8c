"""The exact search (relmas.ceiling.exact): a case solved by hand, bounds that hold against every
policy on generated traces, replays that meet what was claimed, and refusals of bad input."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relmas import catalog
from relmas.ceiling.bound import relaxation_bound
from relmas.ceiling.exact import default_seed_policies, relaxation_upper, solve_exact
from relmas.ceiling.instance import Instance
from relmas.ceiling.plan import Plan
from relmas.ceiling.plan_replay import PlanReplay, replay
from relmas.errors import InputError
from relmas.policies import make_policy
from relmas.schemas import JOB_SCHEMA
from relmas.sim import CostTables, Engine, access, load_system
from tests.synthetic import cost_frame, memory_bound_case, synthetic_costs, synthetic_pieces

ONLINE = catalog.of_kind("heuristic", "rule", "search")


def _trace(rows: list[tuple[str, float, float]]) -> pl.DataFrame:
    """Jobs (model, arrival_s, deadline_s) with ids 0, 1, ... of one tenant."""
    n = len(rows)
    return pl.DataFrame(
        {
            "job_id": list(range(n)),
            "tenant": ["t"] * n,
            "model": [r[0] for r in rows],
            "arrival_s": [r[1] for r in rows],
            "deadline_s": [r[2] for r in rows],
            "priority": [1] * n,
        },
        schema_overrides=JOB_SCHEMA,
    )


def _met(system, tables, jobs, policy) -> int:
    return int(Engine(system, tables, jobs).run(policy).jobs["met"].sum())


def test_a_case_solved_by_hand_where_edf_and_sjf_meet_fewer():
    # Two identical instances, four one-layer jobs, all at t = 0 (latency, deadline in seconds):
    #   lost (5, 3): cannot meet its deadline even alone;  urgent (4, 4.5);
    #   short0 (1, 4.8) and short1 (1, 4.8).
    # Optimum 3: urgent on one instance [0, 4]; short0 [0, 1] then short1 [1, 2] on the other;
    # lost after them (late). Four is impossible (lost alone ends at 5 > 3).
    # EDF starts lost and urgent (deadlines 3, 4.5) at 0; the shorts start at 4 and 5: 1 met.
    # SJF starts the shorts (both end at 1), then urgent at 1 ends at 5 > 4.5: 2 met.
    models = {"lost": 5.0, "urgent": 4.0, "short": 1.0}
    tables = CostTables.from_frame(
        cost_frame({m: {"x": [(latency, 0, 0.0)]} for m, latency in models.items()}), ["x"]
    )
    system = load_system({"instances": [{"name": "x", "count": 2}]})
    jobs = _trace([("lost", 0.0, 3.0), ("urgent", 0.0, 4.5), ("short", 0, 4.8), ("short", 0, 4.8)])
    result = solve_exact(system, tables, jobs, time_limit_s=10.0, max_jobs=30)
    assert (result.lower, result.upper, result.exact, result.status) == (3, 3, True, "optimal")
    assert result.plan.on_time.tolist() == [False, True, True, True]
    assert _met(system, tables, jobs, make_policy("edf")) == 1
    assert _met(system, tables, jobs, make_policy("sjf")) == 2
    assert replay(system, tables, jobs, result.plan) == 3


def test_a_bandwidth_bound_case_is_proven_by_the_byte_windows():
    # Two jobs at t = 0 on two instances, one layer each: 0.1 s of work moving 1 GB over a 1 GB/s
    # memory, so 1 s alone, due at 1.5 s. Side by side they share the bandwidth and both end at
    # 2 s; one after the other the second ends at 2 s: the optimum is 1. Without the bandwidth
    # two would fit (two instances); 2 GB cannot cross 1 GB/s in 1.5 s, which bounds it at 1.
    # EDF fills both idle instances at once: none met.
    frame = cost_frame({"big": {"x": [(0.1, 10**9, 0.0)]}})
    system = load_system({"instances": [{"name": "x", "count": 2}], "dram_gbps": 1.0})
    tables = CostTables.from_frame(frame, ["x"], bandwidth_bps=system.bandwidth_bytes_per_s)
    jobs = _trace([("big", 0.0, 1.5), ("big", 0.0, 1.5)])
    result = solve_exact(system, tables, jobs, time_limit_s=10.0, max_jobs=30, seed_policies=())
    assert (result.lower, result.upper, result.status) == (1, 1, "optimal")
    assert _met(system, tables, jobs, make_policy("edf")) == 0


def test_bytes_counted_on_the_placed_type_prove_what_the_thriftiest_type_cannot():
    # Two one-layer jobs at t = 0 due at 1.2 s, 1 GB/s. On `s` the layer computes 0.7 s and moves
    # 0.5 GB, on `e` 0.1 s and 1 GB (1 s alone); one instance of each. Both on s: 1.4 s; one on
    # each or both on e: 1.5 or 2 GB cannot cross in 1.2 s. The optimum is 1. Counted on the
    # thriftiest type (s, 0.5 GB each), the byte window holds both, and so does the job shop:
    # the relaxation bounds it at 2; counted where placed, at 1.
    frame = cost_frame({"m": {"s": [(0.7, 5 * 10**8, 0.0)], "e": [(0.1, 10**9, 0.0)]}})
    system = load_system(
        {"instances": [{"name": "s", "count": 1}, {"name": "e", "count": 1}], "dram_gbps": 1.0}
    )
    tables = CostTables.from_frame(frame, ["s", "e"], bandwidth_bps=system.bandwidth_bytes_per_s)
    jobs = _trace([("m", 0.0, 1.2), ("m", 0.0, 1.2)])
    options = {"time_limit_s": 10.0, "max_jobs": 30, "seed_policies": ()}
    least = solve_exact(system, tables, jobs, byte_rows="least", **options)
    placed = solve_exact(system, tables, jobs, **options)
    assert (least.lower, least.upper) == (1, 2)
    assert (placed.lower, placed.upper, placed.status) == (1, 1, "optimal")
    for rows, upper in (("least", 2), ("placed", 1), ("none", 2)):
        tick = placed.tick_s
        assert (
            relaxation_upper(system, tables, jobs, tick_s=tick, time_limit_s=10.0, byte_rows=rows)[
                0
            ]
            == upper
        )


def test_a_finish_exactly_at_its_deadline_is_proven_by_the_relaxations_schedule():
    # Layer 0 takes 1 s on x, 0.5 s on y; layer 1 2 s on x, 3 s on y. Two jobs due 2.5 s after
    # arriving: only y then x (0.5 + 2) fits, exactly, and only for one of them (x is then busy
    # until 2.5). A third due at 5: layer 0 on y [0.5, 1], layer 1 on x [2.5, 4.5]. Optimum 2.
    # The restriction's rounding loses the exact fit; the relaxation's schedule, replayed in the
    # engine, meets it (within the engine's tolerance of "met").
    frame = cost_frame(
        {"m": {"x": [(1.0, 0, 0.0), (2.0, 0, 0.0)], "y": [(0.5, 0, 0.0), (3.0, 0, 0.0)]}}
    )
    system = load_system({"instances": [{"name": "x", "count": 1}, {"name": "y", "count": 1}]})
    tables = CostTables.from_frame(frame, ["x", "y"])
    jobs = _trace([("m", 100.0, 102.5), ("m", 100.0, 102.5), ("m", 100.0, 105.0)])
    result = solve_exact(system, tables, jobs, time_limit_s=10.0, max_jobs=30, seed_policies=())
    assert (result.lower, result.upper, result.exact) == (2, 2, True)
    assert result.plan.source == "relaxation"
    assert result.plan.on_time.tolist() in ([True, False, True], [False, True, True])


def _case(draw_seed: int, jobs: int, layers: int, types: int, dram_gbps, pieces: bool, slack):
    """A small trace of synthetic models (`layers` and one fewer) on 2 + 1 instances of `types`
    types (1: the two), with piece tables cut two ways or none; deadlines `slack` x isolated."""
    names = ["e", "s"][:types]
    models = {"a": layers, "b": max(1, layers - 1)}
    costs = synthetic_costs(models, names, seed=draw_seed)
    counts = [2, 1][:types]
    system = load_system(
        {
            "instances": [{"name": n, "count": c} for n, c in zip(names, counts, strict=True)],
            "dram_gbps": dram_gbps,
        }
    )
    tables = CostTables.from_frame(costs, names, bandwidth_bps=system.bandwidth_bytes_per_s)
    if pieces:
        tables = tables.with_pieces(synthetic_pieces(costs, splits=(2,), seed=draw_seed))
    rng = np.random.default_rng(draw_seed)
    chosen = rng.choice(list(models), jobs)
    isolated = np.array([tables.isolated_latency(m) for m in chosen])
    arrival = np.cumsum(rng.exponential(isolated.mean() / 3.0, jobs))
    deadline = arrival + rng.uniform(*slack, jobs) * isolated
    rows = list(zip(chosen.tolist(), arrival.tolist(), deadline.tolist(), strict=True))
    return system, tables, _trace(rows)


@settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 10_000),
    jobs=st.integers(2, 6),
    layers=st.integers(1, 3),
    types=st.integers(1, 2),
    dram_gbps=st.sampled_from([None, 3.0, 8.0]),
    pieces=st.booleans(),
    slack=st.sampled_from([(0.9, 1.6), (1.0, 3.0)]),
)
def test_the_bounds_and_the_ceiling_hold_against_every_policy(
    seed, jobs, layers, types, dram_gbps, pieces, slack
):
    system, tables, trace = _case(seed, jobs, layers, types, dram_gbps, pieces, slack)
    result = solve_exact(system, tables, trace, time_limit_s=5.0, max_jobs=30, seed_policies=())
    assert 0 <= result.plan.count == result.lower <= result.upper <= jobs
    assert replay(system, tables, trace, result.plan) == result.lower
    if dram_gbps is None and not pieces:  # tiny job shops: always proven within the limit
        assert result.exact
    if result.exact:
        assert result.status == "optimal"
    met = {name: _met(system, tables, trace, make_policy(name, seed=seed)) for name in ONLINE}
    met["ga_offline"] = _met(
        system, tables, trace, make_policy("ga_offline", seed=seed, population=4, generations=2)
    )
    assert max(met.values()) <= result.upper, met
    if result.exact:
        assert max(met.values()) <= result.lower, met
    # the relaxation bound of every trace (relmas.ceiling.bound): no policy, search or replayed
    # schedule above it
    ceiling = relaxation_bound(Instance.of(system, tables, trace), time_limit_s=10.0)
    assert ceiling.status == "converged"
    assert max(*met.values(), result.lower) <= ceiling.met <= jobs, (met, result, ceiling)


def test_bad_input_is_refused_in_one_line():
    system, tables, trace = _case(3, 6, 2, 2, None, False, (1.0, 3.0))
    with pytest.raises(InputError, match="time_limit_s: expected a positive number"):
        solve_exact(system, tables, trace, time_limit_s=0, max_jobs=30)
    with pytest.raises(InputError, match=r"^my-trace: jobs: expected at most 5 jobs.*got 6$"):
        solve_exact(system, tables, trace, max_jobs=5, trace="my-trace", time_limit_s=10.0)
    with pytest.raises(InputError, match="layers: expected at most 3 layers"):
        solve_exact(system, tables, trace, max_operations=3, time_limit_s=10.0, max_jobs=30)
    with pytest.raises(InputError, match="threads"):
        solve_exact(system, tables, trace, threads=0, time_limit_s=10.0, max_jobs=30)
    with pytest.raises(InputError, match="tick_s: expected a positive number"):
        solve_exact(system, tables, trace, tick_s=0.0, time_limit_s=10.0, max_jobs=30)


def test_a_failed_solve_keeps_proven_bounds_only():
    # A limit too short to solve anything: the bounds are CP-SAT's proven ones, never claimed
    # exact unless they meet, and the lower one is still what the engine replays.
    system, tables, trace = _case(7, 12, 3, 2, 8.0, True, (0.9, 1.6))
    result = solve_exact(system, tables, trace, time_limit_s=1e-4, max_jobs=30)
    assert 0 <= result.lower <= result.upper <= 12
    assert result.exact == (result.lower == result.upper)
    assert replay(system, tables, trace, result.plan) == result.lower


@pytest.mark.parametrize("failure", ["status", "raise"])
def test_a_solver_that_fails_leaves_a_status_and_bounds_that_need_no_solver(monkeypatch, failure):
    from ortools.sat.python import cp_model

    def fail(self, model, *args, **kwargs):
        if failure == "raise":
            raise RuntimeError("solver crashed")
        return cp_model.MODEL_INVALID

    monkeypatch.setattr(cp_model.CpSolver, "Solve", fail)
    system, tables, trace = _case(3, 6, 2, 2, None, False, (0.9, 1.6))
    result = solve_exact(system, tables, trace, time_limit_s=10.0, max_jobs=30)
    expected = "FAILED (solver crashed)" if failure == "raise" else "MODEL_INVALID"
    assert result.relaxation == expected
    assert result.restriction in (expected, "SKIPPED")
    best = max(_met(system, tables, trace, make_policy(n)) for n in default_seed_policies())
    assert result.lower == best  # the best seed run, replayed
    assert best <= result.upper <= 6  # the jobs that fit alone: no solver's word needed
    assert result.exact or expected in result.status


def test_the_replay_follows_the_plan_and_refuses_another_trace():
    system, tables, trace = _case(11, 5, 2, 2, None, False, (1.0, 3.0))
    result = solve_exact(system, tables, trace, time_limit_s=10.0, max_jobs=30)
    engine = Engine(system, tables, trace, record=True)
    engine.run(PlanReplay(result.plan))
    timeline = engine.timeline().sort("start_s")
    planned = {(int(result.plan.job_id[t.job]), t.instance) for t in result.plan.tasks}
    ran = set(zip(timeline["job_id"].to_list(), timeline["accelerator"].to_list(), strict=True))
    assert planned <= ran
    other = trace.with_columns(pl.col("job_id") + 100)
    with pytest.raises(ValueError, match="another trace"):
        Engine(system, tables, other).run(PlanReplay(result.plan))


def test_the_instance_is_the_engines_view_of_the_trace():
    system, tables, trace = _case(5, 4, 3, 2, 8.0, False, (1.0, 3.0))
    trace = trace.with_columns(pl.col("arrival_s", "deadline_s") - 7.5)  # origin -8, not -7.5
    instance = Instance.of(system, tables, trace.reverse())
    engine = Engine(system, tables, trace)
    assert instance.job_id.tolist() == engine.jobs["job_id"].to_list()
    # the engine's clock, to the bit: its test of "met" depends on the times' size
    assert instance.origin_s == engine.origin_s == -8.0
    jobs = range(instance.n_jobs)
    assert instance.arrival_s.tolist() == [access.job_arrival(engine.state, j) for j in jobs]
    assert instance.deadline_s.tolist() == [access.job_deadline(engine.state, j) for j in jobs]
    sizes = [tables.n_layers[tables.model_index(m)] for m in engine.jobs["model"].to_list()]
    assert np.diff(instance.first_op).tolist() == sizes
    assert instance.count.tolist() == [2, 1]
    loose = CostTables.from_frame(synthetic_costs({"a": 3, "b": 2}, ["e", "s"], seed=5), ["e", "s"])
    scarce = load_system(
        {"instances": [{"name": "e", "count": 1}, {"name": "s", "count": 1}], "dram_gbps": 0.001}
    )
    with pytest.raises(ValueError, match="another bandwidth"):
        Instance.of(scarce, loose, trace)


@pytest.mark.parametrize("pieces", [False, True])
@pytest.mark.parametrize("offset", [0.0, 1000.25])
def test_a_policys_run_as_a_timed_plan_replays_to_the_same_schedule(pieces, offset):
    # Work-conserving or not (herald, the patient rules hold work back), with bandwidth contention
    # and split layers (gacer): the timed replay is the run again — also on a trace that starts
    # late, where the engine's clock (seconds since its origin) is not the plan's.
    system, tables, trace = _case(13, 6, 3, 2, 3.0, pieces, (0.9, 1.6))
    trace = trace.with_columns(pl.col("arrival_s", "deadline_s") + offset)
    instance = Instance.of(system, tables, trace)
    for name in (*default_seed_policies(), "gacer"):
        engine = Engine(system, tables, trace, record=True)
        run = engine.run(make_policy(name)).jobs.sort("job_id")
        plan = Plan.of_run(instance, engine, name)
        assert plan.count == int(run["met"].sum())
        again = Engine(system, tables, trace).run(PlanReplay(plan)).jobs.sort("job_id")
        np.testing.assert_allclose(again["finish_s"], run["finish_s"], rtol=1e-12, err_msg=name)


def test_seed_runs_give_the_lower_bound_only_when_they_beat_the_restriction():
    system, tables, trace = _case(2, 6, 3, 2, 3.0, False, (0.9, 1.6))
    seeded = solve_exact(system, tables, trace, time_limit_s=5.0, max_jobs=30)
    alone = solve_exact(system, tables, trace, time_limit_s=5.0, max_jobs=30, seed_policies=())
    assert alone.plan.source in ("relaxation", "restriction")
    assert seeded.lower >= max(alone.plan.count, seeded.plan.count)
    if seeded.exact and alone.exact:
        assert seeded.upper == alone.upper
    best = max(_met(system, tables, trace, make_policy(n)) for n in default_seed_policies())
    assert seeded.lower >= best


def test_a_plan_of_another_run_seeds_the_search_and_gives_its_lower_bound():
    # A memory-bound burst where ga_offline (seed 2) meets 6, one more than every default seed
    # policy; 6 is the optimum. Given its run as a seed plan, the search proves it at once.
    system, tables, trace = memory_bound_case(11, 8)
    engine = Engine(system, tables, trace, record=True)
    engine.run(make_policy("ga_offline", seed=2))
    plan = Plan.of_run(Instance.of(system, tables, trace), engine, "ga_offline")
    assert plan.count == 6
    assert max(_met(system, tables, trace, make_policy(n)) for n in default_seed_policies()) < 6
    result = solve_exact(
        system, tables, trace, time_limit_s=10.0, max_jobs=8, max_operations=100, seed_plans=(plan,)
    )
    assert (result.lower, result.upper, result.plan.source) == (6, 6, "ga_offline")


def test_a_layer_far_shorter_than_the_grids_tick_is_planned_and_replayed():
    # The tiny job's layer is a ten-thousandth of a tick and must run while the long job's does:
    # one of the two can be met, and the search proves it.
    models = {"long": 1.0, "tiny": 1e-7}
    tables = CostTables.from_frame(
        cost_frame({m: {"x": [(latency, 0, 0.0)]} for m, latency in models.items()}), ["x"]
    )
    system = load_system({"instances": [{"name": "x", "count": 1}]})
    jobs = _trace([("long", 0.0, 1.0), ("tiny", 0.5, 0.5 + 1e-6)])
    result = solve_exact(system, tables, jobs, time_limit_s=10.0, max_jobs=30, seed_policies=())
    assert (result.lower, result.upper) == (1, 1)


# ----------------------------------------------------------------------------- the clock


def test_a_trace_that_starts_before_zero_is_solved():
    # The engine's clock starts at -1 s, the whole second before the first arrival: the seed
    # runs' timed plans are on that clock too, and their replays can wait for their start times.
    system, tables, original = _case(11, 5, 2, 2, None, False, (1.0, 3.0))
    start = original["arrival_s"][0]
    trace = original.with_columns(pl.col("arrival_s", "deadline_s") - start - 0.5)
    result = solve_exact(system, tables, trace, time_limit_s=10.0, max_jobs=30)
    unshifted = solve_exact(system, tables, original, time_limit_s=10.0, max_jobs=30)
    assert (result.lower, result.upper) == (unshifted.lower, unshifted.upper) == (5, 5)
    assert replay(system, tables, trace, result.plan) == 5


def test_a_run_far_from_zero_replays_as_a_timed_plan_to_its_own_count():
    # At +1000.3 s a patient rule's run (it holds work back) is replayed as a timed plan: every
    # task waits for its recorded start on the engine's clock, so the replay is the run again.
    system, tables, trace = _case(7141, 7, 3, 1, 8.0, True, (1.0, 3.0))
    trace = trace.with_columns(pl.col("arrival_s", "deadline_s") + 1000.3)
    instance = Instance.of(system, tables, trace)
    engine = Engine(system, tables, trace, record=True)
    run = engine.run(make_policy("edf_feasible_patient_gated_ordered")).jobs.sort("job_id")
    plan = Plan.of_run(instance, engine, "edf_feasible_patient_gated_ordered")
    again = Engine(system, tables, trace).run(PlanReplay(plan)).jobs.sort("job_id")
    assert int(again["met"].sum()) == int(run["met"].sum()) == plan.count == 7
    np.testing.assert_array_equal(again["finish_s"], run["finish_s"])
    assert plan.tasks[0].start_s == engine.timeline()["start_s"].min()  # the engine's clock


def test_in_epoch_seconds_the_float_margin_is_of_the_engines_clock():
    # Two 1 s jobs at 1.7e9 s on one instance, due 1.05 s and 1.95 s later: the second would end
    # 0.05 s late, the optimum is 1. A float margin of the absolute times (64 x 1e-12 x 1.7e9 =
    # 0.11 s) would let the relaxation count both; the engine's clock reads 0 to 1.95 s.
    tables = CostTables.from_frame(cost_frame({"one": {"x": [(1.0, 0, 0.0)]}}), ["x"])
    system = load_system({"instances": [{"name": "x", "count": 1}]})
    jobs = _trace([("one", 1.7e9, 1.7e9 + 1.05), ("one", 1.7e9, 1.7e9 + 1.95)])
    result = solve_exact(system, tables, jobs, time_limit_s=10.0, max_jobs=30, seed_policies=())
    assert (result.lower, result.upper, result.exact) == (1, 1, True)


def test_a_plan_is_refused_on_a_trace_with_another_origin():
    system, tables, trace = _case(11, 5, 2, 2, None, False, (1.0, 3.0))
    result = solve_exact(system, tables, trace, time_limit_s=10.0, max_jobs=30)
    later = trace.with_columns(pl.col("arrival_s", "deadline_s") + 3.0)
    with pytest.raises(ValueError, match="origin differs"):
        replay(system, tables, later, result.plan)


# One layer type `x` (two instances) and `y` (one), latencies in quarter seconds; a trace's
# arrivals on the quarter-second grid and its deadlines halfway between: every event time of every
# schedule (arrivals, completions: no bandwidth limit) is on the grid, an eighth of a second from
# any deadline, so no rounding of a shifted trace can move a deadline across a finish.
_QUARTER_MODELS = {
    "one": {"x": [(0.75, 0, 0.0)], "y": [(0.5, 0, 0.0)]},
    "two": {"x": [(0.25, 0, 0.0), (1.0, 0, 0.0)], "y": [(0.5, 0, 0.0), (0.5, 0, 0.0)]},
}
# Offsets of the issue (a start before zero, far from it, in epoch seconds), and any multiple of
# 2^-20 s up to 2^31 s: the shifted times stay exact floats (those of the offsets too), so
# the LP's windows keep their exact lengths, not rounded at 1.7e9 s to 2.4e-7 s.
_OFFSETS = st.one_of(
    st.sampled_from([-0.5, -1000.3, 1000.3, 1.7e9, 1.7e9 + 0.3, -(2.0**31)]),
    st.integers(-(2**24), 2**24).map(lambda k: k / 2**20),
    st.integers(-(2**51), 2**51).map(lambda k: k / 2**20),
)


@settings(max_examples=16, deadline=None, derandomize=True)
@given(
    jobs=st.lists(
        st.tuples(st.sampled_from(["one", "two"]), st.integers(0, 8), st.integers(1, 10)),
        min_size=1,
        max_size=4,
    ),
    offset=_OFFSETS,
)
def test_shifting_a_trace_moves_no_count_bound_or_bracket(jobs, offset):
    system = load_system({"instances": [{"name": "x", "count": 2}, {"name": "y", "count": 1}]})
    tables = CostTables.from_frame(cost_frame(_QUARTER_MODELS), ["x", "y"])
    rows = [(m, a / 4, a / 4 + s / 4 + 0.125) for m, a, s in jobs]
    base = _trace(rows)
    moved = base.with_columns(pl.col("arrival_s", "deadline_s") + offset)
    seen = []
    for trace in (base, moved):
        met = [_met(system, tables, trace, make_policy(n)) for n in ("fcfs", "sjf", "edf")]
        bound = relaxation_bound(Instance.of(system, tables, trace), time_limit_s=10.0).met
        exact = solve_exact(
            system, tables, trace, time_limit_s=5.0, max_jobs=30, seed_policies=("edf", "sjf")
        )
        seen.append((met, bound, exact.lower, exact.upper))
    assert seen[0] == seen[1], offset
