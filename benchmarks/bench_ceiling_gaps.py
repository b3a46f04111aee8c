"""Where the ceiling's relaxation loses, on small traces where memory binds (docs/ceiling.md).

Draws contended small traces — a burst of jobs (arrivals spread over `--spread` x the mean
isolated latency), byte-heavy models, few instances, scarce bandwidth — and solves each with the
exact search (relmas.ceiling.exact, `--time-limit` s per CP-SAT model, one worker). Per trace it
prints the strongest rule, the exact search's proven bounds, and a ladder of upper bounds, each a
relaxation of the engine that drops one more part of it:

- `placed`: the exact search's relaxation (job shop, every layer at its alone latency) with byte
  windows counting each layer's bytes on the type it is placed on — the fluid relaxed the LP's
  way, nothing else relaxed;
- `least`: the same with each layer's bytes on its thriftiest type (the shipped exact relaxation);
- `none`: the same without byte windows (the bandwidth only in the alone latencies);
- `mip`: the LP's own rows (relmas.ceiling.bound, every window [arrival_i, deadline_j]) with whole
  jobs and whole layers: what the LP loses to order, instances and non-preemption is placed − mip;
- `lp`: the LP's certified bound without its count rows (relmas.ceiling.bound.relaxation_bound,
  `counts=False`): what it loses to fractions is lp − mip;
- `counted`: the bound as shipped, with the windows' count rows.

`served` is the LP's jobs served (relmas.ceiling.admission, with the config's shares of the
bandwidth): the jobs the counted LP keeps, run by a deadline rule (`--served-by all`: by every
plain rule form, shortest-work first too), replayed. `moved`: the same, its jobs then moved by
the local search of `move_admitted` (at most about `--tries` runs), replayed. `searched`: the
window search (relmas.ceiling.window_search) from `moved`'s schedule, with the config's window
options (`--window-jobs` and `--search-s` override its jobs per window and seconds per trace),
its windows re-solved/kept/tight/closed in `windows`; `upper`, the least upper bound it is checked
against.
`opt` is the optimum where proven: the best replayed schedule (rules, the restriction, the
relaxations' schedules: `lower`; with `--ga` also the best of three ga_offline runs, `ga`, an
engine run that shares the bandwidth where the restriction may not; `served`, `moved` and
`searched`) meets the least of the upper bounds. The gaps are then per step: lp − mip
(fractional jobs and layers), mip − placed (order within windows, instances, non-preemption),
placed − opt (the fluid's coupling beyond the byte budget), least − placed (bytes on the
thriftiest type instead of the placed one).

    python benchmarks/bench_ceiling_gaps.py synthetic --jobs 8 --traces 16 --ga
    python benchmarks/bench_ceiling_gaps.py real --costs DIR --jobs 6 --traces 8 --ga \
        --dram-gbps 8 --slack 1.2 3

`synthetic`: hand-built cost tables (tests/synthetic.py) of two 3- and 2-layer models on 2 + 1
instances of two types, the 2-instance type moving twice the bytes (16-bit against 8-bit), demand
about twice the bandwidth. `real`: the default config's system and accelerators with the cost
tables in `--costs` (`relmas zoo` + `relmas profile` of config/config.yaml), the byte-heavy models
`--models` (default alexnet, vgg16, unet), at `--dram-gbps` (default the system's 16).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import highspy
import numpy as np
import polars as pl
from command_line import print_table, run  # a sibling module

from relmas import catalog
from relmas.ceiling.admission import plain_rules, serve_lp_jobs
from relmas.ceiling.bound import Relaxation, relaxation_bound
from relmas.ceiling.exact import relaxation_upper, solve_exact
from relmas.ceiling.instance import Instance
from relmas.ceiling.window_search import configured_search
from relmas.config import load_config
from relmas.policies import make_policy
from relmas.report import markdown_table
from relmas.sim import CostTables, Engine
from relmas.sim.costs import load_costs
from relmas.sim.system import System
from relmas.study import Study

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.synthetic import burst_trace, memory_bound_case  # noqa: E402


def synthetic_case(seed: int, args: argparse.Namespace) -> tuple[System, CostTables, pl.DataFrame]:
    return memory_bound_case(seed, args.jobs, args.dram_gbps or 3.0, args.spread, args.slack)


def real_case(seed: int, args: argparse.Namespace) -> tuple[System, CostTables, pl.DataFrame]:
    study = Study(load_config(args.config), args.config)
    system = study.system("vision_heavy")  # the default system (16 GB/s)
    if args.dram_gbps:
        system = replace(system, dram_gbps=args.dram_gbps)
    tables = load_costs(args.costs, system, args.config, models=study.models)
    models = args.models.split(",")
    return system, tables, burst_trace(tables, models, args.jobs, seed, args.spread, args.slack)


def integer_value(instance: Instance, time_limit_s: float) -> float:
    """The LP's rows with every window [arrival_i, deadline_j] and whole jobs and layers, solved
    by HiGHS's MIP: its dual bound (the optimum when solved)."""
    lp = Relaxation(instance, threads=1)
    starts, ends = np.unique(lp.arrival), np.unique(lp.deadline)
    lp.add_windows([(a, d, r) for a in starts for d in ends[ends > a] for r in range(lp.resources)])
    whole = np.r_[np.arange(lp.n), np.arange(lp.block_start[0], lp.extra_start)]
    if instance.pieces is not None:  # a cut layer's share on a type is fractional
        whole = np.arange(lp.n)
    lp.highs.changeColsIntegrality(
        whole.size, whole.astype(np.int32), np.full(whole.size, highspy.HighsVarType.kInteger)
    )
    lp.highs.setOptionValue("mip_rel_gap", 0.0)
    lp.highs.setOptionValue("time_limit", time_limit_s)
    lp.highs.run()
    return -float(lp.highs.getInfo().mip_dual_bound)


