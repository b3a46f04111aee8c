"""What the RELMAS agent sees and chooses from at a decision point: candidate jobs, features, mask.

One action assigns one ready job to an idle accelerator instance (or waits). The candidates are not
simply the M earliest deadlines: under overload those are jobs that can no longer make it, and
serving them first is what makes EDF collapse. The slots are, in this order:

- slot 0, the *reference*: the job a configured heuristic (e.g. `sjf`) would start first, so that
  the agent can always do what that heuristic does (and the warm start can imitate it);
- `candidates` slots: the feasible jobs with the least remaining work (SJF among feasible jobs);
- `candidates` slots: the feasible jobs with the earliest deadlines (EDF among feasible jobs);
- one slot: the hopeless job with the least remaining work (work for otherwise idle instances);
- with service levels (`ObservationSettings.service`), `candidates` more slots: the feasible jobs
  of the tenants furthest below their targets (deficit = target - the tenant's deadline-hit rate
  so far; a job without a target ranks after every job with one), ties by least remaining work:
  the candidates of a deficit-first rule, which the SJF and EDF rankings need not hold.

*Feasible* = it can still meet its deadline: slack >= remaining work at full speed on the best
types. A job that is not feasible has certainly missed (no layer runs faster than its `latency_s`),
which is also when the reward charges its miss. This test and the two holding tests behind the
features and the mask (a busy instance would end the layer sooner; the start would oversubscribe
the bandwidth) are `relmas.policies.triage`'s, shared with the rule baselines.

A chosen job goes to the *fastest free instance* for its next layer (the heuristics' rule;
choosing the instance type as well changed the SLA rate by under 1% with hand-written rules, not
worth multiplying the actions). The last action is "wait":
start nothing until the next event. It is valid only when no candidate could start on an instance
of its own fastest type, or when every candidate would push the running layers' bandwidth demand
above the shared bandwidth — waiting is for holding work back from slow instances and from a
saturated memory, never for idling a fast instance that has bandwidth to run (an agent free to wait
learned, on a light scenario, to idle four instances in six while a burst's queue grew to over a
hundred jobs). Oversubscribed bandwidth slows every running layer alike under proportional sharing,
compute-bound ones too: SJF among feasible jobs that also holds back such starts meets 0.725 of
mixed_small's validation deadlines instead of 0.625 (docs/relmas.md, "Holding back").

With `resize` (the `relmas_resize` policy, docs/gacer.md) an action also picks how to cut the
chosen job's next layer: one action per (slot, split variant of the piece tables), variant 0 the
whole layer. A cut is offered only for a layer not started yet that the variant really cuts; a job
whose layer is already cut offers only variant 0, which starts its next piece. Each slot then also
shows the pieces its layer still has to start and, per variant, when the cut layer would finish on
the idle instances and the cut's extra DRAM traffic, both against the uncut layer on the target
instance — what GACER's search weighs: parallelism gained against traffic added.

Service levels are an option of the observation, not a new version of it: with
`service` each slot also shows its job's target, its tenant's rate so far, deficit and share of
the ready jobs, and the globals the worst deficit and the share of tenants below target; without
it (agents trained before, scenarios without targets by default) the layout is the one before.

Features (docs/relmas.md lists them all) are computed by one Numba kernel from the engine's state
arrays in three steps (pick the candidates, write the features, build the mask), a few
microseconds per decision, and normalised by two time scales of the system: tau, the mean isolated
latency of the configured models, and tau_layer, the mean best latency of a layer. Where each
feature sits is named once, in the feature table below (`SlotFeature`, `InstanceFeature`,
`GlobalFeature`, `Layout`), for the kernel that writes them and every reader (the slot rules).
The reward's bookkeeping (which jobs certainly missed, the progress potential) is the
environment's (`relmas.rl.env`).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, replace
from enum import IntEnum
from functools import cached_property
from typing import NamedTuple

import numpy as np
import polars as pl
from numba import njit

from relmas.hw import jit_cache
from relmas.policies import make_policy, triage
from relmas.policies.heuristics import HeuristicPolicy
from relmas.policies.triage import (
    busy_gain,
    earliest_finish,
    fastest_idle,
    feasible,
    scan_instances,
    service_rates,
)
from relmas.schemas import with_job_defaults
from relmas.sim import access
from relmas.sim import kernels as engine_kernels
from relmas.sim.engine import DecisionView, Engine
from relmas.sim.kernels import Pieces, State, Tables

# Version of the feature set below: agents and resumable runs of another version are refused.
# The service-level features are an option of the observation (`ObservationSettings.service`,
# recorded in agent.json), not a version: agents without them keep their layout.
FEATURES_VERSION = 2  # 2: bandwidth demands and the finish on a busy instance (holding back)
FEATURE_BOUND = 30.0  # features are clipped to [-FEATURE_BOUND, FEATURE_BOUND]


# The feature table: the one definition of where each feature sits, for the kernel that writes
# them and for every reader (the slot rules, tests). docs/relmas.md explains each.


class SlotFeature(IntEnum):
    """Offsets within a slot's features. After them: per accelerator type t the next layer's
    latency (at SLOT_BASE_FEATURES + t), then its demand (at SLOT_BASE_FEATURES + types + t),
    then for a resizing agent the cut features (`Layout.cut_feature`)."""

    PRESENT = 0  # 1 if the slot holds a job
    FEASIBLE = 1  # 1 if the job can still meet its deadline
    SLACK = 2  # sl(slack / tau)
    REMAINING = 3  # log(1 + remaining work / tau)
    LAXITY = 4  # sl((slack - remaining work) / tau)
    WORK_LEFT = 5  # remaining work / isolated latency
    PRIORITY = 6  # priority / 9
    WAITED = 7  # log(1 + time since ready / tau)
    SLOWDOWN = 8  # log(latency on its target / best latency)
    DEMAND = 9  # bandwidth demand on its target / capacity
    BUSY_GAIN = 10  # log(latency on its target / earliest end on any instance, busy ones too)


class InstanceFeature(IntEnum):
    """Offsets within an instance's features."""

    IDLE = 0  # 1 if idle
    BUSY_LEFT = 1  # log(1 + busy time left at current rates / tau_layer)
    BANDWIDTH = 2  # bandwidth it uses now / capacity


