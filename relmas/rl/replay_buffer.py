"""Experience replay: n-step transition assembly and a preallocated, seeded uniform buffer.

`NStepCollector` turns the one-step stream of an episode into n-step transitions
(R = r_t + γ r_{t+1} + … + γ^{m-1} r_{t+m-1}, bootstrap from s_{t+m} with discount γ^m, m ≤ n)
and writes them into a `ReplayBuffer`, which stores them in fixed numpy arrays and samples
uniformly with its own generator, so that a run (and a resumed run) is reproducible. The bootstrap
discount is stored per transition, so one-step and n-step transitions, and the shorter ones at
episode ends, share one update rule. Both are jitted (`push_step`, `write_transition`), so that a
fused training loop (`relmas.rl.collect`) runs exactly the code the Python loop calls.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import NamedTuple, TypeVar

import numpy as np
from numba import njit

from relmas.hw import jit_cache
from relmas.io import atomic_path


class Transition(NamedTuple):
    """s, its action mask, a, the (n-step) return, s' and its mask, terminal flag, γ^m, teacher?"""

    obs: np.ndarray
    mask: np.ndarray
    action: int
    reward: float
    next_obs: np.ndarray
    next_mask: np.ndarray
    done: bool
    discount: float
    expert: bool


class Transitions(NamedTuple):
    """The replay's arrays, one row per transition (the fields of `Transition`)."""

    obs: np.ndarray  # float32[capacity, obs_dim]
    mask: np.ndarray  # bool[capacity, actions]
    action: np.ndarray  # int64[capacity]
    reward: np.ndarray  # float32[capacity]
    next_obs: np.ndarray  # float32[capacity, obs_dim]
    next_mask: np.ndarray  # bool[capacity, actions]
    done: np.ndarray  # bool[capacity]
    discount: np.ndarray  # float32[capacity]
    expert: np.ndarray  # bool[capacity]


# ReplayBuffer.cursor: the next row written, the rows filled, rows [0, protected) kept for good
CURSOR_POSITION, CURSOR_SIZE, CURSOR_PROTECTED = 0, 1, 2


@njit(cache=True)
def write_transition(R: Transitions, cursor: np.ndarray, t: Transition) -> None:
    """Store `t` at the cursor, overwriting the oldest unprotected transition when full."""
    i = cursor[CURSOR_POSITION]
    R.obs[i] = t.obs
    R.mask[i] = t.mask
    R.action[i] = t.action
    R.reward[i] = t.reward
    R.next_obs[i] = t.next_obs
    R.next_mask[i] = t.next_mask
    R.done[i] = t.done
    R.discount[i] = t.discount
    R.expert[i] = t.expert
    capacity = R.action.shape[0]
    cursor[CURSOR_POSITION] = cursor[CURSOR_PROTECTED] if i + 1 == capacity else i + 1
    cursor[CURSOR_SIZE] = min(cursor[CURSOR_SIZE] + 1, capacity)


class Window(NamedTuple):
    """The last n steps of the current episode, a ring of `length` steps from `head`."""

    obs: np.ndarray  # float32[n, obs_dim]
    mask: np.ndarray  # bool[n, actions]
    action: np.ndarray  # int64[n]
    reward: np.ndarray  # float64[n]
    expert: np.ndarray  # bool[n]
    ring: np.ndarray  # int64[2]: head, length


class Step(NamedTuple):
    """One step of an episode: s, its action mask, a, r, s' and its mask, whether the episode
    ended in a terminal state (no bootstrap) or was cut (bootstrap from s'), teacher?"""

    obs: np.ndarray  # float32[obs_dim]
    mask: np.ndarray  # bool[actions]
    action: int
    reward: float
    next_obs: np.ndarray  # float32[obs_dim]
    next_mask: np.ndarray  # bool[actions]
    terminated: bool
    truncated: bool
    expert: bool = False


Recorded = TypeVar("Recorded", Step, Transition)


def as_stored(record: Recorded) -> Recorded:
    """`record` with its observations float32 and its masks bool, as the replay stores them."""
    return record._replace(
        obs=np.asarray(record.obs, np.float32),
        mask=np.asarray(record.mask, bool),
        next_obs=np.asarray(record.next_obs, np.float32),
        next_mask=np.asarray(record.next_mask, bool),
    )


@njit(cache=True)
def push_step(W: Window, R: Transitions, cursor: np.ndarray, gamma: float, step: Step) -> None:
    """Add `step`; write the transition of the oldest step once n later rewards are known, and
    every pending one when the episode ends (terminated: no bootstrap; truncated: bootstrap from
    `step.next_obs`)."""
    n = W.action.shape[0]
    head, length = W.ring[0], W.ring[1]
    tail = (head + length) % n
    W.obs[tail] = step.obs
    W.mask[tail] = step.mask
    W.action[tail] = step.action
    W.reward[tail] = step.reward
    W.expert[tail] = step.expert
    length += 1
    pending = 1 if length == n else 0
    if step.terminated or step.truncated:
        pending = length
    for _ in range(pending):
        ret, discount = 0.0, 1.0
        for k in range(length):
            ret += discount * W.reward[(head + k) % n]
            discount *= gamma
        oldest = Transition(
            W.obs[head], W.mask[head], W.action[head], ret, step.next_obs, step.next_mask,
            step.terminated, discount, W.expert[head],
        )  # fmt: skip
        write_transition(R, cursor, oldest)
        head = (head + 1) % n
        length -= 1
    W.ring[0], W.ring[1] = head, length


