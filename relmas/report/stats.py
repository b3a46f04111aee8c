"""The report's statistics: means with Student-t intervals, paired bootstrap ratios, the best
baseline chosen on validation, and the generalisation, resizing and per-tenant comparisons."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from scipy import stats

from relmas import catalog
from relmas.ceiling.rows import CEILING
from relmas.figures import palette
from relmas.figures.contents import GANTT_JOBS
from relmas.study import validation_order

METRICS = ("sla_rate", "antt", "stp", "fairness", "utilization", "energy_j", "decision_us")


BOOTSTRAP_SAMPLES = 10_000


def catalog_position(column: str = "policy") -> pl.Expr:
    """Each name of `column`'s place in catalog order (`catalog.position`): the sort key that
    breaks ties between policies, wherever the report ranks them."""
    places = {name: catalog.position(name) for name in catalog.names()}
    return pl.col(column).replace_strict(places, default=len(places), return_dtype=pl.Int64)


RUN_KEYS = ("scenario", "policy", "agent_scenario", "seed")  # a summary row's run


def in_report_order(frame: pl.DataFrame, *keys: str) -> pl.DataFrame:
    """`frame`'s rows sorted by `keys` (by default RUN_KEYS; those it has), as collect_summaries
    sorts (summary.parquet keeps its order), so that nothing the report says or draws depends on the
    order in which the rows were read: sums of floats, first rows and the order of scenarios.
    Ties between policies are broken where policies are ranked, by catalog_position."""
    present = [key for key in keys or RUN_KEYS if key in frame.columns]
    return frame.sort(present, nulls_last=True, maintain_order=True) if present else frame


def mean_ci(values: np.ndarray) -> tuple[float, float]:
    """Mean and the half-width of its Student-t 95% confidence interval (NaN for one value: there
    is no interval, and the report draws and prints none), over the values that are defined (a
    null, as NaN here, is a metric of a run in which no job finished, such as its ANTT); NaN for
    both without one."""
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return math.nan, math.nan
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


def ceiling_means(sweep: pl.DataFrame) -> pl.DataFrame:
    """The ceiling rows of a sweep's points (`kind` ceiling): their mean SLA rate per value."""
    rows = sweep.filter(pl.col("kind") == CEILING)
    return rows.group_by("value").agg(pl.col("sla_rate").mean()).sort("value")


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


