"""A full disk while the command line writes: no file is left half-written, the one error line
names the path that could not be written, and the command's other outputs are removed.

A full filesystem is a tiny tmpfs (root only; skipped otherwise) or, anywhere, a filesystem
simulated under one directory: files opened for writing there fail with ENOSPC once a few bytes
are written, as a real write(2) does (the error names no file).
"""

from __future__ import annotations

import builtins
import errno
import io as stdlib_io
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import polars as pl
import pytest
import yaml

from relmas import cli, io
from relmas.config import config_hash, load_config
from relmas.hw import jit_cache
from relmas.hw.spec import parse_spec
from relmas.io import TEMP_PREFIX
from relmas.profile import write_cost_table

ROOT = Path(__file__).resolve().parents[1]
QUICK = yaml.safe_load((ROOT / "config" / "quick.yaml").read_text())


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's hand-written trace and cost tables, and a config whose one scenario uses
    their two accelerator types."""
    base = tmp_path_factory.mktemp("inputs")
    shutil.copy2(ROOT / "examples" / "handwritten" / "make_inputs.py", base)
    subprocess.run([sys.executable, str(base / "make_inputs.py")], check=True)
    config = dict(QUICK, models={"cnn": {"model": "alexnet"}, "mlp": {"model": "alexnet"}})
    specs = QUICK["accelerators"]
    config["accelerators"] = {"big": specs["simba_chiplet"], "small": specs["eyeriss_168"]}
    config["system"] = {"instances": [{"name": "big", "count": 1}, {"name": "small", "count": 2}]}
    mixed = dict(QUICK["scenarios"]["mixed"], models={"cnn": 1, "mlp": 1}, jobs=5)
    config["scenarios"], config["sweeps"] = {"mixed": mixed}, {}
    (base / "config.yaml").write_text(yaml.safe_dump(config))
    models = config_hash(load_config(base / "config.yaml")["models"])
    jobs = pl.read_parquet(base / "jobs.parquet")  # the tenants of the scenario, not the example's
    tenant = (
        pl.when(pl.col("tenant") == "camera").then(pl.lit("interactive")).otherwise(pl.lit("batch"))
    )
    priority = pl.when(tenant == "interactive").then(9).otherwise(1).cast(pl.Int32)
    jobs.with_columns(tenant=tenant, priority=priority).write_parquet(base / "jobs.parquet")
    for name, spec in config["accelerators"].items():  # with the metadata evaluate checks
        table = pl.read_parquet(base / "costs" / f"{name}.parquet")
        parsed = parse_spec(name, spec, "config.yaml")
        path = base / "costs" / f"{name}.parquet"
        write_cost_table(table, path, name, parsed, "handwritten", models_hash=models)
    return base


def evaluate_with_gantt(gantt: Path, capsys: pytest.CaptureFixture) -> tuple[int, list[str]]:
    argv = ["evaluate", "--config", "config.yaml", "--scenario", "mixed", "--policy", "edf"]
    argv += ["--seed", "1", "--jobs", "jobs.parquet", "--costs", "costs"]
    code = cli.main([*argv, "--out", "out/edf.parquet", "--gantt", str(gantt)])
    err = capsys.readouterr().err
    return code, [line for line in err.splitlines() if " INFO " not in line]


def assert_refused_for(gantt: Path, code: int, lines: list[str], work: Path) -> None:
    assert code == 2 and len(lines) == 1, lines
    assert str(gantt) in lines[0] and "--gantt" in lines[0], lines[0]
    assert "expected a filesystem with free space" in lines[0], lines[0]
    assert not (work / "out").exists()  # the results written before are removed
    assert list(gantt.parent.iterdir()) == []  # neither a truncated chart nor a temporary file


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """An 8 KiB tmpfs: too small for a Gantt chart."""
    mount = tmp_path / "full"
    mount.mkdir()
    command = ["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", str(mount)]
    if shutil.which("mount") is None or subprocess.run(command, capture_output=True).returncode:
        pytest.skip("mounting a tmpfs needs root (and the mount command)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_gantt_chart_on_a_full_tmpfs(
    work: Path, tiny_tmpfs: Path, capsys: pytest.CaptureFixture
) -> None:
    gantt = tiny_tmpfs / "gantt.png"
    code, lines = evaluate_with_gantt(gantt, capsys)
    assert_refused_for(gantt, code, lines, work)


class _FullDisk:
    """A file open for writing that takes `room` bytes, then fails like write(2) on a full disk."""

    def __init__(self, handle: Any, room: int) -> None:
        self._handle, self._room = handle, room

    def write(self, data: bytes | str) -> int:
        if len(data) > self._room:
            self._handle.write(data[: self._room])
            self._room = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        self._room -= len(data)
        return self._handle.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)

    def __enter__(self) -> _FullDisk:
        return self

    def __exit__(self, *exc: object) -> None:
        self._handle.close()


def test_a_gantt_chart_on_a_simulated_full_disk(
    work: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    full = (work / "full").resolve()
    full.mkdir()
    real_open = builtins.open

    def open_(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = real_open(file, mode, *args, **kwargs)
        inside = isinstance(file, str | Path) and Path(file).resolve().parent == full
        return _FullDisk(handle, 1000) if inside and set(mode) & set("wax+") else handle

    monkeypatch.setattr(builtins, "open", open_)
    monkeypatch.setattr(stdlib_io, "open", open_)
    gantt = full / "gantt.png"
    code, lines = evaluate_with_gantt(gantt, capsys)
    assert_refused_for(gantt, code, lines, work)


def simulate_full_disk(
    monkeypatch: pytest.MonkeyPatch, full: Callable[[Path], bool], room: int = 1000
) -> None:
    """Files opened for writing whose path satisfies `full` fail with ENOSPC after `room` bytes."""
    real_open = builtins.open

    def open_(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = real_open(file, mode, *args, **kwargs)
        inside = isinstance(file, str | Path) and full(Path(file))
        return _FullDisk(handle, room) if inside and set(mode) & set("wax+") else handle

    monkeypatch.setattr(builtins, "open", open_)
    monkeypatch.setattr(stdlib_io, "open", open_)


@pytest.mark.parametrize("name", ["replay-", "last.pt", "best.pt", "agent.json"])
def test_training_on_a_simulated_full_disk(
    name: str, work: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`relmas train` whose checkpoint, replay buffer or agent.json meets a full disk: one line
    naming the file (torch.save's own writer failed with a RuntimeError naming none), and neither
    that file nor a temporary one is left."""
    config = yaml.safe_load((work / "config.yaml").read_text())
    config["training"]["validation_seeds"] = [100]
    # a named reference baseline: no validation rows to choose it by
    config["training"]["observation"] = {"reference": "sjf_feasible_patient_gated"}
    config["training"]["dqn"].update(
        total_steps=200, learning_starts=50, teacher_steps=50, validation_every=100
    )
    config["training"]["dqn"].update(checkpoint_every=100, log_every=100, batch_size=16)
    (work / "train.yaml").write_text(yaml.safe_dump(config))
    agent = work / "agent"
    simulate_full_disk(monkeypatch, lambda path: path.name.startswith(f"{TEMP_PREFIX}{name}"))
    argv = ["train", "--config", "train.yaml", "--scenario", "mixed", "--costs", "costs"]
    code = cli.main([*argv, "--out", str(agent)])
    lines = [line for line in capsys.readouterr().err.splitlines() if " INFO " not in line]
    lines = [line for line in lines if "ETA" not in line]
    assert code == 2 and len(lines) == 1, lines
    assert str(agent) in lines[0] and name in lines[0], lines[0]
    assert "expected a filesystem with free space" in lines[0], lines[0]
    left = sorted(path.name for path in agent.iterdir())
    assert not [file for file in left if file.startswith((name, TEMP_PREFIX))], left


def test_a_kernel_cache_stamp_on_a_simulated_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The numba cache's stamp is written atomically: a full disk names it and leaves no part of
    it; written, it is no command output, which a failed command would remove."""
    cache = tmp_path / "cache"
    cached = SimpleNamespace(_cache_path=str(cache))
    kernel = SimpleNamespace(
        _cache=cached, py_func=test_a_kernel_cache_stamp_on_a_simulated_full_disk
    )
    simulate_full_disk(monkeypatch, lambda path: path.parent == cache, room=10)
    with pytest.raises(OSError) as error:
        jit_cache.refresh(kernel, [jit_cache], stamp="kernels.sha256")
    assert error.value.errno == errno.ENOSPC
    assert error.value.filename == str(cache / "kernels.sha256")
    assert list(cache.iterdir()) == []
    monkeypatch.undo()
    io.forget_outputs()
    jit_cache.refresh(kernel, [jit_cache], stamp="kernels.sha256")
    io.discard_outputs()
    assert [path.name for path in cache.iterdir()] == ["kernels.sha256"]
