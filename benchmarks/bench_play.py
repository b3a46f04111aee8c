"""Time per decision of a trained agent playing one whole validation trace in one jitted call
(`relmas.rl.collect.play`: what a training validates with), against its teacher alone.

    .venv/bin/python benchmarks/bench_play.py --study DIR [--config config/config.yaml]
        [--scenario vision_heavy] [--policy relmas] [--repeats 3]

`--study` is a finished study's results directory (its cost tables, validation rows and
agents, e.g. results/default after `make run`). Each repeat plays the teacher (the reference
baseline of the agent's observation, simulation and observation only), the greedy network
favouring its teacher by the configured bonus (as validated) and the network without the bonus;
it prints the median microseconds per decision of each and how many decisions it took. Run it
from two checkouts in one window to compare code (the study directory stays the same).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from relmas.config import load_config
from relmas.rl.checkpoint import BEST, load_network
from relmas.rl.collect import play
from relmas.rl.network import GreedyPolicy, to_numpy_weights
from relmas.rl.setup import training_setup
from relmas.rl.teacher import BaselineTeacher


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", type=Path, required=True)
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--scenario", default="vision_heavy")
    parser.add_argument("--policy", default="relmas")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    config = load_config(args.config)
    validation = args.study / "validation" / f"{args.scenario}.parquet"
    setup = training_setup(
        config,
        args.scenario,
        args.study / "costs",
        source=args.config,
        policy=args.policy,
        validation=validation,
    )
    jobs = setup.validation_traces[0]
    env, bonus = setup.env(jobs), setup.settings.dqn.teacher_bonus
    teacher = BaselineTeacher(setup.observation.reference, env.layout)
    agent = args.study / "agents" / args.scenario / args.policy
    weights = to_numpy_weights(load_network(agent / BEST))
    players = {
        "teacher": teacher,
        f"network, bonus {bonus}": GreedyPolicy(weights, teacher, bonus),
        "network, no bonus": GreedyPolicy(weights),
    }
    times: dict[str, list[float]] = {name: [] for name in players}
    decisions: dict[str, int] = {}
    for _ in range(args.repeats + 1):  # the first round compiles or loads the kernels
        for name, player in players.items():
            env.reset()
            start = time.perf_counter()
            counts = play(env, player)
            times[name].append(time.perf_counter() - start)
            decisions[name] = int(counts.sum())
    print(f"{args.scenario} {args.policy}, {len(jobs)} jobs, median of {args.repeats}:")
    for name, seconds in times.items():
        per_decision = statistics.median(seconds[1:]) / decisions[name] * 1e6
        print(f"  {name:24s} {decisions[name]:8d} decisions  {per_decision:6.1f} µs/decision")


if __name__ == "__main__":
    main()
