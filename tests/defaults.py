"""The training settings a test builds, as production builds them: the schema's defaults (the
settings dataclasses have none of their own) with the test's own values on top."""

from __future__ import annotations

from typing import Any

from relmas.config import schema_defaults
from relmas.rl.dqn import DQNConfig
from relmas.rl.env import RewardSettings
from relmas.rl.observation import ObservationSettings


def dqn_config(**values: Any) -> DQNConfig:
    """`training.dqn`'s defaults, trained on `training.seeds`' defaults, with `values` on top."""
    seeds = schema_defaults("training")["seeds"]
    return DQNConfig.from_dict({**schema_defaults("training.dqn"), "train_seeds": seeds, **values})


def observation_settings(**values: Any) -> ObservationSettings:
    return ObservationSettings(**{**schema_defaults("training.observation"), **values})


def reward_settings(**values: Any) -> RewardSettings:
    return RewardSettings(**{**schema_defaults("training.reward"), **values})


def decision_cost(accelerator: str, macs: int = 100, energy_j: float = 1e-9) -> dict[str, Any]:
    """An agent.json's decision cost of `macs` and `energy_j` per decision, every row scored
    (one row: no fixed part), as `relmas.rl.overhead.decision_cost` lays it out."""
    cost = {"macs": macs, "energy_j": energy_j, "latency_s": 1e-7}
    fixed = dict.fromkeys(cost, 0.0)
    return {"accelerator": accelerator, **cost, "fixed": fixed, "per_row": cost, "rows": 1}
