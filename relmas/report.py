"""Evaluation results -> the study's report: summary.parquet, statistics, figures, report.md.

Statistics are over evaluation seeds (traces the agents never saw): means with Student-t 95%
confidence intervals (none with one seed: n = 1 is said, not drawn as an interval). The
headline: for each scenario the ratio of every learned policy's mean SLA
rate to the best baseline's — the online non-learned policy with the best SLA rate on the
validation traces (`relmas validate`), so that evaluation only measures it — with a paired
bootstrap 95% interval (seeds resampled together, since all policies ran on the same traces), and
beside it the former ratio to the best heuristic picked on the evaluation traces. Nothing is tuned
or filtered: every policy evaluated is shown.

Besides the per-scenario evaluation: generalisation runs (a learned policy deployed with the agent
of another scenario: rows whose `agent_scenario` is not their scenario), sweeps (SLA rate against
load and bandwidth, `relmas.sweep`) and the agents' learning curves (`curve.parquet`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
from scipy import stats  # noqa: E402

from relmas import catalog  # noqa: E402
from relmas.figures import palette  # noqa: E402
from relmas.figures.contents import METRIC_FIGURES  # noqa: E402
from relmas.figures.results import (  # noqa: E402
    plot_learning_curves,
    plot_metric_by_scenario,
    plot_sweep,
    plot_tenant_sla,
)
from relmas.io import read_parquet  # noqa: E402
from relmas.paths import (  # noqa: E402
    ResultPaths,
    agent_dir,
    cost_table,
    evaluation_file,
    summary_of,
    sweep_file,
    validation_file,
    workload_file,
)
from relmas.schemas import SUMMARY_SCHEMA  # noqa: E402
from relmas.study import (  # noqa: E402
    Study,
    baseline_policies,
    evaluation_runs,
    generalisation_runs,
    point_label,
    sweep_points,
)

OFFLINE_SHARE = 0.9  # share of the offline bound an online policy should reach (issue 5)
METRICS = ("sla_rate", "antt", "stp", "fairness", "utilization", "energy_j", "decision_us")
BOOTSTRAP_SAMPLES = 10_000
HTML = "report.html"  # report.md as one self-contained page (figures inlined)


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
    """Mean and the half-width of its Student-t 95% confidence interval (NaN for one value: there
    is no interval, and the report draws and prints none)."""
    values = np.asarray(values, dtype=float)
    mean = float(values.mean())
    if values.size < 2:
        return mean, math.nan
    half = stats.t.ppf(0.975, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size)
    return mean, float(half)


def aggregate(summary: pl.DataFrame, by: Sequence[str] = ("scenario", "policy")) -> pl.DataFrame:
    """Per group of `by` (scenario and policy): seeds, and mean and 95% CI half-width of every
    metric; policies grouped by kind (relmas.figures.palette), as every table shows them."""
    rows = []
    for keys, group in summary.group_by(list(by), maintain_order=True):
        row: dict[str, Any] = dict(zip(by, keys, strict=True)) | {"seeds": group.height}
        for metric in METRICS:
            row[metric], row[f"{metric}_ci95"] = mean_ci(group[metric].to_numpy())
        rows.append(row)
    rank = {policy: index for index, policy in enumerate(palette.order(summary["policy"]))}
    others = [key for key in by if key != "policy"]
    return (
        pl.DataFrame(rows)
        .with_columns(_rank=pl.col("policy").replace_strict(rank, return_dtype=pl.Int64))
        .sort(*others, "_rank")
        .drop("_rank")
    )


def mean_text(mean: float, half: float, digits: int = 3) -> str:
    """A mean as a table prints it: with its 95% interval, or alone where there is none (n = 1)."""
    if math.isnan(half):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {half:.{digits}f}"


def _mean_column(metric: str) -> pl.Expr:
    """`metric` of an aggregate as text, with its interval where there is one (mean_text)."""
    return pl.struct(metric, f"{metric}_ci95").map_elements(
        lambda row: mean_text(row[metric], row[f"{metric}_ci95"]), return_dtype=pl.String
    )


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
    if len(ours) < 2:
        return ratio, math.nan, math.nan  # one seed: no interval
    resample = rng.integers(0, len(ours), size=(BOOTSTRAP_SAMPLES, len(ours)))
    num, den = ours[resample].mean(axis=1), theirs[resample].mean(axis=1)
    ratios = np.divide(num, den, out=np.full_like(num, np.nan), where=den > 0)
    if not np.isfinite(ratios).any():
        return ratio, math.nan, math.nan
    low, high = np.nanpercentile(ratios, [2.5, 97.5])
    return ratio, float(low), float(high)


def former_heuristics(policies: Sequence[str]) -> list[str]:
    """The candidates of the report's former comparison among `policies`: the fixed heuristics
    and the search policy, without the rule baselines (nor the floor). Its best is picked after
    the fact, on the evaluation traces; shown beside the headline so both readings stay visible."""
    former = set(catalog.of_kind("heuristic", "search")) - set(catalog.floors())
    return [p for p in policies if p in former]


def read_validation(validation_dir: Path, scenarios: Sequence[str]) -> pl.DataFrame:
    """The baselines' summary rows on each scenario's validation traces (`relmas validate`)."""
    frames = [read_parquet(validation_file(validation_dir, s), SUMMARY_SCHEMA) for s in scenarios]
    return pl.concat([f.select(list(SUMMARY_SCHEMA)) for f in frames])


def best_baselines(validation: pl.DataFrame) -> dict[str, tuple[str, float]]:
    """Per scenario: the online baseline (`catalog.online_baselines()`) with the highest mean SLA
    rate on its validation traces, and that rate. A tie goes to the first in catalog order.

    Chosen on the validation traces, so that the evaluation seeds only measure it: picking the
    best on the evaluation traces themselves favours the baseline by the luck of those traces.
    """
    chosen = {}
    for (scenario,), group in validation.group_by(["scenario"], maintain_order=True):
        means = group.group_by("policy").agg(pl.col("sla_rate").mean())
        rates = dict(zip(means["policy"], means["sla_rate"], strict=True))
        candidates = [p for p in catalog.online_baselines() if p in rates]
        if candidates:
            best = max(candidates, key=rates.__getitem__)  # max keeps the first of equals
            chosen[scenario] = (best, float(rates[best]))
    return chosen


def headline_table(
    summary: pl.DataFrame, baselines: Mapping[str, tuple[str, float]], seed: int = 0
) -> pl.DataFrame:
    """For each scenario and learned policy: its mean SLA rate over the evaluation seeds against
    the scenario's best baseline chosen on validation (`baselines`, from `best_baselines`): the
    ratio of means with a paired bootstrap 95% interval (`ratio`, `ratio_ci_low/high`).

    Beside it, the former comparison: against the best of `former_heuristics`, chosen on the
    evaluation traces (`heuristic_ratio`, ...), and against the offline bound where it ran
    (`offline_ratio`, ...; null elsewhere). `seeds`: the evaluation seeds (n); with one, the
    interval is the point itself and the report prints none.
    """
    rng = np.random.default_rng(seed)
    rows = []
    for (scenario,), group in summary.group_by(["scenario"], maintain_order=True):
        policies = group["policy"].unique().to_list()
        learned = [p for p in catalog.learned() if p in policies]
        former = former_heuristics(policies)
        if not learned or scenario not in baselines:
            continue
        chosen, validation = baselines[scenario]
        table = group.pivot(on="policy", index="seed", values="sla_rate").sort("seed")
        heuristic = max(former, key=lambda p: float(table[p].mean())) if former else None
        offline = _offline() if _offline() in policies else None
        for policy in learned:
            ours = table[policy].to_numpy()
            row: dict[str, Any] = {
                "scenario": scenario,
                "policy": policy,
                "seeds": table.height,
                "sla_rate": float(ours.mean()),
                "best_baseline": chosen,
                "baseline_validation_sla_rate": validation,
                "baseline_sla_rate": float(table[chosen].mean()),
                "best_heuristic": heuristic,
                "heuristic_sla_rate": float(table[heuristic].mean()) if heuristic else None,
            }
            for prefix, reference in (
                ("", chosen),
                ("heuristic_", heuristic),
                ("offline_", offline),
            ):
                ratio = (None, None, None)
                if reference is not None:
                    ratio = paired_ratio(ours, table[reference].to_numpy(), rng)
                columns = (f"{prefix}ratio", f"{prefix}ratio_ci_low", f"{prefix}ratio_ci_high")
                row |= dict(zip(columns, ratio, strict=True))
            rows.append(row)
    return pl.DataFrame(rows)


VERDICTS = ("beats", "ties", "falls short of")  # what `verdict` says


def verdict(row: Mapping[str, Any]) -> str:
    """Whether the learned policy of a headline row beats its best baseline, ties it or falls
    short: by the interval (above 1, below 1, containing 1); with one seed, by the point alone."""
    ratio, low, high = row["ratio"], row["ratio_ci_low"], row["ratio_ci_high"]
    if math.isnan(ratio):  # the baseline met no deadline
        ratio = low = high = math.inf if row["sla_rate"] > 0 else 1.0
    if row["seeds"] < 2:
        low = high = ratio
    return "beats" if low > 1 else "falls short of" if high < 1 else "ties"


def interval(
    ratio: float | None, low: float | None, high: float | None, seeds: int, *, say_n: bool = True
) -> str:
    """A ratio with its 95% interval; with one seed no interval, but the number of seeds (unless
    `say_n` is false: the sentence around it says it)."""
    if ratio is None or math.isnan(ratio):
        return "n/a"
    if seeds < 2:
        return f"{ratio:.3f} (n = {seeds})" if say_n else f"{ratio:.3f}"
    return f"{ratio:.3f} [{low:.3f}, {high:.3f}]"


def headline_ratio(row: Mapping[str, Any], prefix: str, *, say_n: bool = True) -> str:
    """The ratio `{prefix}ratio` of a headline row with its interval (see `interval`)."""
    values = (row[f"{prefix}ratio{end}"] for end in ("", "_ci_low", "_ci_high"))
    return interval(*values, row["seeds"], say_n=say_n)


def headline_sentences(table: pl.DataFrame, offline_share: float = OFFLINE_SHARE) -> list[str]:
    """One plain sentence per scenario and learned policy of the headline table, and one where it
    reaches less than `offline_share` of the offline bound."""
    lines = []
    for row in table.iter_rows(named=True):
        seeds = row["seeds"]
        ratio = headline_ratio(row, "", say_n=False)
        line = (
            f"On {row['scenario']}, the best baseline on validation is {row['best_baseline']} "
            f"(SLA rate {row['baseline_validation_sla_rate']:.3f} on validation, "
            f"{row['baseline_sla_rate']:.3f} on evaluation); {row['policy']} meets "
            f"{row['sla_rate']:.3f} and {verdict(row)} it (ratio {ratio}"
            + ("; one evaluation seed, so no interval)." if seeds < 2 else ", paired 95% CI).")
        )
        if row["best_heuristic"] is not None:
            former = headline_ratio(row, "heuristic_", say_n=False)
            line += (
                f" Against the best former heuristic on evaluation, {row['best_heuristic']} "
                f"({row['heuristic_sla_rate']:.3f}), the ratio is {former}."
            )
        lines.append(line)
        if row["offline_ratio"] is not None and row["offline_ratio"] < offline_share:
            share = f"{row['offline_ratio']:.0%}"
            if seeds >= 2:
                share += f" [{row['offline_ratio_ci_low']:.0%}, {row['offline_ratio_ci_high']:.0%}]"
            lines.append(
                f"On {row['scenario']}, {row['policy']} reaches {share} of {_offline()}'s "
                f"SLA rate, below the {offline_share:.0%} aimed at."
            )
    return lines


def headline_tally(table: pl.DataFrame) -> list[str]:
    """Per learned policy of the headline table, one sentence counting the scenarios where it
    beats, ties or falls short of its best baseline (`verdict`), naming those it beats or falls
    short on: the answer to "does it beat the strongest rule?" before the details."""
    lines = []
    for policy in table["policy"].unique(maintain_order=True):
        rows = table.filter(pl.col("policy") == policy).iter_rows(named=True)
        judged = [(row["scenario"], verdict(row)) for row in rows]
        count = {}
        for v in VERDICTS:
            scenarios = [scenario for scenario, said in judged if said == v]
            named = f" ({', '.join(scenarios)})" if scenarios and v != "ties" else ""
            count[v] = f"{len(scenarios)}{named}"
        lines.append(
            f"{policy} beats its best baseline on {count['beats']} of {len(judged)} scenarios, "
            f"ties it on {count['ties']} and falls short of it on {count['falls short of']}."
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
        row: dict[str, Any] = {"scenario": scenario, "seeds": sla.height}
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


BEST = "best"  # the column of the scenario's best baseline beside the named baselines


def generalisation_table(
    summary: pl.DataFrame, baselines: Mapping[str, tuple[str, float]], seed: int = 0
) -> pl.DataFrame:
    """Per learned policy deployed with another scenario's agent: its mean SLA rate (95% CI), that
    of the scenario's own agent, and its ratio to FCFS, SJF and the scenario's best baseline
    chosen on its validation traces (`baselines`, from `best_baselines`) (`ratio_<ref>`, paired
    bootstrap 95% interval `ratio_<ref>_ci_low/high`; NaN if not evaluated).

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
        best = baselines[scenario][0] if scenario in baselines else None
        mean, half = mean_ci(table["moved_sla"].to_numpy())
        row: dict[str, Any] = {
            "agent_scenario": agent,
            "scenario": scenario,
            "policy": policy,
            "seeds": table.height,
            "sla_rate": mean,
            "sla_rate_ci95": half,
            "own_agent_sla_rate": float(table[policy].mean()) if policy in table else math.nan,
            "best_baseline": best,
        }
        named = catalog.named_baselines()
        for ref, column in zip((*named, BEST), (*named, best), strict=True):
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


