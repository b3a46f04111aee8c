"""Evaluation: simulate() on user inputs, result files, and errors that name the file and column."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import mlflow
import numpy as np
import polars as pl
import pytest
import torch
import yaml

from relmas import catalog
from relmas.ceiling.bound import Bound, relaxation_bound
from relmas.ceiling.instance import Instance
from relmas.ceiling.rows import met_counts, policy_rows
from relmas.ceiling.stage import trace_ceiling
from relmas.cli import main
from relmas.config import load_config, schema_defaults
from relmas.errors import InputError
from relmas.evaluate import (
    SUMMARY_EXTRA,
    agent_scenario,
    best_placed,
    evaluate_scenario,
    policy_extra,
    read_placements,
    simulate,
    simulate_files,
    summary_row,
    validation_summaries,
    write_results,
)
from relmas.figures.gantt import plot_gantt
from relmas.io import read_metadata, read_parquet, write_parquet
from relmas.paths import bound_file, evaluation_file, summary_of
from relmas.policies import make_policy
from relmas.rl.features import Layout
from relmas.rl.network import QNetwork
from relmas.rl.travel import REFERENCE, REFERENCE_PLACEMENT, deployment_options
from relmas.schemas import JOB_SCHEMA, SUMMARY_SCHEMA, SummaryRows
from relmas.sim import load_system
from relmas.sim.costs import load_costs
from relmas.sim.result import JobResults
from relmas.study import (
    Study,
    base_value,
    baseline_policies,
    evaluation_runs,
    generalisation_runs,
    sweep_points,
    sweep_policies,
    target_scenarios,
)
from relmas.sweep import point_config, point_traces, run_sweep_point
from tests.defaults import decision_cost, observation_settings, write_untrained_agent
from tests.synthetic import synthetic_costs
from tests.test_bad_input import quick_costs

ROOT = Path(__file__).resolve().parents[1]


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
        schema_overrides=JOB_SCHEMA,
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
    out = read_parquet(tmp_path / "out.parquet", JobResults)
    assert sorted(out["job_id"].to_list()) == [10, 11, 12]
    assert out.equals(result.jobs)
    metadata = read_metadata(tmp_path / "out.parquet")
    assert json.loads(metadata["relmas.metrics"])["sla_rate"] == result.metrics["sla_rate"]
    assert metadata["relmas.policy"] == "edf" and metadata["relmas.scenario"] == "jobs"
    assert set(json.loads(metadata["relmas.sla_by_tenant"])) == {"u", "v"}


def test_summary_row_has_the_contract_columns(inputs):
    tmp_path, _ = inputs
    row = summary_row(run(tmp_path, "sjf"), "custom", 4)
    assert list(row.columns) == [*SUMMARY_SCHEMA, *SUMMARY_EXTRA, "agent_scenario"]
    assert row.row(0, named=True)["policy"] == "sjf" and row["jobs"][0] == 3
    assert row.schema["seed"] == pl.Int64()


def rewrite_jobs(tmp_path, jobs):
    write_parquet(jobs, tmp_path / "jobs.parquet")


@pytest.mark.parametrize(
    ("change", "column", "expected"),
    [
        (pl.lit("resnet").alias("model"), "model", "one of ['a', 'b']"),
        (pl.lit(-1.0).alias("arrival_s"), "arrival_s", "finite Float64 values in [0, 2^32]"),
        ((pl.col("arrival_s") - 1.0).alias("deadline_s"), "deadline_s", "deadlines not before"),
        (pl.lit(0).cast(pl.Int32).alias("priority"), "priority", "Int32 values of [1, 3, 9]"),
        (pl.lit(7).cast(pl.Int64).alias("job_id"), "job_id", "one row per job_id, got 'a repea"),
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
    expected = r"s.parquet: latency_s: expected finite Float64 values in \[2\^-32, 2\^20\]"
    with pytest.raises(InputError, match=expected):
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
    trace = Study(config, "config.yaml").trace("mixed", 1, tmp_path / "costs")
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
        Study(config, "config.yaml").trace("other", 1, tmp_path / "costs")


def test_evaluate_writes_and_logs_each_service_group(tmp_path, monkeypatch):
    """`relmas evaluate` on a scenario with targets: beside the results, each group's rows, as
    counted by hand from the trace and the per-job results; in its MLflow run, each group's
    achieved rate beside its target."""
    monkeypatch.chdir(tmp_path)
    quick = yaml.safe_load((ROOT / "config" / "quick.yaml").read_text())
    interactive, batch = quick["scenarios"]["mixed"]["tenants"]
    interactive |= {"target": 0.9, "targets": {"bert_base": 0.5}}
    batch |= {"target": 0.6}
    quick["experiment"] = "service-groups"
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(quick))
    quick_costs(tmp_path / "qcosts", load_config(tmp_path / "config.yaml"))
    common = ["--config", "config.yaml", "--scenario", "mixed", "--seed", "1", "--costs", "qcosts"]
    assert main(["workload", *common, "--out", "trace.parquet"]) == 0
    argv = ["evaluate", *common, "--policy", "edf", "--jobs", "trace.parquet", "--out", "r.parquet"]
    assert main(argv) == 0
    met = dict(pl.read_parquet("r.parquet").select("job_id", "met").iter_rows())
    expected = {}
    for job in pl.read_parquet("trace.parquet").iter_rows(named=True):
        if (job["tenant"], job["model"]) == ("interactive", "bert_base"):
            group, target = "interactive/bert_base", 0.5
        else:
            group, target = job["tenant"], {"interactive": 0.9, "batch": 0.6}[job["tenant"]]
        jobs, hits, _ = expected.get(group, (0, 0, target))
        expected[group] = (jobs + 1, hits + met[job["job_id"]], target)
    groups = pl.read_parquet("r.groups.parquet")
    assert set(expected) == {"interactive", "interactive/bert_base", "batch"}
    rows = groups.select("group", "jobs", "met", "target").rows()
    assert {group: (jobs, hits, target) for group, jobs, hits, target in rows} == expected
    assert groups.select("scenario", "policy", "seed").unique().rows() == [("mixed", "edf", 1)]
    assert (groups["achieved"] == groups["met"] / groups["jobs"]).all()
    summary = pl.read_parquet("r.summary.parquet").row(0, named=True)
    assert (summary["targets"], summary["dropped"]) == (3, 0)
    assert summary["targets_met"] == sum(hits >= t * n for n, hits, t in expected.values())
    (run,) = mlflow.search_runs(
        experiment_names=["service-groups"],
        filter_string="tags.stage = 'evaluate'",
        output_format="list",
    )
    for group in groups.iter_rows(named=True):
        assert run.data.metrics[f"achieved.{group['group']}"] == group["achieved"]
        assert run.data.metrics[f"target.{group['group']}"] == group["target"]
    assert run.data.metrics["shortfall"] == pytest.approx(summary["shortfall"])


def test_one_evaluate_of_several_policies_equals_one_per_policy(tmp_path, monkeypatch):
    """An evaluation batch (several --policy in one process, the pipeline's cheap baselines)
    writes for each policy the rows a run of that policy alone writes, and logs one MLflow run per
    policy with the same metrics (but `decision_us`, the wall time a decision took)."""
    monkeypatch.chdir(tmp_path)
    quick = yaml.safe_load((ROOT / "config" / "quick.yaml").read_text())
    quick["experiment"] = "batch"
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(quick))
    quick_costs(tmp_path / "qcosts", load_config(tmp_path / "config.yaml"))
    common = ["--config", "config.yaml", "--scenario", "mixed", "--costs", "qcosts"]
    seeds = ["--seed", "1", "--seed", "2"]
    for seed in ("1", "2"):
        assert main(["workload", *common, "--seed", seed, "--out", f"t{seed}.parquet"]) == 0
    policies = ["sjf_feasible_patient_gated_ordered_below", "random", "prema"]
    trace = ["--jobs", "t{seed}.parquet"]
    batch = [arg for policy in policies for arg in ("--policy", policy)]
    assert (
        main(["evaluate", *common, *seeds, *trace, *batch, "--out", "b/{policy}/{seed}.parquet"])
        == 0
    )
    for policy in policies:
        one = ["--policy", policy, "--out", f"a/{policy}/{{seed}}.parquet"]
        assert main(["evaluate", *common, *seeds, *trace, *one]) == 0
    for policy in policies:
        for seed in ("1", "2"):
            for name in ("{}.parquet", "{}.summary.parquet", "{}.groups.parquet"):
                alone, batched = (
                    pl.read_parquet(Path(run, policy, name.format(seed))).drop(
                        "decision_us", strict=False
                    )
                    for run in ("a", "b")
                )
                assert alone.equals(batched), (policy, name)
    runs = mlflow.search_runs(
        experiment_names=["batch"], filter_string="tags.stage = 'evaluate'", output_format="list"
    )
    by_policy = {}
    for run in runs:
        metrics = {k: v for k, v in run.data.metrics.items() if k != "decision_us"}
        by_policy.setdefault(run.data.tags["policy"], []).append(metrics)
    assert sorted(by_policy) == sorted(policies)
    assert all(first == second for first, second in by_policy.values())


def test_one_workload_or_bound_of_several_seeds_equals_one_per_seed(tmp_path, monkeypatch, capsys):
    """A scenario's traces and their ceilings in one process each (the pipeline's workload and
    bound jobs) are those one run per seed writes, each with its MLflow run; an --out without
    '{seed}' or a seed twice is refused in one line before anything is written."""
    monkeypatch.chdir(tmp_path)
    quick = yaml.safe_load((ROOT / "config" / "quick.yaml").read_text())
    quick["experiment"] = "traces"
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(quick))
    quick_costs(tmp_path / "qcosts", load_config(tmp_path / "config.yaml"))
    common = ["workload", "--config", "config.yaml", "--scenario", "mixed", "--costs", "qcosts"]
    for refused, option in ((["--out", "t.parquet"], "--out"), (["--seed", "2"], "--seed")):
        argv = [*common, "--seed", "1", "--seed", "2", *refused]
        assert main([*argv, "--out", "r{seed}.parquet"] if option == "--seed" else argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and option in err, err
    assert not list(tmp_path.glob("*.parquet"))
    assert main([*common, "--seed", "1", "--seed", "2", "--out", "t{seed}.parquet"]) == 0
    for seed in ("1", "2"):
        assert main([*common, "--seed", seed, "--out", f"one{seed}.parquet"]) == 0
        assert pl.read_parquet(f"t{seed}.parquet").equals(pl.read_parquet(f"one{seed}.parquet"))
    bound = ["bound", *common[1:], "--jobs", "t{seed}.parquet"]
    assert main([*bound, "--seed", "1", "--seed", "2", "--out", "b{seed}.parquet"]) == 0
    for seed in ("1", "2"):
        assert main([*bound, "--seed", seed, "--out", f"bone{seed}.parquet"]) == 0
        rows = [
            pl.read_parquet(name).select(pl.exclude("^.*_s$"))  # but the solvers' seconds
            for name in (f"b{seed}.parquet", f"bone{seed}.parquet")
        ]
        assert rows[0].equals(rows[1]) and rows[0]["seed"].to_list() == [int(seed)]
    runs = mlflow.search_runs(experiment_names=["traces"], output_format="list")
    for stage in ("workload", "bound"):
        seeds = sorted(run.data.tags["seed"] for run in runs if run.data.tags["stage"] == stage)
        assert seeds == ["1", "1", "2", "2"], stage


@pytest.mark.parametrize(
    ("extra", "option"),
    [
        (["--policy", "sjf", "--out", "r{seed}.parquet"], "--out"),
        (["--policy", "sjf", "--out", "{policy}.parquet", "--gantt", "g.png"], "--gantt"),
        (["--policy", "edf", "--out", "{policy}.parquet"], "--policy"),
        (["--policy", "magic", "--out", "{policy}.parquet"], "--policy"),
        (["--policy", "relmas", "--out", "{policy}.parquet", "--agent", "agent"], "--agent"),
    ],
)
def test_a_batch_of_policies_refuses_what_cannot_name_each_output(
    tmp_path, monkeypatch, capsys, extra, option
):
    """Several --policy: outputs without '{policy}' (they would overwrite each other), a policy
    twice, an unknown one, an agent (whose policy?) — one line naming the option, exit 2, nothing
    written."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.yaml").write_text((ROOT / "config" / "quick.yaml").read_text())
    argv = ["evaluate", "--config", "config.yaml", "--scenario", "mixed", "--seed", "1"]
    assert main([*argv, "--policy", "edf", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and option in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]


# --- generalisation and sweeps: another scenario's agent, one parameter varied -------------------


def untrained_agent(directory, scenario: str, instance_types, types, scale: float = 1.0) -> None:
    """An agent directory as `relmas train` writes it, with an untrained network (no training)
    whose weights are scaled by `scale` (large: Q-values far apart)."""
    settings = observation_settings(candidates=1, reference="sjf_feasible", service=False)
    layout = Layout(settings.slots, len(types), len(instance_types))
    torch.manual_seed(0)
    net = QNetwork(layout.size, layout.actions, (8,), False, layout.rows, layout.variants)
    with torch.no_grad():
        for weight in net.parameters():
            weight.mul_(scale)
    write_untrained_agent(
        directory,
        net,
        settings,
        scenario=scenario,
        instance_types=instance_types,
        accelerator_types=types,
        cost=decision_cost(types[0]),
        teacher=None,
        teacher_bonus=0.0,
        validation={"sla_rate": 0.5},
        teachers_validation={"sjf_feasible": 0.6},
    )


@pytest.fixture
def study(inputs):
    """Two scenarios of one system, a generalisation pair, two sweeps, and `small`'s agent."""
    tmp_path, _ = inputs
    tenants = [{"name": "u", "priority": 3, "slack": 4.0, "share": 1}]
    config = {
        "models": {"a": {}, "b": {}},
        "system": {"instances": [{"name": "e", "count": 1}, {"name": "s", "count": 1}]},
        "scenarios": {
            "small": {
                "models": {"a": 1, "b": 1},
                "tenants": tenants,
                "arrival": {"process": "poisson", "load": 0.9},
                "jobs": 30,
                "system": {"dram_gbps": 4.0},
            },
            "big": {
                "models": {"a": 1},
                "tenants": tenants,
                "arrival": {"process": "mmpp", "load": 0.7},
                "jobs": 40,
            },
            "other_system": {
                "models": {"a": 1},
                "tenants": tenants,
                "arrival": {"process": "poisson", "load": 0.7},
                "jobs": 10,
                "system": {"instances": [{"name": "s", "count": 2}]},
            },
        },
        "evaluation": {
            "seeds": [1, 2],
            "policies": ["fcfs", "sjf", "ga_offline", "relmas"],
            "ga": {},
            "generalisation": [{"agent": "small", "scenario": "big"}],
            "ceiling": {"time_limit_s": 20, "threads": 1},
        },
        "sweeps": {
            "load": {"scenario": "small", "parameter": "load", "values": [0.5, 1.5]},
            "bandwidth": {"scenario": "small", "parameter": "dram_gbps", "values": [1.0, 8.0]},
        },
    }
    agents = tmp_path / "agents" / "small"
    (agents / "relmas").mkdir(parents=True)
    untrained_agent(agents / "relmas", "small", ("e", "s"), ("e", "s"))
    return config, tmp_path, agents


def test_generalisation_runs_pair_scenarios_of_the_same_instances(study):
    config, _, _ = study
    assert generalisation_runs(config) == [("small", "big", "relmas")]
    for pair, message in (
        ({"agent": "small", "scenario": "nope"}, r"generalisation\[0\]\.scenario: expected one of"),
        ({"agent": "big", "scenario": "big"}, r"generalisation\[0\]: expected two different"),
        (
            {"agent": "small", "scenario": "other_system"},
            r"generalisation\[0\]\.scenario: expected a scenario with the accelerator instances "
            r"of small \['e', 's'\], got \"other_system \['s', 's'\]\"",
        ),
    ):
        config["evaluation"]["generalisation"] = [pair]
        with pytest.raises(InputError, match=r"c\.yaml: evaluation\." + message):
            generalisation_runs(config, "c.yaml")


def test_an_agent_deployed_on_another_scenario_names_where_it_was_trained(study):
    config, tmp_path, agents = study
    trace = Study(config).trace("big", 1, tmp_path / "costs")
    write_parquet(trace, tmp_path / "big.parquet")
    agent = agents / "relmas"
    result = evaluate_scenario(
        config, "big", "relmas", 1, tmp_path / "big.parquet", tmp_path / "costs",
        policy_options={"agent": str(agent)},
    )  # fmt: skip
    row = summary_row(result, "big", 1, policy_extra("relmas", agent, result), "small")
    assert row["policy"].item() == "relmas" and row["agent_scenario"].item() == "small"
    rows = row["overhead_rows_per_decision"].item()
    assert row["overhead_macs_per_decision"].item() == pytest.approx(100 * rows) and rows >= 1
    assert agent_scenario("relmas", agent) == "small" and agent_scenario("sjf", None) is None
    sjf = evaluate_scenario(config, "big", "sjf", 1, tmp_path / "big.parquet", tmp_path / "costs")
    assert summary_row(sjf, "big", 1)["agent_scenario"].item() is None


def test_a_reaimed_agent_is_its_new_rule_with_its_placement_schedule_for_schedule(study):
    """Re-aimed at a rule that leaves type `e` idle, the agent (reference sjf_feasible on the
    whole system, no keeper) is that rule so placed: its network, whose Q-values lie far apart,
    follows the new teacher always."""
    config, tmp_path, agents = study
    trace = Study(config).trace("big", 1, tmp_path / "costs")
    write_parquet(trace, tmp_path / "big.parquet")
    costs, agent = tmp_path / "costs", tmp_path / "loud"
    agent.mkdir()
    untrained_agent(agent, "small", ("e", "s"), ("e", "s"), scale=100.0)

    def jobs(policy, **options):
        run = evaluate_scenario(config, "big", policy, 1, tmp_path / "big.parquet", costs,
                                policy_options=options)  # fmt: skip
        return run.jobs.drop("dropped")

    aimed = jobs("relmas", agent=agent, reference="edf_feasible", reference_placement="s")
    assert aimed.equals(jobs("edf_feasible", placement="s"))
    assert not aimed.equals(jobs("edf_feasible"))  # the placement is the one re-aimed at
    assert not jobs("relmas", agent=agent).equals(aimed)  # as trained: its own network's choices


def test_evaluate_deploys_a_foreign_agent_as_its_target_s_validation_chooses(
    tmp_path, monkeypatch, capsys
):
    """`relmas evaluate` of another scenario's agent with the scenario's validation rows runs it
    as the better of as trained and re-aimed on the scenario's validation traces, says which,
    and records it in the MLflow run; without the rows, or with rows of no rule, as trained."""
    monkeypatch.chdir(tmp_path)
    quick = yaml.safe_load((ROOT / "config" / "quick.yaml").read_text())
    quick["experiment"] = "foreign"
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(quick))
    config = load_config(tmp_path / "config.yaml")
    quick_costs(tmp_path / "qcosts", config)
    common = ["--config", "config.yaml", "--scenario", "mixed", "--costs", "qcosts"]
    assert main(["workload", *common, "--seed", "1", "--out", "t.parquet"]) == 0
    validation_summaries(config, "mixed", "qcosts").write_parquet("val.parquet")
    study = Study(config)
    system, tables = study.system("mixed"), study.costs("mixed", "qcosts")
    agent = tmp_path / "agent"
    agent.mkdir()
    types = system.accelerator_types
    untrained_agent(agent, "elsewhere", system.instance_types, types, scale=100.0)
    best = best_placed("val.parquet", "mixed", types)
    aimed = {"reference": best[0], "reference_placement": best[1]}

    def validated(**options):
        runs = [
            simulate(system, jobs, tables, make_policy("relmas", agent=str(agent), **options))
            for jobs in study.validation_traces("mixed", "qcosts").values()
        ]
        return statistics.fmean(run.metrics["sla_rate"] for run in runs)

    better = validated(**aimed) > validated()
    argv = ["evaluate", *common, "--policy", "relmas", "--seed", "1", "--jobs", "t.parquet"]
    argv += ["--agent", str(agent)]
    assert main([*argv, "--placements", "val.parquet", "--out", "chosen.parquet"]) == 0
    said = capsys.readouterr().out
    assert (f"deployed {aimed}" in said) == better and ("deployed as trained" in said) != better
    (run,) = mlflow.search_runs(
        experiment_names=["foreign"], filter_string="tags.stage = 'evaluate'", output_format="list"
    )
    assert (run.data.params.get("reference") == best[0]) == better
    chosen = make_policy("relmas", agent=str(agent), **(aimed if better else {}))
    deployed = simulate(system, pl.read_parquet("t.parquet"), tables, chosen)
    assert pl.read_parquet("chosen.parquet")["finish_s"].equals(deployed.jobs["finish_s"])
    # without the validation rows, or with rows of no rule: as trained, and said so
    fcfs_only = config | {"evaluation": config["evaluation"] | {"policies": ["fcfs"]}}
    validation_summaries(fcfs_only, "mixed", "qcosts").write_parquet("fcfs.parquet")
    for extra in ([], ["--placements", "fcfs.parquet"]):
        assert main([*argv, *extra, "--out", "plain.parquet"]) == 0
        assert "as trained" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("as_trained", "re_aimed", "chosen"),
    [
        ({"sla_rate": 0.5}, {"sla_rate": 0.6}, True),
        ({"sla_rate": 0.6}, {"sla_rate": 0.6}, False),  # a tie keeps the agent as trained
        ({"sla_rate": 0.6}, {"sla_rate": 0.5}, False),
        # with service targets the least shortfall first, as every validation choice
        ({"sla_rate": 0.5, "shortfall": 0.01}, {"sla_rate": 0.6, "shortfall": 0.02}, False),
        ({"sla_rate": 0.6, "shortfall": 0.02}, {"sla_rate": 0.5, "shortfall": 0.01}, True),
    ],
)
def test_a_foreign_agent_is_deployed_as_the_better_on_validation(as_trained, re_aimed, chosen):
    """Each deployment scored as the mean over the validation traces (a trace without targets
    reports no shortfall)."""
    none = {"shortfall": None} if "shortfall" not in as_trained else {}

    def score(options):
        runs = re_aimed if options else as_trained
        return [{k: v * 2 for k, v in runs.items()} | none, {k: 0.0 for k in runs} | none]

    options = deployment_options(("edf_feasible", "bandwidth"), score)
    aimed = {REFERENCE: "edf_feasible", REFERENCE_PLACEMENT: "bandwidth"}
    assert options == (aimed if chosen else {})


