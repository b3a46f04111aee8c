"""Evaluation results -> the study's report: summary.parquet, statistics, figures, report.md.

Statistics are over evaluation seeds (traces the agents never saw): means with Student-t 95%
confidence intervals, and for each scenario the ratio of every learned policy's mean SLA rate to the
best heuristic's, with a paired bootstrap 95% interval (seeds resampled together, since all
policies ran on the same traces). Nothing is tuned or filtered: every policy evaluated is shown.

Besides the per-scenario evaluation: generalisation runs (a learned policy deployed with the agent
of another scenario: rows whose `agent_scenario` is not their scenario), sweeps (SLA rate against
load and bandwidth, `relmas.sweep`) and the agents' learning curves (`curve.parquet`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
from scipy import stats  # noqa: E402

from relmas import catalog  # noqa: E402
from relmas.io import read_parquet  # noqa: E402
from relmas.paths import (  # noqa: E402
    ResultPaths,
    agent_dir,
    cost_table,
    evaluation_file,
    summary_of,
    sweep_file,
    workload_file,
)
from relmas.schemas import SUMMARY_SCHEMA  # noqa: E402
from relmas.study import (  # noqa: E402
    Study,
    evaluation_runs,
    generalisation_runs,
    point_label,
    sweep_points,
)

OFFLINE_SHARE = 0.9  # share of the offline bound an online policy should reach (issue 5)
METRICS = ("sla_rate", "antt", "stp", "fairness", "utilization", "energy_j", "decision_us")
BOOTSTRAP_SAMPLES = 10_000


def collect_summaries(paths: Sequence[str | Path]) -> pl.DataFrame:
    """All one-row summaries in one frame (contract columns first), sorted for stable output."""
    frames = [read_parquet(path, SUMMARY_SCHEMA) for path in paths]
    summary = pl.concat(frames, how="diagonal_relaxed")
    ordered = list(SUMMARY_SCHEMA) + [c for c in summary.columns if c not in SUMMARY_SCHEMA]
    return summary.select(ordered).sort(
        "scenario", "policy", "agent_scenario", "seed", nulls_last=True
    )


def split_generalisation(summary: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(rows of heuristics and of agents on their own scenario, rows of agents deployed on
    another scenario than the one they were trained on)."""
    moved = pl.col("agent_scenario").is_not_null() & (
        pl.col("agent_scenario") != pl.col("scenario")
    )
    return summary.filter(~moved), summary.filter(moved)


def mean_ci(values: np.ndarray) -> tuple[float, float]:
    """Mean and the half-width of its Student-t 95% confidence interval (0 for one value)."""
    values = np.asarray(values, dtype=float)
    mean = float(values.mean())
    if values.size < 2:
        return mean, 0.0
    half = stats.t.ppf(0.975, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size)
    return mean, float(half)


def aggregate(summary: pl.DataFrame, by: Sequence[str] = ("scenario", "policy")) -> pl.DataFrame:
    """Per group of `by` (scenario and policy): seeds, and mean and 95% CI half-width of every
    metric."""
    rows = []
    for keys, group in summary.group_by(list(by), maintain_order=True):
        row: dict[str, Any] = dict(zip(by, keys, strict=True)) | {"seeds": group.height}
        for metric in METRICS:
            row[metric], row[f"{metric}_ci95"] = mean_ci(group[metric].to_numpy())
        rows.append(row)
    return pl.DataFrame(rows).sort(*by)


def heuristics(policies: Sequence[str]) -> list[str]:
    """The online heuristics among `policies` (not learned, not the offline bound or random)."""
    return [p for p in policies if p not in catalog.learned() + _references()]


def _references() -> tuple[str, ...]:
    """The references of the comparison, not competitors: the offline bounds and the floor."""
    return catalog.offline() + catalog.floors()


def _offline() -> str:
    """The offline bound the learned policies are measured against (the catalog's one)."""
    (bound,) = catalog.offline()
    return bound


def paired_ratio(
    ours: np.ndarray, theirs: np.ndarray, rng: np.random.Generator
) -> tuple[float, float, float]:
    """mean(ours) / mean(theirs) and its paired bootstrap 95% interval: both means recomputed on
    the same resamples of the seeds (element i of both arrays is the same trace)."""
    ours, theirs = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    ratio = float(ours.mean() / theirs.mean()) if theirs.mean() > 0 else math.nan
    resample = rng.integers(0, len(ours), size=(BOOTSTRAP_SAMPLES, len(ours)))
    num, den = ours[resample].mean(axis=1), theirs[resample].mean(axis=1)
    ratios = np.divide(num, den, out=np.full_like(num, np.nan), where=den > 0)
    if not np.isfinite(ratios).any():
        return ratio, math.nan, math.nan
    low, high = np.nanpercentile(ratios, [2.5, 97.5])
    return ratio, float(low), float(high)


