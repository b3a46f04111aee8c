"""The service-levels section: on the scenarios whose traces carry service targets, the headline in
target terms — each learned policy's shortfall and targets met against the best baseline chosen
on validation (least shortfall) — then per scenario achieved against target per service group (a
figure) and the target metrics of every policy, and per trace whether the ceiling's relaxation
proves the targets unreachable, beside the least shortfall any policy reached. A provider sells
each tenant a deadline-hit rate, not the most deadlines overall, so on these scenarios a policy
is judged by the shortfall (relmas.sim.service): shown in points, 100 x the summary's shortfall,
i.e. the deadlines short of every target per 100 jobs. Differences are means over the evaluation
seeds of per-trace differences (all policies ran the same traces) with their Student-t 95%
interval, as in the ceiling section."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dataframely as dy
import polars as pl
import pyarrow.parquet as pq

from relmas import catalog
from relmas.errors import InputError
from relmas.figures import palette
from relmas.io import read_parquet
from relmas.paths import bound_file
from relmas.report.markdown import image_markdown, markdown_table, mean_text
from relmas.report.stats import catalog_position, mean_ci
from relmas.schemas import SUMMARY_SCHEMA
from relmas.sim.service import GROUP_SCHEMA, RATE_TOL, ServiceGroups

# The summary columns of the target metrics table, in its order (shortfall shown in points).
TARGET_METRICS = ("targets_met", "targets", "shortfall", "worst_ratio", "jain_target", "dropped")
POINTS = 100.0  # a shortfall of 0.01 of the trace's jobs is one point
TARGET_KIND = "target"  # the catalog kind of the target-aware baselines


class RunGroups(ServiceGroups):
    """`….groups.parquet` beside each result: a run's service groups (relmas.sim.service), its
    run's keys before them (agent_scenario after them is not read)."""

    scenario = dy.String(primary_key=True)
    policy = dy.String(primary_key=True)
    seed = dy.Int64(primary_key=True, min=0)


# In the file's order: the run's keys, then relmas.sim.service's columns.
RUN_GROUP_SCHEMA = {key: SUMMARY_SCHEMA[key] for key in ("scenario", "policy", "seed")} | dict(
    GROUP_SCHEMA
)


def target_scenarios_of(summary: pl.DataFrame) -> list[str]:
    """The scenarios of `summary` whose runs carry service targets (a `targets` count; null on a
    trace without): the only ones with a service-levels section."""
    rows = summary.filter(pl.col("targets").is_not_null())
    return rows["scenario"].unique(maintain_order=True).to_list()


def read_groups(paths: Mapping[tuple[str, str, int], Path], summary: pl.DataFrame) -> pl.DataFrame:
    """The service groups' rows of every run in `paths` ((scenario, policy, seed) -> its groups
    file), each file checked: its contract (RunGroups), its run's rows only, as many as its
    summary row's `targets`. A run without targets has a file of no rows, which
    relmas.io.read_parquet refuses; it adds none here."""
    counts = {
        (row["scenario"], row["policy"], row["seed"]): row["targets"] or 0
        for row in summary.iter_rows(named=True)
    }
    frames = []
    for run, path in paths.items():
        if _rows(path) == 0 == counts.get(run, 0):
            continue
        frame = read_parquet(path, RunGroups).select(list(RUN_GROUP_SCHEMA))
        runs = frame.select("scenario", "policy", "seed").unique()
        if runs.height != 1 or runs.row(0) != run:
            raise InputError(path, "scenario, policy, seed", f"the rows of {run} only")
        if frame.height != counts.get(run, 0):
            expected = f"{counts.get(run, 0)} service groups, as its summary row counts"
            raise InputError(path, "group", expected, f"{frame.height} rows")
        frames.append(frame)
    if not frames:
        return pl.DataFrame(schema=RUN_GROUP_SCHEMA)
    return pl.concat(frames)


def _rows(path: Path) -> int | None:
    """The rows of the Parquet file `path`; None where it cannot tell (read_parquet names why)."""
    try:
        return pq.read_metadata(path).num_rows
    except (OSError, ValueError):
        return None


def pooled_groups(groups: pl.DataFrame) -> pl.DataFrame:
    """Per scenario, policy and service group: its jobs of all seeds pooled (jobs, met, achieved =
    met / jobs) and its target (the same on every trace: the tenant's)."""
    return (
        groups.group_by("scenario", "policy", "group", maintain_order=True)
        .agg(pl.col("jobs").sum(), pl.col("met").sum(), pl.col("target").first())
        .with_columns(achieved=pl.col("met") / pl.col("jobs"))
    )


