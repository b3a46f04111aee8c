"""The Q-network (one small MLP shared by every scored row, optionally with a dueling head) and
its cheap inference path.

The network scores rows gathered from the observation with one set of weights (Decima scores
every node with one network): for the scheduling agent a row per (candidate slot, accelerator
type) pair — the slot's, the type's and the pair's features and the globals — plus one for wait
(`relmas.rl.features.Layout.rows`), so one network serves any number of slots and types. Each
row gives `per_row` scores (a resizing agent's split variants); the actions are the first
`n_actions` in row order. Without rows (any other Gymnasium environment) the one row is the
whole observation: a plain MLP with one output per action.

Training uses torch; a scheduling decision must cost microseconds, which torch's per-call overhead
alone exceeds (~100 µs), so a trained network is exported to flat numpy arrays
(`to_numpy_weights`) and run by one Numba kernel, forward pass and masked argmax together
(`GreedyPolicy`, `greedy_decision`). That kernel computes less than every row, with the same
weights: the first layer is a sum over the row's blocks (slot, type, pair, globals, wait flag),
each shared block projected once (`Factors`), and a decision scores only the rows of its valid
actions. The same decision is also described as a layer table (`policy_layer_table`: the shared
projections, then the per-row layers batched over the rows scored) so that the cost model can
price running it on an accelerator.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import polars as pl
import torch
from numba import njit
from torch import nn

from relmas.schemas import LAYER_SCHEMA


class QNetwork(nn.Module):
    """One MLP applied to every row of inputs gathered from an observation (`rows`, int64[rows,
    inputs]: observation indices, `obs_dim` standing for 0 and `obs_dim` + 1 for 1; None: one row,
    the observation), `per_row` scores each; Q = the first `n_actions` scores in row order. A row
    is made of `blocks` (widths; None: one block), which the Numba kernel projects apart
    (`Factors`); torch multiplies the whole gathered row.

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
        blocks: Sequence[int] | None = None,
    ):
        super().__init__()
        gather = np.arange(obs_dim)[None] if rows is None else np.asarray(rows, dtype=np.int64)
        per_row = n_actions if rows is None else int(per_row or 1)
        blocks = (gather.shape[1],) if blocks is None else tuple(int(width) for width in blocks)
        if gather.shape[0] * per_row < n_actions or gather.min() < 0 or gather.max() > obs_dim + 1:
            raise ValueError(f"rows of {gather.shape} x {per_row} cannot score {n_actions} actions")
        if sum(blocks) != gather.shape[1] or min(blocks) < 1:
            raise ValueError(f"blocks {blocks} do not split rows of {gather.shape[1]} inputs")
        if not hidden:
            raise ValueError("the network needs at least one hidden layer")
        self.spec: dict[str, Any] = {
            "obs_dim": int(obs_dim),
            "n_actions": int(n_actions),
            "hidden": tuple(int(width) for width in hidden),
            "dueling": bool(dueling),
            "rows": None if rows is None else gather.tolist(),
            "per_row": int(per_row),
            "blocks": blocks,
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
        # the rows' inputs gathered by one index_select (the same values as `padded[:, self.rows]`,
        # whose advanced indexing is several times slower on a training batch)
        gathered = padded.index_select(1, self.rows.flatten()).view(len(batch), *self.rows.shape)
        features = self.trunk(gathered)  # [batch, rows, hidden]
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
        spec.get("blocks"),
    )


@dataclass(frozen=True)
class NumpyWeights:
    """A snapshot of a QNetwork's weights for the Numba forward pass.

    `params` holds every linear layer's (in, out) weight matrix then bias, flattened in execution
    order; row l of `layout` is (weight offset, bias offset, in features, out features) of layer l.
    The last `n_heads` layers are the head (1) or the value and advantage heads (2, dueling).
    The first layer is factorised over the row's blocks (`Factors`). `n_actions` and `obs_dim`
    are the network's (`QNetwork`).
    """

    params: np.ndarray
    layout: np.ndarray
    n_heads: int
    factors: Factors
    n_actions: int
    obs_dim: int


