"""The report's first section: every learned policy against its scenario's best baseline chosen on
validation, with the former comparison (the best heuristic on evaluation) and the offline bound
beside it."""

from __future__ import annotations

import math
from collections.abc import Mapping
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
                f"On {row['scenario']}, {row['policy']} reaches {share} of {offline_bound()}'s "
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


def headline_markdown(config: Mapping[str, Any], headline: pl.DataFrame) -> list[str]:
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
            f"ratio to {offline_bound()}": headline_ratio(row, "offline_"),
        }
        for row in headline.iter_rows(named=True)
    ]
    return [
        "## Learned policies against the best baseline\n",
        "The headline. For each scenario the *best baseline* is, of the evaluated online "
        f"policies that are not learned ({', '.join(baseline_policies(config))}; not the floor "
        f"{', '.join(catalog.floors())}, not the offline {offline_bound()}), the one with the "
        "highest mean SLA rate on the validation traces (`training.validation_seeds` "
        f"{validation}, the traces the agents are validated on; a tie goes to the first in that "
        "order), then measured on the evaluation seeds. `ratio to the baseline`: mean SLA rate "
        "of the learned policy over the baseline's, with its paired bootstrap 95% interval over "
        "the evaluation seeds (none with one seed; `n`: the number of seeds). Beside it, the "
        "former comparison: the best of the fixed heuristics and search policies (not the rule "
        "baselines), picked after the fact on the evaluation traces as this report did before; "
        f"and {offline_bound()}, the offline reference, where it ran.\n",
        "\n".join(f"- **{line}**" for line in headline_tally(headline)) + "\n",
        markdown_table(pl.DataFrame(rows)),
        "",
        "\n".join(f"- {line}" for line in headline_sentences(headline)),
        "",
    ]
