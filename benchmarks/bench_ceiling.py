"""The relaxation bound (relmas.ceiling.bound): how tight on small traces, how fast on large ones.

`small`: per scenario, `--traces` traces of `--jobs` jobs drawn like the scenario's (its models,
tenants, load, system; `--unlimited` without the DRAM limit): the relaxation's bound, the exact
search's proven bounds and the strongest rule (the best of the rule baselines on each trace);
`--load` replaces the scenario's load, since a short trace that starts on an idle system is rarely
contended at the scenario's own.
Prints ceiling − optimum and optimum − rule (median, max) where the optimum is proven.

`traces` (the default, what `make bench` runs): the evaluation traces of a finished study
(`snakemake` or `make run` first; with `--costs DIR`, drawn again with those cost tables): per trace
the relaxation's bound, its status and seconds (one thread) and the strongest rule's count
(`--unlimited`: the same traces on the system without its DRAM limit; `--no-counts`: the bound
without its count rows).

`subsets`: the evaluation traces drawn again (cost tables from `--costs`, default the study's): per
trace the strongest rule on the whole system and, for every proper subset of its accelerator types,
on the system with only those types' instances: a schedule of the whole system that leaves the
other instances idle. The best of them is replayed on the whole system
(relmas.ceiling.plan_replay, a timed plan of its run) to show that the engine meets its count
there; beside it the relaxation's bound. On a scenario with service targets, also the least
shortfall of the rule and target-aware baselines on the whole system and on the subsets, the
latter replayed the same way. `--types`
tries one subset instead of all.

`targets`: the evaluation traces drawn again with service targets given to the scenarios' tenants
by name (`--targets camera=0.98,batch=0.5`; cost tables from `--costs`, default the study's): per
trace whether the targets are proven unreachable, the proven lower bound on the shortfall and its
seconds (relmas.ceiling.targets), beside the least shortfall of the rule baselines and of the
target-aware ones. Scenarios whose tenants already carry targets keep them.

    python benchmarks/bench_ceiling.py small --scenarios vision_heavy --jobs 8 --load 4 --traces 100
    python benchmarks/bench_ceiling.py traces --scenarios vision_heavy,bursty
    python benchmarks/bench_ceiling.py subsets --scenarios vision_heavy
    python benchmarks/bench_ceiling.py subsets --scenarios service_levels --types simba_chiplet
    python benchmarks/bench_ceiling.py targets --targets camera=0.98,assistant=0.9,batch=0.5
"""

from __future__ import annotations

import argparse
import copy
import itertools
import statistics
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import polars as pl
from command_line import print_table, run, study_scenarios  # a sibling module

from relmas import arguments, catalog
from relmas.ceiling.bound import relaxation_bound
from relmas.ceiling.exact import solve_exact
from relmas.ceiling.instance import Instance
from relmas.ceiling.plan import Plan
from relmas.ceiling.plan_replay import PlanReplay
from relmas.ceiling.targets import shortfall_bound
from relmas.errors import InputError
from relmas.evaluate import load_job_trace
from relmas.policies import make_policy
from relmas.report import markdown_table
from relmas.sim import Engine
from relmas.sim.costs import CostTables, load_costs
from relmas.sim.result import SimResult
from relmas.sim.system import System
from relmas.study import Study
from relmas.workload import generate_trace


def outcomes(
    system: System, tables: CostTables, jobs: pl.DataFrame, names: Sequence[str]
) -> dict[str, tuple[int, float | None]]:
    """Per policy of `names`: the deadlines it meets on `jobs` and its shortfall (None without
    service targets)."""
    out = {}
    for name in names:
        result = Engine(system, tables, jobs).run(make_policy(name))
        out[name] = (int(result.jobs["met"].sum()), result.metrics["shortfall"])
    return out


def strongest_rule(system, tables, jobs) -> tuple[str, int]:
    """The rule baseline meeting the most deadlines on `jobs`, and how many."""
    met = outcomes(system, tables, jobs, catalog.of_kind("rule"))
    best = max(met, key=lambda name: met[name][0])
    return best, met[best][0]