jit_cache.refresh(push_step, (sys.modules[__name__],), stamp="relmas-rl-replay-buffer.sha256")


class NStepCollector:
    """The n-step window of the current episode (`push_step`), writing into a replay buffer."""

    def __init__(self, n_step: int, gamma: float, obs_dim: int, n_actions: int):
        self.gamma = gamma
        self.window = Window(
            obs=np.zeros((n_step, obs_dim), np.float32),
            mask=np.zeros((n_step, n_actions), bool),
            action=np.zeros(n_step, np.int64),
            reward=np.zeros(n_step),
            expert=np.zeros(n_step, bool),
            ring=np.zeros(2, np.int64),
        )

    def clear(self) -> None:
        """Forget the steps of the last episode (its pending transitions are dropped)."""
        self.window.ring[:] = 0

    def push(self, buffer: ReplayBuffer, step: Step) -> None:
        """Add `step`, writing the transitions it completes into `buffer`."""
        push_step(self.window, buffer.transitions, buffer.cursor, self.gamma, as_stored(step))


class ReplayBuffer:
    """Fixed-capacity circular buffer of transitions in preallocated arrays, uniform sampling.

    `protect()` keeps the transitions stored so far for good (DQfD keeps its demonstrations):
    later writes cycle over the rest of the buffer only.
    """

    def __init__(
        self, capacity: int, obs_dim: int, n_actions: int, seed: int | np.random.SeedSequence
    ):
        self.capacity = capacity
        self.rng = np.random.default_rng(seed)
        self.cursor = np.zeros(3, dtype=np.int64)  # CURSOR_*
        self.transitions = Transitions(
            obs=np.zeros((capacity, obs_dim), np.float32),
            mask=np.zeros((capacity, n_actions), bool),
            action=np.zeros(capacity, np.int64),
            reward=np.zeros(capacity, np.float32),
            next_obs=np.zeros((capacity, obs_dim), np.float32),
            next_mask=np.zeros((capacity, n_actions), bool),
            done=np.zeros(capacity, bool),
            discount=np.zeros(capacity, np.float32),
            expert=np.zeros(capacity, bool),
        )

    def __len__(self) -> int:
        return self.size

    @property
    def size(self) -> int:
        return int(self.cursor[CURSOR_SIZE])

    @property
    def position(self) -> int:
        return int(self.cursor[CURSOR_POSITION])

    @property
    def protected(self) -> int:
        return int(self.cursor[CURSOR_PROTECTED])

    def protect(self) -> None:
        """Never overwrite the transitions stored so far (the buffer must have room left)."""
        if self.size >= self.capacity:
            raise ValueError("cannot protect a full replay buffer: nothing could be written after")
        self.cursor[CURSOR_PROTECTED] = self.size

    def add(self, transition: Transition) -> None:
        """Store `transition`, overwriting the oldest one once the buffer is full."""
        write_transition(self.transitions, self.cursor, as_stored(transition))

    def sample(self, batch_size: int) -> dict[str, np.ndarray]:
        """`batch_size` transitions drawn uniformly, with replacement, among the filled slots."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        index = self.rng.integers(0, self.size, size=batch_size)
        return {field: array[index] for field, array in self.transitions._asdict().items()}

    def save(self, path: str | Path) -> None:
        """Write the filled part, the write position and the sampler's state to `path` (.npz)."""
        state = json.dumps(
            {
                "capacity": self.capacity,
                "position": self.position,
                "protected": self.protected,
                "rng": self.rng.bit_generator.state,
            }
        )
        filled = {field: array[: self.size] for field, array in self.transitions._asdict().items()}
        with atomic_path(path, suffix=".npz") as tmp, open(tmp, "wb") as handle:
            np.savez(handle, state=np.array(state), **filled)

    def load(self, path: str | Path) -> None:
        """Restore a buffer written by `save` (same capacity and shapes) in place."""
        with np.load(path) as data:
            state = json.loads(str(data["state"]))
            if state["capacity"] != self.capacity:
                raise ValueError(f"{path}: replay capacity {state['capacity']} != {self.capacity}")
            size = len(data["action"])
            for field, array in self.transitions._asdict().items():
                array[:size] = data[field]
                array[size:] = 0
        self.cursor[:] = (state["position"], size, state["protected"])
        self.rng.bit_generator.state = state["rng"]
