"""The agent's teacher: its reference baseline, the rule or target-aware baseline with its placement
chosen on the validation traces (`relmas validate`; `relmas.rl.run`), which also fills the
reference slot (`relmas.rl.observation`).

The observation kernel runs the baseline's own decision kernel (`relmas.policies.rules.choose`) at
every decision point: its job fills slot 0, and its action — (slot 0, the type of the instance it
starts on), or wait when it holds back — is marked in the observation, where the teacher reads it
back; always taking that action gives the baseline's schedule (tested). For a resizing agent the
teacher is also scored cut on validation (`<baseline>_cut`, GACER's use of resizing on this system):
when more instances are idle than jobs are ready, the spare ones have nothing else to do, so the
chosen layer is cut — into at most 1 + idle - ready pieces, by the variant whose pieces would finish
first on the idle instances, and only if that is sooner than the whole layer on its type
(`observation.teacher_action`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from relmas.rl.observation import Layout, teacher_action

CUT_SUFFIX = "_cut"


@dataclass(frozen=True)
class BaselineTeacher:
    """The reference baseline acting on `layout`'s actions, whole layers only unless `cut_pieces`
    (pieces of each split variant, 1 for the whole layer) is given. `name`: the baseline's, with
    `CUT_SUFFIX` when it cuts."""

    name: str
    layout: Layout
    cut_pieces: tuple[int, ...] = ()

    @cached_property
    def kernel_arguments(self) -> tuple[np.ndarray, np.ndarray]:
        """`teacher_action`'s arguments after the observation and the mask: for a kernel that
        acts by this teacher (`relmas.rl.collect`, `relmas.rl.policy`)."""
        return self.layout.sizes, np.array(self.cut_pieces, dtype=np.int64)

    def __call__(self, obs: np.ndarray, mask: np.ndarray) -> int:
        return int(teacher_action(obs, mask, *self.kernel_arguments))


def no_teacher_arguments(layout: Layout) -> tuple[np.ndarray, np.ndarray]:
    """`teacher_action`'s arguments for a kernel without a teacher to act by or favour (whole
    layers: read only for a policy played by its reference baseline alone)."""
    return layout.sizes, np.zeros(0, dtype=np.int64)


def named_teacher(
    name: str, reference: str, layout: Layout, cut_pieces: tuple[int, ...]
) -> BaselineTeacher:
    """The teacher called `name`: the `reference` baseline, or it + `_cut` cutting into
    `cut_pieces`; rebuilt where the agent is deployed."""
    if name not in (reference, reference + CUT_SUFFIX):
        raise KeyError(f"{name!r}, not the reference baseline {reference!r} (or with {CUT_SUFFIX})")
    return BaselineTeacher(name, layout, cut_pieces if name.endswith(CUT_SUFFIX) else ())
