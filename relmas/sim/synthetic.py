"""Synthetic cost tables (COST_SCHEMA) for tests and benchmarks that must not depend on profiling.

Layer latencies are log-normal with a per-(layer, type) speed factor, so that no type is uniformly
fastest; DRAM traffic gives each layer a bandwidth demand of a few GB/s, comparable to the shared
bandwidth of the default system, so that contention matters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from relmas.schemas import COST_SCHEMA


def synthetic_costs(
    layers: Mapping[str, int],
    accelerators: Sequence[str],
    seed: int = 0,
    mean_latency_s: float = 1e-4,
    mean_demand_gbps: float = 4.0,
) -> pl.DataFrame:
    """Costs of models with `layers[model]` layers on each accelerator name."""
    rng = np.random.default_rng(seed)
    frames = []
    for model, count in layers.items():
        base = mean_latency_s * rng.lognormal(0.0, 0.7, count)
        demand = mean_demand_gbps * 1e9 * rng.lognormal(0.0, 0.5, count)
        for name in accelerators:
            latency = base * rng.uniform(0.4, 2.5, count)
            dram = np.rint(demand * base).astype(np.int64)
            frames.append(
                pl.DataFrame(
                    {
                        "model": [model] * count,
                        "layer": np.arange(count, dtype=np.int32),
                        "accelerator": [name] * count,
                        "cycles": np.rint(latency * 1e9).astype(np.int64),
                        "latency_s": latency,
                        "dram_bytes": dram,
                        "energy_j": 1e-12 * dram * 100 + latency * 0.5,
                        "utilization": rng.uniform(0.2, 1.0, count),
                        "mapping": ["synthetic"] * count,
                    },
                    schema=COST_SCHEMA,
                )
            )
    return pl.concat(frames)


def cost_frame(
    layers: Mapping[str, Mapping[str, Sequence[tuple[float, int, float]]]],
) -> pl.DataFrame:
    """Explicit costs: `layers[model][accelerator]` = [(latency_s, dram_bytes, energy_j), ...]."""
    rows = [
        {
            "model": model,
            "layer": index,
            "accelerator": name,
            "cycles": int(round(latency * 1e9)),
            "latency_s": float(latency),
            "dram_bytes": int(dram),
            "energy_j": float(energy),
            "utilization": 1.0,
            "mapping": "explicit",
        }
        for model, per_type in layers.items()
        for name, entries in per_type.items()
        for index, (latency, dram, energy) in enumerate(entries)
    ]
    return pl.DataFrame(rows, schema=COST_SCHEMA)
