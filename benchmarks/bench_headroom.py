"""Headroom above the strongest rule on the traces of a finished study: how far a better schedule
of the same jobs can go, by rollouts (online) or by the offline genetic search.

    .venv/bin/python benchmarks/bench_headroom.py [--config config/config.yaml] [--scenarios a,b]
        [--jobs 150] [--seeds 2] rollout [--horizon 5|inf] [--per-type] [--clairvoyant]
    .venv/bin/python benchmarks/bench_headroom.py [...] --jobs 50 ga [--windows 4]
        [--ga-seeds 0 1] [--population 32] [--generations 100] [--seeded-by online|heuristics]

For each scenario the rule baseline chosen on validation (the study's best baseline; the scenario
is skipped if that is not a rule baseline) is the reference. `rollout` runs it on the first `--jobs`
jobs of the first `--seeds` evaluation traces, alone and improved by rollouts
(`relmas.policies.rollout`: every decision point tries the agent's candidates, each followed by the
rule for `--horizon` x tau, tau the mean isolated latency of the scenario's models). `ga` cuts
those traces into `--windows` consecutive windows of `--jobs` jobs, each moved to start at time 0
on an idle system, and runs `ga_offline` on each (no time limit): seeded by every online
non-learned policy, the deadlines it meets above the rule and above the best of them on that
window bound from below what a better schedule of those jobs could gain; seeded by the heuristics
alone, whether it climbs to the rule shows how strong the search is at that length. Tables give
SLA rates or deadlines met, differences in SLA points and wall times. Run from a checkout whose
`results:` holds a finished `make run`.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import polars as pl

from relmas import arguments, catalog
from relmas.config import load_config
from relmas.evaluate import load_job_trace
from relmas.paths import ResultPaths
from relmas.policies import make_policy
from relmas.policies.ga_offline import SEED_POLICIES, GAOffline
from relmas.policies.rollout import improve_by_rollout
from relmas.report import best_baselines, markdown_table, read_validation
from relmas.sim.costs import CostTables
from relmas.sim.engine import Engine
from relmas.sim.system import System
from relmas.study import Study

# The seeds of the search: every online non-learned policy (the headroom), or only the heuristics
# (how far the search itself climbs from weaker schedules: its strength at this trace length).
SEEDED_BY = {
    "online": SEED_POLICIES,
    "heuristics": tuple(name for name in SEED_POLICIES if catalog.entry(name).kind == "heuristic"),
}
# What one method measures on one evaluation trace: table rows.
Method = Callable[[argparse.Namespace, System, CostTables, pl.DataFrame, str], list[dict]]


def rollout_rows(
    args: argparse.Namespace, system: System, tables: CostTables, jobs: pl.DataFrame, rule: str
) -> list[dict]:
    """The rule alone and improved by rollouts on the first `args.jobs` jobs."""
    jobs = jobs.head(args.jobs)
    horizon_s = args.horizon * float(tables.isolated_s.mean())
    alone = Engine(system, tables, jobs).run(make_policy(rule)).metrics["sla_rate"]
    engine = Engine(system, tables, jobs)
    start = time.perf_counter()
    left, decisions = improve_by_rollout(
        engine, rule, horizon_s, per_type=args.per_type, clairvoyant=args.clairvoyant
    )
    improved = engine.result("rollout").metrics["sla_rate"]
    return [
        {
            "rule SLA": alone,
            "rollout SLA": improved,
            "difference (points)": 100 * (improved - alone),
            "decisions left the rule": left,
            "decisions": decisions,
            "rollout s": time.perf_counter() - start,
        }
    ]


def ga_rows(
    args: argparse.Namespace, system: System, tables: CostTables, jobs: pl.DataFrame, rule: str
) -> list[dict]:
    """`ga_offline` on each window of `args.jobs` jobs, against the rule and the best of the
    search's seeds on that window (seeded by every online policy, it never ends below either)."""
    rows = []
    for window in range(args.windows):
        part = jobs.slice(window * args.jobs, args.jobs)
        if part.height < args.jobs:
            break
        shift = part["arrival_s"].min()
        part = part.with_columns(pl.col("arrival_s") - shift, pl.col("deadline_s") - shift)
        for ga_seed in args.ga_seeds:
            ga = GAOffline(
                seed=ga_seed,
                population=args.population,
                generations=args.generations,
                time_limit_s=None,
                max_jobs=args.jobs,
                seed_policies=SEEDED_BY[args.seeded_by],
            )
            start = time.perf_counter()
            found = int(Engine(system, tables, part).run(ga).jobs["met"].sum())
            seconds = time.perf_counter() - start
            seeds = ga.report.seed_met
            best = max(seeds, key=seeds.get)
            rule_met = seeds.get(rule)
            if rule_met is None:  # seeded by the heuristics alone
                rule_met = int(
                    Engine(system, tables, part).run(make_policy(rule)).jobs["met"].sum()
                )
            rows.append(
                {
                    "first job": window * args.jobs,
                    "GA seed": ga_seed,
                    "rule met": rule_met,
                    "best seed": best,
                    "best seed met": seeds[best],
                    "GA met": found,
                    "over the rule (points)": 100 * (found - rule_met) / args.jobs,
                    "over the best seed (points)": 100 * (found - seeds[best]) / args.jobs,
                    "GA s": seconds,
                }
            )
    return rows


