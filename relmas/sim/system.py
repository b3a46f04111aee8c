"""The simulated system: accelerator instances sharing one off-chip memory.

Parsed from the `system:` config section (or a scenario's override of it, or a SYSTEM.yaml given to
`relmas simulate`) into a frozen value, so that the simulator never sees an unchecked mapping.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from relmas.errors import InputError
from relmas.paths import check_name

SHARING_MODES = ("proportional", "maxmin")
SYSTEM_KEYS = ("instances", "dram_gbps", "sharing")


@dataclass(frozen=True)
class Instance:
    """`count` identical instances of the accelerator configured under `name`."""

    name: str
    count: int


@dataclass(frozen=True)
class System:
    """Accelerator instances and the off-chip bandwidth they share (GB/s, None = unlimited)."""

    instances: tuple[Instance, ...]
    dram_gbps: float | None = None
    sharing: str = "proportional"

    @property
    def accelerator_types(self) -> tuple[str, ...]:
        """Distinct accelerator names, in order of first appearance."""
        return tuple(dict.fromkeys(instance.name for instance in self.instances))

    @property
    def instance_types(self) -> tuple[str, ...]:
        """The accelerator name of every instance, one entry per instance."""
        return tuple(i.name for i in self.instances for _ in range(i.count))

    @property
    def instance_labels(self) -> tuple[str, ...]:
        """Unique instance labels such as `eyeriss_168#1` (the second eyeriss_168)."""
        seen: dict[str, int] = {}
        labels = []
        for name in self.instance_types:
            labels.append(f"{name}#{seen.get(name, 0)}")
            seen[name] = seen.get(name, 0) + 1
        return tuple(labels)

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return math.inf if self.dram_gbps is None else self.dram_gbps * 1e9

    def to_dict(self) -> dict[str, Any]:
        return {
            "instances": [{"name": i.name, "count": i.count} for i in self.instances],
            "dram_gbps": self.dram_gbps,
            "sharing": self.sharing,
        }


def load_system(
    path_or_mapping: str | Path | Mapping[str, Any],
    source: str | Path | None = None,
    key: str = "",
) -> System:
    """Parse a system from a YAML file (its top level is the `system:` section) or a mapping.

    `source` names the file in error messages (defaults to the path), `key` the dotted config path
    of the mapping (e.g. `system`), as in `config.yaml: system.dram_gbps: expected ...`.
    """
    if isinstance(path_or_mapping, Mapping):
        raw: Any = path_or_mapping
    else:
        from relmas.yaml_load import load_yaml

        source = source if source is not None else path_or_mapping
        raw = load_yaml(path_or_mapping)
    return _parse(raw, source, key, base=None)


def override_system(
    base: System, override: Mapping[str, Any], source: str | Path | None, key: str
) -> System:
    """`base` with the keys present in `override` replaced (a scenario's `system:` override)."""
    return _parse(override, source, key, base=base)


def _parse(raw: Any, source: str | Path | None, key: str, base: System | None) -> System:
    def where(name: str) -> str:
        return f"{key}.{name}" if key else name

    if not isinstance(raw, Mapping):
        raise InputError(source, key or None, "a mapping with keys " + ", ".join(SYSTEM_KEYS), raw)
    unknown = sorted(set(raw) - set(SYSTEM_KEYS))
    if unknown:
        raise InputError(
            source, where(str(unknown[0])), f"a known key (one of {list(SYSTEM_KEYS)})"
        )
    if base is None and "instances" not in raw:
        raise InputError(source, where("instances"), "a list of accelerator instances", "missing")
    instances = base.instances if base is not None else ()
    if "instances" in raw:
        instances = _parse_instances(raw["instances"], source, where("instances"))
    dram_gbps = base.dram_gbps if base is not None else None
    if "dram_gbps" in raw:
        dram_gbps = _parse_bandwidth(raw["dram_gbps"], source, where("dram_gbps"))
    sharing = base.sharing if base is not None else "proportional"
    if "sharing" in raw:
        sharing = raw["sharing"]
        if sharing not in SHARING_MODES:
            raise InputError(source, where("sharing"), f"one of {list(SHARING_MODES)}", sharing)
    return System(instances=instances, dram_gbps=dram_gbps, sharing=sharing)


def _parse_instances(raw: Any, source: str | Path | None, key: str) -> tuple[Instance, ...]:
    if not isinstance(raw, list) or not raw:
        raise InputError(source, key, "a non-empty list of {name, count}", raw)
    instances = []
    for i, entry in enumerate(raw):
        here = f"{key}[{i}]"
        if not isinstance(entry, Mapping) or set(entry) - {"name", "count"}:
            raise InputError(source, here, "a mapping with keys name and count", entry)
        name, count = entry.get("name"), entry.get("count")
        check_name(name, source, f"{here}.name")  # it names the instance's cost table
        if isinstance(count, bool) or not isinstance(count, int) or count <= 0:
            raise InputError(source, f"{here}.count", "a positive integer", count)
        instances.append(Instance(name, count))
    return tuple(instances)


def _parse_bandwidth(raw: Any, source: str | Path | None, key: str) -> float | None:
    if raw is None:
        return None
    if (
        isinstance(raw, bool)
        or not isinstance(raw, int | float)
        or not math.isfinite(raw)
        or raw <= 0
    ):
        raise InputError(source, key, "a positive number of GB/s, or null for unlimited", raw)
    return float(raw)
