"""Constants and helpers shared by the rules."""

import json
import sys

from relmas.config import config_hash

RELMAS = f"{sys.executable} -m relmas"
CONFIG_ARGS = " ".join(f"--config {path}" for path in CONFIG_FILES)
RESULTS = "results"


def slice_hash(*keys):
    """Hash of the named config sections: a rule's rerun trigger."""
    return config_hash({key: CONFIG.get(key) for key in keys})


def slice_of(section, name):
    """One entry of a config section as canonical JSON: a rule parameter (rerun trigger, cache key)."""
    return json.dumps(CONFIG[section][name], sort_keys=True)


wildcard_constraints:
    accelerator="|".join(CONFIG["accelerators"]),
