"""Write the hand-made inputs of `relmas simulate`: a job trace and two cost tables.

Any tool that writes Parquet will do; these are the columns and types of docs/design.md's contracts.
Run: python examples/handwritten/make_inputs.py (writes jobs.parquet and costs/ beside this file).
"""

from pathlib import Path

import polars as pl

HERE = Path(__file__).parent

# Two models: "cnn" (3 layers) and "mlp" (2 layers). Per accelerator: latency (s), DRAM bytes, J.
LAYERS = {
    ("cnn", "big"): [
        (0.004, 4_000_000, 0.010),
        (0.006, 2_000_000, 0.012),
        (0.002, 1_000_000, 0.004),
    ],
    ("cnn", "small"): [
        (0.009, 4_000_000, 0.006),
        (0.012, 2_500_000, 0.008),
        (0.005, 1_000_000, 0.003),
    ],
    ("mlp", "big"): [(0.001, 8_000_000, 0.003), (0.001, 8_000_000, 0.003)],
    ("mlp", "small"): [(0.003, 8_000_000, 0.002), (0.003, 8_000_000, 0.002)],
}


def main() -> None:
    (HERE / "costs").mkdir(exist_ok=True)
    for accelerator in ("big", "small"):
        rows = [
            {
                "model": model,
                "layer": layer,
                "accelerator": accelerator,
                "cycles": int(latency * 1e9),
                "latency_s": latency,
                "dram_bytes": dram,
                "energy_j": energy,
                "utilization": 0.8,
                "mapping": "hand-written",
            }
            for (model, acc), layers in LAYERS.items()
            if acc == accelerator
            for layer, (latency, dram, energy) in enumerate(layers)
        ]
        pl.DataFrame(rows).with_columns(pl.col("layer").cast(pl.Int32)).write_parquet(
            HERE / "costs" / f"{accelerator}.parquet"
        )
    jobs = pl.DataFrame(
        {
            "job_id": [0, 1, 2, 3, 4],
            "tenant": ["camera", "camera", "chat", "chat", "camera"],
            "model": ["cnn", "cnn", "mlp", "mlp", "cnn"],
            "arrival_s": [0.000, 0.002, 0.003, 0.004, 0.010],
            "deadline_s": [0.030, 0.032, 0.013, 0.020, 0.040],
            "priority": [9, 9, 3, 3, 1],
        }
    ).with_columns(pl.col("priority").cast(pl.Int32))
    jobs.write_parquet(HERE / "jobs.parquet")


if __name__ == "__main__":
    main()
