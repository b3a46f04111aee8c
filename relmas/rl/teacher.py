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
(`teacher_action`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np
from numba import njit

from relmas.rl.features import (
    GlobalFeature,
    Layout,
    PairFeature,
    cut_finish_index,
    global_index,
    idle_instances,
    pair_index,
    queue_length,
)

CUT_SUFFIX = "_cut"


class TeacherArrays(NamedTuple):
    """A teacher as a kernel reads its action back from the observation (`teacher_action`)."""

    sizes: np.ndarray  # the observation's layout (`Layout.sizes`)
    cut_pieces: np.ndarray  # int64: pieces of each split variant it may cut into; empty: none


@njit(cache=True)
def teacher_action(obs: np.ndarray, mask: np.ndarray, K: TeacherArrays) -> int:
    """The teacher's action, read back from the observation: the reference baseline's (its pair
    of slot 0, `PairFeature.TEACHER`, or wait, `GlobalFeature.TEACHER_WAITS`), cut with
    `K.cut_pieces` (pieces of each split variant; empty: whole layers) onto spare idle instances —
    GACER's use of resizing: when more instances are idle than jobs are ready, by the variant
    whose pieces would finish first on the idle instances if that beats the whole layer and the
    spare instances take its pieces."""
    sizes, cut_pieces = K
    wait = mask.shape[0] - 1
    if obs[global_index(sizes, GlobalFeature.TEACHER_WAITS)] == 1.0:
        return wait
    variants, types = sizes[1], sizes[3]
    kind = 0
    while obs[pair_index(sizes, 0, kind, PairFeature.TEACHER)] != 1.0:
        kind += 1
        if kind == types:
            raise RuntimeError("the observation shows no teacher's action")
    teacher = kind * variants  # slot 0's pair
    if cut_pieces.shape[0] == 0:
        return teacher
    spare = idle_instances(obs, sizes) - queue_length(obs, sizes)
    best, chosen = 0.0, teacher  # log(cut finish / whole finish): cut only if below
    for variant in range(1, variants):
        action = teacher + variant
        if mask[action] and cut_pieces[variant] <= 1 + spare:
            finish = obs[cut_finish_index(sizes, 0, kind, variant)]
            if finish < best:
                best, chosen = finish, action
    return chosen


@dataclass(frozen=True)
class BaselineTeacher:
    """The reference baseline acting on `layout`'s actions, whole layers only unless `cut_pieces`
    (pieces of each split variant, 1 for the whole layer) is given. `name`: the baseline's, with
    `CUT_SUFFIX` when it cuts."""

    name: str
    layout: Layout
    cut_pieces: tuple[int, ...] = ()

    @cached_property
    def arrays(self) -> TeacherArrays:
        """This teacher as a kernel that acts by it reads it (`relmas.rl.acting`)."""
        return TeacherArrays(self.layout.sizes, np.array(self.cut_pieces, dtype=np.int64))

    def __call__(self, obs: np.ndarray, mask: np.ndarray) -> int:
        return int(teacher_action(obs, mask, self.arrays))


def no_teacher(layout: Layout) -> TeacherArrays:
    """`TeacherArrays` for a kernel without a teacher to act by or favour (whole layers: read
    only for a policy played by its reference baseline alone)."""
    return TeacherArrays(layout.sizes, np.zeros(0, dtype=np.int64))


def named_teacher(
    name: str, reference: str, layout: Layout, cut_pieces: tuple[int, ...]
) -> BaselineTeacher:
    """The teacher called `name`: the `reference` baseline, or it + `_cut` cutting into
    `cut_pieces`; rebuilt where the agent is deployed."""
    if name not in (reference, reference + CUT_SUFFIX):
        raise KeyError(f"{name!r}, not the reference baseline {reference!r} (or with {CUT_SUFFIX})")
    return BaselineTeacher(name, layout, cut_pieces if name.endswith(CUT_SUFFIX) else ())
