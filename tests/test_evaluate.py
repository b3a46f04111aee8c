"""Evaluation: simulate() on user inputs, result files, and errors that name the file and column."""

from __future__ import annotations

import json

import polars as pl
import pytest
import yaml

from relmas.errors import InputError
from relmas.evaluate import SUMMARY_EXTRA, evaluate_scenario, simulate_files, summary_row
from relmas.figures.gantt import plot_gantt
from relmas.io import read_metadata, read_parquet, write_parquet
from relmas.schemas import JOB_SCHEMA, SUMMARY_SCHEMA
from relmas.sim import JOB_RESULT_SCHEMA, load_system
from relmas.sim.costs import load_costs
from relmas.sim.synthetic import synthetic_costs
from relmas.workload import make_workload


@pytest.fixture
def inputs(tmp_path):
    costs = synthetic_costs({"a": 4, "b": 6}, ["e", "s"], seed=2)
    for name, part in costs.group_by("accelerator"):
        write_parquet(part, tmp_path / "costs" / f"{name[0]}.parquet")
    system = {"instances": [{"name": "e", "count": 1}, {"name": "s", "count": 2}], "dram_gbps": 4.0}
    (tmp_path / "system.yaml").write_text(yaml.safe_dump(system))
    jobs = pl.DataFrame(
        {
            "job_id": [10, 11, 12],
            "tenant": ["u", "v", "u"],
            "model": ["a", "b", "a"],
            "arrival_s": [0.0, 1e-4, 2e-4],
            "deadline_s": [1e-2, 2e-3, 3e-4],
            "priority": [1, 3, 9],
        },
        schema=JOB_SCHEMA,
    )
    write_parquet(jobs, tmp_path / "jobs.parquet")
    return tmp_path, jobs


def run(tmp_path, policy="edf"):
    return simulate_files(
        tmp_path / "system.yaml",
        tmp_path / "jobs.parquet",
        tmp_path / "costs",
        policy,
        tmp_path / "out.parquet",
    )


def test_simulate_files_writes_per_job_results_with_metrics(inputs):
    tmp_path, jobs = inputs
    result = run(tmp_path)
    out = read_parquet(tmp_path / "out.parquet", JOB_RESULT_SCHEMA)
    assert sorted(out["job_id"].to_list()) == [10, 11, 12]
    assert out.equals(result.jobs)
    metadata = read_metadata(tmp_path / "out.parquet")
    assert json.loads(metadata["relmas.metrics"])["sla_rate"] == result.metrics["sla_rate"]
    assert metadata["relmas.policy"] == "edf" and metadata["relmas.scenario"] == "jobs"
    assert set(json.loads(metadata["relmas.sla_by_tenant"])) == {"u", "v"}


def test_summary_row_has_the_contract_columns(inputs):
    tmp_path, _ = inputs
    row = summary_row(run(tmp_path, "sjf"), "custom", 4)
    assert list(row.columns) == list(SUMMARY_SCHEMA) + list(SUMMARY_EXTRA)
    assert row.row(0, named=True)["policy"] == "sjf" and row["jobs"][0] == 3
    assert row.schema["seed"] == pl.Int64()


def rewrite_jobs(tmp_path, jobs):
    write_parquet(jobs, tmp_path / "jobs.parquet")


@pytest.mark.parametrize(
    ("change", "column", "expected"),
    [
        (pl.lit("resnet").alias("model"), "model", "one of ['a', 'b']"),
        (pl.lit(-1.0).alias("arrival_s"), "arrival_s", "finite non-negative arrival times"),
        ((pl.col("arrival_s") - 1.0).alias("deadline_s"), "deadline_s", "deadlines not before"),
        (pl.lit(0).cast(pl.Int32).alias("priority"), "priority", "priorities >= 1"),
        (pl.lit(7).cast(pl.Int64).alias("job_id"), "job_id", "unique job ids"),
        (pl.lit("x").alias("arrival_s"), "arrival_s", "type Float64"),
    ],
)
def test_bad_job_traces_name_the_file_and_column(inputs, change, column, expected):
    tmp_path, jobs = inputs
    rewrite_jobs(tmp_path, jobs.with_columns(change))
    with pytest.raises(InputError) as error:
        run(tmp_path)
    assert str(error.value).startswith(f"{tmp_path / 'jobs.parquet'}: {column}: expected")
    assert expected in str(error.value)


