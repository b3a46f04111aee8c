"""The ceiling's LP against a CP-SAT bracket, on windows of the default study's traces.

For each scenario (default: the contended loaded ones) and evaluation trace (`--seeds`, default the
config's first evaluation seed; drawn as `relmas workload` draws it, or read from `--workloads`),
takes `--windows` windows of `--jobs` consecutive jobs (in the engine's order, centred on points
spread evenly over the trace, the same for every size) and prints, per window:

- `rule`: the most deadlines met by a rule baseline with any of the placements `--placements`
  (`all`, `bandwidth`, and for `types` every proper subset of the system's types, the other
  instances idle), picked after the fact (`by`: rule@placement);
- `cp lower`, `cp upper`: the exact search's best replayed schedule and its proven bound
  (relmas.ceiling.exact.solve_exact, `--time-limit` s per CP-SAT model, `--threads` workers, on
  one grid of `--tick` s), seeded by its default policies and by the best rule's run (`cp
  status`: CP-SAT's statuses); `grid keeps`: the share of the window's work (each layer at its
  least alone latency) that the relaxation's grid keeps after rounding durations down, and
  `default grid keeps` the same for the first of solve_exact's own grids (~10^3 ticks);
- `lp`: the ceiling's LP bound (relmas.ceiling.bound.relaxation_bound, with its count rows, as the
  bound stage runs it; `lp value` before the floor);
- `lp-cp upper` (above CP-SAT's bound: what the LP relaxes that the job shop does not),
  `cp upper-cp lower` (the bracket, unresolved) and `cp lower-rule` (what search found).

A window is a trace of its own: the engine, both searches and the LP start it on an empty system at
its first arrival, so the bracket is that of the window's jobs served alone, not of the trace's
prefix (where earlier jobs still hold the instances and the bandwidth).

    python benchmarks/bench_ceiling_medium.py --costs DIR --jobs 100 --windows 3 --time-limit 60
    python benchmarks/bench_ceiling_medium.py --costs DIR --scenarios bursty --jobs 50 150
"""

from __future__ import annotations

import argparse
import itertools
import statistics

import numpy as np
import polars as pl
from command_line import print_table, run  # a sibling module

from relmas import arguments, catalog
from relmas.ceiling.bound import relaxation_bound
from relmas.ceiling.exact import grid_ticks, solve_exact
from relmas.ceiling.instance import Instance
from relmas.ceiling.plan import Plan
from relmas.config import load_config
from relmas.errors import InputError
from relmas.evaluate import load_job_trace
from relmas.paths import workload_file
from relmas.policies import make_policy
from relmas.policies.placement import ALL, BANDWIDTH, SEPARATOR, TYPES
from relmas.report import markdown_table
from relmas.sim import Engine
from relmas.sim.costs import CostTables
from relmas.sim.system import System
from relmas.study import Study

CONTENDED = "transformer_heavy,mixed_overload,bandwidth_scarce,vision_heavy,bursty"