def ratio_to_best_heuristic(
    summary: pl.DataFrame, metric: str = "sla_rate", seed: int = 0
) -> pl.DataFrame:
    """For each scenario and learned policy: its mean `metric` / the best heuristic's, with CI,
    and / the offline bound's (`offline_ratio`, where ga_offline ran; null elsewhere).

    The best heuristic is the one with the highest mean on that scenario. The interval is a
    paired bootstrap over the evaluation seeds (both means recomputed on the same resample).
    """
    rng = np.random.default_rng(seed)
    rows = []
    for (scenario,), group in summary.group_by(["scenario"], maintain_order=True):
        policies = group["policy"].unique().to_list()
        candidates = heuristics(policies)
        if not candidates:
            continue
        table = group.pivot(on="policy", index="seed", values=metric).sort("seed")
        best = max(candidates, key=lambda p: float(table[p].mean()))
        for learned in (p for p in catalog.learned() if p in policies):
            ours, theirs = table[learned].to_numpy(), table[best].to_numpy()
            ratio, low, high = paired_ratio(ours, theirs, rng)
            offline = (None, None, None)
            if _offline() in policies:
                offline = paired_ratio(ours, table[_offline()].to_numpy(), rng)
            rows.append(
                {
                    "scenario": scenario,
                    "policy": learned,
                    "best_heuristic": best,
                    f"{metric}": float(ours.mean()),
                    f"best_{metric}": float(theirs.mean()),
                    "ratio": ratio,
                    "ratio_ci_low": low,
                    "ratio_ci_high": high,
                    "offline_ratio": offline[0],
                    "offline_ci_low": offline[1],
                    "offline_ci_high": offline[2],
                }
            )
    return pl.DataFrame(rows)


def shortfalls(ratios: pl.DataFrame, offline_share: float = OFFLINE_SHARE) -> list[str]:
    """Plain sentences for where a learned policy falls short: the best heuristic's mean is
    higher, or it reaches less than `offline_share` of the offline bound."""
    lines = []
    for row in ratios.iter_rows(named=True):
        if row["ratio"] < 1:
            lines.append(
                f"On {row['scenario']}, {row['best_heuristic']} beats {row['policy']}: "
                f"{row['best_sla_rate']:.4f} against {row['sla_rate']:.4f} "
                f"(ratio {row['ratio']:.4f} "
                f"[{row['ratio_ci_low']:.3f}, {row['ratio_ci_high']:.3f}])."
            )
        if row["offline_ratio"] is not None and row["offline_ratio"] < offline_share:
            lines.append(
                f"On {row['scenario']}, {row['policy']} reaches {row['offline_ratio']:.0%} "
                f"[{row['offline_ci_low']:.0%}, {row['offline_ci_high']:.0%}] of {_offline()}'s "
                f"SLA rate, below the {offline_share:.0%} aimed at."
            )
    return lines


def resizing_roles() -> tuple[str, str, str]:
    """(the learned policy that cuts layers, the same agent without cuts, the policy that cuts by
    search), from the catalog: relmas_resize, relmas, gacer."""
    agent = next(p for p in catalog.learned() if p in catalog.resizing())
    regulator = next(p for p in catalog.resizing() if p not in catalog.learned())
    return agent, catalog.entry(agent).base, regulator


def resizing_table(summary: pl.DataFrame, seed: int = 0) -> pl.DataFrame:
    """Per scenario where both learned policies ran: relmas_resize's mean SLA rate and ANTT beside
    relmas's and gacer's, and its SLA ratio to each (paired bootstrap 95% interval): where letting
    the agent cut layers pays off, and how it compares with the regulator built for cutting."""
    rng = np.random.default_rng(seed)
    roles = resizing_roles()
    rows = []
    for (scenario,), group in summary.group_by(["scenario"], maintain_order=True):
        if not set(roles[:2]) <= set(group["policy"]):
            continue
        sla = group.pivot(on="policy", index="seed", values="sla_rate").sort("seed")
        antt = group.pivot(on="policy", index="seed", values="antt")
        row: dict[str, Any] = {"scenario": scenario}
        for policy in roles:
            present = policy in sla.columns
            row[f"{policy}_sla_rate"] = float(sla[policy].mean()) if present else math.nan
            row[f"{policy}_antt"] = float(antt[policy].mean()) if present else math.nan
        ours = sla[roles[0]].to_numpy()
        for policy in roles[1:]:
            ratio = (math.nan,) * 3
            if policy in sla.columns:
                ratio = paired_ratio(ours, sla[policy].to_numpy(), rng)
            row |= dict(
                zip(
                    (f"ratio_{policy}", f"ratio_{policy}_ci_low", f"ratio_{policy}_ci_high"),
                    ratio,
                    strict=True,
                )
            )
        rows.append(row)
    return pl.DataFrame(rows)


