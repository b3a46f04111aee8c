"""The report's first section: every learned policy against its scenario's best baseline chosen on
validation, in one table after a tally per policy, the former comparison (the best heuristic on
evaluation) in columns of the same table; the offline bound is told only where a learned policy
falls under the share aimed at."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from relmas import catalog
from relmas.report.markdown import interval, markdown_table
from relmas.report.stats import former_heuristics, offline_bound, paired_ratio
from relmas.study import baseline_policies

OFFLINE_SHARE = 0.9  # share of the offline bound an online policy should reach (issue 5)


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
        offline = offline_bound() if offline_bound() in policies else None
        for policy in learned:
            ours = table[policy].to_numpy()
            row: dict[str, Any] = {
                "scenario": scenario,
                "policy": policy,
                "seeds": table.height,
                "sla_rate": float(ours.mean()),
                "best_baseline": chosen,
                "baseline_placement": placement_of(group, chosen),
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


def placement_of(rows: pl.DataFrame, policy: str) -> str | None:
    """The placement `policy` ran with in summary `rows` (None for a policy that takes none)."""
    placements = rows.filter(pl.col("policy") == policy)["placement"].drop_nulls()
    return placements[0] if placements.len() else None


VERDICTS = ("beats", "ties", "falls short of")  # what `verdict` says


def verdict(row: Mapping[str, Any], prefix: str = "") -> str:
    """Whether the learned policy of a headline row beats its best baseline, ties it or falls
    short: by the interval (above 1, below 1, containing 1); with one seed, by the point alone.
    `prefix` "heuristic_": the same against the best former heuristic."""
    ratio, low, high = (row[f"{prefix}ratio{end}"] for end in ("", "_ci_low", "_ci_high"))
    if math.isnan(ratio):  # the reference met no deadline
        ratio = low = high = math.inf if row["sla_rate"] > 0 else 1.0
    if row["seeds"] < 2:
        low = high = ratio
    return "beats" if low > 1 else "falls short of" if high < 1 else "ties"


def headline_ratio(row: Mapping[str, Any], prefix: str, *, say_n: bool = True) -> str:
    """The ratio `{prefix}ratio` of a headline row with its interval (see `interval`)."""
    values = (row[f"{prefix}ratio{end}"] for end in ("", "_ci_low", "_ci_high"))
    return interval(*values, row["seeds"], say_n=say_n)


def headline_sentences(table: pl.DataFrame, offline_share: float = OFFLINE_SHARE) -> list[str]:
    """What the headline table does not show, one sentence each: the rows under `offline_share`
    of the offline bound (the table has no column for it: it ran on few scenarios, if any).
    Nothing a row of the table says is told again."""
    below = [
        f"{row['policy']} on {row['scenario']} ({headline_share(row)})"
        for row in table.iter_rows(named=True)
        if row["offline_ratio"] is not None and row["offline_ratio"] < offline_share
    ]
    if not below:
        return []
    return [
        f"Under {offline_share:.0%} of {offline_bound()}'s SLA rate, the share aimed at: "
        + ", ".join(below)
        + "."
    ]


def headline_share(row: Mapping[str, Any]) -> str:
    """The share of the offline bound's SLA rate a headline row reaches, with its interval."""
    share = f"{row['offline_ratio']:.0%}"
    if row["seeds"] >= 2:
        share += f" [{row['offline_ratio_ci_low']:.0%}, {row['offline_ratio_ci_high']:.0%}]"
    return share


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


def _former(row: Mapping[str, Any]) -> str:
    """The best former heuristic of a headline row with its SLA rate; — where none ran."""
    if row["best_heuristic"] is None:
        return "—"
    return f"{row['best_heuristic']} ({row['heuristic_sla_rate']:.3f})"


def _against(prefix: str) -> tuple[Callable[[Mapping[str, Any]], str], ...]:
    """The cells of a headline row's comparison `prefix` ("": the best baseline, "heuristic_":
    the best former heuristic): its ratio with the interval, and the verdict."""

    def ratio(row: Mapping[str, Any]) -> str:
        return "—" if row[f"{prefix}ratio"] is None else headline_ratio(row, prefix)

    def judged(row: Mapping[str, Any]) -> str:
        return "—" if row[f"{prefix}ratio"] is None else verdict(row, prefix).removesuffix(" of")

    return ratio, judged


