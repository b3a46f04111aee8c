"""kill -9 at a bad moment, then the same command again: Snakemake (from a checkout path with a
space and a config named `q$(touch PWNED).yaml`), `make quick`, profiling and training recover with
no manual step, the MLflow store keeps no run RUNNING, and recovery removes only the temporary
files of relmas's own writer under the study's results, never a user's file that looks like one.

Small on purpose (one tiny model, a few jobs of the DAG, a 1500-step training): the full quick DAG
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
from typing import Any

import pytest
import yaml

from relmas import cli
from relmas.paths import ResultPaths
from relmas.recover import other_instances, recover

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
VENV = Path(sys.executable).parents[1]
QUICK = yaml.safe_load((ROOT / "config" / "quick.yaml").read_text())
# Files of a user that look like temporary files (the pattern of relmas < 2 included), anywhere in
# a checkout: recovery never removes them.
LOOK_ALIKES = (
    ".eslintrc.override.json",
    "docs/.notes.personal.md",
    ".relmas-tmp.notes.txt.abcd1234.txt",  # relmas's prefix, but outside the results
    "results/quick/.layers.parquet.k3j9x0a1.parquet",
    "results/quick/costs/.eyeriss_168.parquet.draft_01.parquet",
    "results/quick/report/.report.md.personal.md",
)


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


def start_and_kill_when_running(
    command: list[str], cwd: Path, env: dict[str, str], store: Path, stage: str
) -> None:
    """Start `command` in its own session (its output discarded), then `kill_when_running`."""
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    kill_when_running(proc, store, stage)


def assert_killed_and_none_running(store: Path, stage: str) -> None:
    statuses = runs(store)
    assert not [r for r in statuses if r[1] == "RUNNING"], statuses
    killed = [t for _, s, t in statuses if s == "KILLED" and t.get("stage") == stage]
    assert killed and "ended without closing the run" in killed[0]["relmas.killed_reason"]


def plant_look_alikes(project: Path) -> dict[Path, str]:
    """The user's files of LOOK_ALIKES, each with its own content."""
    planted = {}
    for name in LOOK_ALIKES:
        path = project / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"the user's {name}\n")
        planted[path] = path.read_text()
    return planted


def assert_intact(planted: dict[Path, str]) -> None:
    assert {p: p.read_text() if p.exists() else None for p in planted} == planted


