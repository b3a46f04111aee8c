"""The one interface of every scheduling policy (heuristics, the offline bound, the RL agent),
and the registry that maps contract policy names to their implementations."""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from relmas.errors import InputError
from relmas.schemas import POLICY_NAMES

if TYPE_CHECKING:
    from relmas.sim.engine import DecisionView, Engine


class Policy(ABC):
    """Decides, at each decision point, which ready jobs start on which idle accelerators.

    `decide` returns (job, accelerator) pairs (internal job index, instance index), or
    (job, accelerator, split) triples that cut layers into pieces (docs/gacer.md); an empty list
    means wait for the next event. `decision_energy_j` is the policy's own energy per decision,
    added to the system's energy (e.g. running a policy network on one of the accelerators).
    """

    name: ClassVar[str]
    decision_energy_j: float = 0.0

    def reset(self, engine: Engine) -> None:  # noqa: B027 - stateless policies need no reset
        """Prepare for a new simulation; `engine` gives the system, cost tables and job trace."""

    @abstractmethod
    def decide(self, view: DecisionView) -> list[tuple[int, ...]]:
        """Assignments (job, accelerator[, split]) for the decision point `view`, or [] to wait."""

    def run_to_completion(self, engine: Engine) -> bool:
        """Run the whole simulation in a fast path if the policy has one; False = step instead."""
        return False


PolicyFactory = Callable[..., Policy]
_REGISTRY: dict[str, PolicyFactory] = {}
# Modules that register further policies when imported (only imported when one of them is asked
# for, so that e.g. torch is not loaded for a heuristic run). Other stages add theirs here.
PROVIDERS: dict[str, str] = {
    "ga_offline": "relmas.policies.ga_offline",
    "gacer": "relmas.policies.gacer",
    "relmas": "relmas.rl.policy",
    "relmas_resize": "relmas.rl.policy",
}


def register(name: str) -> Callable[[PolicyFactory], PolicyFactory]:
    """Class decorator: make a policy available under its contract `name`."""
    if name not in POLICY_NAMES:
        raise ValueError(f"{name!r} is not a contract policy name {POLICY_NAMES}")

    def decorate(factory: PolicyFactory) -> PolicyFactory:
        _REGISTRY[name] = factory
        return factory

    return decorate


def available_policies() -> tuple[str, ...]:
    """Contract names with an implementation (registered or with a provider module)."""
    return tuple(n for n in POLICY_NAMES if n in _REGISTRY or n in PROVIDERS)


def make_policy(
    name: str, *, seed: int = 0, source: str | Path | None = None, key: str = "policy", **options
) -> Policy:
    """A fresh policy by contract name; `seed` seeds random policies, `options` go to the class."""
    if name not in _REGISTRY and name in PROVIDERS:
        importlib.import_module(PROVIDERS[name])
    if name not in _REGISTRY:
        raise InputError(
            source, key, f"one of the available policies {list(available_policies())}", name
        )
    return _REGISTRY[name](seed=seed, **options)
