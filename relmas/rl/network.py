"""The Q-network (one small MLP shared by every scored row, optionally with a dueling head) and
its cheap inference path.

The network scores rows gathered from the observation with one set of weights (Decima scores
every node with one network): for the scheduling agent a row per (candidate slot, accelerator
type) pair — the slot's, the type's and the pair's features and the globals — plus one for wait
(`relmas.rl.observation.Layout.rows`), so one network serves any number of slots and types. Each
row gives `per_row` scores (a resizing agent's split variants); the actions are the first
`n_actions` in row order. Without rows (any other Gymnasium environment) the one row is the
whole observation: a plain MLP with one output per action.

Training uses torch; a scheduling decision must cost microseconds, which torch's per-call overhead
alone exceeds (~100 µs), so a trained network is exported to flat numpy arrays
(`to_numpy_weights`) and run by one Numba kernel, forward pass and masked argmax together
(`GreedyPolicy`). The same network is also described as a layer table (`policy_layer_table`, each
shared layer run once per row) so that the cost model can price running it on an accelerator.
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
    """One MLP applied to every row of inputs gathered from an observation (`rows`, int64[rows,
    inputs]: observation indices, `obs_dim` standing for 0 and `obs_dim` + 1 for 1; None: one row,
    the observation), `per_row` scores each; Q = the first `n_actions` scores in row order.

    With `dueling`, a state-value head V reads the mean of the rows' last hidden features and
    Q = V + A - mean(A) over the actions (Wang et al. 2016), which helps when many actions have
    similar values.
    """

    def __init__(
        self,
        obs_dim: int,
        n_actions: int,
        hidden: Sequence[int],
        dueling: bool,
        rows: np.ndarray | Sequence[Sequence[int]] | None = None,
        per_row: int | None = None,
    ):
        super().__init__()
        gather = np.arange(obs_dim)[None] if rows is None else np.asarray(rows, dtype=np.int64)
        per_row = n_actions if rows is None else int(per_row or 1)
        if gather.shape[0] * per_row < n_actions or gather.min() < 0 or gather.max() > obs_dim + 1:
            raise ValueError(f"rows of {gather.shape} x {per_row} cannot score {n_actions} actions")
        self.spec: dict[str, Any] = {
            "obs_dim": int(obs_dim),
            "n_actions": int(n_actions),
            "hidden": tuple(int(width) for width in hidden),
            "dueling": bool(dueling),
            "rows": None if rows is None else gather.tolist(),
            "per_row": int(per_row),
        }
        self.rows = torch.as_tensor(gather)  # not a parameter: the observation's layout
        layers: list[nn.Module] = []
        width_in = gather.shape[1]
        for width in hidden:
            layers += [nn.Linear(width_in, width), nn.ReLU()]
            width_in = width
        self.trunk = nn.Sequential(*layers)
        if dueling:
            self.value = nn.Linear(width_in, 1)
            self.advantage = nn.Linear(width_in, per_row)
        else:
            self.head = nn.Linear(width_in, per_row)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        batch = obs.reshape(-1, obs.shape[-1])
        padded = torch.cat(
            [batch, batch.new_zeros(len(batch), 1), batch.new_ones(len(batch), 1)], 1
        )
        features = self.trunk(padded[:, self.rows])  # [batch, rows, hidden]
        n_actions = self.spec["n_actions"]
        if not self.spec["dueling"]:
            q = self.head(features).flatten(1)[:, :n_actions]
        else:
            advantage = self.advantage(features).flatten(1)[:, :n_actions]
            value = self.value(features.mean(dim=1))
            q = value + advantage - advantage.mean(dim=-1, keepdim=True)
        return q.reshape(*obs.shape[:-1], n_actions)

    @property
    def row_count(self) -> int:
        """Rows scored per observation: the shared layers' runs per decision."""
        return int(self.rows.shape[0])


def build_network(spec: dict[str, Any]) -> QNetwork:
    """Rebuild a network from its `spec` (as stored in checkpoints)."""
    return QNetwork(
        spec["obs_dim"],
        spec["n_actions"],
        spec["hidden"],
        spec["dueling"],
        spec.get("rows"),
        spec.get("per_row"),
    )


