"""Shared fixtures: every test logs to its own throw-away MLflow store, never the project's."""

from __future__ import annotations

import fcntl
import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The benchmark scripts import their sibling modules (benchmarks/command_line.py, ...) as a script
# run from the command line finds them: its folder first on the path.
sys.path.insert(0, str(ROOT / "benchmarks"))


@pytest.fixture(autouse=True, scope="session")
def _isolated_mlflow(tmp_path_factory: pytest.TempPathFactory):
    store = tmp_path_factory.mktemp("mlflow") / "mlflow.db"
    previous = os.environ.get("MLFLOW_TRACKING_URI")
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{store}"
    yield
    if previous is None:
        os.environ.pop("MLFLOW_TRACKING_URI", None)
    else:
        os.environ["MLFLOW_TRACKING_URI"] = previous


@pytest.fixture(autouse=True)
def _tracking_uri_restored():
    """A test that points MLflow elsewhere (mlflow.set_tracking_uri also sets the environment)
    must not leave the later tests of its worker logging to a server that has stopped."""
    previous = os.environ.get("MLFLOW_TRACKING_URI")
    yield
    if previous is not None and os.environ.get("MLFLOW_TRACKING_URI") != previous:
        import mlflow

        mlflow.set_tracking_uri(previous)
        os.environ["MLFLOW_TRACKING_URI"] = previous


@pytest.fixture
def work(inputs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch copy of the test module's `inputs` fixture, as the working directory."""
    project = tmp_path / "work"
    shutil.copytree(inputs, project)
    monkeypatch.chdir(project)
    return project


@pytest.fixture
def quick_config() -> Path:
    return ROOT / "config" / "quick.yaml"


@pytest.fixture(scope="session")
def quick_run(tmp_path_factory: pytest.TempPathFactory):
    """The quick DAG's project, env and jobs by rule, run once per test session for the pipeline
    and golden tests: the pytest-xdist workers share it (the first to need it runs it while the
    others wait on the lock, instead of each spending minutes of both cores on the same DAG)."""
    from tests.test_pipeline import run_quick_dag

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the session's directory, above each worker's own
    with open(shared / "quick_dag.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return run_quick_dag(shared / "quick_dag")
