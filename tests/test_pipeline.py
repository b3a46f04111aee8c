"""End to end: the Snakemake DAG on config/quick.yaml in a temporary copy of the project."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import mlflow
import polars as pl
import pytest

from relmas import catalog
from relmas.config import load_config
from relmas.paths import ResultPaths
from relmas.report import best_baselines
from relmas.rl.agent import read_agent_info
from relmas.schemas import LAYER_SCHEMA, SUMMARY_SCHEMA
from relmas.study import (
    EVALUATION_BATCHES,
    baseline_policies,
    batch_policies,
    evaluation_runs,
    point_label,
    sweep_points,
    sweep_policies,
)
from relmas.tracking import STAGES

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")

pytestmark = pytest.mark.slow


def copy_project(dest: Path) -> Path:
    """The files a user's checkout has that the workflow reads (the package is installed)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("Snakefile", "workflow", "config"):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, dest / name)
        else:
            shutil.copy2(source, dest / name)
    return dest


def snakemake(project: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(SNAKEMAKE), "--configfile", "config/quick.yaml", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )


def results_root(project: Path, configfile: str = "config/quick.yaml") -> Path:
    """Where the study of `configfile` writes (its `results:`)."""
    return project / ResultPaths.of(load_config(project / configfile)).root


def job_stats(text: str) -> Counter:
    """Jobs by rule, from the "Job stats" table Snakemake prints before it runs (or plans)."""
    table = text[text.index("Job stats:") :].splitlines()[3:]
    jobs = Counter()
    for line in table:
        parts = line.split()
        if len(parts) != 2 or parts[0] == "total":
            break
        jobs[parts[0]] = int(parts[1])
    return jobs


def run_quick_dag(dest: Path) -> tuple[Path, dict[str, str], Counter]:
    """The quick DAG with 8 jobs at once (on any number of cores), so that many jobs log into the
    one SQLite MLflow store at the same time; returns the project, env and jobs run by rule.

    Run once per session into `dest` by the `quick_run` fixture (tests/conftest.py), which the
    pytest-xdist workers share: a second call finds it done (its Snakemake output kept beside)."""
    project, output = dest / "project", dest / "snakemake.out"
    if not output.exists():
        shutil.rmtree(project, ignore_errors=True)  # a run that failed or was killed
        copy_project(project)
        proc = snakemake(project, "--cores", "8", env=quick_env(project))
        assert proc.returncode == 0, proc.stderr[-4000:]
        output.write_text(proc.stdout + proc.stderr)
    return project, quick_env(project), job_stats(output.read_text())


def quick_env(project: Path) -> dict[str, str]:
    """This process's environment for Snakemake in `project`: its own MLflow store, this venv."""
    env = dict(os.environ)
    env["MLFLOW_TRACKING_URI"] = f"sqlite:///{project / 'mlflow.db'}"
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env.pop("RELMAS_PIPELINE_ID", None)
    return env


def test_quick_dag_writes_the_layer_table(quick_run) -> None:
    project, _, _ = quick_run
    layers = pl.read_parquet(results_root(project) / "layers.parquet")
    assert dict(layers.schema) == LAYER_SCHEMA
    assert set(layers["model"]) == {"mobilenet_v2", "alexnet", "bert_base"}
    assert (results_root(project) / "logs" / "zoo.log").exists()
    assert (results_root(project) / "benchmarks" / "zoo.tsv").exists()


