"""Fixed rules over the candidate slots: the teachers of the warm start, and the ablation that shows
how much of RELMAS's result the candidate design alone gives.

A rule takes the first valid slot of its preference list, then the hopeless slot, then waits;
every non-terminal state has one of them valid. `reference` replays the reference heuristic
(slot 0, tested to give its exact schedule); `shortest_feasible` is SJF restricted to the jobs that
can still meet their deadline (the reference when none can); `earliest_feasible` is EDF so
restricted.

For a resizing agent each rule also comes as `<rule>_cut`, GACER's use of resizing on this system:
when more instances are idle than jobs are ready, the spare ones have nothing else to do, so the
chosen layer is cut — into at most 1 + idle - ready pieces, by the variant whose pieces would
finish first on the idle instances, and only if that is sooner than the whole layer on its
instance; otherwise it runs whole. The warm start scores every rule on validation and imitates the
best, so cutting is taught only where it pays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from relmas.rl.observation import Layout, ObservationSettings

CUT_SUFFIX = "_cut"


@dataclass(frozen=True)
class SlotRule:
    """Act by `preference` (slots; the last entry is wait) on `layout`'s actions, whole layers
    only unless `cut_pieces` (pieces of each split variant, 1 for the whole layer) is given."""

    preference: tuple[int, ...]
    layout: Layout
    cut_pieces: tuple[int, ...] | None = None

    def __call__(self, obs: np.ndarray, mask: np.ndarray) -> int:
        layout = self.layout
        wait = layout.actions - 1
        for slot in self.preference:
            action = wait if slot == layout.slots else layout.action(slot)
            if mask[action]:
                return self._cut(obs, mask, slot) if action != wait else action
        return int(np.flatnonzero(mask)[0])

    def _cut(self, obs: np.ndarray, mask: np.ndarray, slot: int) -> int:
        """`slot`'s action, cut by the variant that finishes first if that beats the whole layer
        and the spare instances take its pieces."""
        layout = self.layout
        chosen = layout.action(slot)
        if self.cut_pieces is None:
            return chosen
        spare = layout.idle_instances(obs) - layout.queue_length(obs)
        best = 0.0  # log(cut finish / whole finish): cut only if below
        for variant in range(1, layout.variants):
            action = layout.action(slot, variant)
            if mask[action] and self.cut_pieces[variant] <= 1 + spare:
                finish = obs[layout.cut_finish_feature(slot, variant)]
                if finish < best:
                    best, chosen = finish, action
        return chosen


def slot_rules(
    settings: ObservationSettings, layout: Layout, cut_pieces: tuple[int, ...] = ()
) -> dict[str, SlotRule]:
    """The rules expressible with the candidate slots of `settings` on `layout`, with their
    `_cut` forms when the layout offers cuts (`cut_pieces`: the pieces of each split variant,
    `PieceTables.most_pieces`)."""
    k = settings.candidates
    hopeless, wait = 2 * k + 1, 2 * k + 2
    preferences = {
        "reference": (0, wait),
        "shortest_feasible": (1, 0, hopeless, wait),
        "earliest_feasible": (1 + k, 0, hopeless, wait),
    }
    rules = {name: SlotRule(order, layout) for name, order in preferences.items()}
    if layout.variants > 1:
        rules |= {
            name + CUT_SUFFIX: SlotRule(order, layout, cut_pieces)
            for name, order in preferences.items()
        }
    return rules