class GlobalFeature(IntEnum):
    """Offsets within the global features (after every slot's and instance's)."""

    QUEUE = 0  # log(1 + ready jobs)
    FEASIBLE = 1  # log(1 + feasible ready jobs)
    HOPELESS = 2  # log(1 + hopeless ready jobs)
    LOAD = 3  # log(1 + feasible ready work / (instances x tau))
    BANDWIDTH_IN_USE = 4  # bandwidth in use / capacity
    IDLE = 5  # share of idle instances
    CAN_WAIT = 6  # 1 if waiting is allowed
    RUNNING_DEMAND = 7  # full-speed bandwidth demand of the running layers / capacity


class ServiceFeature(IntEnum):
    """Offsets within a slot's service-level features, the last of its features (with
    `ObservationSettings.service`). A tenant's rate so far and deficit: `triage.service_rates`,
    `deficit`."""

    TARGET = 0  # the job's target (0 without one)
    HAS_TARGET = 1  # 1 if the job has a target
    ACHIEVED = 2  # its tenant's deadline-hit rate so far
    DEFICIT = 3  # max(0, target - the tenant's rate so far), 0 without a target
    TENANT_READY = 4  # share of the ready jobs that are its tenant's


class ServiceGlobalFeature(IntEnum):
    """Offsets within the service-level global features, after the global ones (with
    `ObservationSettings.service`), over the tenants with a target (`tenant_targets`)."""

    WORST_DEFICIT = 0  # the largest deficit, 0 when every tenant is at or above its target
    BELOW_TARGET = 1  # share of the tenants below their target


SLOT_BASE_FEATURES = len(SlotFeature)
INSTANCE_FEATURES = len(InstanceFeature)
GLOBAL_FEATURES = len(GlobalFeature)
SERVICE_FEATURES = len(ServiceFeature)
SERVICE_GLOBAL_FEATURES = len(ServiceGlobalFeature)


@njit(cache=True)
def slot_width(types: int, variants: int, service: bool) -> int:
    """Features per slot: the base ones, latency and demand per type, then with split variants
    the share of pieces left and (finish, extra traffic) per variant >= 1, then with `service`
    the service-level ones."""
    cuts = 1 + 2 * (variants - 1) if variants > 1 else 0
    return SLOT_BASE_FEATURES + 2 * types + cuts + (SERVICE_FEATURES if service else 0)


@njit(cache=True)
def deficit(S: State, job: int, rates: np.ndarray) -> float:
    """The job's target minus its tenant's rate so far (`rates`, `service_rates`'), negative
    above the target, NaN without a target: how far the tenant is below what the job counts
    towards."""
    return access.job_target(S, job) - rates[access.job_tenant(S, job)]


