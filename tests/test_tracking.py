"""MLflow tracking: contract tags, race-free experiment creation, no run lost to SQLite locks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest

from relmas import tracking
from relmas.config import config_hash

WORKER = """
import sys
from relmas import tracking
from relmas.config import config_hash
i = int(sys.argv[1])
with tracking.stage_run("evaluate", {"experiment": "race"}, tags={"seed": i}) as run:
    for step in range(20):
        run.log_metrics({"sla_rate": step / 20, "worker": i}, step=step)
"""


def test_stage_run_tags_params_metrics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'm.db'}")
    monkeypatch.setenv(tracking.PIPELINE_ID_ENV, "pipe-1")
    with tracking.stage_run(
        "profile",
        {"experiment": "unit"},
        tags={"accelerator": "eyeriss_168"},
        params={"spec": {"pe_rows": 12, "pe_cols": 14}},
    ) as run:
        run.log_metrics({"cycles": 5.0})
    runs = mlflow.search_runs(experiment_names=["unit"], output_format="list")
    assert len(runs) == 1
    data = runs[0].data
    assert data.tags["stage"] == "profile"
    assert data.tags["pipeline_id"] == "pipe-1"
    assert data.tags["config_hash"] == config_hash({"experiment": "unit"})
    assert data.tags["accelerator"] == "eyeriss_168"
    assert data.params["spec.pe_rows"] == "12"
    assert data.metrics["cycles"] == 5.0
    assert runs[0].info.status == "FINISHED"


def test_failed_stage_is_marked_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'm.db'}")
    with pytest.raises(RuntimeError), tracking.stage_run("zoo", {"experiment": "fail"}):
        raise RuntimeError("boom")
    (run,) = mlflow.search_runs(experiment_names=["fail"], output_format="list")
    assert run.info.status == "FAILED"


def test_unknown_stage_is_refused() -> None:
    with pytest.raises(ValueError), tracking.stage_run("train-ish", None):
        pass


def test_concurrent_processes_lose_no_run(tmp_path: Path) -> None:
    """Six processes create the store, the experiment and their runs at the same moment."""
    env = dict(os.environ, MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'm.db'}")
    env[tracking.PIPELINE_ID_ENV] = "pipe-race"
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER, str(i)], env=env, stderr=subprocess.PIPE)
        for i in range(6)
    ]
    errors = [p.communicate()[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, errors
    mlflow.set_tracking_uri(env["MLFLOW_TRACKING_URI"])
    runs = mlflow.search_runs(experiment_names=["race"], output_format="list")
    assert sorted(int(r.data.tags["seed"]) for r in runs) == list(range(6))
    client = mlflow.MlflowClient(env["MLFLOW_TRACKING_URI"])
    for run in runs:
        assert len(client.get_metric_history(run.info.run_id, "sla_rate")) == 20
        assert run.data.tags["pipeline_id"] == "pipe-race"


def test_a_command_run_by_hand_is_marked_manual_and_not_nested(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'm.db'}")
    monkeypatch.delenv(tracking.PIPELINE_ID_ENV, raising=False)
    monkeypatch.delenv(tracking.PIPELINE_RUN_ENV, raising=False)
    with tracking.stage_run("evaluate", {"experiment": "hand"}):
        pass
    (run,) = mlflow.search_runs(experiment_names=["hand"], output_format="list")
    assert run.data.tags["source"] == "manual"
    assert "pipeline_id" not in run.data.tags and "mlflow.parentRunId" not in run.data.tags


def test_stage_runs_nest_under_the_pipeline_run_and_children_under_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'm.db'}")
    monkeypatch.setenv(tracking.PIPELINE_ID_ENV, "pipe-2")
    monkeypatch.delenv(tracking.PIPELINE_RUN_ENV, raising=False)
    config = {"experiment": "nest"}
    parent = tracking.start_pipeline_run(config)
    assert os.environ[tracking.PIPELINE_RUN_ENV] == parent
    with tracking.stage_run("sweep", config, tags={"sweep": "load"}) as run:
        run.log_child("edf", tags={"policy": "edf"}, params={"policy": "edf"}, metrics={"a": 1})
    tracking.end_pipeline_run("FINISHED")
    runs = {
        r.data.tags["stage"] + r.data.tags.get("policy", ""): r
        for r in mlflow.search_runs(experiment_names=["nest"], output_format="list")
    }
    assert set(runs) == {"pipeline", "sweep", "sweepedf"}
    assert runs["pipeline"].info.status == "FINISHED"
    assert runs["sweep"].data.tags["mlflow.parentRunId"] == parent
    child = runs["sweepedf"]
    assert child.data.tags["mlflow.parentRunId"] == runs["sweep"].info.run_id
    assert child.data.tags["sweep"] == "load" and child.data.tags["source"] == "pipeline"
    assert child.data.metrics == {"a": 1.0} and child.info.status == "FINISHED"


def test_a_run_closed_just_before_its_process_ended_is_not_marked_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another job's start finds this run RUNNING; before it checks the process, the process
    closes its run and exits (what a short evaluation job beside seven others did in the quick
    DAG): the run stays FINISHED. A run whose process ended without closing it is KILLED."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'm.db'}")
    with tracking.stage_run("zoo", {"experiment": "race-end"}) as closing:
        pass
    with tracking.stage_run("zoo", {"experiment": "race-end"}) as dead:
        pass
    client = mlflow.tracking.MlflowClient()
    experiment = client.get_experiment_by_name("race-end").experiment_id
    for handle in (closing, dead):  # both found RUNNING by the search, their processes gone
        client.update_run(handle.run_id, status="RUNNING")

    def exits_after_closing(pid: int) -> bool:
        client.set_terminated(closing.run_id, status="FINISHED")
        return False

    monkeypatch.setattr(tracking, "_alive", exits_after_closing)
    assert tracking.close_dead_runs(experiment) == [dead.run_id]
    assert client.get_run(closing.run_id).info.status == "FINISHED"
    assert client.get_run(dead.run_id).info.status == "KILLED"
