"""Config validation: one schema, one-line errors naming the file, the key and what was expected."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from relmas.config import config_hash, load_config, validate_config
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
