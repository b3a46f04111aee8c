"""The agent's keeper, learned at training (`training.keeper`; docs/relmas.md, "Giving jobs up").

Giving jobs up pays beside a rule ranked by deadline: a rule ranked by work already starts the
short jobs first, and the jobs it serves are not those the future would (docs/relmas.md). So the
keeper's rule is the best deadline-ranked rule of the validation rows with its placement
(`keeper_rule`); the keeper is learned from the future's labels on training traces, DAgger on its
own states (`relmas.rl.hindsight`); `relmas.rl.run` then scores that rule with its keeper as the
agent's teacher on the validation traces against the study's best baseline without one, and the
better is the agent's teacher, its keeper with it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from relmas.ceiling.admission import deadline_rules
from relmas.errors import InputError
from relmas.evaluate import best_placed
from relmas.policies import make_policy
from relmas.policies.planner import PlannerConfig
from relmas.rl.hindsight import HindsightConfig, learn_keeper
from relmas.rl.keeper import KeeperWeights
from relmas.rl.settings import KeeperSettings
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

    def metrics(self, kept: bool) -> dict[str, float]:
        """Flat numbers for tracking; `kept`: whether the agent gives jobs up by it."""
        return {
            "keeper_labels": float(self.labels),
            "keeper_served_share": self.served_share,
            "keeper_seconds": self.seconds,
            "keeper_kept": float(kept),
        }


def keeper_rule(validation: str | Path, scenario: str, types: Sequence[str]) -> tuple[str, str]:
    """The best deadline-ranked rule of the validation rows of `scenario`, with its placement."""
    try:
        return best_placed(validation, scenario, types, among=deadline_rules())
    except InputError:
        raise InputError(
            validation, "policy", "validation rows of a deadline-ranked rule (the keeper's)"
        ) from None


def learn_agent_keeper(
    study: Study,
    scenario: str,
    system: System,
    tables: CostTables,
    seeds: Sequence[int],
    settings: KeeperSettings,
    rule: tuple[str, str],
) -> LearnedKeeper:
    """The keeper of `rule` learned on the first `settings.traces` of the training `seeds`."""
    started = time.perf_counter()
    parsed = study.scenario(scenario, settings.jobs)
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
    weights, _, labels = learn_keeper(
        system, tables, traces, make_policy(name, placement=placement), config
    )
    served = float(labels.mean()) if labels.size else 1.0
    return LearnedKeeper(weights, rule, labels.size, served, time.perf_counter() - started)
