"""Config validation: one schema, one-line errors naming the file, the key and what was expected."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from relmas import catalog
from relmas.config import config_hash, load_config, load_schema, validate_config
from relmas.errors import InputError

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["config.yaml", "quick.yaml"])
def test_shipped_configs_are_valid(name: str) -> None:
    config = load_config(ROOT / "config" / name)
    assert config["profile"]["objective"] == "latency"  # default filled in from the schema


def _quick() -> dict:
    return yaml.safe_load((ROOT / "config" / "quick.yaml").read_text())


def _mutated(path: list, value) -> dict:
    raw = _quick()
    node = raw
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return raw


@pytest.mark.parametrize(
    ("path", "value", "key", "expected"),
    [
        (["models", "alexnet", "batch"], -2, "models.alexnet.batch", "a value > 0"),
        (["models", "alexnet", "batch"], "two", "models.alexnet.batch", "type integer"),
        (["system", "dram_gbps"], 0, "system.dram_gbps", "a value > 0"),
        (["system", "sharing"], "fair", "system.sharing", "one of ['proportional', 'maxmin']"),
        (["system", "instances", 0, "name"], "tpu", "system.instances[0].name", "configured"),
        (["system", "instances", 0, "count"], 0, "system.instances[0].count", "a value > 0"),
        (["accelerators", "eyeriss_168", "kind"], "gpu", "accelerators.eyeriss_168.kind", "one of"),
        (["profile"], {"objective": "speed"}, "profile.objective", "one of"),
        (["colour"], "blue", "colour", "a known key"),
        (
            ["scenarios", "mixed", "tenants", 0, "priority"],
            5,
            "scenarios.mixed.tenants[0].priority",
            "one of [1, 3, 9]",
        ),
        (["scenarios", "mixed", "jobs"], 0, "scenarios.mixed.jobs", "a value > 0"),
        (["evaluation", "gacer"], {"window": 0}, "evaluation.gacer.window", "a value >= 1"),
        # a learned policy's teacher is a rule baseline chosen on validation, or the one named
        (["evaluation", "policies"], ["fcfs", "relmas"], "evaluation.policies", "a rule baseline"),
        (
            ["training", "observation"],
            {"reference": "sjf_feasible_deficit"},
            "training.observation.reference",
            "a baseline of evaluation.policies",
        ),
        (
            ["scenarios", "mixed", "models"],
            {"resnet9000": 1},
            "scenarios.mixed.models.resnet9000",
            "one of the configured models",
        ),
    ],
)
def test_bad_values_name_the_key(path, value, key, expected) -> None:
    with pytest.raises(InputError) as info:
        validate_config(_mutated(path, value), "quick.yaml")
    message = str(info.value)
    assert message.startswith(f"quick.yaml: {key}: expected ")
    assert expected in message
    assert "\n" not in message


def test_a_keeper_needs_its_rule_evaluated() -> None:
    # the keeper is learned under edf_feasible at the placement its validation rows chose: a study
    # that does not evaluate it would fail at the keeper job, after its validation ran
    raw = _mutated(["training", "keeper"], {"traces": 1})
    raw["evaluation"]["policies"] = ["fcfs", "sjf_feasible", "relmas"]
    with pytest.raises(InputError) as info:
        validate_config(raw, "quick.yaml")
    message = str(info.value)
    assert message.startswith(f"quick.yaml: evaluation.policies: expected {catalog.keeper_rule()}")
    assert "training.keeper.traces: 0" in message and "\n" not in message
    raw["evaluation"]["policies"].append(catalog.keeper_rule())
    validate_config(raw, "quick.yaml")
    del raw["training"]["keeper"]  # no keeper: no rule needed
    raw["evaluation"]["policies"].remove(catalog.keeper_rule())
    validate_config(raw, "quick.yaml")


def test_missing_required_section_is_named() -> None:
    raw = _quick()
    del raw["accelerators"]
    with pytest.raises(InputError, match=r"^quick.yaml: accelerators: expected this key"):
        validate_config(raw, "quick.yaml")


def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("models:\n  resnet50: {batch: 1\n")
    with pytest.raises(InputError, match=r"bad.yaml: line \d+: expected well-formed YAML"):
        load_config(bad)


def test_config_hash_is_order_independent_and_sensitive() -> None:
    a = {"x": 1, "y": {"b": 2, "a": 3}}
    b = {"y": {"a": 3, "b": 2}, "x": 1}
    assert config_hash(a) == config_hash(b)
    assert config_hash(a) != config_hash({**a, "x": 2})


def test_cli_reports_bad_config_in_one_line_with_status_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(_mutated(["models", "alexnet", "batch"], 0)))
    out = tmp_path / "layers.parquet"
    proc = subprocess.run(
        [sys.executable, "-m", "relmas", "zoo", "--config", str(bad), "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert f"{bad}: models.alexnet.batch: expected a value > 0, got 0" in lines[0]
    assert not out.exists()


# --- defaults: the schema's are the only ones --------------------------------------------------


def _schema_sections(node: dict, path: str = "") -> dict[str, dict]:
    """Every object section of the schema (dotted path, `*` for a name) -> its keys' defaults."""
    sections = {}
    properties = node.get("properties", {})
    if properties:
        sections[path] = {k: v["default"] for k, v in properties.items() if "default" in v}
    for key, sub in properties.items():
        sections |= _schema_sections(sub, f"{path}.{key}" if path else key)
    if isinstance(node.get("additionalProperties"), dict):
        sections |= _schema_sections(node["additionalProperties"], f"{path}.*")
    return sections


