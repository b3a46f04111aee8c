"""Fixed rules over the candidate slots: the teachers of the warm start, and the ablation that shows
how much of RELMAS's result the candidate design alone gives.

A rule takes the first valid action of its preference list, then the hopeless slot, then waits;
every non-terminal state has one of them valid. `reference` replays the reference heuristic
(slot 0, tested to give its exact schedule); `shortest_feasible` is SJF restricted to the jobs that
can still meet their deadline (the reference when none can); `earliest_feasible` is EDF so
restricted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from relmas.rl.observation import ObservationSettings


@dataclass(frozen=True)
class SlotRule:
    """Act by `preference`: the first valid action in it (`__call__(obs, mask)`, as a policy)."""

    preference: tuple[int, ...]

    def __call__(self, obs: np.ndarray, mask: np.ndarray) -> int:
        for action in self.preference:
            if mask[action]:
                return action
        return int(np.flatnonzero(mask)[0])


def slot_rules(settings: ObservationSettings) -> dict[str, SlotRule]:
    """The rules expressible with the candidate slots of `settings`."""
    k = settings.candidates
    hopeless, wait = 2 * k + 1, 2 * k + 2
    return {
        "reference": SlotRule((0, wait)),
        "shortest_feasible": SlotRule((1, 0, hopeless, wait)),
        "earliest_feasible": SlotRule((1 + k, 0, hopeless, wait)),
    }
