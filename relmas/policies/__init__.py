"""Scheduling policies behind one interface (`Policy`), looked up by contract name."""

from relmas.policies import heuristics as _heuristics  # noqa: F401 - registers the heuristics
from relmas.policies.base import (
    Policy,
    available_policies,
    make_policy,
    register,
)
from relmas.policies.heuristics import HeuristicPolicy

__all__ = [
    "HeuristicPolicy",
    "Policy",
    "available_policies",
    "make_policy",
    "register",
]