def resizing_verdicts(table: pl.DataFrame) -> list[str]:
    """One sentence per scenario: resizing pays (interval above 1), costs (below 1) or makes no
    measurable difference, for relmas_resize against relmas."""
    agent, base, _ = resizing_roles()
    lines = []
    for row in table.iter_rows(named=True):
        low, high = row[f"ratio_{base}_ci_low"], row[f"ratio_{base}_ci_high"]
        verdict = (
            "pays off" if low > 1 else "costs SLA" if high < 1 else "makes no measurable difference"
        )
        lines.append(
            f"On {row['scenario']}, letting the agent cut layers {verdict}: {agent} "
            f"{row[f'{agent}_sla_rate']:.4f} against {base} {row[f'{base}_sla_rate']:.4f} "
            f"({_ratio_text(row, base)}), ANTT {row[f'{agent}_antt']:.2f} against "
            f"{row[f'{base}_antt']:.2f}."
        )
    return lines


BEST = "best"  # the column of the scenario's best heuristic beside the named baselines


def generalisation_table(summary: pl.DataFrame, seed: int = 0) -> pl.DataFrame:
    """Per learned policy deployed with another scenario's agent: its mean SLA rate (95% CI), that
    of the scenario's own agent, and its ratio to FCFS, SJF and the scenario's best heuristic
    (`ratio_<ref>`, paired bootstrap 95% interval `ratio_<ref>_ci_low/high`; NaN if not evaluated).

    `summary` holds the generalisation rows and the scenario's own rows (same seeds, same traces).
    """
    rng = np.random.default_rng(seed)
    own, moved = split_generalisation(summary)
    rows = []
    for (agent, scenario, policy), group in moved.group_by(
        ["agent_scenario", "scenario", "policy"], maintain_order=True
    ):
        base = own.filter(pl.col("scenario") == scenario)
        table = (
            base.pivot(on="policy", index="seed", values="sla_rate")
            .join(group.select("seed", moved_sla=pl.col("sla_rate")), on="seed")
            .sort("seed")
        )
        candidates = heuristics(base["policy"].unique().to_list())
        best = max(candidates, key=lambda p: float(table[p].mean())) if candidates else None
        mean, half = mean_ci(table["moved_sla"].to_numpy())
        row: dict[str, Any] = {
            "agent_scenario": agent,
            "scenario": scenario,
            "policy": policy,
            "seeds": table.height,
            "sla_rate": mean,
            "sla_rate_ci95": half,
            "own_agent_sla_rate": float(table[policy].mean()) if policy in table else math.nan,
            "best_heuristic": best,
        }
        baselines = catalog.named_baselines()
        for ref, column in zip((*baselines, BEST), (*baselines, best), strict=True):
            if column in table.columns:
                ratio = paired_ratio(table["moved_sla"].to_numpy(), table[column].to_numpy(), rng)
            else:
                ratio = (math.nan, math.nan, math.nan)
            for suffix, value in zip(("", "_ci_low", "_ci_high"), ratio, strict=True):
                row[f"ratio_{ref}{suffix}"] = value
        rows.append(row)
    return pl.DataFrame(rows)


def tenant_sla(results: Mapping[tuple[str, str, int], pl.DataFrame]) -> pl.DataFrame:
    """SLA rate per scenario, policy and tenant, pooled over seeds, from per-job results."""
    frames = [
        jobs.select("tenant", "met").with_columns(
            scenario=pl.lit(scenario), policy=pl.lit(policy), seed=pl.lit(seed)
        )
        for (scenario, policy, seed), jobs in results.items()
    ]
    return (
        pl.concat(frames)
        .group_by("scenario", "policy", "tenant")
        .agg(sla_rate=pl.col("met").mean(), jobs=pl.len())
        .sort("scenario", "policy", "tenant")
    )


# ------------------------------------------------------------------------------------ figures


def _policy_order(policies: Sequence[str]) -> list[str]:
    """Heuristics first, then the references, then the learned policies (drawn last, on top)."""
    present = set(policies)
    ordered = sorted(heuristics(list(present)))
    ordered += [p for p in _references() + catalog.learned() if p in present]
    return ordered


