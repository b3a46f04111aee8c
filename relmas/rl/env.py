"""The scheduling problem as a Gymnasium environment: one episode = one job trace, simulated.

A step is one decision of the engine's stepping API: start one candidate job's next layer on an
idle instance of one accelerator type (whole, or for a resizing agent possibly cut into pieces),
or wait for the next event (candidates, features, mask and the teacher's action:
`relmas.rl.observation`). With a learned keeper (`relmas.rl.keeper`) the jobs it does not keep are
given up before each decision point is observed, as where the agent is deployed; they count as
missed. The episode ends when
every job has finished or been dropped past its firm deadline (`terminated`).

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

Two terms aim at service levels (both 0 by default, and nothing on a trace without targets):

- *deficit weighting*: a job's credit and its miss's penalty are multiplied by 1 + `deficit_weight`
  x max(0, deficit) / target, deficit = the job's target - its tenant's deadline-hit rate so far
  (`relmas.rl.candidates.deficit`, the rate counting certain misses, read when the credit is
  settled): a deadline of a tenant below its target counts more, in proportion to how far below;
- *shortfall*: at the end of an episode, - `shortfall` x the trace's service shortfall
  (`relmas.sim.service.shortfall`) x its jobs: the deadlines still missing to reach every target,
  the metric the targets are judged by.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import polars as pl
from numba import njit

from relmas.hw import jit_cache
from relmas.policies.triage import feasible, service_rates
from relmas.rl import keeper as keeper_module
from relmas.rl.candidates import deficit
from relmas.rl.features import FEATURE_BOUND
from relmas.rl.keeper import KeeperArrays, KeeperWeights, advance_keeping, no_keeper
from relmas.rl.observation import (
    OBSERVE_SOURCES,
    ObservationArrays,
    ObservationSettings,
    Observer,
    first_idle,
    observation_layout,
    observe,
    resolve_service,
)
from relmas.schemas import group_key
from relmas.sim import access, engine_kernels
from relmas.sim import service as service_module
from relmas.sim.costs import WHOLE, CostTables
from relmas.sim.engine import Engine
from relmas.sim.engine_kernels import (
    STATUS_DECISION,
    STATUS_STALLED,
    Pieces,
    State,
    Tables,
    on_time,
    start_layer,
    start_piece,
)
from relmas.sim.service import RATE_TOL, shortfall
from relmas.sim.system import System

# The service-level terms at the values that leave the reward as without service levels.
NO_SERVICE_TERMS = {"deficit_weight": 0.0, "shortfall": 0.0}


@dataclass(frozen=True)
class RewardSettings:
    """Credit of a met deadline, penalty of a (certain) miss, priority exponent, shaping weight,
    the service-level terms (defaults: the schema's `training.reward`,
    relmas.config.schema_defaults; an agent.json written before the service terms has neither:
    `relmas.rl.agent` reads them as 0)."""

    met: float
    missed: float
    priority_exponent: float
    progress: float
    deficit_weight: float
    shortfall: float

    def job_weights(self, priority: np.ndarray) -> np.ndarray:
        """w_i = p_i^e normalised to mean 1 over the trace."""
        raw = np.asarray(priority, dtype=np.float64) ** self.priority_exponent
        return raw / raw.mean()


@njit(cache=True)
def deficit_factor(S: State, job: int, deficit_weight: float, rates: np.ndarray) -> float:
    """1 + `deficit_weight` x max(0, deficit) / target of `job` at the tenants' `rates`: what its
    credit or penalty is multiplied by (1 without a target, or with weight 0)."""
    target = access.job_target(S, job)
    if deficit_weight == 0.0 or not target > 0.0:  # NaN: no target
        return 1.0
    return 1.0 + deficit_weight * max(0.0, deficit(S, job, rates)) / target


@njit(cache=True)
def settle(
    remaining_work: np.ndarray,
    S: State,
    penalized: np.ndarray,
    weight: np.ndarray,
    initial_work: np.ndarray,
    deficit_weight: float,
    rates: np.ndarray,
) -> tuple[int, float, float]:
    """Mark the ready jobs that have certainly missed their deadline in `penalized`. Returns (jobs
    finished so far, sum of `weight` x `deficit_factor` (at the tenants' `rates`) of the newly
    marked jobs, progress potential = sum over the ready and running jobs not marked of weight x
    fraction of their work done, a layer counting as done once all its pieces started; work =
    `remaining_work` of the cost tables' rows from `initial_work`). One call per decision point:
    the reward's whole bookkeeping."""
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
            penalty += weight[job] * deficit_factor(S, job, deficit_weight, rates)
    for a in range(access.accelerator_count(S)):
        job = access.running_job(S, a)
        if job >= 0 and penalized[job] == 0 and access.job_pieces_left(S, job) == 0:
            # counted once over the pieces of its layer running; a job with pieces still to
            # start is ready, and counted there
            after = remaining_work[access.job_next_row(S, job) + 1]
            done = 1.0 - after / initial_work[job]
            potential += weight[job] * done / access.job_pending_tasks(S, job)
    return access.finished_count(S), penalty, potential


class EnvArrays(NamedTuple):
    """Everything an episode's steps read and write, as arrays, so that one jitted call can step
    it (`env_step`) — from `SchedulingEnv.step` or from a fused training loop (`relmas.rl.collect`).
    """

    V: ObservationArrays  # the engine's state and the observation at the current decision point
    tenant_rates: np.ndarray  # float64[2, tenants]: the tenants' rates so far and ready jobs
    # (`service_rates`), for the deficit weighting
    penalized: np.ndarray  # int8[jobs]: 1 once a job's miss is charged
    weight: np.ndarray  # float64[jobs]: the jobs' reward weights
    initial_work: np.ndarray  # float64[jobs]: remaining work at arrival
    reward: np.ndarray  # float64[6]: met credit, miss penalty, shaping weight, gamma, deficit
    # weight, shortfall weight
    counts: np.ndarray  # int64[3]: jobs met, jobs missed, finished jobs credited so far
    values: np.ndarray  # float64[2]: progress potential now, the episode's credit so far
    group: np.ndarray  # int64[jobs]: each job's service group (-1: no target), `job_groups`
    group_size: np.ndarray  # int64[groups]: the jobs of each group
    group_target: np.ndarray  # float64[groups]: its target
    group_met: np.ndarray  # int64[groups]: its jobs that met their deadline so far
    K: KeeperArrays  # the jobs given up before each decision (`no_keeper`: none)


COUNT_MET, COUNT_MISSED, COUNT_CREDITED = 0, 1, 2
VALUE_POTENTIAL, VALUE_CREDIT = 0, 1
REWARD_MET, REWARD_MISSED, REWARD_PROGRESS, REWARD_GAMMA = 0, 1, 2, 3
REWARD_DEFICIT, REWARD_SHORTFALL = 4, 5


@njit(cache=True)
def reach_decision(E: EnvArrays) -> tuple[bool, float]:
    """Run to the next decision point and observe it (the reference pick, the features, the mask)
    and settle the reward's bookkeeping. Returns (terminated, credit since the last decision
    point, with the shortfall term at the end); the new potential is left in `E.values`."""
    T, S = E.V.T, E.V.S
    status = advance_keeping(T, S, E.K)
    if status == STATUS_STALLED:
        raise RuntimeError("the agent waited although no event can happen any more")
    missed, deficit_weight = E.reward[REWARD_MISSED], E.reward[REWARD_DEFICIT]
    rates = E.tenant_rates[0]
    if deficit_weight > 0.0:  # the rates of this point, also past the last decision
        service_rates(T, S, rates, E.tenant_rates[1])
    hopeless = 0.0
    potential = 0.0
    if status == STATUS_DECISION:
        observe(E.V)
        _, hopeless, potential = settle(
            T.remaining_work, S, E.penalized, E.weight, E.initial_work, deficit_weight, rates
        )
    else:
        E.V.obs[:] = 0.0
        E.V.mask[:] = False
    met_weight = 0.0
    unpaid_weight = 0.0
    finished = access.finished_count(S)
    for i in range(E.counts[COUNT_CREDITED], finished):
        job = access.finished_job(S, i)
        if on_time(access.job_finish(S, job), access.job_deadline(S, job)):
            E.counts[COUNT_MET] += 1
            met_weight += E.weight[job] * deficit_factor(S, job, deficit_weight, rates)
            if E.group[job] >= 0:
                E.group_met[E.group[job]] += 1
        else:
            E.counts[COUNT_MISSED] += 1
            if E.penalized[job] == 0:
                E.penalized[job] = 1
                unpaid_weight += E.weight[job] * deficit_factor(S, job, deficit_weight, rates)
    E.counts[COUNT_CREDITED] = finished
    credit = E.reward[REWARD_MET] * met_weight - missed * unpaid_weight - missed * hopeless
    if status != STATUS_DECISION and E.reward[REWARD_SHORTFALL] > 0.0:
        jobs = E.group.shape[0]
        lacking = shortfall(E.group_size, E.group_met, E.group_target, jobs) * jobs
        credit -= E.reward[REWARD_SHORTFALL] * lacking
    E.values[VALUE_POTENTIAL] = potential
    E.values[VALUE_CREDIT] += credit
    return status != STATUS_DECISION, credit


@njit(cache=True, inline="always")  # no call overhead per step
def apply_action(
    T: Tables, P: Pieces, S: State, slots: np.ndarray, actions: int, action: int
) -> None:
    """Count the decision and apply the valid `action` of `actions` (the last one waits): start
    the job of its slot (`slots`) on the lowest-index idle instance of its accelerator type, its
    next layer whole, cut by the action's split variant, or the next piece of a cut layer."""
    access.count_decision(S)
    wait = actions - 1
    if action == wait:
        access.request_wait(S)
        return
    types = T.latency.shape[1]
    variants = wait // (slots.shape[0] * types)
    pair, split = action // variants, action % variants
    job, accelerator = slots[pair // types], first_idle(S, pair % types)
    if split == 0 and access.job_pieces_left(S, job) == 0:
        start_layer(T, S, job, accelerator)
    else:
        start_piece(P, S, job, accelerator, split)


@njit(cache=True)
def env_step(E: EnvArrays, action: int) -> tuple[float, float, bool]:
    """Apply the valid `action` at the current decision point, then run to the next one. Returns
    (reward, credit, terminated): reward = credit + the potential-based shaping."""
    V = E.V
    apply_action(V.T, V.P, V.S, V.slots, V.mask.shape[0], action)
    before = E.values[VALUE_POTENTIAL]
    terminated, credit = reach_decision(E)
    after = E.values[VALUE_POTENTIAL]
    shaping = E.reward[REWARD_PROGRESS] * (E.reward[REWARD_GAMMA] * after - before)
    return credit + shaping, credit, terminated


# The cached kernel embeds the engine's, the heuristics', the observation's and the keeper's:
# recompile when one of these sources changes (and every kernel that calls it, `STEP_SOURCES`).
STEP_SOURCES = OBSERVE_SOURCES + (service_module, keeper_module, sys.modules[__name__])
jit_cache.refresh(env_step, STEP_SOURCES, stamp="relmas-rl-env.sha256")


def job_groups(jobs: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each of `jobs`' service group (`relmas.sim.service`: an index into the groups sorted by
    name, -1 without a target), and per group its jobs and its target."""
    keys = jobs.select(group=group_key())["group"]
    groups = (
        jobs.with_columns(group=keys)
        .filter(pl.col("group").is_not_null())
        .group_by("group")
        .agg(pl.len().alias("size"), pl.col("target").first())
        .sort("group")
    )
    index = {name: g for g, name in enumerate(groups["group"].to_list())}
    group = np.array([index.get(key, -1) for key in keys.to_list()], dtype=np.int64)
    size = groups["size"].to_numpy().astype(np.int64)
    return group, size, groups["target"].to_numpy().astype(np.float64)


class SchedulingEnv(gym.Env):
    """Gymnasium environment over `Engine` for one trace `jobs` on `system` (see module doc).

    `info["action_mask"]` marks the valid actions ((slot, type) pairs of a slot holding a job and
    a type with an idle instance; "wait" unless waiting would deadlock). An action outside the
    mask (e.g. `action_space.sample()`) is replaced by the first valid one and flagged with
    `info["invalid_action"]`; trained agents never send one.
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
        keeper: KeeperWeights | None = None,
    ) -> None:
        self.system = system
        self.keeper = keeper
        self.tables = tables
        self.jobs = jobs
        self.observation_settings = observation = resolve_service(observation, jobs)
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
        observer = self.observer = Observer(engine, self.observation_settings)
        settings = self.reward_settings
        weight = settings.job_weights(engine.jobs["priority"].to_numpy())
        group, group_size, group_target = job_groups(engine.jobs)
        tables = engine.tables
        self.arrays = EnvArrays(
            V=observer.arrays,
            tenant_rates=np.ones((2, len(engine.tenants))),
            penalized=np.zeros(engine.jobs.height, dtype=np.int8),
            weight=np.ascontiguousarray(weight, dtype=np.float64),
            initial_work=tables.remaining_work_s[tables.first_row[engine.model_indices]],
            reward=np.array(
                [settings.met, settings.missed, settings.progress, self.gamma]
                + [settings.deficit_weight, settings.shortfall]
            ),
            counts=np.zeros(3, dtype=np.int64),
            values=np.zeros(2),
            group=group,
            group_size=group_size,
            group_target=group_target,
            group_met=np.zeros(group_size.shape[0], dtype=np.int64),
            K=self.keeper.arrays() if self.keeper is not None else no_keeper(),
        )
        self._step = engine_kernels.entry_point(env_step, self.arrays, 0)
        _, credit = engine_kernels.entry_point(reach_decision, self.arrays)(self.arrays)
        return self.arrays.V.obs.copy(), self._info(False, credit)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.engine is None:
            raise RuntimeError("call reset() before step()")
        if self.engine.finished:
            raise RuntimeError("the episode is over: call reset()")
        action = int(action)
        mask = self.arrays.V.mask
        invalid = not (0 <= action < self.layout.actions and mask[action])
        if invalid:
            action = int(np.flatnonzero(mask)[0])
        reward, credit, terminated = self._step(self.arrays, action)
        return self.arrays.V.obs.copy(), reward, terminated, False, self._info(invalid, credit)

    @property
    def network_rows(self) -> tuple[np.ndarray, int, tuple[int, ...]]:
        """What the agent's network scores (`relmas.rl.network.QNetwork`): a row per (slot,
        type) pair and one for wait (`Layout.rows`), a score per split variant each, and the
        blocks of a row (`Layout.row_blocks`)."""
        return self.layout.rows, self.layout.variants, self.layout.row_blocks

    @property
    def penalized(self) -> np.ndarray:
        """1 for each job whose miss is charged (internal job indices)."""
        return self.arrays.penalized

    @property
    def initial_work(self) -> np.ndarray:
        """Each job's remaining work at arrival (internal job indices)."""
        return self.arrays.initial_work

    @property
    def potential(self) -> float:
        """The progress potential at the current decision point (0 at the end)."""
        return float(self.arrays.values[VALUE_POTENTIAL])

    @property
    def met(self) -> int:
        """Jobs finished by their deadline so far."""
        return int(self.arrays.counts[COUNT_MET])

    @property
    def missed(self) -> int:
        """Jobs finished late or dropped past a firm deadline so far."""
        return int(self.arrays.counts[COUNT_MISSED])

    def _info(self, invalid: bool, credit: float) -> dict[str, Any]:
        info: dict[str, Any] = {
            "action_mask": self.arrays.V.mask.copy(),
            "invalid_action": invalid,
            "credit": credit,
        }
        if self.engine.finished:
            info["sla_rate"] = self.met / self.jobs.height
        return info

    def episode_metrics(self) -> Mapping[str, float]:
        """SLA rate and total credit of the finished episode (for validation), and on a trace
        with targets its service shortfall and targets met (`relmas.sim.service`'s metrics)."""
        if self.engine is None or not self.engine.finished:
            raise RuntimeError("the episode has not finished")
        E = self.arrays
        credit = float(E.values[VALUE_CREDIT])
        metrics = {"sla_rate": self.met / self.jobs.height, "episode_credit": credit}
        if E.group_size.shape[0] > 0:
            size, met, target = E.group_size, E.group_met, E.group_target
            lacking = shortfall(size, met, target, self.jobs.height)
            reached = int(np.sum(met / size >= target - RATE_TOL))
            metrics.update(shortfall=float(lacking), targets_met=float(reached))
        return metrics
