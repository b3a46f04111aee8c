"""The sampled-futures planner (relmas.policies.planner): fed the real future it is the clairvoyant
admission; fed samples it reads nothing of the trace it runs but the present."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from relmas import catalog
from relmas.ceiling.admission import serve_lp_jobs
from relmas.ceiling.bound import relaxation_bound
from relmas.ceiling.instance import Instance
from relmas.errors import InputError
from relmas.policies import make_policy
from relmas.policies.planner import (
    FUTURE_SEED_BASE,
    GivingUp,
    PlannerConfig,
    RealFuture,
    SampledFutures,
    planner,
)
from relmas.sim import Engine
from relmas.workload import generate_trace, parse_scenario
from tests.synthetic import memory_bound_case, one_type
from tests.test_ceiling_admission import _one_instance
from tests.test_ceiling_exact import _met, _trace


def _clairvoyant(rule: str = "edf_feasible") -> GivingUp:
    return planner(make_policy(rule), RealFuture(), PlannerConfig(samples=1))


def test_fed_the_real_future_it_gives_up_the_long_job_no_rule_gives_up():
    # One instance. A long job (1.5 s) alone at 0, due at 2; two short ones (0.5 s) at 0.1, due
    # at 1.2. Every rule starts the long one at 0 and meets 1. The LP of the whole future serves
    # the two short ones: the planner gives the long one up at 0 and meets 2, as the LP's jobs
    # served do.
    system, tables = _one_instance({"long": 1.5, "short": 0.5})
    jobs = _trace([("long", 0.0, 2.0), ("short", 0.1, 1.2), ("short", 0.1, 1.2)])
    assert max(_met(system, tables, jobs, make_policy(r)) for r in catalog.of_kind("rule")) == 1
    bound = relaxation_bound(Instance.of(system, tables, jobs), time_limit_s=10.0)
    clairvoyant = serve_lp_jobs(system, tables, jobs, bound, scales=(1.0,), time_limit_s=10.0)
    clairvoyant_planner = _clairvoyant()
    result = Engine(system, tables, jobs).run(clairvoyant_planner)
    assert int(result.jobs["met"].sum()) == clairvoyant.met == 2
    assert result.jobs["dropped"].to_list() == [True, False, False]
    assert (clairvoyant_planner.given_up, result.policy) == (1, "planner")


@pytest.mark.parametrize("seed", [1, 3, 6])
def test_with_every_job_present_it_is_the_clairvoyant_admission_schedule_for_schedule(seed):
    # Bursts where memory binds, every job arriving at 0: the first plan sees the whole trace,
    # so its LP is the ceiling's; the planner gives up exactly the jobs that LP leaves out and
    # the rule meets, on the others, what it meets on them alone.
    system, tables, jobs = memory_bound_case(seed, 8, spread=0.0)
    whole = Instance.of(system, tables, jobs)
    shares = relaxation_bound(whole, time_limit_s=10.0).shares
    served = jobs.filter(pl.col("job_id").is_in(whole.job_id[shares > 0.5].tolist()))
    assert 0 < served.height < jobs.height  # the LP gives some up
    clairvoyant = _clairvoyant()
    result = Engine(system, tables, jobs).run(clairvoyant)
    assert sorted(result.jobs.filter(~pl.col("dropped"))["job_id"]) == sorted(served["job_id"])
    alone = Engine(system, tables, served).run(make_policy("edf_feasible"))
    assert result.jobs["met"].sum() == alone.jobs["met"].sum()
    assert clairvoyant.plans == 1


def _scenario():
    raw = {
        "models": {"long": 1, "short": 2},
        "tenants": [{"name": "t", "priority": 1, "slack": 3.0, "share": 1.0}],
        "arrival": {"process": "poisson", "load": 0.9},
        "jobs": 30,
    }
    return parse_scenario("toy", raw, ["long", "short"])


def test_sampled_futures_follow_the_present_and_are_never_the_trace_run():
    system, tables = _one_instance({"long": 1.5, "short": 0.5})
    scenario = _scenario()
    config = PlannerConfig(samples=2, horizon_jobs=5, seed=3)
    futures = SampledFutures("toy", scenario, system, tables, config)
    seeds = FUTURE_SEED_BASE + 6 + np.arange(2)  # seed 3's two samples
    own = [generate_trace("toy", scenario, system, tables, int(s)) for s in seeds]
    assert all(p.equals(o.select(p.columns)) for p, o in zip(futures.pool, own, strict=True))
    run = generate_trace("toy", scenario, system, tables, 3)
    assert not futures.pool[0]["arrival_s"].equals(run["arrival_s"])
    engine = Engine(system, tables, run)
    engine.next_decision()
    engine.step([])
    engine.next_decision()
    now = engine.origin_s + engine.now
    for sample in (0, 1):
        future = futures(engine, sample)
        assert future.height == 5 and (future["job_id"] < 0).all()
        assert (future["arrival_s"] > now).all() and future["arrival_s"].is_sorted()
        # a window of its own trace, moved in time: the same jobs, slack and gaps
        source = futures.pool[sample]
        gaps, slack = (np.diff(source["arrival_s"]), source["deadline_s"] - source["arrival_s"])
        starts = [
            i
            for i in range(1, source.height - 4)
            if np.allclose(slack[i : i + 5], future["deadline_s"] - future["arrival_s"])
            and np.allclose(gaps[i : i + 4], np.diff(future["arrival_s"]))
            and source["model"][i : i + 5].equals(future["model"])
        ]
        assert starts


def test_a_planner_over_samples_runs_a_whole_trace_and_gives_up_only_what_it_planned():
    system, tables = _one_instance({"long": 1.5, "short": 0.5})
    scenario = _scenario()
    jobs = generate_trace("toy", scenario, system, tables, 7)
    config = PlannerConfig(samples=2, horizon_jobs=6, lp_time_limit_s=5.0)
    futures = SampledFutures("toy", scenario, system, tables, config)
    sampled = planner(make_policy("edf_feasible"), futures, config)
    result = Engine(system, tables, jobs).run(sampled)
    assert result.jobs.height == jobs.height and sampled.plans > 0
    assert int(result.jobs["dropped"].sum()) == sampled.given_up
    assert not (result.jobs["met"] & result.jobs["dropped"]).any()


def test_the_catalog_planner_is_the_planner_of_its_rule_over_futures_drawn_from_its_seed():
    """`make_policy("planner", ...)` as the evaluation makes it (relmas.evaluate) gives the
    schedule of `planner(rule, SampledFutures(...), PlannerConfig(..., seed))`; another seed draws
    other futures. It is no baseline and no sweep runs it."""
    system, tables = _one_instance({"long": 1.5, "short": 0.5})
    scenario = _scenario()
    jobs = generate_trace("toy", scenario, system, tables, 7)
    knobs = {"samples": 2, "horizon_jobs": 6, "keep_share": 0.5, "lp_time_limit_s": 5.0}

    def catalogued(seed: int) -> pl.DataFrame:
        policy = make_policy(
            "planner", seed=seed, rule="edf_feasible", placement="all", scenario="toy",
            arrivals=scenario, **knobs,
        )  # fmt: skip
        return Engine(system, tables, jobs).run(policy).jobs

    config = PlannerConfig(**knobs, seed=7)
    futures = SampledFutures("toy", scenario, system, tables, config)
    made = Engine(system, tables, jobs).run(planner(make_policy("edf_feasible"), futures, config))
    assert catalogued(7).equals(made.jobs) and made.jobs["dropped"].any()
    assert not catalogued(8).equals(made.jobs)
    assert "planner" not in catalog.online_baselines()
    with pytest.raises(InputError, match="planner"):
        make_policy("planner", rule="edf_feasible")  # no scenario to draw futures of


def test_bad_knobs_are_refused():
    bad_knobs = (
        {"samples": 0},
        {"horizon_jobs": -1},
        {"keep_share": 0.0},
        {"keep_share": 1.5},
        {"bandwidth_share": 0.0},
    )
    for bad in bad_knobs:
        with pytest.raises(ValueError, match="samples|keep_share"):
            PlannerConfig(**bad)


def test_a_job_given_up_is_dropped_and_a_running_one_cannot_be():
    system, tables = _one_instance({"long": 1.5, "short": 0.5})
    jobs = _trace([("long", 0.0, 2.0), ("short", 0.0, 1.2)])
    engine = Engine(system, tables, jobs)
    engine.next_decision()
    engine.assign(0, 0)
    with pytest.raises(ValueError, match="job 0 is not ready"):
        engine.give_up(0)
    engine.give_up(1)
    engine.step([])
    assert engine.next_decision() is None and engine.finished
    result = engine.result("x")
    assert result.jobs["dropped"].to_list() == [False, True]
    assert result.jobs["met"].to_list() == [True, False]


def test_what_is_left_of_a_job_is_planned_from_its_next_layer():
    # A job of two 1 s layers due at 1.5 cannot meet its deadline whole; with its first layer
    # run, what is left of it can: the LP counts it, and a job of the same model that has run
    # nothing keeps its own, whole chain.
    system, tables = one_type({"two": [1.0, 1.0]})
    jobs = _trace([("two", 0.0, 1.5), ("two", 0.0, 2.5)])
    whole = Instance.of(system, tables, jobs)
    assert relaxation_bound(whole, time_limit_s=10.0).met == 1
    left = whole.remaining(np.array([1, 0]), whole.arrival_s)
    assert (left.n_ops, left.first_op.tolist()) == (3, [0, 1, 3])
    assert relaxation_bound(left, time_limit_s=10.0).shares.round(6).tolist() == [1.0, 0.0]
    with pytest.raises(ValueError, match="at least one layer"):
        whole.remaining(np.array([2, 0]), whole.arrival_s)