def plot_metric_by_scenario(aggregated: pl.DataFrame, metric: str, label: str) -> plt.Figure:
    """Grouped bars: one group per scenario, one bar per policy, 95% CI whiskers."""
    scenarios = aggregated["scenario"].unique(maintain_order=True).to_list()
    policies = _policy_order(aggregated["policy"].unique().to_list())
    width = 0.8 / len(policies)
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(scenarios)), 4.5))
    cmap = plt.get_cmap("tab20")
    for i, policy in enumerate(policies):
        rows = aggregated.filter(pl.col("policy") == policy)
        values = dict(zip(rows["scenario"], rows[metric], strict=True))
        errors = dict(zip(rows["scenario"], rows[f"{metric}_ci95"], strict=True))
        x = np.arange(len(scenarios)) + (i - (len(policies) - 1) / 2) * width
        ax.bar(
            x,
            [values.get(s, np.nan) for s in scenarios],
            width,
            yerr=[errors.get(s, 0.0) for s in scenarios],
            label=policy,
            color=cmap(i % cmap.N),
            edgecolor="black" if policy in catalog.learned() else "none",
            capsize=2,
        )
    ax.set_xticks(np.arange(len(scenarios)), scenarios, rotation=15)
    ax.set_ylabel(label)
    ax.legend(
        ncol=min(len(policies), 7),
        fontsize="small",
        loc="upper center",
        bbox_to_anchor=(0.5, -0.18),
    )
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def plot_tenant_sla(tenants: pl.DataFrame, scenario: str) -> plt.Figure:
    """SLA rate per tenant (bars) for every policy on one scenario."""
    rows = tenants.filter(pl.col("scenario") == scenario)
    names = rows["tenant"].unique(maintain_order=True).to_list()
    policies = _policy_order(rows["policy"].unique().to_list())
    width = 0.8 / len(policies)
    fig, ax = plt.subplots(figsize=(8, 4))
    cmap = plt.get_cmap("tab20")
    for i, policy in enumerate(policies):
        part = rows.filter(pl.col("policy") == policy)
        values = dict(zip(part["tenant"], part["sla_rate"], strict=True))
        x = np.arange(len(names)) + (i - (len(policies) - 1) / 2) * width
        ax.bar(x, [values.get(t, np.nan) for t in names], width, label=policy, color=cmap(i))
    ax.set_xticks(np.arange(len(names)), names)
    ax.set_ylabel("SLA rate")
    ax.set_title(f"{scenario}: SLA rate per tenant")
    ax.legend(fontsize="small", ncol=2)
    fig.tight_layout()
    return fig


SWEEP_AXES = {
    "load": ("offered load (x the system's capacity)", "linear"),
    "dram_gbps": ("shared off-chip bandwidth, GB/s", "log"),
}


def plot_sweep(
    aggregated: pl.DataFrame, title: str, parameter: str, trained_at: float | None
) -> plt.Figure:
    """SLA rate against the swept value, one line per policy with its 95% CI band; a dotted line
    where the learned policies' agent was trained (the base scenario's own value)."""
    policies = _policy_order(aggregated["policy"].unique().to_list())
    label, scale = SWEEP_AXES[parameter]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    cmap = plt.get_cmap("tab20")
    for i, policy in enumerate(policies):
        rows = aggregated.filter(pl.col("policy") == policy).sort("value")
        x, mean, half = (rows[c].to_numpy() for c in ("value", "sla_rate", "sla_rate_ci95"))
        learned = policy in catalog.learned()
        color = "black" if learned else cmap(i % cmap.N)
        ax.plot(
            x,
            mean,
            marker="o",
            label=policy,
            color=color,
            linewidth=2.5 if learned else 1.2,
            zorder=3 if learned else 2,
        )
        ax.fill_between(x, mean - half, mean + half, color=color, alpha=0.15)
    if trained_at is not None:
        ax.axvline(trained_at, color="grey", linestyle=":", label="agent trained here")
    if scale == "log":
        ax.set_xscale("log", base=2)
        values = sorted(aggregated["value"].unique())
        ax.set_xticks(values, [f"{v:g}" for v in values])
    ax.set_xlabel(label)
    ax.set_ylabel("SLA rate (mean, 95% CI)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.legend(fontsize="small", ncol=2, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def plot_learning_curves(
    curves: Mapping[str, pl.DataFrame], best_heuristics: Mapping[str, tuple[str, float]]
) -> plt.Figure:
    """Validation SLA rate against training step, one panel per agent (`curves` by title), with
    the best heuristic's SLA rate on the same validation traces dashed (`best_heuristics`)."""
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
        ax.plot(points["step"], points["value"], marker="o", markersize=3, label="agent")
        name, rate = best_heuristics[title]
        ax.axhline(rate, color="black", linestyle="--", linewidth=1, label=f"{name} (best heur.)")
        ax.set_title(title, fontsize="medium")
        ax.set_xlabel("training step (decisions)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small", loc="lower right")
    axes[0, 0].set_ylim(max(0.0, min(shown) - 0.05), min(1.02, max(shown) + 0.05))
    for ax in axes[:, 0]:
        ax.set_ylabel("validation SLA rate")
    for ax in list(axes.flat)[len(titles) :]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def heuristic_ranking(config: Mapping[str, Any], aggregated: pl.DataFrame) -> pl.DataFrame:
    """Per scenario: its load, bandwidth and arrival process, and the heuristics ranked by SLA rate.

    This is the table that shows how the ranking of the heuristics moves with the operating point.
    """

    rows = []
    for scenario, spec in config["scenarios"].items():
        part = aggregated.filter(
            (pl.col("scenario") == scenario)
            & pl.col("policy").is_in(heuristics(aggregated["policy"]))
        ).sort("sla_rate", descending=True)
        if part.is_empty():
            continue
        gbps = Study(config).system(scenario).dram_gbps
        rows.append(
            {
                "scenario": scenario,
                "arrival": spec["arrival"]["process"],
                "load": spec["arrival"].get("load"),
                "dram_gbps": "unlimited" if gbps is None else f"{gbps:g}",
                "ranking (SLA rate)": ", ".join(
                    f"{p} {v:.3f}" for p, v in zip(part["policy"], part["sla_rate"], strict=True)
                ),
                "spread": float(part["sla_rate"].max() - part["sla_rate"].min()),
            }
        )
    return pl.DataFrame(rows)


