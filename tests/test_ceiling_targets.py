"""Can the service targets be met (relmas.ceiling.targets): cases decided by hand, and a proven
shortfall that no policy of the catalog beats on generated traces."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from relmas import catalog
from relmas.ceiling.instance import Instance
from relmas.ceiling.stage import trace_ceiling
from relmas.ceiling.targets import (
    NOT_PROVEN,
    UNREACHABLE,
    has_targets,
    served_for_targets,
    shortfall_bound,
)
from relmas.config import load_config
from relmas.policies import make_policy
from relmas.sim import Engine
from relmas.study import Study
from tests.test_bad_input import QUICK, quick_costs
from tests.test_ceiling_bound import _one_type
from tests.test_ceiling_exact import ONLINE, _case, _trace


def _serve(jobs: pl.DataFrame, tenants: list[str], targets: dict[str, float]) -> pl.DataFrame:
    """`jobs` (in job_id order) of `tenants`, each job with its tenant's target (none if absent);
    a key "tenant/model" is that tenant's own target for the model."""
    rows = [
        (t, targets.get(f"{t}/{m}", targets.get(t)), f"{t}/{m}" in targets)
        for t, m in zip(tenants, jobs["model"], strict=True)
    ]
    tenant, target, model_target = zip(*rows, strict=True)
    return jobs.with_columns(
        tenant=pl.Series(tenant),
        target=pl.Series(target, dtype=pl.Float64),
        model_target=pl.Series(model_target),
    )


def _bound(system, tables, jobs, time_limit_s: float = 10.0, counts: bool = True):
    instance = Instance.of(system, tables, jobs)
    return shortfall_bound(instance, jobs, time_limit_s=time_limit_s, counts=counts)


def test_two_tenants_that_both_need_the_whole_window_cannot_both_be_served():
    # One instance; two 1 s jobs of tenants a and b, both at 0 and due at 1: every schedule meets
    # exactly one, so with targets 1.0 and 1.0 one group always falls one job short: a shortfall
    # of 1 job, (1/2) x (1 - 0) = 0.5 in the metric.
    system, tables = _one_type({"one": [(1.0, 0)]}, count=1)
    jobs = _serve(_trace([("one", 0.0, 1.0), ("one", 0.0, 1.0)]), ["a", "b"], {"a": 1, "b": 1})
    bound = _bound(system, tables, jobs)
    assert (bound.reachable, bound.status, bound.groups) == (UNREACHABLE, "converged", 2)
    assert 1.0 - 1e-5 <= bound.jobs <= 1.0  # the hand value, less the margin and TIME_TOL
    assert bound.shortfall == pytest.approx(0.5, abs=1e-5)
    for name in ("edf", "sjf", "fcfs"):
        assert Engine(system, tables, jobs).run(make_policy(name)).metrics["shortfall"] == 0.5


def test_targets_that_one_schedule_meets_are_not_proven_unreachable():
    # Due at 2, the two jobs fit one after the other: both targets can be met, and the bound is 0.
    system, tables = _one_type({"one": [(1.0, 0)]}, count=1)
    jobs = _serve(_trace([("one", 0.0, 2.0), ("one", 0.0, 2.0)]), ["a", "b"], {"a": 1, "b": 1})
    bound = _bound(system, tables, jobs)
    assert (bound.reachable, bound.jobs, bound.status) == (NOT_PROVEN, 0.0, "converged")
    # Due at 1 again, a target of 0.5 over both jobs (one is enough), or a target for one tenant
    # only (the other's job, without a target, may be late), is met by some schedule.
    tight = _trace([("one", 0.0, 1.0), ("one", 0.0, 1.0)])
    assert _bound(system, tables, _serve(tight, ["a", "a"], {"a": 0.5})).jobs == 0.0
    one = _bound(system, tables, _serve(tight, ["a", "b"], {"a": 1.0}))
    assert (one.reachable, one.groups) == (NOT_PROVEN, 1)
    assert not has_targets(tight) and not has_targets(_serve(tight, ["a", "b"], {}))


