"""What a training of one scenario's agent acts on (`TrainingSetup`): its settings, system and
cost tables, the observation with its reference baseline chosen on the validation rows of
`relmas validate`, and the validation traces, with the two ways a policy is scored on them: in
the environment (`validator`, `rollout`) and, for a teacher acting whole, by the engine's run of
its rule (`rule_scores`, the same schedule without the observations)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from relmas import catalog
from relmas.errors import InputError
from relmas.evaluate import best_placed, read_placements, simulate
from relmas.policies import make_policy
from relmas.policies.placement import ALL
from relmas.rl.collect import play
from relmas.rl.env import SchedulingEnv
from relmas.rl.keeper import KeeperWeights, KeptRule
from relmas.rl.network import GreedyPolicy
from relmas.rl.observation import ObservationSettings, resolve_service
from relmas.rl.settings import TrainingSettings, parse_training
from relmas.rl.teacher import BaselineTeacher
from relmas.rl.train import mean_metrics
from relmas.sim.costs import CostTables
from relmas.sim.system import System
from relmas.study import Study

Policy = GreedyPolicy | BaselineTeacher  # what `rollout` runs: the network greedily, or a teacher
RANKED = ("sla_rate", "shortfall")  # the metrics that rank them (validation_key; no shortfall
# without targets)


@dataclass(frozen=True)
class TrainingSetup:
    """What a training of one scenario's agent acts on: its settings, the system and cost
    tables, whether it cuts layers, the observation (with the reference baseline and its
    placement resolved) and the validation traces."""

    settings: TrainingSettings
    system: System
    tables: CostTables
    resize: bool
    observation: ObservationSettings
    validation_traces: list[pl.DataFrame]
    keeper: KeeperWeights | None = None  # gives jobs up before each decision (None: none)

    def env(self, jobs: pl.DataFrame) -> SchedulingEnv:
        """The training environment on `jobs`."""
        settings = self.settings
        return SchedulingEnv(
            self.system,
            self.tables,
            jobs,
            self.observation,
            settings.reward,
            settings.dqn.gamma,
            self.keeper,
        )

    def rule_scores(self, name: str) -> dict[str, float]:
        """The ranked validation metrics (`RANKED`, means over the validation traces) of the
        teacher `name` acting whole: the engine's run of that rule at the observation's
        placement, the keeper giving jobs up, which is the schedule the environment's teacher
        makes (tests/test_rl_env.py) without the observations it reads them from."""
        runs = []
        for jobs in self.validation_traces:
            rule = make_policy(name, placement=self.observation.placement)
            if self.keeper is not None:
                rule = KeptRule(rule, self.keeper.arrays(), name)
            runs.append(simulate(self.system, jobs, self.tables, rule).metrics)
        return ranked(mean_metrics(runs))

    def validator(self) -> Callable[[Policy], dict[str, float]]:
        """The mean metrics of a policy's rollouts on the validation traces."""
        envs = [self.env(jobs) for jobs in self.validation_traces]

        def validate(policy: Policy) -> dict[str, float]:
            return mean_metrics([rollout(env, policy) for env in envs])

        return validate


def training_setup(
    config: Mapping[str, Any],
    scenario: str,
    costs_dir: str | Path,
    *,
    source: str | Path | None = None,
    policy: str | None = None,
    validation: str | Path | None = None,
) -> TrainingSetup:
    """The setup `train_scenario` trains the learned `policy` (None: `relmas`) of `scenario` in,
    its reference baseline chosen on the `validation` rows of `relmas validate`."""
    settings = parse_training(config, source)
    study = Study(config, source)
    system = study.system(scenario)
    tables = study.costs(scenario, costs_dir)
    resize = _resizes(policy or catalog.learned()[0], tables, costs_dir, source)
    traces = list(study.validation_traces(scenario, costs_dir).values())
    chosen = _reference(settings.observation.reference, validation, scenario, tables.types, source)
    observation = observation_with(settings.observation, resize, chosen, traces[0])
    return TrainingSetup(settings, system, tables, resize, observation, traces)


def _reference(
    reference: str,
    validation: str | Path | None,
    scenario: str,
    types: Sequence[str],
    source: str | Path | None,
) -> tuple[str, str]:
    """The reference baseline and its placement: with `best`, the best rule or target-aware
    baseline of the `validation` rows (`best_placed`); a named one with the placement chosen
    for it there, or the whole system without validation rows."""
    if validation is None:
        if reference == catalog.BEST:
            expected = "the validation rows of relmas validate (--validation) to choose it by"
            raise InputError(source, "training.observation.reference", expected, reference)
        return reference, ALL
    if reference == catalog.BEST:
        return best_placed(validation, scenario, types)
    return reference, read_placements(validation, scenario, types).get(reference, ALL)


def observation_with(
    settings: ObservationSettings, resize: bool, reference: tuple[str, str], jobs: pl.DataFrame
) -> ObservationSettings:
    """The run's observation: `resize` set, the `reference` baseline and its placement, and
    `service` decided by whether the scenario's jobs (`jobs`, one of its traces) carry
    targets."""
    name, placement = reference
    observation = replace(settings, resize=resize, reference=name, placement=placement)
    return resolve_service(observation, jobs)


def _resizes(
    policy: str, tables: CostTables, costs_dir: str | Path, source: str | Path | None
) -> bool:
    """Whether the learned `policy` cuts layers (after checking it is learned and, if it cuts,
    that the piece tables have cuts)."""
    if policy not in catalog.learned():
        known = list(catalog.learned())
        raise InputError(source, "--policy", f"one of the learned policies {known}", policy)
    resize = policy in catalog.resizing()
    if resize and (tables.pieces is None or len(tables.pieces.variants) < 2):
        expected = "piece tables {accelerator}.pieces.parquet with cuts (relmas profile --pieces)"
        raise InputError(costs_dir, "resizing", expected, "none")
    return resize


def rollout(env: SchedulingEnv, policy: Policy) -> dict[str, float]:
    """Run the network's greedy policy or a teacher through one episode of `env` (one jitted
    call, `relmas.rl.collect.play`): its episode metrics, the share of its decisions that went
    to each kind of slot or waited (`share_<group>`), the share that went to each accelerator
    type (`share_type_<type>`) and, for a resizing agent, the share that cut a layer
    (`share_split`)."""
    layout = env.layout
    env.reset()
    counts = play(env, policy)
    groups = env.observation_settings.slot_groups()
    total = int(counts.sum())
    types = env.tables.types
    shares = dict.fromkeys((f"share_{group}" for group in groups), 0.0)
    shares |= dict.fromkeys((f"share_type_{kind}" for kind in types), 0.0)
    splits = 0
    for action in np.flatnonzero(counts):
        shares[f"share_{groups[layout.slot_of(action)]}"] += counts[action] / total
        if action < layout.actions - 1:
            shares[f"share_type_{types[layout.type_of(action)]}"] += counts[action] / total
        splits += counts[action] if layout.variant_of(action) > 0 else 0
    if layout.variants > 1:
        shares["share_split"] = splits / total
    return {**env.episode_metrics(), **shares}


def ranked(metrics: Mapping[str, float]) -> dict[str, float]:
    """What ranks validation `metrics` (`relmas.rl.run.best_scored`): the SLA rate and the
    shortfall, if any."""
    return {key: metrics[key] for key in RANKED if key in metrics}
