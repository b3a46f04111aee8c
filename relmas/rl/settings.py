"""The `training:` section of the config, checked and turned into typed settings.

    training:
      seeds: [0, 1, 2, 3, 4, 5, 6, 7]   # training traces (never the evaluation seeds)
      validation_seeds: [100, 101]      # traces scored every dqn.validation_every steps
      jobs: null                        # jobs per training/validation trace (null = the scenario's)
      observation: {candidates: 2, reference: best, service: null}
      reward: {met: 1.0, missed: 1.0, priority_exponent: 0.0, progress: 1.0,
               deficit_weight: 0.0, shortfall: 0.0}
      keeper: {traces: 0, jobs: 500, rounds: 2, horizon_jobs: 40, threshold: 0.5}
      overhead_accelerator: null        # runs the policy network (null = cheapest system type)
      dqn: {...}                        # relmas.rl.dqn.DQNConfig keys except train_seeds

Defaults live in the config schema (workflow/schemas/config.schema.yaml), which validates types;
this module adds the cross-checks a schema cannot express and names `training.<key>` on errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from relmas.errors import InputError
from relmas.rl.dqn import DQNConfig
from relmas.rl.env import RewardSettings
from relmas.rl.observation import ObservationSettings


@dataclass(frozen=True)
class KeeperSettings:
    """The `training.keeper` section: how the keeper that gives jobs up is learned
    (`relmas.rl.keeping`); `traces` 0: no keeper."""

    traces: int
    jobs: int
    rounds: int
    horizon_jobs: int
    threshold: float


@dataclass(frozen=True)
class TrainingSettings:
    """The `training:` section; no defaults here: the schema's are filled in when it is loaded."""

    seeds: tuple[int, ...]
    validation_seeds: tuple[int, ...]
    jobs: int | None
    observation: ObservationSettings
    reward: RewardSettings
    keeper: KeeperSettings
    overhead_accelerator: str | None
    dqn: DQNConfig


def parse_training(config: Mapping[str, Any], source: str | Path | None = None) -> TrainingSettings:
    """Settings from `config["training"]` of a validated config (relmas.config: the schema's types,
    enums and defaults), with the cross-checks the schema cannot express."""
    raw = config["training"]
    seeds = tuple(raw["seeds"])
    validation = tuple(raw["validation_seeds"])
    reserved = set(config["evaluation"]["seeds"])
    for key, values in (("seeds", seeds), ("validation_seeds", validation)):
        clash = sorted(reserved.intersection(values))
        if clash:
            raise InputError(source, f"training.{key}", "seeds unused by evaluation.seeds", clash)
    if set(seeds) & set(validation):
        overlap = sorted(set(seeds) & set(validation))
        raise InputError(source, "training.validation_seeds", "seeds unused for training", overlap)
    keeper = KeeperSettings(**raw["keeper"])
    if keeper.traces > len(seeds):
        expected = f"at most the {len(seeds)} training.seeds"
        raise InputError(source, "training.keeper.traces", expected, keeper.traces)
    overhead = raw["overhead_accelerator"]
    if overhead is not None and overhead not in config["accelerators"]:
        known_acc = sorted(config["accelerators"])
        raise InputError(
            source, "training.overhead_accelerator", f"one of {known_acc} or null", overhead
        )
    return TrainingSettings(
        seeds=seeds,
        validation_seeds=validation,
        jobs=raw["jobs"],
        observation=ObservationSettings(**raw["observation"]),
        reward=RewardSettings(**raw["reward"]),
        keeper=keeper,
        overhead_accelerator=overhead,
        dqn=DQNConfig.from_dict({**raw["dqn"], "train_seeds": seeds}, source),
    )
