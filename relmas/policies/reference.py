"""The reference baseline as the RELMAS agent's observation kernel runs it: a rule or target-aware
baseline with its placement (`relmas.policies.rules.choose`'s arguments besides the engine's
state). Its job fills the observation's slot 0 and its action is the agent's teacher's
(`relmas.rl.observation`, `relmas.rl.teacher`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from relmas import catalog
from relmas.policies import make_policy
from relmas.policies.rules import RuleBaseline
from relmas.sim.engine import Engine
from relmas.sim.engine_kernels import Tables


class Reference(NamedTuple):
    """The reference baseline as the observation kernel runs it (`relmas.policies.rules.choose`'s
    arguments besides the engine's state)."""

    costs: Tables  # its view of the costs (`Placement.tables`)
    # int64[6]: rank, patient, gated, ordered, by, admit (`RuleBaseline.parameters`)
    rule: np.ndarray
    allowed: np.ndarray  # bool[types]: its placement's types
    bandwidth: np.ndarray  # bool[1]: its placement is the bandwidth-aware one


def reference_baseline(engine: Engine, name: str, placement: str) -> Reference:
    """The kernel arguments of the reference baseline `name` (a rule or target-aware baseline)
    with its `placement` (`Placement.parse`'s forms) on `engine`."""
    if name not in catalog.placed():
        expected = f"a rule or target-aware baseline {list(catalog.placed())}"
        raise ValueError(f"the reference must be {expected}, not {name!r}")
    baseline: RuleBaseline = make_policy(name, placement=placement)  # type: ignore[assignment]
    where = baseline.placement
    allowed = where.allowed(engine.tables.types)
    view = where.tables(engine.tables, allowed)
    rule = np.array([int(value) for value in baseline.parameters], dtype=np.int64)
    return Reference(view, rule, allowed, np.array([where.bandwidth]))
