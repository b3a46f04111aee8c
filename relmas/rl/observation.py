"""What the RELMAS agent sees and chooses from at a decision point, composed by one Numba kernel
(`observe`) from its rooms:

- the feature table and the layout (`relmas.rl.features`);
- the reference baseline (`relmas.policies.reference`), which decides first: its job fills slot 0
  and its action, the teacher's (`relmas.rl.teacher`), is marked in the observation;
- which jobs fill the other candidate slots (`relmas.rl.candidates`);
- what is observed of each type, slot and (slot, type) pair (`relmas.rl.observed`), then the
  global features (here);
- which actions are valid (`relmas.rl.mask`).

One action starts one ready job's next layer on an idle instance of one accelerator type (the
lowest-index idle instance of that type: instances of a type are alike), or waits. The action is
a (candidate slot, accelerator type) pair, for a resizing agent also a split variant. With
`resize` (the `relmas_resize` policy, docs/gacer.md) a pair also picks how to cut the layer: one
action per (slot, type, split variant), variant 0 the whole layer, the first piece on the pair's
type; a job whose layer is already cut offers only variant 0, its next piece.

Service levels are an option of the observation (`ObservationSettings.service`). Features
(docs/relmas.md lists them all) are computed from the engine's state arrays, normalised by two
time scales of the system (`time_scales`). The reward's bookkeeping is the environment's
(`relmas.rl.env`).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np
import polars as pl
from numba import njit

from relmas.hw import jit_cache
from relmas.policies import heuristic_kernels, placement, triage
from relmas.policies import rules as baseline_rules
from relmas.policies.placement import ALL
from relmas.policies.reference import Reference, reference_baseline
from relmas.policies.rules import choose
from relmas.policies.triage import scan_instances, service_rates
from relmas.rl import candidates, features, observed
from relmas.rl import mask as mask_module
from relmas.rl.candidates import pick_candidates
from relmas.rl.features import (
    FEATURE_BOUND,
    GLOBAL_FEATURES,
    SERVICE_FEATURES,
    GlobalFeature,
    Layout,
    PairFeature,
    global_index,
    pair_index,
    pair_width,
    slot_width,
)
from relmas.rl.mask import build_mask
from relmas.rl.observed import (
    share,
    write_pairs,
    write_service,
    write_service_globals,
    write_slot,
    write_types,
)
from relmas.schemas import with_job_defaults
from relmas.sim import access, engine_kernels
from relmas.sim.engine import DecisionView, Engine
from relmas.sim.engine_kernels import Pieces, State, Tables


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


class ObservationArrays(NamedTuple):
    """Everything `observe` reads and writes, as arrays: the engine's, the reference baseline's,
    the observer's constants, and what it fills."""

    T: Tables
    P: Pieces
    S: State
    R: Reference  # the reference baseline (its job is slot 0, its action the teacher's)
    scales: np.ndarray  # float64[3]: tau, tau_layer, bandwidth capacity in B/s
    tenant_target: np.ndarray  # float64[tenants]: each tenant's target (`tenant_targets`) for
    # the service-level slots and features, empty without them
    slots: np.ndarray  # int64[slots]: the job of each slot (-1 = empty)
    obs: np.ndarray  # float32[features]: the observation at the current decision point
    mask: np.ndarray  # bool[actions]: the valid actions there


@njit(cache=True)
def observe(V: ObservationArrays) -> None:
    """Fill the job of each slot (`V.slots`), the features `V.obs` and the action `V.mask` (as
    many split variants of `V.P` per pair as the mask has room for): the reference baseline `V.R`
    decides, its job fills slot 0 and its action is marked (`PairFeature.TEACHER`,
    `GlobalFeature.TEACHER_WAITS`), then the other candidates, the features and the mask."""
    T, P, S, R, scales, tenant_target, slots, obs, mask = V
    job, instance = choose(
        R.costs, S, R.rule[0], R.rule[1] != 0, R.rule[2] != 0, R.rule[3] != 0, R.rule[4],
        R.rule[5], R.allowed, R.bandwidth[0],
    )  # fmt: skip
    access.refresh_rates(S)
    service = tenant_target.shape[0] > 0
    rates = np.empty(access.tenant_count(S) if service else 0)
    tenant_ready = np.empty_like(rates)
    if service:
        service_rates(T, S, rates, tenant_ready)
    queue, feasible_jobs, feasible_work = pick_candidates(T, S, job, slots, rates)
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
    idle_of_type = write_types(S, busy_left, scales, obs, sizes)
    busy_until = np.empty(idle_types.shape[0])  # work array of the cut features' list schedule
    finishes = np.zeros(variants)  # work array: each cut's list-schedule finish
    for s in range(slots.shape[0]):
        if slots[s] >= 0:
            write_slot(T, P, S, scales, slots[s], s * width, variants, obs)
            if service:
                at = (s + 1) * width - SERVICE_FEATURES
                write_service(S, slots[s], rates, tenant_ready, queue, obs, at)
            write_pairs(
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
    obs[base + GlobalFeature.BANDWIDTH_IN_USE] = share(access.bandwidth_in_use(S), capacity)
    obs[base + GlobalFeature.IDLE] = idle_types.shape[0] / instances
    obs[base + GlobalFeature.CAN_WAIT] = 1.0 if can_wait else 0.0
    obs[base + GlobalFeature.RUNNING_DEMAND] = share(running_demand, capacity)
    obs[base + GlobalFeature.TEACHER_WAITS] = 1.0 if job < 0 else 0.0
    if service:
        write_service_globals(rates, tenant_target, obs, base + GLOBAL_FEATURES)
    for i in range(obs.shape[0]):
        obs[i] = min(max(obs[i], -FEATURE_BOUND), FEATURE_BOUND)
    build_mask(T, P, S, slots, idle_of_type, can_wait, job < 0, running_demand, mask)


# The modules whose code `observe` embeds: a cached kernel that calls it recompiles when one of
# them changes (`jit_cache.refresh`).
OBSERVE_SOURCES = (engine_kernels, access, triage, placement, heuristic_kernels, baseline_rules)
OBSERVE_SOURCES += (features, candidates, observed, mask_module, sys.modules[__name__])
jit_cache.refresh(observe, OBSERVE_SOURCES, stamp="relmas-rl-observe.sha256")


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
        self.arrays = ObservationArrays(
            T=engine.kernel_tables,
            P=engine.kernel_pieces,
            S=engine.state,
            R=reference_baseline(engine, settings.reference, settings.placement),
            scales=np.array([tau, tau_layer, capacity]),
            tenant_target=tenant_targets(engine, settings),
            slots=np.full(settings.slots, -1, dtype=np.int64),
            obs=np.zeros(self.layout.size, dtype=np.float32),
            mask=np.zeros(self.layout.actions, dtype=bool),
        )
        self._observe = engine_kernels.entry_point(observe, self.arrays)

    @property
    def slots(self) -> np.ndarray:
        """The job of each slot at the last observation (-1 = empty)."""
        return self.arrays.slots

    def observe(self, view: DecisionView) -> Observation:
        """The observation at `view` (the engine's current decision point)."""
        self._observe(self.arrays)
        return Observation(self.arrays.obs.copy(), self.arrays.mask.copy())

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
