"""Reading the project's YAML inputs (config files, the schema, SYSTEM.yaml, SPEC.yaml).

A leaf module: the config, the system and the accelerator-spec parsers all read YAML through it,
so none of them imports another to do so (no import cycle).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from relmas.errors import InputError


def load_yaml(path: str | Path) -> Any:
    """Parse a YAML file, turning a missing file or a syntax error into an InputError."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, None, "an existing YAML file")
    try:
        with path.open(encoding="utf-8") as handle:
            return yaml.safe_load(handle)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else None
        raise InputError(path, where, "well-formed YAML", getattr(exc, "problem", None)) from None
