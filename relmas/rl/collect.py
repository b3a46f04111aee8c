"""The training loop's inner steps for the scheduling environment, fused into one jitted call.

`relmas.rl.train` steps any Gymnasium environment from Python: per step the acting policy, the
environment's `step`, the n-step window and the replay write are each a call from Python, and
those calls cost several times the simulation itself. For `SchedulingEnv` (whose teacher is its
reference baseline, `relmas.rl.teacher`, or none), `collect` runs the same steps in one kernel —
the teacher's action (`relmas.rl.observation.teacher_action`) or the epsilon-greedy network
(`relmas.rl.network.valid_action_scores`, `relmas.rl.dqn.epsilon_greedy`), `relmas.rl.env.env_step`,
`relmas.rl.replay.push_step` — up to
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
from relmas.policies import placement, triage
from relmas.policies import rules as baseline_rules
from relmas.rl import dqn, network, observation, replay
from relmas.rl import env as env_module
from relmas.rl.dqn import DQNConfig, Learner, epsilon_at, epsilon_greedy, epsilon_schedule
from relmas.rl.env import EnvArrays, SchedulingEnv, env_step
from relmas.rl.network import (
    GreedyPolicy,
    NumpyWeights,
    network_arguments,
    no_network_arguments,
    valid_action_scores,
)
from relmas.rl.observation import teacher_action
from relmas.rl.replay import NStepCollector, ReplayBuffer, Transitions, Window, push_step
from relmas.rl.teacher import BaselineTeacher, no_teacher_arguments
from relmas.sim import access
from relmas.sim import kernels as engine_kernels
from relmas.sim.kernels import entry_point


@njit(cache=True)
def collect(
    E: EnvArrays,
    W: Window,
    R: Transitions,
    cursor: np.ndarray,
    gamma: float,
    params: np.ndarray,
    layout: np.ndarray,
    n_heads: int,
    blocks: np.ndarray,
    parts: np.ndarray,
    row_parts: np.ndarray,
    n_actions: int,
    bonus: float,
    sizes: np.ndarray,
    cut_pieces: np.ndarray,
    schedule: np.ndarray,
    teacher_steps: int,
    explore_seed: int,
    step: int,
    stop: int,
    counts: np.ndarray,
    store: bool,
) -> tuple[int, bool, float]:
    """Steps `step`, `step` + 1, ... before `stop`, or to the end of the episode: the teacher
    (the reference baseline's action, cut by `cut_pieces`, `teacher_action`'s arguments with
    `sizes`) acts before `teacher_steps`, then the network (`params` ... `n_actions`,
    `valid_action_scores`'s: the rows of valid actions only, as the deployed policy scores them)
    epsilon-greedily with epsilon = `epsilon_at(step, *schedule)`, `bonus` added to the score of
    the teacher's action; `counts[action]` counts the actions taken and, with
    `store`, the transitions go to the replay. Returns (steps taken, terminated, sum of their
    rewards)."""
    obs = np.empty_like(E.obs)
    mask = np.empty_like(E.mask)
    taken, terminated, rewards = 0, False, 0.0
    while step + taken < stop and not terminated:
        at = step + taken
        expert = at < teacher_steps
        if expert:
            action = teacher_action(E.obs, E.mask, sizes, cut_pieces)
            if not E.mask[action]:
                raise RuntimeError("the teacher's action is not in the mask")
        else:
            epsilon = epsilon_at(at, schedule[0], schedule[1], schedule[2])
            q_values, _ = valid_action_scores(
                params, layout, n_heads, blocks, parts, row_parts, n_actions, E.obs, E.mask
            )
            favoured = -1
            if bonus > 0.0:
                favoured = teacher_action(E.obs, E.mask, sizes, cut_pieces)
            action = epsilon_greedy(q_values, E.mask, epsilon, explore_seed, at, favoured, bonus)
        counts[action] += 1
        obs[:] = E.obs
        mask[:] = E.mask
        reward, _, terminated = env_step(E, action)
        if store:
            push_step(
                W,
                R,
                cursor,
                gamma,
                obs,
                mask,
                action,
                reward,
                E.obs,
                E.mask,
                terminated,
                False,
                expert,
            )
        rewards += reward
        taken += 1
    return taken, terminated, rewards


# The cached kernel embeds everything it calls: recompile when one of these sources changes.
jit_cache.refresh(
    collect,
    (engine_kernels, access, triage, placement, baseline_rules, observation, env_module, replay)
    + (network, dqn, sys.modules[__name__]),
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
    if isinstance(env, SchedulingEnv):
        if teacher is not None and not isinstance(teacher, BaselineTeacher):
            raise TypeError(f"the scheduling agent's teacher is its baseline, not {teacher!r}")
        return FusedSteps(env, teacher, collector, learner, config)
    return PythonSteps(env, obs, info, teacher, collector, learner, config)


class FusedSteps:
    """`collect` bound to one episode of a `SchedulingEnv`."""

    def __init__(
        self,
        env: SchedulingEnv,
        teacher: BaselineTeacher | None,
        collector: NStepCollector,
        learner: Learner,
        config: DQNConfig,
    ) -> None:
        self.env, self.collector, self.buffer = env, collector, learner.buffer
        no_teacher = no_teacher_arguments(env.layout)
        self.rule = teacher.kernel_arguments if teacher is not None else no_teacher
        self.schedule = np.array(epsilon_schedule(config))
        self.teacher_steps, self.explore_seed = config.teacher_steps, learner.explore_seed
        self.bonus = config.teacher_bonus if teacher is not None else 0.0
        self.counts = np.zeros(env.layout.actions, dtype=np.int64)  # not read in training
        self._collect: Callable[..., tuple[int, bool, float]] | None = None

    def run(self, step: int, stop: int, acting: NumpyWeights) -> tuple[int, bool, float]:
        arguments = (
            self.env.arrays,
            self.collector.window,
            self.buffer.transitions,
            self.buffer.cursor,
            self.collector.gamma,
            *network_arguments(acting),
            self.bonus,
            *self.rule,
            self.schedule,
            self.teacher_steps,
            self.explore_seed,
            step,
            stop,
            self.counts,
            True,
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
        weights, teacher_steps, bonus = policy.weights, 0, policy.bonus
        favour = policy.favour
        if favour is not None and not isinstance(favour, BaselineTeacher):
            raise TypeError(f"a policy played in one call favours its baseline, not {favour!r}")
        rule = no_teacher_arguments(layout) if favour is None else favour.kernel_arguments
        network = network_arguments(weights)
    else:
        network = no_network_arguments(layout.actions)
        rule, teacher_steps, bonus = policy.kernel_arguments, 2**62, 0.0
    unused = NStepCollector(1, 1.0, layout.size, layout.actions).window
    nothing = ReplayBuffer(1, layout.size, layout.actions, seed=0)
    counts = np.zeros(layout.actions, dtype=np.int64)
    arguments = (
        env.arrays,
        unused,
        nothing.transitions,
        nothing.cursor,
        1.0,
        *network,
        bonus,
        *rule,
        np.array([0.0, 0.0, 1.0]),  # epsilon 0: greedy
        teacher_steps,
        0,
        0,
        2**62,
        counts,
        False,
    )
    entry_point(collect, *arguments)(*arguments)
    return counts


class PythonSteps:
    """The same steps for any Gymnasium environment with a `Discrete` action space and an
    `info["action_mask"]`, one Python call each: the reference `collect` is tested against."""

    def __init__(
        self,
        env: gym.Env,
        obs: np.ndarray,
        info: dict[str, Any],
        teacher: Teacher | None,
        collector: NStepCollector,
        learner: Learner,
        config: DQNConfig,
    ) -> None:
        self.env, self.teacher, self.collector = env, teacher, collector
        self.buffer = learner.buffer
        self.n_actions = int(env.action_space.n)
        self.obs, self.mask = _observation(obs), _action_mask(info, self.n_actions)
        self.schedule = epsilon_schedule(config)
        self.teacher_steps, self.explore_seed = config.teacher_steps, learner.explore_seed
        self.bonus = config.teacher_bonus if teacher is not None else 0.0

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
                arguments = network_arguments(acting)
                q_values, _ = valid_action_scores(*arguments, self.obs, self.mask)
                favoured = int(self.teacher(self.obs, self.mask)) if self.bonus > 0 else -1
                action = int(
                    epsilon_greedy(
                        q_values, self.mask, epsilon, self.explore_seed, at, favoured, self.bonus
                    )
                )
            next_obs, reward, terminated, truncated, info = self.env.step(action)
            next_obs, next_mask = _observation(next_obs), _action_mask(info, self.n_actions)
            self.collector.push(
                self.buffer,
                *(self.obs, self.mask, action, float(reward), next_obs, next_mask),
                *(terminated, truncated, expert),
            )
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
