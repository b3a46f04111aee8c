"""One colour per policy and one order of policies, for every figure and table of the report.

Both come from the catalog (relmas.catalog): policies are grouped by kind — the heuristics (the
online search policy among them), the rule baselines, the target-aware baselines, the planner,
the offline bound, the learned policies — in catalog order inside a group, and each group draws
its colours from a family of its own (blues and greens, oranges, golds, magenta, greys, and strong
red and purple for the learned policies, drawn on top).
A policy keeps its colour whichever policies a figure shows, since colours are assigned over the
whole catalog, not over the policies present.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from relmas import catalog


@dataclass(frozen=True)
class Group:
    """Policies of some catalog kinds, shown together under `title`, coloured from `colours`."""

    title: str
    kinds: tuple[str, ...]
    colours: tuple[str, ...]


GROUPS: tuple[Group, ...] = (
    Group(
        "heuristics",
        ("heuristic", "search"),
        (
            "#1f77b4",  # blue
            "#17becf",  # cyan
            "#2ca02c",  # green
            "#aec7e8",  # light blue
            "#bcbd22",  # olive
            "#98df8a",  # light green
            "#9edae5",  # light cyan
            "#3b5b92",  # slate
            "#6b8e23",  # moss
            "#4c9f8f",  # teal
            "#c4d96f",  # lime
        ),
    ),
    Group(
        "rule baselines",
        ("rule",),
        (
            "#ff7f0e",
            "#8c564b",
            "#ffbb78",
            "#c49c94",
            "#e6550d",
            "#fdd0a2",
            "#a0522d",
            "#fd8d3c",
            # the admission forms
            "#d94801",
            "#fdae6b",
            "#7f2704",
            "#f16913",
            "#cc7a3d",
            "#ffcc99",
            "#994c00",
            "#e08050",
        ),
    ),
    Group(
        "target-aware baselines",
        ("target",),
        (
            "#b8860b",
            "#e7ba52",
            "#8c6d1f",
            "#f0d878",
            "#d4a017",
            "#bd9e39",
            "#806000",
            "#ffe08a",
            "#daa520",
            "#a67c00",
            "#eee8aa",
            "#c9a227",
            "#5c4a14",
            "#ffd24d",
        ),
    ),
    Group("online planner", ("planning",), ("#e7298a",)),  # magenta
    Group("offline", ("offline",), ("#4d4d4d", "#969696")),
    Group("learned", ("learned",), ("#d62728", "#7b2cbf", "#e377c2", "#8b0000")),
)
FLOOR_COLOUR = "#c7c7c7"  # the random floor: a light grey reference, not a competitor
# The proven ceiling (relmas.ceiling) where a figure draws it: a reference line, not a policy, so
# it takes no colour of the groups above.
CEILING_STYLE: dict[str, Any] = {
    "color": "#7f7f7f",
    "linestyle": "--",
    "linewidth": 1.5,
    "label": "ceiling (proven)",
}


def group_of(policy: str) -> Group:
    """The group of a catalog policy (a kind no group lists is a programming error)."""
    kind = catalog.entry(policy).kind
    return next(group for group in GROUPS if kind in group.kinds)


def colours() -> dict[str, str]:
    """Every catalog policy's colour: the i-th policy of a group takes its group's i-th colour."""
    made: dict[str, str] = {}
    for group in GROUPS:
        members = [e.name for e in catalog.entries() if e.kind in group.kinds and not e.floor]
        for index, name in enumerate(members):
            made[name] = group.colours[index % len(group.colours)]
    return made | {name: FLOOR_COLOUR for name in catalog.floors()}


def colour(policy: str) -> str:
    """The colour of `policy` in every figure."""
    return colours()[policy]


def order(policies: Iterable[str]) -> list[str]:
    """`policies` grouped by kind (GROUPS order), in catalog order inside a group."""
    rank = {name: index for index, name in enumerate(catalog.names())}
    group_rank = {group.title: index for index, group in enumerate(GROUPS)}
    return sorted(set(policies), key=lambda p: (group_rank[group_of(p).title], rank[p]))


def prominent(policy: str) -> bool:
    """Whether `policy` is drawn on top, thicker and outlined: the learned policies."""
    return policy in catalog.learned()