def test_sweep_points_change_one_parameter_of_the_same_traces(study):
    config, tmp_path, _ = study
    costs = tmp_path / "costs"
    low, high = (point_traces(config, "load", v, costs)[1] for v in (0.5, 1.5))
    assert config["scenarios"]["small"]["arrival"]["load"] == 0.9  # the config is not changed
    traces = [low, high]
    assert (
        traces[0].drop("arrival_s", "deadline_s").equals(traces[1].drop("arrival_s", "deadline_s"))
    )
    scaled = traces[0]["arrival_s"] * 0.5 / 1.5
    assert np.allclose(traces[1]["arrival_s"], scaled, rtol=1e-12)  # same jobs, time rescaled
    base = Study(config).trace("small", 1, costs)
    assert all(point_traces(config, "bandwidth", v, costs)[1].equals(base) for v in (1.0, 8.0))
    assert point_config(config, "bandwidth", 8.0)["scenarios"]["small"]["system"]["dram_gbps"] == 8
    assert sweep_points(config) == [
        ("load", 0.5),
        ("load", 1.5),
        ("bandwidth", 1.0),
        ("bandwidth", 8.0),
    ]
    with pytest.raises(InputError, match=r"c\.yaml: --sweep: expected one of the configured"):
        point_config(config, "nope", 1.0, "c.yaml")
    config["sweeps"]["load"]["scenario"] = "gone"
    with pytest.raises(InputError, match=r"c\.yaml: sweeps\.load\.scenario: expected one of"):
        sweep_points(config, "c.yaml")


