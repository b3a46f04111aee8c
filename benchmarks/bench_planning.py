"""What planning a study costs: `snakemake -n` of each shipped config, before any job runs.

    .venv/bin/python benchmarks/bench_planning.py            # --repeats 3

Every `snakemake` invocation plans the whole DAG first (a `make run`, a dry run, each test that
runs Snakemake), so the input functions of workflow/rules/ run once per job and wildcard; the
median wall time of a dry run from a fresh process, per config, from the project root.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

from relmas import arguments

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
CONFIGS = ("config/config.yaml", "config/quick.yaml")


def dry_run_seconds(configfile: str, repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(
            [str(SNAKEMAKE), "-n", "--quiet", "rules", "--configfile", configfile],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def main() -> None:
    parser = arguments.Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=arguments.positive_int, default=3)
    args = parser.parse_args()
    for configfile in CONFIGS:
        seconds = dry_run_seconds(configfile, args.repeats)
        print(f"snakemake -n --configfile {configfile}: {seconds:.1f} s (median)")


if __name__ == "__main__":
    main()