def main() -> None:
    parser = arguments.Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--scenarios", default=None, help="comma-separated (default: all)")
    parser.add_argument(
        "--jobs",
        type=arguments.positive_int,
        default=150,
        help="jobs of each trace (ga: per window)",
    )
    parser.add_argument(
        "--seeds", type=arguments.positive_int, default=2, help="first evaluation seeds"
    )
    methods = parser.add_subparsers(dest="method", required=True)
    rollout = methods.add_parser("rollout", help="one step of policy iteration from the rule")
    rollout.add_argument(
        "--horizon",
        type=arguments.positive_or_inf,
        default=5.0,
        help="rollout length in tau (inf: to the end)",
    )
    rollout.add_argument("--per-type", action="store_true", help="also try every instance type")
    rollout.add_argument("--clairvoyant", action="store_true", help="rollouts see future arrivals")
    rollout.set_defaults(measure=rollout_rows)
    ga = methods.add_parser("ga", help="the offline genetic search on windows of the traces")
    ga.add_argument(
        "--windows", type=arguments.positive_int, default=4, help="consecutive windows per trace"
    )
    ga.add_argument("--ga-seeds", type=arguments.seed, nargs="+", default=[0])
    ga.add_argument("--population", type=arguments.positive_int, default=32)
    ga.add_argument("--generations", type=arguments.count, default=100)
    ga.add_argument("--seeded-by", choices=list(SEEDED_BY), default="online")
    ga.set_defaults(measure=ga_rows)
    args = parser.parse_args()

    config = load_config(args.config)
    study, paths = Study(config), ResultPaths.of(config)
    scenarios = args.scenarios.split(",") if args.scenarios else list(config["scenarios"])
    baselines = best_baselines(read_validation(paths.validation_dir, scenarios))
    measure: Method = args.measure
    rows = []
    for scenario in scenarios:
        rule = baselines[scenario][0]
        if catalog.entry(rule).kind != "rule":
            print(f"{scenario}: the best baseline {rule} is not a rule baseline; skipped")
            continue
        system, tables = study.system(scenario), study.costs(scenario, paths.costs_dir)
        for seed in config["evaluation"]["seeds"][: args.seeds]:
            jobs = load_job_trace(paths.workload(scenario, seed), tables)
            for row in measure(args, system, tables, jobs, rule):
                rows.append({"scenario": scenario, "seed": seed, "rule": rule} | row)
                print(markdown_table(pl.DataFrame(rows[-1:])), flush=True)
    print(" ".join(f"{key} {value}" for key, value in vars(args).items() if key != "measure"))
    print(markdown_table(pl.DataFrame(rows)))


if __name__ == "__main__":
    main()
