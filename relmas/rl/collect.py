"""The training loop's inner steps for the scheduling environment, fused into one jitted call.

`relmas.rl.train` steps any Gymnasium environment from Python: per step the acting policy, the
environment's `step`, the n-step window and the replay write are each a call from Python, and
those calls cost several times the simulation itself. For `SchedulingEnv` (whose teacher is its
reference baseline, `relmas.rl.teacher`, or none), `collect` runs the same steps in one kernel —
the teacher's action (`relmas.rl.teacher.teacher_action`) or the epsilon-greedy network
(`relmas.rl.network.valid_action_scores`, `relmas.rl.dqn.epsilon_greedy`), `relmas.rl.env.env_step`,
`relmas.rl.replay_buffer.push_step` — up to
the next step at which the loop has something else to do (learn, update the target, log,
validate, checkpoint) or to the end of the episode. It calls exactly the functions the Python
loop calls, so both give the same replay and the same weights (tested).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
from numba import njit

from relmas.hw import jit_cache
from relmas.rl import acting as acting_module
from relmas.rl import dqn, network, replay_buffer
from relmas.rl import teacher as teacher_module
from relmas.rl.acting import Actor, favoured_action, greedy_actor, teacher_actor
from relmas.rl.dqn import DQNConfig, Learner, epsilon_at, epsilon_greedy, epsilon_schedule
from relmas.rl.env import STEP_SOURCES, EnvArrays, SchedulingEnv, env_step
from relmas.rl.network import (
    GreedyPolicy,
    NumpyWeights,
    network_arrays,
    no_network,
    valid_action_scores,
)
from relmas.rl.replay_buffer import (
    NStepCollector,
    ReplayBuffer,
    Step,
    Transitions,
    Window,
    push_step,
)
from relmas.rl.teacher import BaselineTeacher, no_teacher, teacher_action
from relmas.sim.engine_kernels import borrowed, entry_point


@njit(cache=True)
def collect(
    E: EnvArrays,
    W: Window,
    R: Transitions,
    cursor: np.ndarray,
    gamma: float,
    A: Actor,
    schedule: np.ndarray,
    teacher_steps: int,
    explore_seed: int,
    step: int,
    stop: int,
    counts: np.ndarray,
    store: bool,
) -> tuple[int, bool, float]:
    """Steps `step`, `step` + 1, ... before `stop`, or to the end of the episode: the teacher of
    `A` (the reference baseline's action, `teacher_action`) acts before `teacher_steps`, then its
    network (`valid_action_scores`: the rows of valid actions only, as the deployed policy scores
    them) epsilon-greedily with epsilon = `epsilon_at(step, *schedule)`, `A.bonus` added to the
    score of the teacher's action; `counts[action]` counts the actions taken and, with
    `store`, the transitions go to the replay. Returns (steps taken, terminated, sum of their
    rewards)."""
    E, W, R, cursor, A, schedule, counts = borrowed((E, W, R, cursor, A, schedule, counts))
    seen = E.V
    obs = np.empty_like(seen.obs)
    mask = np.empty_like(seen.mask)
    taken, terminated, rewards = 0, False, 0.0
    while step + taken < stop and not terminated:
        at = step + taken
        expert = at < teacher_steps
        if expert:
            action = teacher_action(seen.obs, seen.mask, A.teacher)
            if not seen.mask[action]:
                raise RuntimeError("the teacher's action is not in the mask")
        else:
            epsilon = epsilon_at(at, schedule[0], schedule[1], schedule[2])
            q_values, _ = valid_action_scores(A.network, seen.obs, seen.mask)
            favoured = favoured_action(A, seen.obs, seen.mask)
            action = epsilon_greedy(
                q_values, seen.mask, epsilon, explore_seed, at, favoured, A.bonus
            )
        counts[action] += 1
        obs[:] = seen.obs
        mask[:] = seen.mask
        reward, _, terminated = env_step(E, action)
        if store:
            step_taken = Step(
                obs, mask, action, reward, seen.obs, seen.mask, terminated, False, expert
            )
            push_step(W, R, cursor, gamma, step_taken)
        rewards += reward
        taken += 1
    return taken, terminated, rewards


# The cached kernel embeds everything it calls: recompile when one of these sources changes.
LOOP_SOURCES = (replay_buffer, network, dqn, teacher_module, acting_module)
jit_cache.refresh(
    collect,
    STEP_SOURCES + LOOP_SOURCES + (sys.modules[__name__],),
    stamp="relmas-rl-collect.sha256",
)


Teacher = Callable[[np.ndarray, np.ndarray], int]  # (observation, mask) -> action


class EpisodeSteps(Protocol):
    def run(self, step: int, stop: int, acting: NumpyWeights) -> tuple[int, bool, float]:
        """Steps `step`, `step` + 1, ... before `stop`, or to the end of the episode, acting with
        the teacher before `teacher_steps`, then epsilon-greedily with `acting`; their
        transitions go to the replay. Returns (steps taken, episode over, sum of rewards)."""
        ...


def episode_steps(
    env: gym.Env,
    obs: np.ndarray,
    info: dict[str, Any],
    teacher: Teacher | None,
    collector: NStepCollector,
    learner: Learner,
    config: DQNConfig,
) -> EpisodeSteps:
    """The inner steps of the episode just reset (`obs`, `info`): fused (`collect`) for the
    scheduling environment (its teacher the reference baseline, or none), else one Python call
    per step."""
    bonus = config.teacher_bonus if teacher is not None else 0.0
    exploring = (np.array(epsilon_schedule(config)), config.teacher_steps, learner.explore_seed)
    if isinstance(env, SchedulingEnv):
        if teacher is not None and not isinstance(teacher, BaselineTeacher):
            raise TypeError(f"the scheduling agent's teacher is its baseline, not {teacher!r}")
        layout = env.layout
        taught = no_teacher(layout) if teacher is None else teacher.arrays
        actor = Actor(no_network(layout.actions), taught, bonus)  # its network: each `run`'s
        return FusedSteps(env, actor, collector, learner.buffer, *exploring, store=True)
    return PythonSteps(env, obs, info, teacher, bonus, collector, learner.buffer, *exploring)


class FusedSteps:
    """`collect` bound to one episode of a `SchedulingEnv`: the replay it writes to (`collector`'s
    window, `buffer`; with `store`), what it acts by (`actor`), its exploration (`schedule`,
    `teacher_steps`, `explore_seed`: `collect`'s) and its count of each action taken."""

    def __init__(
        self,
        env: SchedulingEnv,
        actor: Actor,
        collector: NStepCollector,
        buffer: ReplayBuffer,
        schedule: np.ndarray,
        teacher_steps: int,
        explore_seed: int,
        store: bool,
    ) -> None:
        self.env, self.actor, self.collector, self.buffer = env, actor, collector, buffer
        self.schedule, self.teacher_steps, self.explore_seed = schedule, teacher_steps, explore_seed
        self.store = store
        self.counts = np.zeros(env.layout.actions, dtype=np.int64)  # not read in training
        self._collect: Callable[..., tuple[int, bool, float]] | None = None

    def run(self, step: int, stop: int, acting: NumpyWeights) -> tuple[int, bool, float]:
        self.actor = self.actor._replace(network=network_arrays(acting))
        return self.stretch(step, stop)

    def stretch(self, step: int, stop: int) -> tuple[int, bool, float]:
        """Steps `step`, `step` + 1, ... before `stop`, or to the end of the episode, by the
        actor as it is (`EpisodeSteps.run`'s result)."""
        arguments = (
            self.env.arrays,
            self.collector.window,
            self.buffer.transitions,
            self.buffer.cursor,
            self.collector.gamma,
            self.actor,
            self.schedule,
            self.teacher_steps,
            self.explore_seed,
            step,
            stop,
            self.counts,
            self.store,
        )
        if self._collect is None:  # Numba's type dispatch would cost more than a stretch of steps
            self._collect = entry_point(collect, *arguments)
        taken, terminated, rewards = self._collect(*arguments)
        return int(taken), bool(terminated), float(rewards)


def play(env: SchedulingEnv, policy: GreedyPolicy | BaselineTeacher) -> np.ndarray:
    """Run the episode of `env` just reset to its end, greedily by the network of `policy` (and
    the teacher it favours, if any) or by the teacher `policy`, in one `collect` call that stores
    nothing: how often each action was taken (validation, and scoring the teacher cut or whole,
    run a whole trace at a time)."""
    layout = env.layout
    if isinstance(policy, GreedyPolicy):
        actor, teacher_steps = greedy_actor(policy, layout), 0
    else:
        actor, teacher_steps = teacher_actor(policy), 2**62
    unused = NStepCollector(1, 1.0, layout.size, layout.actions)
    nothing = ReplayBuffer(1, layout.size, layout.actions, seed=0)
    greedy = np.array([0.0, 0.0, 1.0])  # epsilon 0
    steps = FusedSteps(env, actor, unused, nothing, greedy, teacher_steps, 0, store=False)
    steps.stretch(0, 2**62)
    return steps.counts


class PythonSteps:
    """The same steps for any Gymnasium environment with a `Discrete` action space and an
    `info["action_mask"]`, one Python call each: the reference `collect` is tested against."""

    def __init__(
        self,
        env: gym.Env,
        obs: np.ndarray,
        info: dict[str, Any],
        teacher: Teacher | None,
        bonus: float,
        collector: NStepCollector,
        buffer: ReplayBuffer,
        schedule: np.ndarray,
        teacher_steps: int,
        explore_seed: int,
    ) -> None:
        self.env, self.teacher, self.bonus = env, teacher, bonus
        self.collector, self.buffer = collector, buffer
        self.n_actions = int(env.action_space.n)
        self.obs, self.mask = _observation(obs), _action_mask(info, self.n_actions)
        self.schedule, self.teacher_steps, self.explore_seed = schedule, teacher_steps, explore_seed

    def run(self, step: int, stop: int, acting: NumpyWeights) -> tuple[int, bool, float]:
        taken, over, rewards = 0, False, 0.0
        while step + taken < stop and not over:
            at = step + taken
            expert = at < self.teacher_steps
            if expert:
                action = int(self.teacher(self.obs, self.mask))
                if not self.mask[action]:
                    raise ValueError(f"the teacher chose the invalid action {action}")
            else:
                epsilon = epsilon_at(at, *self.schedule)
                network = network_arrays(acting)
                q_values, _ = valid_action_scores(network, self.obs, self.mask)
                favoured = int(self.teacher(self.obs, self.mask)) if self.bonus > 0 else -1
                action = int(
                    epsilon_greedy(
                        q_values, self.mask, epsilon, self.explore_seed, at, favoured, self.bonus
                    )
                )
            next_obs, reward, terminated, truncated, info = self.env.step(action)
            next_obs, next_mask = _observation(next_obs), _action_mask(info, self.n_actions)
            taken_step = Step(
                self.obs, self.mask, action, float(reward), next_obs, next_mask,
                terminated, truncated, expert,
            )  # fmt: skip
            self.collector.push(self.buffer, taken_step)
            self.obs, self.mask = next_obs, next_mask
            rewards += float(reward)
            taken += 1
            over = terminated or truncated
        return taken, over, rewards


def _observation(obs: Any) -> np.ndarray:
    return np.array(obs, dtype=np.float32)


def _action_mask(info: dict[str, Any], n_actions: int) -> np.ndarray:
    mask = np.asarray(info.get("action_mask"), dtype=bool)
    if mask.shape != (n_actions,):
        raise ValueError(f'info["action_mask"] must have shape ({n_actions},), got {mask.shape}')
    return mask
