"""Where a trained agent leaves its teacher: its decisions against its teacher's, by slot.

    .venv/bin/python benchmarks/bench_deviations.py --scenario NAME AGENT_DIR [AGENT_DIR ...]
        [--config config/config.yaml] [--evaluation]

Runs each agent as deployed (greedily, its teacher favoured by its bonus) on the scenario's first
validation trace and asks, at every decision, what its teacher (its reference baseline with its
placement, agent.json) would have chosen in the same state; prints how many decisions start
another job or on another accelerator type (or wait where the teacher starts, or the reverse: two
slots holding the same job are the same decision) and the most frequent (teacher slot group ->
agent slot group) pairs. A deviation that a rule could express is a baseline to add before
claiming the agent's gain (docs/relmas.md, "Headroom"). With `--evaluation` it also runs the
agent and its teacher alone on the evaluation traces of a finished study and prints their SLA
rates per seed.
"""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np

from relmas import arguments
from relmas.config import load_config
from relmas.evaluate import load_job_trace
from relmas.paths import ResultPaths
from relmas.rl.agent import deployed, load_agent
from relmas.rl.env import SchedulingEnv
from relmas.rl.settings import parse_training
from relmas.rl.setup import rollout
from relmas.rl.teacher import named_teacher
from relmas.study import Study


def main() -> None:
    parser = arguments.Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("agents", nargs="+", type=Path)
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--evaluation", action="store_true")
    args = parser.parse_args()

    config = load_config(args.config)
    study, paths = Study(config), ResultPaths.of(config)
    system = study.system(args.scenario)
    tables = study.costs(args.scenario, paths.costs_dir)
    trace = next(iter(study.validation_traces(args.scenario, paths.costs_dir).values()))
    settings = parse_training(config)
    for agent in args.agents:
        info, policy = load_agent(agent)
        observation = info.observation
        teacher_name = info.teacher or observation.reference
        env = SchedulingEnv(system, tables, trace, observation, settings.reward, 1.0)
        cut_pieces = tables.pieces.most_pieces if observation.resize else ()
        policy = deployed(info, policy, env.layout, cut_pieces)
        teacher = named_teacher(teacher_name, observation.reference, env.layout, cut_pieces)
        groups = observation.slot_groups()
        pairs: collections.Counter[tuple[str, str]] = collections.Counter()
        obs, step_info = env.reset()
        decisions, over = 0, False
        while not over:
            mask = step_info["action_mask"]
            chosen, taught = policy(obs, mask), teacher(obs, mask)
            decisions += 1
            if _decision(env, chosen) != _decision(env, taught):
                pairs[groups[env.layout.slot_of(taught)], groups[env.layout.slot_of(chosen)]] += 1
            obs, _, over, _, step_info = env.step(chosen)
        sla = env.episode_metrics()["sla_rate"]
        print(
            f"{agent}: SLA {sla:.3f}, {sum(pairs.values())} of {decisions} decisions differ "
            f"from {teacher_name}"
        )
        for (taught, chosen), count in pairs.most_common(6):
            print(f"    teacher {taught} -> agent {chosen}: {count}")
        if not args.evaluation:
            continue
        runs = {"teacher": teacher, "agent": policy}
        rates = []
        for seed in config["evaluation"]["seeds"]:
            jobs = load_job_trace(paths.workload(args.scenario, seed), tables)
            env = SchedulingEnv(system, tables, jobs, observation, settings.reward, 1.0)
            rates.append([rollout(env, run)["sla_rate"] for run in runs.values()])
            shown = ", ".join(f"{n} {r:.3f}" for n, r in zip(runs, rates[-1], strict=True))
            print(f"    seed {seed}: {shown}")
        means = ", ".join(f"{n} {r:.4f}" for n, r in zip(runs, np.mean(rates, 0), strict=True))
        print(f"    evaluation mean: {means}")


def _decision(env: SchedulingEnv, action: int) -> tuple[int, int, int]:
    """What `action` does: (the job it starts, -1 to wait; the accelerator type; the split
    variant)."""
    layout = env.layout
    if action == layout.actions - 1:
        return -1, -1, 0
    job = int(env.observer.slots[layout.slot_of(action)])
    return job, layout.type_of(action), layout.variant_of(action)


if __name__ == "__main__":
    main()
