"""The report's figures: drawn by relmas.figures, saved here under the report's figures/."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402

from relmas import catalog  # noqa: E402
from relmas.ceiling.rows import policy_rows  # noqa: E402
from relmas.figures import palette  # noqa: E402
from relmas.figures.contents import METRIC_FIGURES  # noqa: E402
from relmas.figures.results import (  # noqa: E402
    plot_learning_curves,
    plot_metric_by_scenario,
    plot_service_groups,
    plot_sweep,
    plot_tenant_sla,
)
from relmas.io import read_parquet  # noqa: E402
from relmas.paths import agent_dir, cost_table, workload_file  # noqa: E402
from relmas.report.stats import aggregate, ceiling_means  # noqa: E402
from relmas.study import Study  # noqa: E402


def draw_figures(
    config: Mapping[str, Any],
    source: str,
    figures_dir: Path,
    *,
    aggregated: pl.DataFrame,
    tenants: pl.DataFrame,
    groups: pl.DataFrame,
    sweeps: pl.DataFrame,
    learning: Mapping[str, Mapping[str, Any]],
    gantt: tuple[int, str | None],
    dirs: tuple[Path, Path, Path],
) -> dict[str, Path]:
    """Draw and save every figure of the report (relmas.figures.contents lists them); return
    their paths by name. `groups`: the service groups pooled over the seeds (one figure per
    scenario with any); `gantt`: the evaluation seed and the best baseline of the first
    scenario, whose schedule is drawn; `dirs`: the workloads, costs and agents directories."""
    from relmas.io import atomic_path

    figures_dir.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Path] = {}

    def save(fig: plt.Figure, name: str) -> None:
        path = figures_dir / f"{name}.png"
        with atomic_path(path, suffix=".png") as tmp:
            fig.savefig(tmp, format="png", dpi=120)
        plt.close(fig)
        figures[name] = path

    for scenario in groups["scenario"].unique(maintain_order=True):
        save(plot_service_groups(groups, scenario), f"service_{scenario}")
    save(plot_metric_by_scenario(aggregated, "sla_rate", "SLA rate"), "sla_rate")
    for metric, label in METRIC_FIGURES.items():
        save(plot_metric_by_scenario(aggregated, metric, label), metric)
    for scenario in config["scenarios"]:
        save(plot_tenant_sla(tenants, scenario), f"tenants_{scenario}")
    if sweeps.height:
        _sweep_figures(config, sweeps, save)
    if learning:
        best = {title: agent["best_heuristic"] for title, agent in learning.items()}
        curves = {title: agent["curve"] for title, agent in learning.items()}
        policies = {title: agent["policy"] for title, agent in learning.items()}
        save(plot_learning_curves(curves, best, policies), "learning_curves")
    workloads_dir, costs_dir, agents_dir = dirs
    figures.update(_cost_figures(config, costs_dir, figures_dir))
    seed, best_baseline = gantt
    figures["gantt"] = _sample_gantt(
        config,
        source,
        next(iter(config["scenarios"])),
        seed,
        aggregated,
        best_baseline,
        workloads_dir,
        costs_dir,
        agents_dir,
        figures_dir,
    )
    return figures


def _sweep_figures(
    config: Mapping[str, Any], sweeps: pl.DataFrame, save: Callable[[plt.Figure, str], None]
) -> None:
    """One figure per configured sweep: every policy's SLA rate against the swept value, and the
    proven ceiling's."""
    for name, spec in config["sweeps"].items():
        rows = sweeps.filter(pl.col("sweep") == name)
        points = aggregate(policy_rows(rows), by=("value", "policy"))
        title = f"{name}: {spec['scenario']}, every policy but {', '.join(catalog.offline())}"
        trained_at = (
            _base_value(config, spec) if set(catalog.learned()) & set(points["policy"]) else None
        )
        figure = plot_sweep(points, title, spec["parameter"], trained_at, ceiling_means(rows))
        save(figure, f"sweep_{name}")


def _base_value(config: Mapping[str, Any], spec: Mapping[str, Any]) -> float | None:
    """The swept parameter's value in the base scenario itself (where its agent was trained)."""
    if spec["parameter"] == "load":
        return config["scenarios"][spec["scenario"]]["arrival"].get("load")
    return Study(config).system(spec["scenario"]).dram_gbps


def _cost_figures(config: Mapping[str, Any], costs_dir: Path, figures_dir: Path) -> dict[str, Path]:
    from relmas.figures.costs import plot_layer_costs
    from relmas.io import atomic_path
    from relmas.schemas import CostTable

    tables = {
        name: read_parquet(cost_table(costs_dir, name), CostTable)
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
    from relmas.evaluate import load_job_trace, simulate
    from relmas.figures.gantt import plot_schedules
    from relmas.policies import make_policy
    from relmas.study import policy_options

    evaluated = aggregated.filter(pl.col("scenario") == scenario)["policy"].to_list()
    agent = _shown_agent()
    # without either, the first policy evaluated (e.g. the offline bound alone)
    shown = [p for p in (agent, best) if p in evaluated] or evaluated[:1]
    study = Study(config, source)
    system, tables = study.system(scenario), study.costs(scenario, costs_dir)
    trace = load_job_trace(workload_file(workloads_dir, scenario, seed), tables)
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