def measure(seed: int, args: argparse.Namespace) -> dict:
    system, tables, jobs = (synthetic_case if args.source == "synthetic" else real_case)(seed, args)
    instance = Instance.of(system, tables, jobs)
    rules = {
        name: int(Engine(system, tables, jobs).run(make_policy(name)).jobs["met"].sum())
        for name in catalog.of_kind("rule")
    }
    exact = solve_exact(
        system,
        tables,
        jobs,
        time_limit_s=args.time_limit,
        max_jobs=args.jobs,
        max_operations=10**6,
        trace=f"{args.source} seed {seed}",
    )
    ladder = {
        rows: relaxation_upper(
            system,
            tables,
            jobs,
            tick_s=exact.tick_s,
            time_limit_s=args.time_limit,
            byte_rows=rows,
            hint=exact.plan,
        )
        for rows in ("placed", "least", "none")
    }
    ga = max(
        (
            int(
                Engine(system, tables, jobs)
                .run(make_policy("ga_offline", seed=s))
                .jobs["met"]
                .sum()
            )
            for s in range(3 if args.ga else 0)
        ),
        default=0,
    )
    lp = relaxation_bound(instance, time_limit_s=60.0, counts=False)
    counted = relaxation_bound(instance, time_limit_s=60.0)
    ceiling = load_config(args.config)["evaluation"]["ceiling"]
    scales = ceiling["admission_bandwidth"]
    served_by = plain_rules() if args.served_by == "all" else None
    options = {"scales": scales, "time_limit_s": 60.0, "rules": served_by}
    served = serve_lp_jobs(system, tables, jobs, counted, **options).met
    moved_run = serve_lp_jobs(system, tables, jobs, counted, **options, tries=args.tries)
    moved, searched, search = moved_run.met, moved_run.met, None
    if moved_run.schedule is not None:
        window = {"search_window_jobs": args.window_jobs} if args.window_jobs else {}
        searching = ceiling | window
        start = moved_run.schedule
        search = configured_search(
            system, tables, jobs, start, counted.shares, searching, args.search_s
        )
        searched = search.met
    lower = max(exact.lower, ga, served, moved, searched)
    upper = min(exact.upper, ladder["placed"][0])
    proven = lower == upper
    return {
        "seed": seed,
        "layers": instance.n_ops,
        "rule": max(rules.values()),
        "opt": lower if proven else None,
        "lower": exact.lower,
        "ga": ga if args.ga else None,
        "served": served,
        "moved": moved,
        "searched": searched,
        "upper": upper,
        "windows": None
        if search is None
        else f"{search.windows}/{search.kept}/{search.tight}/{search.closed}",
        "search_s": None if search is None else round(search.seconds, 1),
        "placed": ladder["placed"][0],
        "least": ladder["least"][0],
        "none": ladder["none"][0],
        "mip": round(integer_value(instance, args.time_limit), 2),
        "lp": round(lp.value, 2),
        "counted": round(counted.value, 2),
        "statuses": "/".join(status[:3] for _, status in ladder.values()),
        "exact_s": round(exact.solve_s, 1),
    }


