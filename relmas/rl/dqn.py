"""Masked Double DQN: the configuration, action selection, the learning target and one update.

Masking enters in three places: the behaviour policy only ever picks valid actions (greedy or
random), the bootstrap action of the next state is the online network's argmax among *that state's*
valid actions (evaluated by the target network, van Hasselt et al. 2016), and the optional
large-margin imitation loss (DQfD, Hester et al. 2018) compares the teacher's action only with
valid alternatives.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from relmas.errors import InputError
from relmas.rl.network import QNetwork, masked_argmax
from relmas.rl.replay import ReplayBuffer

CONFIG_SECTION = "training.dqn"  # where the DQNConfig keys live in the YAML config


@dataclass(frozen=True)
class DQNConfig:
    """Every setting of a training run; two runs with equal configs give equal weights (CPU)."""

    seed: int = 0
    train_seeds: tuple[int, ...] = (0,)  # make_env(seed) for each; episodes cycle through them
    total_steps: int = 100_000  # environment steps (decisions)
    learning_rate: float = 5e-4
    gamma: float = 0.99
    n_step: int = 1
    buffer_size: int = 50_000
    batch_size: int = 64
    learning_starts: int = 1_000  # steps before the first update (needs batch_size transitions)
    train_frequency: int = 1  # one gradient step every this many environment steps
    target_update_every: int = 500  # steps between target updates
    tau: float = 1.0  # target ← tau·online + (1 − tau)·target; 1 = hard copy
    epsilon_start: float = 1.0
    epsilon_end: float = 0.05
    epsilon_fraction: float = 0.5  # of total_steps over which epsilon decays linearly
    hidden: tuple[int, ...] = (128, 128)
    dueling: bool = False
    double: bool = True
    grad_clip: float | None = 10.0  # max gradient norm; None = no clipping
    validation_every: int = 10_000  # steps between calls of validate(policy)
    validation_metric: str = "sla_rate"  # key of validate's result to maximise for best.pt
    checkpoint_every: int = 10_000  # last.pt is written at the first episode end after this
    log_every: int = 1_000  # steps between loss/epsilon reports
    teacher_steps: int = 0  # the first steps act with teacher(obs, info) instead of epsilon-greedy
    margin_weight: float = 0.0  # weight of the large-margin loss on teacher transitions
    margin: float = 0.8  # DQfD's margin between the teacher's action and the others
    keep_teacher: bool = False  # keep the teacher's transitions in the replay for good (DQfD)

    def __post_init__(self) -> None:
        positive = (
            "total_steps buffer_size batch_size train_frequency target_update_every n_step "
            "validation_every checkpoint_every log_every learning_rate"
        )
        for name in positive.split():
            _require(self, name, getattr(self, name) > 0, "a positive number")
        for name in ("learning_starts", "teacher_steps", "margin_weight", "margin"):
            _require(self, name, getattr(self, name) >= 0, "a non-negative number")
        for name in ("gamma", "tau", "epsilon_fraction"):
            _require(self, name, 0 < getattr(self, name) <= 1, "a number in (0, 1]")
        for name in ("epsilon_start", "epsilon_end"):
            _require(self, name, 0 <= getattr(self, name) <= 1, "a number in [0, 1]")
        _require(self, "grad_clip", self.grad_clip is None or self.grad_clip > 0, "null or > 0")
        _require(self, "hidden", len(self.hidden) > 0 and min(self.hidden) > 0, "positive widths")
        _require(self, "train_seeds", len(self.train_seeds) > 0, "at least one seed")
        _require(self, "validation_metric", bool(self.validation_metric), "a metric name")
        _require(
            self,
            "buffer_size",
            not self.keep_teacher or self.buffer_size > self.teacher_steps,
            "more than teacher_steps when keep_teacher is set",
        )

    @classmethod
    def from_dict(
        cls, values: Mapping[str, Any], file: str | Path | None = None, prefix: str = CONFIG_SECTION
    ) -> DQNConfig:
        """Build a config from YAML values (lists for tuples), naming `prefix.key` on bad input."""
        known = {f.name: f for f in fields(cls)}
        kwargs = {}
        for key, value in values.items():
            if key not in known:
                raise InputError(file, f"{prefix}.{key}", f"one of the keys {sorted(known)}")
            kwargs[key] = _coerce(value, known[key].type, file, f"{prefix}.{key}")
        try:
            return cls(**kwargs)
        except InputError as error:
            raise InputError(file, f"{prefix}.{error.key}", error.expected, error.got) from None


def _require(config: DQNConfig, name: str, ok: bool, expected: str) -> None:
    if not ok:
        raise InputError(None, name, expected, getattr(config, name))


_SCALARS: dict[str, tuple[type, ...]] = {"int": (int,), "float": (int, float), "str": (str,)}


def _coerce(value: Any, annotation: str, file: str | Path | None, key: str) -> Any:
    """Check a YAML value against a DQNConfig field annotation (a string under PEP 563)."""
    if annotation == "bool":
        ok = isinstance(value, bool)
    elif annotation == "tuple[int, ...]":
        ok = isinstance(value, list | tuple) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        )
        value = tuple(value) if ok else value
    else:
        optional = annotation.endswith(" | None")
        kinds = _SCALARS[annotation.removesuffix(" | None")]
        ok = (optional and value is None) or (
            isinstance(value, kinds) and not isinstance(value, bool)
        )
        if ok and value is not None and annotation.startswith("float"):
            value = float(value)
    if not ok:
        raise InputError(file, key, f"a value of type {annotation}", value)
    return value


def linear_epsilon(step: int, config: DQNConfig) -> float:
    """Exploration rate at `step`: linear from epsilon_start to epsilon_end, then constant."""
    decay_steps = config.epsilon_fraction * config.total_steps
    progress = min(1.0, step / decay_steps)
    return config.epsilon_start + progress * (config.epsilon_end - config.epsilon_start)


def select_action(
    q_values: np.ndarray, mask: np.ndarray, epsilon: float, rng: np.random.Generator
) -> int:
    """Masked epsilon-greedy: with probability epsilon a uniformly random *valid* action, else the
    valid action with the largest Q-value. Never returns an invalid action."""
    mask = np.asarray(mask, dtype=bool)
    if rng.random() < epsilon:
        valid = np.flatnonzero(mask)
        if valid.size == 0:
            raise ValueError("no valid action in the mask: the environment broke its contract")
        return int(rng.choice(valid))
    return masked_argmax(q_values, mask)


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
    the exploration generator (all of it saved in last.pt, `relmas.rl.checkpoint`)."""

    online: QNetwork
    target: QNetwork
    optimizer: torch.optim.Optimizer
    buffer: ReplayBuffer
    explore_rng: np.random.Generator

    @classmethod
    def create(cls, config: DQNConfig, obs_dim: int, n_actions: int) -> Learner:
        """A fresh learner: the network from `torch.manual_seed(config.seed)`, replay sampling
        and exploration from their own generators seeded from `config.seed`."""
        torch.manual_seed(config.seed)
        online = QNetwork(obs_dim, n_actions, config.hidden, config.dueling)
        target = copy.deepcopy(online)
        optimizer = torch.optim.Adam(online.parameters(), lr=config.learning_rate)
        replay_seed, explore_seed = np.random.SeedSequence(config.seed).spawn(2)
        buffer = ReplayBuffer(config.buffer_size, obs_dim, n_actions, seed=replay_seed)
        return cls(online, target, optimizer, buffer, np.random.default_rng(explore_seed))


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
) -> dict[str, float]:
    """One gradient step of the Huber TD loss (+ the margin loss when configured) on `batch`."""
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
    if config.margin_weight > 0:
        margin_loss = large_margin_loss(
            q_values, tensors["mask"], tensors["action"], tensors["expert"], config.margin
        )
        loss = loss + config.margin_weight * margin_loss
        metrics["margin_loss"] = margin_loss.item()
    optimizer.zero_grad()
    loss.backward()
    if config.grad_clip is not None:
        nn.utils.clip_grad_norm_(online.parameters(), config.grad_clip)
    optimizer.step()
    return metrics
