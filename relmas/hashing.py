"""Stable hashes of configuration values, in a module that imports nothing of relmas: any module
may record or check what a file was made from (a layer or cost table records the `models:` config
it was extracted or profiled for) without importing the config loader, which imports the study."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def config_hash(config: Mapping[str, Any]) -> str:
    """A stable short hash of a (validated) configuration or of any slice of it."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
