"""Golden outputs: refactorings must leave every result bit-identical.

Two layers of pins, compared exactly against files in tests/golden/:
- every policy's per-job results on small fixed traces with synthetic costs (fast, no profiling):
  the heuristics, gacer with piece tables, ga_offline with the quick config's budget;
- the quick DAG's outputs (the run `tests/test_pipeline.py` already makes): each evaluated policy's
  per-job results (the learned ones with their quick-trained agents), the sweep points, the
  study's summary.parquet without its wall-time columns, and the bytes of the trained agents.

An intended change of behaviour regenerates them, in a commit of its own that names the reason:
    RELMAS_UPDATE_GOLDEN=1 pytest tests/test_golden.py
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from relmas import catalog
from relmas.policies import make_policy
from relmas.sim import Engine
from tests.synthetic import contended_case
from tests.test_pipeline import results_root

GOLDEN = Path(__file__).with_name("golden")
UPDATE = os.environ.get("RELMAS_UPDATE_GOLDEN") == "1"
# The quick config's budget of the offline search (config/quick.yaml evaluation.ga), without the
# wall-time limit that would make it depend on the machine's speed.
GA_QUICK = {"population": 16, "generations": 20, "time_limit_s": None}
# Learned policies are pinned through the quick DAG, which trains their agents.
LEARNED = ("relmas", "relmas_resize")
# Summary columns that measure wall time, not behaviour.
WALL_TIME = ("decision_us", "decision_time_ratio")


def check_frame(name: str, frame: pl.DataFrame) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        frame.write_parquet(path)
        return
    assert_frame_equal(frame, pl.read_parquet(path), check_exact=True)


def check_json(name: str, value: object) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value, indent=1, sort_keys=True) + "\n")
        return
    assert value == json.loads(path.read_text())


# ----------------------------------------------------------------------- small synthetic traces

CASES = {"proportional": 11, "maxmin": 12}


def synthetic_case(sharing: str, seed: int, jobs: int = 40):
    layers = {"a": 9, "b": 20, "c": 4}
    return contended_case(seed, jobs, layers, 6.0, (1.5, 6.0), sharing, splits=(2,))


@pytest.mark.parametrize("sharing", sorted(CASES))
def test_every_policy_schedules_the_small_traces_as_before(sharing: str) -> None:
    system, tables, trace = synthetic_case(sharing, CASES[sharing])
    frames = []
    for name in catalog.names():
        if name in LEARNED:
            continue
        options = GA_QUICK if name == "ga_offline" else {}
        result = Engine(system, tables, trace).run(make_policy(name, seed=5, **options))
        frames.append(result.jobs.select(pl.lit(name).alias("policy"), pl.all()))
    check_frame(f"synthetic_{sharing}.parquet", pl.concat(frames))


# ----------------------------------------------------------------------- the quick DAG


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow
def test_the_quick_dag_computes_what_it_did(quick_run) -> None:
    project, _, _ = quick_run
    results = results_root(project)
    evaluations = sorted((results / "eval").glob("*/*/seed*.parquet"))
    per_job = [p for p in evaluations if not p.name.endswith(".summary.parquet")]
    policies = {p.parent.name for p in per_job}
    assert set(LEARNED) <= policies and "ga_offline" in policies and "gacer" in policies
    check_frame(
        "quick_eval.parquet",
        pl.concat(
            pl.read_parquet(p).select(
                pl.lit(str(p.relative_to(results).parent)).alias("run"),
                pl.lit(p.stem).alias("seed"),
                pl.all(),
            )
            for p in per_job
        ),
    )
    sweeps = sorted((results / "sweeps").glob("*/*.parquet"))
    check_frame(
        "quick_sweeps.parquet",
        pl.concat(
            pl.read_parquet(p)
            .drop(WALL_TIME, strict=False)
            .select(pl.lit(str(p.relative_to(results))).alias("point"), pl.all())
            for p in sweeps
        ),
    )
    summary = pl.read_parquet(results / "report" / "summary.parquet")
    check_frame("quick_summary.parquet", summary.drop(WALL_TIME, strict=False))
    agents = sorted((results / "agents").glob("*/*/*.pt"))
    assert {p.name for p in agents} >= {"best.pt", "last.pt"}
    check_json("quick_agents.json", {str(p.relative_to(results)): sha256(p) for p in agents})
