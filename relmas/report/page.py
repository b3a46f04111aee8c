"""report.md and report.html: the sections in order, written atomically; `write_report`, the
`relmas report` command's work from reading the results to writing the page."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl

from relmas.ceiling.rows import with_kinds
from relmas.figures import palette
from relmas.paths import ResultPaths, evaluation_file, groups_of, summary_of
from relmas.report.ceiling import (
    ceiling_markdown,
    ceiling_table,
    mean_ceilings,
    read_bounds,
    reference_rows,
)
from relmas.report.figure_files import GanttRuns, draw_figures, shown_agent
from relmas.report.headline import headline_markdown, headline_table, placement_of
from relmas.report.load import collect_summaries, collect_sweeps, read_learning, read_validation
from relmas.report.markdown import image_markdown, markdown_table, mean_column
from relmas.report.service import (
    pooled_groups,
    read_groups,
    service_headline,
    service_markdown,
    service_table,
    target_scenarios_of,
    targets_bound_table,
)
from relmas.report.stats import (
    GANTT_JOBS,
    RUN_KEYS,
    aggregate,
    best_baselines,
    differing_window,
    generalisation_table,
    in_report_order,
    resizing_table,
    shown_policies,
    split_generalisation,
    tenant_sla,
)
from relmas.report.tables import (
    generalisation_markdown,
    heuristic_ranking,
    learning_markdown,
    resizing_markdown,
    sweeps_markdown,
)
from relmas.study import evaluation_runs, generalisation_runs

HTML = "report.html"  # report.md as one self-contained page (figures inlined)
SLA_CAPTION = (
    "SLA rate per scenario: the best policy of each kind (heuristic, rule, target-aware, search), "
    "chosen on the validation traces as the best baseline is, the offline bound and every learned "
    "policy, each a mean with its 95% interval; the proven ceiling dashed. Every policy is in the "
    "table above and in summary.parquet"
)


def gantt_runs(
    results: Mapping[tuple[str, str, int], pl.DataFrame],
    baselines: Mapping[str, tuple[str, float]],
    summary: pl.DataFrame,
    scenarios: Sequence[str],
    seeds: Sequence[int],
) -> tuple[GanttRuns, str]:
    """What the Gantt chart shows, and its caption: RELMAS beside its best baseline in the window
    where their deadlines met differ most (stats.differing_window); without RELMAS beside a best
    baseline on any scenario, the first jobs of the first trace under the best baseline (or the
    first policy) evaluated there. Each policy drawn runs with its placement in `summary`."""
    runs, caption = _gantt_window(results, baselines, scenarios, seeds)
    rows = summary.filter(pl.col("scenario") == runs.scenario)
    placements = {p: placement_of(rows, p) for p in runs.policies}
    return replace(runs, placements={p: v for p, v in placements.items() if v}), caption


def _gantt_window(
    results: Mapping[tuple[str, str, int], pl.DataFrame],
    baselines: Mapping[str, tuple[str, float]],
    scenarios: Sequence[str],
    seeds: Sequence[int],
) -> tuple[GanttRuns, str]:
    """gantt_runs' window and caption, its policies without their placements."""
    agent = shown_agent()
    pairs = {
        scenario: (agent, baselines[scenario][0])
        for scenario in scenarios
        if scenario in baselines
        and {(scenario, p, seeds[0]) for p in (agent, baselines[scenario][0])} <= set(results)
    }
    window = differing_window(results, pairs, seeds)
    if window is None:
        scenario, seed = scenarios[0], seeds[0]
        evaluated = [p for s, p, n in results if (s, n) == (scenario, seed)]
        best = baselines.get(scenario, (None, None))[0]
        policy = best if best in evaluated else evaluated[0]
        jobs = results[(scenario, policy, seed)].sort("arrival_s", "job_id")["job_id"]
        ids = tuple(jobs.head(GANTT_JOBS).to_list())
        title = f"{policy} on {scenario}, seed {seed}: the first {len(ids)} jobs"
        caption = f"{title} (no learned policy beside a best baseline to compare)"
        return GanttRuns(scenario, seed, (policy,), best, ids, title), caption
    jobs = f"jobs {window.start + 1}–{window.start + len(window.job_ids)} by arrival"
    met = (
        f"{window.agent} met {window.agent_met}, {window.baseline} {window.baseline_met} of "
        f"their {len(window.job_ids)} deadlines"
    )
    title = f"{window.scenario}, seed {window.seed}, {jobs}: {met}"
    caption = (
        f"{window.agent} beside {window.baseline}, the best baseline, on {window.scenario}, seed "
        f"{window.seed}, {jobs} ({met}): of every {len(window.job_ids)} consecutive jobs of "
        "every evaluation trace, the window whose deadlines met differ most between the two "
        "(per-job results); both run the whole trace, and every task running from the first "
        "arrival to the last deadline of these jobs is drawn"
    )
    if window.agent_met == window.baseline_met:
        caption = (
            f"{window.agent} beside {window.baseline}, the best baseline, on {window.scenario}, "
            f"seed {window.seed}, {jobs}: no window of {len(window.job_ids)} consecutive jobs of "
            "any evaluation trace differs in deadlines met between the two (per-job results), so "
            f"the first is drawn ({met})"
        )
    runs = GanttRuns(
        window.scenario,
        window.seed,
        (window.agent, window.baseline),
        window.baseline,
        window.job_ids,
        title,
    )
    return runs, caption


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
    bounds_dir: Path | None = None,
) -> dict[str, Any]:
    """Write summary.parquet, sweeps.parquet, the figures and report.md into `out_dir`; return
    what was made.

    Reads `{eval_dir}/{scenario}/{policy}/seed{n}[.summary].parquet` for the configured scenarios,
    policies and evaluation seeds, `{eval_dir}/{scenario}/{policy}/from-{agent}/...` for the
    generalisation runs, `{validation_dir}/{scenario}.parquet` (the baselines on the validation
    traces: the best baseline's choice), `{sweeps_dir}/{sweep}/{value}.parquet` for the sweeps and
    `{agents_dir}/{scenario}/{policy}/curve.parquet` (+ agent.json) for every evaluated agent and
    `{bounds_dir}/{scenario}/seed{n}.parquet` (`relmas bound`: the ceiling of each trace), and on
    the scenarios whose runs carry service targets `{eval_dir}/{scenario}/{policy}/seed{n}.groups
    .parquet` (each service group's achieved rate and target).
    Returns the paths of the figures and tables, for MLflow.
    """
    from relmas.io import read_parquet, write_parquet
    from relmas.sim.result import JobResults

    scenarios = list(config["scenarios"])
    seeds = list(config["evaluation"]["seeds"])
    runs = [(s, p, n) for s, p in evaluation_runs(config) for n in seeds]
    base = {run: evaluation_file(eval_dir, *run) for run in runs}
    moved = [
        summary_of(evaluation_file(eval_dir, scenario, policy, seed, agent))
        for agent, scenario, policy in generalisation_runs(config, source)
        for seed in seeds
    ]
    paths = ResultPaths.of(config)
    agents_dir = agents_dir or paths.agents_dir
    # every summary is read and checked before anything is written; every frame read is put in
    # one order (in_report_order), so that the same rows give the same report in any order
    summary = in_report_order(collect_summaries([summary_of(p) for p in base.values()] + moved))
    validation = in_report_order(read_validation(validation_dir or paths.validation_dir, scenarios))
    sweeps = collect_sweeps(config, sweeps_dir or paths.sweeps_dir)
    sweeps = in_report_order(sweeps, "sweep", "value", *RUN_KEYS)
    bounds_dir = bounds_dir or paths.bounds_dir
    bounds = in_report_order(read_bounds(bounds_dir, scenarios, seeds))
    references = reference_rows(summary, bounds, bounds_dir)
    verdicts = targets_bound_table(summary, bounds, bounds_dir)
    results = {r: in_report_order(read_parquet(p, JobResults), "job_id") for r, p in base.items()}
    targeted = target_scenarios_of(summary)
    groups = read_groups({r: groups_of(p) for r, p in base.items() if r[0] in targeted}, summary)
    groups = in_report_order(groups, *RUN_KEYS, "group")
    write_parquet(with_kinds(summary, references), out_dir / "summary.parquet")
    tables = [out_dir / "summary.parquet"]

    own, _ = split_generalisation(summary)
    aggregated = aggregate(own)
    baselines = best_baselines(validation)
    headline = headline_table(own, baselines)
    generalisation = generalisation_table(summary, baselines)
    resizing = resizing_table(own)
    tenants = tenant_sla(results)
    if sweeps.height:
        write_parquet(sweeps, out_dir / "sweeps.parquet")
        tables.append(out_dir / "sweeps.parquet")
    learning = read_learning(config, agents_dir)
    gantt, gantt_caption = gantt_runs(results, baselines, summary, scenarios, seeds)
    figures = draw_figures(
        config,
        source,
        out_dir / "figures",
        aggregated=aggregated,
        tenants=tenants,
        groups=pooled_groups(groups),
        sweeps=sweeps,
        learning=learning,
        shown=shown_policies(aggregated, validation, scenarios),
        ceilings=mean_ceilings(references),
        gantt=gantt,
        dirs=(workloads_dir, costs_dir, agents_dir),
    )

    service = service_table(own, baselines)
    targets = service_markdown(
        service, service_headline(service, validation), verdicts, figures, out_dir
    )
    ceiling = ceiling_markdown(ceiling_table(summary, references, baselines, bounds), bounds)
    top = headline_markdown(config, headline, targeted) + targets + ceiling
    sections = _markdown(config, aggregated, top, tenants, figures, out_dir, gantt_caption)
    sections += generalisation_markdown(config, generalisation)
    sections += resizing_markdown(resizing, learning)
    sections += sweeps_markdown(config, sweeps, figures, out_dir)
    sections += learning_markdown(learning, figures, out_dir)
    tables += _write_pages("\n".join(sections) + "\n", out_dir, config["experiment"])
    return {"figures": figures, "tables": tables, "headline": headline}


def _markdown(
    config: Mapping[str, Any],
    aggregated: pl.DataFrame,
    top: list[str],
    tenants: pl.DataFrame,
    figures: Mapping[str, Path],
    out_dir: Path,
    gantt: str,
) -> list[str]:
    """report.md from its title to the cost model; `top`: the sections after the title (the
    headline, service levels, the ceiling); `gantt`: what the Gantt chart shows."""

    def image(name: str, caption: str) -> str:
        return image_markdown(figures, out_dir, name, caption)

    seeds = config["evaluation"]["seeds"]
    sla = aggregated.select("scenario", "policy", sla_rate=mean_column("sla_rate")).pivot(
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
        *top,
        "## SLA satisfaction rate\n",
        markdown_table(sla),
        "",
        image("sla_rate", SLA_CAPTION),
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
        image("gantt", gantt),
    ]
    parts += ["## Cost model: per-layer latency and energy\n"]
    parts += [image(f"costs_{m}", f"{m}: per-layer costs") for m in config["models"]]
    return parts


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
