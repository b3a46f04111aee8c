"""`relmas report`: summary.parquet, the figures and report.md of a study, and its MLflow run."""

from __future__ import annotations

import argparse

from relmas.command import check_distinct_outputs, load_configs


def report_command(args: argparse.Namespace) -> None:
    from relmas import tracking
    from relmas.report import write_report

    config = load_configs(args.config)
    source = ", ".join(args.config)
    directories = ("eval", "costs", "workloads", "validation", "sweeps", "agents", "bounds")
    check_distinct_outputs(
        {"--config": args.config} | {f"--{name}": [getattr(args, name)] for name in directories},
        {"--out": [args.out]},
    )
    with tracking.stage_run("report", config, params={"evaluation": config["evaluation"]}) as run:
        made = write_report(
            config,
            source,
            args.eval,
            args.costs,
            args.workloads,
            args.out,
            sweeps_dir=args.sweeps,
            agents_dir=args.agents,
            validation_dir=args.validation,
            bounds_dir=args.bounds,
        )
        for path in made["figures"].values():
            run.log_artifact(path, "figures")
        for path in made["tables"]:
            run.log_artifact(path)
    print(f"report -> {args.out / 'report.md'}")