def test_quick_dag_writes_the_report(quick_run) -> None:
    project, _, _ = quick_run
    config = load_config(project / "config" / "quick.yaml")
    summary = pl.read_parquet(results_root(project) / "report" / "summary.parquet")
    assert {k: summary.schema[k] for k in SUMMARY_SCHEMA} == SUMMARY_SCHEMA
    scenarios = list(config["scenarios"])
    expected = {
        (scenario, policy, seed)
        for scenario, policy in evaluation_runs(config)
        for seed in config["evaluation"]["seeds"]
    }
    assert {policy for _, policy, _ in expected} == set(config["evaluation"]["policies"])
    references = summary.filter(pl.col("kind").is_in(["ceiling", "best_known"]))
    summary = summary.filter(~pl.col("kind").is_in(["ceiling", "best_known"]))
    assert set(summary.select("scenario", "policy", "seed").iter_rows()) == expected
    # the ceiling of every trace is at least every policy's count there, the best known its best
    met = summary.group_by("scenario", "seed").agg(best=(pl.col("sla_rate") * pl.col("jobs")).max())
    per_trace = references.pivot(on="kind", index=["scenario", "seed", "jobs"], values="sla_rate")
    checked = per_trace.join(met, on=["scenario", "seed"])
    assert checked.height == len(scenarios) * len(config["evaluation"]["seeds"])
    for row in checked.iter_rows(named=True):
        assert round(row["best_known"] * row["jobs"]) >= round(row["best"])
        assert row["ceiling"] >= row["best_known"]
    assert summary["sla_rate"].is_between(0, 1).all()
    learned = summary.filter(pl.col("policy").is_in(["relmas", "relmas_resize"]))
    assert learned.height == 2 * len(config["evaluation"]["seeds"])
    assert learned["agent_scenario"].to_list() == learned["scenario"].to_list()
    sweeps = pl.read_parquet(results_root(project) / "report" / "sweeps.parquet")
    assert {k: sweeps.schema[k] for k in SUMMARY_SCHEMA} == SUMMARY_SCHEMA
    expected_points = {
        (name, value, policy, seed)
        for name, value in sweep_points(config)
        for policy in sweep_policies(config, name)
        for seed in config["evaluation"]["seeds"]
    }
    points = sweeps.filter(pl.col("kind") != "ceiling")
    assert set(points.select("sweep", "value", "policy", "seed").iter_rows()) == expected_points
    # each point's trace has its ceiling row, at least every policy's count there
    ceilings = sweeps.filter(pl.col("kind") == "ceiling")
    assert set(ceilings.select("sweep", "value", "seed").iter_rows()) == {
        (name, value, seed) for name, value, _, seed in expected_points
    }
    counts = pl.col("sla_rate") * pl.col("jobs")
    best = points.group_by("sweep", "value", "seed").agg(best=counts.round().max())
    checked = ceilings.join(best, on=["sweep", "value", "seed"])
    assert checked.height == ceilings.height
    assert checked.select((pl.col("best") <= counts.round()).all()).item()
    curve = pl.read_parquet(results_root(project) / "agents" / "mixed" / "relmas" / "curve.parquet")
    assert curve.filter(pl.col("metric") == "val_sla_rate").height >= 2
    validation = pl.concat(
        [pl.read_parquet(results_root(project) / "validation" / f"{s}.parquet") for s in scenarios]
    )
    # every evaluated online baseline on every validation trace (the agents' validation seeds)
    assert set(validation.select("scenario", "policy", "seed").iter_rows()) == {
        (scenario, policy, seed)
        for scenario in scenarios
        for policy in baseline_policies(config, scenario)
        for seed in config["training"]["validation_seeds"]
    }
    assert set(baseline_policies(config)) == set(config["evaluation"]["policies"]) - {
        "random",
        "ga_offline",
        "planner",
        "relmas",
        "relmas_resize",
    }
    # each rule and target-aware baseline ran with the placement chosen for it on validation,
    # in the evaluation and the sweeps alike; the planner with its rule's, the one the relmas
    # agent deploys; the other policies take none
    chosen = dict(validation.select("policy", "placement").unique().iter_rows())
    for rows in (summary, points):
        ran = dict(rows.select("policy", "placement").unique().iter_rows())
        placed = set(catalog.placed()) & set(ran)
        assert placed and {p: ran[p] for p in placed} == {p: chosen[p] for p in placed}
        assert all(ran[p] is None for p in set(ran) - placed - set(catalog.planners()))
    tried = {"all", "bandwidth", "eyeriss_168", "simba_chiplet"}
    assert set(chosen.values()) - {None} <= tried
    deployed = read_agent_info(results_root(project) / "agents" / "mixed" / "relmas").observation
    assert dict(summary.select("policy", "placement").unique().iter_rows())["planner"] == (
        deployed.placement
    )
    assert (results_root(project) / "logs" / "validate" / "mixed.log").is_file()
    report = (results_root(project) / "report" / "report.md").read_text()
    # the headline comes first: the learned policies against the baseline chosen on validation
    first = report.index("\n## ") + 1
    assert report.index("## Learned policies against the best baseline") == first
    (scenario, (best, _)), *_ = best_baselines(validation).items()
    assert f"| {scenario} | relmas | {best} (" in report  # its row of the headline table
    assert "- **relmas beats its best baseline on " in report  # the tally before the table
    assert "(n = 1)" in report and "one evaluation seed, so no interval" in report  # [1000]
    sections = (
        "## How much was left to win: the proven ceiling",
        "## SLA rate vs load and bandwidth",
        "## RELMAS learning curves",
        "## Operator resizing",
    )
    for section in sections:
        assert section in report
    figures = re.findall(r"\]\((figures/[^)]+)\)", report)
    assert {"figures/sweep_load.png", "figures/learning_curves.png"} <= set(figures)
    for figure in figures:
        assert (results_root(project) / "report" / figure).is_file(), figure