def split_generalisation(summary: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(rows of heuristics and of agents on their own scenario, rows of agents deployed on
    another scenario than the one they were trained on)."""
    moved = pl.col("agent_scenario").is_not_null() & (
        pl.col("agent_scenario") != pl.col("scenario")
    )
    return summary.filter(~moved), summary.filter(moved)


def offline_bound() -> str:
    """The offline bound the learned policies are measured against (the catalog's one)."""
    (bound,) = catalog.offline()
    return bound


def former_heuristics(policies: Sequence[str]) -> list[str]:
    """The candidates of the report's former comparison among `policies`, in catalog order (the
    first of equals is the best): the fixed heuristics and the search policy, without the rule
    baselines (nor the floor). Its best is picked after the fact, on the evaluation traces; shown
    beside the headline so both readings stay visible."""
    present = set(policies)
    former = catalog.of_kind("heuristic", "search")
    return [p for p in former if p in present and p not in catalog.floors()]


def best_baselines(validation: pl.DataFrame) -> dict[str, tuple[str, float]]:
    """Per scenario: the online baseline (`catalog.online_baselines()`) with the highest mean SLA
    rate on its validation traces, and that rate. A tie goes to the first in catalog order.

    On a scenario whose traces carry service targets (a shortfall in its rows), the best is the
    online baseline with the least mean shortfall, ties by the highest mean SLA rate: the promise
    sold is the targets, not the most deadlines overall. The target-aware baselines (kind
    `target`) compete with every other baseline there: a rule that ignores the targets yet falls
    short of them by less is the stronger baseline, and the one a learner must beat.

    Chosen on the validation traces, so that the evaluation seeds only measure it: picking the
    best on the evaluation traces themselves favours the baseline by the luck of those traces.
    """
    chosen = {}
    for scenario, order in _validation_orders(validation).items():
        best = _best(catalog.online_baselines(), order)
        if best is not None:
            chosen[scenario] = (best, -order[best][1])
    return chosen


def _validation_orders(validation: pl.DataFrame) -> dict[str, dict[str, tuple[float, float]]]:
    """Per scenario: each policy's place in the order its best is chosen by on the validation
    traces (relmas.study.validation_order: mean shortfall, then − mean SLA rate)."""
    return {
        scenario: validation_order(group, "policy")
        for (scenario,), group in validation.group_by(["scenario"], maintain_order=True)
    }


def _best(candidates: Sequence[str], order: Mapping[str, tuple[float, float]]) -> str | None:
    """Of `candidates` (in catalog order) with validation rows, the first in `order` (the first
    of equals): best_baselines' rule. None if none has rows."""
    present = [p for p in candidates if p in order]
    return min(present, key=order.__getitem__) if present else None


# The kinds whose best the SLA rate figure draws, each chosen on validation as the best baseline
# is; the planner, the offline bound and the learned policies are drawn as they are (none is
# chosen among).
CHOSEN_KINDS = ("heuristic", "rule", "target", "search")


def shown_policies(
    aggregated: pl.DataFrame, validation: pl.DataFrame, scenarios: Sequence[str]
) -> dict[str, list[str]]:
    """Per scenario of `scenarios` (in that order) evaluated in `aggregated`: the policies the SLA
    rate figure draws, one row per kind. Of each kind of CHOSEN_KINDS the best on the validation
    traces by best_baselines' rule (the floor is no candidate); every planner, offline and
    learned policy evaluated (choosing the best learned one on evaluation would flatter it)."""
    orders = _validation_orders(validation)
    shown = {}
    for scenario in scenarios:
        evaluated = set(aggregated.filter(pl.col("scenario") == scenario)["policy"])
        order = orders.get(scenario, {})
        online = [p for p in catalog.online_baselines() if p in evaluated]
        best = [
            _best([p for p in online if catalog.entry(p).kind == k], order) for k in CHOSEN_KINDS
        ]
        rest = [p for p in catalog.of_kind("planning", "offline", "learned") if p in evaluated]
        if drawn := [p for p in best if p is not None] + rest:
            shown[scenario] = drawn
    return shown


@dataclass(frozen=True)
class Window:
    """The Gantt chart's window: `job_ids`, consecutive by arrival from the `start`-th job of one
    evaluation trace, of which `agent` met `agent_met` deadlines and `baseline` `baseline_met`."""

    scenario: str
    seed: int
    agent: str
    baseline: str
    start: int
    job_ids: tuple[int, ...]
    agent_met: int
    baseline_met: int


def differing_window(
    results: Mapping[tuple[str, str, int], pl.DataFrame],
    pairs: Mapping[str, tuple[str, str]],
    seeds: Sequence[int],
    jobs: int = GANTT_JOBS,
) -> Window | None:
    """Where a learned policy and its best baseline differ most: of every window of `jobs`
    consecutive jobs (by arrival, then job id; the whole trace if shorter) of every evaluation
    trace of every scenario of `pairs` (scenario -> (learned policy, best baseline), both
    evaluated), the one with the largest difference in deadlines met, |met by one − met by the
    other|, from the per-job results (`results`). Ties: the first scenario of `pairs`, the first
    seed, the earliest window. None without a pair."""
    chosen, largest = None, -1
    for scenario, (agent, baseline) in pairs.items():
        for seed in seeds:
            ours = results[(scenario, agent, seed)].select("job_id", "arrival_s", "met")
            theirs = results[(scenario, baseline, seed)].select("job_id", other="met")
            both = ours.join(theirs, on="job_id").sort("arrival_s", "job_id")
            if not both.height:
                continue
            width = min(jobs, both.height)
            sums = [
                np.concatenate(([0], np.cumsum(both[c].cast(pl.Int64)))) for c in ("met", "other")
            ]
            met = [total[width:] - total[:-width] for total in sums]
            start = int(np.argmax(np.abs(met[0] - met[1])))  # the first of equals
            difference = int(abs(met[0][start] - met[1][start]))
            if difference > largest:
                largest = difference
                ids = tuple(both["job_id"][start : start + width].to_list())
                chosen = Window(
                    scenario,
                    seed,
                    agent,
                    baseline,
                    start,
                    ids,
                    int(met[0][start]),
                    int(met[1][start]),
                )
    return chosen


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
            antt_mean = antt[policy].mean() if present else None  # None: no job finished
            row[f"{policy}_antt"] = math.nan if antt_mean is None else float(antt_mean)
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
