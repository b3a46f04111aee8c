"""The `relmas` command line: one subcommand per pipeline stage.

Each subcommand is a thin layer over library functions: it loads and validates its inputs, calls the
library, writes its output atomically and logs one MLflow run. Bad input of any kind ends with one
line on stderr naming the file, the key and what was expected, and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from relmas.errors import InputError


def load_configs(paths: Sequence[str]) -> dict[str, Any]:
    """Load one or several config files, merged left to right like Snakemake's `--configfile`."""
    from relmas.config import load_yaml, validate_config

    merged: dict[str, Any] = {}
    for path in paths:
        raw = load_yaml(path)
        if not isinstance(raw, Mapping):
            raise InputError(path, None, "a mapping of configuration keys", type(raw).__name__)
        _merge(merged, raw)
    return validate_config(merged, ", ".join(paths))


def _merge(base: dict[str, Any], update: Mapping[str, Any]) -> None:
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def cmd_zoo(args: argparse.Namespace) -> None:
    from relmas import tracking
    from relmas.config import config_hash
    from relmas.io import write_parquet

    config = load_configs(args.config)
    from relmas.zoo import layer_table, model_summary

    models = config["models"]
    with tracking.stage_run(
        "zoo", config, config_hash=config_hash(config), params={"models": models}
    ) as run:
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="relmas",
        description="Multi-tenant DNN scheduling on heterogeneous multi-accelerators.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, func: Callable[[argparse.Namespace], None], help: str):
        sp = sub.add_parser(name, help=help, description=help)
        sp.set_defaults(func=func)
        return sp

    def config_arg(sp: argparse.ArgumentParser, required: bool = True) -> None:
        sp.add_argument(
            "--config",
            action="append",
            required=required,
            metavar="C",
            help="config YAML (repeat to merge several, later ones win)",
        )

    zoo = command("zoo", cmd_zoo, "extract the layer table of the configured models")
    config_arg(zoo)
    zoo.add_argument("--out", required=True, type=Path, help="layer table Parquet to write")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except InputError as error:
        print(f"relmas {args.command}: error: {error}", file=sys.stderr)
        return 2
    return 0
