"""What a jitted loop acts by, as one bundle (`Actor`): the network, the teacher whose action it
reads back from the observation, and the bonus that favours that action in the network's choice.

The training loop's inner steps (`relmas.rl.collect.collect`) and the deployed policy's whole-trace
loop (`relmas.rl.policy.run_agent`) both take one, so that what an action depends on is defined
here once, not in two kernels' signatures.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from relmas.rl.features import Layout
from relmas.rl.network import GreedyPolicy, NetworkArrays, network_arrays, no_network
from relmas.rl.teacher import BaselineTeacher, TeacherArrays, no_teacher, teacher_action


class Actor(NamedTuple):
    """The network (`no_network` for a loop that acts by its teacher alone), the teacher
    (`no_teacher` for none) and the bonus added to the score of the teacher's action (0: none)."""

    network: NetworkArrays
    teacher: TeacherArrays
    bonus: float


@njit(cache=True, inline="always")  # no call overhead per step
def favoured_action(A: Actor, obs: np.ndarray, mask: np.ndarray) -> int:
    """The teacher's action that the network's choice favours by `A.bonus`; -1 for none."""
    if A.bonus > 0.0:
        return teacher_action(obs, mask, A.teacher)
    return -1


def greedy_actor(policy: GreedyPolicy, layout: Layout) -> Actor:
    """`policy` on `layout`'s actions as a kernel runs it: its network, favouring the action of its
    teacher (a `BaselineTeacher`, read back from the observation) by its bonus."""
    favour = policy.favour
    if favour is not None and not isinstance(favour, BaselineTeacher):
        raise TypeError(f"a policy run in one kernel favours its baseline, not {favour!r}")
    teacher = no_teacher(layout) if favour is None else favour.arrays
    return Actor(network_arrays(policy.weights), teacher, policy.bonus)


def teacher_actor(teacher: BaselineTeacher) -> Actor:
    """`teacher` acting alone, without a network."""
    return Actor(no_network(teacher.layout.actions), teacher.arrays, 0.0)