def test_validation_runs_every_evaluated_baseline_on_the_agents_validation_traces(study):
    config, tmp_path, _ = study
    config = config | {"training": {"validation_seeds": [7, 8], "jobs": 12}}
    costs = tmp_path / "costs"
    frame = validation_summaries(config, "small", costs)
    # the online baselines among the evaluated policies: not the offline bound, not relmas
    assert frame.select("policy", "seed").rows() == [
        ("fcfs", 7),
        ("sjf", 7),
        ("fcfs", 8),
        ("sjf", 8),
    ]
    assert set(frame["jobs"]) == {12} and set(frame["scenario"]) == {"small"}
    study = Study(config)
    traces = study.validation_traces("small", costs)
    sjf = simulate(study.system("small"), traces[8], study.costs("small", costs), "sjf")
    rate = frame.filter((pl.col("policy") == "sjf") & (pl.col("seed") == 8))["sla_rate"].item()
    assert rate == sjf.metrics["sla_rate"]
    assert not traces[8].equals(study.trace("small", 1, costs))  # not an evaluation trace


def test_a_sweep_point_runs_every_online_policy_with_the_base_agent(study):
    config, tmp_path, agents = study
    point = run_sweep_point(config, "bandwidth", 1.0, tmp_path / "costs", agents)
    frame = policy_rows(point)
    assert frame.height == 2 * 3  # seeds x (fcfs, sjf, relmas): no offline bound
    assert set(frame["kind"]) == {"heuristic", "learned"}
    assert (
        set(frame["policy"])
        == {"fcfs", "sjf", "relmas"}
        == set(sweep_policies(config, "bandwidth"))
    )
    assert {k: frame.schema[k] for k in SUMMARY_SCHEMA} == SUMMARY_SCHEMA
    assert set(frame["sweep"]) == {"bandwidth"} and set(frame["value"]) == {1.0}
    assert (frame["mean_bandwidth_gbps"] <= 1.0 + 1e-9).all()  # the point's bandwidth applies
    learned = frame.filter(pl.col("policy") == "relmas")
    assert set(learned["agent_scenario"]) == {"small"}
    # 100 MACs per row scored (`decision_cost`), one row at least (wait or a pair)
    macs, rows = learned["overhead_macs_per_decision"], learned["overhead_rows_per_decision"]
    assert (rows >= 1).all() and ((macs - 100 * rows).abs() < 1e-6 * macs).all()
    assert frame.filter(pl.col("policy") != "relmas")["agent_scenario"].null_count() == 4
    with pytest.raises(InputError, match=r"--agents: expected the agents directory of small"):
        run_sweep_point(config, "bandwidth", 1.0, tmp_path / "costs", None)