def run_main(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_recover_sweeps_only_its_own_temporary_files_under_the_results(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    (tmp_path / "config").mkdir()
    shutil.copy2(ROOT / "config" / "quick.yaml", tmp_path / "config" / "config.yaml")
    planted = plant_look_alikes(tmp_path)
    killed = [
        tmp_path / "results/quick/.relmas-tmp.layers.parquet.k3j9x0a1.parquet",
        tmp_path / "results/quick/agents/mixed/relmas/.relmas-tmp.replay-0.npz.a_b1c2d3.npz",
    ]
    for path in killed:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"PAR1")
    replay = tmp_path / "results/quick/agents/mixed/relmas/replay-000000000150.npz"
    replay.write_bytes(bytes(2_000_000))  # an unfinished training's buffer
    code, out, err = run_main(["recover", "--dir", str(tmp_path)], capsys)  # config/config.yaml
    assert code == 0 and not err, err
    on_disk = sum(path.stat().st_size for path in (tmp_path / "results").rglob("*"))
    assert out.splitlines() == [
        "recover: no Snakemake lock, swept 2 stale temporary file(s) in results/quick",
        f"recover: results/quick holds {on_disk / 1e6:.1f} MB, of which 1 replay buffer(s) of "
        "unfinished trainings 2.0 MB (a training deletes its own once it has ended)",
    ]
    assert not any(path.exists() for path in killed)
    assert_intact(planted)


def test_recover_says_it_unlocked_only_when_it_removed_a_lock(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Issue 48, item 5a: Snakemake leaves `.snakemake/locks` empty after every finished run,
    which recover called "the stale Snakemake lock"."""
    (tmp_path / "config").mkdir()
    shutil.copy2(ROOT / "config" / "quick.yaml", tmp_path / "config" / "config.yaml")
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    code, out, err = run_main(["recover", "--dir", str(tmp_path)], capsys)
    assert code == 0 and not err, err
    assert out.startswith("recover: no Snakemake lock, ") and locks.is_dir()
    (locks / "0.input.lock").write_text("x\n")
    code, out, err = run_main(["recover", "--dir", str(tmp_path)], capsys)
    assert code == 0 and out.startswith("recover: removed the stale Snakemake lock, ")
    assert not locks.exists()


def test_recover_refuses_a_missing_directory_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    missing = tmp_path / "nonexistent"
    code, out, err = run_main(["recover", "--dir", str(missing)], capsys)
    assert code == 2 and not out
    expected = "--dir: expected an existing project directory"
    assert err == f"relmas recover: error: {missing}: {expected}\n"


def make_argv(*args: str) -> list[str]:
    """`make ARGS` with this interpreter's venv (never rebuilt: `-o` its stamp)."""
    return ["make", "--no-print-directory", "-o", str(VENV / ".installed"), *args, f"VENV={VENV}"]


def make(project: Path, *args: str, **kwargs: Any) -> subprocess.CompletedProcess:
    return subprocess.run(make_argv(*args), cwd=project, capture_output=True, text=True, **kwargs)


def copy_checkout(project: Path) -> None:
    for name in ("Makefile", "Snakefile", "workflow", "config"):
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy2)(ROOT / name, project / name)


def test_make_refuses_a_config_snakemake_would_fail_on_or_evaluate_in_one_line(
    tmp_path: Path,
) -> None:
    """A config that is not UTF-8 (Snakemake's loader prints a traceback) and one asking for YTE
    (Snakemake would evaluate its expressions) are refused by the recover step in one line, before
    Snakemake starts (here it would only say so)."""
    copy_checkout(tmp_path)
    (tmp_path / "latin1.yaml").write_bytes("experiment: caf\u00e9\n".encode("latin-1"))
    yte = "__use_yte__: true\nexperiment: ?__import__('pathlib').Path('PWNED').touch()\n"
    (tmp_path / "yte.yaml").write_text(yte)
    for config, expected in (
        ("latin1.yaml", "latin1.yaml: byte 15: expected UTF-8 text"),
        ("yte.yaml", "yte.yaml: __use_yte__: expected a known key"),
    ):
        done = make(tmp_path, "run", f"CONFIG={config}", "SNAKEMAKE=echo snakemake started")
        assert done.returncode == 2 and "snakemake started" not in done.stdout, done.stdout
        relmas_lines = [line for line in done.stderr.splitlines() if not line.startswith("make")]
        assert len(relmas_lines) == 1 and relmas_lines[0].startswith(
            f"relmas recover: error: {expected}"
        ), done.stderr
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / ".snakemake").exists()


@pytest.mark.slow
def test_make_quick_after_a_kill_leaves_the_users_look_alike_files(tmp_path: Path) -> None:
    """`make quick` killed (-9) while it profiles, a temporary file of a write cut short, then
    `make quick` again: it finishes, and only that temporary file is gone."""
    copy_checkout(tmp_path)
    config = dict(tiny_config(), evaluation={"seeds": [1000], "policies": ["fcfs", "edf"]})
    config |= {"sweeps": {}, "training": {"validation_seeds": [100]}}
    (tmp_path / "config" / "quick.yaml").write_text(yaml.safe_dump(config))
    planted = plant_look_alikes(tmp_path)
    store = tmp_path / "mlflow.db"
    env = environment(store)
    start_and_kill_when_running(make_argv("quick", "CORES=2"), tmp_path, env, store, "profile")
    paths = ResultPaths(tmp_path / config["results"])
    cut_short = paths.costs_dir / ".relmas-tmp.eyeriss_168.parquet.k3j9x0a1.parquet"
    cut_short.parent.mkdir(parents=True, exist_ok=True)
    cut_short.write_bytes(b"PAR1")
    stale = len(list(paths.root.rglob(".relmas-tmp.*")))  # and any the kill itself left

    rerun = make(tmp_path, "quick", "CORES=2", env=env)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    swept = f"swept {stale} stale temporary file(s) in {config['results']}"
    assert f"recover: removed the stale Snakemake lock, {swept}" in rerun.stdout
    assert not cut_short.exists() and (paths.report_dir / "report.md").is_file()
    assert_intact(planted)
    assert_killed_and_none_running(store, "profile")


