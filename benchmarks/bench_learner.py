"""Learner variants against the strongest rule: the yardstick of issue 14's ablation.

    .venv/bin/python benchmarks/bench_learner.py --variants FILE.yaml [--config config/config.yaml]
        [--scenarios a,b] [--only variant,variant] [--out results/bench_learner]

FILE.yaml maps a variant name to overrides of the config's `training:` section, e.g.

    as_configured: {}
    no_margin: {dqn: {margin_weight: 0.0}}

For each scenario and variant an agent of the first learned policy (`relmas`) is trained (the
configuration's training traces and cost tables, validated like the config) and run on the
evaluation traces of a finished study of that configuration (`make run`: its `results:` directory
holds the traces, the validation files that choose each scenario's best baseline, and that
baseline's results on the same traces). The table gives the agent's best validation SLA rate, its
evaluation SLA rate, the difference to the best baseline in SLA points with a paired bootstrap 95%
interval over the evaluation seeds, and the training CPU time. An agent whose scenario is the
`agent` of a generalisation pair (`evaluation.generalisation`) is also run on that pair's scenario,
against that scenario's best baseline (row `agent → scenario`). Agents already trained in OUT are
reused.
"""

from __future__ import annotations

import argparse
import copy
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from train_or_load import train_or_load  # a sibling module

from relmas import arguments, catalog
from relmas.config import merge_into, validate_config
from relmas.evaluate import load_job_trace, simulate
from relmas.io import read_parquet
from relmas.paths import ResultPaths, summary_of
from relmas.policies import make_policy
from relmas.report import best_baselines, markdown_table, read_validation
from relmas.rl.run import ScenarioTrainResult
from relmas.schemas import SummaryRows
from relmas.study import Study, generalisation_runs
from relmas.yaml_load import load_yaml

RESAMPLES = 10_000


def point_difference(ours: np.ndarray, theirs: np.ndarray, rng: np.random.Generator) -> tuple:
    """Mean of ours − theirs in points (× 100: SLA or shortfall) and its paired bootstrap 95%
    interval over seeds."""
    diff = (ours - theirs) * 100
    resample = rng.integers(0, len(diff), size=(RESAMPLES, len(diff)))
    low, high = np.percentile(diff[resample].mean(axis=1), [2.5, 97.5])
    return float(diff.mean()), float(low), float(high)


def parse_with_variants(
    parser: argparse.ArgumentParser, out: str
) -> tuple[argparse.Namespace, dict, list[str]]:
    """`parser`'s arguments with the variants' options (`--variants FILE.yaml`, `--only v,w`,
    `--out`, default `out`), the variants and the names `--only` selects (all by default); an
    unknown name is a usage error."""
    parser.add_argument("--variants", type=Path, required=True)
    parser.add_argument("--only", default=None, help="comma-separated variants (default: all)")
    parser.add_argument("--out", type=Path, default=Path(out))
    args = parser.parse_args()
    variants = load_yaml(args.variants)
    names = args.only.split(",") if args.only else list(variants)
    unknown = sorted(set(names) - set(variants))
    if unknown:
        parser.error(f"--only: {unknown} are not variants of {args.variants} ({list(variants)})")
    return args, variants, names


def training_figures(trained: ScenarioTrainResult) -> dict[str, Any]:
    """What the table keeps of an agent's training."""
    return {
        "cpu_s": trained.cpu_seconds,
        "validation_sla": trained.validation["sla_rate"],
        "teacher": trained.teacher or "",
        "best_step": trained.learner.best_step,
    }


def evaluation_sla(config: dict, scenario: str, agent: Path) -> np.ndarray:
    """The agent's SLA rate on each evaluation trace of the finished study."""
    study, paths = Study(config), ResultPaths.of(config)
    system = study.system(scenario)
    tables = study.costs(scenario, paths.costs_dir)
    rates = []
    for seed in config["evaluation"]["seeds"]:
        jobs = load_job_trace(paths.workload(scenario, seed), tables)
        policy = make_policy(catalog.learned()[0], seed=seed, agent=agent)
        rates.append(simulate(system, jobs, tables, policy).metrics["sla_rate"])
    return np.array(rates)


def baseline_sla(config: dict, scenario: str, policy: str) -> np.ndarray:
    """The study's results of `policy` on the evaluation traces."""
    paths = ResultPaths.of(config)
    rows = [
        read_parquet(summary_of(paths.evaluation(scenario, policy, seed)), SummaryRows)["sla_rate"][
            0
        ]
        for seed in config["evaluation"]["seeds"]
    ]
    return np.array(rows)


def main() -> None:
    parser = arguments.Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--scenarios", default=None, help="comma-separated (default: all)")
    args, variants, names = parse_with_variants(parser, "results/bench_learner")

    raw = load_yaml(args.config)
    base = validate_config(raw, args.config)
    scenarios = args.scenarios.split(",") if args.scenarios else list(base["scenarios"])
    # each agent on its own scenario, then on the generalisation targets of the config's pairs
    runs = [(scenario, scenario) for scenario in scenarios] + [
        (agent, target)
        for agent, target, policy in generalisation_runs(base, args.config)
        if policy == catalog.learned()[0] and agent in scenarios
    ]
    paths = ResultPaths.of(base)
    targets = list(dict.fromkeys(target for _, target in runs))
    baselines = best_baselines(read_validation(paths.validation_dir, targets))
    rng = np.random.default_rng(0)
    rows = []
    for name in names:
        overrides = variants[name]
        variant = copy.deepcopy(raw)
        merge_into(variant, {"training": overrides or {}})
        config = validate_config(variant, f"{args.variants}: {name}")
        for scenario, target in runs:
            start = time.perf_counter()
            agent = args.out / name / scenario
            figures = train_or_load(
                config,
                scenario,
                agent,
                paths.costs_dir,
                record="bench_learner.json",
                figures=training_figures,
            )
            ours = evaluation_sla(config, target, agent)
            best, _ = baselines[target]
            theirs = baseline_sla(base, target, best)
            diff, low, high = point_difference(ours, theirs, rng)
            rows.append(
                {
                    "variant": name,
                    "scenario": scenario if target == scenario else f"{scenario} → {target}",
                    "teacher": figures["teacher"],
                    "best step": figures["best_step"],
                    "validation SLA": figures["validation_sla"],
                    "evaluation SLA": float(ours.mean()),
                    "best baseline": best,
                    "its SLA": float(theirs.mean()),
                    "difference (points)": diff,
                    "95% CI low": low,
                    "95% CI high": high,
                    "training CPU s": figures["cpu_s"],
                }
            )
            print(f"{name} {scenario} on {target}: {time.perf_counter() - start:.0f} s", flush=True)
    table = pl.DataFrame(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    table.write_parquet(args.out / "ablation.parquet")
    print(markdown_table(table))


if __name__ == "__main__":
    main()