# The MLflow stage (contract tag) of each rule's runs.
RULE_STAGES = {
    "zoo": "zoo",
    "profile": "profile",
    "profile_pieces": "profile",
    "workload": "workload",
    "keeper": "keeper",
    "train": "train",
    "validate": "validate",
    "evaluate": "evaluate",
    "evaluate_generalisation": "evaluate",
    "evaluate_baselines": "evaluate",
    "evaluate_targets": "evaluate",
    "bound": "bound",
    "sweep": "sweep",
    "report": "report",
}


def quick_runs(env: dict[str, str]) -> list:
    """Every run of the quick study: the pipeline run, one per job and the sweeps' child runs."""
    mlflow.set_tracking_uri(env["MLFLOW_TRACKING_URI"])
    return mlflow.search_runs(experiment_names=["relmas-quick"], output_format="list")


def job_runs(runs: list) -> list:
    """The runs of the jobs: children of the pipeline run."""
    (pipeline,) = [run for run in runs if run.data.tags["stage"] == "pipeline"]
    return [run for run in runs if run.data.tags.get("mlflow.parentRunId") == pipeline.info.run_id]


def runs_per_job(config: dict, rule: str) -> int:
    """The MLflow runs a job of `rule` opens: one per policy for an evaluation batch's, one per
    evaluation seed for a workload or bound job's (a scenario's traces), else one."""
    batch = rule.removeprefix("evaluate_")
    if batch in EVALUATION_BATCHES:
        return len(batch_policies(config, batch))
    return len(config["evaluation"]["seeds"]) if rule in ("workload", "bound") else 1


def test_quick_dag_logs_one_finished_run_per_job_while_8_run_at_once(quick_run) -> None:
    """One run per job (per policy for an evaluation batch's job), every one FINISHED although 8
    jobs run at once on one SQLite store."""
    project, env, jobs = quick_run
    config = load_config(project / "config" / "quick.yaml")
    runs = quick_runs(env)
    assert all(run.info.status == "FINISHED" for run in runs)
    assert len({run.data.tags["pipeline_id"] for run in runs}) == 1
    runs = job_runs(runs)
    expected = Counter()
    for rule, count in jobs.items():
        if rule != "all":
            expected[RULE_STAGES[rule]] += count * runs_per_job(config, rule)
    assert Counter(run.data.tags["stage"] for run in runs) == expected
    assert jobs["evaluate_baselines"] == jobs["evaluate_targets"] == 1
    assert sum(jobs.values()) - jobs["all"] >= 16  # evaluate and sweep jobs overlap


