"""`relmas zoo`: the layer table of the configured models, and its MLflow run.

Not in relmas.zoo, whose package loads torch: a bad config is refused before that.
"""

from __future__ import annotations

import argparse
import time

from relmas.command import check_distinct_outputs, load_configs


def zoo_command(args: argparse.Namespace) -> None:
    from relmas import tracking
    from relmas.config import config_hash
    from relmas.io import write_parquet

    config = load_configs(args.config)
    check_distinct_outputs({"--config": args.config}, {"--out": [args.out]})
    from relmas.zoo import layer_table, model_summary

    models = config["models"]
    with tracking.stage_run("zoo", config, params={"models": models}) as run:
        start = time.perf_counter()
        layers = layer_table(models, source=", ".join(args.config))
        seconds = time.perf_counter() - start
        write_parquet(layers, args.out, metadata={"relmas.models_hash": config_hash(models)})
        summary = model_summary(models, layers)
        for row in summary.iter_rows(named=True):
            name = row.pop("model")
            run.log_metrics({f"{name}.{key}": value for key, value in row.items()})
        run.log_metrics({"layers": layers.height, "extract_seconds": seconds})
        run.log_dict(summary.to_dict(as_series=False), "model_summary.json")
        run.log_input(layers, "layers", args.out, context="zoo")
        run.log_artifact(args.out)
    print(f"{layers.height} layers of {len(models)} models in {seconds:.2f} s -> {args.out}")
