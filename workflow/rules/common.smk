"""Constants and helpers shared by the rules."""

import json
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

from relmas import catalog
from relmas.config import config_hash
from relmas.figures.contents import report_figures
from relmas.paths import KEEPER_FORMAT, ResultPaths, groups_of, summary_of
from relmas.study import (
    base_value,
    EVALUATION_BATCHES,
    baseline_policies,
    batch_policies,
    evaluation_runs,
    generalisation_runs,
    point_label,
    policy_options,
    relaxation_options,
    sweep_points,
    sweep_policies,
    target_scenarios,
    unbatched_policies,
)

# Every output under the config's own results directory (`results:`).
PATHS = ResultPaths.of(CONFIG)

# Shell words, quoted: a checkout, venv or config path may hold spaces or `$(...)`.
RELMAS = f"{shlex.quote(sys.executable)} -m relmas"
CONFIG_ARGS = " ".join(f"--config {shlex.quote(path)}" for path in CONFIG_FILES)


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
    agent="|".join(CONFIG["scenarios"]),
    sweep="|".join(CONFIG["sweeps"]) or "(?!)",
    value=r"[0-9.e+-]+",


def scenario_accelerators(scenario):
    """Accelerator types of a scenario's system (default system + its override)."""
    from relmas.workload import scenario_system

    return scenario_system(CONFIG, scenario).accelerator_types


def scenario_costs(wildcards):
    """Cost tables of the accelerators in a scenario's system (and their piece tables for the
    jobs of a resizing policy)."""
    names = scenario_accelerators(wildcards.scenario)
    tables = [str(PATHS.costs(name)) for name in names]
    if getattr(wildcards, "policy", None) in catalog.resizing():
        tables += [str(PATHS.pieces(name)) for name in names]
    return tables


def scenario_trace_file(wildcards):
    """The replayed trace file of a scenario with `arrival: {process: trace}`, else nothing."""
    arrival = CONFIG["scenarios"][wildcards.scenario]["arrival"]
    return [arrival["path"]] if arrival.get("process") == "trace" else []


EVAL_SEEDS = CONFIG["evaluation"]["seeds"]
# the evaluation seeds as arguments of a command that takes them all (workload, evaluate, bound)
EVAL_SEED_ARGS = " ".join(f"--seed {seed}" for seed in EVAL_SEEDS)
# (scenario, policy) pairs evaluated: ga_offline only on small scenarios
EVAL_RUNS = evaluation_runs(CONFIG)
# the configured policies of each evaluation batch, those a job of rule evaluate_<batch> runs
# together on a scenario; the others, one job each of rule evaluate
EVAL_BATCHES = {batch: batch_policies(CONFIG, batch) for batch in EVALUATION_BATCHES}
UNBATCHED_POLICIES = "|".join(unbatched_policies(CONFIG)) or "(?!)"
# scenarios whose tenants are promised a deadline-hit rate: the report reads their service groups
TARGET_SCENARIOS = target_scenarios(CONFIG)


def agent_files(scenario, policy):
    """The trained agent of `scenario` that a learned policy needs; for an offline bound, the
    agent of the evaluated learned policy that runs whole layers, whose schedule seeds its search
    (docs/simulator.md, ga_offline), and for a planner the same agent, whose rule it plans for
    (relmas.evaluate.planned_rule); nothing for the others."""
    if policy in catalog.learned():
        return [str(PATHS.agent(scenario, policy) / "best.pt")]
    if policy in catalog.offline() + catalog.planners():
        seeds = [
            name for name in CONFIG["evaluation"]["policies"] if name in catalog.whole_layer_learned()
        ]
        return [str(PATHS.agent(scenario, name) / "best.pt") for name in seeds[:1]]
    return []


def policy_agent(wildcards):
    """The agent of an evaluation job: the scenario's own, or wildcards.agent's (generalisation)."""
    return agent_files(getattr(wildcards, "agent", wildcards.scenario), wildcards.policy)


# Generalisation runs (agent's scenario, scenario, policy) and sweep points (sweep, value); both
# check their scenario references here, so that a bad one fails before any job runs.
try:
    GENERALISATION_RUNS = generalisation_runs(CONFIG, ", ".join(CONFIG_FILES))
    SWEEP_POINTS = sweep_points(CONFIG, ", ".join(CONFIG_FILES))
except InputError as error:
    refuse(error)


def sweep_base(wildcards):
    """The base scenario of a sweep."""
    return CONFIG["sweeps"][wildcards.sweep]["scenario"]


def sweep_point_spec(sweep):
    """A sweep's base scenario and parameter as canonical JSON (a point's rerun trigger)."""
    spec = CONFIG["sweeps"][sweep]
    return json.dumps({key: spec[key] for key in ("scenario", "parameter")}, sort_keys=True)


def policies_costs(scenario, policies):
    """Cost tables that `policies` need on `scenario` (the piece tables too for a resizing one)."""
    return sorted(
        {
            table
            for policy in policies
            for table in scenario_costs(SimpleNamespace(scenario=scenario, policy=policy))
        }
    )


def baseline_costs(wildcards):
    """Cost tables the baselines of a scenario need, those scored on its validation traces (rule
    validate)."""
    return policies_costs(wildcards.scenario, baseline_policies(CONFIG, wildcards.scenario))


def batch_costs(policies):
    """The input function of an evaluation batch's cost tables: those its `policies` need."""
    return lambda wildcards: policies_costs(wildcards.scenario, policies)


def sweep_costs(wildcards):
    """Cost tables a sweep point needs: those of its base scenario for every swept policy."""
    return policies_costs(sweep_base(wildcards), sweep_policies(CONFIG, wildcards.sweep))


def sweep_base_runs(wildcards):
    """At the base scenario's own value: the base scenario's evaluation summaries and bound rows,
    which are that point's rows (relmas.sweep.base_point_rows); elsewhere nothing."""
    if float(wildcards.value) != base_value(CONFIG, wildcards.sweep):
        return []
    base, policies = sweep_base(wildcards), sweep_policies(CONFIG, wildcards.sweep)
    summaries = [
        str(summary_of(PATHS.evaluation(base, policy, seed)))
        for policy in policies
        for seed in EVAL_SEEDS
    ]
    return summaries + [str(PATHS.bound(base, seed)) for seed in EVAL_SEEDS]


def sweep_agents(wildcards):
    """The base scenario's agents, for the learned policies among the swept ones."""
    base = sweep_base(wildcards)
    return [
        path for policy in sweep_policies(CONFIG, wildcards.sweep) for path in agent_files(base, policy)
    ]


def scenario_keeper(wildcards):
    """The scenario's keeper file where its agents give jobs up (training.keeper.traces > 0)."""
    if CONFIG["training"]["keeper"]["traces"] == 0:
        return []
    return str(PATHS.keeper(wildcards.scenario))
