"""What of an agent travels to a scenario it was not trained on (docs/relmas.md, "An agent on
another workload"): the study's `relmas` agent of `--agent-from` on the evaluation traces of
`--scenario`, as trained and with one part changed at a time.

    .venv/bin/python benchmarks/bench_travel.py [--config config/config.yaml] [--costs DIR]
        [--validation DIR] [--agent-from bursty] [--scenario bandwidth_scarce] [--seeds ...]

Variants (the agent's teacher is its reference baseline, favoured by its bonus):

- `as_trained`: the agent as trained (teacher, placement, keeper, network);
- `no_keeper`: without its keeper;
- `follows_teacher`: its network always following its own teacher (an infinite bonus);
- `target_rule`: its teacher and reference slot the target's best placed baseline with its
  placement (chosen on the target's validation rows), its own bonus;
- `target_rule_no_keeper`: the same without its keeper;
- `re_aimed`: the target's best placed baseline always followed, its keeper kept
  (`relmas.rl.travel.reaimed`, what a foreign deployment may choose);

beside the target's best baseline. Prints per variant the SLA rate of each trace and the mean.
"""

from __future__ import annotations

import argparse
import math
import statistics
from dataclasses import replace

from command_line import (  # a sibling module
    AGENT_POLICY,
    add_validated_study,
    print_table,
    run,
    study_agent,
    study_choices,
    validated_study,
)

from relmas.evaluate import placement_option, simulate
from relmas.policies import make_policy
from relmas.rl.agent import AgentInfo
from relmas.rl.travel import reaimed


def variants(rule: str, where: str) -> dict:
    """Each variant: the agent's description -> the one it runs with."""

    def aimed(info: AgentInfo) -> AgentInfo:
        return replace(reaimed(info, rule, where), teacher_bonus=info.teacher_bonus)

    return {
        "as_trained": lambda info: info,
        "no_keeper": lambda info: replace(info, keeper=None),
        "follows_teacher": lambda info: replace(info, teacher_bonus=math.inf),
        "target_rule": aimed,
        "target_rule_no_keeper": lambda info: replace(aimed(info), keeper=None),
        "re_aimed": lambda info: reaimed(info, rule, where),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_validated_study(parser)
    parser.add_argument("--agent-from", default="bursty", help="the scenario of the agent")
    parser.add_argument("--scenario", default="bandwidth_scarce", help="where it is deployed")
    args = parser.parse_args()
    args.scenarios = f"{args.agent_from},{args.scenario}"
    study, _ = validated_study(args, None)
    choices = study_choices(study, args.scenario, args, None)
    system, tables = choices.system, choices.tables
    traces = study.traces(args.scenario, args.seeds, args.costs).values()
    agent = study_agent(study, args.agent_from)
    rows = []
    for name, change in variants(choices.rule, choices.where).items():
        rates = []
        for seed, jobs in zip(args.seeds, traces, strict=True):
            policy = make_policy(AGENT_POLICY, seed=seed, agent=agent)
            policy.info = change(policy.info)
            rates.append(float(simulate(system, jobs, tables, policy).metrics["sla_rate"]))
        rows.append({"variant": name, "sla_rates": str(rates), "mean": statistics.mean(rates)})
    best = make_policy(choices.best, **placement_option(choices.best, choices.placements))
    rates = [float(simulate(system, jobs, tables, best).metrics["sla_rate"]) for jobs in traces]
    rows.append({"variant": f"best baseline {choices.best}", "sla_rates": str(rates),
                 "mean": statistics.mean(rates)})  # fmt: skip
    print_table(args, rows)
    return 0


if __name__ == "__main__":
    run(main)
