"""`relmas profile`: the cost table of one accelerator for the layer table, and its MLflow run.

Not in relmas.profile, which relmas.study imports: this module loads the configs through
relmas.command, which imports relmas.study.
"""

from __future__ import annotations

import argparse
import json

from relmas.command import check_distinct_outputs, load_configs
from relmas.errors import InputError


def profile_command(args: argparse.Namespace) -> None:
    from relmas import tracking
    from relmas.hw.spec import load_spec_file, parse_spec, spec_hash, spec_json
    from relmas.profile import (
        layers_hash,
        models_hash,
        profile_layers,
        profile_pieces,
        write_cost_table,
    )
    from relmas.schemas import LayerTable

    if args.spec is not None:
        config = None
        name, spec = load_spec_file(args.spec)
        objective = args.objective or "latency"
        from relmas.config import load_schema

        resizing = load_schema()["properties"]["resizing"]["default"]
    else:
        if not args.config or not args.accelerator:
            raise InputError(None, "--accelerator", "--accelerator NAME with --config, or --spec")
        config = load_configs(args.config)
        source = ", ".join(args.config)
        if args.accelerator not in config["accelerators"]:
            raise InputError(
                source,
                "accelerators",
                f"an entry named {args.accelerator!r} (one of {sorted(config['accelerators'])})",
            )
        name = args.accelerator
        spec = parse_spec(name, config["accelerators"][name], source)
        objective = args.objective or config["profile"]["objective"]
        resizing = config["resizing"]
    check_distinct_outputs(
        {"--layers": [args.layers], "--spec": [args.spec], "--config": args.config or []},
        {"--out": [args.out]},
    )
    from relmas.io import read_parquet

    layers = read_parquet(args.layers, LayerTable)
    digest = layers_hash(layers)
    models = models_hash(args.layers, config)  # the layer table's models: config, checked
    with tracking.stage_run(
        "profile",
        config,
        tags={"accelerator": name, "table": "pieces" if args.pieces else "costs"},
        params={
            "accelerator": name,
            "kind": spec.kind,
            "objective": objective,
            "spec": spec_hash(spec),
            **({"resizing": json.dumps(resizing, sort_keys=True)} if args.pieces else {}),
        },
    ) as run:
        if args.pieces:
            table, stats = profile_pieces(
                layers, name, spec, resizing["splits"], resizing["dims"], objective, args.layers
            )
        else:
            table, stats = profile_layers(layers, name, spec, objective, source=args.layers)
        resized = resizing if args.pieces else None
        write_cost_table(table, args.out, name, spec, digest, objective, resized, models)
        run.log_dict(json.loads(spec_json(spec)), "spec.json")
        run.log_metrics(stats)
        run.log_artifact(args.out)
    costed = f"{stats['layers']} layers"
    if args.pieces:
        costed = f"{stats['pieces']} pieces ({stats['layers']} distinct shapes)"
    print(
        f"{name}: {costed}, {stats['mappings_evaluated']} mappings "
        f"in {stats['seconds']:.2f} s -> {args.out}"
    )
