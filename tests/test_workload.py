"""Workload generation: determinism, load scaling, deadlines, burstiness, replay and validation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from relmas.config import validate_config
from relmas.errors import InputError
from relmas.io import write_parquet
from relmas.schemas import JOB_SCHEMA
from relmas.sim import CostTables, load_system
from relmas.workload import generate_trace, parse_scenario, scenario_system, system_capacity
from relmas.yaml_load import load_yaml
from tests.synthetic import cost_frame

ROOT = Path(__file__).resolve().parents[1]

# Model "small": 1 s on x, 0.5 s on y (isolated 0.5); "big": 3 s on x, 4 s on y (isolated 3).
COSTS = cost_frame(
    {
        "small": {"x": [(0.6, 0, 0.0), (0.4, 0, 0.0)], "y": [(0.25, 0, 0.0), (0.25, 0, 0.0)]},
        "big": {"x": [(3.0, 0, 0.0)], "y": [(4.0, 0, 0.0)]},
    }
)
TABLES = CostTables.from_frame(COSTS, ["x", "y"])
SYSTEM = load_system({"instances": [{"name": "x", "count": 2}, {"name": "y", "count": 1}]})


def scenario(**changes):
    base = {
        "models": {"small": 3, "big": 1},
        "tenants": [
            {"name": "camera", "priority": 9, "slack": 2.0, "share": 0.25},
            {"name": "batch", "priority": 1, "slack": 10.0, "share": 0.75},
        ],
        "arrival": {"process": "poisson", "load": 0.8},
        "jobs": 400,
    }
    base.update(changes)
    return base


def generate(raw, seed=0, name="s"):
    return generate_trace(name, raw, SYSTEM, TABLES, seed, source="config.yaml")


def test_traces_are_deterministic_per_seed_and_differ_across_seeds():
    first = generate(scenario(), seed=3)
    assert first.schema == pl.Schema(JOB_SCHEMA)
    assert first.equals(generate(scenario(), seed=3))
    assert not first.equals(generate(scenario(), seed=4))
    assert not first.equals(generate(scenario(), seed=3, name="other"))
    assert first["job_id"].to_list() == list(range(400))
    assert (first["arrival_s"].diff().drop_nulls() >= 0).all()


def test_capacity_is_the_sum_of_instance_rates_for_the_mix():
    # Mix 3:1 -> E[latency] on x = 0.75 x 1 + 0.25 x 3 = 1.5 s,
    # on y = 0.75 x 0.5 + 0.25 x 4 = 1.375 s.
    expected = 2 / 1.5 + 1 / 1.375
    assert system_capacity(SYSTEM, TABLES, {"small": 3, "big": 1}) == pytest.approx(expected)


def test_load_scales_the_arrival_rate_as_specified():
    low = generate(scenario(jobs=4000))
    high = generate(scenario(jobs=4000, arrival={"process": "poisson", "load": 1.6}))
    # Same draws, time rescaled: arrivals at twice the load come at exactly half the times.
    assert np.allclose(high["arrival_s"].to_numpy() * 2, low["arrival_s"].to_numpy(), rtol=1e-12)
    assert high["model"].equals(low["model"]) and high["tenant"].equals(low["tenant"])
    capacity = system_capacity(SYSTEM, TABLES, {"small": 3, "big": 1})
    rate = (low.height - 1) / (low["arrival_s"][-1] - low["arrival_s"][0])
    assert rate == pytest.approx(0.8 * capacity, rel=0.05)


def test_deadlines_are_arrival_plus_slack_times_isolated_latency():
    raw = scenario(deadline={"slack_per_model": {"big": 1.5}})
    trace = generate(raw)
    isolated = {"small": 0.5, "big": 3.0}
    slack = {"camera": 2.0, "batch": 10.0}
    priority = {"camera": 9, "batch": 1}
    for row in trace.iter_rows(named=True):
        s = 1.5 if row["model"] == "big" else slack[row["tenant"]]
        assert row["deadline_s"] == pytest.approx(row["arrival_s"] + s * isolated[row["model"]])
        assert row["priority"] == priority[row["tenant"]]
    shares = trace["tenant"].value_counts(normalize=True)
    camera = shares.filter(pl.col("tenant") == "camera")["proportion"][0]
    assert camera == pytest.approx(0.25, abs=0.06)


def test_tenants_may_have_their_own_model_mix():
    raw = scenario()
    raw["tenants"][0]["models"] = {"big": 1}
    trace = generate(raw)
    assert set(trace.filter(pl.col("tenant") == "camera")["model"]) == {"big"}
    assert set(trace.filter(pl.col("tenant") == "batch")["model"]) == {"small", "big"}


def test_traces_carry_each_jobs_target_and_firm_deadlines():
    raw = scenario(deadline={"firm": True})
    raw["tenants"][0] |= {"target": 0.99, "targets": {"big": 0.9}}
    raw["tenants"][1] |= {"targets": {"small": 0.5}}  # a model's target, none for the tenant
    trace = generate(raw)
    columns = ["tenant", "model", "target", "model_target", "firm"]
    assert set(trace.select(columns).unique().rows()) == {
        ("camera", "small", 0.99, False, True),
        ("camera", "big", 0.9, True, True),
        ("batch", "small", 0.5, True, True),
        ("batch", "big", None, False, True),
    }
    # the same jobs as without service levels, which carry no target and soft deadlines
    plain = generate(scenario())
    assert trace.drop(columns[2:]).equals(plain.drop(columns[2:]))
    assert plain["target"].is_null().all() and not plain["model_target"].any()
    assert not plain["firm"].any()


def index_of_dispersion(arrivals: np.ndarray, window: float) -> float:
    counts = np.bincount((arrivals // window).astype(np.int64))
    return float(counts.var() / counts.mean())


def test_mmpp_is_burstier_than_poisson_at_the_same_mean_rate():
    poisson = generate(scenario(jobs=20000))["arrival_s"].to_numpy()
    mmpp_raw = scenario(
        jobs=20000,
        arrival={"process": "mmpp", "load": 0.8, "burst_ratio": 8.0, "mean_burst_jobs": 30},
    )
    mmpp = generate(mmpp_raw)["arrival_s"].to_numpy()
    capacity = system_capacity(SYSTEM, TABLES, {"small": 3, "big": 1})
    assert (mmpp.size - 1) / (mmpp[-1] - mmpp[0]) == pytest.approx(0.8 * capacity, rel=0.15)
    window = 20 / (0.8 * capacity)  # about 20 arrivals per window
    assert index_of_dispersion(poisson, window) == pytest.approx(1.0, abs=0.15)
    assert index_of_dispersion(mmpp, window) > 3.0


def test_replayed_traces_keep_their_arrivals_models_and_tenants(tmp_path):
    path = tmp_path / "arrivals.parquet"
    write_parquet(
        pl.DataFrame({"arrival_s": [0.5, 0.0, 2.0], "model": ["big", "small", "small"]}), path
    )
    raw = scenario(arrival={"process": "trace", "path": str(path)})
    del raw["jobs"]
    trace = generate(raw)
    assert trace["arrival_s"].to_list() == [0.0, 0.5, 2.0]
    assert trace["model"].to_list() == ["small", "big", "small"]
    raw["arrival"]["load"] = 0.5  # rescaled so that the mean rate is half the capacity
    rescaled = generate(raw)
    capacity = system_capacity(SYSTEM, TABLES, {"small": 2, "big": 1})
    assert rescaled["arrival_s"][-1] == pytest.approx(2 / (0.5 * capacity))
    write_parquet(pl.DataFrame({"arrival_s": [0.0, 1.0], "tenant": ["nobody", "batch"]}), path)
    with pytest.raises(InputError, match=r"arrivals.parquet: tenant: expected one of"):
        generate(raw)


def test_scenario_systems_override_the_default_system():
    config = {
        "system": {"instances": [{"name": "x", "count": 2}], "dram_gbps": 16.0},
        "scenarios": {"a": {"system": {"dram_gbps": 2.0}}, "b": {}},
    }
    assert scenario_system(config, "a").dram_gbps == 2.0
    assert scenario_system(config, "a").instances == scenario_system(config, "b").instances
    assert scenario_system(config, "b").dram_gbps == 16.0
    config["scenarios"]["a"]["system"] = {"sharing": "fair"}
    with pytest.raises(InputError, match=r"c.yaml: scenarios.a.system.sharing: expected one of"):
        scenario_system(config, "a", "c.yaml")


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"arrival": {"process": "uniform", "load": 1}}, "scenarios.s.arrival.process"),
        ({"arrival": {"process": "poisson"}}, "scenarios.s.arrival.load"),
        ({"arrival": {"process": "poisson", "load": -1}}, "scenarios.s.arrival.load"),
        (
            {"arrival": {"process": "mmpp", "load": 1, "burst_ratio": 0.5}},
            "scenarios.s.arrival.burst_ratio",
        ),
        (
            {"arrival": {"process": "poisson", "load": 1, "burst_ratio": 2}},
            "scenarios.s.arrival.burst_ratio",
        ),
        ({"models": {"small": 1, "resnet": 2}}, "scenarios.s.models.resnet"),
        ({"models": {"small": 0}}, "scenarios.s.models.small"),
        ({"jobs": 0}, "scenarios.s.jobs"),
        ({"jobs": None}, "scenarios.s.jobs"),
        ({"tenants": []}, "scenarios.s.tenants"),
        (
            {"tenants": [{"name": "a", "priority": 2, "slack": 1, "share": 1}]},
            "scenarios.s.tenants[0].priority",
        ),
        ({"tenants": [{"name": "a", "priority": 1, "share": 1}]}, "scenarios.s.tenants[0].slack"),
        (
            {"deadline": {"slack_per_model": {"big": "x"}}},
            "scenarios.s.deadline.slack_per_model.big",
        ),
        ({"color": "red"}, "scenarios.s.color"),
        # the checks of relmas.workload, which the schema cannot express
        ({"arrival": {"process": "poisson", "load": float("inf")}}, "scenarios.s.arrival.load"),
        (
            {"tenants": [{"name": "a", "priority": 1, "slack": float("nan"), "share": 1}]},
            "scenarios.s.tenants[0].slack",
        ),
        ({"arrival": {"process": "trace"}}, "scenarios.s.arrival.path"),
        (
            {"tenants": [{"name": "a", "priority": 1, "slack": 1, "share": 1}] * 2},
            "scenarios.s.tenants[1].name",
        ),
        (
            {"tenants": [{"name": "a", "priority": 1, "slack": 1, "share": 1, "models": {"x": 1}}]},
            "scenarios.s.tenants[0].models.x",
        ),
        ({"models": None}, "scenarios.s.models"),
        (
            {"tenants": [{"name": "a", "priority": 1, "slack": 1, "share": 1, "target": 1.01}]},
            "scenarios.s.tenants[0].target",
        ),
        (
            {"tenants": [{"name": "a", "priority": 1, "slack": 1, "share": 1, "targets": {}}]},
            "scenarios.s.tenants[0].targets",
        ),
        (
            {
                "tenants": [
                    {"name": "a", "priority": 1, "slack": 1, "share": 1, "models": {"big": 1}}
                    | {"targets": {"small": 0.5}}
                ]
            },
            "scenarios.s.tenants[0].targets.small",
        ),
        ({"deadline": {"firm": 1}}, "scenarios.s.deadline.firm"),
    ],
)
def test_invalid_scenarios_name_the_key(change, key):
    """Through the config's validation, as every scenario is read: the schema's checks, then
    relmas.workload's."""
    config = load_yaml(ROOT / "config" / "quick.yaml")
    config["models"] |= {"small": {}, "big": {}}
    config["scenarios"] = {"s": scenario(**change)}
    with pytest.raises(InputError) as error:
        validate_config(config, "config.yaml")
    assert str(error.value).startswith(f"config.yaml: {key}: expected")


def test_a_scenario_without_jobs_needs_a_replayed_trace():
    raw = scenario()
    del raw["jobs"]
    with pytest.raises(InputError, match=r"c.yaml: scenarios.s.jobs: expected a positive number"):
        parse_scenario("s", raw, TABLES.models, "c.yaml")
