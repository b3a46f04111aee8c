"""How long extracting the layer table of the whole default zoo takes (issue: seconds, not minutes).

Run: .venv/bin/python benchmarks/bench_zoo.py [--config config/config.yaml] [--repeats 3]
Prints the first extraction in a fresh process (torch's one-time meta-kernel set-up included) and
the median of the following ones.
"""

from __future__ import annotations

import statistics
import time

from relmas import arguments
from relmas.config import load_config
from relmas.zoo import layer_table


def main() -> None:
    parser = arguments.Parser(description=__doc__)
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--repeats", type=arguments.positive_int, default=3)
    args = parser.parse_args()
    models = load_config(args.config)["models"]
    times = []
    for _ in range(args.repeats + 1):
        start = time.perf_counter()
        layers = layer_table(models)
        times.append(time.perf_counter() - start)
    print(f"models: {len(models)}, layers: {layers.height}, MACs: {layers['macs'].sum():,}")
    print(f"first extraction in this process: {times[0]:.2f} s")
    print(f"median of {args.repeats} more: {statistics.median(times[1:]):.2f} s")


if __name__ == "__main__":
    main()