@dataclass(frozen=True)
class ObservationSettings:
    """`candidates` jobs per ranking (shortest, earliest feasible, and with service levels the
    deficit ranking); `reference` heuristic name; `resize`: actions also choose a split variant of
    the next layer (relmas_resize); `service`: the service-level slots and features (None: whether
    the jobs carry targets, `resolve_service`; False in an agent.json written before the option).
    The config keys have the schema's defaults only (`training.observation`,
    relmas.config.schema_defaults)."""

    candidates: int
    reference: str
    resize: bool = False  # not a config key: set by the policy trained (relmas.rl.run)
    service: bool | None = False

    @property
    def slots(self) -> int:
        return 2 + (3 if self.service else 2) * self.candidates

    def slot_groups(self) -> tuple[str, ...]:
        """What each slot stands for (its candidate ranking), then wait."""
        k = self.candidates
        deficit = ["deficit"] * k if self.service else []
        return ("reference", *["shortest"] * k, *["earliest"] * k, "hopeless", *deficit, "wait")


def resolve_service(settings: ObservationSettings, jobs: pl.DataFrame) -> ObservationSettings:
    """`settings` with `service` None decided: the service-level slots and features are seen
    where the jobs carry targets (a scenario whose tenants have one). The one place that decides
    it, for training, the environment and the deployed policy alike."""
    if settings.service is not None:
        return settings
    carries = bool(with_job_defaults(jobs)["target"].is_not_null().any())
    return replace(settings, service=carries)


@dataclass(frozen=True)
class Layout:
    """Sizes of the observation of one system: slots, accelerator types and instances, and the
    split variants an action chooses among (1: whole layers only)."""

    slots: int
    types: int
    instances: int
    variants: int = 1
    service: bool = False  # the service-level features (`ObservationSettings.service`)

    @cached_property
    def slot_features(self) -> int:
        return slot_width.py_func(self.types, self.variants, self.service)

    @property
    def size(self) -> int:
        service = SERVICE_GLOBAL_FEATURES if self.service else 0
        return self._global_features + GLOBAL_FEATURES + service

    @property
    def actions(self) -> int:
        return self.slots * self.variants + 1  # the last one waits

    def action(self, slot: int, variant: int = 0) -> int:
        """The action that starts `slot`'s job with split `variant`."""
        return slot * self.variants + variant

    def slot_of(self, action: int) -> int:
        return action // self.variants

    def variant_of(self, action: int) -> int:
        """Split variant of `action` (0 for whole layers and for wait)."""
        return 0 if action == self.actions - 1 else action % self.variants

    def slot_feature(self, slot: int, feature: SlotFeature) -> int:
        """Index of `slot`'s `feature` in the observation."""
        return slot * self.slot_features + feature

    def global_feature(self, feature: GlobalFeature) -> int:
        """Index of the global `feature` in the observation."""
        return global_index.py_func(self.sizes, feature)

    def service_feature(self, slot: int, feature: ServiceFeature) -> int:
        """Index of `slot`'s service-level `feature` (a layout with `service`)."""
        return service_index.py_func(self.sizes, slot, feature)

    def service_global_feature(self, feature: ServiceGlobalFeature) -> int:
        """Index of the service-level global `feature` (a layout with `service`)."""
        return global_index.py_func(self.sizes, GLOBAL_FEATURES + feature)

    def cut_finish_feature(self, slot: int, variant: int) -> int:
        """Index of `slot`'s feature: log finish of its layer cut by `variant` >= 1, against the
        whole layer."""
        return cut_finish_index.py_func(self.sizes, slot, variant)

    @cached_property
    def sizes(self) -> np.ndarray:
        """(slots, variants, features per slot, types, instances): the layout for the jitted
        readers of an observation below."""
        sizes = (self.slots, self.variants, self.slot_features, self.types, self.instances)
        return np.array(sizes, dtype=np.int64)

    @cached_property
    def _global_features(self) -> int:
        return self.global_feature(0)


# Jitted readers of an observation laid out by `sizes` (`Layout.sizes`): what the slot rules read
# back, inside a training loop's kernel too.


@njit(cache=True)
def global_index(sizes: np.ndarray, feature: int) -> int:
    """Index of the global `feature`, after every slot's and instance's."""
    return sizes[0] * sizes[2] + sizes[4] * INSTANCE_FEATURES + feature


@njit(cache=True)
def service_index(sizes: np.ndarray, slot: int, feature: int) -> int:
    """Index of `slot`'s service-level `feature`, the last of its features."""
    return (slot + 1) * sizes[2] - SERVICE_FEATURES + feature


@njit(cache=True)
def cut_finish_index(sizes: np.ndarray, slot: int, variant: int) -> int:
    """Index of `slot`'s log finish of its layer cut by `variant` >= 1."""
    return slot * sizes[2] + SLOT_BASE_FEATURES + 2 * sizes[3] + 2 * variant - 1


