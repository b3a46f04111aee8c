"""What the RELMAS agent sees and chooses from at a decision point: candidate jobs, the accelerator
types, their pairs, the mask, and its teacher's action.

One action starts one ready job's next layer on an idle instance of one accelerator type (the
lowest-index idle instance of that type: instances of a type are alike), or waits. The action is
a (candidate slot, accelerator type) pair, for a resizing agent also a split variant. The
candidates are not simply the M earliest deadlines: under overload those are jobs that can no
longer make it, and serving them first is what makes EDF collapse. The slots are, in this order:

- slot 0, the *reference*: the job the reference baseline (a rule baseline with its placement,
  `relmas.policies.rules.choose`, `Reference`) starts now, empty when it waits; its action
  (slot 0, the type of its instance), or wait, is the *teacher's* action, so that the agent can
  always do exactly what that baseline does (tested: schedule for schedule);
- `candidates` slots: the feasible jobs with the least remaining work (SJF among feasible jobs);
- `candidates` slots: the feasible jobs with the earliest deadlines (EDF among feasible jobs);
- one slot: the hopeless job with the least remaining work (work for otherwise idle instances);
- with service levels (`ObservationSettings.service`), `candidates` more slots: the feasible jobs
  of the tenants furthest below their targets (deficit = target - the tenant's deadline-hit rate
  so far; a job without a target ranks after every job with one), ties by least remaining work.

*Feasible* = it can still meet its deadline: slack >= remaining work at full speed on the best
types (`relmas.policies.triage`, shared with the rule baselines).

The observation is factored for a network that scores every (slot, type) pair with one set of
weights (`relmas.rl.network`, Decima-like): per slot its job's features, per type its instances'
features, per (slot, type) pair the layer's costs on that type (`PairFeature`: its latency,
bytes, its cost with the bandwidth the running layers leave, `relmas.policies.placement._cost`,
whether it ends before an instance of the layer's home type frees up, ...), then the global
features. `Layout.rows` says which features each pair's score reads.

The mask: a pair is valid iff the slot holds a job and the type has an idle instance (a split
variant >= 1 also only for a layer not started yet that it really cuts). Wait is valid only when
waiting cannot deadlock (something runs or a job is still to arrive) and either no candidate could
start on an instance of its own fastest type, or every candidate would push the running layers'
bandwidth demand above the shared bandwidth on the fastest idle instance (docs/relmas.md,
"Holding back"), or the teacher waits (a placement may hold work back while an instance of a type
it does not use is idle).

With `resize` (the `relmas_resize` policy, docs/gacer.md) a pair also picks how to cut the layer:
one action per (slot, type, split variant), variant 0 the whole layer, the first piece on the
pair's type; a job whose layer is already cut offers only variant 0, its next piece. Each pair
then also shows, per variant, when the cut layer would finish on the idle instances and the cut's
extra DRAM traffic, against the whole layer on that type.

Service levels are an option of the observation: with `service` each slot also shows its job's
target, its tenant's rate so far, deficit and share of the ready jobs, and the globals the worst
deficit and the share of tenants below target.

Features (docs/relmas.md lists them all) are computed by one Numba kernel from the engine's state
arrays, normalised by two time scales of the system: tau, the mean isolated latency of the
configured models, and tau_layer, the mean best latency of a layer. Where each feature sits is
named once, in the feature table below. The reward's bookkeeping is the environment's
(`relmas.rl.env`).
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

from relmas import catalog
from relmas.hw import jit_cache
from relmas.policies import make_policy, placement, triage
from relmas.policies import rules as baseline_rules
from relmas.policies.placement import ALL, HOME_TOLERANCE, _cost
from relmas.policies.rules import RuleBaseline, choose
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
FEATURES_VERSION = 3  # 3: (slot, type) pair actions, the rule baseline's reference slot
FEATURE_BOUND = 30.0  # features are clipped to [-FEATURE_BOUND, FEATURE_BOUND]


# The feature table: the one definition of where each feature sits, for the kernel that writes
# them and for every reader (the teacher's cut, tests). docs/relmas.md explains each.


class SlotFeature(IntEnum):
    """Offsets within a slot's features (its job's). After them: for a resizing agent the share
    of its layer's pieces not started yet, then with `service` the service-level features."""

    PRESENT = 0  # 1 if the slot holds a job
    FEASIBLE = 1  # 1 if the job can still meet its deadline
    SLACK = 2  # sl(slack / tau)
    REMAINING = 3  # log(1 + remaining work / tau)
    LAXITY = 4  # sl((slack - remaining work) / tau)
    WORK_LEFT = 5  # remaining work / isolated latency
    PRIORITY = 6  # priority / 9
    WAITED = 7  # log(1 + time since ready / tau)


