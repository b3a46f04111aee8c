"""Fixed rules over the candidate slots: the teachers of the warm start, and the ablation that shows
how much of RELMAS's result the candidate design alone gives.

A rule takes the first valid slot of its preference list, then the hopeless slot, then waits;
every non-terminal state has one of them valid. `reference` replays the reference heuristic
(slot 0, tested to give its exact schedule); `shortest_feasible` is SJF restricted to the jobs that
can still meet their deadline (the reference when none can); `earliest_feasible` is EDF so
restricted.

The two feasible rankings also come in two forms that hold work back (docs/relmas.md, "Holding
back"):

- `<rule>_patient` skips a candidate whose layer would end sooner on a busy instance, once its
  running task ends, than on the idle instance it would get (a slow instance can lose more time
  than the wait for a fast one);
- `<rule>_patient_gated` also skips a candidate whose start would push the running layers'
  bandwidth demand above the shared bandwidth (oversubscription slows every running layer alike).

A holding rule takes the first slot of its preference, then of the other candidates, that it does
not skip, and waits when it skips them all (the mask allows exactly that wait). With a slot for
every ready job these rules are the rule baselines (`relmas.policies.rules`, tested equal).

For a resizing agent the best rule on validation is also scored cut (`<rule>_cut`, `cut_form`),
GACER's use of resizing on this system: when more instances are idle than jobs are ready, the
spare ones have nothing else to do, so the chosen layer is cut — into at most 1 + idle - ready
pieces, by the variant whose pieces would finish first on the idle instances, and only if that is
sooner than the whole layer on its instance; otherwise it runs whole. The warm start imitates the
best rule on validation, so holding back and cutting are taught only where they pay.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from relmas.rl.observation import Layout, ObservationSettings

CUT_SUFFIX = "_cut"
HOLDING_FORMS = {"_patient": (True, False), "_patient_gated": (True, True)}


@dataclass(frozen=True)
class SlotRule:
    """Act by `preference` (slots; the last entry is wait) on `layout`'s actions, whole layers
    only unless `cut_pieces` (pieces of each split variant, 1 for the whole layer) is given.
    `patient`: skip the slots whose layer would end sooner on a busy instance; `gated`: skip the
    slots whose start would oversubscribe the bandwidth."""

    preference: tuple[int, ...]
    layout: Layout
    cut_pieces: tuple[int, ...] | None = None
    patient: bool = False
    gated: bool = False

    def __call__(self, obs: np.ndarray, mask: np.ndarray) -> int:
        layout = self.layout
        wait = layout.actions - 1
        for slot in self.preference:
            action = wait if slot == layout.slots else layout.action(slot)
            if not mask[action] or (action != wait and self._holds(obs, slot)):
                continue
            return self._cut(obs, mask, slot) if action != wait else action
        # holding back everything, and waiting is not allowed: the first valid slot
        for slot in self.preference[:-1]:
            if mask[layout.action(slot)]:
                return self._cut(obs, mask, slot)
        return int(np.flatnonzero(mask)[0])

    def _holds(self, obs: np.ndarray, slot: int) -> bool:
        layout = self.layout
        return (self.patient and layout.waits_for_busy(obs, slot)) or (
            self.gated and layout.oversubscribes(obs, slot)
        )

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


def slot_rules(settings: ObservationSettings, layout: Layout) -> dict[str, SlotRule]:
    """The whole-layer rules expressible with the candidate slots of `settings` on `layout`, the
    two feasible rankings also in their holding forms (the reference replays its heuristic as
    is)."""
    k = settings.candidates
    hopeless, wait = 2 * k + 1, 2 * k + 2
    preferences = {
        "reference": (0, wait),
        "shortest_feasible": (1, 0, hopeless, wait),
        "earliest_feasible": (1 + k, 0, hopeless, wait),
    }
    rules = {name: SlotRule(order, layout) for name, order in preferences.items()}
    for name in ("shortest_feasible", "earliest_feasible"):
        order = preferences[name]
        # holding back the preferred slots, a rule tries the other candidates in slot order
        others = tuple(s for s in range(2 * k + 2) if s not in order)
        held = (*order[:-2], *others, *order[-2:])
        for suffix, (patient, gated) in HOLDING_FORMS.items():
            rules[name + suffix] = SlotRule(held, layout, patient=patient, gated=gated)
    return rules


def cut_form(rule: SlotRule, cut_pieces: tuple[int, ...]) -> SlotRule:
    """`rule` cutting its chosen layers onto spare idle instances (`cut_pieces`: the pieces of
    each split variant, `PieceTables.most_pieces`)."""
    return replace(rule, cut_pieces=cut_pieces)