@njit(cache=True)
def queue_length(obs: np.ndarray, sizes: np.ndarray) -> int:
    """Ready jobs, read back from the global features."""
    return round(float(np.expm1(obs[global_index(sizes, GlobalFeature.QUEUE)])))


@njit(cache=True)
def idle_instances(obs: np.ndarray, sizes: np.ndarray) -> int:
    """Idle instances, read back from the global features."""
    return round(float(obs[global_index(sizes, GlobalFeature.IDLE)]) * sizes[4])


@njit(cache=True)
def waits_for_busy(obs: np.ndarray, sizes: np.ndarray, slot: int) -> bool:
    """Whether `slot`'s layer would end sooner on a busy instance, once its task ends, than on
    the idle instance it would get."""
    return triage.waits_for_busy(float(obs[slot * sizes[2] + SlotFeature.BUSY_GAIN]))


@njit(cache=True)
def oversubscribes(obs: np.ndarray, sizes: np.ndarray, slot: int) -> bool:
    """Whether starting `slot`'s job would push the running layers' bandwidth demand above the
    shared bandwidth (never while nothing runs)."""
    running = float(obs[global_index(sizes, GlobalFeature.RUNNING_DEMAND)])
    demand = float(obs[slot * sizes[2] + SlotFeature.DEMAND])
    return triage.oversubscribes(running, demand, 1.0)  # shares of the capacity


@njit(cache=True)
def service_gap(obs: np.ndarray, sizes: np.ndarray, slot: int) -> float:
    """`deficit` of `slot`'s job read back from its service-level features (target - its
    tenant's rate so far), -inf without a target: a deficit-first rule's key."""
    if obs[service_index(sizes, slot, ServiceFeature.HAS_TARGET)] == 0.0:
        return -np.inf
    target = float(obs[service_index(sizes, slot, ServiceFeature.TARGET)])
    return target - float(obs[service_index(sizes, slot, ServiceFeature.ACHIEVED)])


@njit(cache=True)
def _signed_log(x: float) -> float:
    return np.log1p(x) if x >= 0.0 else -np.log1p(-x)


@njit(cache=True)
def _before(
    key: float, tie: float, job: int, other_key: float, other_tie: float, other: int
) -> bool:
    """(key, tie, job) ranks before (other_key, other_tie, other), lexicographically."""
    if key != other_key:
        return key < other_key
    if tie != other_tie:
        return tie < other_tie
    return job < other


@njit(cache=True)
def _insert(
    keys: np.ndarray, ties: np.ndarray, jobs: np.ndarray, key: float, tie: float, job: int
) -> None:
    """Insert (key, tie, job) into the ascending top-k arrays (empty entries: job -1) if it ranks
    (ties of key: by `tie`, then lower job first)."""
    k = keys.shape[0]
    if jobs[k - 1] >= 0 and not _before(key, tie, job, keys[k - 1], ties[k - 1], jobs[k - 1]):
        return
    i = k - 1
    while i > 0 and (
        jobs[i - 1] < 0 or _before(key, tie, job, keys[i - 1], ties[i - 1], jobs[i - 1])
    ):
        keys[i] = keys[i - 1]
        ties[i] = ties[i - 1]
        jobs[i] = jobs[i - 1]
        i -= 1
    keys[i] = key
    ties[i] = tie
    jobs[i] = job


@njit(cache=True)
def _share(value: float, capacity: float) -> float:
    """value / capacity, 0 with unlimited bandwidth."""
    return 0.0 if capacity == np.inf else value / capacity


