"""Masked Double DQN: the configuration, action selection, the learning target and one update.

Masking enters in three places: the behaviour policy only ever picks valid actions (greedy or
random), the bootstrap action of the next state is the online network's argmax among *that state's*
valid actions (evaluated by the target network, van Hasselt et al. 2016), and the optional
large-margin imitation loss (DQfD, Hester et al. 2018) compares the teacher's action only with
valid alternatives.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from numba import njit
from torch import nn

from relmas.errors import InputError
from relmas.hw import jit_cache
from relmas.rl import network
from relmas.rl.network import QNetwork, greedy_action
from relmas.rl.replay_buffer import ReplayBuffer

CONFIG_SECTION = "training.dqn"  # where the DQNConfig keys live in the YAML config


@dataclass(frozen=True)
class DQNConfig:
    """Every setting of a training run; two runs with equal configs give equal weights (CPU).

    No defaults here: they are the schema's (`training.dqn`, relmas.config.schema_defaults), and
    `train_seeds` comes from `training.seeds`."""

    seed: int
    train_seeds: tuple[int, ...]  # make_env(seed) for each; episodes cycle through them
    total_steps: int  # environment steps (decisions)
    learning_rate: float
    gamma: float
    n_step: int
    buffer_size: int
    batch_size: int
    learning_starts: int  # steps before the first update (needs batch_size transitions)
    train_frequency: int  # one gradient step every this many environment steps
    target_update_every: int  # steps between target updates
    tau: float  # target ← tau·online + (1 − tau)·target; 1 = hard copy
    epsilon_start: float
    epsilon_end: float
    epsilon_fraction: float  # of total_steps over which epsilon decays linearly
    hidden: tuple[int, ...]
    dueling: bool
    double: bool
    grad_clip: float | None  # max gradient norm; None = no clipping
    validation_every: int  # steps between calls of validate(policy)
    validation_metric: str  # key of validate's result to maximise for best.pt
    checkpoint_every: int  # last.pt is written at the first episode end after this
    log_every: int  # steps between loss/epsilon reports
    teacher_steps: int  # the first steps act with teacher(obs, info) instead of epsilon-greedy
    margin_weight: float  # weight of the large-margin loss on teacher transitions
    margin_decay_steps: int  # then the weight falls linearly to 0 over these steps (0: never)
    margin: float  # DQfD's margin between the teacher's action and the others
    keep_teacher: bool  # keep the teacher's transitions in the replay for good (DQfD)
    teacher_bonus: float  # added to the teacher's action's Q-value wherever the network acts

    def __post_init__(self) -> None:
        # The range of each value is the schema's; this is the one check across values.
        if self.keep_teacher and self.buffer_size <= self.teacher_steps:
            expected = "more than teacher_steps when keep_teacher is set"
            raise InputError(None, "buffer_size", expected, self.buffer_size)

    @classmethod
    def from_dict(
        cls, values: Mapping[str, Any], file: str | Path | None = None, prefix: str = CONFIG_SECTION
    ) -> DQNConfig:
        """Build a config from the values of a validated config (relmas.config: lists for tuples,
        integers for floats), naming `prefix.key` if the check across values fails."""
        types = {f.name: f.type for f in fields(cls)}
        kwargs = {key: _converted(value, types[key]) for key, value in values.items()}
        try:
            return cls(**kwargs)
        except InputError as error:
            raise InputError(file, f"{prefix}.{error.key}", error.expected, error.got) from None


def _converted(value: Any, annotation: str) -> Any:
    """A YAML value as the DQNConfig field annotated `annotation` (a string under PEP 563) holds
    it: a list as a tuple, an integer of a float field as a float."""
    if isinstance(value, list):
        return tuple(value)
    if annotation.startswith("float") and value is not None:
        return float(value)
    return value


def linear_epsilon(step: int, config: DQNConfig) -> float:
    """Exploration rate at `step`: linear from epsilon_start to epsilon_end, then constant."""
    return epsilon_at(step, *epsilon_schedule(config))


def epsilon_schedule(config: DQNConfig) -> tuple[float, float, float]:
    """(start, end, steps of the decay): `epsilon_at`'s arguments after the step."""
    decay_steps = config.epsilon_fraction * config.total_steps
    return config.epsilon_start, config.epsilon_end, decay_steps