def test_a_groups_met_count_is_an_integer():
    # Two jobs in one group, target 0.9, due at 1.5 on one instance: every schedule meets one, a
    # shortfall of 1.8 - 1 = 0.8 jobs. Without count rows the LP fits 1.5 jobs in the window: 0.3
    # from the rate row alone; the integer row (met_g < 2 costs at least (1 - 0.2)(2 - met_g))
    # lifts it to 0.4. The count row (one whole job fits the window) gives the 0.8.
    system, tables = _one_type({"one": [(1.0, 0)]}, count=1)
    jobs = _serve(_trace([("one", 0.0, 1.5), ("one", 0.0, 1.5)]), ["a", "a"], {"a": 0.9})
    bound = _bound(system, tables, jobs, counts=False)
    assert bound.reachable == UNREACHABLE
    assert bound.jobs == pytest.approx(0.4, abs=1e-5)
    assert _bound(system, tables, jobs).jobs == pytest.approx(0.8, abs=1e-5)
    # A job that cannot meet its deadline alone counts in no group's met: the bound needs no LP.
    late = _serve(_trace([("one", 0.0, 0.5), ("one", 0.0, 3.0)]), ["a", "a"], {"a": 1.0})
    assert _bound(system, tables, late).jobs == pytest.approx(1.0, abs=1e-5)


def test_a_per_model_target_is_a_group_of_its_own():
    # Tenant a: one job of model `one` (its own target 1.0) and one of `two` (the tenant's 0.5),
    # both needing the whole of [0, 1] on one instance. As one group of target 0.5, serving
    # either is enough; as groups a/one (1.0) and a (0.5, one job: met_g must be 1), both must be.
    system, tables = _one_type({"one": [(1.0, 0)], "two": [(1.0, 0)]}, count=1)
    jobs = _trace([("one", 0.0, 1.0), ("two", 0.0, 1.0)])
    assert _bound(system, tables, _serve(jobs, ["a", "a"], {"a": 0.5})).reachable == NOT_PROVEN
    split = _bound(system, tables, _serve(jobs, ["a", "a"], {"a": 0.5, "a/one": 1.0}))
    assert (split.reachable, split.groups) == (UNREACHABLE, 2)
    assert split.jobs == pytest.approx(0.5, abs=1e-5)  # a/one 1 short or a 0.5 short


def test_a_time_limit_must_be_positive():
    system, tables = _one_type({"one": [(1.0, 0)]}, count=1)
    jobs = _serve(_trace([("one", 0.0, 2.0)]), ["a"], {"a": 1.0})
    with pytest.raises(ValueError, match="time limit must be positive"):
        _bound(system, tables, jobs, time_limit_s=0.0)


@pytest.mark.parametrize(
    ("seed", "dram_gbps", "pieces"),
    [(1, None, False), (2, 3.0, False), (3, None, True), (4, 3.0, True), (5, 8.0, False)],
)
def test_no_policy_falls_short_by_less_than_the_proven_bound(seed, dram_gbps, pieces):
    # Ten contended jobs (deadlines 0.9-1.6 x isolated) of four tenants: three with targets, one
    # of them with its own target for model a (groups p, q, q/a, r), and one without.
    system, tables, jobs = _case(seed, 10, 3, 2, dram_gbps, pieces, (0.9, 1.6))
    tenants = np.random.default_rng(seed).choice(["p", "q", "r", "free"], jobs.height).tolist()
    jobs = _serve(jobs, tenants, {"p": 1.0, "q": 0.9, "q/a": 0.5, "r": 0.6})
    bound = _bound(system, tables, jobs)
    assert bound.status == "converged"
    assert bound.shortfall == bound.jobs / jobs.height
    runs = {name: make_policy(name, seed=seed) for name in (*ONLINE, *catalog.of_kind("target"))}
    runs["ga_offline"] = make_policy("ga_offline", seed=seed, population=4, generations=2)
    for name, policy in runs.items():
        shortfall = Engine(system, tables, jobs).run(policy).metrics["shortfall"]
        assert bound.shortfall <= shortfall, name