def window_starts(n_jobs: int, size: int, count: int) -> list[int]:
    """The first job of each of `count` windows of `size` consecutive jobs of `n_jobs`: centred on
    points spread evenly between the trace's ends, so that windows of other sizes share centres
    (a smaller window is the middle of a larger one)."""
    if size > n_jobs:
        raise InputError(None, "--jobs", f"at most the trace's {n_jobs} jobs", size)
    centres = [round((k + 1) * n_jobs / (count + 1)) for k in range(count)]
    return [min(max(centre - size // 2, 0), n_jobs - size) for centre in centres]


def windows(jobs: pl.DataFrame, size: int, count: int) -> list[tuple[int, pl.DataFrame]]:
    """(first job's index, the window) for each window of `window_starts`, in the engine's order
    (arrival, then job_id)."""
    ordered = jobs.sort(["arrival_s", "job_id"])
    return [(s, ordered.slice(s, size)) for s in window_starts(ordered.height, size, count)]


def placements(system: System, names: list[str]) -> list[str]:
    """The placements to try: `types` stands for every proper subset of the system's types."""
    types = system.accelerator_types
    subsets = [
        SEPARATOR.join(kept)
        for size in range(1, len(types))
        for kept in itertools.combinations(types, size)
    ]
    return [p for name in names for p in (subsets if name == TYPES else [name])]


def best_rule(
    system: System, tables: CostTables, jobs: pl.DataFrame, tried: list[str]
) -> tuple[int, Plan]:
    """The most deadlines met by a rule baseline with a placement of `tried`, and that run as a
    timed plan (its source rule@placement)."""
    met = {
        (name, placement): int(
            Engine(system, tables, jobs)
            .run(make_policy(name, placement=placement))
            .jobs["met"]
            .sum()
        )
        for name in catalog.of_kind("rule")
        for placement in tried
    }
    name, placement = max(met, key=met.__getitem__)
    engine = Engine(system, tables, jobs, record=True)
    engine.run(make_policy(name, placement=placement))
    plan = Plan.of_run(Instance.of(system, tables, jobs), engine, f"{name}@{placement}")
    return met[name, placement], plan


def kept(instance: Instance, tick_s: float) -> float:
    """The share of the window's work (each layer at its least alone latency) that a grid of
    `tick_s` keeps when the relaxation rounds durations down."""
    least = instance.alone_s.min(axis=1)
    return round(float((np.floor(least / tick_s) * tick_s).sum() / least.sum()), 3)


def measure(
    args: argparse.Namespace, system: System, tables: CostTables, window: pl.DataFrame, trace: str
) -> dict:
    instance = Instance.of(system, tables, window)
    rule, plan = best_rule(system, tables, window, placements(system, args.placements))
    exact = solve_exact(
        system,
        tables,
        window,
        time_limit_s=args.time_limit,
        threads=args.threads,
        max_jobs=window.height,
        max_operations=instance.n_ops,
        tick_s=args.tick,
        seed_plans=(plan,),
        trace=trace,
    )
    lp = relaxation_bound(instance, time_limit_s=args.lp_time_limit, threads=args.threads)
    return {
        "jobs": instance.n_jobs,
        "layers": instance.n_ops,
        "rule": rule,
        "by": plan.source,
        "cp lower": exact.lower,
        "cp upper": exact.upper,
        "lp": lp.met,
        "lp value": round(lp.value, 2),
        "lp-cp upper": lp.met - exact.upper,
        "cp upper-cp lower": exact.upper - exact.lower,
        "cp lower-rule": exact.lower - rule,
        "cp lower by": exact.plan.source,
        "cp status": f"{exact.relaxation}/{exact.restriction}",
        "tick s": exact.tick_s,
        "grid keeps": kept(instance, exact.tick_s),
        "default grid keeps": kept(instance, grid_ticks(instance)[0]),
        "cp s": round(exact.solve_s, 1),
        "lp status": lp.status,
        "lp s": round(lp.seconds, 1),
    }


def trace_of(args: argparse.Namespace, study: Study, scenario: str, seed: int, tables: CostTables):
    if args.workloads is None:  # drawn as `relmas workload` draws it
        return study.trace(scenario, seed, args.costs)
    return load_job_trace(workload_file(args.workloads, scenario, seed), tables)


def scenario_rows(args: argparse.Namespace, study: Study, scenario: str) -> list[dict]:
    system = study.system(scenario)
    tables = study.costs(scenario, args.costs)
    rows = []
    for seed in args.seeds or study.config["evaluation"]["seeds"][:1]:
        jobs = trace_of(args, study, scenario, seed, tables)
        for size in args.jobs:
            for first, window in windows(jobs, size, args.windows):
                trace = f"{scenario} seed {seed} jobs {first}..{first + size - 1}"
                row = {"scenario": scenario, "seed": seed, "first": first}
                rows.append(row | measure(args, system, tables, window, trace))
                print(markdown_table(pl.DataFrame(rows[-1:])), flush=True)
    return rows


def summary(rows: list[dict]) -> list[dict]:
    """Per scenario and window size: the means of the three gaps, and how many windows' bounds
    CP-SAT's relaxation found a solution for (without one its bound is the jobs that fit)."""
    groups: dict[tuple[str, int], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["scenario"], row["jobs"]), []).append(row)
    out = []
    for (scenario, jobs), group in groups.items():

        def mean(key: str, group: list[dict] = group) -> float:
            return round(statistics.mean(r[key] for r in group), 2)

        out.append(
            {
                "scenario": scenario,
                "jobs": jobs,
                "windows": len(group),
                "relaxation solved": sum(
                    r["cp status"].split("/")[0] in ("OPTIMAL", "FEASIBLE") for r in group
                ),
                "rule": mean("rule"),
                "cp lower": mean("cp lower"),
                "cp upper": mean("cp upper"),
                "lp": mean("lp"),
                "lp-cp upper": mean("lp-cp upper"),
                "cp upper-cp lower": mean("cp upper-cp lower"),
                "cp lower-rule": mean("cp lower-rule"),
            }
        )
    return out


def main() -> int:
    parser = arguments.Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument(
        "--costs", default=None, help="cost tables (default: the config's); traces drawn with them"
    )
    parser.add_argument("--workloads", default=None, help="read the traces from this directory")
    parser.add_argument("--scenarios", default=CONTENDED, help="comma-separated")
    parser.add_argument(
        "--seeds",
        type=arguments.seed,
        nargs="+",
        default=None,
        help="default: the first evaluation seed",
    )
    parser.add_argument("--jobs", type=arguments.positive_int, nargs="+", default=[100])
    parser.add_argument(
        "--windows", type=arguments.positive_int, default=3, help="windows per trace and size"
    )
    parser.add_argument(
        "--time-limit", type=arguments.positive, default=60.0, help="seconds per CP-SAT model"
    )
    parser.add_argument(
        "--lp-time-limit", type=arguments.positive, default=60.0, help="seconds for the LP's rounds"
    )
    parser.add_argument("--threads", type=arguments.positive_int, default=1)
    parser.add_argument(
        "--tick",
        type=arguments.positive,
        default=1e-6,
        help="the exact search's grid in seconds (one grid, not solve_exact's default)",
    )
    parser.add_argument(
        "--placements",
        type=lambda text: text.split(","),
        default=[ALL, BANDWIDTH, TYPES],
        help=f"the rules' placements tried ({ALL}, {BANDWIDTH}, {TYPES}: every proper subset "
        "of the types, or types joined by +)",
    )
    args = parser.parse_args()
    study = Study(load_config(args.config), args.config)
    rows = []
    for name in args.scenarios.split(","):
        rows += scenario_rows(args, study, study.check_scenario(name, "--scenarios"))
    print_table(args, rows)
    print(markdown_table(pl.DataFrame(summary(rows))))
    return 0


if __name__ == "__main__":
    run(main)