class NetworkArrays(NamedTuple):
    """A network as its kernels run it (`forward_pass`, `greedy_decision`): the fields of
    `NumpyWeights` with its `Factors`."""

    params: np.ndarray
    layout: np.ndarray
    n_heads: int
    blocks: np.ndarray
    parts: np.ndarray
    row_parts: np.ndarray
    n_actions: int


class Factors(NamedTuple):
    """The first layer over a row [block 0 | block 1 | ...] is the bias plus each block's
    projection (its inputs times its columns of the weights): a block's distinct inputs are
    *parts*, projected once however many rows read them. A *shared* block (one whose parts serve
    several rows, e.g. a slot's features read by its pair with every type) is projected whole at
    each decision; the others (a pair's own features) only for the rows scored."""

    blocks: np.ndarray  # int64[blocks, 3]: first column, width, 1 if shared
    parts: np.ndarray  # int64[parts, 1 + widest block]: its block, then the inputs it reads
    row_parts: np.ndarray  # int64[rows, blocks]: the part each row reads (-1: all zero)


def factorise(rows: np.ndarray, widths: Sequence[int], obs_dim: int) -> Factors:
    """The parts of `rows` (`QNetwork.rows`) split into blocks of `widths`; a part that reads
    only the padding's 0 (`obs_dim`) adds nothing and is left out."""
    starts = np.concatenate([[0], np.cumsum(widths)[:-1]]).astype(np.int64)
    row_parts = np.full((rows.shape[0], len(widths)), -1, dtype=np.int64)
    parts: list[list[int]] = []
    blocks = []
    for b, (start, width) in enumerate(zip(starts, widths, strict=True)):
        seen: dict[tuple[int, ...], int] = {}
        for r in range(rows.shape[0]):
            part = tuple(int(i) for i in rows[r, start : start + width])
            if all(i == obs_dim for i in part):
                continue
            if part not in seen:
                seen[part] = len(parts)
                parts.append([b, *part, *[obs_dim] * (max(widths) - width)])
            row_parts[r, b] = seen[part]
        readers = np.bincount(row_parts[:, b][row_parts[:, b] >= 0], minlength=len(parts))
        blocks.append((start, width, int(readers.max(initial=0) > 1)))
    table = np.array(parts, dtype=np.int64).reshape(len(parts), 1 + max(widths))
    return Factors(np.array(blocks, dtype=np.int64), table, row_parts)


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
    spec = net.spec
    factors = factorise(net.rows.numpy(), spec["blocks"], spec["obs_dim"])
    layers = np.array(layout, dtype=np.int64)
    return NumpyWeights(params, layers, heads, factors, spec["n_actions"], spec["obs_dim"])


@njit(cache=True)
def _dense(params, row, features, out, relu):
    """out[:width] = the layer `row` of `features` (ReLU if `relu`); `out` is a scratch buffer
    (a decision scores tens of rows: allocating per row would cost more than the arithmetic)."""
    n_out = row[3]
    # axpy order (one input at a time over all outputs) vectorises without reassociation; the
    # weights are read through slices, whose indices (a range) cannot be negative: an offset
    # index would be tested for Python's negative indexing element by element
    bias = params[row[1] : row[1] + n_out]
    for j in range(n_out):
        out[j] = bias[j]
    for i in range(row[2]):
        value = features[i]
        weights = params[row[0] + i * n_out : row[0] + (i + 1) * n_out]
        for j in range(n_out):
            out[j] += value * weights[j]
    if relu:
        for j in range(n_out):
            out[j] = max(out[j], np.float32(0.0))


@njit(cache=True)
def _project(params, first, blocks, part, padded, out):
    """out += the first layer's columns of `part`'s block times the inputs `part` reads."""
    start, width = blocks[part[0], 0], blocks[part[0], 1]
    n_out = first[3]
    for i in range(width):
        value = padded[part[1 + i]]
        at = first[0] + (start + i) * n_out
        weights = params[at : at + n_out]
        for j in range(n_out):
            out[j] += value * weights[j]


