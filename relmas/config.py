"""Loading and validation of the relmas configuration.

The JSON schema in `workflow/schemas/config.schema.yaml` is the single definition of the config
keys; the Snakefile validates with it through `snakemake.utils.validate`, the command line through
this module, so an invalid config fails the same way before any job runs: one line naming the file,
the key and what was expected.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema

from relmas import catalog
from relmas.errors import InputError
from relmas.hashing import config_hash as config_hash  # where the rules and stages import it
from relmas.paths import CONFIG_SCHEMA
from relmas.yaml_load import load_yaml


def load_schema() -> dict[str, Any]:
    """The config schema, with the policy names of relmas.catalog as the enums of the keys that
    name policies (the YAML file does not repeat them; Snakemake's `validate` checks the rest)."""
    schema = load_yaml(CONFIG_SCHEMA)
    evaluation = schema["properties"]["evaluation"]["properties"]
    evaluation["policies"]["items"]["enum"] = list(catalog.names())
    training = schema["properties"]["training"]["properties"]
    reference = training["observation"]["properties"]["reference"]
    reference["enum"] = [catalog.BEST, *catalog.teachers()]
    return schema


def schema_defaults(section: str) -> dict[str, Any]:
    """The schema's defaults of the keys of config section `section` (dotted, e.g.
    "training.dqn"): what a validated config holds where they are left out. The settings
    dataclasses (DQNConfig, ObservationSettings, RewardSettings) have no defaults of their own, so
    that the schema stays the one place of each; a library user builds them from these."""
    node = load_schema()
    for key in section.split("."):
        node = node["properties"][key]
    return {
        key: copy.deepcopy(value["default"])
        for key, value in node["properties"].items()
        if "default" in value
    }


def load_config(path: str | Path) -> dict[str, Any]:
    """Read, validate and complete (schema defaults) the configuration in `path`."""
    return validate_config(load_yaml(path), path)


def validate_config(raw: Any, source: str | Path | None = None) -> dict[str, Any]:
    """Validate `raw` against the schema and the cross-references between sections.

    Returns a deep copy with the schema's defaults filled in.
    """
    if not isinstance(raw, Mapping):
        raise InputError(source, None, "a mapping of configuration keys", type(raw).__name__)
    config = copy.deepcopy(dict(raw))
    validator = _validator_with_defaults(load_schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(config))
    if error is not None:
        raise _schema_error(error, source)
    _check_finite(config, source)
    _check_references(config, source)
    _check_teacher(config, source)
    _check_planner(config, source)
    return config


def merge_into(base: dict[str, Any], update: Mapping[str, Any]) -> None:
    """Apply `update` to raw config `base` key by key, nested mappings merged (Snakemake's
    `--configfile` overlay)."""
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            merge_into(base[key], value)
        else:
            base[key] = value


def _check_finite(node: Any, source: str | Path | None, key: str = "") -> None:
    """Refuse a NaN or infinite number anywhere in the config: no key means one (null is the
    config's "no limit"), and the schema's bounds let NaN through (every comparison with it is
    false)."""
    if isinstance(node, float) and not math.isfinite(node):
        raise InputError(source, key or None, "a finite number", node)
    if isinstance(node, Mapping):
        for name, value in node.items():
            _check_finite(value, source, _join(key, str(name)))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _check_finite(value, source, f"{key}[{i}]")


def _check_references(config: Mapping[str, Any], source: str | Path | None) -> None:
    accelerators = config["accelerators"]
    systems = [("system", config["system"])]
    systems += [
        (f"scenarios.{name}.system", scenario["system"])
        for name, scenario in config["scenarios"].items()
        if "system" in scenario
    ]
    for prefix, system in systems:
        for i, instance in enumerate(system.get("instances", [])):
            if instance["name"] not in accelerators:
                raise InputError(
                    source,
                    f"{prefix}.instances[{i}].name",
                    f"one of the configured accelerators {sorted(accelerators)}",
                    instance["name"],
                )
    if "instances" not in config["system"]:
        raise InputError(source, "system.instances", "a list of accelerator instances", "missing")
    from relmas.hw.spec import parse_spec
    from relmas.workload import parse_scenario, scenario_system

    for name, spec in accelerators.items():
        parse_spec(name, spec, source)

    for name, scenario in config["scenarios"].items():
        parse_scenario(name, scenario, list(config["models"]), source)
        scenario_system(config, name, source)


def _check_teacher(config: Mapping[str, Any], source: str | Path | None) -> None:
    """A learned policy's teacher is a rule or target-aware baseline taken from the validation
    rows `relmas validate` writes, which hold only the evaluated baselines, as is its keeper's
    rule: refuse a config whose training could not find them, before anything runs."""
    evaluated = config["evaluation"]["policies"]
    if not set(evaluated) & set(catalog.learned()):
        return
    reference = config["training"]["observation"]["reference"]
    if reference == catalog.BEST and not set(evaluated) & set(catalog.of_kind("rule")):
        expected = "a rule baseline beside a learned policy (its teacher is chosen among them)"
        raise InputError(source, "evaluation.policies", expected, evaluated)
    if reference != catalog.BEST and reference not in evaluated:
        expected = "a baseline of evaluation.policies (its placement is chosen on validation)"
        raise InputError(source, "training.observation.reference", expected, reference)
    keeper = catalog.keeper_rule()
    if config["training"]["keeper"]["traces"] > 0 and keeper not in evaluated:
        expected = (
            f"{keeper} beside a learned policy with a keeper (its rule, placed on validation),"
            " or training.keeper.traces: 0"
        )
        raise InputError(source, "evaluation.policies", expected, evaluated)


def _check_planner(config: Mapping[str, Any], source: str | Path | None) -> None:
    """The planner schedules with the rule the scenario's `relmas` agent deploys (its teacher):
    refuse a config that evaluates the planner without that agent, before anything runs."""
    evaluated = config["evaluation"]["policies"]
    whole = catalog.whole_layer_learned()
    if set(evaluated) & set(catalog.planners()) and not set(evaluated) & set(whole):
        expected = f"{whole[0]} beside the planner (it plans for the rule {whole[0]} deploys)"
        raise InputError(source, "evaluation.policies", expected, evaluated)


def _validator_with_defaults(schema: Mapping[str, Any]) -> jsonschema.protocols.Validator:
    """A Draft 2020-12 validator that also fills in `default` values of declared properties."""
    base = jsonschema.Draft202012Validator
    validate_properties = base.VALIDATORS["properties"]

    def properties_with_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for key, subschema in properties.items():
                if "default" in subschema and key not in instance:
                    instance[key] = copy.deepcopy(subschema["default"])
        yield from validate_properties(validator, properties, instance, schema)

    extended = jsonschema.validators.extend(base, {"properties": properties_with_defaults})
    return extended(schema)


def _schema_error(error: jsonschema.ValidationError, source: str | Path | None) -> InputError:
    key = _dotted(error.absolute_path)
    kind = error.validator
    value = error.validator_value
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    if kind == "required":
        missing = next((k for k in value if k not in error.instance), value[0])
        return InputError(source, _join(key, missing), "this key to be present", "missing")
    if kind == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        return InputError(source, _join(key, extra[0]), f"a known key (one of {allowed})")
    expected = {
        "type": lambda: (
            "a value of type " + (" or ".join(value) if isinstance(value, list) else value)
        ),
        "enum": lambda: f"one of {value}",
        "exclusiveMinimum": lambda: f"a value > {value}",
        "exclusiveMaximum": lambda: f"a value < {value}",
        "minimum": lambda: f"a value >= {value}",
        "maximum": lambda: f"a value <= {value}",
        "minItems": lambda: f"at least {value} item(s)",
        "uniqueItems": lambda: "distinct values",
        "minProperties": lambda: f"at least {value} entry(ies)",
        "minLength": lambda: "a non-empty string",
        "pattern": lambda: schema.get("description", f"a string matching {value}"),
    }.get(kind, lambda: error.message)()
    return InputError(source, key or None, expected, error.instance)


def _dotted(path) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key
