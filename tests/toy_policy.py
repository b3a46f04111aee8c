"""A policy that only the catalog knows of (tests/test_architecture.py): newest ready job first.

It is the worked example of docs/design.md, "Adding a policy": this class plus one catalog entry,
`PolicyEntry("newest_first", "heuristic", "tests.toy_policy")`, and nothing else.
"""

from __future__ import annotations

import numpy as np

from relmas.policies import Policy, register
from relmas.sim.engine import DecisionView

NAME = "newest_first"


@register(NAME)
class NewestFirst(Policy):
    """The most recently arrived ready jobs first, onto the idle accelerators in index order."""

    name = NAME

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def decide(self, view: DecisionView) -> list[tuple[int, int]]:
        jobs = np.sort(view.ready_jobs)[::-1]  # internal job indices follow arrival order
        return list(zip(jobs.tolist(), view.idle_accelerators.tolist(), strict=False))