def service_table(
    summary: pl.DataFrame, baselines: Mapping[str, tuple[str, float]]
) -> pl.DataFrame:
    """Per target scenario and policy (palette order) of `summary` (the policies' own-agent rows):
    the seeds, the mean and 95% CI half-width of every TARGET_METRICS column (shortfall in points;
    the ratios over the seeds where they are defined) and `vs_best`, `vs_best_ci95`: the paired
    difference of its shortfall to the scenario's best baseline chosen on validation (`baselines`,
    from `best_baselines`), null for the baseline itself or where it was not evaluated."""
    rows = []
    targeted = summary.filter(pl.col("scenario").is_in(target_scenarios_of(summary)))
    for (scenario,), runs in targeted.group_by(["scenario"], maintain_order=True):
        for policy in palette.order(runs["policy"]):
            own = runs.filter(policy=policy).sort("seed")
            row: dict[str, Any] = {"scenario": scenario, "policy": policy, "seeds": own.height}
            for metric in TARGET_METRICS:
                values = own[metric].drop_nulls().to_numpy().astype(float)
                scale = POINTS if metric == "shortfall" else 1.0
                row[metric], row[f"{metric}_ci95"] = (
                    mean_ci(scale * values) if values.size else (math.nan, math.nan)
                )
            best = baselines.get(scenario, (None, None))[0]
            row["best_baseline"] = best
            row["vs_best"] = row["vs_best_ci95"] = None
            if best in runs["policy"].to_list() and policy != best:
                theirs = runs.filter(policy=best).select("seed", theirs="shortfall")
                paired = own.join(theirs, on="seed", maintain_order="left")
                difference = POINTS * (paired["shortfall"] - paired["theirs"]).to_numpy()
                row["vs_best"], row["vs_best_ci95"] = mean_ci(difference)
            rows.append(row)
    return pl.DataFrame(rows)


def service_headline(table: pl.DataFrame, validation: pl.DataFrame) -> pl.DataFrame:
    """Per target scenario and learned policy of `table` (service_table's rows): its shortfall and
    targets met against the scenario's best baseline's (`baseline_*`), the paired difference
    (`vs_best`), and that baseline's mean shortfall on the validation traces it was chosen on."""
    if not table.height:
        return table
    learned = table.filter(
        pl.col("policy").is_in(catalog.learned()) & pl.col("vs_best").is_not_null()
    )
    baseline = table.select(
        "scenario",
        best_baseline="policy",
        baseline_shortfall="shortfall",
        baseline_targets_met="targets_met",
    )
    chosen = (
        validation.group_by("scenario", "policy")
        .agg(pl.col("shortfall").mean() * POINTS)
        .select("scenario", best_baseline="policy", baseline_validation_shortfall="shortfall")
    )
    keys = ["scenario", "best_baseline"]
    return learned.join(baseline, on=keys, maintain_order="left").join(
        chosen, on=keys, how="left", maintain_order="left"
    )


def shortfall_verdict(row: Mapping[str, Any]) -> str:
    """Whether a learned policy of a service_headline row beats its best baseline (less
    shortfall: the difference's interval below 0), loses to it (above 0) or ties (containing 0);
    with one seed, by the difference alone."""
    difference, half = row["vs_best"], row["vs_best_ci95"]
    if math.isnan(half):
        half = 0.0
    return "beats" if difference + half < 0 else "loses to" if difference - half > 0 else "ties"


def difference_text(difference: float, half: float, seeds: int) -> str:
    """A difference in points with its 95% interval; with one seed none, but n."""
    if math.isnan(half):
        return f"{difference:+.2f} (n = {seeds})"
    return f"{difference:+.2f} [{difference - half:+.2f}, {difference + half:+.2f}]"


def _reference(policy: str) -> str:
    """How a best baseline is named: target-aware where it is (else there was none to choose)."""
    kind = "target-aware baseline" if catalog.entry(policy).kind == TARGET_KIND else "baseline"
    return f"the best {kind} {policy}"