def small(args: argparse.Namespace, study: Study, scenario: str) -> dict:
    system = study.system(scenario)
    study.costs(scenario)  # the study's own tables, checked against the config
    if args.unlimited:
        system = replace(system, dram_gbps=None)
    tables = load_costs(study.paths.costs_dir, system, args.config, models=study.models)
    parsed = study.scenario(scenario, jobs=args.jobs)
    if args.load is not None:
        parsed = replace(parsed, arrival=replace(parsed.arrival, load=args.load))
    above, below, seconds, proven = [], [], [], 0
    for seed in range(args.traces):
        jobs = generate_trace(scenario, parsed, system, tables, seed)
        bound = relaxation_bound(Instance.of(system, tables, jobs), time_limit_s=args.time_limit)
        exact = solve_exact(
            system,
            tables,
            jobs,
            time_limit_s=args.time_limit,
            threads=1,
            max_jobs=args.jobs,
            max_operations=10**6,
            trace=f"{scenario} seed {seed}",
        )
        seconds.append(bound.seconds)
        if exact.exact:
            proven += 1
            above.append(bound.met - exact.lower)
            below.append(exact.lower - strongest_rule(system, tables, jobs)[1])
    return {
        "scenario": scenario,
        "jobs": args.jobs,
        "traces": args.traces,
        "proven": proven,
        "ceiling-optimum median": statistics.median(above) if above else None,
        "ceiling-optimum max": max(above, default=None),
        "optimum-rule median": statistics.median(below) if below else None,
        "optimum-rule max": max(below, default=None),
        "bound median_s": round(statistics.median(seconds), 3),
    }


def traces(args: argparse.Namespace, study: Study, scenario: str) -> list[dict]:
    system = study.system(scenario)
    tables = study.costs(scenario, args.costs)
    costs_dir = study.paths.costs_dir if args.costs is None else args.costs
    if args.unlimited:  # the same traces on the system without its DRAM limit
        system = replace(system, dram_gbps=None)
        tables = load_costs(costs_dir, system, args.config, models=study.models)
    rows = []
    for seed in study.config["evaluation"]["seeds"]:
        if args.costs is None:
            jobs = load_job_trace(study.paths.workload(scenario, seed), tables)
        else:  # drawn again, as `relmas workload` draws them
            jobs = study.trace(scenario, seed, args.costs)
        bound = relaxation_bound(
            Instance.of(system, tables, jobs),
            time_limit_s=args.time_limit,
            counts=not args.no_counts,
        )
        rule, met = strongest_rule(system, tables, jobs)
        rows.append(
            {
                "scenario": scenario,
                "seed": seed,
                "jobs": jobs.height,
                "strongest rule": rule,
                "rule met": met,
                "ceiling": bound.met,
                "value": round(bound.value, 2),
                "ceiling-rule (points)": round(100 * (bound.met - met) / jobs.height, 1),
                "status": bound.status,
                "rounds": bound.rounds,
                "seconds": round(bound.seconds, 1),
            }
        )
        print(markdown_table(pl.DataFrame(rows[-1:])), flush=True)
    return rows


def replayed_on_whole(
    system: System, tables: CostTables, jobs: pl.DataFrame, subset: tuple, policy: str
) -> SimResult:
    """`policy`'s run on the system's instances of the types of `subset` = (types, system, tables),
    replayed on the whole system in the engine (its other instances idle)."""
    kept, idle, idle_tables = subset
    engine = Engine(idle, idle_tables, jobs, record=True)
    engine.run(make_policy(policy))
    plan = Plan.of_run(Instance.of(idle, idle_tables, jobs), engine, policy)
    whole = [k for k, name in enumerate(system.instance_types) if name in kept]
    tasks = tuple(replace(task, instance=whole[task.instance]) for task in plan.tasks)
    return Engine(system, tables, jobs).run(PlanReplay(replace(plan, tasks=tasks)))


