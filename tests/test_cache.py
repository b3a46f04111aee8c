"""Cost tables through Snakemake's between-workflow cache: a second checkout reuses them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from relmas.config import load_config
from relmas.paths import ResultPaths
from tests.test_pipeline import ROOT, SNAKEMAKE, copy_project

pytestmark = pytest.mark.slow

QUICK = ResultPaths.of(load_config(ROOT / "config" / "quick.yaml"))
COSTS = [str(QUICK.costs(name)) for name in ("eyeriss_168", "simba_chiplet")]


def build_costs(project: Path, cache: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, SNAKEMAKE_OUTPUT_CACHE=str(cache))
    env["MLFLOW_TRACKING_URI"] = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    proc = subprocess.run(
        # targets before --cache: its optional rule names would swallow them
        [str(SNAKEMAKE), *COSTS, "--cores", "2", "--configfile", "config/quick.yaml", "--cache"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


def test_second_checkout_reuses_cost_tables_without_profiling(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    first = copy_project(tmp_path / "first")
    second = copy_project(tmp_path / "second")

    build_costs(first, cache, tmp_path)
    assert (first / QUICK.log("profile", "eyeriss_168")).exists()
    assert len(list(cache.iterdir())) == len(COSTS)

    proc = build_costs(second, cache, tmp_path)
    for table in COSTS:
        assert pl.read_parquet(second / table).equals(pl.read_parquet(first / table))
    # the profile jobs did not run: their logs stay empty and the tables link into the cache
    assert (proc.stdout + proc.stderr).count("from cache") == len(COSTS)
    for table in COSTS:
        assert (second / table).is_symlink()
        assert (second / table).resolve().parent == cache.resolve()
    for log in ((second / QUICK.log("profile", "eyeriss_168")).parent).iterdir():
        assert log.stat().st_size == 0, log