def service_sentence(row: Mapping[str, Any]) -> str:
    """One sentence: whether the learned policy of a service_headline row beats, ties or loses to
    its best baseline, by how many points of shortfall, and the targets each meets."""
    judged = shortfall_verdict(row)
    difference = row["vs_best"]
    side = "above" if difference > 0 else "below"
    gap = "equal to" if difference == 0 else f"{abs(difference):.2f} points {side}"
    interval = difference_text(difference, row["vs_best_ci95"], row["seeds"])
    held = (
        ", the interval holds 0" if judged == "ties" and not math.isnan(row["vs_best_ci95"]) else ""
    )
    return (
        f"On {row['scenario']}, {row['policy']} {judged} {_reference(row['best_baseline'])}: "
        f"{row['policy']}'s shortfall is {gap} {row['best_baseline']}'s "
        f"({row['shortfall']:.2f} against {row['baseline_shortfall']:.2f} points; difference "
        f"{interval}{held}), and it meets {row['targets_met']:.2f} of {row['targets']:g} targets "
        f"against {row['baseline_targets_met']:.2f}."
    )


def targets_bound_table(
    summary: pl.DataFrame, bounds: pl.DataFrame, bounds_dir: Path
) -> pl.DataFrame:
    """Per trace whose bound row carries the targets' verdict (`relmas bound`, read from
    `bounds_dir`): whether the targets are proven unreachable, the relaxation's status, the proven
    least shortfall and the least shortfall any evaluated policy reached on it (`best`, by
    `best_by`), in points. Refuses a proven least shortfall above a policy's, naming its file: a
    wrong bound must never pass as a proven one."""
    rows = []
    for bound in bounds.filter(pl.col("targets_reachable").is_not_null()).iter_rows(named=True):
        runs = summary.filter(
            (pl.col("scenario") == bound["scenario"]) & (pl.col("seed") == bound["seed"])
        ).drop_nulls("shortfall")
        ranked = runs.sort(["shortfall", catalog_position()])  # ties: the first in catalog order
        best = ranked.row(0, named=True) if runs.height else None
        if best is not None and best["shortfall"] < bound["shortfall_lower"] - RATE_TOL:
            raise InputError(
                bound_file(bounds_dir, bound["scenario"], bound["seed"]),
                "shortfall_lower",
                f"at most the shortfall {best['shortfall']:.6f} {best['policy']} reaches on "
                f"{bound['scenario']}, seed {bound['seed']} (a proven least shortfall above a "
                "schedule's is a wrong bound)",
                bound["shortfall_lower"],
            )
        rows.append(
            {
                "scenario": bound["scenario"],
                "seed": bound["seed"],
                "reachable": bound["targets_reachable"],
                "status": bound["targets_status"],
                "proven": POINTS * bound["shortfall_lower"],
                "best": POINTS * best["shortfall"] if best else math.nan,
                "best_by": best["policy"] if best else None,
            }
        )
    return pl.DataFrame(rows)


def bound_sentences(table: pl.DataFrame) -> list[str]:
    """Per scenario of targets_bound_table's rows: on how many traces the targets are proven
    unreachable, the proven least shortfall (mean over its traces: no schedule's mean shortfall
    on them is lower) beside the mean of each trace's least shortfall reached."""
    from relmas.ceiling.targets import UNREACHABLE

    lines = []
    for (scenario,), group in table.group_by(["scenario"], maintain_order=True):
        unreachable = group.filter(pl.col("reachable") == UNREACHABLE).height
        lines.append(
            f"{scenario}: targets proven unreachable on {unreachable} of {group.height} traces; "
            f"proven least shortfall ≥ {group['proven'].mean():.2f} points, the best any policy "
            f"reached {group['best'].mean():.2f} points (means over the traces)."
        )
    return lines