@njit(cache=True)
def observe(
    T: Tables,
    P: Pieces,
    S: State,
    scales: np.ndarray,
    tenant_target: np.ndarray,
    reference: int,
    can_wait: bool,
    obs: np.ndarray,
    slots: np.ndarray,
    targets: np.ndarray,
    mask: np.ndarray,
) -> None:
    """Fill the job of each slot (`slots`, -1 = empty), the instance it would go to (`targets`),
    the features `obs` and the action `mask`, in three steps: pick the candidates, write the
    features, build the mask (as many split variants of `P` per slot as `mask` has room for).

    `scales` = (tau, tau_layer, bandwidth capacity in B/s); `tenant_target` = each tenant's
    target (`tenant_targets`) for the service-level slots and features, empty without them."""
    access.refresh_rates(S)
    service = tenant_target.shape[0] > 0
    rates = np.empty(access.tenant_count(S) if service else 0)
    tenant_ready = np.empty_like(rates)
    if service:
        service_rates(T, S, rates, tenant_ready)
    everywhere = np.ones(T.latency.shape[1], dtype=np.bool_)  # the agent places on every type
    queue, feasible_jobs, feasible_work = _pick_candidates(
        T, S, reference, slots, targets, rates, everywhere
    )
    running_demand, busy_left, idle_types = scan_instances(S)
    variants = (mask.shape[0] - 1) // slots.shape[0]
    width = slot_width(T.latency.shape[1], variants, service)
    obs[:] = 0.0
    busy_until = np.empty(idle_types.shape[0])  # work array of the cut features' list schedule
    for s in range(slots.shape[0]):
        if slots[s] >= 0:
            _write_slot(
                T,
                P,
                S,
                scales,
                slots[s],
                targets[s],
                busy_left,
                idle_types,
                s * width,
                variants,
                busy_until,
                obs,
                everywhere,
            )
            if service:
                at = (s + 1) * width - SERVICE_FEATURES
                _write_service(S, slots[s], rates, tenant_ready, queue, obs, at)
    base = slots.shape[0] * width
    for a in range(access.accelerator_count(S)):
        _write_instance(S, a, busy_left[a], scales, obs, base + a * INSTANCE_FEATURES)
    base += access.accelerator_count(S) * INSTANCE_FEATURES
    tau, capacity, instances = scales[0], scales[2], access.accelerator_count(S)
    obs[base + GlobalFeature.QUEUE] = np.log1p(queue)
    obs[base + GlobalFeature.FEASIBLE] = np.log1p(feasible_jobs)
    obs[base + GlobalFeature.HOPELESS] = np.log1p(queue - feasible_jobs)
    obs[base + GlobalFeature.LOAD] = np.log1p(feasible_work / (instances * tau))
    obs[base + GlobalFeature.BANDWIDTH_IN_USE] = _share(access.bandwidth_in_use(S), capacity)
    obs[base + GlobalFeature.IDLE] = idle_types.shape[0] / instances
    obs[base + GlobalFeature.CAN_WAIT] = 1.0 if can_wait else 0.0
    obs[base + GlobalFeature.RUNNING_DEMAND] = _share(running_demand, capacity)
    if service:
        _write_service_globals(rates, tenant_target, obs, base + GLOBAL_FEATURES)
    for i in range(obs.shape[0]):
        obs[i] = min(max(obs[i], -FEATURE_BOUND), FEATURE_BOUND)
    _build_mask(T, P, S, slots, targets, can_wait, running_demand, capacity, mask)


@njit(cache=True, inline="always")  # no call overhead per step
def _pick_candidates(
    T: Tables,
    S: State,
    reference: int,
    slots: np.ndarray,
    targets: np.ndarray,
    rates: np.ndarray,
    everywhere: np.ndarray,
) -> tuple[int, int, float]:
    """The slots' jobs (the module doc's rankings after the `reference` job) and the fastest idle
    instance for each one's next layer (-1 for an empty slot). With service levels (`rates`, the
    tenants' rates so far, not empty) also the deficit ranking. Returns (ready jobs, feasible
    ready jobs, their remaining work)."""
    now = access.now(S)
    n_slots = slots.shape[0]
    service = rates.shape[0] > 0
    k = (n_slots - 2) // (3 if service else 2)
    short_key, short_tie = np.full(k, np.inf), np.zeros(k)
    short_job = np.full(k, -1, dtype=np.int64)
    early_key, early_tie = np.full(k, np.inf), np.zeros(k)
    early_job = np.full(k, -1, dtype=np.int64)
    hopeless_key, hopeless_tie = np.full(1, np.inf), np.zeros(1)
    hopeless_job = np.full(1, -1, dtype=np.int64)
    k_deficit = k if service else 0
    deficit_key, deficit_tie = np.full(k_deficit, np.inf), np.zeros(k_deficit)
    deficit_job = np.full(k_deficit, -1, dtype=np.int64)
    feasible_jobs = 0
    feasible_work = 0.0
    queue = access.ready_count(S)
    for i in range(queue):
        job = access.ready_job(S, i)
        remaining = T.remaining_work[access.job_next_row(S, job)]
        deadline = access.job_deadline(S, job)
        if feasible(now, remaining, deadline):
            feasible_jobs += 1
            feasible_work += remaining
            _insert(short_key, short_tie, short_job, remaining, 0.0, job)
            _insert(early_key, early_tie, early_job, deadline, 0.0, job)
            if service:
                gap = deficit(S, job, rates)  # furthest below first; no target (NaN) after all
                key = -gap if gap == gap else np.inf
                _insert(deficit_key, deficit_tie, deficit_job, key, remaining, job)
        else:
            _insert(hopeless_key, hopeless_tie, hopeless_job, remaining, 0.0, job)
    slots[0] = reference
    slots[1 : 1 + k] = short_job
    slots[1 + k : 1 + 2 * k] = early_job
    slots[1 + 2 * k] = hopeless_job[0]
    slots[2 + 2 * k : 2 + 2 * k + k_deficit] = deficit_job
    for s in range(n_slots):
        targets[s] = (
            -1 if slots[s] < 0 else fastest_idle(T, S, access.job_next_row(S, slots[s]), everywhere)
        )
    return queue, feasible_jobs, feasible_work