def test_quick_dag_logs_tagged_mlflow_runs(quick_run) -> None:
    project, env, _ = quick_run
    config = load_config(project / "config" / "quick.yaml")
    runs = job_runs(quick_runs(env))
    stages = Counter(run.data.tags["stage"] for run in runs)
    scenarios = len(config["scenarios"])
    assert stages["zoo"] == 1
    assert stages["workload"] == scenarios * len(config["evaluation"]["seeds"])
    assert stages["report"] == 1
    assert stages["validate"] == scenarios
    trains = [run for run in runs if run.data.tags["stage"] == "train"]
    # relmas and relmas_resize are among the quick config's policies: one agent each
    assert sorted(run.data.tags["policy"] for run in trains) == ["relmas", "relmas_resize"]
    assert len(trains) == 2 * scenarios
    zoo = next(run for run in runs if run.data.tags["stage"] == "zoo")
    assert zoo.data.metrics["alexnet.macs"] > 0
    per_policy = [run for run in runs if run.data.tags["stage"] == "evaluate"]
    sweeps = [run for run in runs if run.data.tags["stage"] == "sweep"]
    assert len(per_policy) == len(evaluation_runs(config))
    assert {run.data.tags["policy"] for run in per_policy} == set(config["evaluation"]["policies"])
    assert all("sla_rate" in run.data.metrics for run in per_policy)
    # the placement each rule and target-aware baseline ran with, as in its summary rows
    summary = pl.read_parquet(results_root(project) / "report" / "summary.parquet")
    ran = dict(summary.select("policy", "placement").unique().drop_nulls().iter_rows())
    placed = {
        run.data.tags["policy"]: run.data.params["placement"]
        for run in per_policy
        if run.data.tags["policy"] in catalog.placed() + catalog.planners()
    }
    assert placed == ran and set(placed) == set(catalog.placed() + catalog.planners()) & set(ran)
    assert all(
        "placement" not in run.data.params
        for run in per_policy
        if run.data.tags["policy"] not in placed
    )
    points = {(name, point_label(value)) for name, value in sweep_points(config)}
    assert {(run.data.tags["sweep"], run.data.tags["value"]) for run in sweeps} == points


def test_quick_study_follows_the_naming_scheme(quick_run) -> None:
    """docs/tracking.md: one experiment per config; what tells runs apart (policy, scenario, seed,
    sweep value) is a tag or a param, never part of a metric name; every evaluation, alone or in a
    sweep, logs the same metric names; params and tags spell a value alike."""
    project, env, _ = quick_run
    config = load_config(project / "config" / "quick.yaml")
    client = mlflow.MlflowClient(env["MLFLOW_TRACKING_URI"])
    assert {e.name for e in client.search_experiments()} <= {"Default", config["experiment"]}
    runs = quick_runs(env)
    seeds = {str(seed) for seed in config["evaluation"]["seeds"]}
    dimensions = (
        set(catalog.names()) | set(config["scenarios"]) | seeds | {"seed", "heuristic", "rule"}
    )
    for run in runs:
        tags, params = run.data.tags, run.data.params
        assert tags["stage"] in STAGES and tags["source"] == "pipeline"
        for name in run.data.metrics:
            named = set(re.split(r"[._/]", name)) | {p for p in catalog.names() if p in name}
            assert not named & dimensions, (tags["stage"], name)
        for key in set(tags) & set(params):
            assert tags[key] == params[key], (tags["stage"], key)
    by_stage = {}
    for run in runs:
        by_stage.setdefault(run.data.tags["stage"], []).append(run)
    evaluate_metrics = {name for run in by_stage["evaluate"] for name in run.data.metrics}
    sweep_children = [run for run in by_stage["sweep"] if "policy" in run.data.tags]
    assert {run.data.tags["policy"] for run in sweep_children} == {
        policy for name in config["sweeps"] for policy in sweep_policies(config, name)
    }
    for run in sweep_children:
        assert {"sla_rate", "antt", "energy_j"} <= set(run.data.metrics) <= evaluate_metrics


