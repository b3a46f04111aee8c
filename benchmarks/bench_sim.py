"""Simulator benchmark: scheduling decisions per second and memory versus trace length.

    .venv/bin/python benchmarks/bench_sim.py [--costs results/default/costs] [--jobs 10000]
        [--repeats 5]

Runs on one core (pinned where the OS allows). Without --costs it uses synthetic cost tables with
the layer counts of the default model zoo, so it does not depend on profiling; with --costs it uses
the real tables of the two default accelerators. Decisions/s = policy invocations / wall time of the
whole run (simulation included), median of the repeats, after one warm-up run (Numba cache load).
Peak memory is measured with tracemalloc (numpy allocations included) around building the engine
and running it.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import polars as pl

from relmas import arguments, catalog
from relmas.evaluate import load_costs
from relmas.policies import make_policy
from relmas.sim import CostTables, Engine, load_system
from relmas.workload import generate_trace

# The tests' synthetic cost tables (tests/synthetic.py), from the project root.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.synthetic import synthetic_costs  # noqa: E402

# Layer counts (MAC-bearing operators) of the default zoo, for synthetic tables.
ZOO_LAYERS = {
    "resnet50": 54,
    "mobilenet_v2": 53,
    "vgg16": 16,
    "googlenet": 58,
    "efficientnet_b0": 82,
    "unet": 23,
    "alexnet": 8,
    "bert_base": 97,
    "gpt2": 97,
    "vit_b16": 98,
}
SYSTEM = {
    "instances": [{"name": "eyeriss_168", "count": 2}, {"name": "simba_chiplet", "count": 2}],
    "dram_gbps": 16.0,
    "sharing": "proportional",
}
# The fixed online rules: the heuristics and the rule baselines.
POLICIES = catalog.of_kind("heuristic", "rule")


def scenario(jobs: int, load: float) -> dict:
    return {
        "models": {m: 1 for m in ZOO_LAYERS},
        "tenants": [
            {"name": "interactive", "priority": 9, "slack": 3.0, "share": 0.3},
            {"name": "batch", "priority": 1, "slack": 10.0, "share": 0.7},
        ],
        "arrival": {"process": "poisson", "load": load},
        "jobs": jobs,
    }


def tables_for(system, costs_dir: str | None) -> CostTables:
    if costs_dir:
        return load_costs(costs_dir, system)
    frame = synthetic_costs(ZOO_LAYERS, system.accelerator_types, seed=0)
    return CostTables.from_frame(frame, system.accelerator_types)


def timed_run(system, tables, jobs: pl.DataFrame, policy: str) -> tuple[float, int]:
    engine = Engine(system, tables, jobs)
    start = time.perf_counter()
    engine.run(make_policy(policy, seed=0))
    return time.perf_counter() - start, engine.decisions


def stepped_run(system, tables, jobs: pl.DataFrame) -> tuple[float, int]:
    engine = Engine(system, tables, jobs)
    policy = make_policy("fcfs")
    policy.reset(engine)
    start = time.perf_counter()
    while (view := engine.next_decision()) is not None:
        engine.step(policy.decide(view))
    return time.perf_counter() - start, engine.decisions


def peak_memory(system, tables, jobs: pl.DataFrame) -> int:
    tracemalloc.start()
    Engine(system, tables, jobs).run(make_policy("fcfs"))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def main() -> None:
    parser = arguments.Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--costs", help="directory of real cost tables (default: synthetic)")
    parser.add_argument("--jobs", type=arguments.positive_int, default=10_000)
    parser.add_argument("--repeats", type=arguments.positive_int, default=5)
    parser.add_argument("--load", type=arguments.positive, default=0.9)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

    system = load_system(SYSTEM)
    tables = tables_for(system, args.costs)
    source = args.costs or "synthetic costs"
    jobs = generate_trace("bench", scenario(args.jobs, args.load), system, tables, seed=0)
    timed_run(system, tables, jobs, "fcfs")  # warm-up: load the Numba cache
    runs = [timed_run(system, tables, jobs, "fcfs") for _ in range(args.repeats)]
    seconds = statistics.median(r[0] for r in runs)
    decisions = runs[0][1]
    print(f"costs: {source}; system: {SYSTEM}; poisson load {args.load}; {args.jobs} jobs")
    print(
        f"fcfs jitted: {decisions} decisions in {seconds:.3f} s (median of {args.repeats}) "
        f"= {decisions / seconds:,.0f} decisions/s"
    )
    step_seconds, step_decisions = stepped_run(system, tables, jobs)
    print(
        f"fcfs through the Python stepping API: {step_decisions / step_seconds:,.0f} decisions/s "
        f"({1e6 * step_seconds / step_decisions:.1f} us per step)"
    )
    for policy in POLICIES:
        timed_run(system, tables, jobs.head(200), policy)  # warm-up
        wall, count = timed_run(system, tables, jobs, policy)
        print(f"  {policy:26s} {count:>9,} decisions {count / wall:>12,.0f} decisions/s")
    for count in (1_000, 10_000, 50_000):
        trace = generate_trace("bench", scenario(count, args.load), system, tables, seed=0)
        peak = peak_memory(system, tables, trace)
        print(f"peak memory, {count:>6} jobs: {peak / 2**20:7.2f} MiB ({peak / count:.0f} B/job)")


if __name__ == "__main__":
    main()
