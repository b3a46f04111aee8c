"""The Q-network (a small MLP, optionally with a dueling head) and its cheap inference path.

Training uses torch; a scheduling decision must cost microseconds, which torch's per-call overhead
alone exceeds (~100 µs), so a trained network is exported to flat numpy arrays
(`to_numpy_weights`) and run by one Numba kernel, forward pass and masked argmax together
(`GreedyPolicy`). The same network is also described as a layer table (`policy_layer_table`) so
that the cost model can price running it on an accelerator.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
import torch
from numba import njit
from torch import nn

from relmas.schemas import LAYER_SCHEMA


class QNetwork(nn.Module):
    """MLP from an observation vector to one Q-value per action.

    With `dueling`, the last hidden layer feeds a state-value head V and an advantage head A, and
    Q = V + A - mean(A) (Wang et al. 2016), which helps when many actions have similar values.
    """

    def __init__(
        self,
        obs_dim: int,
        n_actions: int,
        hidden: Sequence[int],
        dueling: bool,
    ):
        super().__init__()
        self.spec: dict[str, Any] = {
            "obs_dim": int(obs_dim),
            "n_actions": int(n_actions),
            "hidden": tuple(int(width) for width in hidden),
            "dueling": bool(dueling),
        }
        layers: list[nn.Module] = []
        width_in = obs_dim
        for width in hidden:
            layers += [nn.Linear(width_in, width), nn.ReLU()]
            width_in = width
        self.trunk = nn.Sequential(*layers)
        if dueling:
            self.value = nn.Linear(width_in, 1)
            self.advantage = nn.Linear(width_in, n_actions)
        else:
            self.head = nn.Linear(width_in, n_actions)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        features = self.trunk(obs)
        if not self.spec["dueling"]:
            return self.head(features)
        advantage = self.advantage(features)
        return self.value(features) + advantage - advantage.mean(dim=-1, keepdim=True)


def build_network(spec: dict[str, Any]) -> QNetwork:
    """Rebuild a network from its `spec` (as stored in checkpoints)."""
    return QNetwork(spec["obs_dim"], spec["n_actions"], spec["hidden"], spec["dueling"])


@dataclass(frozen=True)
class NumpyWeights:
    """A snapshot of a QNetwork's weights for the Numba forward pass.

    `params` holds every linear layer's (in, out) weight matrix then bias, flattened in execution
    order; row l of `layout` is (weight offset, bias offset, in features, out features) of layer l.
    The last `n_heads` layers are the head (1) or the value and advantage heads (2, dueling).
    """

    params: np.ndarray
    layout: np.ndarray
    n_heads: int


def to_numpy_weights(net: QNetwork) -> NumpyWeights:
    """Copy the weights of `net` into flat float32 arrays (later training does not alter them)."""
    chunks: list[np.ndarray] = []
    layout = []
    offset = 0
    for _, linear in _linear_layers(net):
        weight = linear.weight.detach().numpy().T.ravel()
        bias = linear.bias.detach().numpy()
        layout.append((offset, offset + weight.size, linear.in_features, linear.out_features))
        chunks += [weight, bias]
        offset += weight.size + bias.size
    params = np.concatenate(chunks).astype(np.float32)
    return NumpyWeights(params, np.array(layout, dtype=np.int64), 2 if net.spec["dueling"] else 1)


@njit(cache=True)
def _dense(params, row, features, relu):
    weight = params[row[0] : row[0] + row[2] * row[3]].reshape((row[2], row[3]))
    out = params[row[1] : row[1] + row[3]].copy()
    # axpy order (one input at a time over all outputs) vectorises without reassociation
    for i in range(row[2]):
        value = features[i]
        for j in range(row[3]):
            out[j] += value * weight[i, j]
    if relu:
        for j in range(row[3]):
            out[j] = max(out[j], np.float32(0.0))
    return out


@njit(cache=True)
def forward_pass(params, layout, n_heads, obs):
    """Q-values of one observation by the network of (`params`, `layout`, `n_heads`), the fields
    of `NumpyWeights`."""
    n_trunk = layout.shape[0] - n_heads
    features = obs
    for layer in range(n_trunk):
        features = _dense(params, layout[layer], features, True)
    if n_heads == 1:
        return _dense(params, layout[n_trunk], features, False)
    value = _dense(params, layout[n_trunk], features, False)[0]
    advantage = _dense(params, layout[n_trunk + 1], features, False)
    return value + advantage - advantage.mean()


@njit(cache=True)
def masked_argmax(q_values: np.ndarray, mask: np.ndarray) -> int:
    """Index of the largest Q-value among valid actions (the first on ties; -1 if none)."""
    best = -1
    for action in range(q_values.shape[0]):
        if mask[action] and (best < 0 or q_values[action] > q_values[best]):
            best = action
    return best


def numpy_q_values(weights: NumpyWeights, obs: np.ndarray) -> np.ndarray:
    """Q-values of one observation, computed as QNetwork.forward does (float32)."""
    obs = np.ascontiguousarray(obs, dtype=np.float32)
    return forward_pass(weights.params, weights.layout, weights.n_heads, obs)


@njit(cache=True)
def greedy_action(q_values: np.ndarray, mask: np.ndarray, favoured: int, bonus: float) -> int:
    """The masked argmax of `q_values` with `bonus` added to action `favoured` (-1: none): a
    policy that leaves the favoured action only for one it values more by more than `bonus`."""
    if favoured >= 0 and bonus > 0.0:
        q_values = q_values.copy()
        q_values[favoured] += bonus
    return masked_argmax(q_values, mask)


@njit(cache=True)
def _greedy_decision(params, layout, n_heads, obs, mask, favoured, bonus):
    return greedy_action(forward_pass(params, layout, n_heads, obs), mask, favoured, bonus)


Favour = Callable[[np.ndarray, np.ndarray], int]  # (observation, mask) -> the favoured action


class GreedyPolicy:
    """The deployed scheduler: greedy masked argmax over the Numba forward pass.

    With a `favour` (the agent's teacher rule) and a positive `bonus`, the favoured action's
    Q-value is raised by `bonus` first: the network overrules its teacher only where it expects
    the change to be worth more than that (conservative improvement of a baseline policy, in the
    spirit of Laroche et al. 2019): small errors of its Q-values do not move it off the teacher."""

    def __init__(self, weights: NumpyWeights, favour: Favour | None = None, bonus: float = 0.0):
        if bonus < 0:
            raise ValueError(f"the teacher bonus must be >= 0, got {bonus}")
        self.weights = weights
        self.favour = favour if bonus > 0 else None
        self.bonus = bonus if favour is not None else 0.0

    def q_values(self, obs: np.ndarray) -> np.ndarray:
        return numpy_q_values(self.weights, obs)

    def __call__(self, obs: np.ndarray, mask: np.ndarray) -> int:
        obs = np.ascontiguousarray(obs, dtype=np.float32)
        mask = np.asarray(mask, dtype=bool)
        favoured = -1 if self.favour is None else int(self.favour(obs, mask))
        w = self.weights
        action = _greedy_decision(w.params, w.layout, w.n_heads, obs, mask, favoured, self.bonus)
        if action < 0:
            raise ValueError("no valid action in the mask: the environment broke its contract")
        return int(action)


def _linear_layers(net: QNetwork) -> list[tuple[str, nn.Linear]]:
    return [(name, m) for name, m in net.named_modules() if isinstance(m, nn.Linear)]


def forward_macs(net: QNetwork) -> int:
    """Multiply-accumulates of one forward pass on one observation (= one decision)."""
    return sum(m.in_features * m.out_features for _, m in _linear_layers(net))


def policy_layer_table(net: QNetwork, model: str = "relmas_policy") -> pl.DataFrame:
    """The network's layers as layer-table rows (LAYER_SCHEMA), batch 1, in execution order."""
    rows = [
        {
            "model": model,
            "layer": index,
            "name": name,
            "op": "linear",
            "N": 1,
            "K": m.out_features,
            "C": m.in_features,
            "Y": 1,
            "X": 1,
            "R": 1,
            "S": 1,
            "stride": 1,
            "groups": 1,
            "macs": m.in_features * m.out_features,
            "in_elems": m.in_features,
            "w_elems": m.in_features * m.out_features,
            "out_elems": m.out_features,
        }
        for index, (name, m) in enumerate(_linear_layers(net))
    ]
    return pl.DataFrame(rows, schema=LAYER_SCHEMA)
