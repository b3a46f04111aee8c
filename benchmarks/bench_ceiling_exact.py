"""How large a trace the exact search (relmas.ceiling.exact) proves its optimum on, and how fast.

For each scenario of the config (its system, model mix, tenants and load) and each size, draws
`--traces` traces of that many jobs, solves each with `solve_exact` (`--time-limit` seconds per
CP-SAT model, one worker) and prints, per scenario and size: the median and maximum seconds of the
two solves, how often the optimum was proven (lower = upper), how often each model was solved to
OPTIMAL, and the mean bounds. Needs the study's cost tables (`--costs`, default the config's).

    python benchmarks/bench_ceiling_exact.py                       # default config, 5/10/20 jobs
    python benchmarks/bench_ceiling_exact.py --unlimited --sizes 5 10 --traces 5
    python benchmarks/bench_ceiling_exact.py --synthetic --sizes 6 10 --traces 8

`--synthetic` solves the property test's generated traces instead (tests/test_ceiling_exact.py:
3-layer synthetic models on 2 + 1 instances of two types, deadlines 0.9-1.6 x the isolated
latency), with and without a 3 GB/s bandwidth limit and piece tables.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import polars as pl
from command_line import print_table, run, study_scenarios  # a sibling module

from relmas import arguments
from relmas.ceiling.exact import solve_exact
from relmas.report import markdown_table
from relmas.sim.costs import load_costs
from relmas.study import Study
from relmas.workload import generate_trace


def measure(args: argparse.Namespace, study: Study, scenario: str) -> list[dict]:
    system = study.system(scenario)
    if args.costs is None:
        study.costs(scenario)  # the study's own tables, checked against the config
    if args.unlimited:
        system = replace(system, dram_gbps=None)
    directory = study.paths.costs_dir if args.costs is None else args.costs
    tables = load_costs(directory, system, args.config, models=study.models)
    rows = []
    for size in args.sizes:
        parsed = study.scenario(scenario, jobs=size)
        results, layers = [], []
        for seed in range(args.traces):
            jobs = generate_trace(scenario, parsed, system, tables, seed)
            models = [tables.model_index(m) for m in jobs["model"].to_list()]
            layers.append(int(tables.n_layers[models].sum()))
            results.append(
                solve_exact(
                    system,
                    tables,
                    jobs,
                    time_limit_s=args.time_limit,
                    max_jobs=size,
                    max_operations=10**6,
                    trace=f"{scenario} seed {seed}",
                )
            )
        layers_mean = round(statistics.mean(layers), 1)
        rows.append({"scenario": scenario, "jobs": size, "layers": layers_mean} | _row(results))
        print(markdown_table(pl.DataFrame(rows[-1:])), flush=True)
    return rows


def synthetic(args: argparse.Namespace) -> list[dict]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.test_ceiling_exact import _case

    rows = []
    for size in args.sizes:
        for dram_gbps in (None, 3.0):
            for pieces in (False, True):
                results = [
                    solve_exact(
                        *_case(100 + k, size, 3, 2, dram_gbps, pieces, (0.9, 1.6)),
                        time_limit_s=args.time_limit,
                        max_jobs=size,
                        max_operations=10**6,
                    )
                    for k in range(args.traces)
                ]
                rows.append(
                    _row(results) | {"jobs": size, "dram_gbps": dram_gbps, "pieces": pieces}
                )
                print(markdown_table(pl.DataFrame(rows[-1:])), flush=True)
    return rows


def _row(results: list) -> dict:
    seconds = [r.solve_s for r in results]
    return {
        "traces": len(results),
        "median_s": round(statistics.median(seconds), 2),
        "max_s": round(max(seconds), 2),
        "proven": sum(r.exact for r in results),
        "relaxation_optimal": sum(r.relaxation == "OPTIMAL" for r in results),
        "lower": round(statistics.mean(r.lower for r in results), 2),
        "upper": round(statistics.mean(r.upper for r in results), 2),
    }


def main() -> int:
    parser = arguments.Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument(
        "--costs",
        default=None,
        help="cost tables, used unchecked (default: the config's, checked)",
    )
    parser.add_argument("--scenarios", default=None, help="comma-separated (default: all)")
    parser.add_argument("--sizes", type=arguments.positive_int, nargs="+", default=[5, 10, 20])
    parser.add_argument(
        "--traces", type=arguments.positive_int, default=3, help="traces per scenario and size"
    )
    parser.add_argument(
        "--time-limit", type=arguments.positive, default=10.0, help="seconds per CP-SAT model"
    )
    parser.add_argument("--unlimited", action="store_true", help="the systems without a DRAM limit")
    parser.add_argument("--synthetic", action="store_true", help="the property test's traces")
    args = parser.parse_args()
    if args.synthetic:
        rows = synthetic(args)
        print(markdown_table(pl.DataFrame(rows)))
        return 0
    study, names = study_scenarios(args)
    rows = [row for name in names for row in measure(args, study, name)]
    print_table(args, rows)
    return 0


if __name__ == "__main__":
    run(main)
