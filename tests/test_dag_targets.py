"""The DAG's targets: every result the README lists is one, so a file deleted by hand is rebuilt.

Snakemake remakes a missing file only if it is a target or a job that needs it runs, so a result
whose consumers are up to date (an agent directory under an up-to-date report) stays missing
unless `rule all` names it. The study is planned, not run: every output is created empty and
marked up to date with `--touch`, then files are deleted and `snakemake -n` tells what it would
redo.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from tests.test_pipeline import SNAKEMAKE, copy_project, job_stats

pytestmark = pytest.mark.slow


def snakemake(project: Path, *args: str, configfile: str = "config/quick.yaml") -> str:
    """Snakemake's output (stdout, then stderr) on `project` with `configfile` and `args`."""
    env = dict(os.environ, MLFLOW_TRACKING_URI=f"sqlite:///{project / 'mlflow.db'}")
    proc = subprocess.run(
        [str(SNAKEMAKE), "--configfile", configfile, *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The quick study with every output present (empty) and up to date."""
    project = copy_project(tmp_path_factory.mktemp("dag"))
    summary = snakemake(project, "--summary").splitlines()
    start = next(i for i, line in enumerate(summary) if line.startswith("output_file\t"))
    for line in summary[start + 1 :]:
        path = project / line.split("\t")[0]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    snakemake(project, "--cores", "1", "--touch")
    assert "Nothing to be done" in snakemake(project, "-n")
    return project


def plan_without(project: Path, *deleted: str) -> Counter:
    """The jobs `snakemake -n` plans once `deleted` (paths under results/quick) are gone."""
    backup = project.parent / "backup"
    results = project / "results"
    shutil.copytree(results, backup, symlinks=True)
    try:
        for name in deleted:
            path = results / "quick" / name
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        plan = snakemake(project, "-n", "--quiet", "rules")
        return Counter() if "Nothing to be done" in plan else job_stats(plan)
    finally:
        shutil.rmtree(results)
        backup.rename(results)


def test_a_deleted_agent_directory_is_retrained(planned: Path) -> None:
    jobs = plan_without(planned, "agents/mixed/relmas")
    # then everything that reads it: its evaluation, ga_offline (seeded by it), the planner (it
    # plans for its rule), the sweep points
    assert jobs["train"] == 1 and jobs["evaluate"] == 3 and jobs["report"] == 1
    assert not {"zoo", "profile", "workload", "validate"} & set(jobs)


@pytest.mark.parametrize(
    ("deleted", "rule"),
    [
        ("workloads/mixed/seed1000.parquet", "workload"),
        ("eval/mixed/fcfs/seed1000.parquet", "evaluate_baselines"),
        ("costs/simba_chiplet.pieces.parquet", "profile_pieces"),
    ],
)
def test_every_deleted_result_is_rebuilt(planned: Path, deleted: str, rule: str) -> None:
    assert plan_without(planned, deleted)[rule] == 1


def test_the_sweep_point_at_the_base_value_reads_the_base_evaluation(tmp_path: Path) -> None:
    """On the default study, the load point at mixed_overload's own load (1.3) reads that
    scenario's evaluation summaries and bounds instead of running them again; another point
    runs its own."""
    project = copy_project(tmp_path)
    plans = {}
    for value in ("1.3", "0.4"):
        target = f"results/default/sweeps/load/{value}.parquet"
        plans[value] = snakemake(project, "-n", "-p", target, configfile="config/config.yaml")
    base, other = plans["1.3"], plans["0.4"]
    assert "--evaluations results/default/eval --bounds results/default/bounds" in base
    assert job_stats(base)["bound"] == 1 and job_stats(base)["evaluate_baselines"] == 1
    assert "--evaluations" not in other and "bound" not in job_stats(other)
