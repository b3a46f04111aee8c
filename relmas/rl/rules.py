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
also comes in two target-aware forms, taking first, among its ranking's slots and the deficit
slots, the job of the tenant furthest below its target (`<rule>_deficit`) or of any tenant below
its target (`<rule>_below`), ties by the rule's own order; a job without a target comes after
every job with one. A holding form then tries the reference and the other candidates the same
way, then by least remaining work. A tenant's rate is `relmas.policies.triage.service_rates`',
which counts the ready jobs that can no longer meet their deadline as missed, the target-aware
rule baselines' (`relmas.policies.rules`): with a slot for every ready job each target-aware slot
rule is the baseline of the same name (tested). The deficit slots hold the feasible jobs of the
tenants furthest below target by least remaining work, so that the rule's pick is among the
candidates whatever the SJF and EDF rankings hold.

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
# Which candidates a rule takes first (before its own order): none, the tenant furthest below its
# target, or the tenants below their targets alike; the suffixes of their forms' names.
BY_RULE, BY_DEFICIT, BY_BELOW = 0, 1, 2
PRECEDENCE_SUFFIXES = {BY_DEFICIT: "_deficit", BY_BELOW: "_below"}
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
    `precedence`: which preferred slots it takes first (BY_*: a layout with service features)."""

    preference: tuple[int, ...]
    layout: Layout
    cut_pieces: tuple[int, ...] | None = None
    patient: bool = False
    gated: bool = False
    ordered: bool = False
    precedence: int = BY_RULE

    def __call__(self, obs: np.ndarray, mask: np.ndarray) -> int:
        return int(rule_action(obs, mask, *self.kernel_arguments))

    @cached_property
    def kernel_arguments(
        self,
    ) -> tuple[np.ndarray, np.ndarray, bool, bool, bool, np.ndarray, int]:
        """`rule_action`'s arguments after the observation and the mask: for a kernel that acts
        by this rule itself (`relmas.rl.collect`)."""
        cut_pieces = np.array(self.cut_pieces or (), dtype=np.int64)
        preference = np.array(self.preference, dtype=np.int64)
        gated, ordered = self.gated, self.ordered
        sizes, precedence = self.layout.sizes, self.precedence
        return preference, sizes, self.patient, gated, ordered, cut_pieces, precedence


def no_rule_arguments(
    layout: Layout,
) -> tuple[np.ndarray, np.ndarray, bool, bool, bool, np.ndarray, int]:
    """`rule_action`'s arguments for a kernel without a rule to act by or favour (never read:
    such a kernel has no teacher steps and no bonus)."""
    empty = np.zeros(0, dtype=np.int64)
    return empty, layout.sizes, False, False, False, empty, BY_RULE


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
    precedence: int,
) -> int:
    """The action of the slot rule (`SlotRule`'s fields; `cut_pieces` empty: whole layers): the
    first valid slot of `preference` (reordered by `by_precedence` unless BY_RULE) that it does not
    hold back; when it holds back every one and waiting is not allowed, the first valid slot."""
    slots, variants = sizes[0], sizes[1]
    wait = slots * variants
    gated = gated and not (ordered and not mask[wait])
    if precedence != BY_RULE:
        preference = by_precedence(obs, preference, sizes, precedence)
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
def by_precedence(
    obs: np.ndarray, preference: np.ndarray, sizes: np.ndarray, precedence: int
) -> np.ndarray:
    """A target-aware rule's `preference` = (its first candidates, 0, the other candidates, wait)
    in the order it tries them: the first candidate by `_service_ranks`, the reference (slot 0),
    the other candidates by `_service_ranks` (ties in their order), wait — the order in which the
    target-aware baselines try jobs."""
    split = 0
    while preference[split] != 0:
        split += 1
    first, rest = preference[:split], preference[split + 1 : -1]
    order = np.empty(rest.shape[0] + 3, dtype=np.int64)
    order[0] = first[np.argmin(_service_ranks(obs, first, sizes, precedence))]  # first of equals
    order[1] = 0
    order[2:-1] = rest[np.argsort(_service_ranks(obs, rest, sizes, precedence), kind="mergesort")]
    order[-1] = preference[-1]
    return order


@njit(cache=True)
def _service_ranks(
    obs: np.ndarray, slots: np.ndarray, sizes: np.ndarray, precedence: int
) -> np.ndarray:
    """Per slot, lower first: a feasible job by its tenant's deficit (`service_gap`, within
    [-1, 1]), the largest first (BY_DEFICIT) or those below their target before the others
    (BY_BELOW), then feasible jobs without a target, then the rest (empty slots, jobs that cannot
    meet their deadline)."""
    ranks = np.empty(slots.shape[0])
    for i in range(slots.shape[0]):
        at = slots[i] * sizes[2]
        if obs[at + SlotFeature.PRESENT] == 0.0 or obs[at + SlotFeature.FEASIBLE] == 0.0:
            ranks[i] = 3.0
        else:
            gap = service_gap(obs, sizes, slots[i])
            if gap == -np.inf:
                ranks[i] = 2.0
            elif precedence == BY_DEFICIT:
                ranks[i] = -gap
            else:
                ranks[i] = 0.0 if gap > 0.0 else 1.0
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
        forms = {BY_RULE: (order, (*order[:-2], *others, *order[-2:]))}
        if settings.service:  # by_deficit's order: the first of its ranking and the deficit
            # slots, the reference, the others by least work (the deficit slots' tie)
            first = (*ranking, *deficits, 0)
            held = (*first, *shortest, *deficits, hopeless, wait)
            for precedence in PRECEDENCE_SUFFIXES:
                forms[precedence] = ((*first, hopeless, wait), held)
        for precedence, (plain, held) in forms.items():
            last = PRECEDENCE_SUFFIXES.get(precedence, "")
            if precedence != BY_RULE:
                rules[name + last] = SlotRule(plain, layout, precedence=precedence)
            for suffix, (patient, gated, ordered) in HOLDING_FORMS.items():
                rule = SlotRule(held, layout, None, patient, gated, ordered, precedence)
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
