"""Headroom above the strongest rule on the traces of a finished study: how far a better schedule
of the same jobs can go, by rollouts (online) or by the offline genetic search.

    .venv/bin/python benchmarks/bench_headroom.py [--config config/config.yaml] [--scenarios a,b]
        [--jobs 150] [--seeds 2] rollout [--base best|RULE] [--horizon 5|inf] [--per-type]
        [--clairvoyant]
    .venv/bin/python benchmarks/bench_headroom.py [...] --jobs 50 ga [--windows 4]
        [--ga-seeds 0 1] [--population 32] [--generations 100] [--seeded-by online|heuristics]

`rollout` runs a rule with its placement chosen on validation — by default the agent's teacher
(`--base best`: the best rule or target-aware baseline with its placement, `best_placed`), or the
rule named — on the first `--jobs` jobs of the first `--seeds` evaluation traces, alone and
improved by rollouts (`relmas.policies.rollout`: every decision point tries the agent's
candidates, with `--per-type` on every type, each followed by the rule for `--horizon` x tau, tau
the mean isolated latency of the scenario's models). `ga` takes the study's best baseline on the
whole system (the scenario is skipped if that is not a rule baseline) and cuts those traces into
`--windows` consecutive windows of `--jobs` jobs, each moved to start at time 0 on an idle
system, and runs `ga_offline` on each (no time limit): seeded by every online non-learned policy,
the deadlines it meets above the rule and above the best of them on that window bound from below
what a better schedule of those jobs could gain; seeded by the heuristics alone, whether it climbs
to the rule shows how strong the search is at that length. Tables give SLA rates or deadlines met,
differences in SLA points and wall times. Run from a checkout whose `results:` holds a finished
`make run`.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass

import polars as pl
from command_line import print_table  # a sibling module

from relmas import arguments, catalog
from relmas.config import load_config
from relmas.evaluate import best_placed, load_job_trace, placement_option, read_placements
from relmas.paths import ResultPaths
from relmas.policies import make_policy
from relmas.policies.ga_offline import SEED_POLICIES, GAOffline
from relmas.policies.placement import ALL
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
BEST = "best"  # --base: the agent's teacher


@dataclass(frozen=True)
class RuledTrace:
    """One evaluation trace of a scenario (its system and cost tables) with the rule a method
    measures against, and the rule's placement."""

    system: System
    tables: CostTables
    jobs: pl.DataFrame
    rule: str
    placement: str


# What one method measures on one ruled trace: table rows.
Method = Callable[[argparse.Namespace, RuledTrace], list[dict]]
# A method's rule and placement on a scenario (None: the scenario is skipped).
Base = Callable[[argparse.Namespace, ResultPaths, str, System], tuple[str, str] | None]


def rollout_base(
    args: argparse.Namespace, paths: ResultPaths, scenario: str, system: System
) -> tuple[str, str]:
    """`--base`: the teacher (the best placed baseline on validation) or the rule named, each
    with its placement chosen on validation."""
    path, types = paths.validation(scenario), system.accelerator_types
    if args.base == BEST:
        return best_placed(path, scenario, types)
    chosen = placement_option(args.base, read_placements(path, scenario, types), path)
    return args.base, chosen["placement"]


def ga_base(
    args: argparse.Namespace, paths: ResultPaths, scenario: str, system: System
) -> tuple[str, str] | None:
    """The study's best baseline on validation, on the whole system, if a rule baseline."""
    rule = best_baselines(read_validation(paths.validation_dir, [scenario]))[scenario][0]
    if catalog.entry(rule).kind != "rule":
        print(f"{scenario}: the best baseline {rule} is not a rule baseline; skipped")
        return None
    return rule, ALL


def rollout_rows(args: argparse.Namespace, trace: RuledTrace) -> list[dict]:
    """The rule with its placement alone and improved by rollouts on the first `args.jobs`
    jobs."""
    system, tables, rule, placement = trace.system, trace.tables, trace.rule, trace.placement
    jobs = trace.jobs.head(args.jobs)
    horizon_s = args.horizon * float(tables.isolated_s.mean())
    base = make_policy(rule, placement=placement)
    alone = Engine(system, tables, jobs).run(base).metrics["sla_rate"]
    engine = Engine(system, tables, jobs)
    start, cpu = time.perf_counter(), time.process_time()
    left, decisions = improve_by_rollout(
        engine,
        rule,
        horizon_s,
        placement=placement,
        per_type=args.per_type,
        clairvoyant=args.clairvoyant,
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
            "rollout CPU s": time.process_time() - cpu,  # the machine may be shared
        }
    ]


def ga_rows(args: argparse.Namespace, trace: RuledTrace) -> list[dict]:
    """`ga_offline` on each window of `args.jobs` jobs, against the rule (on the whole system:
    its placement is ALL) and the best of the search's seeds on that window (seeded by every online
    policy, it never ends below either)."""
    system, tables, jobs, rule = trace.system, trace.tables, trace.jobs, trace.rule
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
        "--base",
        choices=[BEST, *catalog.placed()],
        default=BEST,
        help="the rule rolled out, with its placement on validation (best: the agent's teacher)",
    )
    rollout.add_argument(
        "--horizon",
        type=arguments.positive_or_inf,
        default=5.0,
        help="rollout length in tau (inf: to the end)",
    )
    rollout.add_argument("--per-type", action="store_true", help="also try every instance type")
    rollout.add_argument("--clairvoyant", action="store_true", help="rollouts see future arrivals")
    rollout.set_defaults(measure=rollout_rows, base_of=rollout_base)
    ga = methods.add_parser("ga", help="the offline genetic search on windows of the traces")
    ga.add_argument(
        "--windows", type=arguments.positive_int, default=4, help="consecutive windows per trace"
    )
    ga.add_argument("--ga-seeds", type=arguments.seed, nargs="+", default=[0])
    ga.add_argument("--population", type=arguments.positive_int, default=32)
    ga.add_argument("--generations", type=arguments.count, default=100)
    ga.add_argument("--seeded-by", choices=list(SEEDED_BY), default="online")
    ga.set_defaults(measure=ga_rows, base_of=ga_base)
    args = parser.parse_args()

    config = load_config(args.config)
    study, paths = Study(config), ResultPaths.of(config)
    scenarios = args.scenarios.split(",") if args.scenarios else list(config["scenarios"])
    measure: Method = args.measure
    base_of: Base = args.base_of
    rows = []
    for scenario in scenarios:
        system = study.system(scenario)
        if (base := base_of(args, paths, scenario, system)) is None:
            continue
        rule, placement = base
        print(f"{scenario}: {rule} ({placement})", flush=True)
        tables = study.costs(scenario, paths.costs_dir)
        for seed in config["evaluation"]["seeds"][: args.seeds]:
            jobs = load_job_trace(paths.workload(scenario, seed), tables)
            for row in measure(args, RuledTrace(system, tables, jobs, rule, placement)):
                named = {"scenario": scenario, "seed": seed, "rule": rule, "placement": placement}
                rows.append(named | row)
                print(markdown_table(pl.DataFrame(rows[-1:])), flush=True)
    print_table(args, rows, hidden=("measure", "base_of"))


if __name__ == "__main__":
    main()