class TypeFeature(IntEnum):
    """Offsets within an accelerator type's features (over its instances)."""

    INSTANCES = 0  # its instances / all instances
    IDLE = 1  # its idle instances / its instances
    BUSY_LEFT = 2  # log(1 + least busy time left of its instances at current rates / tau_layer)
    BANDWIDTH = 3  # bandwidth its running layers use now / capacity
    DEMAND = 4  # full-speed bandwidth demand of its running layers / capacity


class PairFeature(IntEnum):
    """Offsets within a (slot, type) pair's features: the slot's next layer on that type. After
    them, for a resizing agent, (finish, extra traffic) per split variant >= 1
    (`Layout.cut_finish_feature`)."""

    STARTS = 0  # 1 if the slot holds a job and the type has an idle instance
    LATENCY = 1  # log(1 + latency / tau_layer)
    SLOWDOWN = 2  # log(latency / best latency)
    DEMAND = 3  # full-speed bandwidth demand / capacity
    COST = 4  # log(max(latency, bytes / bandwidth left) / latency): placement._cost
    HOME = 5  # 1 if the type is the layer's home (least cost with the bandwidth left)
    BEFORE_HOME = 6  # 1 if it ends before an instance of the home type frees up
    LEFT_SHARE = 7  # demand / bandwidth the running layers leave (FEATURE_BOUND if none)
    BUSY_GAIN = 8  # log(latency / earliest end on any instance, busy ones too)
    TEACHER = 9  # 1 on the teacher's pair


class GlobalFeature(IntEnum):
    """Offsets within the global features (after every slot's, type's and pair's)."""

    QUEUE = 0  # log(1 + ready jobs)
    FEASIBLE = 1  # log(1 + feasible ready jobs)
    HOPELESS = 2  # log(1 + hopeless ready jobs)
    LOAD = 3  # log(1 + feasible ready work / (instances x tau))
    BANDWIDTH_IN_USE = 4  # bandwidth in use / capacity
    IDLE = 5  # share of idle instances
    CAN_WAIT = 6  # 1 if waiting is allowed
    RUNNING_DEMAND = 7  # full-speed bandwidth demand of the running layers / capacity
    TEACHER_WAITS = 8  # 1 if the teacher waits


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
TYPE_FEATURES = len(TypeFeature)
PAIR_BASE_FEATURES = len(PairFeature)
GLOBAL_FEATURES = len(GlobalFeature)
SERVICE_FEATURES = len(ServiceFeature)
SERVICE_GLOBAL_FEATURES = len(ServiceGlobalFeature)


@njit(cache=True, inline="always")
def slot_width(variants: int, service: bool) -> int:
    """Features per slot: the base ones, with split variants the share of pieces left, with
    `service` the service-level ones."""
    return SLOT_BASE_FEATURES + (1 if variants > 1 else 0) + (SERVICE_FEATURES if service else 0)


@njit(cache=True, inline="always")
def pair_width(variants: int) -> int:
    """Features per (slot, type) pair: the base ones, then (finish, extra traffic) per variant
    >= 1."""
    return PAIR_BASE_FEATURES + 2 * (variants - 1)


@njit(cache=True, inline="always")
def deficit(S: State, job: int, rates: np.ndarray) -> float:
    """The job's target minus its tenant's rate so far (`rates`, `service_rates`'), negative
    above the target, NaN without a target: how far the tenant is below what the job counts
    towards."""
    return access.job_target(S, job) - rates[access.job_tenant(S, job)]


