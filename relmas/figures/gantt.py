"""Gantt chart of one simulation: accelerator instances x time, tasks coloured by tenant (or job),
deadlines marked, and the off-chip bandwidth in use below it.

Needs a result recorded with `record=True` (the timeline of running tasks and their bandwidth).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from relmas.io import atomic_path  # noqa: E402
from relmas.sim.result import SimResult  # noqa: E402


def task_bars(timeline: pl.DataFrame) -> pl.DataFrame:
    """One bar per task (accelerator, job, layer, piece of a split layer): its intervals merged."""
    return (
        timeline.group_by(["accelerator", "job_id", "layer", "split", "piece"])
        .agg(pl.col("start_s").min(), pl.col("end_s").max())
        .sort(["accelerator", "start_s"])
    )


def bandwidth_steps(timeline: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Total bandwidth in use (B/s) as a step function: `len(values) + 1` edges, 0 in idle gaps."""
    summed = timeline.group_by(["start_s", "end_s"]).agg(pl.col("bandwidth_bps").sum())
    summed = summed.sort("start_s")
    edges: list[float] = []
    values: list[float] = []
    for start, end, value in summed.iter_rows():
        if edges and start > edges[-1]:
            values.append(0.0)
            edges.append(start)
        elif not edges:
            edges.append(start)
        values.append(value)
        edges.append(end)
    return np.array(edges), np.array(values)


def plot_gantt(
    result: SimResult, path: str | Path, *, color_by: str = "tenant", title: str | None = None
) -> None:
    """Write the Gantt chart of `result` to `path` (format from the suffix, e.g. .png, .pdf)."""
    if result.timeline is None:
        raise ValueError("the result has no timeline: simulate with record=True")
    if color_by not in ("tenant", "job_id"):
        raise ValueError("color_by must be 'tenant' or 'job_id'")
    jobs = result.jobs
    bars = task_bars(result.timeline).join(jobs.select("job_id", "tenant"), on="job_id")
    groups = sorted(set(bars[color_by].to_list()))
    cmap = plt.get_cmap("tab10" if len(groups) <= 10 else "tab20")
    colour = {g: cmap(i % cmap.N) for i, g in enumerate(groups)}
    labels = result.accelerators["instance"].to_list()

    fig, (top, bottom) = plt.subplots(
        2, 1, sharex=True, figsize=(10, 1.2 + 0.5 * len(labels) + 1.8), height_ratios=(3, 1.2)
    )
    for row in bars.iter_rows(named=True):
        top.broken_barh(
            [(row["start_s"], row["end_s"] - row["start_s"])],
            (row["accelerator"] - 0.4, 0.8),
            facecolors=colour[row[color_by]],
            edgecolor="black",
            linewidth=0.2,
        )
    last = bars.sort("end_s").group_by("job_id").agg(pl.col("accelerator").last())
    marks = jobs.join(last, on="job_id")
    for met, style in ((True, "g|"), (False, "r|")):
        sub = marks.filter(pl.col("met") == met)
        top.plot(sub["deadline_s"], sub["accelerator"], style, markersize=14, mew=1.5)
    top.set_yticks(range(len(labels)), labels)
    top.invert_yaxis()
    top.set_ylabel("instance")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour[g]) for g in groups[:20]]
    top.legend(
        handles, [str(g) for g in groups[:20]], title=color_by, loc="upper right", fontsize=7
    )
    top.set_title(title or f"{result.policy}: deadline marks, met (green) or missed (red)")

    edges, values = bandwidth_steps(result.timeline)
    bottom.stairs(values / 1e9, edges, color="tab:blue", fill=True, alpha=0.5)
    if np.isfinite(result.bandwidth_capacity_bps):
        bottom.axhline(result.bandwidth_capacity_bps / 1e9, color="black", linestyle="--", lw=0.8)
    bottom.set_ylabel("DRAM GB/s")
    bottom.set_xlabel("time (s)")
    fig.tight_layout()
    target = Path(path)
    with atomic_path(target, suffix=target.suffix) as tmp:
        fig.savefig(tmp, dpi=150, format=target.suffix.lstrip(".") or "png")
    plt.close(fig)
