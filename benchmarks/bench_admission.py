"""The LP's jobs served (relmas.ceiling.admission) on a finished study's evaluation traces: how far
it moves the best schedule known, and so the report's width (ceiling − best known), and its time.

    .venv/bin/python benchmarks/bench_admission.py --study DIR [--config config/config.yaml]
        [--scenarios vision_heavy,bursty] [--scales 1,0.85] [--each] [--seeds 1000,1001]
        [--search-s 300]

`--study` is a finished study's results directory (e.g. results/default after `make run`): its
workloads, cost tables and report (report/summary.parquet's `ceiling` and `best_known` rows, the
latter as that study's report found it). Per evaluation trace: the relaxation bound again (one
thread, the config's time limit), then the LP's jobs served with each share of the bandwidth of
`--scales` (default: the config's `evaluation.ceiling.admission_bandwidth`), its count replayed on
the whole trace; the best known with it and the width before and after, in SLA points. Per
scenario the means, and the median seconds of the schedule (the bound's own time apart).
`--each`: every share alone, one row each (how many jobs its LP keeps and its run meets).
`--search-s S`: then the window search (relmas.ceiling.window_search) from the LP's jobs served
for S seconds per trace, with the config's window options: what it meets, its windows re-solved,
kept, tight (none more with the bandwidth shared) and closed (none more on the instances alone),
and whether it converged (its last pass closed every window).
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from relmas import arguments
from relmas.ceiling.admission import Admission, serve_lp_jobs
from relmas.ceiling.bound import Bound, relaxation_bound
from relmas.ceiling.instance import Instance
from relmas.ceiling.window_search import Searched, configured_search
from relmas.config import load_config
from relmas.errors import InputError
from relmas.evaluate import evaluation_inputs
from relmas.paths import ResultPaths
from relmas.report import markdown_table
from relmas.study import Study, relaxation_options


def trace_rows(
    study: Study,
    paths: ResultPaths,
    scenario: str,
    seed: int,
    tried: list[list[float]],
    known,
    search_s: float | None,
) -> list[dict]:
    """One row per list of shares of `tried` on the trace of `scenario` and `seed`, each with
    the window search from the LP's jobs served for `search_s` seconds (None: none)."""
    system, tables, jobs = evaluation_inputs(
        study, scenario, paths.workload(scenario, seed), paths.costs_dir
    )
    options = relaxation_options(study.config)
    bound = relaxation_bound(Instance.of(system, tables, jobs), **options)
    ceiling = study.config["evaluation"]["ceiling"]
    rows = []
    for scales in tried:
        served = serve_lp_jobs(system, tables, jobs, bound, scales=scales, **options)
        searched = None
        if search_s is not None and served.schedule is not None:
            searched = configured_search(
                system, tables, jobs, served.schedule, bound.shares, ceiling, search_s
            )
        rows.append(_row(scenario, seed, bound, served, searched, known))
    return rows


def _row(
    scenario: str, seed: int, bound: Bound, served: Admission, searched: Searched | None, known
) -> dict:
    before, ceiling = known[scenario, seed]
    after = max(before, served.met, searched.met if searched else 0)
    search = {}
    if searched is not None:
        search = {
            "searched": searched.met,
            "windows/kept/tight/closed": (
                f"{searched.windows}/{searched.kept}/{searched.tight}/{searched.closed}"
            ),
            "converged": searched.converged,
            "search seconds": round(searched.seconds, 1),
        }
    return {
        "scenario": scenario,
        "seed": seed,
        "ceiling": ceiling,
        "best known": before,
        "LP's jobs served": served.met,
        "of admitted": served.admitted,
        "share": served.scale,
        "by": served.source,
        "width before (points)": round(100 * (ceiling - before) / bound.jobs, 1),
        "width after (points)": round(100 * (ceiling - after) / bound.jobs, 1),
        "seconds": round(served.seconds, 1),
        "bound seconds": round(bound.seconds, 1),
    } | search


def evaluation_seeds(chosen: list[int] | None, config: Mapping[str, Any], source: str) -> list[int]:
    """`--seeds` (default: all), each an evaluation seed of the study: the report has rows of
    those traces only."""
    seeds = config["evaluation"]["seeds"]
    for seed in chosen or []:
        if seed not in seeds:
            raise InputError(source, "--seeds", f"one of the evaluation seeds {seeds}", seed)
    return chosen or seeds


def reported(
    paths: ResultPaths, traces: list[tuple[str, int]]
) -> dict[tuple[str, int], tuple[int, int]]:
    """Per trace of `traces` (scenario, seed), the deadlines met by the best known schedule and
    the ceiling, from the study's report/summary.parquet: `--study` is a finished study of the
    config, refused before any trace is run."""
    path = paths.report_dir / "summary.parquet"
    if not path.is_file():
        raise InputError(path, "--study", "a finished study's results directory (its report)")
    summary = pl.read_parquet(path)
    refs = summary.filter(pl.col("kind").is_in(["best_known", "ceiling"])).with_columns(
        met=(pl.col("sla_rate") * pl.col("jobs")).round().cast(pl.Int64)
    )
    known = {
        (scenario, seed): (met["best_known"], met["ceiling"])
        for (scenario, seed), rows in refs.group_by("scenario", "seed")
        for met in [dict(zip(rows["kind"], rows["met"], strict=True))]
    }
    for scenario, seed in traces:
        if (scenario, seed) not in known:
            expected = f"the ceiling and best_known rows of {scenario}, seed {seed}"
            raise InputError(path, "--study", expected)
    return known


def main() -> int:
    parser = arguments.Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", type=Path, required=True)
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--scenarios", default=None, help="comma-separated (default: all)")
    parser.add_argument(
        "--scales",
        type=arguments.listed(arguments.share),
        default=None,
        help="shares of the bandwidth, comma-separated",
    )
    parser.add_argument("--each", action="store_true", help="every share alone, a row each")
    parser.add_argument(
        "--search-s",
        type=arguments.positive,
        default=None,
        help="seconds of the window search per trace from the LP's jobs served (default none)",
    )
    parser.add_argument(
        "--seeds",
        type=arguments.listed(arguments.seed),
        default=None,
        help="evaluation seeds, comma-separated (default: all)",
    )
    args = parser.parse_args()
    try:
        config = load_config(args.config) | {"results": str(args.study)}
        study, paths = Study(config, args.config), ResultPaths.of(config)
        names = args.scenarios.split(",") if args.scenarios else list(config["scenarios"])
        seeds = evaluation_seeds(args.seeds, config, args.config)
        traces = [
            (study.check_scenario(name, "--scenarios"), seed) for name in names for seed in seeds
        ]
        known = reported(paths, traces)
        scales = args.scales or config["evaluation"]["ceiling"]["admission_bandwidth"]
        tried = [[scale] for scale in scales] if args.each else [scales]
        rows = []
        for scenario, seed in traces:
            rows += trace_rows(study, paths, scenario, seed, tried, known, args.search_s)
            print(markdown_table(pl.DataFrame(rows[-len(tried) :])), flush=True)
    except InputError as error:
        print(error, file=sys.stderr)
        return 2
    table = pl.DataFrame(rows)
    print(markdown_table(table))
    keys = ["scenario", "share"] if args.each else ["scenario"]
    means = table.group_by(keys, maintain_order=True).agg(
        pl.col("ceiling", "best known", "LP's jobs served").mean(),
        pl.col("width before (points)", "width after (points)").mean().round(1),
        pl.col("seconds").median().alias("seconds (median)"),
    )
    print(markdown_table(means))
    print(f"median seconds over all traces: {statistics.median(table['seconds'].to_list()):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