def heuristic_ranking(config: Mapping[str, Any], aggregated: pl.DataFrame) -> pl.DataFrame:
    """Per scenario: its load, bandwidth and arrival process, and the online baselines (heuristics,
    rule baselines, search) ranked by SLA rate.

    This is the table that shows how the ranking of the heuristics moves with the operating point.
    """

    rows = []
    for scenario, spec in config["scenarios"].items():
        part = aggregated.filter(
            (pl.col("scenario") == scenario) & pl.col("policy").is_in(catalog.online_baselines())
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
    validation_dir: Path | None = None,
) -> dict[str, Any]:
    """Write summary.parquet, sweeps.parquet, the figures and report.md into `out_dir`; return
    what was made.

    Reads `{eval_dir}/{scenario}/{policy}/seed{n}[.summary].parquet` for the configured scenarios,
    policies and evaluation seeds, `{eval_dir}/{scenario}/{policy}/from-{agent}/...` for the
    generalisation runs, `{validation_dir}/{scenario}.parquet` (the baselines on the validation
    traces: the best baseline's choice), `{sweeps_dir}/{sweep}/{value}.parquet` for the sweeps and
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
    baselines = best_baselines(
        read_validation(validation_dir or ResultPaths.of(config).validation_dir, scenarios)
    )
    headline = headline_table(own, baselines)
    generalisation = generalisation_table(summary, baselines)
    resizing = resizing_table(own)
    tenants = tenant_sla(results)
    figures: dict[str, Path] = {}

    def save(fig: plt.Figure, name: str) -> None:
        path = figures_dir / f"{name}.png"
        with atomic_path(path, suffix=".png") as tmp:
            fig.savefig(tmp, format="png", dpi=120)
        plt.close(fig)
        figures[name] = path

    save(plot_metric_by_scenario(aggregated, "sla_rate", "SLA rate"), "sla_rate")
    for metric, label in METRIC_FIGURES.items():
        save(plot_metric_by_scenario(aggregated, metric, label), metric)
    for scenario in scenarios:
        save(plot_tenant_sla(tenants, scenario), f"tenants_{scenario}")
    sweeps = collect_sweeps(config, sweeps_dir or ResultPaths.of(config).sweeps_dir)
    if sweeps.height:
        write_parquet(sweeps, out_dir / "sweeps.parquet")
        tables.append(out_dir / "sweeps.parquet")
        _sweep_figures(config, sweeps, save)
    learning = _learning(config, agents_dir or ResultPaths.of(config).agents_dir)
    if learning:
        best = {title: agent["best_heuristic"] for title, agent in learning.items()}
        curves = {title: agent["curve"] for title, agent in learning.items()}
        policies = {title: agent["policy"] for title, agent in learning.items()}
        save(plot_learning_curves(curves, best, policies), "learning_curves")
    figures.update(_cost_figures(config, costs_dir, figures_dir))
    figures["gantt"] = _sample_gantt(
        config,
        source,
        scenarios[0],
        seeds[0],
        aggregated,
        baselines.get(scenarios[0], (None, None))[0],
        workloads_dir,
        costs_dir,
        agents_dir or ResultPaths.of(config).agents_dir,
        figures_dir,
    )

    sections = _markdown(config, aggregated, headline, tenants, figures, out_dir)
    sections += _generalisation_markdown(config, generalisation)
    sections += _resizing_markdown(resizing, learning)
    sections += _sweeps_markdown(config, sweeps, figures, out_dir)
    sections += _learning_markdown(learning, figures, out_dir)
    tables += _write_pages("\n".join(sections) + "\n", out_dir, config["experiment"])
    return {"figures": figures, "tables": tables, "headline": headline}


def _sweep_figures(
    config: Mapping[str, Any], sweeps: pl.DataFrame, save: Callable[[plt.Figure, str], None]
) -> None:
    """One figure per configured sweep: every policy's SLA rate against the swept value."""
    for name, spec in config["sweeps"].items():
        points = aggregate(sweeps.filter(pl.col("sweep") == name), by=("value", "policy"))
        title = f"{name}: {spec['scenario']}, every policy but {', '.join(catalog.offline())}"
        trained_at = (
            _base_value(config, spec) if set(catalog.learned()) & set(points["policy"]) else None
        )
        save(plot_sweep(points, title, spec["parameter"], trained_at), f"sweep_{name}")


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
            "policy": policy,
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


