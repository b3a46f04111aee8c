"""The report's sections after the headline that are tables and sentences: how the heuristics
rank, generalisation, operator resizing, sweeps and the learning curves."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from relmas import catalog
from relmas.ceiling.rows import policy_rows
from relmas.report.markdown import (
    image_markdown,
    interval,
    markdown_table,
    mean_column,
    mean_text,
)
from relmas.report.stats import (
    BEST,
    aggregate,
    catalog_position,
    ceiling_means,
    resizing_roles,
)
from relmas.study import Study


def heuristic_ranking(config: Mapping[str, Any], aggregated: pl.DataFrame) -> pl.DataFrame:
    """Per scenario: its load, bandwidth and arrival process, and the online baselines (heuristics,
    rule baselines, search) ranked by SLA rate, ties in catalog order.

    This is the table that shows how the ranking of the heuristics moves with the operating point.
    """

    rows = []
    for scenario, spec in config["scenarios"].items():
        part = aggregated.filter(
            (pl.col("scenario") == scenario) & pl.col("policy").is_in(catalog.online_baselines())
        ).sort(["sla_rate", catalog_position()], descending=[True, False])
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


def ratio_text(row: Mapping[str, Any], ref: str) -> str:
    return interval(
        row[f"ratio_{ref}"], row[f"ratio_{ref}_ci_low"], row[f"ratio_{ref}_ci_high"], row["seeds"]
    )


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
            f"({ratio_text(row, base)}), ANTT {row[f'{agent}_antt']:.2f} against "
            f"{row[f'{base}_antt']:.2f}."
        )
    return lines


def generalisation_markdown(config: Mapping[str, Any], table: pl.DataFrame) -> list[str]:
    if not config["evaluation"]["generalisation"]:
        return []
    parts = [
        "## Generalisation\n",
        "Learned policies deployed with the agent trained on *another* scenario of the same "
        "accelerator instances (`evaluation.generalisation`; in summary.parquet: `agent_scenario` "
        "≠ `scenario`). SLA rate: mean ± 95% CI over the evaluation seeds; `own agent`: the "
        "scenario's own agent; ratios: mean SLA rate over that of FCFS, SJF and the scenario's "
        "best baseline chosen on its validation traces (as in the headline), paired bootstrap 95% "
        "interval. A foreign agent runs as trained or re-aimed at the scenario's best rule with "
        "its placement (its keeper kept, its network following that rule), whichever is better "
        'on the scenario\'s validation traces (docs/relmas.md, "An agent on another workload"; '
        "the MLflow run's params `reference` and `reference_placement` name a re-aimed one).\n",
    ]
    if not table.height:
        return parts + ["No learned policy is in `evaluation.policies` of this configuration.\n"]
    rows = [
        {
            "agent from → scenario": f"{row['agent_scenario']} → {row['scenario']}",
            "policy": row["policy"],
            "SLA rate": mean_text(row["sla_rate"], row["sla_rate_ci95"]),
            "own agent": f"{row['own_agent_sla_rate']:.3f}",
            **{f"vs {name}": ratio_text(row, name) for name in catalog.named_baselines()},
            "best baseline (validation)": str(row["best_baseline"]),
            "vs best baseline": ratio_text(row, BEST),
        }
        for row in table.iter_rows(named=True)
    ]
    return parts + [markdown_table(pl.DataFrame(rows)), ""]


def resizing_markdown(table: pl.DataFrame, learning: Mapping[str, Mapping[str, Any]]) -> list[str]:
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
                f"vs {base}": ratio_text(row, base),
                regulator: f"{row[f'{regulator}_sla_rate']:.3f}",
                f"vs {regulator}": ratio_text(row, regulator),
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


def sweeps_markdown(
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
        "traces on a system with that bandwidth. Mean with 95% CI band; grey dashed: the proven "
        "ceiling of the same traces (the relaxation bound, docs/ceiling.md), above which no "
        "schedule reaches; rows in sweeps.parquet (`kind` tells the ceiling's from the "
        "policies').\n",
    ]
    for name, spec in config["sweeps"].items():
        caption = f"{name}: SLA rate on {spec['scenario']} against {spec['parameter']}"
        rows = sweeps.filter(pl.col("sweep") == name)
        points = aggregate(policy_rows(rows), by=("value", "policy"))
        table = points.select(
            "policy",
            pl.col("value").map_elements(lambda v: f"{v:g}", return_dtype=pl.String),
            sla_rate=mean_column("sla_rate"),
        ).pivot(on="value", index="policy", values="sla_rate")
        parts += [
            image_markdown(figures, out_dir, f"sweep_{name}", caption),
            markdown_table(table),
            "",
            *sweep_headroom(name, points, ceiling_means(rows)),
        ]
    return parts


def sweep_headroom(name: str, points: pl.DataFrame, ceiling: pl.DataFrame) -> list[str]:
    """One sentence: at each value of sweep `name`, how far the proven ceiling lies above the best
    policy's mean SLA rate (`points`, aggregated; of equals the first in catalog order), in SLA
    points; none without ceiling rows."""
    if not ceiling.height:
        return []
    ranked = points.sort(["sla_rate", catalog_position()], descending=[True, False])
    best = ranked.group_by("value", maintain_order=True).first()
    gaps = ceiling.join(best, on="value", suffix="_best").sort("value")
    each = [
        f"{100 * (row['sla_rate'] - row['sla_rate_best']):+.1f} at {row['value']:g} "
        f"({row['policy']})"
        for row in gaps.iter_rows(named=True)
    ]
    return [f"Headroom on {name} (ceiling − best policy, SLA points): {', '.join(each)}.\n"]


def learning_markdown(
    learning: Mapping[str, Mapping[str, Any]], figures: Mapping[str, Path], out_dir: Path
) -> list[str]:
    if not learning:
        return []
    rows = [
        {
            "agent": title,
            "best validation SLA": agent["validation"],
            "reference baseline on validation": "{} {:.3f}".format(*agent["reference"]),
            "warm-start teacher": str(agent["teacher"]),
            "teacher on validation": agent["teacher_validation"],
        }
        for title, agent in learning.items()
    ]
    caption = "Validation SLA rate during training; dashed: the reference baseline, same traces"
    return [
        "## RELMAS learning curves\n",
        "SLA rate of the greedy agent on the validation traces (`training.validation_seeds`) "
        "against training steps, from each agent's curve.parquet; best.pt is the highest point. "
        'The teacher is the reference baseline (docs/relmas.md, "The decision"): the rule or '
        "target-aware baseline with the best rows on validation, with its placement; `_cut` "
        "cuts layers onto spare instances.\n",
        image_markdown(figures, out_dir, "learning_curves", caption),
        markdown_table(pl.DataFrame(rows)),
        "",
    ]