def _code_defaults(tree: ast.AST) -> list[tuple[str, int, dict[str, ast.expr]]]:
    """(class or function name, line, {field or parameter: default}) of every class body (a
    dataclass's fields) and function signature of a module."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            values = {
                stmt.target.id: stmt.value
                for stmt in node.body
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                if stmt.value is not None
            }
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            positional = args.posonlyargs + args.args
            values = {
                arg.arg: value
                for arg, value in zip(
                    positional[len(positional) - len(args.defaults) :], args.defaults, strict=True
                )
            }
            values |= {
                arg.arg: value
                for arg, value in zip(args.kwonlyargs, args.kw_defaults, strict=True)
                if value is not None
            }
        else:
            continue
        found.append((node.name, node.lineno, values))
    return found


def _normalised(value):
    return list(value) if isinstance(value, tuple) else value


def test_no_default_in_the_package_disagrees_with_the_schema() -> None:
    """A class or function with defaults for two or more keys of one config section mirrors that
    section (DQNConfig, QNetwork, the GA's and gacer's options, ...): each of those defaults must
    be the schema's, the one place of a default."""
    sections = {path: keys for path, keys in _schema_sections(load_schema()).items() if keys}
    mirrors, disagreements = set(), []
    for path in sorted((ROOT / "relmas").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        for name, line, values in _code_defaults(ast.parse(path.read_text())):
            for section, defaults in sections.items():
                shared = sorted(set(values) & set(defaults))
                if len(shared) < 2:
                    continue
                mirrors.add((relative, name, section))
                for key in shared:
                    try:
                        code = ast.literal_eval(values[key])
                    except ValueError:
                        code = ast.unparse(values[key])
                    if _normalised(code) != defaults[key]:
                        where = f"{relative}:{line} {name}.{key} = {code!r}"
                        disagreements.append(f"{where}; {section}.{key}: {defaults[key]!r}")
    assert disagreements == []
    # the scan finds the mirrors it is meant to check
    assert ("relmas/policies/ga_offline.py", "__init__", "evaluation.ga") in mirrors
    assert ("relmas/policies/gacer.py", "__init__", "evaluation.gacer") in mirrors


def test_a_traces_priorities_are_the_ones_a_tenant_may_have() -> None:
    """relmas.evaluate checks a trace's priorities against its own tuple: the schema's enum."""
    from relmas.schemas import PRIORITIES

    tenant = load_schema()["properties"]["scenarios"]["additionalProperties"]["properties"]
    assert list(PRIORITIES) == tenant["tenants"]["items"]["properties"]["priority"]["enum"]


def test_the_planner_needs_the_agent_whose_rule_it_plans_for() -> None:
    # the planner schedules with the rule relmas deploys (relmas.evaluate.planned_rule): a study
    # that evaluates it without relmas would fail at its evaluation job, after hours of training
    policies = ["fcfs", "sjf_feasible", "edf_feasible", "planner", "relmas_resize"]
    raw = _mutated(["evaluation", "policies"], policies)
    with pytest.raises(InputError) as info:
        validate_config(raw, "quick.yaml")
    message = str(info.value)
    assert message.startswith("quick.yaml: evaluation.policies: expected relmas beside the planner")
    assert "\n" not in message
    raw["evaluation"]["policies"].append("relmas")
    assert validate_config(raw, "quick.yaml")["evaluation"]["planner"]["samples"] == 2
