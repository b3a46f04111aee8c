"""The ceiling section: per scenario, the best baseline, the learned policies, the best schedule
known and the proven ceiling (`relmas bound`) on the same evaluation traces, in SLA points.

How much any schedule could win above the rule is at most ceiling − rule; how much is known to be
winnable, best known − rule; the width ceiling − best known is what the schedules evaluated here
leave unknown (schedules of other kinds may do better). Each is a mean over the evaluation seeds
of per-trace differences, with a Student-t 95% interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from relmas import catalog
from relmas.ceiling.rows import BEST_KNOWN, CEILING, best_under
from relmas.ceiling.stage import BOUND_SCHEMA, BoundRows
from relmas.errors import InputError
from relmas.io import read_parquet
from relmas.paths import bound_file
from relmas.report.markdown import markdown_table
from relmas.report.stats import mean_ci

# The bound stage's schedules, as the best known's `best_known_by` names them
EXACT_SEARCH = "exact search"
LP_JOBS_SERVED = "LP's jobs served"
WINDOW_SEARCH = "window search"
PLANNER = "planner (online)"


def read_bounds(bounds_dir: Path, scenarios: Sequence[str], seeds: Sequence[int]) -> pl.DataFrame:
    """The ceiling row of every evaluation trace (`relmas bound`), each checked against its
    contract (relmas.ceiling.stage.BoundRows) and its trace."""
    frames = []
    for scenario in scenarios:
        for seed in seeds:
            path = bound_file(bounds_dir, scenario, seed)
            frame = read_parquet(path, BoundRows)
            row = frame.row(0, named=True)
            if frame.height != 1 or (row["scenario"], row["seed"]) != (scenario, seed):
                raise InputError(path, "scenario, seed", f"one row of {scenario}, seed {seed}")
            frames.append(frame.select(list(BOUND_SCHEMA)))
    return pl.concat(frames)


def reference_rows(summary: pl.DataFrame, bounds: pl.DataFrame, bounds_dir: Path) -> pl.DataFrame:
    """summary.parquet's rows of kind `ceiling` and `best_known` per evaluation trace (`bounds`,
    read from `bounds_dir`); refuses a ceiling below a policy's count, naming its file (a wrong
    bound must never pass as a proven one).

    The best known is the most deadlines met on the trace by any evaluated policy, on its own
    scenario's agent or another's, or by a schedule of the bound stage: the exact search's, the
    LP's jobs served (relmas.ceiling.admission) or the window search's from them
    (relmas.ceiling.window_search), each replayed in the engine.
    """
    rows = []
    for bound in bounds.iter_rows(named=True):
        key = (pl.col("scenario") == bound["scenario"]) & (pl.col("seed") == bound["seed"])
        runs = summary.filter(key)
        path = bound_file(bounds_dir, bound["scenario"], bound["seed"])
        stale = runs.filter(pl.col("jobs") != bound["jobs"])
        if stale.height:
            raise InputError(
                path,
                "jobs",
                f"the {stale['jobs'][0]} jobs its policies ran (a bound of another trace)",
                bound["jobs"],
            )
        trace = f"{bound['scenario']}, seed {bound['seed']}"
        best = best_under(runs, bound["ceiling_met"], trace, path)
        known, by = (best["met"], best["policy"]) if best is not None else (0, None)
        for met, source in (
            (bound["exact_lower"], EXACT_SEARCH),
            (bound["admission_met"], LP_JOBS_SERVED),
            (bound["searched_met"], WINDOW_SEARCH),
        ):
            if met is not None and met > known:
                known, by = met, source
        for kind, met in ((CEILING, bound["ceiling_met"]), (BEST_KNOWN, known)):
            rows.append(
                {
                    "scenario": bound["scenario"],
                    "policy": kind,
                    "seed": bound["seed"],
                    "jobs": bound["jobs"],
                    "sla_rate": met / bound["jobs"],
                    "kind": kind,
                    "best_known_by": by if kind == BEST_KNOWN else None,
                }
            )
    return pl.DataFrame(rows)


def mean_ceilings(references: pl.DataFrame) -> dict[str, float]:
    """Per scenario of `references` (reference_rows): its traces' proven ceilings' mean SLA rate."""
    ceilings = references.filter(pl.col("kind") == CEILING)
    return {
        scenario: float(rows["sla_rate"].mean())
        for (scenario,), rows in ceilings.group_by(["scenario"], maintain_order=True)
    }


def ceiling_table(
    summary: pl.DataFrame,
    references: pl.DataFrame,
    baselines: Mapping[str, tuple[str, float]],
    bounds: pl.DataFrame,
) -> pl.DataFrame:
    """Per scenario (with a best baseline): mean SLA rates of the baseline, of each learned
    policy, of the LP's jobs served (`bounds`' `admission_met`: what knowing the future wins by
    giving jobs up alone), of the planner where evaluated (what giving jobs up wins online), of
    the best known and of the ceiling, and the per-trace differences in points."""
    rows = []
    served = bounds.select(
        "scenario",
        pl.lit(LP_JOBS_SERVED).alias("policy"),
        "seed",
        (pl.col("admission_met") / pl.col("jobs")).alias("sla_rate"),
    )
    own = summary.filter(
        pl.col("agent_scenario").is_null() | (pl.col("agent_scenario") == pl.col("scenario"))
    )
    for (scenario,), refs in references.group_by(["scenario"], maintain_order=True):
        if scenario not in baselines:
            continue
        rule = baselines[scenario][0]
        rates = (
            pl.concat(
                [
                    own.filter(pl.col("scenario") == scenario).select("policy", "seed", "sla_rate"),
                    refs.select("policy", "seed", "sla_rate"),
                    served.filter(pl.col("scenario") == scenario).drop("scenario"),
                ]
            )
            .pivot(on="policy", index="seed", values="sla_rate")
            .sort("seed")
        )
        if rule not in rates.columns:
            continue
        points = {name: 100 * rates[name].to_numpy() for name in rates.columns if name != "seed"}
        row: dict[str, Any] = {"scenario": scenario, "rule": rule, "seeds": rates.height}
        named = {"rule": rule, "served": LP_JOBS_SERVED, BEST_KNOWN: BEST_KNOWN, CEILING: CEILING}
        for label, name in named.items():
            row[f"{label}_sla"] = float(points[name].mean()) / 100
        for label, (high, low) in {
            "headroom": (CEILING, rule),
            "served_gain": (LP_JOBS_SERVED, rule),
            "known_gain": (BEST_KNOWN, rule),
            "width": (CEILING, BEST_KNOWN),
        }.items():
            row[label], row[f"{label}_ci95"] = mean_ci(points[high] - points[low])
        row |= _planner_columns(points, rule, own.filter(pl.col("scenario") == scenario))
        for policy in [p for p in catalog.learned() if p in points]:
            gain, half = mean_ci(points[policy] - points[rule])
            headroom, online = row["headroom"], row["planner_gain"]
            rows.append(
                row
                | {
                    "policy": policy,
                    "policy_sla": float(points[policy].mean()) / 100,
                    "gain": gain,
                    "gain_ci95": half,
                    "taken": gain / headroom if headroom > 0 else math.nan,
                    "taken_online": gain / online if online > 0 else math.nan,
                }
            )
        if not any(p in points for p in catalog.learned()):
            rows.append(row | {"policy": None})
    return pl.DataFrame(rows)


def _planner_columns(
    points: Mapping[str, np.ndarray], rule: str, runs: pl.DataFrame
) -> dict[str, float]:
    """The planner's mean SLA rate, its per-trace gain over `rule` in points with its interval
    and its mean decision time (µs; its `runs`' rows), NaN where no planner was evaluated."""
    planner = next((p for p in catalog.planners() if p in points), None)
    if planner is None:
        columns = ("planner_sla", "planner_gain", "planner_gain_ci95", "planner_us")
        return dict.fromkeys(columns, math.nan)
    gain, half = mean_ci(points[planner] - points[rule])
    return {
        "planner_sla": float(points[planner].mean()) / 100,
        "planner_gain": gain,
        "planner_gain_ci95": half,
        "planner_us": float(runs.filter(pl.col("policy") == planner)["decision_us"].mean()),
    }


def _points(mean: float, half: float) -> str:
    text = f"{mean:+.1f}"
    return text if math.isnan(half) else f"{text} ± {half:.1f}"


def _taken(row: Mapping[str, Any]) -> str:
    """What a learned policy takes of its scenario's headroom, in words."""
    gain = _points(row["gain"], row["gain_ci95"])
    if row["gain"] < 0:
        return f"{row['policy']} falls below the baseline instead ({gain})"
    if math.isnan(row["taken"]):
        return f"{row['policy']} gains {gain}"
    online = (
        ""
        if math.isnan(row["taken_online"])
        else f", {100 * row['taken_online']:.0f} % of the planner's"
    )
    return f"{row['policy']} takes {100 * row['taken']:.0f} % of it{online} ({gain})"


def ceiling_markdown(table: pl.DataFrame, bounds: pl.DataFrame) -> list[str]:
    """The section: the table, one sentence per scenario, and how the bounds were proven."""
    header = "## How much was left to win: the proven ceiling\n"
    if not table.height:
        return [header, "No scenario has both a best baseline and its ceiling.\n"]
    planned = not table["planner_sla"].is_nan().all()
    shown = [
        {
            "scenario": row["scenario"],
            "best baseline": row["rule"],
            "its SLA rate": f"{row['rule_sla']:.3f}",
            "learned": row["policy"] or "—",
            "SLA rate": "—" if row["policy"] is None else f"{row['policy_sla']:.3f}",
            "learned − rule (points)": (
                "—" if row["policy"] is None else _points(row["gain"], row["gain_ci95"])
            ),
            LP_JOBS_SERVED: f"{row['served_sla']:.3f}",
            "served − rule (points)": _points(row["served_gain"], row["served_gain_ci95"]),
            **(
                {
                    PLANNER: f"{row['planner_sla']:.3f}",
                    "planner − rule (points)": _points(
                        row["planner_gain"], row["planner_gain_ci95"]
                    ),
                }
                if planned
                else {}
            ),
            "best known": f"{row['best_known_sla']:.3f}",
            "ceiling": f"{row['ceiling_sla']:.3f}",
            "ceiling − rule (points)": _points(row["headroom"], row["headroom_ci95"]),
            "width (points)": _points(row["width"], row["width_ci95"]),
        }
        for row in table.iter_rows(named=True)
    ]
    sentences = []
    for (scenario,), group in table.group_by(["scenario"], maintain_order=True):
        first = group.row(0, named=True)
        text = (
            f"{scenario}: at most {first['headroom']:.1f} points above {first['rule']} can be "
            f"won on these traces by any schedule, {first['served_gain']:.1f} by giving jobs up "
            "knowing the future (the LP's jobs served)"
        )
        if not math.isnan(first["planner_gain"]):
            text += (
                f", {first['planner_gain']:.1f} online (the planner, "
                f"{first['planner_us'] / 1000:.1f} ms per decision)"
            )
        takes = [_taken(row) for row in group.iter_rows(named=True) if row["policy"] is not None]
        sentences.append(text + (f"; {', '.join(takes)}." if takes else "."))
    statuses = bounds.group_by("relaxation_status").len().sort("relaxation_status")
    proven = ", ".join(f"{n} {s}" for s, n in statuses.iter_rows())
    exact = bounds.filter(pl.col("exact_status") == "optimal").height
    online = (
        f"), the {PLANNER} (LPs over sampled futures of the arrival process at each decision "
        "point after new arrivals, the rule relmas deploys scheduling the jobs they keep: what a "
        'scheduler that does not know the future can win, docs/relmas.md "The sampled-futures '
        'planner"),'
        if planned
        else "; what a scheduler that does not know it can win is measured by the planner, "
        "`planner` in `evaluation.policies`, not evaluated here, or on fewer traces by "
        '`benchmarks/bench_online_headroom.py`, docs/relmas.md "The sampled-futures planner"),'
    )
    differences = (
        "Differences in SLA points on the one evaluation trace (n = 1: no interval)."
        if table["seeds"].max() < 2
        else "Differences are means over the evaluation seeds of per-trace differences in SLA "
        "points, with their 95% interval."
    )
    return [
        header,
        "Per scenario, the best baseline (chosen on validation, as in the headline), the learned "
        f"policies, the {LP_JOBS_SERVED} alone (the jobs the ceiling's LP meets, served by a "
        f"deadline rule: what giving jobs up wins knowing the future{online} the *best known* "
        "schedule (the most deadlines met on each trace by any evaluated policy, the exact "
        f"search's replayed schedule ({EXACT_SEARCH}), the LP's jobs served by a deadline rule "
        f"({LP_JOBS_SERVED}) or that schedule's windows re-solved by CP-SAT ({WINDOW_SEARCH}), "
        "schedules that know the future) and the *ceiling*: a proven "
        "upper bound on the deadlines any schedule the engine allows can meet (`relmas bound`, "
        f"docs/ceiling.md). {differences} `width` = ceiling − best known, what these schedules "
        "leave unknown either way (schedules of other kinds may meet more: docs/ceiling.md, "
        '"The rules\' part of the width").\n',
        markdown_table(pl.DataFrame(shown)),
        "",
        "\n".join(f"- {line}" for line in sentences),
        "",
        f"The ceilings of {bounds.height} trace(s): relaxation {proven}; exact optimum proven on "
        f"{exact}; solvers {bounds['solver'][0]}.\n",
    ]
