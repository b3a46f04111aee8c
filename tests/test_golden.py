"""Golden outputs: refactorings must leave every result bit-identical, on any processor.

Pinned exactly, against files in tests/golden/:
- every policy's per-job results on small fixed traces with synthetic costs (fast, no profiling):
  the heuristics, gacer with piece tables, ga_offline with the quick config's budget;
- the quick DAG's outputs (the run `tests/test_pipeline.py` already makes): each non-learned
  policy's per-job results, sweep rows and summary rows (without the wall-time columns, and
  without the ceiling's rows and columns: `policies_only`);
- the decisions of the agents in tests/golden/agents/ (those the goldens were made with) on the
  quick DAG's evaluation traces: their per-job results are the learned policies' rows of
  quick_eval.parquet;
- the quick DAG's own agents (their checkpoints' bytes) and every learned policy's row computed
  from them, wherever training's float kernels compute as on the machine the goldens were made on
  (`kernel_fingerprint`); elsewhere these are not compared.

Why only these: the cost models, the simulator, the policies and an agent's forward pass are
Numba kernels compiled without fastmath (IEEE operations in program order: no reassociation, no
fused multiply-add, so AVX-512 and AVX2 code round alike), and traces come from numpy's seeded
generators: bit-identical on any x86-64. Training alone runs in torch, whose matrix products (MKL,
oneDNN) choose their kernels by instruction set and processor vendor and so sum in another order:
the same config trains weights some float32 ulps apart on another processor, and an argmax can
flip on so small a change wherever two actions' Q-values are that close. No tolerance on weights is
safe (Adam divides each gradient by its own scale, so rounding noise in a near-zero gradient can
move a weight by a whole step), hence weights only where they are equal by construction, and a
fixed agent for the learned policies' decisions everywhere. docs/design.md, "Reproducibility".

An intended change of behaviour regenerates them (and copies the quick DAG's agents into
tests/golden/agents/), in a commit of its own that names the reason:
    RELMAS_UPDATE_GOLDEN=1 pytest tests/test_golden.py
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import warnings
from pathlib import Path

import polars as pl
import pytest
import torch
import torch.nn.functional as F
from polars.testing import assert_frame_equal
from torch import nn

from relmas import catalog
from relmas.ceiling.rows import policy_rows
from relmas.config import load_config
from relmas.evaluate import evaluate_scenario
from relmas.paths import GROUPS_SUFFIX, SUMMARY_SUFFIX, ResultPaths
from relmas.policies import make_policy
from relmas.sim import Engine
from relmas.study import policy_options
from tests.synthetic import contended_case
from tests.test_pipeline import results_root

GOLDEN = Path(__file__).with_name("golden")
UPDATE = os.environ.get("RELMAS_UPDATE_GOLDEN") == "1"
# The quick config's budget of the offline search (config/quick.yaml evaluation.ga), without the
# wall-time limit that would make it depend on the machine's speed.
GA_QUICK = {"population": 16, "generations": 20, "time_limit_s": None}
# Learned policies are pinned through the quick DAG, which trains their agents.
LEARNED = ("relmas", "relmas_resize")
# The agents the goldens were made with: agents/{scenario}/{policy}/, the files evaluation reads.
AGENTS = GOLDEN / "agents"
AGENT_FILES = ("best.pt", "agent.json")
# Summary and sweep point columns that measure wall time, not behaviour.
WALL_TIME = ("decision_us", "decision_time_ratio", "ceiling_s")
# What the ceiling adds to summary and sweep rows: its rows come from solvers under a time limit
# (on a slow or loaded machine a stopped bound is proven but looser), so the goldens pin the
# policies' rows and columns; tests/test_pipeline.py checks the ceiling against them.
CEILING_COLUMNS = ("kind", "best_known_by", "ceiling_status")


def policies_only(frame: pl.DataFrame) -> pl.DataFrame:
    """The policies' rows of a summary or sweep frame, without the ceiling's columns."""
    return policy_rows(frame).drop(CEILING_COLUMNS, strict=False)


def check_frame(name: str, frame: pl.DataFrame, rows: pl.Expr | None = None) -> None:
    """`frame` equals the golden `name` exactly; only their `rows` when given."""
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        frame.write_parquet(path)
        return
    golden = pl.read_parquet(path)
    if rows is not None:
        frame, golden = frame.filter(rows), golden.filter(rows)
    assert_frame_equal(frame, golden, check_exact=True)


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
        if name in LEARNED or name in catalog.planners():
            continue  # the planner draws futures of a scenario: pinned by the quick DAG below
        options = GA_QUICK if name == "ga_offline" else {}
        result = Engine(system, tables, trace).run(make_policy(name, seed=5, **options))
        frames.append(result.jobs.select(pl.lit(name).alias("policy"), pl.all()))
    check_frame(f"synthetic_{sharing}.parquet", pl.concat(frames))


# ----------------------------------------------------------------------- the quick DAG


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def kernel_fingerprint(agents: Path) -> str:
    """sha256 of a few Adam steps of plain torch MLPs of the shapes and batch size the agents under
    `agents` (scenario/policy/best.pt) were trained with, on one thread and with deterministic
    algorithms, as training runs: equal on two machines whose math libraries compute training's
    kernels alike (MKL and oneDNN choose theirs by instruction set and vendor). Built of torch
    alone, so that no change of relmas's training can change it along with the weights."""
    digest = hashlib.sha256()
    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    try:
        for path in sorted(agents.glob("*/*/best.pt")):
            checkpoint = torch.load(path, weights_only=True)
            spec, config = checkpoint["network"], checkpoint["config"]
            generator = torch.Generator().manual_seed(0)
            torch.manual_seed(0)
            widths = [spec["obs_dim"], *spec["hidden"]]
            pairs = itertools.pairwise(widths)
            trunk = nn.Sequential(*(m for a, b in pairs for m in (nn.Linear(a, b), nn.ReLU())))
            heads = nn.ModuleList(
                [nn.Linear(widths[-1], 1), nn.Linear(widths[-1], spec["n_actions"])]
            )
            params = [*trunk.parameters(), *heads.parameters()]
            optimizer = torch.optim.Adam(params, lr=config["learning_rate"])
            for _ in range(4):
                obs = torch.randn(config["batch_size"], spec["obs_dim"], generator=generator)
                y = torch.randn(config["batch_size"], spec["n_actions"], generator=generator)
                features = trunk(obs)
                advantage = heads[1](features)
                q = heads[0](features) + advantage - advantage.mean(dim=-1, keepdim=True)
                optimizer.zero_grad()
                F.smooth_l1_loss(q, y).backward()
                nn.utils.clip_grad_norm_(params, 1.0)
                optimizer.step()
            for param in params:
                digest.update(param.detach().numpy().tobytes())
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)
    return digest.hexdigest()


