"""End to end: the Snakemake DAG on config/quick.yaml in a temporary copy of the project."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import mlflow
import polars as pl
import pytest

from relmas.schemas import LAYER_SCHEMA

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


def test_quick_dag_logs_tagged_mlflow_runs(quick_run) -> None:
    _, env = quick_run
    mlflow.set_tracking_uri(env["MLFLOW_TRACKING_URI"])
    runs = mlflow.search_runs(
        experiment_names=["relmas-quick"], filter_string="tags.stage = 'zoo'", output_format="list"
    )
    assert len(runs) == 1
    run = runs[0]
    assert run.info.status == "FINISHED"
    assert run.data.tags["pipeline_id"]
    assert run.data.metrics["alexnet.macs"] > 0


def test_nothing_to_do_when_nothing_changed(quick_run) -> None:
    project, env = quick_run
    proc = snakemake(project, "-n", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_invalid_config_fails_before_any_job(tmp_path: Path) -> None:
    project = copy_project(tmp_path)
    quick = project / "config" / "quick.yaml"
    quick.write_text(quick.read_text().replace("alexnet: {image_size: 96}", "alexnet: {batch: 0}"))
    env = dict(os.environ, MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'm.db'}")
    proc = snakemake(project, "--cores", "1", env=env)
    assert proc.returncode != 0
    assert "config/quick.yaml: models.alexnet.batch: expected a value > 0, got 0" in proc.stderr
    assert not (project / "results").exists()
