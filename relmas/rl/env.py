"""The scheduling problem as a Gymnasium environment: one episode = one job trace, simulated.

A step is one decision of the engine's stepping API: start one candidate job on the fastest idle
instance for its next layer (whole, or for a resizing agent possibly cut into pieces), or wait for
the next event (candidates, features and mask: `relmas.rl.observation`). The episode ends when
every job has finished (`terminated`).

Reward (docs/relmas.md), for jobs weighted w_i = p_i^e / mean_j(p_j^e) by priority p_i (e = 0:
every job counts alike, as in the SLA rate):

- *credit*: `met` x w_i when job i finishes by its deadline; -`missed` x w_i as soon as its miss is
  certain (its remaining work at full speed no longer fits before the deadline — checked whenever
  it is ready and when it finishes), once per job. Over an episode the credits add up to
  `met` x (weight of the met jobs) - `missed` x (weight of the missed jobs);
- *progress shaping*, potential-based (Ng et al. 1999, so it leaves the optimal policy unchanged):
  gamma x Phi(s') - Phi(s), with Phi = `progress` x the weighted fraction of work done of every job
  that can still meet its deadline (a layer counts as done once all its pieces started). Starting a
  layer of a feasible job pays at once; the payment is taken back when the job finishes (and earns
  its credit) or becomes hopeless. Without it the only signal of a decision arrives hundreds of
  decisions later.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import polars as pl
from numba import njit

from relmas.hw import jit_cache
from relmas.policies import triage
from relmas.policies.triage import feasible
from relmas.rl import observation as observation_module
from relmas.rl.observation import (
    FEATURE_BOUND,
    ObservationSettings,
    Observer,
    observation_layout,
    observe,
)
from relmas.sim import access
from relmas.sim import kernels as engine_kernels
from relmas.sim.costs import WHOLE, CostTables
from relmas.sim.engine import Engine
from relmas.sim.kernels import Pieces, State, Tables
from relmas.sim.system import System


@dataclass(frozen=True)
class RewardSettings:
    """Credit of a met deadline, penalty of a (certain) miss, priority exponent, shaping weight
    (defaults: the schema's `training.reward`, relmas.config.schema_defaults)."""

    met: float
    missed: float
    priority_exponent: float
    progress: float

    def job_weights(self, priority: np.ndarray) -> np.ndarray:
        """w_i = p_i^e normalised to mean 1 over the trace."""
        raw = np.asarray(priority, dtype=np.float64) ** self.priority_exponent
        return raw / raw.mean()


@njit(cache=True)
def settle(
    remaining_work: np.ndarray,
    S: State,
    penalized: np.ndarray,
    weight: np.ndarray,
    initial_work: np.ndarray,
) -> tuple[int, float, float]:
    """Mark the ready jobs that have certainly missed their deadline in `penalized`. Returns (jobs
    finished so far, sum of `weight` of the newly marked jobs, progress potential = sum over the
    ready and running jobs not marked of weight x fraction of their work done, a layer counting as
    done once all its pieces started; work = `remaining_work` of the cost tables' rows from
    `initial_work`). One call per decision point: the reward's whole bookkeeping."""
    now = access.now(S)
    penalty = 0.0
    potential = 0.0
    for i in range(access.ready_count(S)):
        job = access.ready_job(S, i)
        remaining = remaining_work[access.job_next_row(S, job)]
        if feasible(now, remaining, access.job_deadline(S, job)):
            potential += weight[job] * (1.0 - remaining / initial_work[job])
        elif penalized[job] == 0:
            penalized[job] = 1
            penalty += weight[job]
    for a in range(access.accelerator_count(S)):
        job = access.running_job(S, a)
        if job >= 0 and penalized[job] == 0 and access.job_pieces_left(S, job) == 0:
            # counted once over the pieces of its layer running; a job with pieces still to
            # start is ready, and counted there
            after = remaining_work[access.job_next_row(S, job) + 1]
            done = 1.0 - after / initial_work[job]
            potential += weight[job] * done / access.job_pending_tasks(S, job)
    return access.finished_count(S), penalty, potential


@njit(cache=True)
def observe_and_settle(
    T: Tables,
    P: Pieces,
    S: State,
    scales: np.ndarray,
    reference: int,
    can_wait: bool,
    obs: np.ndarray,
    slots: np.ndarray,
    targets: np.ndarray,
    mask: np.ndarray,
    penalized: np.ndarray,
    weight: np.ndarray,
    initial_work: np.ndarray,
) -> tuple[int, float, float]:
    """`observe` then `settle`, in one call from Python per decision point (each call unboxes
    the engine's state anew, a few microseconds)."""
    observe(T, P, S, scales, reference, can_wait, obs, slots, targets, mask)
    return settle(T.remaining_work, S, penalized, weight, initial_work)


# The cached kernel embeds the engine's accessors: recompile when one of these sources changes.
jit_cache.refresh(
    observe_and_settle,
    (engine_kernels, access, triage, observation_module, sys.modules[__name__]),
    stamp="relmas-rl-env.sha256",
)


class SchedulingEnv(gym.Env):
    """Gymnasium environment over `Engine` for one trace `jobs` on `system` (see module doc).

    `info["action_mask"]` marks the valid actions (slots holding a job; "wait" unless waiting would
    deadlock). An action outside the mask (e.g. `action_space.sample()`) is replaced by the first
    valid one and flagged with `info["invalid_action"]`; trained agents never send one.
    `info["credit"]` is the step's credit alone (the reward without the shaping); `gamma` is the
    learner's discount, which the potential-based shaping must use.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        system: System,
        tables: CostTables,
        jobs: pl.DataFrame,
        observation: ObservationSettings,
        reward: RewardSettings,
        gamma: float,
    ) -> None:
        self.system = system
        self.tables = tables
        self.jobs = jobs
        self.observation_settings = observation
        self.reward_settings = reward
        self.gamma = gamma
        variants = tables.pieces.variants if tables.pieces is not None else (WHOLE,)
        self.layout = observation_layout(
            self.observation_settings, len(tables.types), len(system.instance_types), variants
        )
        self.observation_space = gym.spaces.Box(
            -FEATURE_BOUND, FEATURE_BOUND, (self.layout.size,), np.float32
        )
        self.action_space = gym.spaces.Discrete(self.layout.actions)
        self.engine: Engine | None = None
        self.observer: Observer | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start the trace from the beginning (the episode does not depend on `seed`)."""
        super().reset(seed=seed)
        engine = self.engine = Engine(self.system, self.tables, self.jobs)
        self.observer = Observer(engine, self.observation_settings)
        weight = self.reward_settings.job_weights(engine.jobs["priority"].to_numpy())
        self.weight = np.ascontiguousarray(weight, dtype=np.float64)
        self.penalized = np.zeros(engine.jobs.height, dtype=np.int8)  # certainly late, charged
        tables = engine.tables
        self.initial_work = tables.remaining_work_s[tables.first_row[engine.model_indices]]
        observer = self.observer
        self._observe_and_settle = engine_kernels.entry_point(
            observe_and_settle,
            engine.kernel_tables,
            engine.kernel_pieces,
            engine.state,
            observer.scales,
            0,
            True,
            np.zeros(self.layout.size, dtype=np.float32),
            observer.slots,
            observer.targets,
            np.zeros(self.layout.actions, dtype=bool),
            self.penalized,
            self.weight,
            self.initial_work,
        )
        self.met = 0
        self.missed = 0
        self.episode_credit = 0.0
        self.potential = 0.0
        obs, _, credit = self._advance()
        return obs, self._info(False, credit)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.engine is None or self.observer is None:
            raise RuntimeError("call reset() before step()")
        if self.engine.finished:
            raise RuntimeError("the episode is over: call reset()")
        action = int(action)
        invalid = not (0 <= action < self.layout.actions and self.mask[action])
        if invalid:
            action = int(np.flatnonzero(self.mask)[0])
        self.engine.step(self.observer.assignments(action))
        before = self.potential
        obs, terminated, credit = self._advance()
        shaping = self.reward_settings.progress * (self.gamma * self.potential - before)
        return obs, credit + shaping, terminated, False, self._info(invalid, credit)

    def _advance(self) -> tuple[np.ndarray, bool, float]:
        """Run to the next decision point: (observation, terminated, credit since the last one);
        updates the mask and the potential."""
        engine, observer = self.engine, self.observer
        view = engine.next_decision()
        if view is None:
            done, hopeless, potential = self.jobs.height, 0.0, 0.0
        else:
            arguments = observer.kernel_arguments(view)
            done, hopeless, potential = self._observe_and_settle(
                *arguments, self.penalized, self.weight, self.initial_work
            )
        settings = self.reward_settings
        credit = 0.0
        if done > self.met + self.missed:  # pop only when a job finished
            finished, met = engine.pop_finished()
            late = finished[~met]
            unpaid = late[self.penalized[late] == 0]
            self.penalized[unpaid] = 1
            weight = self.weight
            credit = (
                settings.met * weight[finished[met]].sum() - settings.missed * weight[unpaid].sum()
            )
            self.met += int(met.sum())
            self.missed += int(late.size)
        if view is None:
            self.mask = np.zeros(self.layout.actions, dtype=bool)
            self.potential = 0.0
            obs = np.zeros(self.layout.size, dtype=np.float32)
        else:
            obs, self.mask, self.potential = arguments[6], arguments[9], potential
            credit -= settings.missed * hopeless
        self.episode_credit += credit
        return obs, view is None, float(credit)

    def _info(self, invalid: bool, credit: float) -> dict[str, Any]:
        info: dict[str, Any] = {
            "action_mask": self.mask.copy(),
            "invalid_action": invalid,
            "credit": credit,
        }
        if self.engine.finished:
            info["sla_rate"] = self.met / self.jobs.height
        return info

    def episode_metrics(self) -> Mapping[str, float]:
        """SLA rate and total credit of the finished episode (for validation)."""
        if self.engine is None or not self.engine.finished:
            raise RuntimeError("the episode has not finished")
        return {"sla_rate": self.met / self.jobs.height, "episode_credit": self.episode_credit}
