"""Fixed rules over the candidate slots: the teachers of the warm start, and the ablation that shows
how much of RELMAS's result the candidate design alone gives.

A rule takes the first valid slot of its preference list, then the hopeless slot, then waits;
every non-terminal state has one of them valid. `reference` replays the reference heuristic
(slot 0, tested to give its exact schedule); `shortest_feasible` is SJF restricted to the jobs that
can still meet their deadline (the reference when none can); `earliest_feasible` is EDF so
restricted.

Each rule also comes as `<rule>_gated`, which holds back a start that would push the running
layers' bandwidth demand above the shared bandwidth (oversubscription slows every running layer
alike): it takes the first slot of its preference, then of the other candidates, that fits, and
waits when none does.

For a resizing agent each rule also comes as `<rule>_cut` (and `<rule>_gated_cut`), GACER's use
of resizing on this system: when more instances are idle than jobs are ready, the spare ones
have nothing else to do, so the chosen layer is cut — into at most 1 + idle - ready pieces, by
the variant whose pieces would finish first on the idle instances, and only if that is sooner
than the whole layer on its instance; otherwise it runs whole. The warm start scores every rule
on validation and imitates the best, so gating and cutting are taught only where they pay.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from relmas.rl.observation import Layout, ObservationSettings

CUT_SUFFIX = "_cut"
GATED_SUFFIX = "_gated"


@dataclass(frozen=True)
class SlotRule:
    """Act by `preference` (slots; the last entry is wait) on `layout`'s actions, whole layers
    only unless `cut_pieces` (pieces of each split variant, 1 for the whole layer) is given;
    `gated`: skip the slots whose start would oversubscribe the bandwidth."""

    preference: tuple[int, ...]
    layout: Layout
    cut_pieces: tuple[int, ...] | None = None
    gated: bool = False

    def __call__(self, obs: np.ndarray, mask: np.ndarray) -> int:
        layout = self.layout
        wait = layout.actions - 1
        for slot in self.preference:
            action = wait if slot == layout.slots else layout.action(slot)
            if not mask[action] or (
                self.gated and action != wait and layout.oversubscribes(obs, slot)
            ):
                continue
            return self._cut(obs, mask, slot) if action != wait else action
        # gated, and waiting is not allowed: the first valid slot of the preference
        for slot in self.preference[:-1]:
            if mask[layout.action(slot)]:
                return self._cut(obs, mask, slot)
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
    `_gated` forms and, when the layout offers cuts, their `_cut` forms (`cut_pieces`: the pieces
    of each split variant, `PieceTables.most_pieces`)."""
    k = settings.candidates
    hopeless, wait = 2 * k + 1, 2 * k + 2
    preferences = {
        "reference": (0, wait),
        "shortest_feasible": (1, 0, hopeless, wait),
        "earliest_feasible": (1 + k, 0, hopeless, wait),
    }
    rules: dict[str, SlotRule] = {}
    for cut in (None, cut_pieces) if layout.variants > 1 else (None,):
        for name, order in preferences.items():
            # gated: when the preferred slots do not fit, any other candidate that does
            others = tuple(s for s in range(2 * k + 2) if s not in order)
            gated = (*order[:-2], *others, *order[-2:]) if len(order) > 2 else (0, *others, wait)
            suffix = "" if cut is None else CUT_SUFFIX
            rules[name + suffix] = SlotRule(order, layout, cut)
            rules[name + GATED_SUFFIX + suffix] = SlotRule(gated, layout, cut, gated=True)
    return rules
