"""The agent's keeper, learned at training (`training.keeper`; docs/relmas.md, "Giving jobs up").

Giving jobs up pays beside a rule ranked by deadline: a rule ranked by work already starts the
short jobs first, and the jobs it serves are not those the future would (docs/relmas.md). The
keeper is learned under `edf_feasible` with its placement chosen on validation (`keeper_rule`;
where jobs carry service targets, under the best baseline of validation), from the future's
labels on training traces, DAgger on its own states (`relmas.rl.hindsight`). Its features belong
to no rule, so `relmas.rl.run` then scores each deadline-ranked rule (the target-aware ones too
where jobs carry targets) with it (`kept_candidates`) as the agent's teacher on the validation
traces, against the study's best baseline without one; the best is the agent's teacher, its
keeper with it.

`relmas keeper` learns a scenario's keeper once into a file (`write_keeper`) that every learned
policy of the scenario trains with (`relmas train --keeper`): its labels cost an LP per plan,
the bulk of a training's time. The file records what it was learned for (`keeper_made_for`), and
a training refuses one learned for other settings.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from relmas import catalog
from relmas.ceiling.admission import deadline_rules
from relmas.command import check_distinct_outputs, cost_inputs, load_configs
from relmas.errors import InputError
from relmas.evaluate import best_placed, read_placements, simulate
from relmas.hashing import config_hash
from relmas.io import atomic_path
from relmas.paths import KEEPER_FORMAT
from relmas.policies import make_policy
from relmas.policies.planner import PlannerConfig
from relmas.rl.hindsight import HindsightConfig, learn_keeper
from relmas.rl.keeper import KeeperWeights
from relmas.rl.settings import KeeperSettings, parse_training
from relmas.sim.costs import CostTables
from relmas.sim.system import System
from relmas.study import Study
from relmas.workload import generate_trace


@dataclass(frozen=True)
class LearnedKeeper:
    """A keeper as training learned it: its weights (None: no state had a job to label), its
    rule with the placement, the labels it was fitted to and their share served."""

    weights: KeeperWeights | None
    rule: tuple[str, str]
    labels: int
    served_share: float
    seconds: float

    def metrics(self) -> dict[str, float]:
        """Flat numbers for tracking: how it was learned."""
        return {
            "keeper_labels": float(self.labels),
            "keeper_served_share": self.served_share,
            "keeper_seconds": self.seconds,
        }


def keeper_rule(
    validation: str | Path, scenario: str, types: Sequence[str], targets: bool = False
) -> tuple[str, str]:
    """The rule a keeper of `scenario` is learned under, with its placement chosen on the
    validation rows: `catalog.keeper_rule()`; where jobs carry service `targets`, the best
    baseline of validation (ranked by shortfall first), so that the labels' states are those of
    a schedule that serves the targets, not of one that falls far short of them."""
    among = None if targets else (catalog.keeper_rule(),)
    try:
        return best_placed(validation, scenario, types, among=among)
    except InputError:
        expected = "a rule or target-aware baseline" if targets else catalog.keeper_rule()
        raise InputError(validation, "policy", f"validation rows of {expected}") from None


def kept_candidates(
    validation: str | Path, scenario: str, types: Sequence[str], targets: bool = False
) -> list[tuple[str, str]]:
    """The rules a keeper may serve: each deadline-ranked rule of the validation rows with its
    placement chosen there; where jobs carry service `targets`, the target-aware ones too (a
    keeper that spares the targets' jobs still needs a rule that serves them first)."""
    placements = read_placements(validation, scenario, types)
    return [(rule, placements[rule]) for rule in deadline_rules(targets) if rule in placements]


def learn_agent_keeper(
    study: Study,
    scenario: str,
    system: System,
    tables: CostTables,
    seeds: Sequence[int],
    settings: KeeperSettings,
    rule: tuple[str, str],
) -> LearnedKeeper:
    """The keeper of `rule` learned on the first `settings.traces` of the training `seeds`, of
    `settings.jobs` jobs each or the scenario's own number where smaller (a keeper of short traces
    learns from states like theirs, and its labels cost an LP per decision point); none (no
    weights) where the rule meets every deadline of those traces or every label serves."""
    started = time.perf_counter()
    own = study.scenario(scenario)
    # (a replayed trace's scenario may leave its number of jobs to the trace)
    parsed = replace(own, jobs=settings.jobs if own.jobs is None else min(own.jobs, settings.jobs))
    traces = [
        generate_trace(scenario, parsed, system, tables, seed, study.source)
        for seed in seeds[: settings.traces]
    ]
    config = HindsightConfig(
        rounds=settings.rounds,
        threshold=settings.threshold,
        planner=PlannerConfig(samples=1, horizon_jobs=settings.horizon_jobs),
    )
    name, placement = rule
    if all(_meets_every_deadline(system, tables, trace, rule) for trace in traces):
        # giving a job up could only lose a deadline: no labels to learn from
        return LearnedKeeper(None, rule, 0, 1.0, time.perf_counter() - started)
    weights, _, labels = learn_keeper(
        system, tables, traces, make_policy(name, placement=placement), config
    )
    served = float(labels.mean()) if labels.size else 1.0
    if served == 1.0:  # a keeper of labels that all serve would keep every job
        weights = None
    return LearnedKeeper(weights, rule, labels.size, served, time.perf_counter() - started)


def _meets_every_deadline(
    system: System, tables: CostTables, jobs: Any, rule: tuple[str, str]
) -> bool:
    """Whether `rule` (name, placement) meets every deadline of the trace `jobs`."""
    name, placement = rule
    result = simulate(system, jobs, tables, make_policy(name, placement=placement))
    return bool(result.jobs["met"].all())


def keeper_made_for(config: Mapping[str, Any], scenario: str, rule: tuple[str, str]) -> str:
    """What a keeper of `scenario` depends on, hashed: the scenario, the system, the zoo and
    accelerators (its cost tables), the keeper's settings and training seeds, and its rule."""
    training = config["training"]
    return config_hash(
        {
            "scenario": config["scenarios"][scenario],
            "system": config["system"],
            "models": config["models"],
            "accelerators": config["accelerators"],
            "keeper": training["keeper"],
            "seeds": training["seeds"],
            "rule": list(rule),
        }
    )


def write_keeper(path: str | Path, keeper: LearnedKeeper, made_for: str) -> None:
    """`keeper` as JSON at `path` (written whole or not at all)."""
    weights = None if keeper.weights is None else asdict(keeper.weights)
    record = {
        "format": KEEPER_FORMAT,
        "made_for": made_for,
        "rule": list(keeper.rule),
        "labels": keeper.labels,
        "served_share": keeper.served_share,
        "seconds": keeper.seconds,
        "weights": weights,
    }
    with atomic_path(path, suffix=".json") as tmp:
        Path(tmp).write_text(json.dumps(record, indent=2, sort_keys=True))


def read_keeper(path: str | Path, made_for: str) -> LearnedKeeper:
    """The keeper of `path`, refused unless learned for `made_for` (`keeper_made_for`)."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(path, None, "a keeper file (relmas keeper)") from None
    except json.JSONDecodeError as error:
        raise InputError(path, None, "well-formed JSON", error.msg) from None
    if not isinstance(raw, dict) or raw.get("format") != KEEPER_FORMAT:
        found = raw.get("format") if isinstance(raw, dict) else raw
        expected = f"{KEEPER_FORMAT!r} (a keeper of another version: rerun relmas keeper)"
        raise InputError(path, "format", expected, found)
    if raw.get("made_for") != made_for:
        expected = "a keeper learned for this config and rule (rerun relmas keeper)"
        raise InputError(path, "made_for", expected, raw.get("made_for"))
    try:
        weights = None if raw["weights"] is None else KeeperWeights.parse(raw["weights"])
        name, placement = raw["rule"]
        return LearnedKeeper(
            weights,
            (str(name), str(placement)),
            int(raw["labels"]),
            float(raw["served_share"]),
            float(raw["seconds"]),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise InputError(path, "weights", "a keeper's fields and weights", str(error)) from None


def keeper_command(args: argparse.Namespace) -> None:
    """Learn the keeper of one scenario into `--out`, for every learned policy's training; one
    MLflow run with its labels, share served and seconds."""
    from relmas import tracking

    config = load_configs(args.config)
    source = ", ".join(args.config)
    study = Study(config, source)
    system = study.system(study.check_scenario(args.scenario))
    tables = study.costs(args.scenario, args.costs)
    check_distinct_outputs(
        {
            "--config": args.config,
            "--costs": cost_inputs(args.costs, system.accelerator_types),
            "--validation": [args.validation],
        },
        {"--out": [args.out]},
    )
    settings = parse_training(config, source)
    if settings.keeper.traces == 0:
        raise InputError(source, "training.keeper.traces", "at least 1 to learn a keeper", 0)
    targets = study.scenario(args.scenario).has_targets()
    rule = keeper_rule(args.validation, args.scenario, tables.types, targets)
    with tracking.stage_run(
        "keeper",
        config,
        tags={"scenario": args.scenario},
        params={"scenario": args.scenario, "rule": "@".join(rule), **asdict(settings.keeper)},
    ) as run:
        keeper = learn_agent_keeper(
            study, args.scenario, system, tables, settings.seeds, settings.keeper, rule
        )
        write_keeper(args.out, keeper, keeper_made_for(config, args.scenario, rule))
        run.log_metrics(keeper.metrics())
        run.log_artifact(args.out, "keeper")
    print(
        f"{args.scenario}: the keeper of {rule[0]}@{rule[1]} from {keeper.labels} labels "
        f"({keeper.served_share:.1%} served) in {keeper.seconds:.0f} s -> {args.out}"
    )