def summary(rows: list[dict]) -> dict:
    """Mean gaps per step over the traces whose optimum is proven."""
    proven = [r for r in rows if r["opt"] is not None]

    def mean(key: str) -> float | None:
        return round(statistics.mean(r[key] for r in proven), 2) if proven else None

    for r in proven:
        r["lp-mip"] = r["lp"] - r["mip"]
        r["mip-placed"] = r["mip"] - r["placed"]
        r["placed-opt"] = r["placed"] - r["opt"]
        r["least-placed"] = r["least"] - r["placed"]
        r["lp-opt"] = r["lp"] - r["opt"]
        r["opt-rule"] = r["opt"] - r["rule"]
        r["counted-opt"] = r["counted"] - r["opt"]
        r["opt-served"] = r["opt"] - r["served"]
        r["opt-moved"] = r["opt"] - r["moved"]
        r["opt-searched"] = r["opt"] - r["searched"]
    keys = ["lp-opt", "lp-mip", "mip-placed", "placed-opt", "least-placed", "opt-rule"]
    keys += ["counted-opt", "opt-served", "opt-moved", "opt-searched"]
    counts = {
        "served at opt": sum(r["served"] == r["opt"] for r in proven),
        "moved at opt": sum(r["moved"] == r["opt"] for r in proven),
        "searched at opt": sum(r["searched"] == r["opt"] for r in proven),
        "moved below rule": sum(r["moved"] < r["rule"] for r in rows),
        "searched below rule": sum(r["searched"] < r["rule"] for r in rows),
        "searched above upper": sum(r["searched"] > r["upper"] for r in rows),
        "search s (median)": statistics.median(r["search_s"] or 0.0 for r in rows),
    }
    return {"traces": len(rows), "proven": len(proven)} | {k: mean(k) for k in keys} | counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", nargs="?", default="synthetic", choices=["synthetic", "real"])
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--traces", type=int, default=16)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--spread", type=float, default=1.0, help="arrivals within x isolated")
    parser.add_argument("--slack", type=float, nargs=2, default=(1.5, 4.0))
    parser.add_argument("--dram-gbps", type=float, default=None)
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds per model")
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--costs", default=None, help="cost tables of the config (real)")
    parser.add_argument("--models", default="alexnet,vgg16,unet")
    parser.add_argument(
        "--served-by",
        choices=["deadline", "all"],
        default="deadline",
        help="the rules serving the LP's jobs: the deadline forms (as shipped) or every plain form",
    )
    parser.add_argument(
        "--ga", action="store_true", help="ga_offline's best of 3 runs as a lower bound too"
    )
    parser.add_argument(
        "--tries", type=int, default=300, help="runs of the search moving the LP's jobs (moved)"
    )
    parser.add_argument(
        "--window-jobs",
        type=int,
        default=None,
        help="jobs per window of the window search (searched; default the config's)",
    )
    parser.add_argument(
        "--search-s",
        type=float,
        default=None,
        help="seconds of the window search per trace (default the config's)",
    )
    args = parser.parse_args()
    args.slack = tuple(args.slack)
    if args.source == "real" and args.costs is None:
        print("--costs: expected the cost tables' directory for `real`", file=sys.stderr)
        return 2
    rows = []
    for seed in range(args.first_seed, args.first_seed + args.traces):
        rows.append(measure(seed, args))
        print(markdown_table(pl.DataFrame(rows[-1:])), flush=True)
    total = summary(rows)
    print_table(args, rows)
    print(markdown_table(pl.DataFrame([total])))
    return 0


if __name__ == "__main__":
    run(main)
