"""Giving jobs up, learned from hindsight (issue 50, item 3; relmas.rl.hindsight): how well online
features predict the clairvoyant planner's labels on held-out traces, and what the learned keeper
wins against the study's best baseline, paired per trace.

    .venv/bin/python benchmarks/bench_hindsight.py [--config config/config.yaml] [--costs DIR]
        [--validation DIR] [--scenarios vision_heavy,bursty] [--jobs 200] [--train-traces 4]
        [--seeds 1000,1001] [--eval-jobs 0] [--horizon 40] [--rounds 2] [--threshold 0.5]
        [--kept-by RULE@PLACEMENT|agent]

Per scenario: the best baseline and the placed rule (the best placed baseline, unless `--kept-by`
names another; `agent`: the study's `relmas` agent's teacher at its placement) are those the study
chose on its validation traces (`--validation`: results/<study>/validation). The keeper is learned
on `--train-traces` traces of `training.seeds` (`--rounds` DAgger rounds, labels over the next
`--horizon` arrivals), its AUC measured on the traces of `training.validation_seeds` at the states
it visits there (beside the AUC of the fluid EDF lateness alone, the one-feature rule), and it runs
against the best baseline on `--seeds` (default `evaluation.seeds`). The training and validation
traces have `--jobs` jobs (the labels solve an LP at every arrival), the evaluation traces
`--eval-jobs` (0: the scenario's own, as the study's). Prints per scenario: the training seconds,
both AUCs, the mean SLA rates, the paired mean difference in SLA points with its Student-t 95 %
interval, and the keeper's decision time.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from command_line import (  # a sibling module
    AGENT_RULE,
    add_validated_study,
    print_table,
    run,
    study_choices,
    validated_study,
)

from relmas.evaluate import placement_option, simulate
from relmas.policies import make_policy
from relmas.policies.planner import GivingUp, PlannerConfig
from relmas.report.stats import mean_ci
from relmas.rl.hindsight import HindsightConfig, auc, label_runs, learn_keeper
from relmas.rl.keeper import FEATURES, KernelKeeper, served_chance
from relmas.study import Study


def measure(study: Study, scenario: str, args: argparse.Namespace) -> dict:
    chosen = study_choices(study, scenario, args, args.kept_by)
    system, tables, best, placements = chosen.system, chosen.tables, chosen.best, chosen.placements
    rule, where = chosen.rule, chosen.where
    training = study.config["training"]

    def traces(seeds: list[int]) -> list:
        return list(study.traces(scenario, seeds, args.costs, args.jobs).values())

    config = HindsightConfig(
        rounds=args.rounds,
        threshold=args.threshold,
        planner=PlannerConfig(samples=1, horizon_jobs=args.horizon),
    )
    started = time.perf_counter()
    weights, features, labels = learn_keeper(
        system,
        tables,
        traces(training["seeds"][: args.train_traces]),
        make_policy(rule, placement=where),
        config,
    )
    training_s = time.perf_counter() - started
    if weights is None:
        raise SystemExit(f"{scenario}: no state of the training traces had a job to label")
    keeper = KernelKeeper(weights.arrays())
    held_x, held_y = label_runs(
        system,
        tables,
        traces(training["validation_seeds"]),
        make_policy(rule, placement=where),
        keeper,
        config.planner,
    )
    lateness = held_x[:, FEATURES.index("log_edf_lateness")]
    differences, keeper_sla, best_sla, decision_us = [], [], [], []
    evaluation = study.traces(scenario, args.seeds, args.costs, args.eval_jobs or None).values()
    for jobs in evaluation:
        baseline = simulate(
            system, jobs, tables, make_policy(best, **placement_option(best, placements))
        )
        learned = simulate(
            system, jobs, tables, GivingUp(make_policy(rule, placement=where), keeper, "keeper")
        )
        best_sla.append(float(baseline.metrics["sla_rate"]))
        keeper_sla.append(float(learned.metrics["sla_rate"]))
        differences.append(100 * (keeper_sla[-1] - best_sla[-1]))
        decision_us.append(float(learned.metrics["decision_us"]))
    diff, half = mean_ci(differences)
    row = dict(
        scenario=scenario,
        best=best,
        kept_by=f"{rule}@{where}",
        labels=labels.size,
        served_share=round(float(labels.mean()), 3) if labels.size else None,
        training_s=round(training_s, 1),
        auc=round(auc(served_chance(keeper.arrays, held_x.astype(np.float64)), held_y), 3),
        auc_lateness=round(auc(-lateness, held_y), 3),
        best_sla=round(statistics.mean(best_sla), 4),
        keeper_sla=round(statistics.mean(keeper_sla), 4),
        points=round(diff, 2),
        ci95=f"[{diff - half:.2f}, {diff + half:.2f}]",
        decision_us=round(statistics.median(decision_us), 1),
    )
    print(row, flush=True)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_validated_study(parser)
    parser.add_argument("--jobs", type=int, default=200, help="per training/validation trace")
    parser.add_argument("--eval-jobs", type=int, default=0, help="0: the scenario's own")
    parser.add_argument("--train-traces", type=int, default=4)
    parser.add_argument("--horizon", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument(
        "--kept-by", default=None, help=f"RULE@PLACEMENT the keeper's rule, or {AGENT_RULE}"
    )
    args = parser.parse_args()
    study, scenarios = validated_study(args, None)
    print_table(args, [measure(study, scenario, args) for scenario in scenarios])
    return 0


if __name__ == "__main__":
    run(main)