@njit(cache=True, inline="always")  # no call overhead per step
def _write_slot(
    T: Tables,
    P: Pieces,
    S: State,
    scales: np.ndarray,
    job: int,
    target: int,
    busy_left: np.ndarray,
    idle_types: np.ndarray,
    base: int,
    variants: int,
    busy_until: np.ndarray,
    obs: np.ndarray,
    everywhere: np.ndarray,
) -> None:
    """The features of the slot holding `job` (bound for instance `target`) from `obs[base]`;
    `everywhere`: every type allowed (bool[types])."""
    tau, tau_layer, capacity = scales[0], scales[1], scales[2]
    now = access.now(S)
    n_types = T.latency.shape[1]
    row = access.job_next_row(S, job)
    kind = access.accelerator_type(S, target)
    remaining = T.remaining_work[row]
    deadline = access.job_deadline(S, job)
    slack = deadline - now
    latency = T.latency[row, kind]
    obs[base + SlotFeature.PRESENT] = 1.0
    obs[base + SlotFeature.FEASIBLE] = 1.0 if feasible(now, remaining, deadline) else 0.0
    obs[base + SlotFeature.SLACK] = _signed_log(slack / tau)
    obs[base + SlotFeature.REMAINING] = np.log1p(remaining / tau)
    obs[base + SlotFeature.LAXITY] = _signed_log((slack - remaining) / tau)
    obs[base + SlotFeature.WORK_LEFT] = remaining / access.job_isolated(S, job)
    obs[base + SlotFeature.PRIORITY] = access.job_priority(S, job) / 9.0
    obs[base + SlotFeature.WAITED] = np.log1p((now - access.job_ready_since(S, job)) / tau)
    obs[base + SlotFeature.SLOWDOWN] = np.log(latency / T.best_latency[row])
    obs[base + SlotFeature.DEMAND] = _share(T.demand[row, kind], capacity)
    obs[base + SlotFeature.BUSY_GAIN] = busy_gain(
        latency, earliest_finish(T, S, row, busy_left, everywhere)
    )
    for t in range(n_types):
        obs[base + SLOT_BASE_FEATURES + t] = np.log1p(T.latency[row, t] / tau_layer)
        obs[base + SLOT_BASE_FEATURES + n_types + t] = _share(T.demand[row, t], capacity)
    if variants > 1:
        cuts_at = base + SLOT_BASE_FEATURES + 2 * n_types
        _observe_cuts(T, P, S, job, kind, variants, idle_types, busy_until, obs, cuts_at)


@njit(cache=True, inline="always")  # no call overhead per step
def _write_service(
    S: State,
    job: int,
    rates: np.ndarray,
    tenant_ready: np.ndarray,
    queue: int,
    obs: np.ndarray,
    at: int,
) -> None:
    """The service-level features of the slot holding `job` from `obs[at]` (`rates` and
    `tenant_ready`: each tenant's rate so far and ready jobs, `queue` all ready jobs)."""
    tenant = access.job_tenant(S, job)
    target = access.job_target(S, job)
    achieved = rates[tenant]
    obs[at + ServiceFeature.ACHIEVED] = achieved
    obs[at + ServiceFeature.TENANT_READY] = tenant_ready[tenant] / queue
    if target == target:  # not NaN
        obs[at + ServiceFeature.TARGET] = target
        obs[at + ServiceFeature.HAS_TARGET] = 1.0
        obs[at + ServiceFeature.DEFICIT] = max(0.0, target - achieved)


@njit(cache=True, inline="always")  # no call overhead per step
def _write_service_globals(
    rates: np.ndarray, tenant_target: np.ndarray, obs: np.ndarray, at: int
) -> None:
    """The service-level global features from `obs[at]`, over the tenants with a target (`rates`:
    their rates so far)."""
    worst, below, with_target = 0.0, 0, 0
    for tenant in range(tenant_target.shape[0]):
        target = tenant_target[tenant]
        if target != target:  # NaN: no target
            continue
        with_target += 1
        gap = target - rates[tenant]
        worst = max(worst, gap)
        below += 1 if gap > 0.0 else 0
    obs[at + ServiceGlobalFeature.WORST_DEFICIT] = worst
    obs[at + ServiceGlobalFeature.BELOW_TARGET] = below / with_target if with_target > 0 else 0.0


