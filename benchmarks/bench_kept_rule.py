"""A rule with its keeper, stepped in Python against run in one jitted loop (`KeptRule`): the
time a training spends scoring each candidate rule with the scenario's keeper on its validation
traces (relmas.rl.run), and that both give the same schedule.

    .venv/bin/python benchmarks/bench_kept_rule.py [--config config/config.yaml] [--costs DIR]
        [--validation DIR] [--scenarios service_levels,vision_heavy] [--repeats 3]

Per scenario: its keeper (the study's agents/<scenario>/keeper.json) beside each rule a training
scores it with (`kept_candidates`), on the scenario's validation traces
(`training.validation_seeds`); per rule the median wall seconds of `--repeats` runs of each path
(after one run of each: the Numba cache's load) and whether the two met the same deadlines and
gave up the same jobs on every trace.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from command_line import add_validated_study, print_table, run, validated_study

from relmas.evaluate import simulate
from relmas.paths import validation_file
from relmas.policies import make_policy
from relmas.policies.planner import GivingUp
from relmas.rl.keeper import KeptRule, KernelKeeper
from relmas.rl.keeping import keeper_made_for, kept_candidates, read_keeper


def timed(system, tables, traces, make) -> tuple[float, list]:
    """Wall seconds of one run of `make()`'s policy on every trace, and each run's jobs."""
    started = time.perf_counter()
    jobs = [simulate(system, trace, tables, make()).jobs for trace in traces]
    return time.perf_counter() - started, jobs


def measure(study, scenario: str, args: argparse.Namespace) -> list[dict]:
    system, tables = study.system(scenario), study.costs(scenario, args.costs)
    traces = list(study.validation_traces(scenario, args.costs).values())
    path = study.paths.keeper(scenario)
    rule = tuple(json.loads(path.read_text())["rule"])
    keeper = read_keeper(path, keeper_made_for(study.config, scenario, rule))
    if keeper.weights is None:
        print(f"{scenario}: its keeper keeps every job; nothing to measure")
        return []
    validation = validation_file(args.validation, scenario)
    targets = study.scenario(scenario).has_targets()
    rows = []
    for name, placement in kept_candidates(validation, scenario, tables.types, targets):

        def stepping(name=name, placement=placement):
            rule = make_policy(name, placement=placement)
            return GivingUp(rule, KernelKeeper(keeper.weights.arrays()), "kept")

        def fused(name=name, placement=placement):
            return KeptRule(make_policy(name, placement=placement), keeper.weights.arrays(), "kept")

        times = {"stepping": [], "fused": []}
        schedules = {}
        for path_name, make in (("stepping", stepping), ("fused", fused)):
            _, schedules[path_name] = timed(system, tables, traces, make)  # warm-up
            for _ in range(args.repeats):
                times[path_name].append(timed(system, tables, traces, make)[0])
        same = all(
            a.select("job_id", "met", "dropped").equals(b.select("job_id", "met", "dropped"))
            for a, b in zip(schedules["stepping"], schedules["fused"], strict=True)
        )
        stepped, ran = (statistics.median(times[k]) for k in ("stepping", "fused"))
        rows.append(
            {
                "scenario": scenario,
                "rule": f"{name}@{placement}",
                "traces": len(traces),
                "stepping_s": round(stepped, 2),
                "fused_s": round(ran, 2),
                "speed-up": round(stepped / ran, 1),
                "same_schedule": same,
            }
        )
        print(rows[-1], flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_validated_study(parser)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    study, scenarios = validated_study(args, None)
    print_table(args, [row for s in scenarios for row in measure(study, s, args)])
    return 0


if __name__ == "__main__":
    run(main)