def test_a_sweep_point_has_the_proven_ceiling_of_each_trace_above_every_policy(study):
    config, tmp_path, agents = study
    costs = tmp_path / "costs"
    point = run_sweep_point(config, "bandwidth", 1.0, costs, agents)
    ceiling = point.filter(pl.col("kind") == "ceiling").sort("seed")
    assert ceiling["policy"].to_list() == ["ceiling"] * 2 and ceiling["seed"].to_list() == [1, 2]
    assert set(ceiling["sweep"]) == {"bandwidth"} and set(ceiling["value"]) == {1.0}
    assert ceiling["ceiling_status"].is_in(["converged", "time_limit"]).all()
    assert (ceiling["ceiling_s"] > 0).all()
    assert policy_rows(point)["ceiling_status"].null_count() == 6
    best = met_counts(policy_rows(point)).group_by("seed").agg(pl.col("met").max()).sort("seed")
    assert (ceiling["sla_rate"] * ceiling["jobs"] >= best["met"]).all()
    # the bound of the point's own trace on the point's system (its bandwidth), not the base's
    at = Study(point_config(config, "bandwidth", 1.0))
    system, tables = at.system("small"), at.costs("small", costs)
    for seed, jobs in point_traces(config, "bandwidth", 1.0, costs).items():
        bound = relaxation_bound(Instance.of(system, tables, jobs), time_limit_s=20)
        row = ceiling.filter(pl.col("seed") == seed).row(0, named=True)
        assert (row["sla_rate"], row["jobs"]) == (bound.met / bound.jobs, bound.jobs)