def _shown_agent() -> str:
    """The learned policy of the Gantt chart: RELMAS itself (the learned policy extending none)."""
    return next(p for p in catalog.learned() if catalog.entry(p).base is None)


def _sample_gantt(
    config: Mapping[str, Any],
    source: str,
    scenario: str,
    seed: int,
    aggregated: pl.DataFrame,
    best: str | None,
    workloads_dir: Path,
    costs_dir: Path,
    agents_dir: Path,
    figures_dir: Path,
    jobs: int = 24,
) -> Path:
    """Gantt charts of the first `jobs` jobs of one evaluation trace: RELMAS (where it was
    evaluated) beside `best`, the scenario's best baseline chosen on validation, same jobs."""
    from relmas.evaluate import simulate
    from relmas.figures.gantt import plot_schedules
    from relmas.policies import make_policy
    from relmas.schemas import JOB_SCHEMA
    from relmas.study import policy_options

    evaluated = aggregated.filter(pl.col("scenario") == scenario)["policy"].to_list()
    agent = _shown_agent()
    # without either, the first policy evaluated (e.g. the offline bound alone)
    shown = [p for p in (agent, best) if p in evaluated] or evaluated[:1]
    study = Study(config, source)
    system, tables = study.system(scenario), study.costs(scenario, costs_dir)
    trace = read_parquet(workload_file(workloads_dir, scenario, seed), JOB_SCHEMA)
    first = trace.sort("arrival_s").head(jobs)
    results = {}
    for policy in shown:
        options = policy_options(config, policy)
        if policy in catalog.learned():
            options["agent"] = str(agent_dir(agents_dir, scenario, policy))
        chosen = make_policy(policy, seed=seed, **options)
        label = f"{policy} (best baseline)" if policy == best else policy
        results[label] = simulate(system, first, tables, chosen, record=True)
    path = figures_dir / "gantt.png"
    plot_schedules(
        results,
        path,
        colours={label: palette.colour(result.policy) for label, result in results.items()},
        suptitle=f"{scenario}, seed {seed}: the first {jobs} jobs",
    )
    return path