@njit(cache=True)
def epsilon_at(step: int, start: float, end: float, decay_steps: float) -> float:
    progress = min(1.0, step / decay_steps)
    return start + progress * (end - start)


def margin_weight_at(step: int, config: DQNConfig) -> float:
    """Weight of the large-margin loss at `step`: `margin_weight` while the teacher acts, then
    falling linearly to 0 over `margin_decay_steps` (0: constant), so that the agent is held near
    its teacher first and free to leave it later."""
    if config.margin_decay_steps == 0:
        return config.margin_weight
    after = max(0, step - config.teacher_steps)
    return config.margin_weight * max(0.0, 1.0 - after / config.margin_decay_steps)


@njit(cache=True)
def explore_uniform(seed: int, step: int, draw: int) -> float:
    """A uniform number in [0, 1) that depends only on (`seed`, `step`, `draw` 0 or 1), by the
    splitmix64 finaliser: exploration needs no generator state, so a run resumed at any step, or
    stepped by another loop, draws exactly the same numbers."""
    z = np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(2 * step + draw)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return float(z >> np.uint64(11)) / 9007199254740992.0  # 2**53


@njit(cache=True)
def epsilon_greedy(
    q_values: np.ndarray,
    mask: np.ndarray,
    epsilon: float,
    seed: int,
    step: int,
    favoured: int,
    bonus: float,
) -> int:
    """Masked epsilon-greedy at `step`: with probability epsilon a uniformly random *valid*
    action, else the greedy one (`relmas.rl.network.greedy_action`: the valid action with the
    largest Q-value, `bonus` added to that of `favoured`, the first on ties). Never returns an
    invalid action."""
    valid = 0
    for action in range(mask.shape[0]):
        valid += 1 if mask[action] else 0
    if valid == 0:
        raise ValueError("no valid action in the mask: the environment broke its contract")
    if explore_uniform(seed, step, 0) >= epsilon:
        return greedy_action(q_values, mask, favoured, bonus)
    k = int(explore_uniform(seed, step, 1) * valid)
    for action in range(mask.shape[0]):
        if mask[action]:
            if k == 0:
                return action
            k -= 1
    return -1  # not reached: k < valid


# The cached kernels embed the network's argmax: recompile when its source changes.
jit_cache.refresh(epsilon_greedy, (network, sys.modules[__name__]), stamp="relmas-rl-dqn.sha256")


def dqn_target(
    reward: torch.Tensor,
    discount: torch.Tensor,
    done: torch.Tensor,
    next_mask: torch.Tensor,
    next_q_target: torch.Tensor,
    next_q_online: torch.Tensor | None = None,
) -> torch.Tensor:
    """y = r + γ^m · (1 − done) · Q_target(s', a*), a* = argmax over the valid actions of s' of
    Q_online (Double DQN) — or of Q_target itself when `next_q_online` is None (vanilla DQN)."""
    selector = next_q_target if next_q_online is None else next_q_online
    best = selector.masked_fill(~next_mask, -torch.inf).argmax(dim=1, keepdim=True)
    bootstrap = next_q_target.gather(1, best).squeeze(1)
    return reward + discount * torch.where(done, torch.zeros_like(bootstrap), bootstrap)


