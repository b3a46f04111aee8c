"""How many candidate slots the agent needs: a slot rule's SLA rate with k candidates per ranking.

    .venv/bin/python benchmarks/bench_candidates.py --scenario NAME --candidates 2,4,8
        [--rule RULE] [--config config/config.yaml]

Runs the slot rule RULE (default: the teacher of the scenario's trained `relmas` agent, the slot
rule with the best validation SLA in its agent.json) over the agent's observation with k candidates
per feasible ranking (`training.observation.candidates`; the reference and hopeless slots as the
agent has them) on the evaluation traces of a finished study, and prints the SLA rate per seed and
its mean for each k. A rule is what the warm start makes an agent as good as: if the rule over k
slots falls short of the same rule over every ready job (the rule baselines), so does the agent.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from relmas import arguments
from relmas.config import load_config
from relmas.evaluate import load_job_trace
from relmas.paths import ResultPaths
from relmas.rl.agent import load_agent
from relmas.rl.env import SchedulingEnv
from relmas.rl.rules import slot_rules
from relmas.rl.run import rollout
from relmas.rl.settings import parse_training
from relmas.study import Study


def main() -> None:
    parser = arguments.Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--candidates", type=arguments.positive_ints, default=[2, 4, 8])
    parser.add_argument("--rule")
    parser.add_argument("--config", default="config/config.yaml")
    args = parser.parse_args()

    config = load_config(args.config)
    study, paths = Study(config), ResultPaths.of(config)
    system = study.system(args.scenario)
    tables = study.costs(args.scenario, paths.costs_dir)
    reward = parse_training(config).reward
    info, _ = load_agent(paths.agent(args.scenario, "relmas"))
    rule = args.rule or max(info.rules_validation, key=info.rules_validation.__getitem__)
    traces = [
        load_job_trace(paths.workload(args.scenario, seed), tables)
        for seed in config["evaluation"]["seeds"]
    ]
    print(f"{args.scenario}: {rule}, reference {info.observation.reference}")
    for k in args.candidates:
        observation = replace(info.observation, candidates=k)
        rates = []
        for jobs in traces:
            env = SchedulingEnv(system, tables, jobs, observation, reward, 1.0)
            rates.append(rollout(env, slot_rules(observation, env.layout)[rule])["sla_rate"])
        shown = " / ".join(f"{rate:.3f}" for rate in rates)
        print(f"    k = {k}: {shown}; mean {np.mean(rates):.4f}", flush=True)


if __name__ == "__main__":
    main()
