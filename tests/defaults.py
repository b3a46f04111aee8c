"""The training settings a test builds, as production builds them: the schema's defaults (the
settings dataclasses have none of their own) with the test's own values on top; and an agent
directory as `relmas train` writes it, for a network that was never trained."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from relmas.config import schema_defaults
from relmas.rl.agent import AgentInfo, write_agent_info
from relmas.rl.checkpoint import BEST, save_checkpoint
from relmas.rl.dqn import DQNConfig
from relmas.rl.env import RewardSettings
from relmas.rl.network import QNetwork
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
    (one row: no fixed part; no keeper), as `relmas.rl.overhead.decision_cost` lays it out."""
    cost = {"macs": macs, "energy_j": energy_j, "latency_s": 1e-7}
    fixed = dict.fromkeys(cost, 0.0)
    parts = {"fixed": fixed, "per_row": cost, "keeper_plan": fixed, "keeper_job": fixed}
    return {"accelerator": accelerator, **cost, **parts, "rows": 1}


def write_untrained_agent(
    directory: Path,
    net: QNetwork,
    observation: ObservationSettings,
    *,
    scenario: str,
    instance_types: Sequence[str],
    accelerator_types: Sequence[str],
    cost: dict[str, Any],
    teacher: str | None,
    teacher_bonus: float,
    validation: Mapping[str, float] | None = None,
    teachers_validation: Mapping[str, float] | None = None,
) -> None:
    """`directory`/best.pt and agent.json of `net` (untrained) deciding with `observation` on a
    system of `instance_types`, a decision costing `cost`, favouring `teacher` by
    `teacher_bonus`: what a deployed policy reads, without a training."""
    directory.mkdir(parents=True, exist_ok=True)
    save_checkpoint(directory / BEST, {"network": net.spec, "online": net.state_dict(), "step": 0})
    info = AgentInfo(
        scenario=scenario,
        observation=observation,
        reward=reward_settings(),
        instance_types=tuple(instance_types),
        accelerator_types=tuple(accelerator_types),
        split_variants=("whole",),
        decision_cost=cost,
        validation=dict(validation or {}),
        teacher=teacher,
        teacher_bonus=teacher_bonus,
        teachers_validation=dict(teachers_validation or {}),
    )
    write_agent_info(directory, info)
