"""Experience replay: n-step transition assembly and a preallocated, seeded uniform buffer.

`NStepCollector` turns the one-step stream of an episode into n-step transitions
(R = r_t + γ r_{t+1} + … + γ^{m-1} r_{t+m-1}, bootstrap from s_{t+m} with discount γ^m, m ≤ n);
`ReplayBuffer` stores them in fixed numpy arrays and samples uniformly with its own generator, so
that a run (and a resumed run) is reproducible. The bootstrap discount is stored per transition, so
one-step and n-step transitions, and the shorter ones at episode ends, share one update rule.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from relmas.io import atomic_path


@dataclass(frozen=True)
class Transition:
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


@dataclass(frozen=True)
class _Step:
    obs: np.ndarray
    mask: np.ndarray
    action: int
    reward: float
    expert: bool


class NStepCollector:
    """Accumulates the last n steps of the current episode and emits finished n-step transitions.

    A transition is emitted once n later rewards are known, or when the episode ends (terminated:
    no bootstrap; truncated: bootstrap from the last observation) with fewer.
    """

    def __init__(self, n_step: int, gamma: float):
        self.n_step = n_step
        self.gamma = gamma
        self._window: deque[_Step] = deque()

    def clear(self) -> None:
        self._window.clear()

    def push(
        self,
        obs: np.ndarray,
        mask: np.ndarray,
        action: int,
        reward: float,
        next_obs: np.ndarray,
        next_mask: np.ndarray,
        terminated: bool,
        truncated: bool,
        expert: bool = False,
    ) -> list[Transition]:
        step = _Step(np.array(obs, np.float32), np.array(mask, bool), action, reward, expert)
        self._window.append(step)
        finished = []
        if len(self._window) == self.n_step:
            finished.append(self._emit(next_obs, next_mask, terminated))
        if terminated or truncated:
            while self._window:
                finished.append(self._emit(next_obs, next_mask, terminated))
        return finished

    def _emit(self, next_obs: np.ndarray, next_mask: np.ndarray, terminated: bool) -> Transition:
        ret = 0.0
        for k, step in enumerate(self._window):
            ret += self.gamma**k * step.reward
        first = self._window.popleft()
        return Transition(
            obs=first.obs,
            mask=first.mask,
            action=first.action,
            reward=ret,
            next_obs=np.array(next_obs, np.float32),
            next_mask=np.array(next_mask, bool),
            done=bool(terminated),
            discount=self.gamma ** (len(self._window) + 1),
            expert=first.expert,
        )


_FIELDS = ("obs", "mask", "action", "reward", "next_obs", "next_mask", "done", "discount", "expert")


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
        self.position = 0
        self.protected = 0  # slots [0, protected) are never overwritten
        self.size = 0
        self.arrays: dict[str, np.ndarray] = {
            "obs": np.zeros((capacity, obs_dim), np.float32),
            "mask": np.zeros((capacity, n_actions), bool),
            "action": np.zeros(capacity, np.int64),
            "reward": np.zeros(capacity, np.float32),
            "next_obs": np.zeros((capacity, obs_dim), np.float32),
            "next_mask": np.zeros((capacity, n_actions), bool),
            "done": np.zeros(capacity, bool),
            "discount": np.zeros(capacity, np.float32),
            "expert": np.zeros(capacity, bool),
        }

    def __len__(self) -> int:
        return self.size

    def protect(self) -> None:
        """Never overwrite the transitions stored so far (the buffer must have room left)."""
        if self.size >= self.capacity:
            raise ValueError("cannot protect a full replay buffer: nothing could be written after")
        self.protected = self.size

    def add(self, transition: Transition) -> None:
        """Store `transition`, overwriting the oldest one once the buffer is full."""
        for field in _FIELDS:
            self.arrays[field][self.position] = getattr(transition, field)
        self.position += 1
        if self.position == self.capacity:
            self.position = self.protected
        self.size = min(self.size + 1, self.capacity)

    def sample(self, batch_size: int) -> dict[str, np.ndarray]:
        """`batch_size` transitions drawn uniformly, with replacement, among the filled slots."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        index = self.rng.integers(0, self.size, size=batch_size)
        return {field: array[index] for field, array in self.arrays.items()}

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
        filled = {field: array[: self.size] for field, array in self.arrays.items()}
        with atomic_path(path, suffix=".npz") as tmp, open(tmp, "wb") as handle:
            np.savez(handle, state=np.array(state), **filled)

    def load(self, path: str | Path) -> None:
        """Restore a buffer written by `save` (same capacity and shapes) in place."""
        with np.load(path) as data:
            state = json.loads(str(data["state"]))
            if state["capacity"] != self.capacity:
                raise ValueError(f"{path}: replay capacity {state['capacity']} != {self.capacity}")
            self.size = len(data["action"])
            for field, array in self.arrays.items():
                array[: self.size] = data[field]
                array[self.size :] = 0
        self.position = state["position"]
        self.protected = state["protected"]
        self.rng.bit_generator.state = state["rng"]
