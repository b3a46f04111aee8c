"""The report's figures of evaluation results: metrics by scenario, SLA rate per tenant, achieved
against target per service group, sweeps and learning curves.

Every policy takes its colour and place from relmas.figures.palette (grouped by kind, the learned
policies outlined and on top). Intervals are drawn only where there are two seeds or more: a
half-width of NaN (relmas.report.mean_ci of one value) draws none, and the axis label says n.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator  # noqa: E402

from relmas import catalog  # noqa: E402
from relmas.figures import palette  # noqa: E402


def interval_label(seeds: int) -> str:
    """What a mean drawn over `seeds` seeds carries: a 95% CI, or none (n = 1)."""
    return f"mean of {seeds} seeds, 95% CI" if seeds > 1 else "n = 1 seed, no interval"


def _seeds(aggregated: pl.DataFrame) -> int:
    """The fewest seeds behind a mean of `aggregated` (its `seeds` column)."""
    return int(aggregated["seeds"].min())


def plot_metric_by_scenario(aggregated: pl.DataFrame, metric: str, label: str) -> plt.Figure:
    """Grouped bars: one group per scenario, one bar per policy (grouped by kind), 95% CI
    whiskers where there are two seeds or more."""
    scenarios = aggregated["scenario"].unique(maintain_order=True).to_list()
    policies = palette.order(aggregated["policy"])
    width = 0.8 / len(policies)
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(scenarios)), 4.5))
    for i, policy in enumerate(policies):
        rows = aggregated.filter(pl.col("policy") == policy)
        values = dict(zip(rows["scenario"], rows[metric], strict=True))
        errors = dict(zip(rows["scenario"], rows[f"{metric}_ci95"], strict=True))
        x = np.arange(len(scenarios)) + (i - (len(policies) - 1) / 2) * width
        whiskers = [errors.get(s, math.nan) for s in scenarios]
        ax.bar(
            x,
            [values.get(s, np.nan) for s in scenarios],
            width,
            yerr=None if all(math.isnan(w) for w in whiskers) else whiskers,
            label=policy,
            color=palette.colour(policy),
            edgecolor="black" if palette.prominent(policy) else "none",
            capsize=2,
        )
    ax.set_xticks(np.arange(len(scenarios)), scenarios, rotation=15)
    ax.set_ylabel(f"{label} ({interval_label(_seeds(aggregated))})")
    ax.legend(
        ncol=min(len(policies), 7),
        fontsize="small",
        loc="upper center",
        bbox_to_anchor=(0.5, -0.18),
    )
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


# The rows of the best-of-each-kind figure: a kind's best (one policy per scenario, whichever it
# is), the offline bound and each learned policy under its own name.
KIND_ROWS = {"heuristic": "heuristic", "rule": "rule", "target": "target-aware", "search": "search"}


def _row_of(policy: str) -> str:
    kind = catalog.entry(policy).kind
    return KIND_ROWS.get(kind, policy)


def plot_best_by_kind(
    aggregated: pl.DataFrame,
    shown: Mapping[str, Sequence[str]],
    ceilings: Mapping[str, float],
) -> plt.Figure:
    """One panel per scenario of `shown` (scenario -> its policies, one per row: the best of each
    kind, the offline bound, each learned policy): each policy's mean SLA rate as a dot in its
    colour, named beside it, with its 95% CI (two seeds or more), and the scenario's proven
    ceiling (`ceilings`, mean over its traces) as a dashed mark. Each panel has the rows of its
    own scenario only (a kind evaluated elsewhere would be an empty row) and its axis spans its
    own values, within [0, 1]: the dots are compared within a scenario, not across."""
    order = [*KIND_ROWS.values(), *catalog.names()]
    panels = {
        scenario: sorted({_row_of(policy) for policy in policies}, key=order.index)
        for scenario, policies in shown.items()
    }
    scenarios = list(shown)
    if not scenarios:  # only the floor was evaluated: nothing to rank
        fig, ax = plt.subplots(figsize=(6, 2))
        ax.text(0.5, 0.5, "no policy but the floor evaluated", ha="center", va="center")
        ax.set_axis_off()
        return fig
    cols = min(len(scenarios), 3)
    lines = math.ceil(len(scenarios) / cols)
    most = max(len(rows) for rows in panels.values())
    fig, axes = plt.subplots(
        lines,
        cols,
        figsize=(5.4 * cols + 0.2, 0.42 * most * lines + 1.1 * lines + 0.6),
        squeeze=False,
    )
    for ax, scenario in zip(axes.flat, scenarios, strict=False):
        rows = panels[scenario]
        values = []
        for policy in shown[scenario]:
            (row,) = aggregated.filter(
                (pl.col("scenario") == scenario) & (pl.col("policy") == policy)
            ).iter_rows(named=True)
            y, mean, half = rows.index(_row_of(policy)), row["sla_rate"], row["sla_rate_ci95"]
            colour = palette.colour(policy)
            if not math.isnan(half):
                # a rate lies in [0, 1]: so does its interval
                left, right = max(0.0, mean - half), min(1.0, mean + half)
                xerr = [[mean - left], [right - mean]]
                ax.errorbar(mean, y, xerr=xerr, color=colour, capsize=3, linewidth=1.5)
                values += [left, right]
            ax.plot(
                mean,
                y,
                "o",
                color=colour,
                markersize=7,
                label=policy,
                markeredgecolor="black" if palette.prominent(policy) else colour,
                clip_on=False,  # a rate of 1 sits on the axis' end, whole
            )
            ax.annotate(
                policy,
                (mean, y),
                xytext=(0, 5),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=7,
                color="#333333",
            )
            values.append(mean)
        if scenario in ceilings:
            ax.axvline(ceilings[scenario], zorder=1, **palette.CEILING_STYLE)
            values.append(ceilings[scenario])
        low, high = min(values), max(values)
        margin = max(0.02, 0.12 * (high - low))
        ax.set_xlim(max(0.0, low - margin), min(1.0, high + margin))
        ax.set_yticks(range(len(rows)), rows)
        ax.set_ylim(len(rows) - 0.4, -0.8)
        ax.set_title(scenario, fontsize="medium")
        ax.set_xlabel(f"SLA rate ({interval_label(_seeds(aggregated))})", fontsize="small")
        ax.grid(axis="x", alpha=0.3)
    for ax in list(axes.flat)[len(scenarios) :]:
        ax.set_visible(False)
    if ceilings:
        ceiling = Line2D([], [], **palette.CEILING_STYLE)
        fig.legend([ceiling], [ceiling.get_label()], loc="upper right", fontsize="small")
    fig.tight_layout(rect=(0, 0, 1, 0.97 if ceilings else 1))
    return fig


def plot_tenant_sla(tenants: pl.DataFrame, scenario: str) -> plt.Figure:
    """SLA rate per tenant (bars, pooled over seeds) for every policy on one scenario."""
    rows = tenants.filter(pl.col("scenario") == scenario)
    fig, ax = plt.subplots(figsize=(8, 4))
    _policy_bars(ax, rows, "tenant", "sla_rate", rows["tenant"].unique(maintain_order=True))
    ax.set_ylabel("SLA rate (jobs of all seeds pooled)")
    ax.set_title(f"{scenario}: SLA rate per tenant")
    ax.legend(fontsize="small", ncol=2)
    fig.tight_layout()
    return fig


def plot_service_groups(groups: pl.DataFrame, scenario: str) -> plt.Figure:
    """Achieved deadline-hit rate per service group (bars: its jobs of all seeds pooled) for every
    policy on one scenario, the group's target a black mark across its bars; groups by target,
    highest first. `groups`: scenario, policy, group, achieved, target."""
    rows = groups.filter(pl.col("scenario") == scenario)
    targets = (
        rows.group_by("group")
        .agg(pl.col("target").first())
        .sort("target", "group", descending=[True, False])
    )
    fig, ax = plt.subplots(figsize=(10, 4.5))
    _policy_bars(ax, rows, "group", "achieved", targets["group"])
    for x, target in enumerate(targets["target"]):
        label = "target" if x == 0 else "_nolegend_"
        ax.plot(
            [x - 0.45, x + 0.45], [target, target], color="black", lw=2.5, zorder=3, label=label
        )
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("deadline-hit rate (jobs of all seeds pooled)")
    ax.set_title(f"{scenario}: achieved against target per service group")
    # beside the axes: a target mark near 1 would hide under a legend inside them
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    return fig


def _policy_bars(ax: plt.Axes, rows: pl.DataFrame, key: str, value: str, names: pl.Series) -> None:
    """One bar per policy (palette order and colour) at each of `names`, a value of column `key`
    of `rows`, of height `value`; the names label the x axis."""
    policies = palette.order(rows["policy"])
    width = 0.8 / len(policies)
    for i, policy in enumerate(policies):
        part = rows.filter(pl.col("policy") == policy)
        values = dict(zip(part[key], part[value], strict=True))
        x = np.arange(len(names)) + (i - (len(policies) - 1) / 2) * width
        ax.bar(
            x,
            [values.get(name, np.nan) for name in names],
            width,
            label=policy,
            color=palette.colour(policy),
            edgecolor="black" if palette.prominent(policy) else "none",
        )
    ax.set_xticks(np.arange(len(names)), names.to_list())


SWEEP_AXES = {
    "load": ("offered load (x the system's capacity)", "linear"),
    "dram_gbps": ("shared off-chip bandwidth, GB/s", "log"),
}


def plot_sweep(
    aggregated: pl.DataFrame,
    title: str,
    parameter: str,
    trained_at: float | None,
    ceiling: pl.DataFrame | None = None,
) -> plt.Figure:
    """SLA rate against the swept value, one line per policy with its 95% CI band (two seeds or
    more); a dotted line where the learned policies' agent was trained (the base scenario's own
    value); the proven ceiling's mean over the seeds (`ceiling`: value, sla_rate) dashed, above
    which no schedule reaches."""
    policies = palette.order(aggregated["policy"])
    label, scale = SWEEP_AXES[parameter]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for policy in policies:
        rows = aggregated.filter(pl.col("policy") == policy).sort("value")
        x, mean, half = (rows[c].to_numpy() for c in ("value", "sla_rate", "sla_rate_ci95"))
        prominent = palette.prominent(policy)
        color = palette.colour(policy)
        ax.plot(
            x,
            mean,
            marker="o",
            label=policy,
            color=color,
            linewidth=2.5 if prominent else 1.2,
            zorder=3 if prominent else 2,
        )
        if not np.isnan(half).all():
            ax.fill_between(x, mean - half, mean + half, color=color, alpha=0.15)
    if ceiling is not None and ceiling.height:
        rows = ceiling.sort("value")
        ax.plot(rows["value"], rows["sla_rate"], zorder=4, **palette.CEILING_STYLE)
    if trained_at is not None:
        ax.axvline(trained_at, color="grey", linestyle=":", label="agent trained here")
    if scale == "log":
        ax.set_xscale("log", base=2)
        values = sorted(aggregated["value"].unique())
        ax.set_xticks(values, [f"{v:g}" for v in values])
    ax.set_xlabel(label)
    ax.set_ylabel(f"SLA rate ({interval_label(_seeds(aggregated))})")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.legend(fontsize="small", ncol=2, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def thousands(value: float, _position: object = None) -> str:
    """A training step as an axis label: 20000 -> 20k, 1500000 -> 1.5M."""
    for size, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def plot_learning_curves(
    curves: Mapping[str, pl.DataFrame],
    best_heuristics: Mapping[str, tuple[str, float]],
    policies: Mapping[str, str],
) -> plt.Figure:
    """Validation SLA rate against training step, one panel per agent (`curves` by title, drawn in
    the colour of its policy, `policies` by title), with its reference baseline's SLA rate on the
    same validation traces dashed (`best_heuristics`)."""
    titles = list(curves)
    cols = min(len(titles), 4)
    rows = math.ceil(len(titles) / cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(3.6 * cols, 2.9 * rows), squeeze=False, sharey=True
    )
    shown = [rate for _, rate in best_heuristics.values()]
    for ax, title in zip(axes.flat, titles, strict=False):
        points = curves[title].filter(pl.col("metric") == "val_sla_rate").sort("step")
        shown += points["value"].to_list()
        policy = policies[title]
        ax.plot(
            points["step"],
            points["value"],
            marker="o",
            markersize=3,
            color=palette.colour(policy),
            label=policy,
        )
        name, rate = best_heuristics[title]
        ax.axhline(rate, color="black", linestyle="--", linewidth=1, label=f"{name} (best heur.)")
        ax.set_title(title, fontsize="medium")
        ax.set_xlabel("training step (decisions)")
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4, integer=True))
        ax.xaxis.set_major_formatter(FuncFormatter(thousands))
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small", loc="lower right")
    axes[0, 0].set_ylim(max(0.0, min(shown) - 0.05), min(1.02, max(shown) + 0.05))
    for ax in axes[:, 0]:
        ax.set_ylabel("validation SLA rate")
    for ax in list(axes.flat)[len(titles) :]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig
