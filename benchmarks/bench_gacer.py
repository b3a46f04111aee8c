"""GACER benchmark: the cost of the `gacer` search per decision, and gacer against the heuristics.

    .venv/bin/python benchmarks/bench_gacer.py --costs DIR [--config config/config.yaml]
        [--scenarios vision_heavy bandwidth_scarce] [--seeds 1000 1001 1002 1003 1004]
        [--policies fcfs sjf edf llf prema sdrm3 herald planaria] [--window 6]
        [--max-evaluations 64]

DIR holds the cost tables and the piece tables of the configured accelerators (`relmas profile`
and `relmas profile --pieces`). For each scenario and seed the trace is generated as `relmas
workload` does, then every policy runs on it; `gacer` runs twice: with the piece tables, and
without them (`gacer_whole`: reordering only, no resizing). Per scenario and policy it prints the
mean SLA rate with its Student-t 95% interval over the seeds, ANTT, DRAM traffic and dynamic
energy; for gacer also the share of layers it split, decisions per second of the whole run, the
time per decision inside `decide` (the search: `decision_us`) and the plans decoded per decision.
First, what the cuts cost on each accelerator (`cut_summary`).
Runs on one core (pinned where the OS allows), after a warm-up run that loads the Numba cache.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl

from relmas import arguments
from relmas.config import load_config
from relmas.paths import piece_table
from relmas.policies import make_policy
from relmas.report import mean_ci
from relmas.sim import Engine
from relmas.sim.costs import load_costs
from relmas.workload import generate_trace, parse_scenario, scenario_system

HEURISTICS = ["fcfs", "sjf", "edf", "llf", "prema", "sdrm3", "herald", "planaria"]


def cut_summary(costs: str, accelerators: list[str]) -> pl.DataFrame:
    """Per accelerator and cut, medians over the layers of: speed-up (layer latency / its slowest
    piece's), work (sum of piece latencies / layer latency), DRAM traffic and energy (sum over
    pieces / layer); `traffic<1` = share of cuts moving fewer bytes than the whole layer."""
    frames = []
    for name in accelerators:
        whole = pl.read_parquet(Path(costs) / f"{name}.parquet")
        pieces = pl.read_parquet(piece_table(costs, name))
        cuts = pieces.group_by("model", "layer", "dim", "splits").agg(
            pl.col("latency_s").max().alias("slowest"),
            pl.col("latency_s").sum().alias("work"),
            pl.col("dram_bytes").sum().alias("bytes"),
            pl.col("energy_j").sum().alias("energy"),
        )
        ratios = cuts.join(whole, on=["model", "layer"]).select(
            pl.lit(name).alias("accelerator"),
            pl.format("{}{}", "dim", "splits").alias("cut"),
            (pl.col("latency_s") / pl.col("slowest")).alias("speedup"),
            (pl.col("work") / pl.col("latency_s")).alias("work"),
            (pl.col("bytes") / pl.col("dram_bytes")).alias("traffic"),
            (pl.col("energy") / pl.col("energy_j")).alias("energy"),
        )
        frames.append(ratios)
    return (
        pl.concat(frames)
        .group_by("accelerator", "cut", maintain_order=True)
        .agg(
            pl.col("speedup", "work", "traffic", "energy").median().round(2),
            (pl.col("traffic") < 1).mean().round(3).alias("traffic<1"),
        )
        .sort("accelerator", "cut")
    )


def run(system, tables, jobs, name: str, options: dict) -> dict[str, float]:
    """One simulation: its metrics, plus gacer's own counters and the run's wall time."""
    engine = Engine(system, tables, jobs)
    gacer = name.startswith("gacer")
    policy = make_policy(name.removesuffix("_whole"), seed=0, **(options if gacer else {}))
    start = time.perf_counter()
    result = engine.run(policy)
    metrics = dict(result.metrics, wall_s=time.perf_counter() - start)
    if gacer:
        layers = float(tables.n_layers[engine.model_indices].sum())
        whole_layers = layers - policy.split_layers
        metrics["split_share"] = 1.0 - whole_layers / layers
        metrics["plans_per_decision"] = policy.evaluations / result.metrics["decisions"]
    return metrics


def main() -> None:
    parser = arguments.Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--costs", required=True, help="cost and piece tables of the accelerators")
    parser.add_argument("--scenarios", nargs="+", default=["vision_heavy", "bandwidth_scarce"])
    parser.add_argument(
        "--seeds", nargs="+", type=arguments.seed, default=[1000, 1001, 1002, 1003, 1004]
    )
    parser.add_argument("--policies", nargs="+", default=HEURISTICS)
    parser.add_argument("--window", type=arguments.positive_int, default=6)
    parser.add_argument("--max-evaluations", type=arguments.positive_int, default=64)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    config = load_config(args.config)
    options = {"window": args.window, "max_evaluations": args.max_evaluations}
    policies = [*args.policies, "gacer", "gacer_whole"]
    print(f"config {args.config}, costs {args.costs}, seeds {args.seeds}, gacer {options}")
    with pl.Config(tbl_rows=-1, tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True):
        print(cut_summary(args.costs, list(config["accelerators"])))
    for scenario in args.scenarios:
        system = scenario_system(config, scenario)
        tables = load_costs(args.costs, system, models=tuple(config["models"]))
        if tables.pieces is None:
            raise SystemExit(f"no piece tables in {args.costs}: run relmas profile --pieces")
        parsed = parse_scenario(scenario, config["scenarios"][scenario], list(config["models"]))
        rows: dict[str, list[dict[str, float]]] = {name: [] for name in policies}
        for seed in args.seeds:
            jobs = generate_trace(scenario, parsed, system, tables, seed)
            if seed == args.seeds[0]:
                run(system, tables, jobs.head(50), "gacer", options)  # warm-up
            for name in policies:
                chosen = replace(tables, pieces=None) if name == "gacer_whole" else tables
                rows[name].append(run(system, chosen, jobs, name, options))
        print(f"\n{scenario} ({jobs.height} jobs, {system.dram_gbps} GB/s)")
        print(
            f"{'policy':12s} {'sla_rate':>16s} {'antt':>7s} {'GB moved':>9s} {'dyn. J':>8s}"
            f" {'split':>6s} {'decisions/s':>12s} {'us/decision':>12s} {'plans/dec.':>10s}"
        )
        for name in policies:
            runs = rows[name]
            sla, half = mean_ci(np.array([r["sla_rate"] for r in runs]))
            line = (
                f"{name:12s} {sla:8.3f} ± {half:5.3f} {np.mean([r['antt'] for r in runs]):7.2f}"
                f" {np.mean([r['bytes_moved'] for r in runs]) / 1e9:9.2f}"
                f" {np.mean([r['energy_dynamic_j'] for r in runs]):8.2f}"
            )
            if name.startswith("gacer"):
                rate = np.sum([r["decisions"] for r in runs]) / np.sum([r["wall_s"] for r in runs])
                line += (
                    f" {np.mean([r['split_share'] for r in runs]):6.1%} {rate:12,.0f}"
                    f" {np.mean([r['decision_us'] for r in runs]):12.1f}"
                    f" {np.mean([r['plans_per_decision'] for r in runs]):10.1f}"
                )
            print(line, flush=True)


if __name__ == "__main__":
    main()
