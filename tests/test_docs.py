"""The documentation is a reference: figures keyed by commit and date, current figures first.

A figure keyed by a period of work ("run 6", "session 11") makes the reader learn the project's
history to know whether it still holds; docs/benchmarks.md and docs/relmas.md open with what holds
now instead (issue 32, item 16). The comments of the configs and of the learner's variants cite
figures too, and are held to the same rule.
"""

import argparse
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
COMMENTED = sorted((ROOT / "config").glob("*.yaml")) + sorted(
    (ROOT / "benchmarks" / "variants").glob("*.yaml")
)

# "run 6", "Runs 7 and 8", "session-3", "sessions 8–9", "stop 2", also across a line break.
PERIOD_KEY = re.compile(r"\b(?:runs?|sessions?|stops?)(?:\s+|-)\d+\b", re.IGNORECASE)


def period_keys(text: str) -> list[str]:
    """Each match of a period-of-work key in text, with its line number."""
    return [
        f"{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
        for m in PERIOD_KEY.finditer(text)
    ]


@pytest.mark.parametrize(
    "text",
    [
        "run 6",
        "Run 13's headline",
        "runs 7 and 8",
        "session-3 note",
        "Sessions 8–9",
        "stop 2",
        "run\n12",
    ],
)
def test_period_key_pattern_catches_keys(text: str) -> None:
    assert period_keys(text)


@pytest.mark.parametrize(
    "text",
    [
        "a run of the study",
        "the runs of one invocation",
        "runs 300k steps",
        "run to the next decision",
        "rerun 2 jobs",
        "pruned 5 runs",
        "the session's host",
        "stops at 50k",
    ],
)
def test_period_key_pattern_passes_ordinary_words(text: str) -> None:
    assert not period_keys(text)


@pytest.mark.parametrize("path", DOCS + COMMENTED, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_figure_is_keyed_by_a_period_of_work(path: Path) -> None:
    keys = period_keys(path.read_text(encoding="utf-8"))
    where = path.relative_to(ROOT)
    assert not keys, (
        f"{where} keys figures by a period of work (key them by commit and date): {keys}"
    )


@pytest.mark.parametrize("name", ["benchmarks.md", "relmas.md"])
def test_measurement_docs_open_with_what_holds_now(name: str) -> None:
    text = (ROOT / "docs" / name).read_text(encoding="utf-8")
    sections = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert sections[0] == "What holds now", sections[:3]
    assert sections[-1] == "History", sections[-3:]


def test_the_command_line_contract_lists_every_subcommand() -> None:
    """docs/design.md's command-line table has a row for each subcommand of `relmas` (issue 32:
    `relmas recover` had none)."""
    from relmas.cli import build_parser

    (commands,) = (a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    table = text.split("## Contract: the command line")[1].split("\n## ")[0]
    assert set(re.findall(r"^\| `relmas (\w+)", table, re.MULTILINE)) == set(commands.choices)
