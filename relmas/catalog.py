"""The one list of scheduling policies: every fact about a policy that another stage needs.

The config schema's enums (checked by a test), the Snakemake rules, the evaluation, the report,
the GA's seed schedules, the RL reference heuristics and the command line read this module; no
other module lists policy names. Adding a policy = its implementation (a `Policy` class registered
under its name with `relmas.policies.register`) plus one `PolicyEntry` here (docs/design.md,
"Adding a policy").

This module imports nothing heavy: an implementation is imported only when its policy is made, so
that e.g. torch is not loaded for a heuristic run and the DAG is planned without Numba.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

BEST = "best"  # as a reference: the teacher chosen on the validation traces (relmas validate)

Kind = Literal["heuristic", "rule", "target", "search", "planning", "offline", "learned"]
KINDS: tuple[Kind, ...] = (
    "heuristic",
    "rule",
    "target",
    "search",
    "planning",
    "offline",
    "learned",
)


@dataclass(frozen=True)
class PolicyEntry:
    """One policy of the contract.

    kind: `heuristic` (a fixed online rule), `rule` (a rule baseline: SJF or EDF among the jobs
    that can still meet their deadline, with a placement; the agent's teachers), `target` (a
    target-aware baseline: a rule baseline that puts the tenants' service targets before its
    order), `search` (an online policy that searches at each decision), `planning` (an online
    policy that solves LPs over sampled futures: tenths of a second per plan, what a scheduler that
    does not know the future can win; never a baseline, a row of its own), `offline` (knows the
    whole trace: an upper reference for small traces only), `learned` (deploys a trained agent:
    needs `--agent`, its rows name the agent's scenario).
    """

    name: str
    kind: Kind
    module: str  # the module that registers the implementation (imported when first made)
    options: str | None = None  # its constructor options: this section of `evaluation:`
    resizing: bool = False  # may cut layers into pieces: needs the piece tables (docs/gacer.md)
    floor: bool = False  # a sanity floor (random): a reference in the report, not a competitor
    named_baseline: bool = False  # a baseline the seed papers name (FCFS, SJF): compared by name
    base: str | None = None  # the policy this one extends (the same agent without resizing)
    rule: RuleParts | None = None  # a rule baseline's parts (`RuleParts`), None for the others

    @property
    def needs_agent(self) -> bool:
        return self.kind == "learned"


_HEURISTICS = "relmas.policies.heuristics"
_RULES = "relmas.policies.rules"

Rank = Literal["work", "deadline"]
Precedence = Literal["rule", "deficit", "target", "tokens", "below"]
Admit = Literal["all", "sacrifice", "accept"]
RANKS: tuple[Rank, ...] = ("work", "deadline")  # the rule kernel's codes of each part, in order
RANK_NAMES = {"work": "sjf", "deadline": "edf"}  # least remaining work or earliest deadline first
PRECEDENCES: tuple[Precedence, ...] = ("rule", "deficit", "target", "tokens", "below")
GATES = ("patient", "gated", "ordered")  # each needs the one before it
ADMITS: tuple[Admit, ...] = ("all", "sacrifice", "accept")


@dataclass(frozen=True)
class RuleParts:
    """A rule baseline declared by its parts (docs/simulator.md, "Rule baselines"); its name, kind
    and catalog entry are derived from them here and nowhere else.

    rank: its order among the jobs that can still meet their deadline (least remaining `work`
    first, SJF, or the earliest `deadline`, EDF); patient: it holds a start back for a busy
    instance that would end the layer sooner; gated: also a start that would oversubscribe the
    bandwidth; ordered: gated only where it may wait; admit: which feasible jobs it keeps (`all`;
    `sacrifice`, Moore-Hodgson's rule, or `accept`, an acceptance test, each giving up the others
    as if hopeless: `relmas.policies.triage.admitted`); by: which feasible jobs go before the
    rule's order (`rule`: none; a precedence class of the target-aware baselines). Where it
    starts layers (its placement) is not a part of its name: a parameter chosen per scenario on
    validation, as for every rule.
    """

    rank: Rank
    patient: bool = False
    gated: bool = False
    ordered: bool = False
    by: Precedence = "rule"
    admit: Admit = "all"

    def __post_init__(self) -> None:
        if self.rank not in RANKS or self.by not in PRECEDENCES or self.admit not in ADMITS:
            raise ValueError(
                f"a rank of {RANKS}, a precedence of {PRECEDENCES} and an admission of {ADMITS}: "
                f"{self}"
            )
        gates = (self.patient, self.gated, self.ordered)
        if any(later and not earlier for earlier, later in zip(gates, gates[1:], strict=False)):
            raise ValueError(f"each of the gates {GATES} needs the one before it: {self}")

    @property
    def name(self) -> str:
        """The contract name: `sjf_feasible` or `edf_feasible`, then its gates, then its admission,
        then its precedence (`sjf_feasible_patient_gated_below`, `edf_feasible_sacrifice`; the
        admission `all` adds nothing, the precedence `target` reads `by_target`)."""
        on = (self.patient, self.gated, self.ordered)
        gates = [gate for gate, held in zip(GATES, on, strict=True) if held]
        admission = [] if self.admit == "all" else [self.admit]
        precedence = {"rule": [], "target": ["by_target"]}.get(self.by, [self.by])
        return "_".join([RANK_NAMES[self.rank], "feasible", *gates, *admission, *precedence])

    @property
    def entry(self) -> PolicyEntry:
        """Its catalog entry: a rule baseline, target-aware when a precedence goes first."""
        return PolicyEntry(self.name, "rule" if self.by == "rule" else "target", _RULES, rule=self)


# The holding forms, each adding a gate to the one before.
PLAIN: dict[str, bool] = {}
PATIENT = {"patient": True}
GATED = {**PATIENT, "gated": True}
ORDERED = {**GATED, "ordered": True}
# The rule baselines in contract order: SJF and EDF with their holding forms, then the
# target-aware ones (each precedence over the plain, gated and ordered forms), then the token
# rule and static priority, then the admission forms (after the others, so that every earlier
# policy keeps its place in contract order).
RULES: tuple[RuleParts, ...] = (
    *(RuleParts(rank, **PLAIN) for rank in RANKS),
    *(RuleParts(rank, **holding) for rank in RANKS for holding in (PATIENT, GATED)),
    *(RuleParts(rank, **ORDERED) for rank in RANKS),
    *(
        RuleParts(rank, **holding, by=by)
        for by in ("deficit", "below")
        for holding in (PLAIN, GATED, ORDERED)
        for rank in RANKS
    ),
    RuleParts("work", by="tokens"),
    RuleParts("work", by="target"),
    *(
        RuleParts(rank, **holding, admit=admit)
        for admit in ("sacrifice", "accept")
        for holding in (PLAIN, ORDERED)
        for rank in RANKS
    ),
)

CATALOG: tuple[PolicyEntry, ...] = (
    PolicyEntry("fcfs", "heuristic", _HEURISTICS, named_baseline=True),
    PolicyEntry("sjf", "heuristic", _HEURISTICS, named_baseline=True),
    PolicyEntry("edf", "heuristic", _HEURISTICS),
    PolicyEntry("llf", "heuristic", _HEURISTICS),
    PolicyEntry("prema", "heuristic", _HEURISTICS),
    PolicyEntry("sdrm3", "heuristic", _HEURISTICS),
    PolicyEntry("herald", "heuristic", _HEURISTICS),
    PolicyEntry("planaria", "heuristic", _HEURISTICS),
    PolicyEntry("random", "heuristic", _HEURISTICS, floor=True),
    *(parts.entry for parts in RULES),
    PolicyEntry("ga_offline", "offline", "relmas.policies.ga_offline", options="ga"),
    PolicyEntry("gacer", "search", "relmas.policies.gacer", options="gacer", resizing=True),
    PolicyEntry("planner", "planning", "relmas.policies.planner", options="planner"),
    PolicyEntry("relmas", "learned", "relmas.rl.policy"),
    PolicyEntry("relmas_resize", "learned", "relmas.rl.policy", resizing=True, base="relmas"),
)


def entries() -> tuple[PolicyEntry, ...]:
    """Every policy in contract order (a function, so that tests can extend the catalog)."""
    return CATALOG


def names() -> tuple[str, ...]:
    """Contract policy names, as on the command line and in summary.parquet."""
    return tuple(entry.name for entry in entries())


def position(name: str) -> int:
    """`name`'s place in contract order, the order that breaks every tie where policies are
    ranked (the report's best baseline, best heuristic, rankings); a name outside the catalog (a
    reference row's, e.g. the ceiling) comes after every policy."""
    return next((i for i, e in enumerate(entries()) if e.name == name), len(entries()))


def entry(name: str) -> PolicyEntry | None:
    """The entry of `name`, None for an unknown name."""
    return next((e for e in entries() if e.name == name), None)


def of_kind(*kinds: Kind) -> tuple[str, ...]:
    return tuple(e.name for e in entries() if e.kind in kinds)


def learned() -> tuple[str, ...]:
    """Policies that deploy a trained agent (`--agent`); their summary rows name its scenario."""
    return of_kind("learned")


def rule(name: str) -> RuleParts | None:
    """The parts of the rule baseline `name` (None for another policy or an unknown name)."""
    found = entry(name)
    return found.rule if found else None


def rules() -> tuple[RuleParts, ...]:
    """Every rule baseline's parts, in contract order (the rule kernel registers each)."""
    return tuple(e.rule for e in entries() if e.rule is not None)


def search_seeds(*kinds: Kind) -> tuple[str, ...]:
    """The policies of `kinds` whose schedules seed the offline searches (`ga_offline`'s initial
    population, the exact ceiling's hints): not the sanity floors (never the best schedule), nor
    the admission forms of the rules (`RuleParts.admit`), declared after the searches' seeds were
    fixed, so that the offline bound schedules every trace as before them."""
    return tuple(
        e.name
        for e in entries()
        if e.kind in kinds and not e.floor and (e.rule is None or e.rule.admit == "all")
    )


def offline() -> tuple[str, ...]:
    """Offline bounds: evaluated only on scenarios of at most `evaluation.ga.max_jobs` jobs."""
    return of_kind("offline")


def planners() -> tuple[str, ...]:
    """Online planners: evaluated where configured, planning for the rule the scenario's
    agent deploys, but never among the baselines nor at a sweep's points (seconds per
    decision)."""
    return of_kind("planning")


def heuristics() -> tuple[str, ...]:
    """The fixed rules, the random floor included (the GA's seed schedules)."""
    return of_kind("heuristic")


def online_baselines() -> tuple[str, ...]:
    """What a learned policy is measured against: every online policy that is not learned (the
    fixed heuristics, the rule baselines, the search policies), in contract order, without the
    sanity floors. The offline bounds know the future and the planners take seconds per
    decision; the report shows them apart."""
    apart = ("planning", "offline", "learned")
    return tuple(e.name for e in entries() if e.kind not in apart and not e.floor)


def placed() -> tuple[str, ...]:
    """Policies that take a placement (relmas.policies.placement: where they start layers),
    chosen per scenario on the validation traces: the rule and the target-aware baselines, one
    kernel."""
    return of_kind("rule", "target")


def teachers() -> tuple[str, ...]:
    """Baselines that can be the agent's reference slot and teacher: those that take a
    placement (one decision kernel, `relmas.policies.rules.choose`)."""
    return placed()


def keeper_rule() -> str:
    """The rule a keeper's labels are gathered under (relmas.rl.keeping): EDF among the feasible
    jobs, no gate; its placement is chosen on validation, so the study must evaluate it."""
    return RuleParts(rank="deadline").name


def floors() -> tuple[str, ...]:
    """Sanity floors (random): references of the report, not competitors."""
    return tuple(e.name for e in entries() if e.floor)


def named_baselines() -> tuple[str, ...]:
    return tuple(e.name for e in entries() if e.named_baseline)


def resizing() -> tuple[str, ...]:
    """Policies that may cut layers: their jobs also need the piece tables."""
    return tuple(e.name for e in entries() if e.resizing)


def whole_layer_learned() -> tuple[str, ...]:
    """The learned policies that run whole layers: the agent whose rule the planner plans for
    and whose schedule seeds the offline bound."""
    return tuple(name for name in learned() if name not in resizing())


def options_section(name: str) -> str | None:
    """The section of `evaluation:` holding the constructor options of `name` (None: no options)."""
    found = entry(name)
    return found.options if found else None


def implementation(name: str) -> str | None:
    """The module that registers `name` (None for an unknown name)."""
    found = entry(name)
    return found.module if found else None
