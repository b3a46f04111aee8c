"""Constants and helpers shared by the rules."""

import json
import sys
from pathlib import Path

from relmas.config import config_hash
from relmas.evaluate import evaluation_runs

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
    scenario="|".join(CONFIG["scenarios"]),
    policy="[a-z0-9_]+",
    seed=r"\d+",


def scenario_accelerators(scenario):
    """Accelerator types of a scenario's system (default system + its override)."""
    from relmas.workload import scenario_system

    return scenario_system(CONFIG, scenario).accelerator_types


def scenario_costs(wildcards):
    """Cost tables of the accelerators in a scenario's system."""
    return [
        f"{RESULTS}/costs/{name}.parquet" for name in scenario_accelerators(wildcards.scenario)
    ]


def scenario_trace_file(wildcards):
    """The replayed trace file of a scenario with `arrival: {process: trace}`, else nothing."""
    arrival = CONFIG["scenarios"][wildcards.scenario]["arrival"]
    return [arrival["path"]] if arrival.get("process") == "trace" else []


EVAL_SEEDS = CONFIG["evaluation"]["seeds"]
# (scenario, policy) pairs evaluated: ga_offline only on small scenarios
EVAL_RUNS = evaluation_runs(CONFIG)


def policy_agent(wildcards):
    """The trained agent a learned policy needs (nothing for heuristics)."""
    if wildcards.policy in ("relmas", "relmas_resize"):
        return [f"{RESULTS}/agents/{wildcards.scenario}/{wildcards.policy}/best.pt"]
    return []
