"""Does the keeper cut a scenario's service-target shortfall (docs/relmas.md, "Service targets in
the keeper")? On the validation traces of `--scenario` (`training.validation_seeds`), the study's
best baseline at its placement runs alone, with the scenario's keeper (the study's
agents/<scenario>/keeper.json, `--keeper`, or one learned here under `--learn-under`) giving jobs
up, with that keeper allowed to give up only jobs of tenants whose achieved rate so far is at
least their target plus each of `--margins`, and the keeper beside each rule a training scores it
with (`kept_candidates`).

    .venv/bin/python benchmarks/bench_service_keeper.py [--config config/config.yaml]
        [--costs DIR] [--validation DIR] [--scenario service_levels]
        [--keeper FILE | --learn-under RULE@PLACEMENT]
        [--margins 0,0.05,0.15]

Prints per variant the mean shortfall in points and the mean SLA rate.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import numpy as np
from command_line import (  # a sibling module
    add_validated_study,
    print_table,
    run,
    study_choices,
    validated_study,
)

from relmas.evaluate import placement_option, simulate
from relmas.paths import validation_file
from relmas.policies import make_policy
from relmas.policies.planner import GivingUp
from relmas.rl.keeper import KernelKeeper
from relmas.rl.keeping import keeper_made_for, kept_candidates, learn_agent_keeper, read_keeper
from relmas.rl.settings import parse_training
from relmas.sim import access


class AboveTarget(KernelKeeper):
    """The keeper, but every job of a tenant whose achieved rate so far is below its target plus
    `margin` is kept (jobs without a target are the keeper's to give up)."""

    def __init__(self, arrays, margin: float) -> None:
        super().__init__(arrays)
        self.margin = margin

    def __call__(self, engine, present: np.ndarray) -> np.ndarray:
        keep = super().__call__(engine, present)
        S = engine.state
        for i, job in enumerate(present):
            target = access.job_target(S, int(job))
            if not np.isnan(target):
                tenant = access.job_tenant(S, int(job))
                if access.tenant_achieved(S, tenant) < target + self.margin:
                    keep[i] = True
        return keep


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_validated_study(parser)
    parser.add_argument("--scenario", default="service_levels")
    parser.add_argument("--keeper", help="a keeper file (default: the study's)")
    parser.add_argument(
        "--learn-under", help="RULE@PLACEMENT: learn the keeper under it here instead"
    )
    parser.add_argument("--margins", default="0,0.05,0.15", help="'' for none")
    args = parser.parse_args()
    args.scenarios = args.scenario
    study, _ = validated_study(args, None)
    choices = study_choices(study, args.scenario, args, None)
    system, tables = choices.system, choices.tables
    args.seeds = study.config["training"]["validation_seeds"]  # printed with the options
    traces = study.traces(args.scenario, args.seeds, args.costs).values()
    if args.learn_under:
        rule = tuple(args.learn_under.split("@", 1))
        settings = parse_training(study.config, args.config)
        keeper = learn_agent_keeper(
            study, args.scenario, system, tables, settings.seeds, settings.keeper, rule
        )
    else:
        path = Path(args.keeper) if args.keeper else study.paths.keeper(args.scenario)
        rule = tuple(json.loads(path.read_text())["rule"])
        keeper = read_keeper(path, keeper_made_for(study.config, args.scenario, rule))
    if keeper.weights is None:
        print(f"{args.scenario}: its keeper keeps every job; nothing to measure")
        return 0
    keepers = {"with the keeper": KernelKeeper(keeper.weights.arrays())}
    for margin in (float(m) for m in args.margins.split(",") if m):
        keepers[f"keeper above target + {margin:g}"] = AboveTarget(keeper.weights.arrays(), margin)
    best = (choices.best, placement_option(choices.best, choices.placements))
    variants = {f"{choices.best} {name}": (*best, kept) for name, kept in keepers.items()}
    variants = {f"{choices.best} alone": (*best, None), **variants}
    validation = validation_file(args.validation, args.scenario)
    targets = study.scenario(args.scenario).has_targets()
    for rule, placement in kept_candidates(validation, args.scenario, tables.types, targets):
        kept = KernelKeeper(keeper.weights.arrays())
        variants[f"{rule}@{placement} with the keeper"] = (rule, {"placement": placement}, kept)
    rows = []
    for variant, (rule, options, kept) in variants.items():
        runs = []
        for jobs in traces:
            policy = make_policy(rule, **options)
            if kept is not None:
                policy = GivingUp(policy, kept, variant)
            runs.append(simulate(system, jobs, tables, policy).metrics)
        rows.append(
            {
                "variant": variant,
                "shortfall_points": round(100 * statistics.mean(r["shortfall"] for r in runs), 3),
                "sla_rate": round(statistics.mean(r["sla_rate"] for r in runs), 4),
            }
        )
    print_table(args, rows)
    return 0


if __name__ == "__main__":
    run(main)
