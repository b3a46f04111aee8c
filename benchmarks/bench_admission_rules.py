"""The admission forms of the rule baselines (issue 50, item 2; docs/simulator.md, "Rule
baselines"): Moore-Hodgson's sacrifice and the acceptance test against their base rules and the
best existing rule, on traces of the loaded scenarios.

    .venv/bin/python benchmarks/bench_admission_rules.py --costs DIR [--config config/config.yaml]
        [--scenarios vision_heavy,bursty] [--seeds 1000,1001,1002]

Per scenario and evaluation seed (`--seeds`, default the first three of `evaluation.seeds`): one
trace of the scenario (cost tables from `--costs`, default the study's), every rule and
target-aware baseline on it with the placement `all`. Prints the mean SLA rate per policy and
scenario, then per admission form its paired difference (mean over the traces, in SLA points) to
its base rule, to the best base rule (of the admission forms' base rules, the highest mean SLA)
and to the best existing rule (of every rule and target-aware baseline without admission): each
best is chosen on the very traces it is measured on, so a difference to it is if anything too
low.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import polars as pl
from command_line import LOADED, print_table, run, study_scenarios  # a sibling module

from relmas import catalog
from relmas.evaluate import simulate
from relmas.policies import make_policy
from relmas.report import markdown_table


def admission_forms() -> list[str]:
    return [parts.name for parts in catalog.rules() if parts.admit != "all"]


def base_rule(name: str) -> str:
    """The rule an admission form gives jobs up for: its parts with every job admitted."""
    return replace(catalog.rule(name), admit="all").name


def sla_rates(args: argparse.Namespace) -> pl.DataFrame:
    """(scenario, seed, policy, sla_rate): every placed policy on every trace, placement `all`."""
    study, scenarios = study_scenarios(args)
    rows = []
    for scenario in scenarios:
        system, tables = study.system(scenario), study.costs(scenario, args.costs)
        start = time.perf_counter()
        for seed, jobs in study.traces(scenario, args.seeds, args.costs).items():
            for policy in catalog.placed():
                result = simulate(system, jobs, tables, make_policy(policy))
                rows.append(
                    dict(
                        scenario=scenario,
                        seed=seed,
                        policy=policy,
                        sla_rate=float(result.metrics["sla_rate"]),
                    )
                )
        print(f"{scenario}: {time.perf_counter() - start:.0f} s", flush=True)
    return pl.DataFrame(rows)


def differences(rates: pl.DataFrame) -> list[dict]:
    """Per admission form and scenario: its mean SLA, and its paired mean difference (points) to
    its base rule and to the best existing rule on the same traces."""
    means = rates.group_by("scenario", "policy").agg(pl.col("sla_rate").mean())
    bases = sorted({base_rule(name) for name in admission_forms()})

    def best(among: pl.Expr) -> pl.DataFrame:
        ranked = means.filter(among).sort("sla_rate", "policy", descending=[True, False])
        return ranked.group_by("scenario", maintain_order=True).first()

    best_base = best(pl.col("policy").is_in(bases))
    best_existing = best(~pl.col("policy").is_in(admission_forms()))
    per_trace = {
        (row["scenario"], row["seed"], row["policy"]): row["sla_rate"]
        for row in rates.iter_rows(named=True)
    }
    traces = rates.select("scenario", "seed").unique(maintain_order=True).iter_rows()
    by_scenario: dict[str, list[int]] = {}
    for scenario, seed in traces:
        by_scenario.setdefault(scenario, []).append(seed)
    rows = []
    for scenario, seeds in by_scenario.items():
        base = best_base.filter(pl.col("scenario") == scenario)["policy"][0]
        best_rule = best_existing.filter(pl.col("scenario") == scenario)["policy"][0]

        def paired(policy: str, other: str, scenario: str = scenario, seeds=seeds) -> float:
            gaps = [per_trace[scenario, s, policy] - per_trace[scenario, s, other] for s in seeds]
            return round(100 * sum(gaps) / len(gaps), 2)

        for policy in admission_forms():
            rows.append(
                {
                    "scenario": scenario,
                    "policy": policy,
                    "SLA": round(
                        sum(per_trace[scenario, s, policy] for s in seeds) / len(seeds), 4
                    ),
                    "- its base (points)": paired(policy, base_rule(policy)),
                    "best base rule": base,
                    "- best base (points)": paired(policy, base),
                    "best existing rule": best_rule,
                    "- best existing (points)": paired(policy, best_rule),
                }
            )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--scenarios", default=LOADED, help="comma-separated")
    parser.add_argument("--costs", default=None, help="cost tables (default: the study's)")
    parser.add_argument(
        "--seeds",
        type=lambda text: [int(seed) for seed in text.split(",")],
        default=[1000, 1001, 1002],
        help="evaluation seeds, one trace each per scenario",
    )
    args = parser.parse_args()
    rates = sla_rates(args)
    means = rates.group_by("scenario", "policy").agg(pl.col("sla_rate").mean().round(4))
    wide = means.pivot(on="scenario", index="policy", values="sla_rate")
    order = {name: i for i, name in enumerate(catalog.placed())}
    print(markdown_table(wide.sort(pl.col("policy").replace_strict(order))), flush=True)
    print_table(args, differences(rates))
    return 0


if __name__ == "__main__":
    run(main)
