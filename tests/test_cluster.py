"""Scale-out: the quick DAG through the cluster-generic executor, logging to an MLflow server.

Every job starts as its own detached process (as a SLURM or Kubernetes job would), so this fails if
a rule writes outside its declared outputs or relies on state of the main Snakemake process, and the
runs must reach a tracking server instead of the embedded SQLite file.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import mlflow
import pytest

from relmas.tracking import STAGES
from tests.test_pipeline import SNAKEMAKE, copy_project

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def mlflow_server(tmp_path: Path):
    port = free_port()
    server = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("mlflow")),
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
            "--backend-store-uri",
            f"sqlite:///{tmp_path / 'server.db'}",
            "--artifacts-destination",
            str(tmp_path / "server-artifacts"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if response.status == 200:
                    break
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                os.killpg(server.pid, signal.SIGTERM)
                pytest.fail("mlflow server did not start")
            time.sleep(0.5)
    yield url
    os.killpg(server.pid, signal.SIGTERM)
    server.wait(timeout=30)


def test_quick_dag_on_cluster_generic_with_tracking_server(tmp_path: Path, mlflow_server: str):
    project = copy_project(tmp_path / "project")
    # Every rule but the piece tables, with four policies (fcfs, the agent, its teacher's rule and
    # its keeper's), one point per sweep and a keeper of one labelled trace (every stage runs): the
    # executor and the tracking server are under test here, the policies and the pieces in
    # test_pipeline (the suite must stay under 15 minutes on 2 cores).
    (project / "config" / "cluster.yaml").write_text(
        "evaluation: {policies: [fcfs, sjf_feasible, edf_feasible, relmas]}\n"
        "sweeps: {load: {values: [1.2]}, bandwidth: {values: [4.0]}}\n"
        "training: {keeper: {traces: 1, jobs: 40, rounds: 1}}\n"
    )
    env = dict(os.environ, MLFLOW_TRACKING_URI=mlflow_server)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env.pop("RELMAS_PIPELINE_ID", None)
    proc = subprocess.run(
        [
            str(SNAKEMAKE),
            "--configfile",
            "config/quick.yaml",
            "config/cluster.yaml",
            "--executor",
            "cluster-generic",
            "--cluster-generic-submit-cmd",
            "workflow/scripts/local_submit.sh",
            "--jobs",
            "4",
            "--latency-wait",
            "5",
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert not (project / "mlflow.db").exists(), "a job fell back to the embedded store"
    mlflow.set_tracking_uri(mlflow_server)
    runs = mlflow.search_runs(experiment_names=["relmas-quick"], output_format="list")
    stages = {run.data.tags["stage"] for run in runs}
    assert stages == set(STAGES)  # every stage ran, the pipeline run included
    assert all(run.info.status == "FINISHED" for run in runs)
    assert len({run.data.tags["pipeline_id"] for run in runs}) == 1
    # every job, started as its own process, nests under the one pipeline run
    (pipeline,) = [run.info.run_id for run in runs if run.data.tags["stage"] == "pipeline"]
    sweep_policies = [
        r for r in runs if r.data.tags["stage"] == "sweep" and "policy" in r.data.tags
    ]
    jobs = [r for r in runs if r.data.tags["stage"] != "pipeline" and r not in sweep_policies]
    assert {run.data.tags["mlflow.parentRunId"] for run in jobs} == {pipeline}
    assert all(run.info.artifact_uri.startswith("mlflow-artifacts:") for run in runs)