def test_missing_job_column_is_named(inputs):
    tmp_path, jobs = inputs
    rewrite_jobs(tmp_path, jobs.drop("deadline_s"))
    with pytest.raises(InputError, match=r"jobs.parquet: deadline_s: .*missing"):
        run(tmp_path)


def test_unknown_accelerator_names_the_system_file_and_key(inputs):
    tmp_path, _ = inputs
    system = {"instances": [{"name": "e", "count": 1}, {"name": "tpu", "count": 1}]}
    (tmp_path / "system.yaml").write_text(yaml.safe_dump(system))
    with pytest.raises(
        InputError, match=r"system.yaml: instances\[1\].name: expected an accelerator"
    ):
        run(tmp_path)


def test_bad_cost_tables_name_the_file_and_column(inputs):
    tmp_path, _ = inputs
    path = tmp_path / "costs" / "s.parquet"
    costs = pl.read_parquet(path)
    write_parquet(costs.with_columns(pl.lit(-1.0).alias("latency_s")), path)
    with pytest.raises(InputError, match=r"costs: latency_s: expected positive finite latencies"):
        run(tmp_path)
    write_parquet(costs.with_columns(pl.lit("e").alias("accelerator")), path)
    with pytest.raises(InputError, match=r"s.parquet: accelerator: expected 's' in every row"):
        run(tmp_path)
    write_parquet(costs.filter(pl.col("layer") != 2), path)
    with pytest.raises(
        InputError,
        match=r"costs: layer: expected layers 0, 1, ... once each for 'a' on 's', got 'layer 2 ",
    ):
        run(tmp_path)


@pytest.mark.parametrize(
    ("system", "key"),
    [
        ({"instances": []}, "instances"),
        ({"instances": [{"name": "e", "count": 0}]}, r"instances\[0\].count"),
        ({"instances": [{"name": "e", "count": 1}], "dram_gbps": 0}, "dram_gbps"),
        ({"instances": [{"name": "e", "count": 1}], "sharing": "fifo"}, "sharing"),
        ({"instances": [{"name": "e", "count": 1}], "cores": 2}, "cores"),
        ({"dram_gbps": 1.0}, "instances"),
    ],
)
def test_bad_systems_name_the_key(tmp_path, system, key):
    path = tmp_path / "system.yaml"
    path.write_text(yaml.safe_dump(system))
    with pytest.raises(InputError, match=rf"system.yaml: {key}: expected"):
        load_system(path)


def test_unknown_policy_is_an_input_error(inputs):
    tmp_path, _ = inputs
    with pytest.raises(InputError, match=r"--policy: expected one of the available policies"):
        run(tmp_path, "best")
    assert not (tmp_path / "out.parquet").exists()


def test_load_costs_indexes_the_system_types(inputs):
    tmp_path, _ = inputs
    system = load_system(tmp_path / "system.yaml")
    tables = load_costs(tmp_path / "costs", system, tmp_path / "system.yaml")
    assert tables.types == ("e", "s") and tables.models == ("a", "b")


def test_configured_scenarios_generate_and_evaluate_end_to_end(inputs):
    tmp_path, _ = inputs
    config = {
        "models": {"a": {}, "b": {}},
        "system": {"instances": [{"name": "e", "count": 1}, {"name": "s", "count": 1}]},
        "scenarios": {
            "mixed": {
                "models": {"a": 1, "b": 1},
                "tenants": [{"name": "u", "priority": 3, "slack": 4.0, "share": 1}],
                "arrival": {"process": "mmpp", "load": 0.7},
                "jobs": 60,
                "system": {"dram_gbps": 2.0},
            }
        },
    }
    trace = make_workload(config, "mixed", 1, tmp_path / "costs", "config.yaml")
    write_parquet(trace, tmp_path / "trace.parquet")
    result = evaluate_scenario(
        config, "mixed", "prema", 1, tmp_path / "trace.parquet", tmp_path / "costs", record=True
    )
    assert result.metrics["jobs"] == 60 and result.policy == "prema"
    peak = result.timeline.group_by("start_s").agg(pl.col("bandwidth_bps").sum())
    assert peak["bandwidth_bps"].max() <= 2e9 * (1 + 1e-9)
    plot_gantt(result, tmp_path / "gantt.png")
    assert (tmp_path / "gantt.png").stat().st_size > 10_000
    with pytest.raises(InputError, match=r"config.yaml: --scenario: expected one of"):
        make_workload(config, "other", 1, tmp_path / "costs", "config.yaml")
