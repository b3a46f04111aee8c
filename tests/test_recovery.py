"""kill -9 at a bad moment, then the same command again: Snakemake (from a checkout path with a
space and a config named `q$(touch PWNED).yaml`), profiling and training recover with no manual
step, and the MLflow store keeps no run RUNNING.

Small on purpose (one tiny model, two jobs of the DAG, a 1500-step training): the full quick DAG
is exercised by tests/test_pipeline.py; what is tested here is the recovery, which is the same for
any job.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from relmas.paths import ResultPaths
from relmas.recover import other_instances, recover

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
QUICK = yaml.safe_load((ROOT / "config" / "quick.yaml").read_text())

pytestmark = pytest.mark.slow


def tiny_config() -> dict:
    config = dict(QUICK, models={"alexnet": {"image_size": 96}})
    config["scenarios"] = {"mixed": dict(QUICK["scenarios"]["mixed"], models={"alexnet": 1})}
    return config


def environment(store: Path) -> dict[str, str]:
    env = dict(os.environ, MLFLOW_TRACKING_URI=f"sqlite:///{store}")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env.pop("RELMAS_PIPELINE_ID", None)
    return env


def runs(store: Path) -> list[tuple[str, str, dict[str, str]]]:
    """(run id, status, tags) of every run in the store."""
    if not store.exists():
        return []
    with sqlite3.connect(store) as db:
        try:
            rows = db.execute("SELECT run_uuid, status FROM runs").fetchall()
            tags = db.execute("SELECT run_uuid, key, value FROM tags").fetchall()
        except sqlite3.OperationalError:  # tables not created yet
            return []
    return [(r, s, {k: v for u, k, v in tags if u == r}) for r, s in rows]


def kill_when_running(
    proc: subprocess.Popen, store: Path, stage: str, timeout: float = 120
) -> None:
    """kill -9 the process group of `proc` as soon as a `stage` run is RUNNING in the store."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if any(s == "RUNNING" and t.get("stage") == stage for _, s, t in runs(store)):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return
        time.sleep(0.1)
    pytest.fail(f"no {stage} run seen RUNNING before {proc.args} ended ({proc.returncode})")


def assert_killed_and_none_running(store: Path, stage: str) -> None:
    statuses = runs(store)
    assert not [r for r in statuses if r[1] == "RUNNING"], statuses
    killed = [t for _, s, t in statuses if s == "KILLED" and t.get("stage") == stage]
    assert killed and "ended without closing the run" in killed[0]["relmas.killed_reason"]


def test_a_killed_dag_reruns_from_a_path_with_a_space_and_a_dollar_config(tmp_path: Path) -> None:
    project = tmp_path / "my checkout"
    project.mkdir()
    for name in ("Snakefile", "workflow"):
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy2)(ROOT / name, project / name)
    (project / "config").mkdir()
    configfile = "config/q$(touch PWNED).yaml"
    (project / configfile).write_text(yaml.safe_dump(tiny_config()))
    store = project / "mlflow.db"
    env = environment(store)
    paths = ResultPaths(Path(tiny_config()["results"]))
    target = str(paths.costs("eyeriss_168"))
    command = [str(SNAKEMAKE), target, "--cores", "1", "--configfile", configfile]
    proc = subprocess.Popen(
        command,
        cwd=project,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    kill_when_running(proc, store, "profile")
    assert (project / ".snakemake" / "locks").is_dir()  # what made the next run refuse to start
    (project / paths.costs_dir / ".eyeriss_168.parquet.k3j9x0a1.parquet").write_bytes(b"")

    done = recover(project)
    assert done.unlocked and [p.name for p in done.swept] == [
        ".eyeriss_168.parquet.k3j9x0a1.parquet"
    ]
    rerun = subprocess.run(
        [*command, "--rerun-incomplete"], cwd=project, env=env, capture_output=True, text=True
    )
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert (project / target).is_file() and (project / paths.layers).is_file()
    assert "Rule: zoo" not in rerun.stderr  # the finished job stays done
    assert not list(project.rglob("PWNED"))
    assert_killed_and_none_running(store, "profile")


def test_recover_touches_nothing_while_another_instance_runs(tmp_path: Path) -> None:
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.input.lock").write_text("x\n")
    stale = tmp_path / "results" / ".layers.parquet.abcd1234.parquet"
    stale.parent.mkdir()
    stale.write_bytes(b"")
    other = tmp_path / "results" / ".keep.txt"
    other.write_text("")
    busy = subprocess.Popen(["bash", "-c", "exec -a snakemake sleep 60"], cwd=tmp_path)
    try:
        for _ in range(50):
            if other_instances(tmp_path):
                break
            time.sleep(0.05)
        done = recover(tmp_path)
        assert done.busy == [busy.pid] and not done.unlocked and not done.swept
        assert stale.exists() and (locks / "0.input.lock").exists()
    finally:
        busy.kill()
        busy.wait()
    done = recover(tmp_path)
    assert done.unlocked and done.swept == [stale] and other.exists() and not locks.exists()


def test_a_killed_training_resumes_and_says_from_which_step(tmp_path: Path) -> None:
    """Hand-written cost tables (examples/handwritten) for a scenario of two accelerator types."""
    for name in ("make_inputs.py",):
        shutil.copy2(ROOT / "examples" / "handwritten" / name, tmp_path / name)
    subprocess.run([sys.executable, str(tmp_path / "make_inputs.py")], check=True)
    config = dict(QUICK)
    config["models"] = {"cnn": {"model": "alexnet"}, "mlp": {"model": "alexnet"}}
    specs = QUICK["accelerators"]
    config["accelerators"] = {"big": specs["simba_chiplet"], "small": specs["eyeriss_168"]}
    config["system"] = {"instances": [{"name": "big", "count": 1}, {"name": "small", "count": 2}]}
    mixed = dict(QUICK["scenarios"]["mixed"], models={"cnn": 1, "mlp": 1}, jobs=10)
    config["scenarios"], config["sweeps"] = {"mixed": mixed}, {}
    dqn = {"total_steps": 1500, "learning_starts": 200, "buffer_size": 1500}
    dqn |= {"teacher_steps": 300, "validation_every": 500, "checkpoint_every": 500}
    config["training"] = {"validation_seeds": [100], "dqn": dqn | {"log_every": 500}}
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(config))
    store = tmp_path / "mlflow.db"
    command = [sys.executable, "-m", "relmas", "train", "--config", "tiny.yaml"]
    command += ["--scenario", "mixed", "--costs", "costs", "--out", "agent"]
    env = environment(store)
    proc = subprocess.Popen(command, cwd=tmp_path, env=env, start_new_session=True)
    deadline = time.monotonic() + 120
    while not (tmp_path / "agent" / "last.pt").exists() and time.monotonic() < deadline:
        assert proc.poll() is None, "the training ended before its first checkpoint"
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()

    rerun = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    resumed = re.search(r"^agent: resumed from last.pt at step (\d+)$", rerun.stdout, re.M)
    assert resumed and 0 < int(resumed[1]) < 1500, rerun.stdout
    assert "1500 steps" in rerun.stdout
    assert_killed_and_none_running(store, "train")