def subsets(args: argparse.Namespace, study: Study, scenario: str) -> list[dict]:
    system = study.system(scenario)
    tables = study.costs(scenario, args.costs)
    costs_dir = study.paths.costs_dir if args.costs is None else args.costs
    types = system.accelerator_types
    if args.types and not set(args.types) < set(types):
        raise InputError(None, "--types", f"a proper subset of {', '.join(types)}", args.types)
    chosen = (
        [tuple(t for t in types if t in args.types)]
        if args.types
        else [kept for size in range(1, len(types)) for kept in itertools.combinations(types, size)]
    )
    restricted = []
    for kept in chosen:
        idle = replace(system, instances=tuple(i for i in system.instances if i.name in kept))
        restricted.append((kept, idle, load_costs(costs_dir, idle, args.config, study.models)))
    layers = np.concatenate(
        [
            np.arange(tables.first_row[m], tables.first_row[m] + tables.n_layers[m])
            for m in (
                tables.models.index(name) for name in study.config["scenarios"][scenario]["models"]
            )
        ]
    )
    fastest = np.bincount(tables.alone_s[layers].argmin(axis=1), minlength=len(tables.types))
    print(
        f"{scenario}, each of its models' layers once, per type: "
        + ", ".join(
            f"{name} {tables.dram_bytes[layers, k].sum() / 1e9:.2f} GB, fastest on {fastest[k]}"
            for k, name in enumerate(tables.types)
        )
        + f" of {layers.size} layers",
        flush=True,
    )
    rules = catalog.of_kind("rule")
    rows = []
    for seed in study.config["evaluation"]["seeds"]:
        jobs = study.trace(scenario, seed, args.costs)
        served = any(t is not None for t in jobs["target"].to_list())
        names = [*rules, *(catalog.of_kind("target") if served else ())]
        whole = outcomes(system, tables, jobs, names)
        on = [(subset, outcomes(subset[1], subset[2], jobs, names)) for subset in restricted]
        rule = max(rules, key=lambda n: whole[n][0])
        met, subset, kept_rule = max(
            ((o[n][0], subset, n) for subset, o in on for n in rules), key=lambda b: b[0]
        )
        replayed = replayed_on_whole(system, tables, jobs, subset, kept_rule)
        bound = relaxation_bound(Instance.of(system, tables, jobs), time_limit_s=args.time_limit)
        best = max(whole[rule][0], int(replayed.jobs["met"].sum()))
        row = {
            "scenario": scenario,
            "seed": seed,
            "jobs": jobs.height,
            "strongest rule": rule,
            "rule met": whole[rule][0],
            "types used": "+".join(subset[0]),
            "its rule": kept_rule,
            "types' best met": met,
            "replayed": int(replayed.jobs["met"].sum()),
            "ceiling": bound.met,
            "gain (points)": round(100 * (met - whole[rule][0]) / jobs.height, 1),
            "ceiling-best (points)": round(100 * (bound.met - best) / jobs.height, 1),
            "status": bound.status,
        }
        if served:  # the least shortfall of the rule and target-aware baselines, alike
            least = min(names, key=lambda n: whole[n][1])
            short, subset, kept_policy = min(
                ((o[n][1], subset, n) for subset, o in on for n in names), key=lambda b: b[0]
            )
            again = replayed_on_whole(system, tables, jobs, subset, kept_policy)
            row |= {
                "least shortfall (points)": round(100 * whole[least][1], 2),
                "by": least,
                "types' least shortfall (points)": round(100 * short, 2),
                "shortfall types": "+".join(subset[0]),
                "its policy": kept_policy,
                "replayed shortfall (points)": round(100 * again.metrics["shortfall"], 2),
                "targets met (replayed)": again.metrics["targets_met"],
            }
        rows.append(row)
        print(markdown_table(pl.DataFrame(rows[-1:])), flush=True)
    return rows


def with_targets(config: dict, targets: dict[str, float]) -> dict:
    """`config` with `targets` (tenant -> rate) set on every scenario's tenants of those names."""
    config = copy.deepcopy(config)
    for scenario in config["scenarios"].values():
        for tenant in scenario.get("tenants", []):
            if tenant["name"] in targets:
                tenant["target"] = targets[tenant["name"]]
    return config


def targets(args: argparse.Namespace, study: Study, scenario: str) -> list[dict]:
    served = Study(with_targets(study.config, args.targets), args.config)
    system = study.system(scenario)
    tables = study.costs(scenario, args.costs)
    rows = []
    for seed in study.config["evaluation"]["seeds"]:
        jobs = served.trace(scenario, seed, args.costs)
        instance = Instance.of(system, tables, jobs)
        bound = shortfall_bound(instance, jobs, time_limit_s=args.time_limit)
        shortfall = {
            name: Engine(system, tables, jobs).run(make_policy(name)).metrics["shortfall"]
            for name in catalog.of_kind("rule") + catalog.of_kind("target")
        }
        rule = min(catalog.of_kind("rule"), key=shortfall.__getitem__)
        aware = min(catalog.of_kind("target"), key=shortfall.__getitem__)
        rows.append(
            {
                "scenario": scenario,
                "seed": seed,
                "jobs": jobs.height,
                "groups": bound.groups,
                "targets": bound.reachable,
                "shortfall >=": round(bound.shortfall, 4),
                "least rule shortfall": round(shortfall[rule], 4),
                "rule": rule,
                "least target-aware shortfall": round(shortfall[aware], 4),
                "target-aware": aware,
                "status": bound.status,
                "rounds": bound.rounds,
                "seconds": round(bound.seconds, 1),
            }
        )
        print(markdown_table(pl.DataFrame(rows[-1:])), flush=True)
    return rows


