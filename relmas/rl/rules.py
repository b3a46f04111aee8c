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
  bandwidth demand above the shared bandwidth (oversubscription slows every running layer alike);
- `<rule>_patient_gated_ordered` skips such a candidate only where it may wait instead: when
  something will start anyway, the bandwidth does not put a job the ranking likes less before
  the one it likes most (the deviation trained agents took most from the gated rule).

A holding rule takes the first slot of its preference, then of the other candidates, that it does
not skip, and waits when it skips them all (the mask allows exactly that wait). With a slot for
every ready job these rules are the rule baselines (`relmas.policies.rules`, tested equal).

With service levels (the observation's deficit slots and service features) every feasible rule
also comes in a deficit-first form (`<rule>_deficit`), the slot form of the target-aware rule
baselines of the same names (`relmas.policies.rules`, tested equal with a slot for every ready
job): its first choice is the job of the tenant furthest below its target (deficit = target - the
tenant's rate so far; a job without a target after every job with one) among its ranking's slots
and the deficit slots, ties by the rule's order; a holding form then tries the reference and the
other candidates the same way, by deficit then least remaining work. The deficit slots hold the
feasible jobs of the tenants furthest below target by least remaining work, so that the rule's
pick is among the candidates whatever the SJF and EDF rankings hold.

For a resizing agent the best rule on validation is also scored cut (`<rule>_cut`, `cut_form`),
GACER's use of resizing on this system: when more instances are idle than jobs are ready, the
spare ones have nothing else to do, so the chosen layer is cut — into at most 1 + idle - ready
pieces, by the variant whose pieces would finish first on the idle instances, and only if that is
sooner than the whole layer on its instance; otherwise it runs whole. The warm start imitates the
best rule on validation, so holding back and cutting are taught only where they pay.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
from numba import njit

from relmas.hw import jit_cache
from relmas.policies import triage
from relmas.rl import observation as observation_module
from relmas.rl.observation import (
    Layout,
    ObservationSettings,
    SlotFeature,
    cut_finish_index,
    idle_instances,
    oversubscribes,
    queue_length,
    service_gap,
    waits_for_busy,
)

CUT_SUFFIX = "_cut"
DEFICIT_SUFFIX = "_deficit"
HOLDING_FORMS = {  # suffix: (patient, gated, ordered)
    "_patient": (True, False, False),
    "_patient_gated": (True, True, False),
    "_patient_gated_ordered": (True, True, True),
}


@dataclass(frozen=True)
class SlotRule:
    """Act by `preference` (slots; the last entry is wait) on `layout`'s actions, whole layers
    only unless `cut_pieces` (pieces of each split variant, 1 for the whole layer) is given.
    `patient`: skip the slots whose layer would end sooner on a busy instance; `gated`: skip the
    slots whose start would oversubscribe the bandwidth, only where it may wait if `ordered`;
    `deficit_first`: take the preferred slots by their tenant's deficit first (a layout with
    service-level features)."""

    preference: tuple[int, ...]
    layout: Layout
    cut_pieces: tuple[int, ...] | None = None
    patient: bool = False
    gated: bool = False
    ordered: bool = False
    deficit_first: bool = False

    def __call__(self, obs: np.ndarray, mask: np.ndarray) -> int:
        return int(rule_action(obs, mask, *self.kernel_arguments))

    @cached_property
    def kernel_arguments(
        self,
    ) -> tuple[np.ndarray, np.ndarray, bool, bool, bool, np.ndarray, bool]:
        """`rule_action`'s arguments after the observation and the mask: for a kernel that acts
        by this rule itself (`relmas.rl.collect`)."""
        cut_pieces = np.array(self.cut_pieces or (), dtype=np.int64)
        preference = np.array(self.preference, dtype=np.int64)
        gated, ordered = self.gated, self.ordered
        sizes, deficit_first = self.layout.sizes, self.deficit_first
        return preference, sizes, self.patient, gated, ordered, cut_pieces, deficit_first


@njit(cache=True)
def rule_action(
    obs: np.ndarray,
    mask: np.ndarray,
    preference: np.ndarray,
    sizes: np.ndarray,
    patient: bool,
    gated: bool,
    ordered: bool,
    cut_pieces: np.ndarray,
    deficit_first: bool,
) -> int:
    """The action of the slot rule (`SlotRule`'s fields; `cut_pieces` empty: whole layers): the
    first valid slot of `preference` (`deficit_first`: reordered by `by_deficit`) that it does not
    hold back; when it holds back every one and waiting is not allowed, the first valid slot."""
    slots, variants = sizes[0], sizes[1]
    wait = slots * variants
    gated = gated and not (ordered and not mask[wait])
    if deficit_first:
        preference = by_deficit(obs, preference, sizes)
    for slot in preference:
        action = wait if slot == slots else slot * variants
        if not mask[action]:
            continue
        if action == wait:
            return action
        held = (patient and waits_for_busy(obs, sizes, slot)) or (
            gated and oversubscribes(obs, sizes, slot)
        )
        if not held:
            return _cut(obs, mask, sizes, slot, cut_pieces)
    for slot in preference[:-1]:
        if mask[slot * variants]:
            return _cut(obs, mask, sizes, slot, cut_pieces)
    return np.flatnonzero(mask)[0]


@njit(cache=True)
def by_deficit(obs: np.ndarray, preference: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """A deficit-first rule's `preference` = (its first candidates, 0, the other candidates,
    wait) in the order it tries them: the first candidate by `_deficit_ranks`, the reference
    (slot 0), the other candidates by `_deficit_ranks` (ties in their order), wait — the order
    in which the target-aware baselines try jobs."""
    split = 0
    while preference[split] != 0:
        split += 1
    first, rest = preference[:split], preference[split + 1 : -1]
    order = np.empty(rest.shape[0] + 3, dtype=np.int64)
    order[0] = first[np.argmin(_deficit_ranks(obs, first, sizes))]  # the first of equals
    order[1] = 0
    order[2:-1] = rest[np.argsort(_deficit_ranks(obs, rest, sizes), kind="mergesort")]
    order[-1] = preference[-1]
    return order


@njit(cache=True)
def _deficit_ranks(obs: np.ndarray, slots: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Per slot, lower first: a feasible job by its tenant's deficit (`service_gap`, within
    [-1, 1]) largest first, then feasible jobs without a target, then the rest (empty slots, jobs
    that cannot meet their deadline)."""
    ranks = np.empty(slots.shape[0])
    for i in range(slots.shape[0]):
        at = slots[i] * sizes[2]
        if obs[at + SlotFeature.PRESENT] == 0.0 or obs[at + SlotFeature.FEASIBLE] == 0.0:
            ranks[i] = 3.0
        else:
            gap = service_gap(obs, sizes, slots[i])
            ranks[i] = 2.0 if gap == -np.inf else -gap
    return ranks


@njit(cache=True)
def _cut(
    obs: np.ndarray, mask: np.ndarray, sizes: np.ndarray, slot: int, cut_pieces: np.ndarray
) -> int:
    """`slot`'s action, cut by the variant that finishes first if that beats the whole layer and
    the spare instances take its pieces."""
    variants = sizes[1]
    chosen = slot * variants
    if cut_pieces.shape[0] == 0:
        return chosen
    spare = idle_instances(obs, sizes) - queue_length(obs, sizes)
    best = 0.0  # log(cut finish / whole finish): cut only if below
    for variant in range(1, variants):
        action = slot * variants + variant
        if mask[action] and cut_pieces[variant] <= 1 + spare:
            finish = obs[cut_finish_index(sizes, slot, variant)]
            if finish < best:
                best, chosen = finish, action
    return chosen


# The cached kernel embeds the observation's readers: recompile when their sources change.
jit_cache.refresh(
    rule_action, (triage, observation_module, sys.modules[__name__]), stamp="relmas-rl-rules.sha256"
)


def slot_rules(settings: ObservationSettings, layout: Layout) -> dict[str, SlotRule]:
    """The whole-layer rules expressible with the candidate slots of `settings` on `layout`, the
    two feasible rankings also in their holding forms (the reference replays its heuristic as
    is)."""
    k = settings.candidates
    hopeless, wait = 2 * k + 1, settings.slots
    preferences = {
        "reference": (0, wait),
        "shortest_feasible": (1, 0, hopeless, wait),
        "earliest_feasible": (1 + k, 0, hopeless, wait),
    }
    shortest, deficits = tuple(range(1, 1 + k)), tuple(range(hopeless + 1, wait))
    rankings = {"shortest_feasible": shortest, "earliest_feasible": tuple(range(1 + k, 1 + 2 * k))}
    rules = {name: SlotRule(order, layout) for name, order in preferences.items()}
    for name, ranking in rankings.items():
        order = preferences[name]
        # holding back the preferred slots, a rule tries the other candidates in slot order
        others = tuple(s for s in range(wait) if s not in order)
        forms = {"": (order, (*order[:-2], *others, *order[-2:]))}
        if settings.service:  # by_deficit's order: the first of its ranking and the deficit
            # slots, the reference, the others by least work (the deficit slots' tie)
            first = (*ranking, *deficits, 0)
            held = (*first, *shortest, *deficits, hopeless, wait)
            forms[DEFICIT_SUFFIX] = ((*first, hopeless, wait), held)
        for last, (plain, held) in forms.items():
            deficit_first = last == DEFICIT_SUFFIX
            if deficit_first:
                rules[name + last] = SlotRule(plain, layout, deficit_first=True)
            for suffix, (patient, gated, ordered) in HOLDING_FORMS.items():
                rule = SlotRule(held, layout, None, patient, gated, ordered, deficit_first)
                rules[name + suffix + last] = rule
    return rules


def cut_form(rule: SlotRule, cut_pieces: tuple[int, ...]) -> SlotRule:
    """`rule` cutting its chosen layers onto spare idle instances (`cut_pieces`: the pieces of
    each split variant, `PieceTables.most_pieces`)."""
    return replace(rule, cut_pieces=cut_pieces)


def named_rule(
    name: str, settings: ObservationSettings, layout: Layout, cut_pieces: tuple[int, ...]
) -> SlotRule:
    """The slot rule called `name` (`slot_rules`' names, or one of them + `_cut`, cutting into
    `cut_pieces`): an agent's teacher, rebuilt where the agent is deployed."""
    rules = slot_rules(settings, layout)
    whole = name.removesuffix(CUT_SUFFIX)
    if whole not in rules:
        raise KeyError(f"{name!r}, not one of {sorted(rules)} (each also with {CUT_SUFFIX})")
    return cut_form(rules[whole], cut_pieces) if name.endswith(CUT_SUFFIX) else rules[whole]