@njit(cache=True, inline="always")  # no call overhead per step
def _write_instance(
    S: State, a: int, busy_left: float, scales: np.ndarray, obs: np.ndarray, base: int
) -> None:
    """The features of instance `a` from `obs[base]`."""
    if access.is_idle(S, a):
        obs[base + InstanceFeature.IDLE] = 1.0
    else:
        obs[base + InstanceFeature.BUSY_LEFT] = np.log1p(busy_left / scales[1])
        bandwidth = access.task_demand(S, a) * access.task_rate(S, a)
        obs[base + InstanceFeature.BANDWIDTH] = _share(bandwidth, scales[2])


@njit(cache=True, inline="always")  # no call overhead per step
def _build_mask(
    T: Tables,
    P: Pieces,
    S: State,
    slots: np.ndarray,
    targets: np.ndarray,
    can_wait: bool,
    running_demand: float,
    capacity: float,
    mask: np.ndarray,
) -> None:
    """Valid actions: every filled slot whole; each split variant that really cuts a layer not
    started yet; wait only if `can_wait` and no candidate could start on an instance of its
    fastest type, or each would oversubscribe the bandwidth."""
    n_slots = slots.shape[0]
    variants = (mask.shape[0] - 1) // n_slots
    best_type_idle = False
    fits = False  # some candidate starts without oversubscribing the bandwidth
    mask[:] = False
    for s in range(n_slots):
        job = slots[s]
        if job < 0:
            continue
        mask[s * variants] = True
        row = access.job_next_row(S, job)
        kind = access.accelerator_type(S, targets[s])
        best_type_idle = best_type_idle or T.latency[row, kind] <= T.best_latency[row]
        demand = T.demand[row, kind]
        fits = fits or not triage.oversubscribes(running_demand, demand, capacity)
        for v in range(1, variants):
            mask[s * variants + v] = access.job_pieces_left(S, job) == 0 and P.count[row, v] > 1
    mask[n_slots * variants] = can_wait and (not best_type_idle or not fits)


@njit(cache=True)
def _observe_cuts(
    T: Tables,
    P: Pieces,
    S: State,
    job: int,
    kind: int,
    variants: int,
    idle_types: np.ndarray,
    busy_until: np.ndarray,
    obs: np.ndarray,
    at: int,
) -> None:
    """The resizing features of `job`'s slot from `obs[at]`: share of its layer's pieces not
    started yet, then per split variant 1 <= v < `variants` the log of when the cut layer would
    finish against the whole layer on accelerator type `kind` (its target), and the cut's relative
    extra DRAM traffic there.

    The finish is a list schedule of the pieces on the instances idle now (of `idle_types`, one
    entry of the work array `busy_until` each), each piece on the one where it ends first: a cut
    pays only if its pieces find fast enough instances, and a piece on a slow one can end after
    the whole layer on a fast one."""
    row = access.job_next_row(S, job)
    left = access.job_pieces_left(S, job)
    if left > 0:
        obs[at] = left / P.count[row, access.job_split(S, job)]
    idle = busy_until.shape[0]
    whole_latency = T.latency[row, kind]
    whole_bytes = max(whole_latency * T.demand[row, kind], 1.0)
    for v in range(1, variants):
        column = P.offset[v]
        if P.count[row, v] < 2:
            continue
        busy_until[:] = 0.0
        finish = 0.0
        cut_bytes = 0.0
        for piece in range(P.count[row, v]):
            best, best_end = 0, np.inf
            for i in range(idle):
                end = busy_until[i] + P.latency[row, column + piece, idle_types[i]]
                if end < best_end:
                    best, best_end = i, end
            busy_until[best] = best_end
            finish = max(finish, best_end)
            cut_bytes += P.latency[row, column + piece, kind] * P.demand[row, column + piece, kind]
        obs[at + 2 * v - 1] = np.log(finish / whole_latency)
        obs[at + 2 * v] = cut_bytes / whole_bytes - 1.0


# The cached kernel embeds the engine's accessors: recompile when one of these sources changes.
jit_cache.refresh(
    observe,
    (engine_kernels, access, triage, sys.modules[__name__]),
    stamp="relmas-rl-observe.sha256",
)