def _rates(text: str) -> dict[str, float]:
    """`--targets`: tenant=rate,... (a rate that is no number in [0, 1] is its usage line)."""
    pairs = [item.split("=") for item in text.split(",")]
    if any(len(pair) != 2 for pair in pairs):
        raise argparse.ArgumentTypeError(f"expected tenant=rate,..., got {text!r}")
    return {name: arguments.rate(rate) for name, rate in pairs}


def main() -> int:
    parser = arguments.Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "mode", nargs="?", default="traces", choices=["small", "traces", "subsets", "targets"]
    )
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--scenarios", default=None, help="comma-separated (default: all)")
    parser.add_argument(
        "--jobs", type=arguments.positive_int, default=6, help="small: jobs per trace"
    )
    parser.add_argument(
        "--traces", type=arguments.positive_int, default=100, help="small: traces per scenario"
    )
    parser.add_argument(
        "--time-limit", type=arguments.positive, default=30.0, help="seconds per solve"
    )
    parser.add_argument("--unlimited", action="store_true", help="the systems without a DRAM limit")
    parser.add_argument(
        "--load",
        type=arguments.positive,
        default=None,
        help="small: this arrival load (a short trace that "
        "starts idle needs a higher one to be contended)",
    )
    parser.add_argument(
        "--types",
        type=lambda text: text.split(","),
        default=None,
        help="subsets: only this subset of the accelerator types (comma-separated; default: all)",
    )
    parser.add_argument("--targets", type=_rates, default={}, help="targets: tenant=rate,...")
    parser.add_argument(
        "--costs",
        default=None,
        help="traces, subsets, targets: cost tables (traces: the traces drawn again with them)",
    )
    parser.add_argument(
        "--no-counts", action="store_true", help="traces: the bound without its count rows"
    )
    args = parser.parse_args()
    study, names = study_scenarios(args)
    rows = []
    for name in names:
        if args.mode == "small":
            rows.append(small(args, study, name))
            print(markdown_table(pl.DataFrame(rows[-1:])), flush=True)
        else:
            mode = {"traces": traces, "subsets": subsets, "targets": targets}[args.mode]
            rows += mode(args, study, name)
    table = print_table(args, rows)
    if args.mode == "traces":
        summary = table.group_by("scenario", maintain_order=True).agg(
            pl.col("ceiling-rule (points)").mean().round(1).alias("mean ceiling-rule (points)"),
            pl.col("seconds").median().alias("median s"),
            pl.col("seconds").max().alias("max s"),
        )
        print(markdown_table(summary))
    if args.mode == "subsets":
        summary = table.group_by("scenario", maintain_order=True).agg(
            pl.col("rule met").mean().alias("rule met (mean)"),
            pl.col("types' best met").mean().alias("types' best met (mean)"),
            pl.col("replayed").mean().alias("replayed (mean)"),
            *(
                [
                    pl.col("least shortfall (points)").mean().round(2),
                    pl.col("replayed shortfall (points)").mean().round(2),
                    pl.col("targets met (replayed)").sum(),
                ]
                if "least shortfall (points)" in table.columns
                else []
            ),
            pl.col("ceiling").mean().alias("ceiling (mean)"),
            pl.col("gain (points)").mean().round(1).alias("mean gain (points)"),
            pl.col("ceiling-best (points)").mean().round(1).alias("mean ceiling-best (points)"),
        )
        print(markdown_table(summary))
    if args.mode == "targets":
        summary = table.group_by("scenario", maintain_order=True).agg(
            (pl.col("targets") == "unreachable").sum().alias("proven unreachable"),
            pl.col("shortfall >=").mean().round(4).alias("mean shortfall >="),
            pl.col("least rule shortfall").mean().round(4).alias("mean least rule shortfall"),
            pl.col("seconds").median().alias("median s"),
            pl.col("seconds").max().alias("max s"),
        )
        print(markdown_table(summary))
    return 0


if __name__ == "__main__":
    run(main)