def test_a_sweep_point_refuses_a_ceiling_below_a_policy(study, monkeypatch):
    config, tmp_path, agents = study
    wrong = Bound(met=0, value=0.0, jobs=30, status="converged", rounds=1, windows=0, seconds=0.1)
    monkeypatch.setattr("relmas.sweep.relaxation_bound", lambda *args, **kwargs: wrong)
    with pytest.raises(RuntimeError, match=r"on small, seed 1 at bandwidth 8, above the ceiling 0"):
        run_sweep_point(config, "bandwidth", 8.0, tmp_path / "costs", agents)


def test_the_base_point_of_a_sweep_is_read_from_the_evaluation_and_bounds(study):
    """The point at the base scenario's own bandwidth is its evaluation (the same traces): read
    from the evaluate and bound stages' files, its rows are those a point run computes, but for
    timing; a file of another run under an expected name, or another value, is refused."""
    config, tmp_path, agents = study
    costs = tmp_path / "costs"
    assert base_value(config, "bandwidth") == 4.0 and base_value(config, "load") == 0.9
    evals, bounds = tmp_path / "eval", tmp_path / "bounds"
    for seed, jobs in point_traces(config, "bandwidth", 4.0, costs).items():
        trace = tmp_path / f"seed{seed}.parquet"
        write_parquet(jobs, trace)
        for policy in sweep_policies(config, "bandwidth"):
            agent = agents / policy if policy in catalog.learned() else None
            options = {"agent": str(agent)} if agent else {}
            result = evaluate_scenario(
                config, "small", policy, seed, trace, costs, policy_options=options
            )
            out = evaluation_file(evals, "small", policy, seed)
            extra = policy_extra(policy, agent, result)
            trained_on = agent_scenario(policy, agent)
            write_results(
                result, out, summary_of(out), scenario="small", seed=seed, extra=extra,
                agent_scenario=trained_on,
            )  # fmt: skip
        # the bound stage's row (with the schema's defaults, as `relmas bound` reads the config)
        ceiling = schema_defaults("evaluation.ceiling") | config["evaluation"]["ceiling"]
        filled = config | {"evaluation": config["evaluation"] | {"ceiling": ceiling}}
        row = trace_ceiling(filled, "small", seed, trace, costs)
        write_parquet(row, bound_file(bounds, "small", seed))
    timing = ["decision_us", "decision_time_ratio", "ceiling_s"]
    computed = run_sweep_point(config, "bandwidth", 4.0, costs, agents)
    read = run_sweep_point(config, "bandwidth", 4.0, costs, agents, base_runs=(evals, bounds))
    assert read.drop(timing).equals(computed.drop(timing))
    with pytest.raises(InputError, match=r"--evaluations: expected only at the base scenario's"):
        run_sweep_point(config, "bandwidth", 8.0, costs, agents, base_runs=(evals, bounds))
    summary = summary_of(evaluation_file(evals, "small", "sjf", 2))
    write_parquet(read_parquet(summary, SummaryRows).with_columns(seed=pl.lit(1)), summary)
    with pytest.raises(InputError, match=r"sjf/seed2\.summary\.parquet: seed: expected only 2"):
        run_sweep_point(config, "bandwidth", 4.0, costs, agents, base_runs=(evals, bounds))


