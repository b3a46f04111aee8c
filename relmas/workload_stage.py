"""`relmas workload`: the job traces of a scenario's seeds, and their MLflow runs.

Not in relmas.workload, which relmas.study imports: this module plans the traces with
relmas.study.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from relmas.command import (
    check_distinct_outputs,
    check_repeated,
    cost_inputs,
    fill_template,
    load_configs,
)


def workload_command(args: argparse.Namespace) -> None:
    """The job trace of a scenario for each seed: per seed a Parquet file and an MLflow run, in
    one process (the pipeline writes a scenario's evaluation traces in one job)."""
    from relmas import tracking
    from relmas.io import write_parquet
    from relmas.study import Study

    config = load_configs(args.config)
    study = Study(config, ", ".join(args.config))
    scenario = config["scenarios"][study.check_scenario(args.scenario)]
    replay = f"scenarios.{args.scenario}.arrival.path"
    check_repeated("--seed", args.seed, "seed", {"--out": args.out})
    outs = {seed: Path(fill_template("--out", str(args.out), seed=seed)) for seed in args.seed}
    check_distinct_outputs(
        {
            "--config": args.config,
            "--costs": cost_inputs(args.costs, study.system(args.scenario).accelerator_types),
            replay: [scenario["arrival"].get("path")],
        },
        {"--out": outs.values()},
    )
    for seed, jobs in study.traces(args.scenario, args.seed, args.costs).items():
        with tracking.stage_run(
            "workload",
            config,
            tags={"scenario": args.scenario, "seed": seed},
            params={"scenario": scenario, "seed": seed},
        ) as run:
            write_parquet(jobs, outs[seed], metadata={"relmas.scenario": args.scenario})
            span = float(jobs["arrival_s"].max() - jobs["arrival_s"].min())
            run.log_metrics(
                {
                    "jobs": jobs.height,
                    "span_s": span,
                    "arrival_rate_per_s": (jobs.height - 1) / span if span > 0 else 0.0,
                    "mean_window_s": float((jobs["deadline_s"] - jobs["arrival_s"]).mean()),
                }
            )
            run.log_input(jobs, f"{args.scenario}-seed{seed}", outs[seed], context="workload")
        print(f"{args.scenario} seed {seed}: {jobs.height} jobs over {span:.3f} s -> {outs[seed]}")
