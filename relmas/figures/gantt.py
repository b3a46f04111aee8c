"""Gantt charts of simulations: accelerator instances x time, tasks coloured by tenant (or job),
deadlines marked, and the off-chip bandwidth in use below; several side by side (the report's
RELMAS beside the best baseline on the same jobs), with one legend for every mark.

Needs a result recorded with `record=True` (the timeline of running tasks and their bandwidth).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

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
    plot_schedules({title or result.policy: result}, path, color_by=color_by)


def plot_schedules(
    results: Mapping[str, SimResult],
    path: str | Path,
    *,
    color_by: str = "tenant",
    colours: Mapping[str, str] | None = None,
    suptitle: str | None = None,
    window: tuple[float, float] | None = None,
    marked: Collection[int] | None = None,
) -> None:
    """Write the Gantt charts of several results side by side (panel title -> result, e.g. two
    policies on the same jobs) to `path`: shared time and instance axes, one colour per tenant (or
    job) in every panel, and one legend for the bars, the deadline marks and the bandwidth line.
    `colours` (panel title -> colour) tints each panel's title, e.g. with its policy's colour;
    `window` (start, end in s) draws only that span of the runs, every task running in it;
    `marked` (job ids) marks only those jobs' deadlines."""
    for result in results.values():
        if result.timeline is None:
            raise ValueError("the result has no timeline: simulate with record=True")
    if color_by not in ("tenant", "job_id"):
        raise ValueError("color_by must be 'tenant' or 'job_id'")
    groups = sorted({g for result in results.values() for g in result.jobs[color_by].to_list()})
    cmap = plt.get_cmap("tab10" if len(groups) <= 10 else "tab20")
    colour = {g: cmap(i % cmap.N) for i, g in enumerate(groups)}
    labels = next(iter(results.values())).accelerators["instance"].to_list()
    fig, axes = plt.subplots(
        2,
        len(results),
        sharex=True,
        sharey="row",
        squeeze=False,
        figsize=(3 + 6 * len(results), 1.2 + 0.5 * len(labels) + 2.6),
        height_ratios=(3, 1.2),
    )
    for column, (title, result) in enumerate(results.items()):
        top, bottom = axes[0, column], axes[1, column]
        _draw_schedule(top, result, colour, color_by, window, marked)
        if window is not None:
            start, end = window
            overlaps = (pl.col("end_s") > start) & (pl.col("start_s") < end)
            result = replace(result, timeline=result.timeline.filter(overlaps))
        _draw_bandwidth(bottom, result)
        top.set_title(title, color=(colours or {}).get(title, "black"))
        bottom.set_xlabel("time (s)")
    if window is not None:
        axes[0, 0].set_xlim(*window)
    axes[0, 0].set_yticks(range(len(labels)), labels)
    axes[0, 0].invert_yaxis()
    axes[0, 0].set_ylabel("instance")
    axes[1, 0].set_ylabel("DRAM GB/s")
    shown = groups[:20]
    handles = [Patch(facecolor=colour[g], edgecolor="black", linewidth=0.2) for g in shown]
    names = [f"{color_by} {g}" for g in shown]
    handles += [
        Line2D([], [], color="g", marker="|", linestyle="none", markersize=12, mew=1.5),
        Line2D([], [], color="r", marker="|", linestyle="none", markersize=12, mew=1.5),
        Patch(facecolor="tab:blue", alpha=0.5),
        Line2D([], [], color="black", linestyle="--", linewidth=0.8),
    ]
    names += ["deadline met", "deadline missed", "DRAM bandwidth in use", "DRAM bandwidth limit"]
    fig.legend(handles, names, loc="lower center", ncol=min(len(names), 6), fontsize=7)
    if suptitle:
        fig.suptitle(suptitle)
    fig.tight_layout(rect=(0, 0.09, 1, 1))
    # laid out once: without this, tight_layout leaves a placeholder layout engine behind, for
    # which savefig draws the whole figure once more before drawing it into the file
    fig.set_layout_engine(None)
    target = Path(path)
    with atomic_path(target, suffix=target.suffix) as tmp:
        fig.savefig(tmp, dpi=150, format=target.suffix.lstrip(".") or "png")
    plt.close(fig)


def _draw_schedule(
    ax: Axes,
    result: SimResult,
    colour: Mapping[object, object],
    by: str,
    window: tuple[float, float] | None = None,
    marked: Collection[int] | None = None,
) -> None:
    """One bar per task on its instance's row (those running in `window` only, if given), and
    each job's deadline (of `marked` jobs only, if given) on the row of its last task: green if
    met, red if missed. The bars of one instance and colour are one collection (a collection per
    bar made the chart most of an evaluation job's time)."""
    jobs = result.jobs
    bars = task_bars(result.timeline).join(jobs.select("job_id", "tenant"), on="job_id")
    drawn = bars
    if window is not None:
        drawn = bars.filter((pl.col("end_s") > window[0]) & (pl.col("start_s") < window[1]))
    for (accelerator, key), group in drawn.group_by(["accelerator", by], maintain_order=True):
        ax.broken_barh(
            list(zip(group["start_s"], group["end_s"] - group["start_s"], strict=True)),
            (accelerator - 0.4, 0.8),
            facecolors=colour[key],
            edgecolor="black",
            linewidth=0.2,
        )
    last = bars.sort("end_s", "accelerator").group_by("job_id").agg(pl.col("accelerator").last())
    marks = jobs.join(last, on="job_id")
    if marked is not None:
        marks = marks.filter(pl.col("job_id").is_in(list(marked)))
    for met, style in ((True, "g|"), (False, "r|")):
        sub = marks.filter(pl.col("met") == met)
        ax.plot(sub["deadline_s"], sub["accelerator"], style, markersize=14, mew=1.5)


def _draw_bandwidth(ax: Axes, result: SimResult) -> None:
    """The off-chip bandwidth in use over time, and the system's limit dashed (if any)."""
    edges, values = bandwidth_steps(result.timeline)
    # the filled step function as one polygon of a collection: Axes.stairs draws the same patch
    # but works out its limits segment by segment in Python, a third of a Gantt chart's time
    x = np.concatenate(([edges[0]], np.repeat(edges, 2)[1:-1], [edges[-1]]))
    y = np.concatenate(([0.0], np.repeat(values, 2) / 1e9, [0.0]))
    step = PolyCollection([np.column_stack((x, y))], facecolors="tab:blue", alpha=0.5, linewidths=0)
    ax.add_collection(step)
    ax.autoscale_view()
    ax.set_ylim(bottom=0.0)
    if np.isfinite(result.bandwidth_capacity_bps):
        ax.axhline(result.bandwidth_capacity_bps / 1e9, color="black", linestyle="--", lw=0.8)
