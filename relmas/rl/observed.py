"""What the RELMAS agent observes of each accelerator type, each candidate slot's job and each
(slot, type) pair, written into the observation at the places the feature table names
(`relmas.rl.features`); `relmas.rl.observation.observe` composes them.

Per type its instances' features; per slot its job's; per (slot, type) pair the layer's costs on
that type (`PairFeature`: its latency, bytes, its cost with the bandwidth the running layers leave,
`relmas.policies.placement.layer_cost`, whether it ends before an instance of the layer's home type
frees up, ...).

With `resize` (the `relmas_resize` policy, docs/gacer.md) each pair also shows, per split variant,
when the cut layer would finish on the idle instances and the cut's extra DRAM traffic, against
the whole layer on that type. With service levels each slot also shows its job's target, its
tenant's rate so far, deficit and share of the ready jobs, and the globals the worst deficit and
the share of tenants below target.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from relmas.policies.placement import HOME_TOLERANCE, layer_cost
from relmas.policies.triage import busy_gain, earliest_finish, feasible
from relmas.rl.features import (
    FEATURE_BOUND,
    PAIR_BASE_FEATURES,
    SLOT_BASE_FEATURES,
    PairFeature,
    ServiceFeature,
    ServiceGlobalFeature,
    SlotFeature,
    TypeFeature,
    pair_index,
    type_index,
)
from relmas.sim import access
from relmas.sim.engine_kernels import Pieces, State, Tables


@njit(cache=True, inline="always")
def _signed_log(x: float) -> float:
    return np.log1p(x) if x >= 0.0 else -np.log1p(-x)


@njit(cache=True, inline="always")
def share(value: float, capacity: float) -> float:
    """value / capacity, 0 with unlimited bandwidth."""
    return 0.0 if capacity == np.inf else value / capacity


@njit(cache=True, inline="always")  # no call overhead per step
def write_types(
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
            obs[at + TypeFeature.BANDWIDTH] += share(bandwidth, scales[2])
            obs[at + TypeFeature.DEMAND] += share(access.task_demand(S, a), scales[2])
    for kind in range(n_types):
        at = type_index(sizes, kind, 0)
        obs[at + TypeFeature.INSTANCES] = count[kind] / instances
        if count[kind] > 0:
            obs[at + TypeFeature.IDLE] = idle[kind] / count[kind]
            obs[at + TypeFeature.BUSY_LEFT] = np.log1p(least[kind] / scales[1])
    return idle


@njit(cache=True, inline="always")  # no call overhead per step
def write_slot(
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
def write_pairs(
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
        best_cost = min(best_cost, layer_cost(T, row, access.accelerator_type(S, a), left))
    home_free = np.inf  # when an instance of the home type frees up
    for a in range(access.accelerator_count(S)):
        if layer_cost(T, row, access.accelerator_type(S, a), left) <= best_cost * (
            1 + HOME_TOLERANCE
        ):
            home_free = min(home_free, busy_left[a])
    earliest = earliest_finish(T, S, row, busy_left, everywhere)
    if variants > 1:
        _cut_finishes(P, S, job, idle_types, busy_until, finishes)
    for kind in range(n_types):
        at = pair_index(sizes, slot, kind, 0)
        latency = T.latency[row, kind]
        demand = T.demand[row, kind]
        cost = layer_cost(T, row, kind, left)
        obs[at + PairFeature.STARTS] = 1.0 if idle_of_type[kind] > 0 else 0.0
        obs[at + PairFeature.LATENCY] = np.log1p(latency / tau_layer)
        obs[at + PairFeature.SLOWDOWN] = np.log(latency / T.best_latency[row])
        obs[at + PairFeature.DEMAND] = share(demand, capacity)
        obs[at + PairFeature.COST] = np.log(cost / latency)
        obs[at + PairFeature.HOME] = 1.0 if cost <= best_cost * (1 + HOME_TOLERANCE) else 0.0
        obs[at + PairFeature.BEFORE_HOME] = 1.0 if latency <= home_free else 0.0
        obs[at + PairFeature.LEFT_SHARE] = FEATURE_BOUND if left <= 0.0 else share(demand, left)
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
def write_service(
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
def write_service_globals(
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