def markdown_table(frame: pl.DataFrame, digits: int = 3) -> str:
    """A GitHub-flavoured Markdown table of `frame` (floats rounded to `digits`)."""

    def cell(value: Any) -> str:
        if isinstance(value, float):
            return "nan" if math.isnan(value) else f"{value:.{digits}g}"
        return str(value)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + " --- |" * frame.width]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.iter_rows()]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ the report


def write_report(
    config: Mapping[str, Any],
    source: str,
    eval_dir: Path,
    costs_dir: Path,
    workloads_dir: Path,
    out_dir: Path,
    *,
    sweeps_dir: Path | None = None,
    agents_dir: Path | None = None,
) -> dict[str, Any]:
    """Write summary.parquet, sweeps.parquet, the figures and report.md into `out_dir`; return
    what was made.

    Reads `{eval_dir}/{scenario}/{policy}/seed{n}[.summary].parquet` for the configured scenarios,
    policies and evaluation seeds, `{eval_dir}/{scenario}/{policy}/from-{agent}/...` for the
    generalisation runs, `{sweeps_dir}/{sweep}/{value}.parquet` for the sweeps and
    `{agents_dir}/{scenario}/{policy}/curve.parquet` (+ agent.json) for every evaluated agent.
    Returns the paths of the figures and tables, for MLflow.
    """
    from relmas.io import atomic_path, write_parquet

    scenarios = list(config["scenarios"])
    seeds = list(config["evaluation"]["seeds"])
    runs = [(s, p, n) for s, p in evaluation_runs(config) for n in seeds]
    base = {run: evaluation_file(eval_dir, *run) for run in runs}
    moved = [
        summary_of(evaluation_file(eval_dir, scenario, policy, seed, agent))
        for agent, scenario, policy in generalisation_runs(config, source)
        for seed in seeds
    ]
    summary = collect_summaries([summary_of(path) for path in base.values()] + moved)
    results = {run: pl.read_parquet(path) for run, path in base.items()}
    figures_dir = out_dir / "figures"
    figures_dir.mkdir(parents=True, exist_ok=True)
    write_parquet(summary, out_dir / "summary.parquet")
    tables = [out_dir / "summary.parquet"]

    own, _ = split_generalisation(summary)
    aggregated = aggregate(own)
    ratios = ratio_to_best_heuristic(own)
    generalisation = generalisation_table(summary)
    resizing = resizing_table(own)
    tenants = tenant_sla(results)
    figures: dict[str, Path] = {}

    def save(fig: plt.Figure, name: str) -> None:
        path = figures_dir / f"{name}.png"
        with atomic_path(path, suffix=".png") as tmp:
            fig.savefig(tmp, format="png", dpi=120)
        plt.close(fig)
        figures[name] = path

    save(plot_metric_by_scenario(aggregated, "sla_rate", "SLA rate (mean, 95% CI)"), "sla_rate")
    for metric, label in (
        ("energy_j", "energy per trace, J"),
        ("utilization", "mean accelerator utilisation"),
        ("antt", "ANTT (lower is better)"),
        ("stp", "STP (higher is better)"),
    ):
        save(plot_metric_by_scenario(aggregated, metric, label), metric)
    for scenario in scenarios:
        save(plot_tenant_sla(tenants, scenario), f"tenants_{scenario}")
    sweeps = collect_sweeps(config, sweeps_dir or ResultPaths.of(config).sweeps_dir)
    if sweeps.height:
        write_parquet(sweeps, out_dir / "sweeps.parquet")
        tables.append(out_dir / "sweeps.parquet")
        for name, spec in config["sweeps"].items():
            points = aggregate(sweeps.filter(pl.col("sweep") == name), by=("value", "policy"))
            title = f"{name}: {spec['scenario']}, every policy but {', '.join(catalog.offline())}"
            trained_at = (
                _base_value(config, spec)
                if set(catalog.learned()) & set(points["policy"])
                else None
            )
            save(plot_sweep(points, title, spec["parameter"], trained_at), f"sweep_{name}")
    learning = _learning(config, agents_dir or ResultPaths.of(config).agents_dir)
    if learning:
        best = {title: agent["best_heuristic"] for title, agent in learning.items()}
        curves = {title: agent["curve"] for title, agent in learning.items()}
        save(plot_learning_curves(curves, best), "learning_curves")
    figures.update(_cost_figures(config, costs_dir, figures_dir))
    figures["gantt"] = _sample_gantt(
        config, source, scenarios[0], seeds[0], aggregated, workloads_dir, costs_dir, figures_dir
    )

    sections = _markdown(config, aggregated, ratios, tenants, figures, out_dir)
    sections += _generalisation_markdown(config, generalisation)
    sections += _resizing_markdown(resizing, learning)
    sections += _sweeps_markdown(config, sweeps, figures, out_dir)
    sections += _learning_markdown(learning, figures, out_dir)
    with atomic_path(out_dir / "report.md", suffix=".md") as tmp:
        tmp.write_text("\n".join(sections) + "\n", encoding="utf-8")
    tables.append(out_dir / "report.md")
    return {"figures": figures, "tables": tables, "ratios": ratios}


