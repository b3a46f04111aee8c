"""Evaluation results -> the study's report: summary.parquet, statistics, figures, report.md.

Statistics are over evaluation seeds (traces the agents never saw): means with Student-t 95%
confidence intervals, and for each scenario the ratio of every learned policy's mean SLA rate to the
best heuristic's, with a paired bootstrap 95% interval (seeds resampled together, since all
policies ran on the same traces). Nothing is tuned or filtered: every policy evaluated is shown.
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

from relmas.io import read_parquet  # noqa: E402
from relmas.schemas import SUMMARY_SCHEMA  # noqa: E402

LEARNED = ("relmas", "relmas_resize")
REFERENCES = ("ga_offline", "random")
METRICS = ("sla_rate", "antt", "stp", "fairness", "utilization", "energy_j", "decision_us")
BOOTSTRAP_SAMPLES = 10_000


def collect_summaries(paths: Sequence[str | Path]) -> pl.DataFrame:
    """All one-row summaries in one frame (contract columns first), sorted for stable output."""
    frames = [read_parquet(path, SUMMARY_SCHEMA) for path in paths]
    summary = pl.concat(frames, how="diagonal_relaxed")
    ordered = list(SUMMARY_SCHEMA) + [c for c in summary.columns if c not in SUMMARY_SCHEMA]
    return summary.select(ordered).sort("scenario", "policy", "seed")


def mean_ci(values: np.ndarray) -> tuple[float, float]:
    """Mean and the half-width of its Student-t 95% confidence interval (0 for one value)."""
    values = np.asarray(values, dtype=float)
    mean = float(values.mean())
    if values.size < 2:
        return mean, 0.0
    half = stats.t.ppf(0.975, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size)
    return mean, float(half)


def aggregate(summary: pl.DataFrame) -> pl.DataFrame:
    """Per scenario and policy: seeds, and mean and 95% CI half-width of every metric."""
    rows = []
    for (scenario, policy), group in summary.group_by(["scenario", "policy"], maintain_order=True):
        row: dict[str, Any] = {"scenario": scenario, "policy": policy, "seeds": group.height}
        for metric in METRICS:
            row[metric], row[f"{metric}_ci95"] = mean_ci(group[metric].to_numpy())
        rows.append(row)
    return pl.DataFrame(rows).sort("scenario", "policy")


def heuristics(policies: Sequence[str]) -> list[str]:
    """The online heuristics among `policies` (not learned, not the offline bound or random)."""
    return [p for p in policies if p not in LEARNED + REFERENCES]


def ratio_to_best_heuristic(
    summary: pl.DataFrame, metric: str = "sla_rate", seed: int = 0
) -> pl.DataFrame:
    """For each scenario and learned policy: its mean `metric` / the best heuristic's, with CI.

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
        for learned in (p for p in LEARNED if p in policies):
            ours, theirs = table[learned].to_numpy(), table[best].to_numpy()
            resample = rng.integers(0, len(ours), size=(BOOTSTRAP_SAMPLES, len(ours)))
            num, den = ours[resample].mean(axis=1), theirs[resample].mean(axis=1)
            ratios = np.divide(num, den, out=np.full_like(num, np.nan), where=den > 0)
            low, high = (
                np.nanpercentile(ratios, [2.5, 97.5])
                if np.isfinite(ratios).any()
                else (
                    math.nan,
                    math.nan,
                )
            )
            rows.append(
                {
                    "scenario": scenario,
                    "policy": learned,
                    "best_heuristic": best,
                    f"{metric}": float(ours.mean()),
                    f"best_{metric}": float(theirs.mean()),
                    "ratio": float(ours.mean() / theirs.mean()) if theirs.mean() > 0 else math.nan,
                    "ratio_ci_low": float(low),
                    "ratio_ci_high": float(high),
                }
            )
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
    ordered += [p for p in REFERENCES + LEARNED if p in present]
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
            edgecolor="black" if policy in LEARNED else "none",
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


def heuristic_ranking(config: Mapping[str, Any], aggregated: pl.DataFrame) -> pl.DataFrame:
    """Per scenario: its load, bandwidth and arrival process, and the heuristics ranked by SLA rate.

    This is the table that shows how the ranking of the heuristics moves with the operating point.
    """
    from relmas.workload import scenario_system

    rows = []
    for scenario, spec in config["scenarios"].items():
        part = aggregated.filter(
            (pl.col("scenario") == scenario)
            & pl.col("policy").is_in(heuristics(aggregated["policy"]))
        ).sort("sla_rate", descending=True)
        if part.is_empty():
            continue
        system = scenario_system(config, scenario)
        gbps = system.dram_gbps
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
) -> dict[str, Any]:
    """Write summary.parquet, the figures and report.md into `out_dir`; return what was made.

    Reads `{eval_dir}/{scenario}/{policy}/seed{n}[.summary].parquet` for the configured scenarios,
    policies and evaluation seeds. Returns the paths of the figures and headline metrics for MLflow.
    """
    from relmas.evaluate import evaluation_runs
    from relmas.io import atomic_path, write_parquet

    scenarios = list(config["scenarios"])
    seeds = list(config["evaluation"]["seeds"])
    runs = [(s, p, n) for s, p in evaluation_runs(config) for n in seeds]
    base = {run: eval_dir / run[0] / run[1] / f"seed{run[2]}" for run in runs}
    summary = collect_summaries([f"{path}.summary.parquet" for path in base.values()])
    results = {run: pl.read_parquet(f"{path}.parquet") for run, path in base.items()}
    figures_dir = out_dir / "figures"
    figures_dir.mkdir(parents=True, exist_ok=True)
    write_parquet(summary, out_dir / "summary.parquet")

    aggregated = aggregate(summary)
    ratios = ratio_to_best_heuristic(summary)
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
    figures.update(_cost_figures(config, costs_dir, figures_dir))
    figures["gantt"] = _sample_gantt(
        config, source, scenarios[0], seeds[0], aggregated, workloads_dir, costs_dir, figures_dir
    )

    text = _markdown(config, aggregated, ratios, tenants, figures, out_dir)
    with atomic_path(out_dir / "report.md", suffix=".md") as tmp:
        tmp.write_text(text, encoding="utf-8")
    headline = {
        f"{row['scenario']}.{row['policy']}.sla_rate": row["sla_rate"]
        for row in aggregated.iter_rows(named=True)
    }
    return {"figures": figures, "metrics": headline, "ratios": ratios}


def _cost_figures(config: Mapping[str, Any], costs_dir: Path, figures_dir: Path) -> dict[str, Path]:
    from relmas.figures.costs import plot_layer_costs
    from relmas.io import atomic_path
    from relmas.schemas import COST_SCHEMA

    tables = {
        name: read_parquet(costs_dir / f"{name}.parquet", COST_SCHEMA)
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
    from relmas.sim.costs import load_costs
    from relmas.workload import scenario_system

    rows = aggregated.filter(
        (pl.col("scenario") == scenario) & pl.col("policy").is_in(heuristics(aggregated["policy"]))
    )
    policy = rows.sort("sla_rate", descending=True)["policy"][0]
    system = scenario_system(config, scenario, source)
    tables = load_costs(costs_dir, system, source, models=tuple(config["models"]))
    trace = read_parquet(workloads_dir / scenario / f"seed{seed}.parquet", JOB_SCHEMA)
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
) -> str:
    def image(name: str, caption: str) -> str:
        return f"![{caption}]({figures[name].relative_to(out_dir)})\n\n*{caption}*\n"

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
            "means the heuristic wins on that scenario.\n",
            markdown_table(ratios),
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
    return "\n".join(parts) + "\n"
