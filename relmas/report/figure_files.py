"""The report's figures: drawn by relmas.figures, saved here under the report's figures/."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
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
    plot_best_by_kind,
    plot_learning_curves,
    plot_metric_by_scenario,
    plot_service_groups,
    plot_sweep,
    plot_tenant_sla,
)
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
    shown: Mapping[str, Sequence[str]],
    ceilings: Mapping[str, float],
    gantt: GanttRuns,
    dirs: tuple[Path, Path, Path],
) -> dict[str, Path]:
    """Draw and save every figure of the report (relmas.figures.contents lists them); return
    their paths by name. `groups`: the service groups pooled over the seeds (one figure per
    scenario with any); `shown`, `ceilings`: per scenario the policies the SLA rate figure draws
    (stats.shown_policies) and the mean proven ceiling; `gantt`: the runs and jobs whose
    schedules are drawn; `dirs`: the workloads, costs and agents directories."""
    from relmas.io import atomic_path

    # figures_dir is made by atomic_path, which records it: a failed report removes it too
    figures: dict[str, Path] = {}

    def save(fig: plt.Figure, name: str) -> None:
        path = figures_dir / f"{name}.png"
        with atomic_path(path, suffix=".png") as tmp:
            fig.savefig(tmp, format="png", dpi=120)
        plt.close(fig)
        figures[name] = path

    for scenario in groups["scenario"].unique(maintain_order=True):
        save(plot_service_groups(groups, scenario), f"service_{scenario}")
    save(plot_best_by_kind(aggregated, shown, ceilings), "sla_rate")
    for metric, label in METRIC_FIGURES.items():
        save(plot_metric_by_scenario(aggregated, metric, label), metric)
    for scenario in config["scenarios"]:
        save(plot_tenant_sla(tenants, scenario), f"tenants_{scenario}")
    if sweeps.height:
        _sweep_figures(config, sweeps, save)
    if learning:
        best = {title: agent["reference"] for title, agent in learning.items()}
        curves = {title: agent["curve"] for title, agent in learning.items()}
        policies = {title: agent["policy"] for title, agent in learning.items()}
        save(plot_learning_curves(curves, best, policies), "learning_curves")
    workloads_dir, costs_dir, agents_dir = dirs
    figures.update(_cost_figures(config, costs_dir, figures_dir))
    figures["gantt"] = _gantt(
        config, source, gantt, workloads_dir, costs_dir, agents_dir, figures_dir
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
    from relmas.sim.costs import read_cost_file

    tables = {name: read_cost_file(cost_table(costs_dir, name)) for name in config["accelerators"]}
    made = {}
    for model in config["models"]:
        fig = plot_layer_costs(tables, model)
        path = figures_dir / f"costs_{model}.png"
        with atomic_path(path, suffix=".png") as tmp:
            fig.savefig(tmp, format="png", dpi=110)
        plt.close(fig)
        made[f"costs_{model}"] = path
    return made


def shown_agent() -> str:
    """The learned policy of the Gantt chart: RELMAS itself (the learned policy extending none)."""
    return next(p for p in catalog.learned() if catalog.entry(p).base is None)


@dataclass(frozen=True)
class GanttRuns:
    """What the Gantt chart draws: `policies` (the first is the left panel; `best` is labelled
    the best baseline), each with the placement it was evaluated with (`placements`: a rule
    baseline's, from its summary rows), on one evaluation trace, the span of `job_ids` (jobs of
    that trace, by arrival), titled `title`."""

    scenario: str
    seed: int
    policies: tuple[str, ...]
    best: str | None
    job_ids: tuple[int, ...]
    title: str
    placements: Mapping[str, str] = field(default_factory=dict)


def _gantt(
    config: Mapping[str, Any],
    source: str,
    runs: GanttRuns,
    workloads_dir: Path,
    costs_dir: Path,
    agents_dir: Path,
    figures_dir: Path,
) -> Path:
    """Gantt charts of `runs.policies` side by side, run on their whole trace and drawn from the
    first arrival of `runs.job_ids` to the last of their deadlines: the jobs before and among
    them share the instances, so only the whole run shows the schedule the per-job results
    counted."""
    from relmas.evaluate import load_job_trace, simulate
    from relmas.figures.gantt import plot_schedules
    from relmas.policies import make_policy
    from relmas.study import policy_options

    study = Study(config, source)
    system, tables = study.system(runs.scenario), study.costs(runs.scenario, costs_dir)
    trace = load_job_trace(workload_file(workloads_dir, runs.scenario, runs.seed), tables)
    results = {}
    for policy in runs.policies:
        options = policy_options(config, policy)
        if policy in runs.placements:  # the schedule the per-job results counted
            options["placement"] = runs.placements[policy]
        if policy in catalog.learned():
            options["agent"] = str(agent_dir(agents_dir, runs.scenario, policy))
        chosen = make_policy(policy, seed=runs.seed, **options)
        label = f"{policy} (best baseline)" if policy == runs.best else policy
        results[label] = simulate(system, trace, tables, chosen, record=True)
    jobs = trace.filter(pl.col("job_id").is_in(runs.job_ids))
    window = (float(jobs["arrival_s"].min()), float(jobs["deadline_s"].max()))
    path = figures_dir / "gantt.png"
    plot_schedules(
        results,
        path,
        colours={label: palette.colour(result.policy) for label, result in results.items()},
        suptitle=runs.title,
        window=window,
        marked=runs.job_ids,
    )
    return path