def collect_sweeps(config: Mapping[str, Any], sweeps_dir: Path) -> pl.DataFrame:
    """The rows of every configured sweep point (`relmas sweep` outputs) in one frame; empty
    without sweeps."""
    from relmas.sweep import SWEEP_COLUMNS

    schema = dict(SUMMARY_SCHEMA) | SWEEP_COLUMNS
    frames = [
        read_parquet(sweep_file(sweeps_dir, name, point_label(value)), schema)
        for name, value in sweep_points(config)
    ]
    if not frames:
        return pl.DataFrame(schema=schema)
    return pl.concat(frames, how="diagonal_relaxed").sort("sweep", "value", "policy", "seed")


def _base_value(config: Mapping[str, Any], spec: Mapping[str, Any]) -> float | None:
    """The swept parameter's value in the base scenario itself (where its agent was trained)."""
    if spec["parameter"] == "load":
        return config["scenarios"][spec["scenario"]]["arrival"].get("load")
    return Study(config).system(spec["scenario"]).dram_gbps


def _learning(config: Mapping[str, Any], agents_dir: Path) -> dict[str, dict[str, Any]]:
    """Per evaluated agent (titled by scenario, and policy if not relmas): its learning curve,
    its best validation SLA rate, the best heuristic on its validation traces and its teacher."""
    from relmas.rl.agent import read_agent_info
    from relmas.rl.curve import CURVE, read_curve

    learning = {}
    for scenario, policy in evaluation_runs(config):
        if policy not in catalog.learned():
            continue
        directory = agent_dir(agents_dir, scenario, policy)
        info = read_agent_info(directory)
        heuristic = max(info.heuristics_validation, key=info.heuristics_validation.__getitem__)
        title = scenario if catalog.entry(policy).base is None else f"{scenario} ({policy})"
        learning[title] = {
            "curve": read_curve(directory / CURVE),
            "best_heuristic": (heuristic, info.heuristics_validation[heuristic]),
            "validation": info.validation.get("sla_rate", math.nan),
            "teacher": info.teacher,
            "teacher_validation": info.rules_validation.get(info.teacher or "", math.nan),
            "share_split": info.validation.get("share_split"),
        }
    return learning


def _cost_figures(config: Mapping[str, Any], costs_dir: Path, figures_dir: Path) -> dict[str, Path]:
    from relmas.figures.costs import plot_layer_costs
    from relmas.io import atomic_path
    from relmas.schemas import COST_SCHEMA

    tables = {
        name: read_parquet(cost_table(costs_dir, name), COST_SCHEMA)
        for name in config["accelerators"]
    }
    made = {}
    for model in config["models"]:
        fig = plot_layer_costs(tables, model)
        path = figures_dir / f"costs_{model}.png"
        with atomic_path(path, suffix=".png") as tmp:
            fig.savefig(tmp, format="png", dpi=110)
        plt.close(fig)
        made[f"costs_{model}"] = path
    return made


def _sample_gantt(
    config: Mapping[str, Any],
    source: str,
    scenario: str,
    seed: int,
    aggregated: pl.DataFrame,
    workloads_dir: Path,
    costs_dir: Path,
    figures_dir: Path,
    jobs: int = 24,
) -> Path:
    """Gantt chart of the first `jobs` jobs of one evaluation trace under the best online policy."""
    from relmas.evaluate import simulate
    from relmas.figures.gantt import plot_gantt
    from relmas.io import atomic_path
    from relmas.schemas import JOB_SCHEMA

    rows = aggregated.filter(
        (pl.col("scenario") == scenario) & pl.col("policy").is_in(heuristics(aggregated["policy"]))
    )
    policy = rows.sort("sla_rate", descending=True)["policy"][0]
    study = Study(config, source)
    system, tables = study.system(scenario), study.costs(scenario, costs_dir)
    trace = read_parquet(workload_file(workloads_dir, scenario, seed), JOB_SCHEMA)
    result = simulate(system, trace.sort("arrival_s").head(jobs), tables, policy, record=True)
    path = figures_dir / "gantt.png"
    with atomic_path(path, suffix=".png") as tmp:
        plot_gantt(result, tmp, title=f"{scenario}, seed {seed}: {policy}")
    return path


