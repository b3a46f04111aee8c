"""Cost-model benchmark: evaluations per second, zoo profiling time cold and warm, JIT speed-up.

    .venv/bin/python benchmarks/bench_costmodel.py [--config config/config.yaml] [--repeats 3]

Profiles every layer of the configured zoo (relmas.zoo.layer_table) on every configured
accelerator. Figures (medians of the repeats):

- evaluations/s on one core: a child process with NUMBA_NUM_THREADS=1 (an evaluation is one
  on-chip mapping or one DRAM tile x loop order costed, see docs/costmodel.md), and the seconds
  the whole zoo takes there (what compares mapping spaces of different sizes);
- warm: the whole zoo on all accelerators with the compiled kernels loaded, all cores;
- cold: the same in a child process whose Numba cache directory is empty, so the time includes
  compiling the kernels (the project's own cache is left alone);
- plain Python: a child process with NUMBA_DISABLE_JIT=1 on a few layers, against the compiled
  kernels on the same layers and one core.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

from relmas import arguments

ROOT = Path(__file__).resolve().parents[1]
FEW_LAYERS = 8


def profile_all(layers: pl.DataFrame, specs: dict) -> tuple[float, int]:
    """Seconds and mapping evaluations to profile `layers` on every spec."""
    from relmas.profile import profile_layers

    start = time.perf_counter()
    evaluations = 0
    for name, spec in specs.items():
        evaluations += profile_layers(layers, name, spec)[1]["mappings_evaluated"]
    return time.perf_counter() - start, evaluations


def load_specs(config: str) -> dict:
    from relmas.config import load_config
    from relmas.hw.spec import parse_spec

    accelerators = load_config(config)["accelerators"]
    return {name: parse_spec(name, raw, config) for name, raw in accelerators.items()}


def few_layers(layers: pl.DataFrame) -> pl.DataFrame:
    """A spread of layer kinds and sizes: every len/FEW_LAYERS-th layer."""
    return layers.gather_every(max(1, layers.height // FEW_LAYERS)).head(FEW_LAYERS)


def worker(mode: str, layers_path: str, config: str, repeats: int) -> None:
    """Child-process side: print one JSON line of measurements."""
    layers = pl.read_parquet(layers_path)
    specs = load_specs(config)
    if mode == "cold":
        seconds, evaluations = profile_all(layers, specs)
        print(json.dumps({"seconds": seconds, "evaluations": evaluations}))
        return
    if mode == "python":
        seconds, evaluations = profile_all(few_layers(layers), specs)
        print(json.dumps({"rate": evaluations / seconds}))
        return
    profile_all(layers.head(2), specs)  # load the compiled kernels
    runs = [profile_all(layers, specs) for _ in range(repeats)]
    few = [profile_all(few_layers(layers), specs) for _ in range(repeats)]
    few_rate = statistics.median(e / s for s, e in few)
    rate = statistics.median(e / s for s, e in runs)
    seconds = statistics.median(s for s, _ in runs)
    print(json.dumps({"rate": rate, "few_rate": few_rate, "seconds": seconds}))


def child(mode: str, layers_path: str, args: argparse.Namespace, env: dict) -> tuple[dict, float]:
    command = [sys.executable, __file__, "--worker", mode, "--layers", layers_path]
    command += ["--config", args.config, "--repeats", str(args.repeats)]
    start = time.perf_counter()
    done = subprocess.run(
        command,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1]), time.perf_counter() - start


def main() -> None:
    parser = arguments.Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "config" / "config.yaml"))
    parser.add_argument("--repeats", type=arguments.positive_int, default=3)
    parser.add_argument("--worker", choices=["cold", "python", "single"], help=argparse.SUPPRESS)
    parser.add_argument("--layers", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.layers, args.config, args.repeats)
        return

    from relmas.config import load_config
    from relmas.zoo import layer_table

    layers = layer_table(load_config(args.config)["models"], source=args.config)
    specs = load_specs(args.config)
    print(
        f"zoo: {layers.height} layers of {layers['model'].n_unique()} models; "
        f"accelerators: {', '.join(specs)}; cores: {os.cpu_count()}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        layers_path = str(Path(tmp) / "layers.parquet")
        layers.write_parquet(layers_path)

        single, _ = child("single", layers_path, args, {"NUMBA_NUM_THREADS": "1"})
        print(
            f"mapping evaluations per second, one core: {single['rate']:,.0f} (target >= 1,000,000)"
        )
        print(f"whole zoo x all accelerators, one core: {single['seconds']:.2f} s")

        profile_all(layers.head(2), specs)
        warm = [profile_all(layers, specs) for _ in range(args.repeats)]
        warm_s = statistics.median(s for s, _ in warm)
        print(
            f"warm, all layers x all accelerators: {warm_s:.2f} s, "
            f"{warm[0][1]:,} evaluations (target <= 10 s)"
        )

        cold, cold_wall = child(
            "cold", layers_path, args, {"NUMBA_CACHE_DIR": str(Path(tmp) / "nb")}
        )
        print(
            f"cold (compile included): {cold['seconds']:.1f} s profiling, {cold_wall:.1f} s "
            f"for the whole process (target <= 60 s)"
        )

        python, _ = child("python", layers_path, args, {"NUMBA_DISABLE_JIT": "1"})
        speedup = single["few_rate"] / python["rate"]
        print(
            f"plain Python on {FEW_LAYERS} layers: {python['rate']:,.0f} evaluations/s; "
            f"compiled on one core: {single['few_rate']:,.0f}/s; speed-up {speedup:,.0f}x"
        )


if __name__ == "__main__":
    main()
