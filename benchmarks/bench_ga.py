"""Offline genetic algorithm benchmark: search time per trace size, SLA rate vs the best heuristic.

    .venv/bin/python benchmarks/bench_ga.py --costs DIR [--config config/quick.yaml]
        [--scenario mixed] [--load 1.2] [--sizes 10 20 50] [--seeds 1 2 3]
        [--population 32] [--generations 100] [--ga-seeds 0 1 2 3]

Traces come from the configured scenario with `jobs` set to each size (and `load` overridden if
given), on the scenario's system. With --costs the cost tables are `{DIR}/{accelerator}.parquet`
(`relmas profile`); without it, synthetic tables with 50 layers per configured model. The GA runs
with no time limit, so its result depends only on its seed; with several --ga-seeds the table
shows the deadlines met by each and the gain of the best over the best heuristic. Runs on one
core (pinned where the OS allows), after a warm-up run that loads the Numba cache.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

from relmas import arguments
from relmas.config import load_config
from relmas.policies import make_policy
from relmas.policies.ga_offline import SEED_POLICIES
from relmas.sim import CostTables, Engine
from relmas.sim.costs import load_costs
from relmas.workload import generate_trace, scenario_system

# The tests' synthetic cost tables (tests/synthetic.py), from the project root.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.synthetic import synthetic_costs  # noqa: E402


def met(result) -> int:
    return int(result.jobs["met"].sum())


def main() -> None:
    parser = arguments.Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/quick.yaml")
    parser.add_argument("--scenario", default="mixed")
    parser.add_argument("--costs", help="directory of cost tables (default: synthetic)")
    parser.add_argument(
        "--load", type=arguments.positive, help="override the scenario's arrival load"
    )
    parser.add_argument("--sizes", type=arguments.positive_int, nargs="+", default=[10, 20, 50])
    parser.add_argument("--seeds", type=arguments.seed, nargs="+", default=[1, 2, 3])
    parser.add_argument("--population", type=arguments.positive_int, default=32)
    parser.add_argument("--generations", type=arguments.count, default=100)
    parser.add_argument("--ga-seeds", type=arguments.seed, nargs="+", default=[0])
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

    config = load_config(args.config)
    system = scenario_system(config, args.scenario, args.config)
    if args.costs:
        tables = load_costs(args.costs, system, models=tuple(config["models"]))
    else:
        layers = {model: 50 for model in config["models"]}
        frame = synthetic_costs(layers, system.accelerator_types, seed=0)
        tables = CostTables.from_frame(frame, system.accelerator_types)
    scenario = dict(config["scenarios"][args.scenario])
    if args.load is not None:
        scenario["arrival"] = dict(scenario["arrival"], load=args.load)
    budget = {"population": args.population, "generations": args.generations}

    def ga(jobs, ga_seed: int):
        policy = make_policy(
            "ga_offline", seed=ga_seed, time_limit_s=None, max_jobs=jobs.height, **budget
        )
        start = time.perf_counter()
        result = Engine(system, tables, jobs).run(policy)
        return met(result), time.perf_counter() - start, policy.report

    warm = generate_trace(args.scenario, dict(scenario, jobs=5), system, tables, seed=0)
    ga(warm, 0)
    print(
        f"costs: {args.costs or 'synthetic'}; system: {system.to_dict()}; scenario "
        f"{args.scenario}, arrival {scenario['arrival']}; GA population {args.population}, "
        f"{args.generations} generations, no time limit, GA seeds {args.ga_seeds}; one core"
    )
    print(
        "| jobs | seed | layers | best heuristic (met) | ga_offline met per GA seed | gain "
        "| GA wall s | decodes/s | generations to reach it |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    walls: dict[int, list[float]] = {}
    for size in args.sizes:
        for seed in args.seeds:
            jobs = generate_trace(args.scenario, dict(scenario, jobs=size), system, tables, seed)
            heuristics = {
                name: met(Engine(system, tables, jobs).run(make_policy(name, seed=0)))
                for name in SEED_POLICIES
            }
            best_name = max(heuristics, key=heuristics.get)
            runs = [ga(jobs, ga_seed) for ga_seed in args.ga_seeds]
            layers = int(tables.n_layers[[tables.model_index(m) for m in jobs["model"]]].sum())
            walls.setdefault(size, []).extend(wall for _, wall, _ in runs)
            rate = statistics.median(r.evaluations / r.search_s for _, _, r in runs)
            reached = [r.history.index(r.history[-1]) for _, _, r in runs]
            print(
                f"| {size} | {seed} | {layers} | {best_name} ({heuristics[best_name]}) "
                f"| {', '.join(str(m) for m, _, _ in runs)} "
                f"| {max(m for m, _, _ in runs) - heuristics[best_name]:+d} "
                f"| {statistics.median(w for _, w, _ in runs):.2f} | {rate:,.0f} "
                f"| {', '.join(map(str, reached))} |"
            )
    for size, values in walls.items():
        print(f"median GA wall time, {size} jobs: {statistics.median(values):.2f} s")


if __name__ == "__main__":
    main()
