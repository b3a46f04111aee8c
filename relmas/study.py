"""The study a configuration describes: its scenarios, systems, specs, cost tables and traces
(`Study`), and what it asks the pipeline to run: the (scenario, policy) evaluations, the
generalisation runs, the sweep points and each policy's options.

Every stage that needs a scenario's system, cost tables or traces gets them from a `Study`, so the
checks and their error messages are written once. The Snakefile plans the DAG with this module, so
it imports nothing that loads Numba or torch (tests/test_architecture.py checks it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import polars as pl

from relmas import catalog
from relmas.errors import InputError
from relmas.hw.spec import Spec, parse_spec
from relmas.paths import ResultPaths
from relmas.sim.costs import CostTables, load_costs
from relmas.sim.system import System
from relmas.workload import Scenario, generate_trace, parse_scenario, scenario_system


@dataclass(frozen=True)
class Study:
    """A validated configuration (schema defaults filled in, relmas.config) and the file it came
    from, for error messages."""

    config: Mapping[str, Any]
    source: str | Path | None = None

    @property
    def paths(self) -> ResultPaths:
        """Where its results live (the config's `results:`)."""
        return ResultPaths.of(self.config)

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(self.config["models"])

    def check_scenario(self, name: str, key: str = "--scenario") -> str:
        """`name`, if it is a configured scenario (else an InputError naming `key`)."""
        if name not in self.config["scenarios"]:
            known = sorted(self.config["scenarios"])
            raise InputError(self.source, key, f"one of the configured scenarios {known}", name)
        return name

    def scenario(self, name: str, jobs: int | None = None) -> Scenario:
        """Scenario `name`, parsed; `jobs` replaces its number of jobs (e.g. training traces)."""
        raw = self.config["scenarios"][self.check_scenario(name)]
        parsed = parse_scenario(name, raw, list(self.models), self.source)
        return parsed if jobs is None else replace(parsed, jobs=jobs)

    def system(self, name: str) -> System:
        """The system of scenario `name`: the default system with its override merged onto it."""
        return scenario_system(self.config, name, self.source)

    def spec(self, accelerator: str) -> Spec:
        return parse_spec(accelerator, self.config["accelerators"][accelerator], self.source)

    def costs(self, name: str, costs_dir: str | Path | None = None) -> CostTables:
        """The cost tables of scenario `name`'s accelerators (default: the study's costs dir),
        refused if they were profiled for other models, specs or objective than this config's."""
        from relmas.profile import check_cost_tables  # loads Numba: not while planning the DAG

        directory = self.paths.costs_dir if costs_dir is None else costs_dir
        system = self.system(name)
        check_cost_tables(directory, system.accelerator_types, self.config, self.source)
        return load_costs(directory, system, self.source, models=self.models)

    def traces(
        self,
        name: str,
        seeds: Iterable[int],
        costs_dir: str | Path | None = None,
        jobs: int | None = None,
    ) -> dict[int, pl.DataFrame]:
        """The job trace (JOB_SCHEMA) of scenario `name` for each seed."""
        scenario = self.scenario(name, jobs)
        system = self.system(name)
        tables = self.costs(name, costs_dir)
        return {
            seed: generate_trace(name, scenario, system, tables, seed, self.source)
            for seed in seeds
        }

    def validation_traces(
        self, name: str, costs_dir: str | Path | None = None
    ) -> dict[int, pl.DataFrame]:
        """The traces the agents of scenario `name` are validated on (`training.validation_seeds`,
        of `training.jobs` jobs): disjoint from the evaluation seeds, so that what is chosen on
        them (an agent's best.pt, the report's best baseline) is measured on traces it never saw."""
        training = self.config["training"]
        return self.traces(name, training["validation_seeds"], costs_dir, training["jobs"])

    def trace(self, name: str, seed: int, costs_dir: str | Path | None = None) -> pl.DataFrame:
        """`relmas workload`: the job trace of scenario `name` for `seed`."""
        return self.traces(name, [seed], costs_dir)[seed]


def evaluation_runs(config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The (scenario, policy) pairs a configuration evaluates: every configured policy on every
    scenario it runs on (`runs_on`)."""
    return [
        (scenario, policy)
        for scenario in config["scenarios"]
        for policy in config["evaluation"]["policies"]
        if runs_on(config, scenario, policy)
    ]


# Policies a scenario's evaluation runs together, one process per batch: the online baselines that
# do not search, whose simulation of a trace takes less than a process's start-up (its imports and
# the MLflow store: docs/benchmarks.md). A batch's kinds run on the same scenarios (`runs_on`).
EVALUATION_BATCHES: dict[str, tuple[catalog.Kind, ...]] = {
    "baselines": ("heuristic", "rule"),
    "targets": ("target",),
}


def batch_policies(config: Mapping[str, Any], batch: str) -> list[str]:
    """The configured policies of an evaluation batch (`EVALUATION_BATCHES`), in config order."""
    kinds = catalog.of_kind(*EVALUATION_BATCHES[batch])
    return [policy for policy in config["evaluation"]["policies"] if policy in kinds]


def unbatched_policies(config: Mapping[str, Any]) -> list[str]:
    """The configured policies evaluated one per process: those of no batch (the search, offline
    and learned ones, each of which costs more than its start-up)."""
    batched = {policy for batch in EVALUATION_BATCHES for policy in batch_policies(config, batch)}
    return [policy for policy in config["evaluation"]["policies"] if policy not in batched]


def runs_on(config: Mapping[str, Any], scenario: str, policy: str) -> bool:
    """Whether `policy` is run on `scenario`: not the offline bounds (`ga_offline`) on scenarios
    of more than `evaluation.ga.max_jobs` jobs (or of unknown length), for they are bounds for
    small traces; not the target-aware baselines where no tenant has a target, for there each is
    its base rule, schedule for schedule (docs/simulator.md, "Target-aware baselines")."""
    if policy in catalog.offline():
        max_jobs = config["evaluation"]["ga"]["max_jobs"]
        return (config["scenarios"][scenario].get("jobs") or max_jobs + 1) <= max_jobs
    if policy in catalog.of_kind("target"):
        return scenario in target_scenarios(config)
    return True


def baseline_policies(config: Mapping[str, Any], scenario: str | None = None) -> list[str]:
    """The online baselines a configuration evaluates (`catalog.online_baselines()`, in catalog
    order), on `scenario` if given (`runs_on`): the candidates for each scenario's best baseline,
    scored on its validation traces."""
    evaluated = set(config["evaluation"]["policies"])
    return [
        policy
        for policy in catalog.online_baselines()
        if policy in evaluated and (scenario is None or runs_on(config, scenario, policy))
    ]


def validation_order(rows: pl.DataFrame, by: str) -> dict[str, tuple[float, float]]:
    """Per value of column `by` of one scenario's validation `rows`: (mean shortfall, − mean SLA
    rate), lower first. The shortfall is 0 for all where the traces carry no service targets:
    the order by which a best baseline (relmas.report.stats.best_baselines) and a rule's placement
    (relmas.evaluate.choose_placements) are chosen."""
    targets = "shortfall" in rows.columns and rows["shortfall"].is_not_null().any()
    means = rows.group_by(by).agg(
        pl.col("sla_rate").mean(),
        (pl.col("shortfall") if targets else pl.lit(0.0)).mean().alias("shortfall"),
    )
    return {
        value: (float(short), -float(rate))
        for value, short, rate in means.select(by, "shortfall", "sla_rate").iter_rows()
    }


def generalisation_runs(
    config: Mapping[str, Any], source: str | Path | None = None
) -> list[tuple[str, str, str]]:
    """The (agent scenario, scenario, policy) runs of `evaluation.generalisation`: every learned
    policy of `evaluation.policies`, deployed with the agent trained on another scenario.

    The two scenarios must differ and have the same accelerator instances (an agent's actions
    and features are per instance); their bandwidth, load and workload may differ.
    """
    runs = []
    for index, pair in enumerate(config["evaluation"]["generalisation"]):
        key = f"evaluation.generalisation[{index}]"
        for role in ("agent", "scenario"):
            if pair[role] not in config["scenarios"]:
                known = sorted(config["scenarios"])
                raise InputError(
                    source, f"{key}.{role}", f"one of the scenarios {known}", pair[role]
                )
        if pair["agent"] == pair["scenario"]:
            raise InputError(source, key, "two different scenarios", pair["scenario"])
        trained = scenario_system(config, pair["agent"], source).instance_types
        deployed = scenario_system(config, pair["scenario"], source).instance_types
        if trained != deployed:
            raise InputError(
                source,
                f"{key}.scenario",
                f"a scenario with the accelerator instances of {pair['agent']} {list(trained)}",
                f"{pair['scenario']} {list(deployed)}",
            )
        runs += [
            (pair["agent"], pair["scenario"], policy)
            for policy in config["evaluation"]["policies"]
            if policy in catalog.learned()
        ]
    return runs


def policy_options(config: Mapping[str, Any], policy: str) -> dict[str, Any]:
    """Configured constructor options of a policy: its section of `evaluation:` (the catalog's
    `options`), none for the others."""
    section = catalog.options_section(policy)
    return dict(config["evaluation"][section]) if section else {}


def target_scenarios(config: Mapping[str, Any]) -> list[str]:
    """The scenarios some tenant of which is promised a deadline-hit rate (`target`, `targets`):
    their traces carry service targets, so the report reads their runs' service groups and draws
    achieved against target for them."""
    study = Study(config)
    return [name for name in config["scenarios"] if study.scenario(name).has_targets()]


def sweep_points(
    config: Mapping[str, Any], source: str | Path | None = None
) -> list[tuple[str, float]]:
    """Every configured (sweep, value), in config order, after checking each base scenario."""
    for name in config["sweeps"]:
        sweep_scenario(config, name, source)
    return [(name, float(v)) for name, sweep in config["sweeps"].items() for v in sweep["values"]]


def sweep_scenario(config: Mapping[str, Any], sweep: str, source: str | Path | None) -> str:
    """The base scenario of `sweep`, both checked against the config."""
    if sweep not in config["sweeps"]:
        known = sorted(config["sweeps"])
        raise InputError(source, "--sweep", f"one of the configured sweeps {known}", sweep)
    scenario = config["sweeps"][sweep]["scenario"]
    if scenario not in config["scenarios"]:
        known = sorted(config["scenarios"])
        raise InputError(source, f"sweeps.{sweep}.scenario", f"one of {known}", scenario)
    return scenario


def base_value(
    config: Mapping[str, Any], sweep: str, source: str | Path | None = None
) -> float | None:
    """The swept parameter's value in the base scenario itself (None: unset, e.g. an unlimited
    bandwidth): the point at this value has the base scenario's traces on its system."""
    base = sweep_scenario(config, sweep, source)
    if config["sweeps"][sweep]["parameter"] == "load":
        load = config["scenarios"][base]["arrival"].get("load")
        return None if load is None else float(load)
    return Study(config, source).system(base).dram_gbps


def point_label(value: float) -> str:
    """A sweep value as it appears in file names (`0.4`, `16`)."""
    return f"{value:g}"


def sweep_policies(config: Mapping[str, Any], sweep: str) -> list[str]:
    """The policies of a point of `sweep`: the evaluated ones that run on its base scenario
    (`runs_on`), without the offline bounds and the planners (tenths of a second per plan)."""
    scenario = config["sweeps"][sweep]["scenario"]
    left_out = catalog.offline() + catalog.planners()
    return [
        p
        for p in config["evaluation"]["policies"]
        if p not in left_out and runs_on(config, scenario, p)
    ]


def relaxation_options(config: Mapping[str, Any]) -> dict[str, Any]:
    """The `evaluation.ceiling` options the relaxation bound reads (relmas.ceiling.bound), for the
    bound stage and the sweep points (where the exact search does not run): also a sweep point's
    rerun trigger and its run's params."""
    return {key: config["evaluation"]["ceiling"][key] for key in ("time_limit_s", "threads")}
