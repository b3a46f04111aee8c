"""The learner on scenarios with service targets: what the service features and the service reward
each add (docs/relmas.md, "Service levels").

    .venv/bin/python benchmarks/bench_service_learner.py --config CONFIG.yaml --costs DIR \
        --variants benchmarks/variants/service_levels.yaml [--scenarios a,b] [--only v,w] \
        [--out results/bench_service_learner]

FILE.yaml maps a variant name to overrides of the config's `training:` section (as
benchmarks/bench_learner.py's). Needs only cost tables for the config (`relmas zoo`, `relmas
profile`), no finished study: for each scenario (default: every one whose tenants carry targets)
the online baselines run on the validation traces, `gacer` excepted (a search that needs the
piece tables), and the best is chosen as the report chooses it (`relmas.report.best_baselines`:
least shortfall, ties by SLA rate), once among all of them and once among the target-aware ones
(catalog kind `target`); both then run on the evaluation traces beside an agent of each variant
(trained unless OUT has it). Per row: the validation shortfall, then on the evaluation traces the
mean shortfall, the service groups meeting their target (summed over the traces), the SLA rate,
and for the agents the difference in shortfall to each best baseline in points with a paired
bootstrap 95 % interval over the evaluation seeds (negative: the agent lacks fewer deadlines),
the teacher, the step of best.pt and the training CPU time.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from bench_learner import parse_with_variants, point_difference  # a sibling script
from train_or_load import train_or_load  # a sibling module

from relmas import arguments, catalog
from relmas.config import merge_into, validate_config
from relmas.evaluate import simulate
from relmas.policies import make_policy
from relmas.report import best_baselines, markdown_table
from relmas.rl.run import ScenarioTrainResult
from relmas.study import Study, target_scenarios
from relmas.yaml_load import load_yaml


def runs(study: Study, scenario: str, traces: dict, costs: Path, policy) -> pl.DataFrame:
    """`policy` (a name, or a made policy per seed: a callable) on each of `traces`: seed,
    sla_rate, shortfall, targets_met, targets."""
    system, tables = study.system(scenario), study.costs(scenario, costs)
    rows = []
    for seed, jobs in traces.items():
        made = policy(seed) if callable(policy) else policy
        metrics = simulate(system, jobs, tables, made).metrics
        keys = ("sla_rate", "shortfall", "targets_met", "targets")
        rows.append({"seed": seed, **{key: metrics[key] for key in keys}})
    return pl.DataFrame(rows)


def training_figures(trained: ScenarioTrainResult) -> dict[str, Any]:
    """What the table keeps of an agent's training."""
    return {
        "cpu_s": trained.cpu_seconds,
        "validation_shortfall": trained.validation.get("shortfall"),
        "teacher": trained.teacher or "",
        "best_step": trained.learner.best_step,
    }


def row(name: str, evaluated: pl.DataFrame, validation: float | None, **extra) -> dict:
    """A table row: `name`'s figures on the evaluation traces (`evaluated`) and on validation."""
    return {
        "policy": name,
        "validation shortfall": "" if validation is None else f"{validation:.4f}",
        "shortfall": f"{evaluated['shortfall'].mean():.4f}",
        "targets met": f"{evaluated['targets_met'].sum()}/{evaluated['targets'].sum()}",
        "SLA": f"{evaluated['sla_rate'].mean():.3f}",
        **extra,
    }


def main() -> None:
    parser = arguments.Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--costs", type=Path, required=True, help="cost tables of the config")
    parser.add_argument("--scenarios", default=None, help="comma-separated (default: targets)")
    args, variants, names = parse_with_variants(parser, "results/bench_service_learner")
    raw = load_yaml(args.config)
    base = validate_config(raw, args.config)
    study = Study(base, args.config)
    scenarios = args.scenarios.split(",") if args.scenarios else target_scenarios(base)
    rng = np.random.default_rng(0)
    for scenario in scenarios:
        validation_traces = study.validation_traces(scenario, args.costs)
        validated = pl.concat(
            runs(study, scenario, validation_traces, args.costs, p).with_columns(
                scenario=pl.lit(scenario), policy=pl.lit(p)
            )
            for p in catalog.online_baselines()
            if catalog.entry(p).kind != "search"
        )
        aware = validated.filter(pl.col("policy").is_in(catalog.of_kind("target")))
        means = validated.group_by("policy").agg(pl.col("shortfall").mean())
        on_validation = dict(means.iter_rows())
        traces = study.traces(scenario, base["evaluation"]["seeds"], args.costs)
        rows, best = [], {}
        for label, frame in (("best baseline", validated), ("best target-aware", aware)):
            policy, _ = best_baselines(frame)[scenario]
            best[label] = runs(study, scenario, traces, args.costs, policy)
            rows.append(row(f"{policy} ({label})", best[label], on_validation[policy]))
        for name in names:
            variant = copy.deepcopy(raw)
            merge_into(variant, {"training": variants[name] or {}})
            config = validate_config(variant, f"{args.variants}: {name}")
            agent = args.out / scenario / name
            figures = train_or_load(
                config,
                scenario,
                agent,
                args.costs,
                record="bench_service_learner.json",
                figures=training_figures,
            )

            def deployed(seed: int, agent: Path = agent) -> object:
                return make_policy(catalog.learned()[0], seed=seed, agent=agent)

            ours = runs(study, scenario, traces, args.costs, deployed)
            deltas = {}
            for label, theirs in best.items():
                diff, low, high = point_difference(
                    ours["shortfall"].to_numpy(), theirs["shortfall"].to_numpy(), rng
                )
                deltas[f"Δ shortfall vs {label}"] = f"{diff:+.2f} [{low:+.2f}, {high:+.2f}]"
            rows.append(
                row(
                    f"relmas: {name}",
                    ours,
                    figures["validation_shortfall"],
                    **{
                        **deltas,
                        "teacher": figures["teacher"],
                        "best step": figures["best_step"],
                        "train CPU s": round(figures["cpu_s"]),
                    },
                )
            )
        print(f"\n{scenario}\n")
        frame = pl.DataFrame(rows, infer_schema_length=None)
        print(markdown_table(frame.with_columns(pl.all().cast(pl.String).fill_null(""))))


if __name__ == "__main__":
    main()
