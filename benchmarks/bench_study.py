"""Where a finished study's job time went, per stage, from Snakemake's benchmark files.

    .venv/bin/python benchmarks/bench_study.py --study results/default

One row per stage (the first part of a benchmark file's path under `benchmarks/`: train, evaluate,
sweep, bound, ...): its jobs, their wall time summed (`s`), their CPU time summed (`cpu_time`) and
how many jobs have none (`cpu_na`: Snakemake writes NA for a job that ended before its first
sample).
Snakemake samples a job's CPU time, every 0.5 s for its first 15 s and every 30 s after that, and
keeps the last sample: a job's `cpu_time` misses what it used after its last sample (up to 30 s),
so the CPU column is a lower bound. For the study's exact CPU time, time the whole run
(`/usr/bin/time make run`: its user and system time include every job's).
"""

from __future__ import annotations

import csv
from pathlib import Path

import polars as pl

from relmas import arguments
from relmas.errors import InputError
from relmas.report import markdown_table


def job_rows(benchmarks: Path) -> list[dict[str, object]]:
    """One row per benchmark file under `benchmarks`: its stage, wall and CPU seconds."""
    rows = []
    for path in sorted(benchmarks.rglob("*.tsv")):
        with path.open(newline="") as handle:
            records = list(csv.DictReader(handle, delimiter="\t"))
        if not records:
            raise InputError(path, None, "a Snakemake benchmark file with a row")
        last = records[-1]
        stage = path.relative_to(benchmarks).parts[0].removesuffix(".tsv")
        try:
            wall = float(last["s"])
            # NA: the job ended before Snakemake's first sample
            cpu = None if last["cpu_time"] == "NA" else float(last["cpu_time"])
        except (KeyError, ValueError):
            raise InputError(path, "s, cpu_time", "numbers (cpu_time may be NA)", last) from None
        rows.append({"stage": stage, "job": str(path.relative_to(benchmarks)), "s": wall})
        rows[-1]["cpu_time"] = cpu
    return rows


def main() -> None:
    parser = arguments.Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", type=Path, required=True, help="a finished study's results")
    args = parser.parse_args()
    benchmarks = args.study / "benchmarks"
    try:
        if not benchmarks.is_dir():
            raise InputError(benchmarks, "--study", "a study's results with its benchmarks/")
        rows = job_rows(benchmarks)
        if not rows:
            raise InputError(benchmarks, "--study", "Snakemake benchmark files (*.tsv)")
    except InputError as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    jobs = pl.DataFrame(rows)
    stages = (
        jobs.group_by("stage")
        .agg(
            jobs=pl.len(),
            wall_s=pl.col("s").sum(),
            cpu_s=pl.col("cpu_time").sum(),
            cpu_na=pl.col("cpu_time").null_count(),
        )
        .sort("cpu_s", descending=True)
    )
    total = stages.select(
        pl.lit("total").alias("stage"), pl.col("jobs", "wall_s", "cpu_s", "cpu_na").sum()
    )
    seconds = pl.col("wall_s", "cpu_s").round(0).cast(pl.Int64)
    print(markdown_table(pl.concat([stages, total]).with_columns(seconds)))


if __name__ == "__main__":
    main()