def time_scales(engine: Engine) -> tuple[float, float]:
    """(tau, tau_layer): mean isolated latency of the models, mean best latency of a layer."""
    tables = engine.tables
    layers = np.concatenate(
        [
            np.arange(first, first + n)
            for first, n in zip(tables.first_row, tables.n_layers, strict=True)
        ]
    )
    return float(tables.isolated_s.mean()), float(tables.best_latency_s[layers].mean())


def observation_layout(
    settings: ObservationSettings, types: int, instances: int, split_variants: tuple[str, ...]
) -> Layout:
    """The layout of `settings` (`service` decided, `resolve_service`) on a system of `types`
    and `instances` whose piece tables have `split_variants` (variant 0 = whole layer; only a
    resizing agent chooses among them)."""
    if settings.resize and len(split_variants) < 2:
        raise ValueError(
            "a resizing agent needs piece tables with cuts (relmas profile --pieces, resizing:)"
        )
    if settings.service is None:
        raise ValueError("the observation's service option is undecided (resolve_service)")
    variants = len(split_variants) if settings.resize else 1
    return Layout(settings.slots, types, instances, variants, settings.service)


def tenant_targets(engine: Engine, settings: ObservationSettings) -> np.ndarray:
    """Each tenant's target (`engine.tenants`' order; NaN: none) for the service-level global
    features: the mean target of its jobs that have one (its own target, or with per-model
    targets their mean over its jobs); empty when `settings` has no service features."""
    if not settings.service:
        return np.zeros(0)
    tenant_of_job = engine.jobs["tenant"].to_numpy()
    job_targets = engine.jobs["target"].to_numpy().astype(np.float64)  # null: NaN
    targets = np.full(len(engine.tenants), np.nan)
    for t, tenant in enumerate(engine.tenants):
        values = job_targets[(tenant_of_job == tenant) & ~np.isnan(job_targets)]
        if values.size:
            targets[t] = exact_mean(values)
    return targets


def exact_mean(values: np.ndarray) -> float:
    """The mean of `values` independent of their order and of threads: equal values' own value
    (a tenant's target is met by a rate equal to it), else their correctly rounded sum / count.
    Not polars' grouped mean: it sums in a thread-dependent order, so a target's last bit, and with
    it whether a rate equal to the target counts as below it, changed from run to run."""
    if np.all(values == values[0]):
        return float(values[0])
    return math.fsum(values.tolist()) / values.size


class Observation(NamedTuple):
    obs: np.ndarray  # float32 features
    mask: np.ndarray  # bool, valid actions


class Observer:
    """Observation, mask and action translation for one engine (one simulation)."""

    def __init__(self, engine: Engine, settings: ObservationSettings):
        self.engine = engine
        self.settings = settings = resolve_service(settings, engine.jobs)
        self.layout = observation_layout(
            settings,
            len(engine.tables.types),
            len(engine.system.instance_types),
            engine.split_variants,
        )
        tau, tau_layer = time_scales(engine)
        capacity = access.bandwidth_capacity(engine.state)
        self.scales = np.array([tau, tau_layer, capacity])
        self.tenant_target = tenant_targets(engine, settings)
        self.slots = np.full(settings.slots, -1, dtype=np.int64)
        self.targets = np.full(settings.slots, -1, dtype=np.int64)
        self.reference: HeuristicPolicy = make_policy(settings.reference)  # type: ignore[assignment]
        self.reference.reset(engine)
        self._observe = engine_kernels.entry_point(
            observe,
            engine.kernel_tables,
            engine.kernel_pieces,
            engine.state,
            self.scales,
            self.tenant_target,
            0,
            True,
            np.zeros(self.layout.size, dtype=np.float32),
            self.slots,
            self.targets,
            np.zeros(self.layout.actions, dtype=bool),
        )

    def observe(self, view: DecisionView) -> Observation:
        """The observation at `view`."""
        engine = self.engine
        first = self.reference.decide(view)
        reference = first[0][0] if first else -1
        obs = np.empty(self.layout.size, dtype=np.float32)
        mask = np.empty(self.layout.actions, dtype=bool)
        self._observe(
            engine.kernel_tables,
            engine.kernel_pieces,
            engine.state,
            self.scales,
            self.tenant_target,
            reference,
            view.can_wait,
            obs,
            self.slots,
            self.targets,
            mask,
        )
        return Observation(obs, mask)

    def assignments(self, action: int) -> list[tuple[int, int, int]]:
        """The (job, instance, split variant) that `action` starts ([] = wait), for the last
        observation."""
        layout = self.layout
        if action == layout.actions - 1:
            return []
        slot = layout.slot_of(action)
        return [(int(self.slots[slot]), int(self.targets[slot]), layout.variant_of(action))]
