"""The RELMAS observation's feature table and layout: where each feature sits, named once, for the
kernel that writes them (`relmas.rl.observation.observe`) and for every reader (the teacher's cut,
the network's rows, tests).

The observation is factored for a network that scores every (slot, type) pair with one set of
weights (`relmas.rl.network`, Decima-like): per slot its job's features, per type its instances'
features, per (slot, type) pair the layer's costs on that type, then the global features.
`Layout.rows` says which features each pair's score reads. docs/relmas.md explains each feature.

Features are normalised by two time scales of the system: tau, the mean isolated latency of the
configured models, and tau_layer, the mean best latency of a layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from functools import cached_property

import numpy as np
from numba import njit

# Version of the feature set below: agents and resumable runs of another version are refused.
FEATURES_VERSION = 3  # 3: (slot, type) pair actions, the rule baseline's reference slot
FEATURE_BOUND = 30.0  # features are clipped to [-FEATURE_BOUND, FEATURE_BOUND]


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
    COST = 4  # log(max(latency, bytes / bandwidth left) / latency): placement.layer_cost
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