def test_every_job_nests_under_one_pipeline_run(quick_run) -> None:
    """One parent run per `snakemake` invocation; every job's run under it, a sweep point's
    policies under the point's run."""
    project, env, jobs = quick_run
    config = load_config(project / "config" / "quick.yaml")
    runs = quick_runs(env)
    pipelines = [run for run in runs if run.data.tags["stage"] == "pipeline"]
    assert len(pipelines) == 1 and pipelines[0].info.status == "FINISHED"
    children = job_runs(runs)
    assert len(children) == sum(
        count * runs_per_job(config, rule) for rule, count in jobs.items() if rule != "all"
    )
    points = {run.info.run_id for run in children if run.data.tags["stage"] == "sweep"}
    rest = [run for run in runs if run not in children and run not in pipelines]
    assert rest and {run.data.tags["mlflow.parentRunId"] for run in rest} == points


def test_runs_carry_their_artifacts(quick_run) -> None:
    """Evaluate: per-job results and the per-seed table; train: the learning curve as step
    metrics, table and figure; report: report.md and every figure."""
    project, env, _ = quick_run
    client = mlflow.MlflowClient(env["MLFLOW_TRACKING_URI"])
    runs = job_runs(quick_runs(env))

    def files(run, path: str = "") -> set[str]:
        return {item.path for item in client.list_artifacts(run.info.run_id, path)}

    evaluate = next(run for run in runs if run.data.tags["stage"] == "evaluate")
    assert {"per_seed.json", "results", "gantt.png"} <= files(evaluate)
    assert files(evaluate, "results")
    train = next(run for run in runs if run.data.tags["stage"] == "train")
    assert {"agent/curve.parquet", "agent/best.pt"} <= files(train, "agent")
    assert "learning_curve.png" in files(train)
    assert len(client.get_metric_history(train.info.run_id, "val_sla_rate")) >= 2
    report = next(run for run in runs if run.data.tags["stage"] == "report")
    figures = {Path(p).name for p in files(report, "figures")}
    on_disk = {p.name for p in (results_root(project) / "report" / "figures").glob("*.png")}
    assert "report.md" in files(report) and figures == on_disk


