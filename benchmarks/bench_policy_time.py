"""The online policies' CPU time on a finished study's traces, and a digest of each schedule.

    .venv/bin/python benchmarks/bench_policy_time.py --study results/default \
        [--config config/config.yaml] [--scenarios vision_heavy,mixed_overload] [--seed 1000] \
        [--policies prema,herald,sjf_feasible_patient] [--repeats 3]

Each policy (default: every evaluated online one: the heuristics, rule and target-aware baselines,
GACER and the learned policies, these with the study's agent of the scenario) runs on the
scenario's evaluation trace `--seed` of the study (its workloads/ and costs/), on the whole system
and, for a rule or target-aware baseline, with the bandwidth-aware placement; the row gives the
median CPU seconds of `--repeats` runs (after a warm-up on the first jobs: the Numba cache's
load), the decisions and a digest of the schedule (each job's start and finish). Run it from two
checkouts on the same study to compare (it reads only what older checkouts have: run this file
with the other checkout's interpreter): the same digest is the same schedule, job for job.
"""

from __future__ import annotations

import hashlib
import statistics
import time
from pathlib import Path

import polars as pl

from relmas import arguments, catalog
from relmas.config import load_config
from relmas.errors import InputError
from relmas.evaluate import simulate
from relmas.paths import ResultPaths
from relmas.policies import make_policy
from relmas.policies.placement import ALL, BANDWIDTH
from relmas.report import markdown_table
from relmas.study import Study, policy_options

KINDS = ("heuristic", "rule", "target", "search", "learned")


def comma_list(text: str) -> list[str]:
    """Comma-separated names (checked against the config and the catalog once it is read)."""
    return text.split(",")


def schedule_digest(jobs: pl.DataFrame) -> str:
    """The first 12 hex digits of the SHA-256 of every job's start and finish, by job id."""
    times = jobs.sort("job_id").select("start_s", "finish_s").to_numpy()
    return hashlib.sha256(times.tobytes()).hexdigest()[:12]


def timed(system, tables, trace: pl.DataFrame, policy: str, options: dict, repeats: int) -> dict:
    """Median CPU seconds of `repeats` runs of `policy`, its decisions and schedule digest."""
    simulate(system, trace.head(20), tables, make_policy(policy, seed=0, **options))
    seconds, result = [], None
    for _ in range(repeats):
        start = time.process_time()
        result = simulate(system, trace, tables, make_policy(policy, seed=0, **options))
        seconds.append(time.process_time() - start)
    return {
        "cpu_s": statistics.median(seconds),
        "decisions": int(result.metrics["decisions"]),
        "sla_rate": result.metrics["sla_rate"],
        "schedule": schedule_digest(result.jobs),
    }


def main() -> None:
    parser = arguments.Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", type=Path, required=True, help="a finished study's results")
    parser.add_argument("--config", default="config/config.yaml", help="the study's config")
    parser.add_argument("--scenarios", type=comma_list, help="default: every one")
    parser.add_argument("--seed", type=arguments.seed, help="default: the first evaluation seed")
    parser.add_argument("--policies", type=comma_list, help="default: every online one")
    parser.add_argument("--repeats", type=arguments.positive_int, default=3)
    args = parser.parse_args()
    try:
        config = load_config(args.config)
        study = Study(config, args.config)
        scenarios = args.scenarios or list(config["scenarios"])
        for scenario in scenarios:
            study.check_scenario(scenario)
        evaluated = config["evaluation"]["policies"]
        online = catalog.of_kind(*KINDS)
        policies = args.policies or [policy for policy in evaluated if policy in online]
        for policy in policies:
            if policy not in online:
                raise InputError(None, "--policies", f"policies of the kinds {KINDS}", policy)
        seed = config["evaluation"]["seeds"][0] if args.seed is None else args.seed
        paths = ResultPaths(args.study)
        rows = []
        for scenario in scenarios:
            trace_path = paths.workload(scenario, seed)
            if not trace_path.is_file():
                raise InputError(trace_path, "--study", "a finished study's trace")
            trace = pl.read_parquet(trace_path)
            system = study.system(scenario)
            tables = study.costs(scenario, paths.costs_dir)
            for policy in policies:
                placements = [ALL, BANDWIDTH] if policy in catalog.placed() else [None]
                for placement in placements:
                    options = policy_options(config, policy)
                    if placement is not None:
                        options["placement"] = placement
                    if policy in catalog.learned():
                        options["agent"] = str(paths.agent(scenario, policy))
                    row = timed(system, tables, trace, policy, options, args.repeats)
                    rows.append({"scenario": scenario, "policy": policy, "placement": placement})
                    rows[-1] |= row
                    print(f"{scenario} {policy} {placement}: {row}", flush=True)
    except InputError as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    frame = pl.DataFrame(rows)
    print(markdown_table(frame))
    total = frame.group_by("scenario", maintain_order=True).agg(pl.col("cpu_s").sum())
    print(markdown_table(total))


if __name__ == "__main__":
    main()