def _markdown(
    config: Mapping[str, Any],
    aggregated: pl.DataFrame,
    headline: pl.DataFrame,
    tenants: pl.DataFrame,
    figures: Mapping[str, Path],
    out_dir: Path,
) -> list[str]:
    def image(name: str, caption: str) -> str:
        return _image(figures, out_dir, name, caption)

    seeds = config["evaluation"]["seeds"]
    sla = aggregated.select("scenario", "policy", sla_rate=_mean_column("sla_rate")).pivot(
        on="policy", index="scenario", values="sla_rate"
    )
    intervals = (
        "Means over seeds with Student-t 95% confidence intervals."
        if len(seeds) > 1
        else "One seed (n = 1): values of that trace, no interval."
    )
    parts = [
        f"# relmas report — experiment `{config['experiment']}`\n",
        f"Evaluation seeds {seeds} (traces no agent was trained or validated on). {intervals} "
        "Policies are grouped by kind: " + ", ".join(g.title for g in palette.GROUPS) + ".\n",
        *_headline_markdown(config, headline),
        "## SLA satisfaction rate\n",
        markdown_table(sla),
        "",
        image("sla_rate", "SLA rate per scenario and policy"),
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
    parts += [
        "## A sample schedule\n",
        image("gantt", "RELMAS beside the best baseline on the first jobs of a trace"),
    ]
    parts += ["## Cost model: per-layer latency and energy\n"]
    parts += [image(f"costs_{m}", f"{m}: per-layer costs") for m in config["models"]]
    return parts


def _headline_markdown(config: Mapping[str, Any], headline: pl.DataFrame) -> list[str]:
    """The report's first section: every learned policy against the best baseline chosen on
    validation, with the former comparison beside it."""
    if not headline.height:
        return [
            "## Learned policies against the best baseline\n",
            "No learned policy (or no online baseline) is in `evaluation.policies` of this "
            "configuration.\n",
        ]
    validation = config["training"]["validation_seeds"]
    rows = [
        {
            "scenario": row["scenario"],
            "policy": row["policy"],
            "n": row["seeds"],
            "SLA rate": f"{row['sla_rate']:.3f}",
            "best baseline (on validation)": row["best_baseline"],
            "its SLA rate: validation / evaluation": (
                f"{row['baseline_validation_sla_rate']:.3f} / {row['baseline_sla_rate']:.3f}"
            ),
            "ratio to the baseline": headline_ratio(row, ""),
            "best former heuristic (on evaluation)": str(row["best_heuristic"]),
            "ratio to the heuristic": headline_ratio(row, "heuristic_"),
            f"ratio to {_offline()}": headline_ratio(row, "offline_"),
        }
        for row in headline.iter_rows(named=True)
    ]
    return [
        "## Learned policies against the best baseline\n",
        "The headline. For each scenario the *best baseline* is, of the evaluated online "
        f"policies that are not learned ({', '.join(baseline_policies(config))}; not the floor "
        f"{', '.join(catalog.floors())}, not the offline {_offline()}), the one with the highest "
        "mean SLA rate on the validation traces (`training.validation_seeds` "
        f"{validation}, the traces the agents are validated on; a tie goes to the first in that "
        "order), then measured on the evaluation seeds. `ratio to the baseline`: mean SLA rate "
        "of the learned policy over the baseline's, with its paired bootstrap 95% interval over "
        "the evaluation seeds (none with one seed; `n`: the number of seeds). Beside it, the "
        "former comparison: the best of the fixed heuristics and search policies (not the rule "
        "baselines), picked after the fact on the evaluation traces as this report did before; "
        f"and {_offline()}, the offline reference, where it ran.\n",
        "\n".join(f"- **{line}**" for line in headline_tally(headline)) + "\n",
        markdown_table(pl.DataFrame(rows)),
        "",
        "\n".join(f"- {line}" for line in headline_sentences(headline)),
        "",
    ]


def _write_pages(text: str, out_dir: Path, title: str) -> list[Path]:
    """report.md and the same as one HTML page (markdown_html); returns both paths."""
    from relmas.io import atomic_path

    with atomic_path(out_dir / "report.md", suffix=".md") as tmp:
        tmp.write_text(text, encoding="utf-8")
    with atomic_path(out_dir / HTML, suffix=".html") as tmp:
        tmp.write_text(markdown_html(text, out_dir, title), encoding="utf-8")
    return [out_dir / "report.md", out_dir / HTML]


def markdown_html(text: str, base: Path, title: str) -> str:
    """report.md as a self-contained HTML page: its tables as HTML tables and its figures inlined
    (data URIs, relative to `base`), for Snakemake's HTML report and the MLflow run."""
    import base64
    import html
    import re

    import markdown

    body = markdown.markdown(text, extensions=["tables"], output_format="html")

    def inline(match: re.Match[str]) -> str:
        data = base64.b64encode((base / html.unescape(match[1])).read_bytes()).decode("ascii")
        return f'src="data:image/png;base64,{data}"'

    body = re.sub(r'src="([^"]+\.png)"', inline, body)
    style = (
        "body{font-family:sans-serif;max-width:70em;margin:auto}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px}"
        "img{max-width:100%}"
    )
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{style}</style></head><body>\n{body}\n</body></html>\n"
    )