def golden_agents_on(project: Path, runs: list[Path]) -> pl.DataFrame:
    """Per-job results of the agents in tests/golden/agents/ in the learned policies' evaluation
    runs `runs` (eval/{scenario}/{policy}/seed{n}.parquet) of the quick DAG in `project`: on the
    same traces and cost tables, framed as those runs are in quick_eval.parquet."""
    source = project / "config" / "quick.yaml"
    config = load_config(source)
    paths = ResultPaths.of(config)
    frames = []
    for run in runs:
        scenario, policy = run.parent.parent.name, run.parent.name
        seed = int(run.stem.removeprefix("seed"))
        options = {**policy_options(config, policy), "agent": str(AGENTS / scenario / policy)}
        result = evaluate_scenario(
            config,
            scenario,
            policy,
            seed,
            project / paths.workload(scenario, seed),
            project / paths.costs_dir,
            source=source,
            policy_options=options,
        )
        frames.append(
            result.jobs.select(
                pl.lit(str(run.relative_to(project / paths.root).parent)).alias("run"),
                pl.lit(run.stem).alias("seed"),
                pl.all(),
            )
        )
    return pl.concat(frames)


def copy_agents(agents: Path) -> None:
    """Make the agents under `agents` (scenario/policy/) the golden ones."""
    shutil.rmtree(AGENTS, ignore_errors=True)
    for best in sorted(agents.glob("*/*/best.pt")):
        directory = AGENTS / best.parent.relative_to(agents)
        directory.mkdir(parents=True)
        for name in AGENT_FILES:
            shutil.copy2(best.parent / name, directory / name)


@pytest.mark.slow
def test_the_quick_dag_computes_what_it_did(quick_run) -> None:
    project, _, _ = quick_run
    results = results_root(project)
    if UPDATE:
        copy_agents(results / "agents")
    # the trained weights, and all that is computed from them, only where they are reproducible
    same_kernels = (
        UPDATE
        or kernel_fingerprint(AGENTS)
        == json.loads((GOLDEN / "quick_agents.json").read_text())["kernels"]
    )
    evaluations = sorted((results / "eval").glob("*/*/seed*.parquet"))
    per_job = [p for p in evaluations if not p.name.endswith((SUMMARY_SUFFIX, GROUPS_SUFFIX))]
    policies = {p.parent.name for p in per_job}
    assert set(LEARNED) <= policies and "ga_offline" in policies and "gacer" in policies
    assert {p.name for p in AGENTS.glob("*/*")} == set(LEARNED)
    learned_run = pl.col("run").str.split("/").list.get(2).is_in(LEARNED)
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
        None if same_kernels else ~learned_run,
    )
    if not UPDATE:  # the decisions of a fixed agent are the same on every machine
        runs = [p for p in per_job if p.parent.name in LEARNED]
        check_frame("quick_eval.parquet", golden_agents_on(project, runs), learned_run)
    learned = None if same_kernels else ~pl.col("policy").is_in(LEARNED)
    sweeps = sorted((results / "sweeps").glob("*/*.parquet"))
    check_frame(
        "quick_sweeps.parquet",
        pl.concat(
            policies_only(pl.read_parquet(p))
            .drop(WALL_TIME, strict=False)
            .select(pl.lit(str(p.relative_to(results))).alias("point"), pl.all())
            for p in sweeps
        ),
        learned,
    )
    summary = pl.read_parquet(results / "report" / "summary.parquet")
    check_frame(
        "quick_summary.parquet", policies_only(summary).drop(WALL_TIME, strict=False), learned
    )
    agents = sorted((results / "agents").glob("*/*/*.pt"))
    assert {p.name for p in agents} >= {"best.pt", "last.pt"}
    if not same_kernels:
        warnings.warn(
            "the quick DAG's trained weights and learned rows not compared: torch's kernels here "
            "compute otherwise than on the machine the goldens were made on",
            stacklevel=1,
        )
    else:
        check_json(
            "quick_agents.json",
            {
                "kernels": kernel_fingerprint(AGENTS),
                "checkpoints": {str(p.relative_to(results)): sha256(p) for p in agents},
            },
        )
