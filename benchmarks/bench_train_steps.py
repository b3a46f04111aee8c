"""Environment steps per second of RELMAS training, learning included (issue 14's yardstick).

    .venv/bin/python benchmarks/bench_train_steps.py [--config config/quick.yaml] [--scenario mixed]
        [--steps 20000] [--costs DIR] [--variants FILE.yaml] [--repeats 3] [--profile VARIANT]
        [--baseline CHECKOUT]

Trains one agent for `--steps` steps (one validation trace, so that validation costs little) and
reports the median steps/s over the learner's log intervals, wall and CPU, leaving out the intervals
that hold a validation. With `--variants` (a YAML mapping a variant name to overrides of
`training:`, as for bench_learner.py) every variant is trained `--repeats` times, the variants
alternating, and each gets the median of its repeats and its ratio to the configuration as is, all
measured in one window. `--baseline CHECKOUT` also runs that checkout's own copy of this script
(its code, its configuration as is; in a subprocess with PYTHONPATH=CHECKOUT) once per repeat,
alternating with the variants, and gives every variant its ratio to it: old and new code in one
window. `--profile VARIANT` instead trains that variant once under cProfile and prints where the
time goes (cProfile inflates Python calls: read shares, not speeds). Cost tables are profiled into
`--costs` once and reused.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_relmas import ensure_costs

from relmas import arguments
from relmas.config import merge_into, validate_config
from relmas.paths import ResultPaths
from relmas.rl.run import train_scenario
from relmas.yaml_load import load_yaml

AS_CONFIGURED = "as configured"


def steps_per_second(config: dict, scenario: str, steps: int, costs: Path) -> dict[str, float]:
    """Train once; the median steps/s (wall, CPU) over the log intervals without a validation."""
    config = copy.deepcopy(config)
    training = config["training"]
    training["validation_seeds"] = training["validation_seeds"][:1]
    training["dqn"] = {**training["dqn"], "total_steps": steps}
    validations = set(range(0, steps + 1, training["dqn"]["validation_every"]))
    validations.add(training["dqn"]["teacher_steps"])

    stamps: list[tuple[int, float, float]] = []  # (step, wall, cpu) at each learner log

    def log(metrics: dict[str, float], step: int) -> None:
        if "loss" in metrics:
            stamps.append((step, time.perf_counter(), time.process_time()))

    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        train_scenario(
            config,
            scenario,
            out,
            costs,
            logger=log,
            resume=False,
            validation=ResultPaths.of(config).validation(scenario),
        )
        total = time.perf_counter() - start
    intervals = [
        (a, b) for a, b in zip(stamps, stamps[1:], strict=False) if a[0] not in validations
    ]
    return {
        "wall_steps_per_s": statistics.median((b[0] - a[0]) / (b[1] - a[1]) for a, b in intervals),
        "cpu_steps_per_s": statistics.median((b[0] - a[0]) / (b[2] - a[2]) for a, b in intervals),
        "total_wall_s": total,
    }


def baseline_steps_per_second(checkout: Path, args: argparse.Namespace) -> dict[str, float]:
    """One run of `checkout`'s own bench_train_steps.py on its configuration as is: its CPU
    steps/s (the key of its last JSON line, whichever of the script's versions printed it)."""
    command = [sys.executable, str(checkout / "benchmarks" / "bench_train_steps.py")]
    command += ["--config", args.config, "--scenario", args.scenario, "--steps", str(args.steps)]
    command += ["--costs", str(args.costs.resolve() / "baseline")]
    environment = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run(
        command, cwd=checkout, env=environment, capture_output=True, text=True, check=True
    )
    last = json.loads(done.stdout.strip().splitlines()[-1])
    cpu = last.get("median_cpu_steps_per_s", last.get("cpu_steps_per_s"))
    wall = last.get("median_wall_steps_per_s", last.get("wall_steps_per_s"))
    return {"cpu_steps_per_s": float(cpu), "wall_steps_per_s": float(wall)}


def main() -> None:
    parser = arguments.Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="config/quick.yaml")
    parser.add_argument("--scenario", default="mixed")
    parser.add_argument("--steps", type=arguments.positive_int, default=20_000)
    parser.add_argument("--costs", type=Path, default=Path("results/bench_train_steps/costs"))
    parser.add_argument("--variants", type=Path, default=None)
    parser.add_argument("--repeats", type=arguments.positive_int, default=3)
    parser.add_argument("--profile", default=None, metavar="VARIANT")
    parser.add_argument("--baseline", type=Path, default=None, metavar="CHECKOUT")
    args = parser.parse_args()

    raw = load_yaml(args.config)
    variants = {AS_CONFIGURED: {}}
    if args.variants is not None:
        variants.update(load_yaml(args.variants))
        repeats = args.repeats
    else:
        repeats = 1
    configs = {}
    for name, overrides in variants.items():
        variant = copy.deepcopy(raw)
        merge_into(variant, {"training": overrides or {}})
        source = f"{args.variants}: {name}" if overrides else args.config
        configs[name] = validate_config(variant, source)
    ensure_costs(configs[AS_CONFIGURED], args.costs)
    if args.profile is not None:
        if args.profile not in configs:
            parser.error(f"--profile: expected one of {sorted(configs)}, got {args.profile!r}")
        config = configs[args.profile]
        steps_per_second(config, args.scenario, args.steps, args.costs)  # compiled and cached
        with cProfile.Profile() as profile:
            steps_per_second(config, args.scenario, args.steps, args.costs)
        pstats.Stats(profile).sort_stats("tottime").print_stats(30)
        return
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in configs}
    baseline_name = f"baseline {args.baseline}" if args.baseline is not None else None
    if baseline_name is not None:
        runs[baseline_name] = []
        repeats = args.repeats
    for _ in range(repeats):
        if baseline_name is not None:
            runs[baseline_name].append(baseline_steps_per_second(args.baseline, args))
        for name, config in configs.items():
            runs[name].append(steps_per_second(config, args.scenario, args.steps, args.costs))
    base = statistics.median(run["cpu_steps_per_s"] for run in runs[AS_CONFIGURED])
    old = (
        statistics.median(run["cpu_steps_per_s"] for run in runs[baseline_name])
        if baseline_name is not None
        else None
    )
    for name, measured in runs.items():
        cpu = statistics.median(run["cpu_steps_per_s"] for run in measured)
        wall = statistics.median(run["wall_steps_per_s"] for run in measured)
        figures = {
            "variant": name,
            "steps": args.steps,
            "repeats": len(measured),
            "cpu_steps_per_s": [round(run["cpu_steps_per_s"]) for run in measured],
            "median_cpu_steps_per_s": round(cpu),
            "median_wall_steps_per_s": round(wall),
            "cpu_ratio_to_as_configured": round(cpu / base, 2),
        }
        if old is not None:
            figures["cpu_ratio_to_baseline"] = round(cpu / old, 2)
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