_RATIO, _VERDICT = _against("")
_FORMER_RATIO, _FORMER_VERDICT = _against("heuristic_")

# The headline table's columns, in order: (header, the cell of a headline_table row). One entry
# per column, so that a column is added in one place.
HEADLINE_COLUMNS: tuple[tuple[str, Callable[[Mapping[str, Any]], str]], ...] = (
    ("scenario", lambda row: row["scenario"]),
    ("policy", lambda row: row["policy"]),
    (
        "best baseline (validation SLA rate)",
        lambda row: f"{row['best_baseline']} ({row['baseline_validation_sla_rate']:.3f})",
    ),
    ("its placement", lambda row: row["baseline_placement"] or "—"),
    ("its SLA rate", lambda row: f"{row['baseline_sla_rate']:.3f}"),
    ("SLA rate", lambda row: f"{row['sla_rate']:.3f}"),
    ("ratio [95% CI]", _RATIO),
    ("verdict", _VERDICT),
    ("best former heuristic (SLA rate)", _former),
    ("ratio to it [95% CI]", _FORMER_RATIO),
    ("verdict to it", _FORMER_VERDICT),
)


def headline_markdown(
    config: Mapping[str, Any], headline: pl.DataFrame, targeted: Sequence[str] = ()
) -> list[str]:
    """The report's first section: the tally per learned policy, then one table of every learned
    policy against each scenario's best baseline chosen on validation and against the best former
    heuristic (HEADLINE_COLUMNS), then a sentence only for what the table does not show
    (headline_sentences). `targeted`: the scenarios whose runs carry service targets, where the
    best baseline is chosen by shortfall."""
    if not headline.height:
        return [
            "## Learned policies against the best baseline\n",
            "No learned policy (or no online baseline) is in `evaluation.policies` of this "
            "configuration.\n",
        ]
    validation = config["training"]["validation_seeds"]
    rows = [
        {header: cell(row) for header, cell in HEADLINE_COLUMNS}
        for row in headline.iter_rows(named=True)
    ]
    seeds = headline["seeds"].max()
    intervals = (
        "Verdict by the ratio alone: one evaluation seed, so no interval (n = 1)."
        if seeds < 2
        else f"Verdict by the paired bootstrap 95% interval over the {seeds} evaluation seeds: "
        "above 1 beats, below 1 falls short, containing 1 ties."
    )
    sentences = headline_sentences(headline)
    return [
        "## Learned policies against the best baseline\n",
        "The headline. For each scenario the *best baseline* is, of the evaluated online "
        f"policies that are not learned ({', '.join(baseline_policies(config))}; not the floor "
        f"{', '.join(catalog.floors())}, not the offline {offline_bound()}), the one with the "
        "highest mean SLA rate on the validation traces (`training.validation_seeds` "
        f"{validation}, the traces the agents are validated on; a tie goes to the first in that "
        "order; a rule or target-aware baseline with the placement chosen for it there, "
        '`its placement`: docs/simulator.md, "Placement"), then measured on the evaluation '
        "seeds: `its SLA rate` and the learned policy's "
        "`SLA rate` are means over them, `ratio` the learned policy's over the baseline's. "
        f"{intervals} Beside it, the former comparison: the *best former heuristic*, the best of "
        "the fixed heuristics and search policies (not the rule baselines), picked after the fact "
        "on the evaluation traces, the ratio to it and the verdict by the same rule. Below the "
        f"table, only what it does not show: where a learned policy reaches less than "
        f"{OFFLINE_SHARE:.0%} of {offline_bound()}, the offline reference."
        f"{_targeted_text(targeted)}\n",
        "\n".join(f"- **{line}**" for line in headline_tally(headline)) + "\n",
        markdown_table(pl.DataFrame(rows)),
        "",
        *(["\n".join(f"- {line}" for line in sentences), ""] if sentences else []),
    ]


def _targeted_text(targeted: Sequence[str]) -> str:
    """What the headline's intro says of the scenarios with service targets (nothing without)."""
    if not targeted:
        return ""
    return (
        f" On the scenarios with service targets ({', '.join(targeted)}) the best baseline is "
        "instead the one of least mean shortfall on the validation traces; their "
        "headline in target terms is the next section."
    )
