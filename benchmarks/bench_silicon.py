"""The cost models against published silicon: model vs chip per layer, as Markdown tables.

    .venv/bin/python benchmarks/bench_silicon.py [--objective latency|energy|edp]

Eyeriss (JSSC 2017): AlexNet's and VGG-16's convolution layers on the chip's own spec (its
mapping rules and pass fill included, relmas/hw/silicon.yaml), processing latency (DRAM
overlapped: the cost table's cycles) and total latency (plus the feature maps over the chip's
60 MHz, 64-bit DRAM link, during which the chip stops). Simba: the zoo's ResNet-50 at batch 1 on
the 36-chiplet package against the published images per second. tests/test_silicon.py holds the
tolerances; docs/costmodel.md ("Silicon") discusses the figures.
"""

from __future__ import annotations

import polars as pl

from relmas import arguments
from relmas.hw.common import OBJECTIVES
from relmas.hw.silicon import compare_eyeriss, compare_simba, network_totals
from relmas.report import markdown_table


def main() -> None:
    parser = arguments.Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--objective", choices=OBJECTIVES, default="latency")
    args = parser.parse_args()
    eyeriss = compare_eyeriss(objective=args.objective, progress=True)  # a bar on a terminal
    percent = [pl.col("processing_gap", "total_gap") * 100]
    print(f"## Eyeriss (JSSC 2017), objective {args.objective}\n")
    print(markdown_table(eyeriss.drop("mapping").with_columns(percent), digits=3))
    print()
    print(markdown_table(network_totals(eyeriss).with_columns(percent), digits=3))
    print("\nMappings:\n")
    print(markdown_table(eyeriss.select("network", "name", "mapping")))
    print("\n## Simba package, ResNet-50 at batch 1\n")
    print(markdown_table(compare_simba(progress=True), digits=3))


if __name__ == "__main__":
    main()
