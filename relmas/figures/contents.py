"""The figures the report draws for a configuration: names, report categories and captions.

One list, read by the report (which draws exactly these) and by the Snakemake rule (which declares
each as an output for `snakemake --report`), so that a figure is never drawn without being declared
or declared without being drawn. Light (no matplotlib): the DAG is planned with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from relmas import catalog
from relmas.study import evaluation_runs, target_scenarios

# Jobs drawn in a Gantt chart (an evaluate run's, the report's window): a chart of a whole trace of
# 1,000 jobs takes minutes to draw and shows nothing.
GANTT_JOBS = 24

# metrics drawn as bars by scenario beside the SLA rate: name -> axis label
METRIC_FIGURES: dict[str, str] = {
    "antt": "ANTT (lower is better)",
    "stp": "STP (higher is better)",
    "energy_j": "energy per trace, J",
    "utilization": "mean accelerator utilisation",
}


@dataclass(frozen=True)
class ReportFigure:
    """`figures/{name}.png` of the report, shown under `category` with the caption
    `workflow/report/{caption}.rst` in Snakemake's HTML report."""

    name: str
    category: str
    caption: str
    labels: dict[str, str] = field(default_factory=dict)


def report_figures(config: Mapping[str, Any]) -> list[ReportFigure]:
    """Every figure of the report of `config`, in the order report.md shows them."""
    figures = [
        ReportFigure(f"service_{scenario}", "Service levels", "service", {"scenario": scenario})
        for scenario in target_scenarios(config)
    ]
    figures.append(ReportFigure("sla_rate", "Evaluation", "sla_rate", {"figure": "SLA rate"}))
    figures += [
        ReportFigure(metric, "Evaluation", "metric", {"figure": label})
        for metric, label in METRIC_FIGURES.items()
    ]
    figures += [
        ReportFigure(f"tenants_{scenario}", "Tenants", "tenants", {"scenario": scenario})
        for scenario in config["scenarios"]
    ]
    figures.append(ReportFigure("gantt", "Schedule", "gantt", {"figure": "RELMAS and a baseline"}))
    figures += [
        ReportFigure(
            f"sweep_{sweep}",
            "Sweeps",
            "sweep",
            {"sweep": sweep, "parameter": spec["parameter"], "scenario": spec["scenario"]},
        )
        for sweep, spec in config["sweeps"].items()
    ]
    if any(policy in catalog.learned() for _, policy in evaluation_runs(config)):
        figures.append(
            ReportFigure("learning_curves", "Training", "learning_curves", {"figure": "curves"})
        )
    figures += [
        ReportFigure(f"costs_{model}", "Cost model", "costs", {"model": model})
        for model in config["models"]
    ]
    return figures
