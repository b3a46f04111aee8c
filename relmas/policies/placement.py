"""Where a rule starts a layer: its placement, a parameter of the rule kernel
(`relmas.policies.rules.choose`), not a policy of its own (docs/simulator.md, "Placement").

- `all`: the fastest idle instance of the system, the rules' own placement;
- a set of accelerator types, `simba_4pe+simba_chiplet`: the fastest idle instance of those types,
  the other instances left idle. Every estimate the rule reads (the best latency, the remaining
  work and so feasibility) counts only those types (`Placement.tables`), so that the rule on the
  whole system is the rule on the system of those types alone, schedule for schedule (tested);
- `bandwidth`: the fastest idle instance where the start pays (`place`): on the layer's home type
  (the least time with the bandwidth the running layers leave: the fastest where memory is slack,
  the one moving the fewest bytes where it binds) always, on another type only when the layer
  ends there before an instance of the home type frees up and its full-speed demand fits in the
  bandwidth the running layers leave.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numba import njit

from relmas.errors import InputError
from relmas.hw import jit_cache
from relmas.policies import triage
from relmas.policies.triage import fastest_idle, oversubscribes
from relmas.sim import access, engine_kernels
from relmas.sim.costs import CostTables
from relmas.sim.engine_kernels import State, Tables

ALL, BANDWIDTH = "all", "bandwidth"
# In `evaluation.placements`, not a placement: the subset of the system's types chosen on the
# validation traces (relmas.evaluate.choose_placements).
TYPES = "types"
SEPARATOR = "+"  # between the types of a placement on a set of types
HOME_TOLERANCE = 1e-9  # relative: a type within rounding of the least cost is a home type


@dataclass(frozen=True)
class Placement:
    """A rule's placement: the accelerator types it may start layers on (None: all of the
    system's) and whether it starts on a type other than the layer's fastest only where that
    pays (`bandwidth`)."""

    types: tuple[str, ...] | None = None
    bandwidth: bool = False

    @property
    def label(self) -> str:
        """As in config, summary rows and MLflow: `all`, `bandwidth` or the types joined by +."""
        if self.bandwidth:
            return BANDWIDTH
        return ALL if self.types is None else SEPARATOR.join(sorted(self.types))

    @classmethod
    def parse(
        cls, text: str | Placement, source: str | Path | None = None, key: str = "placement"
    ) -> Placement:
        """`all`, `bandwidth` or accelerator types joined by + (in any order, each once)."""
        if isinstance(text, Placement):
            return text
        if text == ALL:
            return cls()
        if text == BANDWIDTH:
            return cls(bandwidth=True)
        types = text.split(SEPARATOR)
        if not text or text == TYPES or "" in types or len(set(types)) != len(types):
            expected = f"{ALL}, {BANDWIDTH} or accelerator types joined by {SEPARATOR}, each once"
            raise InputError(source, key, expected, text)
        return cls(types=tuple(sorted(types)))

    def allowed(self, types: Sequence[str], source: str | Path | None = None) -> np.ndarray:
        """bool[types]: which of the system's accelerator `types` (the cost tables' order) the
        rule may start layers on."""
        if self.types is None:
            return np.ones(len(types), dtype=np.bool_)
        unknown = [name for name in self.types if name not in types]
        if unknown:
            expected = f"accelerator types of the system {list(types)}"
            raise InputError(source, "placement", expected, SEPARATOR.join(unknown))
        return np.array([name in self.types for name in types], dtype=np.bool_)

    def tables(self, tables: CostTables, allowed: np.ndarray) -> Tables:
        """The rule's view of the costs: the engine's, with the best latency and the remaining
        work counted over the `allowed` types only."""
        best, remaining = tables.estimates_on(allowed)
        return Tables(tables.latency_s, tables.demand_bps, tables.energy_j, best, remaining)


@njit(cache=True, inline="always")
def layer_cost(T: Tables, row: int, kind: int, left: float) -> float:
    """How long layer `row` takes on type `kind` with the bandwidth the running layers leave
    (`left`, B/s; the fluid model: its full-speed demand beyond that slows it): max(latency,
    bytes / left); with nothing left, its bytes alone (every byte then delays everyone)."""
    latency = T.latency[row, kind]
    moved = latency * T.demand[row, kind]
    if left <= 0.0:
        return moved
    return max(latency, moved / left)


@njit(cache=True)
def place(
    T: Tables,
    S: State,
    row: int,
    allowed: np.ndarray,
    bandwidth: bool,
    running_demand: float,
    busy_left: np.ndarray,
) -> int:
    """The idle instance of an `allowed` type a rule starts layer `row` on, -1 if none (the
    placement holds it back). `running_demand` and `busy_left` from `triage.scan_instances`, read
    only with `bandwidth`."""
    if not bandwidth:
        return fastest_idle(T, S, row, allowed)
    capacity = access.bandwidth_capacity(S)
    left = capacity - running_demand
    best_cost = np.inf  # the layer's home: the allowed type of least cost with the bandwidth left
    for a in range(access.accelerator_count(S)):
        kind = access.accelerator_type(S, a)
        if allowed[kind]:
            best_cost = min(best_cost, layer_cost(T, row, kind, left))
    home_free = np.inf  # when an instance of the home type frees up
    for a in range(access.accelerator_count(S)):
        kind = access.accelerator_type(S, a)
        if allowed[kind] and layer_cost(T, row, kind, left) <= best_cost * (1.0 + HOME_TOLERANCE):
            home_free = min(home_free, busy_left[a])
    best = -1
    for a in range(access.accelerator_count(S)):
        kind = access.accelerator_type(S, a)
        if not access.is_idle(S, a) or not allowed[kind]:
            continue
        latency = T.latency[row, kind]
        pays = layer_cost(T, row, kind, left) <= best_cost * (1.0 + HOME_TOLERANCE) or (
            latency <= home_free
            and not oversubscribes(running_demand, T.demand[row, kind], capacity)
        )
        if pays and (best < 0 or latency < T.latency[row, access.accelerator_type(S, best)]):
            best = a
    return best


# The cached kernels embed the engine's accessors and the triage tests: recompile on their edits.
jit_cache.refresh(
    place,
    (engine_kernels, access, triage, sys.modules[__name__]),
    stamp="relmas-policies-placement.sha256",
)