def test_nothing_to_do_when_nothing_changed(quick_run) -> None:
    project, env, _ = quick_run
    proc = snakemake(project, "-n", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_the_default_study_plans_nothing_under_the_quick_results(quick_run) -> None:
    """Each config writes under its own `results:`: after the quick study, a dry run of the
    default config plans jobs (none of its outputs exist) but none of them under the quick root."""
    project, env, _ = quick_run
    proc = subprocess.run(
        [str(SNAKEMAKE), "-n"], cwd=project, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    planned = [
        Path(path.strip())
        for line in (proc.stdout + proc.stderr).splitlines()
        if re.match(r"\s+(output|log|benchmark): ", line)
        for path in line.split(":", 1)[1].split(",")
    ]
    quick, default = results_root(project), results_root(project, "config/config.yaml")
    assert quick != default and planned
    assert all((project / path).is_relative_to(default) for path in planned)
    assert not any((project / path).is_relative_to(quick) for path in planned)


def planned_jobs(project: Path, env: dict[str, str], configfile: str) -> Counter:
    """The jobs `snakemake -n` would run, by rule (its "Job stats" table)."""
    proc = subprocess.run(
        [str(SNAKEMAKE), "-n", "--quiet", "rules", "--configfile", configfile],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    return job_stats(proc.stdout + proc.stderr)


def variant(project: Path, name: str, old: str, new: str) -> str:
    """A copy of the quick config with one text replacement, as a config file of the project."""
    text = (project / "config" / "quick.yaml").read_text()
    assert old in text
    (project / "config" / name).write_text(text.replace(old, new, 1))
    return f"config/{name}"


def test_changing_an_accelerator_reprofiles_only_that_one(quick_run) -> None:
    project, env, _ = quick_run
    changed = variant(project, "accel.yaml", "glb_kib: 64", "glb_kib: 32")  # simba_chiplet
    jobs = planned_jobs(project, env, changed)
    assert jobs["profile"] == 1 and jobs["validate"] == 1
    assert "zoo" not in jobs
    assert jobs["evaluate"] >= 1 and jobs["report"] == 1


def test_leaving_the_planner_out_reruns_only_the_report(quick_run) -> None:
    # no sweep point runs the planner (tenths of a second per plan) nor reads its options:
    # listing it or not, or changing its knobs, must not rerun the sweeps (minutes each by default)
    project, env, _ = quick_run
    changed = variant(project, "unplanned.yaml", "gacer, planner, relmas", "gacer, relmas")
    assert set(planned_jobs(project, env, changed)) == {"report", "all"}
    changed = variant(
        project, "knobs.yaml", "evaluation:\n", "evaluation:\n  planner: {samples: 3}\n"
    )
    assert set(planned_jobs(project, env, changed)) == {"evaluate", "report", "all"}


def test_changing_a_training_setting_retrains_and_reevaluates_only(quick_run) -> None:
    project, env, _ = quick_run
    changed = variant(project, "train.yaml", "total_steps: 20000", "total_steps: 21000")
    jobs = planned_jobs(project, env, changed)
    # both learned policies (relmas, relmas_resize) of the one scenario, ga_offline, which
    # the relmas agent's schedule seeds, and the planner, which plans for its rule
    assert jobs["train"] == 2 and jobs["evaluate"] == 4 and jobs["report"] == 1
    config = load_config(project / "config" / "quick.yaml")
    assert jobs["sweep"] == len(sweep_points(config))  # every point runs the retrained agent
    # the baselines' validation runs read no training setting but the validation traces'
    assert not {"zoo", "profile", "workload", "validate"} & set(jobs)


def test_changing_the_cuts_reprofiles_pieces_and_revalidates_and_retrains_the_agents(
    quick_run,
) -> None:
    project, env, _ = quick_run
    changed = variant(project, "cuts.yaml", "dims: [K]", "dims: [K, Y]")
    jobs = planned_jobs(project, env, changed)
    accelerators = len(load_config(project / "config" / "quick.yaml")["accelerators"])
    assert jobs["profile_pieces"] == accelerators and "profile" not in jobs
    assert jobs["validate"] == 1  # gacer, a baseline, cuts too
    # both agents: relmas reads no piece table, but its teacher is chosen on the validation rows,
    # which the cuts change through gacer's; then their evaluations, gacer's, ga_offline's
    # (seeded by the relmas agent) and the planner's (planning for its rule)
    assert jobs["train"] == 2 and jobs["evaluate"] == 5
    assert not {"zoo", "workload"} & set(jobs)


def test_a_new_sweep_value_runs_only_that_point(quick_run) -> None:
    project, env, _ = quick_run
    changed = variant(project, "sweep.yaml", "values: [0.5, 1.2]", "values: [0.5, 1.2, 0.9]")
    assert planned_jobs(project, env, changed) == Counter(sweep=1, report=1, all=1)


def test_changing_a_scenario_regenerates_only_its_workloads(quick_run) -> None:
    project, env, _ = quick_run
    changed = variant(project, "slack.yaml", "slack: 4.0", "slack: 5.0")
    jobs = planned_jobs(project, env, changed)
    assert "zoo" not in jobs and "profile" not in jobs
    assert jobs["workload"] == 1 and jobs["validate"] == 1 and jobs["report"] == 1


def test_invalid_config_fails_before_any_job(tmp_path: Path) -> None:
    project = copy_project(tmp_path)
    quick = project / "config" / "quick.yaml"
    quick.write_text(quick.read_text().replace("alexnet: {image_size: 96}", "alexnet: {batch: 0}"))
    env = dict(os.environ, MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'm.db'}")
    proc = snakemake(project, "--cores", "1", env=env)
    assert proc.returncode != 0
    assert "config/quick.yaml: models.alexnet.batch: expected a value > 0, got 0" in proc.stderr
    assert not (project / "results").exists()