@dataclass(frozen=True)
class NumpyWeights:
    """A snapshot of a QNetwork's weights for the Numba forward pass.

    `params` holds every linear layer's (in, out) weight matrix then bias, flattened in execution
    order; row l of `layout` is (weight offset, bias offset, in features, out features) of layer l.
    The last `n_heads` layers are the head (1) or the value and advantage heads (2, dueling).
    `rows`, `n_actions` and `obs_dim` are the network's (`QNetwork`).
    """

    params: np.ndarray
    layout: np.ndarray
    n_heads: int
    rows: np.ndarray
    n_actions: int
    obs_dim: int


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
    heads = 2 if net.spec["dueling"] else 1
    rows = np.ascontiguousarray(net.rows.numpy(), dtype=np.int64)
    spec = net.spec
    layers = np.array(layout, dtype=np.int64)
    return NumpyWeights(params, layers, heads, rows, spec["n_actions"], spec["obs_dim"])


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
def forward_pass(params, layout, n_heads, rows, n_actions, obs):
    """Q-values of one observation by the network of (`params`, `layout`, `n_heads`, `rows`,
    `n_actions`), the fields of `NumpyWeights`: the shared layers once per row."""
    n_trunk = layout.shape[0] - n_heads
    size = obs.shape[0]
    padded = np.empty(size + 2, dtype=np.float32)
    padded[:size] = obs
    padded[size] = 0.0
    padded[size + 1] = 1.0
    head = layout[layout.shape[0] - 1]
    per_row = head[3]
    scores = np.empty(rows.shape[0] * per_row, dtype=np.float32)
    width = layout[n_trunk - 1, 3] if n_trunk > 0 else rows.shape[1]
    summed = np.zeros(width, dtype=np.float32)
    for r in range(rows.shape[0]):
        features = np.empty(rows.shape[1], dtype=np.float32)
        for i in range(rows.shape[1]):
            features[i] = padded[rows[r, i]]
        for layer in range(n_trunk):
            features = _dense(params, layout[layer], features, True)
        scores[r * per_row : (r + 1) * per_row] = _dense(params, head, features, False)
        if n_heads == 2:
            summed += features
    q_values = scores[:n_actions].copy()
    if n_heads == 1:
        return q_values
    value = _dense(params, layout[n_trunk], summed / np.float32(rows.shape[0]), False)[0]
    return value + q_values - q_values.mean()


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
    return forward_pass(*network_arguments(weights), obs)


def network_arguments(weights: NumpyWeights) -> tuple[np.ndarray, np.ndarray, int, np.ndarray, int]:
    """`forward_pass`'s arguments before the observation: for a kernel that runs the network."""
    return weights.params, weights.layout, weights.n_heads, weights.rows, weights.n_actions


@njit(cache=True)
def greedy_action(q_values: np.ndarray, mask: np.ndarray, favoured: int, bonus: float) -> int:
    """The masked argmax of `q_values` with `bonus` added to action `favoured` (-1: none): a
    policy that leaves the favoured action only for one it values more by more than `bonus`."""
    if favoured >= 0 and bonus > 0.0:
        q_values = q_values.copy()
        q_values[favoured] += bonus
    return masked_argmax(q_values, mask)


@njit(cache=True)
def _greedy_decision(params, layout, n_heads, rows, n_actions, obs, mask, favoured, bonus):
    q_values = forward_pass(params, layout, n_heads, rows, n_actions, obs)
    return greedy_action(q_values, mask, favoured, bonus)


Favour = Callable[[np.ndarray, np.ndarray], int]  # (observation, mask) -> the favoured action


class GreedyPolicy:
    """The deployed scheduler: greedy masked argmax over the Numba forward pass.

    With a `favour` (the agent's teacher, (observation, mask) -> action) and a positive `bonus`, the
    favoured action's Q-value is raised by `bonus` first: the network overrules its teacher only
    where it expects the change to be worth more than that (conservative improvement of a baseline
    policy, in the spirit of Laroche et al. 2019): small errors of its Q-values do not move it off
    the teacher."""

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
        arguments = network_arguments(self.weights)
        action = _greedy_decision(*arguments, obs, mask, favoured, self.bonus)
        if action < 0:
            raise ValueError("no valid action in the mask: the environment broke its contract")
        return int(action)


def _linear_layers(net: QNetwork) -> list[tuple[str, nn.Linear]]:
    return [(name, m) for name, m in net.named_modules() if isinstance(m, nn.Linear)]


def _runs(net: QNetwork, name: str) -> int:
    """How often layer `name` runs per decision: once per row, the value head once."""
    return 1 if name == "value" else net.row_count


def forward_macs(net: QNetwork) -> int:
    """Multiply-accumulates of one forward pass on one observation (= one decision): the shared
    layers once per row."""
    return sum(_runs(net, name) * m.in_features * m.out_features for name, m in _linear_layers(net))


def policy_layer_table(net: QNetwork, model: str = "relmas_policy") -> pl.DataFrame:
    """The network's layers as layer-table rows (LAYER_SCHEMA), in execution order: the shared
    layers with a batch of one row per scored row (`QNetwork.row_count`), the value head with 1."""
    rows = [
        {
            "model": model,
            "layer": index,
            "name": name,
            "op": "linear",
            "N": (n := _runs(net, name)),
            "K": m.out_features,
            "C": m.in_features,
            "Y": 1,
            "X": 1,
            "R": 1,
            "S": 1,
            "stride": 1,
            "groups": 1,
            "macs": n * m.in_features * m.out_features,
            "in_elems": n * m.in_features,
            "w_elems": m.in_features * m.out_features,
            "out_elems": n * m.out_features,
        }
        for index, (name, m) in enumerate(_linear_layers(net))
    ]
    return pl.DataFrame(rows, schema=LAYER_SCHEMA)
