"""A rule baseline is declared once, by its parts (`relmas.catalog.RuleParts`): its name, kind and
catalog entry are derived from them, the names of earlier studies still resolve, and a rule made
of parts that no catalog entry names yet runs once declared (docs/design.md, "Where to change
what")."""

from __future__ import annotations

import polars as pl
import pytest

from relmas import catalog
from relmas.catalog import RuleParts
from relmas.config import load_schema
from relmas.policies import base, make_policy, rules
from relmas.sim import Engine
from tests.synthetic import contended_case

# The rule baselines' names as the studies before the parts were declared wrote them into
# summary.parquet and MLflow (relmas c7184ae): each must still name the same rule.
EARLIER_NAMES = {
    "sjf_feasible": (0, False, False, False, rules.BY_RULE),
    "edf_feasible": (1, False, False, False, rules.BY_RULE),
    "sjf_feasible_patient": (0, True, False, False, rules.BY_RULE),
    "sjf_feasible_patient_gated": (0, True, True, False, rules.BY_RULE),
    "edf_feasible_patient": (1, True, False, False, rules.BY_RULE),
    "edf_feasible_patient_gated": (1, True, True, False, rules.BY_RULE),
    "sjf_feasible_patient_gated_ordered": (0, True, True, True, rules.BY_RULE),
    "edf_feasible_patient_gated_ordered": (1, True, True, True, rules.BY_RULE),
    "sjf_feasible_deficit": (0, False, False, False, rules.BY_DEFICIT),
    "edf_feasible_deficit": (1, False, False, False, rules.BY_DEFICIT),
    "sjf_feasible_patient_gated_deficit": (0, True, True, False, rules.BY_DEFICIT),
    "edf_feasible_patient_gated_deficit": (1, True, True, False, rules.BY_DEFICIT),
    "sjf_feasible_patient_gated_ordered_deficit": (0, True, True, True, rules.BY_DEFICIT),
    "edf_feasible_patient_gated_ordered_deficit": (1, True, True, True, rules.BY_DEFICIT),
    "sjf_feasible_below": (0, False, False, False, rules.BY_BELOW),
    "edf_feasible_below": (1, False, False, False, rules.BY_BELOW),
    "sjf_feasible_patient_gated_below": (0, True, True, False, rules.BY_BELOW),
    "edf_feasible_patient_gated_below": (1, True, True, False, rules.BY_BELOW),
    "sjf_feasible_patient_gated_ordered_below": (0, True, True, True, rules.BY_BELOW),
    "edf_feasible_patient_gated_ordered_below": (1, True, True, True, rules.BY_BELOW),
    "sjf_feasible_tokens": (0, False, False, False, rules.BY_TOKENS),
    "sjf_feasible_by_target": (0, False, False, False, rules.BY_TARGET),
}


# The admission forms (issue 50), declared after them: (rank, patient, gated, ordered, by, admit).
SACRIFICE, ACCEPT = rules.ADMIT_SACRIFICE, rules.ADMIT_ACCEPT
ADMISSION_NAMES = {
    "sjf_feasible_sacrifice": (0, False, False, False, rules.BY_RULE, SACRIFICE),
    "edf_feasible_sacrifice": (1, False, False, False, rules.BY_RULE, SACRIFICE),
    "sjf_feasible_patient_gated_ordered_sacrifice": (0, True, True, True, rules.BY_RULE, SACRIFICE),
    "edf_feasible_patient_gated_ordered_sacrifice": (1, True, True, True, rules.BY_RULE, SACRIFICE),
    "sjf_feasible_accept": (0, False, False, False, rules.BY_RULE, ACCEPT),
    "edf_feasible_accept": (1, False, False, False, rules.BY_RULE, ACCEPT),
    "sjf_feasible_patient_gated_ordered_accept": (0, True, True, True, rules.BY_RULE, ACCEPT),
    "edf_feasible_patient_gated_ordered_accept": (1, True, True, True, rules.BY_RULE, ACCEPT),
}


def test_the_declared_parts_give_the_names_and_kernel_parameters_of_earlier_studies() -> None:
    """The earlier names come first, in their order, each with its earlier parameters and the
    admission of every job (`all`, code 0) appended; the admission forms follow them."""
    declared = tuple(catalog.of_kind("rule", "target"))
    assert declared[: len(EARLIER_NAMES)] == tuple(EARLIER_NAMES)
    assert declared[len(EARLIER_NAMES) :] == tuple(ADMISSION_NAMES)
    assert rules.ADMIT_ALL == 0 and rules.ADMIT_SACRIFICE == 1 and rules.ADMIT_ACCEPT == 2
    for name, parameters in EARLIER_NAMES.items():
        parts = catalog.rule(name)
        assert parts is not None and parts.name == name and parts.admit == "all"
        assert catalog.entry(name).kind == ("rule" if parts.by == "rule" else "target")
        assert make_policy(name).parameters == (*parameters, rules.ADMIT_ALL)
    for name, parameters in ADMISSION_NAMES.items():
        parts = catalog.rule(name)
        assert parts is not None and parts.name == name and catalog.entry(name).kind == "rule"
        assert make_policy(name).parameters == parameters
    assert rules.RANK_SJF == 0 and rules.RANK_EDF == 1


@pytest.mark.parametrize(
    "parts",
    [
        dict(rank="work", gated=True),  # gated needs patient
        dict(rank="deadline", patient=True, ordered=True),  # ordered needs gated
        dict(rank="laxity"),
        dict(rank="work", by="priority"),
        dict(rank="deadline", admit="guarantee"),
    ],
)
def test_parts_that_name_no_rule_are_refused(parts) -> None:
    with pytest.raises(ValueError, match="rank|gates"):
        RuleParts(**parts)


def _started(result) -> list[tuple[int, float]]:
    jobs = result.jobs.filter(pl.col("start_s").is_finite()).sort("job_id")
    return list(zip(jobs["job_id"].to_list(), jobs["start_s"].to_list(), strict=True))


def test_a_rule_declared_by_its_parts_alone_is_in_the_contract_and_runs(monkeypatch) -> None:
    """EDF, patient, with the token rule's precedence: a combination no catalog entry has. It is
    one declaration in the catalog (here added to it) and runs through the rule kernel; without
    targets no job has tokens, so it schedules exactly as `edf_feasible_patient` does."""
    toy = RuleParts("deadline", patient=True, by="tokens")
    assert toy.name == "edf_feasible_patient_tokens" and catalog.entry(toy.name) is None
    monkeypatch.setattr(catalog, "CATALOG", (*catalog.CATALOG, toy.entry))
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    rules.register_rule(toy)
    assert toy in catalog.rules() and toy.name in catalog.of_kind("target")
    assert (
        toy.name
        in load_schema()["properties"]["evaluation"]["properties"]["policies"]["items"]["enum"]
    )

    system, tables, trace = contended_case(7, 24, {"a": 4, "b": 6}, 6.0, (1.5, 4.0))
    run = {
        name: _started(Engine(system, tables, trace).run(make_policy(name)))
        for name in (toy.name, "edf_feasible_patient", "sjf_feasible_patient")
    }
    assert run[toy.name] == run["edf_feasible_patient"]
    assert run[toy.name] != run["sjf_feasible_patient"]  # the case tells the ranks apart
