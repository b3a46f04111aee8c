"""The one interface of every scheduling policy (heuristics, the offline bound, the RL agent),
and the registry that maps contract policy names (relmas.catalog) to their implementations."""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from relmas import catalog
from relmas.errors import InputError

if TYPE_CHECKING:
    from relmas.sim.engine import DecisionView, Engine


class Policy(ABC):
    """Decides, at each decision point, which ready jobs start on which idle accelerators.

    `decide` returns (job, accelerator) pairs (internal job index, instance index), or
    (job, accelerator, split) triples that cut layers into pieces (docs/gacer.md); an empty list
    means wait for the next event. `decision_energy_j` is the policy's own energy per decision,
    added to the system's energy (e.g. running a policy network on one of the accelerators);
    a policy whose decisions cost different amounts overrides `overhead_energy_j`.
    """

    name: ClassVar[str]
    decision_energy_j: float = 0.0

    def reset(self, engine: Engine) -> None:  # noqa: B027 - stateless policies need no reset
        """Prepare for a new simulation; `engine` gives the system, cost tables and job trace."""

    @abstractmethod
    def decide(self, view: DecisionView) -> list[tuple[int, ...]]:
        """Assignments (job, accelerator[, split]) for the decision point `view`, or [] to wait."""

    def overhead_energy_j(self, decisions: int) -> float:
        """The policy's own energy over a run of `decisions` decisions (after the run)."""
        return self.decision_energy_j * decisions

    def overhead_counts(self) -> dict[str, float]:
        """What the policy's own computation amounted to over the run (after it), beside its
        energy: added to the run's metrics (e.g. rows a policy network scored)."""
        return {}

    def run_to_completion(self, engine: Engine) -> bool:
        """Run the whole simulation in a fast path if the policy has one; False = step instead."""
        return False


PolicyFactory = Callable[..., Policy]
# Implementations registered so far; the catalog names the module that registers each policy,
# imported only when that policy is asked for (so that e.g. torch is not loaded for a heuristic).
_REGISTRY: dict[str, PolicyFactory] = {}


def register(name: str) -> Callable[[PolicyFactory], PolicyFactory]:
    """Class decorator: make a policy available under its contract `name`."""
    if catalog.entry(name) is None:
        raise ValueError(f"{name!r} is not a policy of relmas.catalog {catalog.names()}")

    def decorate(factory: PolicyFactory) -> PolicyFactory:
        _REGISTRY[name] = factory
        return factory

    return decorate


def available_policies() -> tuple[str, ...]:
    """Contract names with an implementation (every policy of the catalog)."""
    return catalog.names()


def make_policy(
    name: str, *, seed: int = 0, source: str | Path | None = None, key: str = "policy", **options
) -> Policy:
    """A fresh policy by contract name; `seed` seeds random policies, `options` go to the class."""
    module = catalog.implementation(name)
    if name not in _REGISTRY and module is not None:
        importlib.import_module(module)
    if name not in _REGISTRY:
        raise InputError(
            source, key, f"one of the available policies {list(available_policies())}", name
        )
    return _REGISTRY[name](seed=seed, **options)