def large_margin_loss(
    q_values: torch.Tensor,
    mask: torch.Tensor,
    action: torch.Tensor,
    expert: torch.Tensor,
    margin: float,
) -> torch.Tensor:
    """DQfD's supervised loss on teacher transitions: max over valid a of (Q(s,a) + margin·[a ≠
    a_teacher]) − Q(s, a_teacher), averaged over the teacher transitions of the batch."""
    if not bool(expert.any()):
        return q_values.new_zeros(())
    margins = torch.full_like(q_values, margin).scatter(1, action.unsqueeze(1), 0.0)
    best = (q_values + margins).masked_fill(~mask, -torch.inf).max(dim=1).values
    taken = q_values.gather(1, action.unsqueeze(1)).squeeze(1)
    return (best - taken)[expert].mean()


@dataclass
class Learner:
    """What learns in a run: the online and target networks, the optimizer, the replay buffer and
    the exploration seed (all of it saved in last.pt, `relmas.rl.checkpoint`)."""

    online: QNetwork
    target: QNetwork
    optimizer: torch.optim.Optimizer
    buffer: ReplayBuffer
    explore_seed: int  # of `explore_uniform`

    @classmethod
    def create(
        cls,
        config: DQNConfig,
        obs_dim: int,
        n_actions: int,
        rows: np.ndarray | None = None,
        per_row: int | None = None,
        blocks: tuple[int, ...] | None = None,
    ) -> Learner:
        """A fresh learner: the network (scoring `rows` of the observation, `per_row` scores
        each, the rows' `blocks`; None: a plain MLP, `QNetwork`) from
        `torch.manual_seed(config.seed)`, replay sampling and exploration from seeds derived
        from `config.seed`."""
        torch.manual_seed(config.seed)
        online = QNetwork(obs_dim, n_actions, config.hidden, config.dueling, rows, per_row, blocks)
        target = copy.deepcopy(online)
        optimizer = torch.optim.Adam(online.parameters(), lr=config.learning_rate)
        replay_seed, explore_seed = np.random.SeedSequence(config.seed).spawn(2)
        buffer = ReplayBuffer(config.buffer_size, obs_dim, n_actions, seed=replay_seed)
        explore = int(explore_seed.generate_state(1, np.uint64)[0] >> np.uint64(1))
        return cls(online, target, optimizer, buffer, explore)


@torch.no_grad()
def update_target(online: nn.Module, target: nn.Module, tau: float) -> None:
    """target ← tau·online + (1 − tau)·target, parameter by parameter (tau = 1: an exact copy)."""
    for target_param, online_param in zip(target.parameters(), online.parameters(), strict=True):
        target_param.mul_(1.0 - tau).add_(online_param, alpha=tau)


def td_update(
    online: nn.Module,
    target: nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: Mapping[str, np.ndarray],
    config: DQNConfig,
    margin_weight: float,
) -> dict[str, float]:
    """One gradient step of the Huber TD loss (+ `margin_weight` x the margin loss) on `batch`."""
    tensors = {name: torch.from_numpy(array) for name, array in batch.items()}
    with torch.no_grad():
        next_q_target = target(tensors["next_obs"])
        next_q_online = online(tensors["next_obs"]) if config.double else None
        y = dqn_target(
            tensors["reward"],
            tensors["discount"],
            tensors["done"],
            tensors["next_mask"],
            next_q_target,
            next_q_online,
        )
    q_values = online(tensors["obs"])
    taken = q_values.gather(1, tensors["action"].unsqueeze(1)).squeeze(1)
    td_loss = F.smooth_l1_loss(taken, y)
    loss = td_loss
    metrics = {"loss": td_loss.item(), "q_mean": taken.mean().item()}
    if margin_weight > 0:
        margin_loss = large_margin_loss(
            q_values, tensors["mask"], tensors["action"], tensors["expert"], config.margin
        )
        loss = loss + margin_weight * margin_loss
        metrics["margin_loss"] = margin_loss.item()
    optimizer.zero_grad()
    loss.backward()
    if config.grad_clip is not None:
        nn.utils.clip_grad_norm_(online.parameters(), config.grad_clip)
    optimizer.step()
    return metrics
