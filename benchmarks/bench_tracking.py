"""MLflow overhead of one pipeline job: what a stage's run adds to a job's wall time.

    .venv/bin/python benchmarks/bench_tracking.py            # --repeats 7

Each measurement is a fresh process, as a Snakemake job is, against one SQLite store (created and
brought to the schema head first, as after a pipeline's first job): the job's own imports alone
(`baseline`), then the same plus one stage run logging a few params, metrics and an artifact, ending
as a process normally does (`before`: the interpreter's final garbage collection included) and as
`python -m relmas` ends (`after`: relmas/__main__.py freezes the heap first). Overhead = median
wall time minus the baseline's median. Also prints where the time goes inside one run.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from relmas import arguments

ROOT = Path(__file__).resolve().parents[1]

JOB = """
import sys, time
import numpy, polars  # what every job imports anyway
if sys.argv[1] != "baseline":
    from relmas import tracking
    with tracking.stage_run("evaluate", {"experiment": "bench"}, tags={"policy": "edf"},
                            params={"policy": "edf", "seeds": "1000"}) as run:
        run.log_metrics({"sla_rate": 0.5, "antt": 2.0})
        run.log_artifact(sys.argv[2])
if sys.argv[1] == "after":
    import gc
    gc.freeze()
"""

PARTS = """
import time
t = time.perf_counter()
parts = {}
def mark(name):
    global t
    now = time.perf_counter(); parts[name] = now - t; t = now
import mlflow; mark("import mlflow")
import mlflow.store.tracking.sqlalchemy_store; mark("import the SQL store (SQLAlchemy, alembic)")
from relmas import tracking
with tracking.stage_run("evaluate", {"experiment": "bench"}) as run:
    mark("open the store, check its schema, start the run")
    run.log_metrics({"sla_rate": 0.5})
mark("log and end the run")
print(";".join(f"{k}={v:.3f}" for k, v in parts.items()))
"""


def wall(args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", JOB, *args], env=env, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = arguments.Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=arguments.positive_int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, MLFLOW_TRACKING_URI=f"sqlite:///{tmp}/mlflow.db")
        env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{env.get('PYTHONPATH', '')}"
        env.pop("RELMAS_PIPELINE_ID", None)
        env.pop("RELMAS_PIPELINE_RUN_ID", None)
        artifact = Path(tmp) / "results.parquet"
        artifact.write_bytes(b"x" * 10_000)
        wall(["before", str(artifact)], env)  # creates the store and the experiment
        times: dict[str, list[float]] = {"baseline": [], "before": [], "after": []}
        for _ in range(args.repeats):  # interleaved, so that a change of load hits all three
            for mode in times:
                times[mode].append(wall([mode, str(artifact)], env))
        parts = subprocess.run(
            [sys.executable, "-c", PARTS], env=env, check=True, capture_output=True, text=True
        ).stdout.strip()
    base = statistics.median(times["baseline"])
    print(f"job without tracking: {base:.2f} s (median of {args.repeats})")
    for mode in ("before", "after"):
        median = statistics.median(times[mode])
        print(f"{mode:6s}: {median:.2f} s, MLflow overhead {median - base:.2f} s")
    print("inside one run:")
    for item in parts.split(";"):
        name, seconds = item.split("=")
        print(f"  {name}: {float(seconds):.2f} s")


if __name__ == "__main__":
    main()