@pytest.mark.slow
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
    start_and_kill_when_running(command, project, env, store, "profile")
    assert (project / ".snakemake" / "locks").is_dir()  # what made the next run refuse to start
    cut_short = project / paths.costs_dir / ".relmas-tmp.eyeriss_168.parquet.k3j9x0a1.parquet"
    cut_short.write_bytes(b"")

    done = recover(project, [paths.root])
    assert done.unlocked and [p.name for p in done.swept] == [
        ".relmas-tmp.eyeriss_168.parquet.k3j9x0a1.parquet"
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
    stale = tmp_path / "results" / ".relmas-tmp.layers.parquet.abcd1234.parquet"
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
        done = recover(tmp_path, ["results"])
        assert done.busy == [busy.pid] and not done.unlocked and not done.swept
        assert stale.exists() and (locks / "0.input.lock").exists()
    finally:
        busy.kill()
        busy.wait()
    done = recover(tmp_path, ["results"])
    assert done.unlocked and done.swept == [stale] and other.exists() and not locks.exists()


@pytest.mark.slow
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
    # a named reference baseline: no validation rows to choose it by
    config["training"]["observation"] = {"reference": "sjf_feasible_patient_gated"}
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


# A relmas write in progress: the temporary file of an atomic write, held until stdin closes.
WRITER = """
import sys
from relmas.io import atomic_path
with atomic_path(sys.argv[1], suffix=".parquet") as tmp:
    tmp.write_bytes(b"PAR1")
    print(tmp, flush=True)
    sys.stdin.read()
"""


def test_recover_keeps_the_temporary_file_of_a_writer_of_another_checkout(tmp_path: Path) -> None:
    """Issue 39, item 11: `results:` outside the checkout, shared with a second checkout's study
    whose process (working elsewhere) is writing into it: recovery in the first checkout sees no
    other instance, and sweeps only the temporary file no live process holds."""
    checkout, other, shared = tmp_path / "one", tmp_path / "two", tmp_path / "shared results"
    checkout.mkdir()
    other.mkdir()
    target = shared / "costs" / "eyeriss_168.parquet"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(target)],
        cwd=other,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        in_flight = Path(writer.stdout.readline().strip())
        stale = shared / "costs" / ".relmas-tmp.simba_chiplet.parquet.k3j9x0a1.parquet"
        stale.write_bytes(b"PAR1")  # a killed writer's
        done = recover(checkout, [shared])
        assert done.busy == [] and done.swept == [stale], done
        assert in_flight.exists() and not stale.exists()
    finally:
        writer.stdin.close()
        writer.wait()
    assert writer.returncode == 0 and target.read_bytes() == b"PAR1"
    assert not in_flight.exists() and recover(checkout, [shared]).swept == []


def test_a_write_whose_temporary_file_is_swept_before_it_is_locked_makes_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one moment a writer does not hold its temporary file, between creating and locking
    it: a sweep then removes it, and the write goes on in a new one."""
    from relmas import io
    from relmas.recover import sweep_temp_files

    created = []

    def then_swept(*args, **kwargs):
        fd, name = mkstemp(*args, **kwargs)
        created.append(Path(name))
        if len(created) == 1:
            assert sweep_temp_files([tmp_path]) == created
        return fd, name

    mkstemp = io.tempfile.mkstemp
    monkeypatch.setattr(io.tempfile, "mkstemp", then_swept)
    with io.atomic_path(tmp_path / "a.txt", suffix=".txt") as tmp:
        assert tmp == created[1] and sweep_temp_files([tmp_path]) == []
        tmp.write_text("done")
    assert (tmp_path / "a.txt").read_text() == "done" and len(created) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]