def test_the_bound_stage_says_whether_a_traces_targets_are_reachable(tmp_path: Path):
    # The quick scenario without targets, and at three times its load with tight deadlines and a
    # target of 1.0 for both tenants: every deadline is then a target, so the least shortfall is
    # the jobs the ceiling's LP cannot meet, over the trace's jobs.
    config = copy.deepcopy(QUICK)
    for tenant in config["scenarios"]["mixed"]["tenants"]:
        tenant.pop("target", None)  # quick.yaml's own targets: this row is the one without
    served = copy.deepcopy(config["scenarios"]["mixed"])
    served["arrival"]["load"] = 3.0
    for tenant in served["tenants"]:
        tenant |= {"target": 1.0, "slack": 1.2}
    config["scenarios"]["served"] = served
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    config = load_config(tmp_path / "config.yaml")
    costs = tmp_path / "qcosts"
    quick_costs(costs, config)
    rows = {}
    for scenario in ("mixed", "served"):
        trace = tmp_path / f"{scenario}.parquet"
        Study(config).trace(scenario, 1, costs).write_parquet(trace)
        rows[scenario] = trace_ceiling(config, scenario, 1, trace, costs).row(0, named=True)
    plain, row = rows["mixed"], rows["served"]
    targets = ("shortfall_lower", "targets_reachable", "targets_status", "targets_s")
    assert all(plain[key] is None for key in targets)
    assert plain["relaxation_status"] == "converged" and plain["ceiling_met"] <= plain["jobs"]
    assert (row["targets_reachable"], row["targets_status"]) == ("unreachable", "converged")
    assert row["relaxation_status"] == "converged" and row["ceiling_met"] < row["jobs"]
    unmet = (row["jobs"] - row["relaxation_value"]) / row["jobs"]
    # The same LP's optimum, but each solve adds count rows along its own path of solutions.
    assert row["shortfall_lower"] == pytest.approx(unmet, abs=1e-3)


def test_a_solve_stopped_before_any_round_keeps_what_is_proven_without_it():
    # No time for a round: the bound is what each group loses on jobs that cannot meet their
    # deadline even alone (here the first of two, with target 1.0), and the status says so.
    system, tables = _one_type({"one": [(1.0, 0)]}, count=1)
    late = _serve(_trace([("one", 0.0, 0.5), ("one", 0.0, 3.0)]), ["a", "a"], {"a": 1.0})
    stopped = _bound(system, tables, late, time_limit_s=1e-9)
    assert (stopped.status, stopped.rounds, stopped.reachable) == ("time_limit", 0, UNREACHABLE)
    assert stopped.jobs == pytest.approx(1.0, abs=1e-5)
    tight = _serve(_trace([("one", 0.0, 1.0), ("one", 0.0, 1.0)]), ["a", "b"], {"a": 1, "b": 1})
    assert _bound(system, tables, tight, time_limit_s=1e-9).reachable == NOT_PROVEN


@pytest.mark.parametrize("short", ["a", "b"])
def test_the_labels_serve_the_job_of_the_group_that_would_fall_short(short):
    # One instance; two 1 s jobs at 0 due at 1, of tenants a and b: one of them meets. Ten jobs
    # of each tenant are decided already: the `short` tenant met all ten (target 1.0: it needs
    # this one too), the other met 8 of its target 0.5 (a cushion of 2.5). Counting the targets,
    # the LP serves the short tenant's job and gives the other up; counting jobs alone, either.
    system, tables = _one_type({"one": [(1.0, 0)]}, count=1)
    targets = {short: 1.0, ("b" if short == "a" else "a"): 0.5}
    jobs = _serve(_trace([("one", 0.0, 1.0), ("one", 0.0, 1.0)]), ["a", "b"], targets)
    instance = Instance.of(system, tables, jobs)
    group = np.array([0, 1])  # a, b
    target = np.array([targets["a"], targets["b"]])
    met = np.where(target == 1.0, 10.0, 8.0)
    shares = served_for_targets(instance, group, target, np.array([10, 10]), met, time_limit_s=10.0)
    assert shares == pytest.approx(np.where(target == 1.0, 1.0, 0.0), abs=1e-6)