def _markdown(
    config: Mapping[str, Any],
    aggregated: pl.DataFrame,
    ratios: pl.DataFrame,
    tenants: pl.DataFrame,
    figures: Mapping[str, Path],
    out_dir: Path,
) -> list[str]:
    def image(name: str, caption: str) -> str:
        return _image(figures, out_dir, name, caption)

    seeds = config["evaluation"]["seeds"]
    sla = aggregated.select(
        "scenario",
        "policy",
        pl.format("{} ± {}", pl.col("sla_rate").round(3), pl.col("sla_rate_ci95").round(3)),
    ).pivot(on="policy", index="scenario", values="sla_rate")
    parts = [
        f"# relmas report — experiment `{config['experiment']}`\n",
        f"Evaluation seeds {seeds} (traces no agent was trained or validated on). Means over seeds "
        "with Student-t 95% confidence intervals.\n",
        "## SLA satisfaction rate\n",
        markdown_table(sla),
        "",
        image("sla_rate", "SLA rate per scenario and policy (mean, 95% CI)"),
    ]
    ranking = heuristic_ranking(config, aggregated)
    winners: dict[str, list[str]] = {}
    for row in ranking.iter_rows(named=True):
        winners.setdefault(row["ranking (SLA rate)"].split()[0], []).append(row["scenario"])
    parts += [
        "## How the heuristics rank\n",
        "Heuristics ordered by mean SLA rate on each scenario, beside its operating point "
        "(arrival process, load, bandwidth); `spread` = best − worst. Best heuristic: "
        + "; ".join(f"**{p}** on {', '.join(names)}" for p, names in winners.items())
        + ". A ranking that moves with load and bandwidth is why no single rule suffices.\n",
        markdown_table(ranking),
        "",
    ]
    if ratios.height:
        parts += [
            "## Learned policies against the best heuristic\n",
            "Ratio of mean SLA rates, paired bootstrap 95% interval over seeds. A ratio below 1 "
            "means the heuristic wins on that scenario; `offline_ratio`: against "
            f"{_offline()}, the "
            "offline bound, where it ran.\n",
            markdown_table(ratios),
            "",
            "\n".join(f"- {line}" for line in shortfalls(ratios))
            or "The learned policies reach at least the best heuristic's mean everywhere.",
            "",
        ]
    else:
        parts += [
            "## Learned policies\n",
            "No learned policy is in `evaluation.policies` of this configuration.\n",
        ]
    for metric, caption in (
        ("antt", "ANTT: mean turnaround / isolated latency (lower is better)"),
        ("stp", "STP: system throughput, sum of isolated / turnaround (higher is better)"),
        ("energy_j", "Energy per trace (dynamic + static + scheduler), J"),
        ("utilization", "Mean accelerator utilisation"),
    ):
        parts += [f"## {caption}\n", image(metric, caption)]
    table = aggregated.select(
        "scenario", "policy", "fairness", "decision_us", "energy_j", "utilization"
    )
    parts += ["## Fairness, decision time, energy, utilisation\n", markdown_table(table), ""]
    parts += ["## Per-tenant SLA rate\n"]
    parts += [image(f"tenants_{s}", f"{s}: SLA rate per tenant") for s in config["scenarios"]]
    parts += ["## A sample schedule\n", image("gantt", "Gantt chart of the first jobs of a trace")]
    parts += ["## Cost model: per-layer latency and energy\n"]
    parts += [image(f"costs_{m}", f"{m}: per-layer costs") for m in config["models"]]
    return parts


def _image(figures: Mapping[str, Path], out_dir: Path, name: str, caption: str) -> str:
    return f"![{caption}]({figures[name].relative_to(out_dir)})\n\n*{caption}*\n"


def _ratio_text(row: Mapping[str, Any], ref: str) -> str:
    ratio = row[f"ratio_{ref}"]
    if math.isnan(ratio):
        return "n/a"
    return f"{ratio:.3f} [{row[f'ratio_{ref}_ci_low']:.3f}, {row[f'ratio_{ref}_ci_high']:.3f}]"


def _generalisation_markdown(config: Mapping[str, Any], table: pl.DataFrame) -> list[str]:
    if not config["evaluation"]["generalisation"]:
        return []
    parts = [
        "## Generalisation\n",
        "Learned policies deployed with the agent trained on *another* scenario of the same "
        "accelerator instances (`evaluation.generalisation`; in summary.parquet: `agent_scenario` "
        "≠ `scenario`). SLA rate: mean ± 95% CI over the evaluation seeds; `own agent`: the "
        "scenario's own agent; ratios: mean SLA rate over that of FCFS, SJF and the scenario's "
        "best heuristic, paired bootstrap 95% interval.\n",
    ]
    if not table.height:
        return parts + ["No learned policy is in `evaluation.policies` of this configuration.\n"]
    rows = [
        {
            "agent from → scenario": f"{row['agent_scenario']} → {row['scenario']}",
            "policy": row["policy"],
            "SLA rate": f"{row['sla_rate']:.3f} ± {row['sla_rate_ci95']:.3f}",
            "own agent": f"{row['own_agent_sla_rate']:.3f}",
            **{f"vs {name}": _ratio_text(row, name) for name in catalog.named_baselines()},
            "best heuristic": str(row["best_heuristic"]),
            "vs best heuristic": _ratio_text(row, BEST),
        }
        for row in table.iter_rows(named=True)
    ]
    return parts + [markdown_table(pl.DataFrame(rows)), ""]


