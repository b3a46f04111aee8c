"""Per-layer costs of one model on every accelerator: where each layer runs fast and cheap.

Two panels share the layer axis: latency (top) and dynamic energy (bottom), one line per
accelerator on log scales, so that the layers where the dataflows disagree (depthwise, low-channel,
fully-connected) stand out.
"""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from relmas.errors import InputError  # noqa: E402


def plot_layer_costs(costs: Mapping[str, pl.DataFrame], model: str) -> Figure:
    """Latency and energy per layer of `model` on each accelerator (name -> its cost table)."""
    fig, (ax_latency, ax_energy) = plt.subplots(2, 1, sharex=True, figsize=(10, 6))
    for name, table in costs.items():
        rows = table.filter(pl.col("model") == model).sort("layer")
        if rows.is_empty():
            plt.close(fig)
            raise InputError(None, "model", f"layers of {model!r} in the cost table of {name}")
        layers = rows["layer"].to_numpy()
        ax_latency.step(layers, rows["latency_s"].to_numpy() * 1e6, where="mid", label=name)
        ax_energy.step(layers, rows["energy_j"].to_numpy() * 1e6, where="mid", label=name)
    ax_latency.set_yscale("log")
    ax_energy.set_yscale("log")
    ax_latency.set_ylabel("latency (µs)")
    ax_energy.set_ylabel("dynamic energy (µJ)")
    ax_energy.set_xlabel("layer")
    ax_latency.set_title(f"{model}: per-layer cost on each accelerator")
    ax_latency.legend(loc="upper right", fontsize="small")
    ax_latency.grid(True, which="major", alpha=0.3)
    ax_energy.grid(True, which="major", alpha=0.3)
    fig.tight_layout()
    return fig
