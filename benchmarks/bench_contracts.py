"""What the file contracts (relmas.schemas, dataframely) cost a command: import and check time.

    .venv/bin/python benchmarks/bench_contracts.py            # --repeats 7

Import: each measurement is a fresh process, as a Snakemake job is; the median wall time of
importing dataframely after what every tracked stage imports anyway (polars, numpy and MLflow's
SQLite store, which loads SQLAlchemy and pydantic, the libraries dataframely imports eagerly when
they are installed), and after polars and numpy alone (`relmas simulate`, which tracks nothing).
Check: reading a 10^6-job trace (the most a trace may have) with and without its contract, median
of the repeats in this process.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from relmas.io import read_parquet
from relmas.schemas import JOB_SCHEMA, JobTrace

IMPORT = """
import sys, time
import numpy, polars
if sys.argv[1] == "tracked":
    import mlflow.store.tracking.sqlalchemy_store
start = time.perf_counter()
if sys.argv[2] == "dataframely":
    import dataframely
print(time.perf_counter() - start)
"""


def import_seconds(context: str, module: str, repeats: int) -> float:
    runs = [
        float(
            subprocess.run(
                [sys.executable, "-c", IMPORT, context, module],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        )
        for _ in range(repeats)
    ]
    return statistics.median(runs)


def trace(jobs: int) -> pl.DataFrame:
    rng = np.random.default_rng(0)
    arrival = np.sort(rng.uniform(0, 1000, jobs))
    return pl.DataFrame(
        {
            "job_id": np.arange(jobs),
            "tenant": rng.choice(["a", "b"], jobs),
            "model": rng.choice(["resnet50", "bert_base"], jobs),
            "arrival_s": arrival,
            "deadline_s": arrival + 0.1,
            "priority": rng.choice([1, 3, 9], jobs).astype(np.int32),
            "target": None,
            "model_target": False,
            "firm": False,
        },
        schema=JOB_SCHEMA,
    )


def check_seconds(path: Path, repeats: int) -> tuple[float, float]:
    plain, checked = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        pl.read_parquet(path)
        plain.append(time.perf_counter() - start)
        start = time.perf_counter()
        read_parquet(path, JobTrace)
        checked.append(time.perf_counter() - start)
    return statistics.median(plain), statistics.median(checked)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    for context in ("tracked", "untracked"):
        cost = import_seconds(context, "dataframely", args.repeats)
        cost -= import_seconds(context, "none", args.repeats)
        print(f"import dataframely, {context} stage: {1000 * cost:.0f} ms (median)")
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "trace.parquet"
        trace(1_000_000).write_parquet(path)
        plain, checked = check_seconds(path, args.repeats)
        print(f"10^6-job trace: read {plain:.2f} s, read and checked {checked:.2f} s (median)")


if __name__ == "__main__":
    main()