def service_markdown(
    table: pl.DataFrame,
    headline: pl.DataFrame,
    bounds: pl.DataFrame,
    figures: Mapping[str, Path],
    out_dir: Path,
) -> list[str]:
    """The section (nothing on a study without target scenarios): the headline in target terms,
    one sentence per scenario and learned policy; per scenario the figure and the target metrics;
    per trace the ceiling's verdict on the targets."""
    if not table.height:
        return []
    scenarios = table["scenario"].unique(maintain_order=True).to_list()
    seeds = int(table["seeds"].max())
    intervals = (
        "one evaluation seed, so no interval (n = 1): the verdict goes by the difference alone"
        if seeds < 2
        else f"with its paired Student-t 95% interval over the {seeds} evaluation seeds: below 0 "
        "beats, above 0 loses, containing 0 ties"
    )
    parts = [
        "## Service levels: shortfall against the targets\n",
        f"On the scenarios whose tenants are promised a deadline-hit rate ({', '.join(scenarios)}) "
        "the headline is in target terms. Their best baseline is, of the online baselines "
        f"evaluated (the target-aware ones, catalog kind `{TARGET_KIND}`, and those that ignore "
        "the targets), the one with the least mean shortfall on the validation traces (ties: the "
        "higher SLA rate), then "
        "measured on the evaluation seeds. "
        "Shortfall in points: the deadlines short of every target per 100 jobs (each group's gap "
        'weighted by its share of the jobs, docs/simulator.md, "Service levels"); `difference`: '
        f"the learned policy's minus the baseline's, a mean of per-trace differences, {intervals}. "
        "Targets met: service groups reaching their target, mean over the seeds.\n",
    ]
    if headline.height:
        shown = [
            {
                "scenario": row["scenario"],
                "policy": row["policy"],
                "best baseline (validation shortfall)": (
                    f"{row['best_baseline']} ({_points(row['baseline_validation_shortfall'])})"
                ),
                "its shortfall": f"{row['baseline_shortfall']:.2f}",
                "shortfall": f"{row['shortfall']:.2f}",
                "difference [95% CI]": difference_text(
                    row["vs_best"], row["vs_best_ci95"], row["seeds"]
                ),
                "targets met": f"{row['targets_met']:.2f} of {row['targets']:g}",
                "its targets met": f"{row['baseline_targets_met']:.2f}",
                "verdict": shortfall_verdict(row),
            }
            for row in headline.iter_rows(named=True)
        ]
        sentences = [service_sentence(row) for row in headline.iter_rows(named=True)]
        parts += [
            "\n".join(f"- **{line}**" for line in sentences) + "\n",
            markdown_table(pl.DataFrame(shown)),
            "",
        ]
    else:
        parts.append("No learned policy was measured against a best baseline on these scenarios.\n")
    for scenario in scenarios:
        rows = table.filter(scenario=scenario)
        best = rows["best_baseline"][0]
        name = f"service_{scenario}"
        caption = f"{scenario}: achieved deadline-hit rate against target per service group"
        parts += [f"### {scenario}\n"]
        if name in figures:
            parts.append(image_markdown(figures, out_dir, name, caption))
        parts += [markdown_table(_metrics_rows(rows, best)), ""]
    return parts + _bound_markdown(bounds)


def _points(value: float | None) -> str:
    """Points of shortfall as the tables print them; n/a where none was measured (validation
    rows written before the service levels)."""
    return "n/a" if value is None or math.isnan(value) else f"{value:.2f}"


def _metrics_rows(rows: pl.DataFrame, best: str | None) -> pl.DataFrame:
    """The target metrics of one scenario's policies as the table prints them."""

    def mean(row: Mapping[str, Any], metric: str, digits: int) -> str:
        value, half = row[metric], row[f"{metric}_ci95"]
        return "—" if math.isnan(value) else mean_text(value, half, digits)

    versus = f"shortfall − {best}" if best else "shortfall − best baseline"
    return pl.DataFrame(
        [
            {
                "policy": row["policy"],
                "targets met": f"{mean(row, 'targets_met', 2)} of {row['targets']:g}",
                "shortfall (points)": mean(row, "shortfall", 2),
                "worst achieved / target": mean(row, "worst_ratio", 3),
                "Jain (achieved / target)": mean(row, "jain_target", 3),
                "dropped": mean(row, "dropped", 1),
                versus: "—"
                if row["vs_best"] is None
                else difference_text(row["vs_best"], row["vs_best_ci95"], row["seeds"]),
            }
            for row in rows.iter_rows(named=True)
        ]
    )


def _bound_markdown(bounds: pl.DataFrame) -> list[str]:
    """Per trace the ceiling's verdict on the targets beside the least shortfall reached."""
    header = "### Can the targets be met? The ceiling's verdict\n"
    if not bounds.height:
        return [header, "No bound row of these traces carries the targets' verdict.\n"]
    shown = bounds.select(
        "scenario",
        "seed",
        pl.col("reachable").alias("targets"),
        pl.col("status").alias("relaxation status"),
        *(
            pl.col(column).map_elements(_points, return_dtype=pl.String).alias(label)
            for column, label in (
                ("proven", "proven least shortfall (points)"),
                ("best", "least reached (points)"),
            )
        ),
        pl.col("best_by").alias("by"),
    )
    return [
        header,
        "Per evaluation trace, the relaxation of `relmas bound` with a count per service group "
        '(docs/ceiling.md, "Can the targets be met?"): *unreachable* when it proves that no '
        "schedule the engine allows meets every target, *not proven* otherwise (the relaxation is "
        "looser than the engine: it proves nothing either way); the proven least shortfall is a "
        "lower bound on every schedule's, beside the least any evaluated policy reached.\n",
        "\n".join(f"- {line}" for line in bound_sentences(bounds)),
        "",
        markdown_table(shown),
        "",
    ]
