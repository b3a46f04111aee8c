"""Environment steps per second of RELMAS training, learning included (issue 14's yardstick).

    .venv/bin/python benchmarks/bench_train_steps.py [--config config/quick.yaml] [--scenario mixed]
        [--steps 20000] [--costs DIR]

Trains one agent for `--steps` steps (one validation trace, so that validation costs little) and
reports the median steps/s over the learner's log intervals, wall and CPU, leaving out the intervals
that hold a validation. Run it on two checkouts alternately (`PYTHONPATH=<checkout>`) to compare
them in one window; cost tables are profiled into `--costs` once and reused.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from bench_relmas import ensure_costs

from relmas.config import load_config
from relmas.rl.run import train_scenario


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="config/quick.yaml")
    parser.add_argument("--scenario", default="mixed")
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--costs", type=Path, default=Path("results/bench_train_steps/costs"))
    args = parser.parse_args()

    config = load_config(args.config)
    ensure_costs(config, args.costs)
    training = config["training"]
    training["validation_seeds"] = training["validation_seeds"][:1]
    training["dqn"] = {**training["dqn"], "total_steps": args.steps}
    validations = set(range(0, args.steps + 1, training["dqn"]["validation_every"]))
    validations.add(training["dqn"]["teacher_steps"])

    stamps: list[tuple[int, float, float]] = []  # (step, wall, cpu) at each learner log

    def log(metrics: dict[str, float], step: int) -> None:
        if "loss" in metrics:
            stamps.append((step, time.perf_counter(), time.process_time()))

    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        train_scenario(config, args.scenario, out, args.costs, logger=log, resume=False)
        total = time.perf_counter() - start
    intervals = [
        (a, b) for a, b in zip(stamps, stamps[1:], strict=False) if a[0] not in validations
    ]
    wall = [(b[0] - a[0]) / (b[1] - a[1]) for a, b in intervals]
    cpu = [(b[0] - a[0]) / (b[2] - a[2]) for a, b in intervals]
    print(
        json.dumps(
            {
                "steps": args.steps,
                "intervals": len(intervals),
                "wall_steps_per_s": round(statistics.median(wall)),
                "cpu_steps_per_s": round(statistics.median(cpu)),
                "total_wall_s": round(total, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