@dataclass(frozen=True)
class ObservationSettings:
    """`candidates` jobs per ranking (shortest, earliest feasible, and with service levels the
    deficit ranking); `reference`: the rule baseline of slot 0 and the teacher (`best`: the best
    rule or target-aware baseline on validation, resolved at training) with its `placement`
    (`Placement.parse`'s forms; not a config key: chosen with it); `resize`: actions also choose
    a split variant (relmas_resize; not a config key); `service`: the service-level slots and
    features (None: whether the jobs carry targets, `resolve_service`)."""

    candidates: int
    reference: str
    resize: bool = False  # not a config key: set by the policy trained (relmas.rl.run)
    service: bool | None = False
    placement: str = ALL  # not a config key: the reference's, chosen on validation

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
        return slot_width.py_func(self.variants, self.service)

    @cached_property
    def pair_features(self) -> int:
        return pair_width.py_func(self.variants)

    @property
    def globals(self) -> int:
        return GLOBAL_FEATURES + (SERVICE_GLOBAL_FEATURES if self.service else 0)

    @property
    def size(self) -> int:
        return self._global_features + self.globals

    @property
    def pairs(self) -> int:
        return self.slots * self.types

    @property
    def actions(self) -> int:
        return self.pairs * self.variants + 1  # the last one waits

    def action(self, slot: int, kind: int, variant: int = 0) -> int:
        """The action that starts `slot`'s job on an idle instance of type `kind`, split
        `variant`."""
        return (slot * self.types + kind) * self.variants + variant

    def slot_of(self, action: int) -> int:
        return action // (self.types * self.variants)

    def type_of(self, action: int) -> int:
        return (action // self.variants) % self.types

    def variant_of(self, action: int) -> int:
        """Split variant of `action` (0 for whole layers and for wait)."""
        return 0 if action == self.actions - 1 else action % self.variants

    def slot_feature(self, slot: int, feature: int) -> int:
        """Index of `slot`'s `feature` in the observation."""
        return slot * self.slot_features + feature

    def type_feature(self, kind: int, feature: TypeFeature) -> int:
        """Index of type `kind`'s `feature`."""
        return type_index.py_func(self.sizes, kind, feature)

    def pair_feature(self, slot: int, kind: int, feature: int) -> int:
        """Index of the (`slot`, `kind`) pair's `feature`."""
        return pair_index.py_func(self.sizes, slot, kind, feature)

    def global_feature(self, feature: int) -> int:
        """Index of the global `feature`."""
        return global_index.py_func(self.sizes, feature)

    def service_feature(self, slot: int, feature: ServiceFeature) -> int:
        """Index of `slot`'s service-level `feature` (a layout with `service`)."""
        return (slot + 1) * self.slot_features - SERVICE_FEATURES + feature

    def service_global_feature(self, feature: ServiceGlobalFeature) -> int:
        """Index of the service-level global `feature` (a layout with `service`)."""
        return self.global_feature(GLOBAL_FEATURES + feature)

    def cut_finish_feature(self, slot: int, kind: int, variant: int) -> int:
        """Index of the pair's log finish of its layer cut by `variant` >= 1, against the whole
        layer on that type."""
        return cut_finish_index.py_func(self.sizes, slot, kind, variant)

    @cached_property
    def sizes(self) -> np.ndarray:
        """(slots, variants, features per slot, types, instances, features per pair): the
        layout for the jitted readers of an observation below."""
        sizes = (
            self.slots,
            self.variants,
            self.slot_features,
            self.types,
            self.instances,
            self.pair_features,
        )
        return np.array(sizes, dtype=np.int64)

    @cached_property
    def rows(self) -> np.ndarray:
        """int64[pairs + 1, inputs]: which observation entries each score reads, for the pair
        network (`relmas.rl.network`): row (slot x types + type) the slot's, the type's and the
        pair's features, the globals and 0 (not wait); the last row the globals and 1 (wait).
        Index `size` stands for 0, `size` + 1 for 1."""
        zero, one = self.size, self.size + 1
        width = self.slot_features + TYPE_FEATURES + self.pair_features + self.globals + 1
        rows = np.full((self.pairs + 1, width), zero, dtype=np.int64)
        at_globals = self._global_features + np.arange(self.globals)
        for slot in range(self.slots):
            slot_at = slot * self.slot_features + np.arange(self.slot_features)
            for kind in range(self.types):
                type_at = self.type_feature(kind, 0) + np.arange(TYPE_FEATURES)
                pair_at = self.pair_feature(slot, kind, 0) + np.arange(self.pair_features)
                rows[slot * self.types + kind, :-1] = np.concatenate(
                    [slot_at, type_at, pair_at, at_globals]
                )
        rows[-1, -1 - self.globals : -1] = at_globals
        rows[-1, -1] = one
        return rows

    @property
    def row_blocks(self) -> tuple[int, ...]:
        """Widths of the blocks of a row (`rows`): the slot's, the type's, the pair's features,
        the globals, the wait flag; the network projects each block's distinct inputs once
        (`relmas.rl.network.Factors`)."""
        return (self.slot_features, TYPE_FEATURES, self.pair_features, self.globals, 1)

    @cached_property
    def _global_features(self) -> int:
        return self.global_feature(0)


# Jitted readers of an observation laid out by `sizes` (`Layout.sizes`).


@njit(cache=True, inline="always")
def type_index(sizes: np.ndarray, kind: int, feature: int) -> int:
    """Index of type `kind`'s `feature`, after every slot's."""
    return sizes[0] * sizes[2] + kind * TYPE_FEATURES + feature


@njit(cache=True, inline="always")
def pair_index(sizes: np.ndarray, slot: int, kind: int, feature: int) -> int:
    """Index of the (`slot`, `kind`) pair's `feature`, after every type's."""
    return type_index(sizes, sizes[3], 0) + (slot * sizes[3] + kind) * sizes[5] + feature


@njit(cache=True, inline="always")
def global_index(sizes: np.ndarray, feature: int) -> int:
    """Index of the global `feature`, after every pair's."""
    return pair_index(sizes, sizes[0], 0, 0) + feature


@njit(cache=True, inline="always")
def cut_finish_index(sizes: np.ndarray, slot: int, kind: int, variant: int) -> int:
    """Index of the pair's log finish of its layer cut by `variant` >= 1."""
    return pair_index(sizes, slot, kind, PAIR_BASE_FEATURES + 2 * variant - 2)


@njit(cache=True)
def queue_length(obs: np.ndarray, sizes: np.ndarray) -> int:
    """Ready jobs, read back from the global features."""
    return round(float(np.expm1(obs[global_index(sizes, GlobalFeature.QUEUE)])))


@njit(cache=True)
def idle_instances(obs: np.ndarray, sizes: np.ndarray) -> int:
    """Idle instances, read back from the global features."""
    return round(float(obs[global_index(sizes, GlobalFeature.IDLE)]) * sizes[4])


@njit(cache=True)
def teacher_action(
    obs: np.ndarray, mask: np.ndarray, sizes: np.ndarray, cut_pieces: np.ndarray
) -> int:
    """The teacher's action, read back from the observation: the reference baseline's (its pair
    of slot 0, `PairFeature.TEACHER`, or wait, `GlobalFeature.TEACHER_WAITS`), cut with
    `cut_pieces` (pieces of each split variant; empty: whole layers) onto spare idle instances —
    GACER's use of resizing: when more instances are idle than jobs are ready, by the variant
    whose pieces would finish first on the idle instances if that beats the whole layer and the
    spare instances take its pieces."""
    wait = mask.shape[0] - 1
    if obs[global_index(sizes, GlobalFeature.TEACHER_WAITS)] == 1.0:
        return wait
    variants, types = sizes[1], sizes[3]
    kind = 0
    while obs[pair_index(sizes, 0, kind, PairFeature.TEACHER)] != 1.0:
        kind += 1
        if kind == types:
            raise RuntimeError("the observation shows no teacher's action")
    teacher = kind * variants  # slot 0's pair
    if cut_pieces.shape[0] == 0:
        return teacher
    spare = idle_instances(obs, sizes) - queue_length(obs, sizes)
    best, chosen = 0.0, teacher  # log(cut finish / whole finish): cut only if below
    for variant in range(1, variants):
        action = teacher + variant
        if mask[action] and cut_pieces[variant] <= 1 + spare:
            finish = obs[cut_finish_index(sizes, 0, kind, variant)]
            if finish < best:
                best, chosen = finish, action
    return chosen


class Reference(NamedTuple):
    """The reference baseline as the observation kernel runs it (`relmas.policies.rules.choose`'s
    arguments besides the engine's state)."""

    costs: Tables  # its view of the costs (`Placement.tables`)
    rule: np.ndarray  # int64[5]: rank, patient, gated, ordered, by (`RuleBaseline.parameters`)
    allowed: np.ndarray  # bool[types]: its placement's types
    bandwidth: np.ndarray  # bool[1]: its placement is the bandwidth-aware one


def reference_baseline(engine: Engine, settings: ObservationSettings) -> Reference:
    """The kernel arguments of the reference baseline of `settings` (a rule or target-aware
    baseline, with its placement) on `engine`."""
    if settings.reference not in catalog.placed():
        expected = f"a rule or target-aware baseline {list(catalog.placed())}"
        raise ValueError(f"the reference must be {expected}, not {settings.reference!r}")
    baseline: RuleBaseline = make_policy(settings.reference, placement=settings.placement)  # type: ignore[assignment]
    where = baseline.placement
    allowed = where.allowed(engine.tables.types)
    view = where.tables(engine.tables, allowed)
    rule = np.array([int(value) for value in baseline.parameters], dtype=np.int64)
    return Reference(view, rule, allowed, np.array([where.bandwidth]))


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")  # a call would count references of its three arrays
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


@njit(cache=True, inline="always")
def _share(value: float, capacity: float) -> float:
    """value / capacity, 0 with unlimited bandwidth."""
    return 0.0 if capacity == np.inf else value / capacity


@njit(cache=True)
def observe(
    T: Tables,
    P: Pieces,
    S: State,
    R: Reference,
    scales: np.ndarray,
    tenant_target: np.ndarray,
    obs: np.ndarray,
    slots: np.ndarray,
    mask: np.ndarray,
) -> None:
    """Fill the job of each slot (`slots`, -1 = empty), the features `obs` and the action `mask`
    (as many split variants of `P` per pair as `mask` has room for): the reference baseline `R`
    decides, its job fills slot 0 and its action is marked (`PairFeature.TEACHER`,
    `GlobalFeature.TEACHER_WAITS`), then the other candidates, the features and the mask.

    `scales` = (tau, tau_layer, bandwidth capacity in B/s); `tenant_target` = each tenant's
    target (`tenant_targets`) for the service-level slots and features, empty without them."""
    job, instance = choose(
        R.costs, S, R.rule[0], R.rule[1] != 0, R.rule[2] != 0, R.rule[3] != 0, R.rule[4],
        R.allowed, R.bandwidth[0],
    )  # fmt: skip
    access.refresh_rates(S)
    service = tenant_target.shape[0] > 0
    rates = np.empty(access.tenant_count(S) if service else 0)
    tenant_ready = np.empty_like(rates)
    if service:
        service_rates(T, S, rates, tenant_ready)
    queue, feasible_jobs, feasible_work = _pick_candidates(T, S, job, slots, rates)
    running_demand, busy_left, idle_types = scan_instances(S)
    n_types = T.latency.shape[1]
    variants = (mask.shape[0] - 1) // (slots.shape[0] * n_types)
    width = slot_width(variants, service)
    sizes = np.array(
        [
            slots.shape[0],
            variants,
            width,
            n_types,
            access.accelerator_count(S),
            pair_width(variants),
        ]
    )
    obs[:] = 0.0
    idle_of_type = _write_types(S, busy_left, scales, obs, sizes)
    busy_until = np.empty(idle_types.shape[0])  # work array of the cut features' list schedule
    finishes = np.zeros(variants)  # work array: each cut's list-schedule finish
    for s in range(slots.shape[0]):
        if slots[s] >= 0:
            _write_slot(T, P, S, scales, slots[s], s * width, variants, obs)
            if service:
                at = (s + 1) * width - SERVICE_FEATURES
                _write_service(S, slots[s], rates, tenant_ready, queue, obs, at)
            _write_pairs(
                T, P, S, scales, slots[s], s, idle_of_type, running_demand, busy_left,
                idle_types, busy_until, finishes, sizes, obs,
            )  # fmt: skip
    if job >= 0:
        obs[pair_index(sizes, 0, access.accelerator_type(S, instance), PairFeature.TEACHER)] = 1.0
    base = global_index(sizes, 0)
    tau, capacity, instances = scales[0], scales[2], access.accelerator_count(S)
    can_wait = access.can_wait(S)
    obs[base + GlobalFeature.QUEUE] = np.log1p(queue)
    obs[base + GlobalFeature.FEASIBLE] = np.log1p(feasible_jobs)
    obs[base + GlobalFeature.HOPELESS] = np.log1p(queue - feasible_jobs)
    obs[base + GlobalFeature.LOAD] = np.log1p(feasible_work / (instances * tau))
    obs[base + GlobalFeature.BANDWIDTH_IN_USE] = _share(access.bandwidth_in_use(S), capacity)
    obs[base + GlobalFeature.IDLE] = idle_types.shape[0] / instances
    obs[base + GlobalFeature.CAN_WAIT] = 1.0 if can_wait else 0.0
    obs[base + GlobalFeature.RUNNING_DEMAND] = _share(running_demand, capacity)
    obs[base + GlobalFeature.TEACHER_WAITS] = 1.0 if job < 0 else 0.0
    if service:
        _write_service_globals(rates, tenant_target, obs, base + GLOBAL_FEATURES)
    for i in range(obs.shape[0]):
        obs[i] = min(max(obs[i], -FEATURE_BOUND), FEATURE_BOUND)
    _build_mask(T, P, S, slots, idle_of_type, can_wait, job < 0, running_demand, mask)


@njit(cache=True, inline="always")  # no call overhead per step
def _pick_candidates(
    T: Tables, S: State, reference: int, slots: np.ndarray, rates: np.ndarray
) -> tuple[int, int, float]:
    """The slots' jobs (the module doc's rankings after the `reference` job). With service
    levels (`rates`, the tenants' rates so far, not empty) also the deficit ranking. Returns
    (ready jobs, feasible ready jobs, their remaining work)."""
    now = access.now(S)
    n_slots = slots.shape[0]
    service = rates.shape[0] > 0
    k = (n_slots - 2) // (3 if service else 2)
    short_key, short_tie = np.full(k, np.inf), np.zeros(k)
    short_job = np.full(k, -1, dtype=np.int64)
    early_key, early_tie = np.full(k, np.inf), np.zeros(k)
    early_job = np.full(k, -1, dtype=np.int64)
    hopeless_key, hopeless_job = np.inf, -1  # the top 1: no arrays to insert into
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
        elif hopeless_job < 0 or _before(remaining, 0.0, job, hopeless_key, 0.0, hopeless_job):
            hopeless_key, hopeless_job = remaining, job
    slots[0] = reference
    slots[1 : 1 + k] = short_job
    slots[1 + k : 1 + 2 * k] = early_job
    slots[1 + 2 * k] = hopeless_job
    slots[2 + 2 * k : 2 + 2 * k + k_deficit] = deficit_job
    return queue, feasible_jobs, feasible_work


@njit(cache=True, inline="always")  # no call overhead per step
def _write_types(
    S: State, busy_left: np.ndarray, scales: np.ndarray, obs: np.ndarray, sizes: np.ndarray
) -> np.ndarray:
    """Each accelerator type's features; returns its idle instances (int64[types])."""
    n_types, instances = sizes[3], access.accelerator_count(S)
    count = np.zeros(n_types, dtype=np.int64)
    idle = np.zeros(n_types, dtype=np.int64)
    least = np.full(n_types, np.inf)
    for a in range(instances):
        kind = access.accelerator_type(S, a)
        at = type_index(sizes, kind, 0)
        count[kind] += 1
        if access.is_idle(S, a):
            idle[kind] += 1
            least[kind] = 0.0
        else:
            least[kind] = min(least[kind], busy_left[a])
            bandwidth = access.task_demand(S, a) * access.task_rate(S, a)
            obs[at + TypeFeature.BANDWIDTH] += _share(bandwidth, scales[2])
            obs[at + TypeFeature.DEMAND] += _share(access.task_demand(S, a), scales[2])
    for kind in range(n_types):
        at = type_index(sizes, kind, 0)
        obs[at + TypeFeature.INSTANCES] = count[kind] / instances
        if count[kind] > 0:
            obs[at + TypeFeature.IDLE] = idle[kind] / count[kind]
            obs[at + TypeFeature.BUSY_LEFT] = np.log1p(least[kind] / scales[1])
    return idle


@njit(cache=True, inline="always")  # no call overhead per step
def _write_slot(
    T: Tables,
    P: Pieces,
    S: State,
    scales: np.ndarray,
    job: int,
    base: int,
    variants: int,
    obs: np.ndarray,
) -> None:
    """The features of the slot holding `job` from `obs[base]`."""
    tau = scales[0]
    now = access.now(S)
    row = access.job_next_row(S, job)
    remaining = T.remaining_work[row]
    deadline = access.job_deadline(S, job)
    slack = deadline - now
    obs[base + SlotFeature.PRESENT] = 1.0
    obs[base + SlotFeature.FEASIBLE] = 1.0 if feasible(now, remaining, deadline) else 0.0
    obs[base + SlotFeature.SLACK] = _signed_log(slack / tau)
    obs[base + SlotFeature.REMAINING] = np.log1p(remaining / tau)
    obs[base + SlotFeature.LAXITY] = _signed_log((slack - remaining) / tau)
    obs[base + SlotFeature.WORK_LEFT] = remaining / access.job_isolated(S, job)
    obs[base + SlotFeature.PRIORITY] = access.job_priority(S, job) / 9.0
    obs[base + SlotFeature.WAITED] = np.log1p((now - access.job_ready_since(S, job)) / tau)
    left = access.job_pieces_left(S, job)
    if variants > 1 and left > 0:
        obs[base + SLOT_BASE_FEATURES] = left / P.count[row, access.job_split(S, job)]


@njit(cache=True, inline="always")  # no call overhead per step
def _write_pairs(
    T: Tables,
    P: Pieces,
    S: State,
    scales: np.ndarray,
    job: int,
    slot: int,
    idle_of_type: np.ndarray,
    running_demand: float,
    busy_left: np.ndarray,
    idle_types: np.ndarray,
    busy_until: np.ndarray,
    finishes: np.ndarray,
    sizes: np.ndarray,
    obs: np.ndarray,
) -> None:
    """The features of `slot`'s pairs, its job's next layer on each type: the bandwidth-aware
    placement's quantities (`relmas.policies.placement.place`) and for a resizing agent its
    cuts'."""
    tau_layer, capacity = scales[1], scales[2]
    row = access.job_next_row(S, job)
    n_types, variants = sizes[3], sizes[1]
    left = capacity - running_demand
    everywhere = np.ones(n_types, dtype=np.bool_)
    best_cost = np.inf  # the layer's home: the type of least cost with the bandwidth left
    for a in range(access.accelerator_count(S)):
        best_cost = min(best_cost, _cost(T, row, access.accelerator_type(S, a), left))
    home_free = np.inf  # when an instance of the home type frees up
    for a in range(access.accelerator_count(S)):
        if _cost(T, row, access.accelerator_type(S, a), left) <= best_cost * (1 + HOME_TOLERANCE):
            home_free = min(home_free, busy_left[a])
    earliest = earliest_finish(T, S, row, busy_left, everywhere)
    if variants > 1:
        _cut_finishes(P, S, job, idle_types, busy_until, finishes)
    for kind in range(n_types):
        at = pair_index(sizes, slot, kind, 0)
        latency = T.latency[row, kind]
        demand = T.demand[row, kind]
        cost = _cost(T, row, kind, left)
        obs[at + PairFeature.STARTS] = 1.0 if idle_of_type[kind] > 0 else 0.0
        obs[at + PairFeature.LATENCY] = np.log1p(latency / tau_layer)
        obs[at + PairFeature.SLOWDOWN] = np.log(latency / T.best_latency[row])
        obs[at + PairFeature.DEMAND] = _share(demand, capacity)
        obs[at + PairFeature.COST] = np.log(cost / latency)
        obs[at + PairFeature.HOME] = 1.0 if cost <= best_cost * (1 + HOME_TOLERANCE) else 0.0
        obs[at + PairFeature.BEFORE_HOME] = 1.0 if latency <= home_free else 0.0
        obs[at + PairFeature.LEFT_SHARE] = FEATURE_BOUND if left <= 0.0 else _share(demand, left)
        obs[at + PairFeature.BUSY_GAIN] = busy_gain(latency, earliest)
        if variants > 1:
            _write_cuts(T, P, row, kind, variants, finishes, obs, at + PAIR_BASE_FEATURES)


@njit(cache=True, inline="always")
def _cut_finishes(
    P: Pieces,
    S: State,
    job: int,
    idle_types: np.ndarray,
    busy_until: np.ndarray,
    finishes: np.ndarray,
) -> None:
    """Per split variant 1 <= v: when `job`'s next layer cut by v would finish, a list schedule of
    its pieces on the instances idle now (of `idle_types`, one entry of the work array
    `busy_until` each), each piece on the one where it ends first (0 for a variant that does not
    cut it): a cut pays only if its pieces find fast enough instances, and a piece on a slow one
    can end after the whole layer on a fast one."""
    row = access.job_next_row(S, job)
    finishes[:] = 0.0
    for v in range(1, finishes.shape[0]):
        column = P.offset[v]
        if P.count[row, v] < 2:
            continue
        busy_until[:] = 0.0
        for piece in range(P.count[row, v]):
            best, best_end = 0, np.inf
            for i in range(busy_until.shape[0]):
                end = busy_until[i] + P.latency[row, column + piece, idle_types[i]]
                if end < best_end:
                    best, best_end = i, end
            busy_until[best] = best_end
            finishes[v] = max(finishes[v], best_end)


@njit(cache=True, inline="always")  # no call overhead per step
def _write_cuts(
    T: Tables,
    P: Pieces,
    row: int,
    kind: int,
    variants: int,
    finishes: np.ndarray,
    obs: np.ndarray,
    at: int,
) -> None:
    """A pair's resizing features from `obs[at]`: per split variant 1 <= v the log of when the
    cut layer would finish (`finishes`) against the whole layer on type `kind`, and the cut's
    relative extra DRAM traffic there."""
    whole_latency = T.latency[row, kind]
    whole_bytes = max(whole_latency * T.demand[row, kind], 1.0)
    for v in range(1, variants):
        if P.count[row, v] < 2:
            continue
        column = P.offset[v]
        cut_bytes = 0.0
        for piece in range(P.count[row, v]):
            cut_bytes += P.latency[row, column + piece, kind] * P.demand[row, column + piece, kind]
        obs[at + 2 * v - 2] = np.log(finishes[v] / whole_latency)
        obs[at + 2 * v - 1] = cut_bytes / whole_bytes - 1.0


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
def _build_mask(
    T: Tables,
    P: Pieces,
    S: State,
    slots: np.ndarray,
    idle_of_type: np.ndarray,
    can_wait: bool,
    teacher_waits: bool,
    running_demand: float,
    mask: np.ndarray,
) -> None:
    """Valid actions: every filled slot whole on every type with an idle instance; each split
    variant that really cuts a layer not started yet; wait only if `can_wait` and the teacher
    waits, or no candidate could start on an instance of its fastest type, or each would
    oversubscribe the bandwidth on its fastest idle instance."""
    n_slots, n_types = slots.shape[0], idle_of_type.shape[0]
    variants = (mask.shape[0] - 1) // (n_slots * n_types)
    capacity = access.bandwidth_capacity(S)
    everywhere = np.ones(n_types, dtype=np.bool_)
    best_type_idle = False
    fits = False  # some candidate starts without oversubscribing the bandwidth
    mask[:] = False
    for s in range(n_slots):
        job = slots[s]
        if job < 0:
            continue
        row = access.job_next_row(S, job)
        unstarted = access.job_pieces_left(S, job) == 0
        for kind in range(n_types):
            if idle_of_type[kind] == 0:
                continue
            first = (s * n_types + kind) * variants
            mask[first] = True
            for v in range(1, variants):
                mask[first + v] = unstarted and P.count[row, v] > 1
        kind = access.accelerator_type(S, fastest_idle(T, S, row, everywhere))
        best_type_idle = best_type_idle or T.latency[row, kind] <= T.best_latency[row]
        demand = T.demand[row, kind]
        fits = fits or not triage.oversubscribes(running_demand, demand, capacity)
    wait = mask.shape[0] - 1
    mask[wait] = can_wait and (teacher_waits or not best_type_idle or not fits)


# The cached kernel embeds the engine's accessors, the triage tests, the placement and the rule
# baselines: recompile when one of these sources changes.
jit_cache.refresh(
    observe,
    (engine_kernels, access, triage, placement, baseline_rules, sys.modules[__name__]),
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
        self.reference = reference_baseline(engine, settings)
        self._observe = engine_kernels.entry_point(
            observe,
            engine.kernel_tables,
            engine.kernel_pieces,
            engine.state,
            self.reference,
            self.scales,
            self.tenant_target,
            np.zeros(self.layout.size, dtype=np.float32),
            self.slots,
            np.zeros(self.layout.actions, dtype=bool),
        )

    def observe(self, view: DecisionView) -> Observation:
        """The observation at `view` (the engine's current decision point)."""
        engine = self.engine
        obs = np.empty(self.layout.size, dtype=np.float32)
        mask = np.empty(self.layout.actions, dtype=bool)
        self._observe(
            engine.kernel_tables,
            engine.kernel_pieces,
            engine.state,
            self.reference,
            self.scales,
            self.tenant_target,
            obs,
            self.slots,
            mask,
        )
        return Observation(obs, mask)

    def assignments(self, action: int) -> list[tuple[int, int, int]]:
        """The (job, instance, split variant) that `action` starts ([] = wait), for the last
        observation: the lowest-index idle instance of the action's type."""
        layout = self.layout
        if action == layout.actions - 1:
            return []
        slot, kind = layout.slot_of(action), layout.type_of(action)
        instance = first_idle(self.engine.state, kind)
        return [(int(self.slots[slot]), int(instance), layout.variant_of(action))]


@njit(cache=True)
def first_idle(S: State, kind: int) -> int:
    """The lowest-index idle instance of type `kind` (-1 if none): where a pair's layer starts,
    as the rules' placements pick among equal instances (`triage.fastest_idle`)."""
    for a in range(access.accelerator_count(S)):
        if access.is_idle(S, a) and access.accelerator_type(S, a) == kind:
            return a
    return -1
