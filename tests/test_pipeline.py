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

from relmas.config import load_config
from relmas.evaluate import evaluation_runs
from relmas.schemas import LAYER_SCHEMA, SUMMARY_SCHEMA

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


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory):
    project = copy_project(tmp_path_factory.mktemp("project"))
    env = dict(os.environ)
    env["MLFLOW_TRACKING_URI"] = f"sqlite:///{project / 'mlflow.db'}"
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env.pop("RELMAS_PIPELINE_ID", None)
    proc = snakemake(project, "--cores", "2", env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return project, env


def test_quick_dag_writes_the_layer_table(quick_run) -> None:
    project, _ = quick_run
    layers = pl.read_parquet(project / "results" / "layers.parquet")
    assert dict(layers.schema) == LAYER_SCHEMA
    assert set(layers["model"]) == {"mobilenet_v2", "alexnet", "bert_base"}
    assert (project / "results" / "logs" / "zoo.log").exists()
    assert (project / "results" / "benchmarks" / "zoo.tsv").exists()


def test_quick_dag_writes_the_report(quick_run) -> None:
    project, _ = quick_run
    config = load_config(project / "config" / "quick.yaml")
    summary = pl.read_parquet(project / "results" / "report" / "summary.parquet")
    assert {k: summary.schema[k] for k in SUMMARY_SCHEMA} == SUMMARY_SCHEMA
    expected = {
        (scenario, policy, seed)
        for scenario, policy in evaluation_runs(config)
        for seed in config["evaluation"]["seeds"]
    }
    assert {policy for _, policy, _ in expected} == set(config["evaluation"]["policies"])
    assert set(summary.select("scenario", "policy", "seed").iter_rows()) == expected
    assert summary["sla_rate"].is_between(0, 1).all()
    report = (project / "results" / "report" / "report.md").read_text()
    for figure in re.findall(r"\]\((figures/[^)]+)\)", report):
        assert (project / "results" / "report" / figure).is_file(), figure


def test_quick_dag_logs_tagged_mlflow_runs(quick_run) -> None:
    project, env = quick_run
    config = load_config(project / "config" / "quick.yaml")
    mlflow.set_tracking_uri(env["MLFLOW_TRACKING_URI"])
    runs = mlflow.search_runs(experiment_names=["relmas-quick"], output_format="list")
    assert all(run.info.status == "FINISHED" for run in runs)
    assert len({run.data.tags["pipeline_id"] for run in runs}) == 1
    stages = Counter(run.data.tags["stage"] for run in runs)
    scenarios = len(config["scenarios"])
    assert stages["zoo"] == 1
    assert stages["profile"] == len(config["accelerators"])
    assert stages["workload"] == scenarios * len(config["evaluation"]["seeds"])
    assert stages["evaluate"] == len(evaluation_runs(config))
    assert stages["report"] == 1
    assert stages["train"] == scenarios  # relmas is among the quick config's policies
    zoo = next(run for run in runs if run.data.tags["stage"] == "zoo")
    assert zoo.data.metrics["alexnet.macs"] > 0
    evaluate = [run for run in runs if run.data.tags["stage"] == "evaluate"]
    assert {run.data.tags["policy"] for run in evaluate} == set(config["evaluation"]["policies"])
    assert all("sla_rate" in run.data.metrics for run in evaluate)


def test_nothing_to_do_when_nothing_changed(quick_run) -> None:
    project, env = quick_run
    proc = snakemake(project, "-n", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "Nothing to be done" in proc.stdout + proc.stderr


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
    text = proc.stdout + proc.stderr
    table = text[text.index("Job stats:") :].splitlines()[3:]
    jobs = Counter()
    for line in table:
        parts = line.split()
        if len(parts) != 2 or parts[0] == "total":
            break
        jobs[parts[0]] = int(parts[1])
    return jobs


def variant(project: Path, name: str, old: str, new: str) -> str:
    """A copy of the quick config with one text replacement, as a config file of the project."""
    text = (project / "config" / "quick.yaml").read_text()
    assert old in text
    (project / "config" / name).write_text(text.replace(old, new, 1))
    return f"config/{name}"


def test_changing_an_accelerator_reprofiles_only_that_one(quick_run) -> None:
    project, env = quick_run
    changed = variant(project, "accel.yaml", "glb_kib: 64", "glb_kib: 32")  # simba_chiplet
    jobs = planned_jobs(project, env, changed)
    assert jobs["profile"] == 1
    assert "zoo" not in jobs
    assert jobs["evaluate"] >= 1 and jobs["report"] == 1


def test_changing_a_training_setting_retrains_and_reevaluates_only(quick_run) -> None:
    project, env = quick_run
    changed = variant(project, "train.yaml", "total_steps: 20000", "total_steps: 21000")
    jobs = planned_jobs(project, env, changed)
    assert jobs["train"] == 1 and jobs["evaluate"] == 1 and jobs["report"] == 1
    assert not {"zoo", "profile", "workload"} & set(jobs)


def test_changing_a_scenario_regenerates_only_its_workloads(quick_run) -> None:
    project, env = quick_run
    changed = variant(project, "slack.yaml", "slack: 4.0", "slack: 5.0")
    jobs = planned_jobs(project, env, changed)
    assert "zoo" not in jobs and "profile" not in jobs
    assert jobs["workload"] == 1 and jobs["report"] == 1


def test_invalid_config_fails_before_any_job(tmp_path: Path) -> None:
    project = copy_project(tmp_path)
    quick = project / "config" / "quick.yaml"
    quick.write_text(quick.read_text().replace("alexnet: {image_size: 96}", "alexnet: {batch: 0}"))
    env = dict(os.environ, MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'm.db'}")
    proc = snakemake(project, "--cores", "1", env=env)
    assert proc.returncode != 0
    assert "config/quick.yaml: models.alexnet.batch: expected a value > 0, got 0" in proc.stderr
    assert not (project / "results").exists()