@njit(cache=True)
def _row_scores(N: NetworkArrays, obs: np.ndarray, scored: np.ndarray):
    """The head's scores of the rows `scored` (NaN for the others; the advantages with a dueling
    head), the sum of their last hidden features, and how many rows were scored: the first layer
    from the shared blocks' projections, made once, and the row's own blocks."""
    params, layout, n_heads, blocks, parts, row_parts, n_actions = N
    size = obs.shape[0]
    padded = np.empty(size + 2, dtype=np.float32)
    padded[:size] = obs
    padded[size] = 0.0
    padded[size + 1] = 1.0
    n_trunk = layout.shape[0] - n_heads
    first, head = layout[0], layout[layout.shape[0] - 1]
    per_row = head[3]
    projected = np.zeros((parts.shape[0], first[3]), dtype=np.float32)
    for p in range(parts.shape[0]):
        if blocks[parts[p, 0], 2] == 1:
            _project(params, first, blocks, parts[p], padded, projected[p])
    scores = np.full(row_parts.shape[0] * per_row, np.nan, dtype=np.float32)
    width = layout[n_trunk - 1, 3]
    summed = np.zeros(width, dtype=np.float32)
    widest = layout[:, 3].max()
    features, other = np.empty(widest, np.float32), np.empty(widest, np.float32)
    bias = params[first[1] : first[1] + first[3]]  # slices: see `_dense`
    count = 0
    for r in range(row_parts.shape[0]):
        if not scored[r]:
            continue
        count += 1
        for j in range(first[3]):
            features[j] = bias[j]
        for b in range(blocks.shape[0]):
            p = row_parts[r, b]
            if p < 0:
                continue
            if blocks[b, 2] == 1:
                for j in range(first[3]):
                    features[j] += projected[p, j]
            else:
                _project(params, first, blocks, parts[p], padded, features)
        for j in range(first[3]):
            features[j] = np.maximum(features[j], np.float32(0.0))
        for layer in range(1, n_trunk):
            _dense(params, layout[layer], features, other, True)
            features, other = other, features
        _dense(params, head, features, scores[r * per_row : (r + 1) * per_row], False)
        for j in range(width):
            summed[j] += features[j]
    return scores[:n_actions].copy(), summed, count


@njit(cache=True)
def forward_pass(N: NetworkArrays, obs: np.ndarray) -> np.ndarray:
    """Q-values of one observation by the network `N`: every row scored."""
    every = np.ones(N.row_parts.shape[0], dtype=np.bool_)
    scores, summed, count = _row_scores(N, obs, every)
    if N.n_heads == 1:
        return scores
    n_trunk = N.layout.shape[0] - N.n_heads
    value = np.empty(1, np.float32)
    _dense(N.params, N.layout[n_trunk], summed / np.float32(count), value, False)
    return value[0] + scores - scores.mean()


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
    return forward_pass(network_arrays(weights), obs)


def network_arrays(weights: NumpyWeights) -> NetworkArrays:
    """`weights` as a kernel that runs the network takes them."""
    return NetworkArrays(
        weights.params, weights.layout, weights.n_heads, *weights.factors, weights.n_actions
    )


def no_network(n_actions: int) -> NetworkArrays:
    """`network_arrays` for a kernel that takes a network but is not to run one."""
    empty = np.zeros((0, 3), np.int64), np.zeros((0, 1), np.int64), np.zeros((0, 1), np.int64)
    return NetworkArrays(np.zeros(0, np.float32), np.zeros((0, 4), np.int64), 1, *empty, n_actions)


@njit(cache=True)
def greedy_action(q_values: np.ndarray, mask: np.ndarray, favoured: int, bonus: float) -> int:
    """The masked argmax of `q_values` with `bonus` added to action `favoured` (-1: none): a
    policy that leaves the favoured action only for one it values more by more than `bonus`."""
    if favoured >= 0 and bonus > 0.0:
        q_values = q_values.copy()
        q_values[favoured] += bonus
    return masked_argmax(q_values, mask)