def _resizing_markdown(table: pl.DataFrame, learning: Mapping[str, Mapping[str, Any]]) -> list[str]:
    if not table.height:
        return []
    resize, base, regulator = resizing_roles()
    rows = []
    for row in table.iter_rows(named=True):
        agent = learning.get(f"{row['scenario']} ({resize})", {})
        cuts = agent.get("share_split")
        rows.append(
            {
                "scenario": row["scenario"],
                base: f"{row[f'{base}_sla_rate']:.3f}",
                resize: f"{row[f'{resize}_sla_rate']:.3f}",
                f"vs {base}": _ratio_text(row, base),
                regulator: f"{row[f'{regulator}_sla_rate']:.3f}",
                f"vs {regulator}": _ratio_text(row, regulator),
                f"ANTT {base} / resize / {regulator}": "{:.2f} / {:.2f} / {:.2f}".format(
                    row[f"{base}_antt"], row[f"{resize}_antt"], row[f"{regulator}_antt"]
                ),
                "teacher": str(agent.get("teacher")),
                "cuts (validation)": "n/a" if cuts is None else f"{cuts:.1%}",
            }
        )
    return [
        f"## Operator resizing: {resize} against {base} and {regulator}\n",
        f"`{resize}` is RELMAS whose action also chooses how to cut the chosen layer (split "
        f"variants of the piece tables, `resizing:`); `{regulator}` cuts and reorders by search. "
        "SLA rates are means over the evaluation seeds, ratios paired bootstrap 95% intervals; "
        "`teacher`: the warm-start rule chosen on validation (`_cut`: cuts onto spare "
        "instances); `cuts`: share of its decisions on validation that cut a layer.\n",
        markdown_table(pl.DataFrame(rows)),
        "",
        "\n".join(f"- {line}" for line in resizing_verdicts(table)),
        "",
    ]


def _sweeps_markdown(
    config: Mapping[str, Any], sweeps: pl.DataFrame, figures: Mapping[str, Path], out_dir: Path
) -> list[str]:
    if not sweeps.height:
        return []
    parts = [
        "## SLA rate vs load and bandwidth\n",
        "Each sweep varies one parameter of one scenario (`sweeps:` in the config); every point "
        "runs every policy but ga_offline on the evaluation seeds, the learned ones with the "
        "agent trained on the base scenario (dotted line; not retrained per point). A load point "
        "runs the same jobs with rescaled arrival times, a bandwidth point the base scenario's "
        "traces on a system with that bandwidth. Mean with 95% CI band; rows in sweeps.parquet.\n",
    ]
    for name, spec in config["sweeps"].items():
        caption = f"{name}: SLA rate on {spec['scenario']} against {spec['parameter']}"
        points = aggregate(sweeps.filter(pl.col("sweep") == name), by=("value", "policy"))
        table = points.select(
            "policy",
            pl.col("value").map_elements(lambda v: f"{v:g}", return_dtype=pl.String),
            pl.format("{} ± {}", pl.col("sla_rate").round(3), pl.col("sla_rate_ci95").round(3)),
        ).pivot(on="value", index="policy", values="sla_rate")
        parts += [_image(figures, out_dir, f"sweep_{name}", caption), markdown_table(table), ""]
    return parts


def _learning_markdown(
    learning: Mapping[str, Mapping[str, Any]], figures: Mapping[str, Path], out_dir: Path
) -> list[str]:
    if not learning:
        return []
    rows = [
        {
            "agent": title,
            "best validation SLA": agent["validation"],
            "best heuristic on validation": "{} {:.3f}".format(*agent["best_heuristic"]),
            "warm-start teacher": str(agent["teacher"]),
            "teacher on validation": agent["teacher_validation"],
        }
        for title, agent in learning.items()
    ]
    caption = "Validation SLA rate during training; dashed: the best heuristic on the same traces"
    return [
        "## RELMAS learning curves\n",
        "SLA rate of the greedy agent on the validation traces (`training.validation_seeds`) "
        "against training steps, from each agent's curve.parquet; best.pt is the highest point. "
        "The teacher is the slot rule (docs/relmas.md) with the best SLA rate on validation: "
        "`_patient` waits for a busy faster instance rather than start on a slow one, `_gated` "
        "also holds back starts that would oversubscribe the DRAM bandwidth, `_cut` cuts layers "
        "onto spare instances.\n",
        _image(figures, out_dir, "learning_curves", caption),
        markdown_table(pl.DataFrame(rows)),
        "",
    ]