def _image(figures: Mapping[str, Path], out_dir: Path, name: str, caption: str) -> str:
    return f"![{caption}]({figures[name].relative_to(out_dir)})\n\n*{caption}*\n"


def _ratio_text(row: Mapping[str, Any], ref: str) -> str:
    return interval(
        row[f"ratio_{ref}"], row[f"ratio_{ref}_ci_low"], row[f"ratio_{ref}_ci_high"], row["seeds"]
    )


def _generalisation_markdown(config: Mapping[str, Any], table: pl.DataFrame) -> list[str]:
    if not config["evaluation"]["generalisation"]:
        return []
    parts = [
        "## Generalisation\n",
        "Learned policies deployed with the agent trained on *another* scenario of the same "
        "accelerator instances (`evaluation.generalisation`; in summary.parquet: `agent_scenario` "
        "≠ `scenario`). SLA rate: mean ± 95% CI over the evaluation seeds; `own agent`: the "
        "scenario's own agent; ratios: mean SLA rate over that of FCFS, SJF and the scenario's "
        "best baseline chosen on its validation traces (as in the headline), paired bootstrap 95% "
        "interval.\n",
    ]
    if not table.height:
        return parts + ["No learned policy is in `evaluation.policies` of this configuration.\n"]
    rows = [
        {
            "agent from → scenario": f"{row['agent_scenario']} → {row['scenario']}",
            "policy": row["policy"],
            "SLA rate": mean_text(row["sla_rate"], row["sla_rate_ci95"]),
            "own agent": f"{row['own_agent_sla_rate']:.3f}",
            **{f"vs {name}": _ratio_text(row, name) for name in catalog.named_baselines()},
            "best baseline (validation)": str(row["best_baseline"]),
            "vs best baseline": _ratio_text(row, BEST),
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
            sla_rate=_mean_column("sla_rate"),
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
