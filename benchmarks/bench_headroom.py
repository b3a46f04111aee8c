"""Headroom above the strongest rule: rollout improvement on the traces of a finished study.

    .venv/bin/python benchmarks/bench_headroom.py [--config config/config.yaml] [--scenarios a,b]
        [--jobs 150] [--seeds 2] [--horizon 5|inf] [--per-type] [--clairvoyant]

For each scenario the rule baseline chosen on validation (the study's best baseline; the scenario
is skipped if that is not a rule baseline) runs on the first `--jobs` jobs of the first `--seeds`
evaluation traces, alone and improved by rollouts (`relmas.policies.rollout`: every decision point
tries the agent's candidates, each followed by the rule for `--horizon` x tau, tau the mean isolated
latency of the scenario's models). The table gives both SLA rates, the difference in SLA points,
how many decisions left the rule and the rollout's wall time. Run from a checkout whose `results:`
holds a finished `make run`.
"""

from __future__ import annotations

import argparse
import time

import polars as pl

from relmas import catalog
from relmas.config import load_config
from relmas.evaluate import load_job_trace
from relmas.paths import ResultPaths
from relmas.policies import make_policy
from relmas.policies.rollout import improve_by_rollout
from relmas.report import best_baselines, markdown_table, read_validation
from relmas.sim.engine import Engine
from relmas.study import Study


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--scenarios", default=None, help="comma-separated (default: all)")
    parser.add_argument("--jobs", type=int, default=150, help="first jobs of each trace")
    parser.add_argument("--seeds", type=int, default=2, help="first evaluation seeds")
    parser.add_argument(
        "--horizon", type=float, default=5.0, help="rollout length in tau (inf: to the end)"
    )
    parser.add_argument("--per-type", action="store_true", help="also try every instance type")
    parser.add_argument("--clairvoyant", action="store_true", help="rollouts see future arrivals")
    args = parser.parse_args()

    config = load_config(args.config)
    study, paths = Study(config), ResultPaths.of(config)
    scenarios = args.scenarios.split(",") if args.scenarios else list(config["scenarios"])
    baselines = best_baselines(read_validation(paths.validation_dir, scenarios))
    rows = []
    for scenario in scenarios:
        rule = baselines[scenario][0]
        if catalog.entry(rule).kind != "rule":
            print(f"{scenario}: the best baseline {rule} is not a rule baseline; skipped")
            continue
        system, tables = study.system(scenario), study.costs(scenario, paths.costs_dir)
        horizon_s = args.horizon * float(tables.isolated_s.mean())
        for seed in config["evaluation"]["seeds"][: args.seeds]:
            jobs = load_job_trace(paths.workload(scenario, seed), tables).head(args.jobs)
            alone = Engine(system, tables, jobs).run(make_policy(rule)).metrics["sla_rate"]
            engine = Engine(system, tables, jobs)
            start = time.perf_counter()
            left, decisions = improve_by_rollout(
                engine, rule, horizon_s, per_type=args.per_type, clairvoyant=args.clairvoyant
            )
            improved = engine.result("rollout").metrics["sla_rate"]
            rows.append(
                {
                    "scenario": scenario,
                    "seed": seed,
                    "rule": rule,
                    "rule SLA": alone,
                    "rollout SLA": improved,
                    "difference (points)": 100 * (improved - alone),
                    "decisions left the rule": left,
                    "decisions": decisions,
                    "rollout s": time.perf_counter() - start,
                }
            )
            print(markdown_table(pl.DataFrame(rows[-1:])), flush=True)
    print(
        f"jobs {args.jobs}, horizon {args.horizon} tau, per type {args.per_type}, "
        f"clairvoyant {args.clairvoyant}"
    )
    print(markdown_table(pl.DataFrame(rows)))


if __name__ == "__main__":
    main()