def test_target_aware_baselines_run_only_where_tenants_have_targets():
    """On the default study the target-aware baselines are evaluated, validated and swept only on
    the scenarios whose tenants have targets (elsewhere each is its base rule: a duplicate row),
    and ga_offline only on the scenarios small enough for it."""
    config = load_config("config/config.yaml")
    targeted = set(target_scenarios(config))
    assert targeted == {"service_levels", "service_levels_firm"}
    runs = evaluation_runs(config)
    target_aware = set(catalog.of_kind("target"))
    assert {s for s, p in runs if p in target_aware} == targeted
    assert {s for s, p in runs if p == "ga_offline"} == {"mixed_small"}
    for scenario in config["scenarios"]:
        evaluated = {p for s, p in runs if s == scenario}
        baselines = set(baseline_policies(config, scenario))
        assert baselines <= evaluated and bool(baselines & target_aware) == (scenario in targeted)
        assert "sjf_feasible_patient_gated_ordered" in baselines
    for sweep in config["sweeps"]:
        assert not set(sweep_policies(config, sweep)) & target_aware
    assert set(baseline_policies(config)) >= target_aware


def test_each_rule_takes_the_placement_best_on_the_validation_traces(study, tmp_path):
    """The validation rows of a rule baseline are those of its placement: the best mean SLA
    rate on the validation traces of the whole system, the bandwidth-aware placement and the
    one subset of types best for the strongest rule with `bandwidth` (first of equals in that
    order), as recomputed here run by run; the evaluation reads them back."""
    config, costs, _ = study
    rules = ["sjf_feasible", "edf_feasible_patient_gated"]
    config = config | {
        "training": {"validation_seeds": [7, 8], "jobs": 30},
        "evaluation": config["evaluation"]
        | {"policies": ["fcfs", *rules]}
        | {"placements": ["bandwidth", "types"]},
    }
    costs = costs / "costs"
    frame = validation_summaries(config, "small", costs)
    study = Study(config)
    system, tables = study.system("small"), study.costs("small", costs)
    traces = study.validation_traces("small", costs).values()

    def mean(policy, placement):
        return statistics.fmean(
            simulate(system, jobs, tables, make_policy(policy, placement=placement)).metrics[
                "sla_rate"
            ]
            for jobs in traces
        )

    proxy = max(rules, key=lambda rule: mean(rule, "bandwidth"))
    subset = max(["e", "s"], key=lambda kept: mean(proxy, kept))
    chosen = dict(frame.select("policy", "placement").unique().iter_rows())
    assert chosen["fcfs"] is None and frame.height == 3 * 2
    for rule in rules:
        candidates = ["all", "bandwidth", subset]
        assert chosen[rule] == max(candidates, key=lambda placement: mean(rule, placement))
    path = tmp_path / "validation.parquet"
    frame.write_parquet(path)
    types = system.accelerator_types
    assert read_placements(path, "small", types) == {rule: chosen[rule] for rule in rules}
    # a hand-edited placement, or rows of another scenario, are refused naming the file
    for change, key in ((pl.lit("e+nowhere"), "placement"), (pl.lit("x"), "scenario")):
        frame.with_columns(change.alias(key)).write_parquet(path)
        with pytest.raises(InputError, match=f"^{path}: {key}"):
            read_placements(path, "small", types)
