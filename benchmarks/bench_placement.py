"""Placement (docs/simulator.md, "Placement"): the rule baselines on the whole system, on a subset
of its accelerator types and with the bandwidth-aware placement, each chosen on the validation
traces as the pipeline chooses (relmas.evaluate.choose_placements), then measured on the
evaluation traces.

Per scenario, on the validation traces (`training.validation_seeds`, drawn again; cost tables
from `--costs`, default the study's): every configured rule baseline (with the target-aware ones
on scenarios with service targets) on the whole system and with `bandwidth`; the strongest of them
on the whole system on every proper subset of the types; every rule on the best subset. Three
winners, each the best on validation of its family (least shortfall first where the tenants carry
targets, then the highest SLA rate): the whole-system rule, the subset rule, the bandwidth rule.
Then each on the evaluation traces (`evaluation.seeds`): mean SLA rate (and mean shortfall in
points where targets exist), and per rule its bandwidth-aware form against itself on the whole
system. `--validation-only` stops after the validation traces (to compare variants there).

    python benchmarks/bench_placement.py --costs DIR --scenarios vision_heavy,transformer_heavy
"""

from __future__ import annotations

import argparse
import time

import polars as pl
from command_line import print_table, run, study_scenarios  # a sibling module

from relmas import catalog
from relmas.evaluate import choose_placements, simulate, summary_row
from relmas.policies import make_policy
from relmas.policies.placement import ALL, BANDWIDTH, TYPES
from relmas.report import markdown_table
from relmas.study import Study, baseline_policies, validation_order


def runs(study, scenario, traces, tables, log):
    """`run(policy, placement)` of choose_placements on `traces`, every frame kept in `log`."""
    system = study.system(scenario)

    def run(policy: str, placement: str) -> pl.DataFrame:
        rows = []
        for seed, jobs in traces.items():
            result = simulate(system, jobs, tables, make_policy(policy, placement=placement))
            rows.append(summary_row(result, scenario, seed, placement=placement))
        frame = pl.concat(rows, how="diagonal_relaxed")
        log.append(frame)
        return frame

    return run


def family(placement: pl.Expr) -> pl.Expr:
    """`all`, `bandwidth`, or `types` for a placement on a subset of the types."""
    return pl.when(placement.is_in([ALL, BANDWIDTH])).then(placement).otherwise(pl.lit(TYPES))


def best(rows: pl.DataFrame) -> tuple[str, str]:
    """The (policy, placement) first by `validation_order` among `rows`."""
    keyed = rows.with_columns(key=pl.col("policy") + "@" + pl.col("placement"))
    order = validation_order(keyed, "key")
    policy, placement = min(keyed["key"].unique(maintain_order=True), key=order.__getitem__).split(
        "@"
    )
    return policy, placement


def scenario_rows(args, study: Study, scenario: str) -> list[dict]:
    tables = study.costs(scenario, args.costs)
    system = study.system(scenario)
    policies = [p for p in baseline_policies(study.config, scenario) if p in catalog.placed()]
    start = time.process_time()
    log: list[pl.DataFrame] = []
    validation = study.validation_traces(scenario, args.costs)
    choose_placements(
        runs(study, scenario, validation, tables, log),
        policies,
        system.accelerator_types,
        args.placements,
    )
    seconds = time.process_time() - start
    rows = pl.concat(log, how="diagonal_relaxed")
    served = rows["shortfall"].is_not_null().any()
    families = {
        name: best(rows.filter(family(pl.col("placement")) == name))
        for name in (ALL, *args.placements)
    }
    means = rows.group_by("policy", "placement").agg(
        pl.col("sla_rate").mean(), pl.col("shortfall").mean()
    )
    print(markdown_table(means.sort("placement", "policy")), flush=True)
    print(f"{scenario}: validation choice {seconds:.0f} s CPU, {rows.height} simulations")
    out = {"scenario": scenario, "validation CPU s": round(seconds)}
    for name, (policy, placement) in families.items():
        value = means.filter((pl.col("policy") == policy) & (pl.col("placement") == placement))
        out[f"{name}: chosen"] = f"{policy} @ {placement}"
        out[f"{name}: validation"] = round(float(value["sla_rate"][0]), 4)
    if args.validation_only:
        return [out]
    evaluation = study.traces(scenario, study.config["evaluation"]["seeds"], args.costs)
    log = []
    run = runs(study, scenario, evaluation, tables, log)
    for name, (policy, placement) in families.items():
        frame = run(policy, placement)
        out[f"{name}: SLA"] = round(float(frame["sla_rate"].mean()), 4)
        if served:
            out[f"{name}: shortfall (points)"] = round(100 * float(frame["shortfall"].mean()), 2)
    if BANDWIDTH in args.placements:
        gain = out["bandwidth: SLA"] - out["all: SLA"]
        out["bandwidth - all (points)"] = round(100 * gain, 2)
    return [out]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--scenarios", default=None, help="comma-separated (default: all)")
    parser.add_argument("--costs", default=None, help="cost tables (default: the study's)")
    parser.add_argument("--validation-only", action="store_true")
    parser.add_argument(
        "--placements",
        type=lambda text: text.split(","),
        default=[BANDWIDTH, TYPES],
        help="the placements tried besides all (default: bandwidth,types)",
    )
    args = parser.parse_args()
    study, names = study_scenarios(args)
    rows = []
    for name in names:
        rows += scenario_rows(args, study, name)
        print(markdown_table(pl.DataFrame(rows[-1:])), flush=True)
    print_table(args, rows)
    return 0


if __name__ == "__main__":
    run(main)