@njit(cache=True)
def valid_action_scores(N: NetworkArrays, obs: np.ndarray, mask: np.ndarray):
    """(What a greedy choice among the valid actions of `mask` compares, rows scored): the head's
    scores of the valid actions' rows only (NaN for the others); with a dueling head the
    advantages, Q less V - mean(A), which is the same for every action."""
    per_row = N.layout[N.layout.shape[0] - 1, 3]
    scored = np.zeros(N.row_parts.shape[0], dtype=np.bool_)
    for action in range(N.n_actions):
        if mask[action]:
            scored[action // per_row] = True
    scores, _, count = _row_scores(N, obs, scored)
    return scores, count


@njit(cache=True)
def greedy_decision(
    N: NetworkArrays, obs: np.ndarray, mask: np.ndarray, favoured: int, bonus: float
):
    """(`greedy_action` on the network's `valid_action_scores` of `obs`, rows scored)."""
    scores, count = valid_action_scores(N, obs, mask)
    return greedy_action(scores, mask, favoured, bonus), count


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
        return self.decide(obs, mask)[0]

    def decide(self, obs: np.ndarray, mask: np.ndarray) -> tuple[int, int]:
        """(the greedy action, the network's rows scored for it: its cost, `decision_cost`)."""
        obs = np.ascontiguousarray(obs, dtype=np.float32)
        mask = np.asarray(mask, dtype=bool)
        favoured = -1 if self.favour is None else int(self.favour(obs, mask))
        network = network_arrays(self.weights)
        action, rows = greedy_decision(network, obs, mask, favoured, self.bonus)
        if action < 0:
            raise ValueError("no valid action in the mask: the environment broke its contract")
        return int(action), int(rows)


def _linear_layers(net: QNetwork) -> list[tuple[str, nn.Linear]]:
    return [(name, m) for name, m in net.named_modules() if isinstance(m, nn.Linear)]


def decision_layers(net: QNetwork, rows: int | None) -> list[tuple[str, int, int, int]]:
    """(name, runs, in, out) of the layers a decision scoring `rows` rows (None: all) runs, as
    `greedy_decision` runs them: each shared block's projection once per part, the first
    layer's other columns and the later layers once per row scored; not the value head (the
    choice reads the advantages)."""
    rows = net.row_count if rows is None else rows
    factors = factorise(net.rows.numpy(), net.spec["blocks"], net.spec["obs_dim"])
    layers = _linear_layers(net)
    (first_name, first), later = layers[0], layers[1:]
    own = 0
    runs = []
    for b, (_, width, shared) in enumerate(factors.blocks):
        if shared:
            parts = int((factors.parts[:, 0] == b).sum())
            runs.append((f"{first_name}.block{b}", parts, int(width), first.out_features))
        else:
            own += int(width)
    runs.append((first_name, rows, own, first.out_features))
    runs += [(name, rows, m.in_features, m.out_features) for name, m in later if name != "value"]
    return [run for run in runs if run[1] > 0]


def forward_macs(net: QNetwork, rows: int | None = None) -> int:
    """Multiply-accumulates of a decision scoring `rows` rows (None: every row, the worst case)."""
    return sum(n * c * k for _, n, c, k in decision_layers(net, rows))


def linear_layer_table(
    layers: Sequence[tuple[str, int, int, int]], model: str = "relmas_policy"
) -> pl.DataFrame:
    """Linear `layers` (name, runs, in, out), in execution order, as layer-table rows
    (LAYER_SCHEMA), each batched over the runs: what `profile_layers` prices."""
    table = [
        {
            "model": model,
            "layer": index,
            "name": name,
            "op": "linear",
            "N": n,
            "K": k,
            "C": c,
            "Y": 1,
            "X": 1,
            "R": 1,
            "S": 1,
            "stride": 1,
            "groups": 1,
            "macs": n * c * k,
            "in_elems": n * c,
            "w_elems": c * k,
            "out_elems": n * k,
        }
        for index, (name, n, c, k) in enumerate(layers)
    ]
    return pl.DataFrame(table, schema=LAYER_SCHEMA)


def policy_layer_table(
    net: QNetwork, rows: int | None = None, model: str = "relmas_policy"
) -> pl.DataFrame:
    """The layers of a decision scoring `rows` rows (None: every row): the shared blocks'
    projections (`Factors`), then the per-row layers."""
    return linear_layer_table(decision_layers(net, rows), model)
