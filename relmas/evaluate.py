"""Policies x job traces -> results: one simulation, its per-job Parquet and its summary row.

Also the checks of user-supplied inputs of `relmas simulate` (a SYSTEM.yaml, a hand-written job
trace, a directory of cost tables): every problem is an InputError naming the file and the column.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from relmas import catalog
from relmas.errors import InputError
from relmas.io import read_parquet, write_parquet
from relmas.policies import Policy, make_policy
from relmas.policies.placement import ALL, BANDWIDTH, TYPES, Placement
from relmas.schemas import (
    JOB_DEFAULTS,
    JOB_SCHEMA,
    SUMMARY_SCHEMA,
    JobTrace,
    SummaryRows,
    max_jobs,
)
from relmas.sim.costs import CostTables, load_costs
from relmas.sim.engine import Engine
from relmas.sim.result import SimResult
from relmas.sim.system import System, load_system
from relmas.study import Study, baseline_policies, policy_options, validation_order

# Metrics written to the summary beyond SUMMARY_SCHEMA, in this order.
SUMMARY_EXTRA = (
    "energy_dynamic_j",
    "energy_static_j",
    "energy_overhead_j",
    "turnaround_mean_s",
    "turnaround_p50_s",
    "turnaround_p95_s",
    "turnaround_p99_s",
    "decisions",
    "assignments",
    "mean_bandwidth_gbps",
)


def simulate(
    system: System,
    jobs: pl.DataFrame,
    tables: CostTables,
    policy: Policy | str,
    *,
    seed: int = 0,
    static_w: Mapping[str, float] | None = None,
    record: bool = False,
) -> SimResult:
    """Run `policy` (an instance or a contract name, seeded with `seed`) on the job trace `jobs`."""
    if isinstance(policy, str):
        policy = make_policy(policy, seed=seed)
    return Engine(system, tables, jobs, static_w=static_w, record=record).run(policy)


def agent_scenario(policy: str, agent: str | Path | None) -> str | None:
    """The scenario a learned policy's agent was trained on (its agent.json); None otherwise."""
    if policy not in catalog.learned() or agent is None:
        return None
    from relmas.rl.agent import read_agent_info

    return read_agent_info(agent).scenario


def policy_extra(policy: str, agent: str | Path | None, result: SimResult) -> dict[str, float]:
    """A learned policy's own cost in this run (MACs, energy and time per decision, priced from
    its agent.json); nothing for the others."""
    if policy not in catalog.learned() or agent is None:
        return {}
    from relmas.rl.agent import read_agent_info
    from relmas.rl.overhead import overhead_metrics

    return overhead_metrics(read_agent_info(agent).decision_cost, result)


def summary_row(
    result: SimResult,
    scenario: str,
    seed: int,
    extra: Mapping[str, float] | None = None,
    agent_scenario: str | None = None,
    placement: str | None = None,
) -> pl.DataFrame:
    """One SUMMARY_SCHEMA row (plus SUMMARY_EXTRA columns, plus the policy's `extra` metrics),
    and `agent_scenario`: the scenario a learned policy's agent was trained on (null without one;
    another scenario than `scenario` in generalisation runs). `placement`: a rule's placement
    (relmas.policies.placement), null for a policy that takes none."""
    metrics = result.metrics
    row: dict[str, Any] = {"scenario": scenario, "policy": result.policy, "seed": seed}
    row["placement"] = placement
    row["jobs"] = int(metrics["jobs"])
    row.update({key: metrics[key] for key in SUMMARY_SCHEMA if key not in row})
    row.update({key: metrics[key] for key in SUMMARY_EXTRA})
    row.update(extra or {})
    row["agent_scenario"] = agent_scenario
    schema = dict(SUMMARY_SCHEMA) | {key: pl.Float64() for key in (*SUMMARY_EXTRA, *(extra or {}))}
    return pl.DataFrame([row], schema=schema | {"agent_scenario": pl.String()})


def group_rows(
    result: SimResult, scenario: str, seed: int, agent_scenario: str | None = None
) -> pl.DataFrame:
    """The service groups of one run (relmas.sim.service.GROUP_SCHEMA) with the run's scenario,
    policy and seed before them and its `agent_scenario` after them, as in its summary row; no
    rows on a trace without targets."""
    keys = {"scenario": scenario, "policy": result.policy, "seed": seed}
    return result.service.select(
        *(pl.lit(value, SUMMARY_SCHEMA[key]).alias(key) for key, value in keys.items()),
        pl.all(),
        pl.lit(agent_scenario, pl.String()).alias("agent_scenario"),
    )


def write_results(
    result: SimResult,
    jobs_path: str | Path,
    summary_path: str | Path | None = None,
    groups_path: str | Path | None = None,
    *,
    scenario: str,
    seed: int,
    extra: Mapping[str, float] | None = None,
    agent_scenario: str | None = None,
    placement: str | None = None,
) -> None:
    """Per-job results (JOB_RESULT_SCHEMA, metrics in the file metadata), optionally the summary
    (with the policy's `extra` metrics, e.g. RELMAS's overhead, its agent's scenario and its
    placement) and the service groups' rows (`group_rows`)."""
    metadata = {
        "relmas.scenario": scenario,
        "relmas.policy": result.policy,
        "relmas.seed": str(seed),
        "relmas.metrics": json.dumps(result.metrics, sort_keys=True),
        "relmas.sla_by_tenant": json.dumps(result.sla_by_tenant, sort_keys=True),
    }
    write_parquet(result.jobs, jobs_path, metadata=metadata)
    if summary_path is not None:
        row = summary_row(result, scenario, seed, extra, agent_scenario, placement)
        write_parquet(row, summary_path)
    if groups_path is not None:
        write_parquet(group_rows(result, scenario, seed, agent_scenario), groups_path)


def load_job_trace(
    path: str | Path, tables: CostTables, tenants: Sequence[str] | None = None
) -> pl.DataFrame:
    """Read a job trace (relmas.schemas.JobTrace; the JOB_DEFAULTS columns may be left out; one of
    more than `max_jobs()` jobs is refused from its footer, before it is read) and check it against
    the cost tables' models and, for the trace of a scenario, the scenario's `tenants`."""
    # its names first: a job of an unknown tenant is named as such, not by its service group
    frame = read_parquet(
        path,
        JobTrace,
        max_rows=max_jobs(),
        defaults=JOB_DEFAULTS,
        first=lambda jobs: check_trace_names(jobs, tables, path, tenants),
    )
    return frame.select(list(JOB_SCHEMA))


def check_trace_names(
    jobs: pl.DataFrame,
    tables: CostTables,
    source: str | Path | None,
    tenants: Sequence[str] | None = None,
) -> pl.DataFrame:
    """Check what a trace's contract cannot: its models are the cost tables' and its tenants among
    `tenants` when given (a trace simulated outside any scenario names any tenant; a scenario's
    metrics are per its tenants)."""
    checks: tuple[tuple[str, Sequence[str]], ...] = ()
    if tenants is not None:
        checks += (("tenant", list(tenants)),)
    checks += (("model", list(tables.models)),)
    for column, allowed in checks:
        bad = jobs.filter(~pl.col(column).is_in(allowed))
        if bad.height:
            row = bad.row(0, named=True)
            raise InputError(
                source, column, f"one of {allowed}", f"{row[column]} (job_id {row['job_id']})"
            )
    return jobs


def simulate_files(
    system_path: str | Path,
    jobs_path: str | Path,
    costs_dir: str | Path,
    policy: str,
    out: str | Path,
    *,
    seed: int = 0,
    static_w: Mapping[str, float] | None = None,
    policy_options: Mapping[str, Any] | None = None,
) -> SimResult:
    """`relmas simulate`: `policy` on a user's system, job trace and cost tables -> `out`."""
    system = load_system(system_path)
    tables = load_costs(costs_dir, system, system_path)
    jobs = load_job_trace(jobs_path, tables)
    chosen = make_policy(policy, seed=seed, key="--policy", **dict(policy_options or {}))
    result = simulate(system, jobs, tables, chosen, static_w=static_w)
    write_results(result, out, scenario=Path(jobs_path).stem, seed=seed)
    return result


def evaluate_scenario(
    config: Mapping[str, Any],
    scenario: str,
    policy: str,
    seed: int,
    jobs_path: str | Path,
    costs_dir: str | Path,
    *,
    source: str | Path | None = None,
    static_w: Mapping[str, float] | None = None,
    policy_options: Mapping[str, Any] | None = None,
    record: bool = False,
    tables: CostTables | None = None,
) -> SimResult:
    """`relmas evaluate`: `policy` on the trace of a configured scenario and seed.

    The scenario's system (default system + its override) sets the instances and the bandwidth;
    `static_w` gives each accelerator's static power (W), e.g. from its resolved spec. `tables`:
    the scenario's cost tables of `costs_dir`, already loaded (by a process that evaluates several
    policies and seeds, so that it reads and checks them once).
    """
    study = Study(config, source)
    system, tables, jobs = evaluation_inputs(study, scenario, jobs_path, costs_dir, tables)
    options = dict(policy_options or {})
    if policy in catalog.planners():  # it draws futures of the scenario's arrival process
        options |= {"scenario": scenario, "arrivals": study.scenario(scenario)}
    chosen = make_policy(policy, seed=seed, key="--policy", **options)
    return simulate(system, jobs, tables, chosen, static_w=static_w, record=record)


def evaluation_inputs(
    study: Study,
    scenario: str,
    jobs_path: str | Path,
    costs_dir: str | Path,
    tables: CostTables | None = None,
) -> tuple[System, CostTables, pl.DataFrame]:
    """What `relmas evaluate` and `relmas bound` run on, loaded and checked the same way: the
    scenario's system, its cost tables (`tables`: already loaded by `Study.costs`) and the job
    trace `jobs_path`, its tenants the scenario's."""
    system = study.system(study.check_scenario(scenario))
    if tables is None:
        tables = study.costs(scenario, costs_dir)
    tenants = [tenant.name for tenant in study.scenario(scenario).tenants]
    return system, tables, load_job_trace(jobs_path, tables, tenants)


def validation_summaries(
    config: Mapping[str, Any],
    scenario: str,
    costs_dir: str | Path,
    *,
    source: str | Path | None = None,
    progress: Callable[[str, int, float], None] | None = None,
) -> pl.DataFrame:
    """`relmas validate`: the summary row of every online baseline the configuration evaluates
    on `scenario` (`study.baseline_policies`) on every validation trace of it (the agents'
    validation traces, `Study.validation_traces`). The report chooses each scenario's best
    baseline on these rows, never on the evaluation traces it then measures it on. A baseline
    that takes a placement has the rows of the placement chosen for it (`choose_placements`),
    which its evaluation then uses (`read_placements`).

    `progress(policy, seed, sla_rate)` is called after each simulation.
    """
    study = Study(config, source)
    system = study.system(study.check_scenario(scenario))
    tables = study.costs(scenario, costs_dir)
    traces = study.validation_traces(scenario, costs_dir)
    policies = baseline_policies(config, scenario)
    placed = [policy for policy in policies if policy in catalog.placed()]

    def run(policy: str, placement: str | None = None) -> pl.DataFrame:
        options = policy_options(config, policy)
        if placement is not None:
            options["placement"] = placement
        rows = []
        for seed, jobs in traces.items():
            chosen = make_policy(policy, seed=seed, source=source, key="policy", **options)
            result = simulate(system, jobs, tables, chosen)
            rows.append(summary_row(result, scenario, seed, placement=placement))
            if progress is not None:
                label = f"{policy} ({placement})" if placement else policy
                progress(label, seed, float(result.metrics["sla_rate"]))
        return pl.concat(rows, how="diagonal_relaxed")

    frames = [run(policy) for policy in policies if policy not in placed]
    if placed:
        types = system.accelerator_types
        frames.append(choose_placements(run, placed, types, config["evaluation"]["placements"]))
    if not frames:
        return pl.DataFrame(schema=SUMMARY_SCHEMA)
    order = {policy: k for k, policy in enumerate(policies)}
    frame = pl.concat(frames, how="diagonal_relaxed")
    return frame.sort("seed", pl.col("policy").replace_strict(order))  # as the runs go


def validation_simulations(config: Mapping[str, Any], scenario: str, types: int) -> int:
    """How many simulations `validation_summaries` runs on `scenario`, a system of `types`
    accelerator types (`choose_placements`: each placement of each placed baseline, the
    strongest on every proper subset of the types)."""
    policies = baseline_policies(config, scenario)
    placed = sum(policy in catalog.placed() for policy in policies)
    placements = config["evaluation"]["placements"]
    per_trace = len(policies) + placed * sum(p != TYPES for p in placements)
    if placed and TYPES in placements and types > 1:
        per_trace += 2**types - 2 + placed - 1
    return per_trace * len(config["training"]["validation_seeds"])


def choose_placements(
    run: Callable[[str, str], pl.DataFrame],
    policies: Sequence[str],
    types: Sequence[str],
    placements: Sequence[str],
) -> pl.DataFrame:
    """The validation rows of each of `policies` (baselines that take a placement) with the
    placement chosen for it: the first of the least shortfall then the highest SLA rate
    (`validation_order`, as the best baseline) among `all` (the whole system) and `placements`
    (evaluation.placements, in that order). `run(policy, placement)` gives a policy's rows.

    `types` in `placements` stands for one subset of the system's accelerator `types`, the other
    instances left idle: the best of the proper subsets for one policy, then tried with every
    policy (one rule on every subset costs far less than every rule on every subset). That
    policy is the strongest with the bandwidth-aware placement where it is tried (a rule that
    does well leaving types idle), else the strongest on the whole system (docs/simulator.md,
    "Placement")."""
    rows = {(policy, ALL): run(policy, ALL) for policy in policies}
    for placement in placements:
        if placement != TYPES:
            rows |= {(policy, placement): run(policy, placement) for policy in policies}
    if TYPES in placements and len(types) > 1:
        proxy = BANDWIDTH if BANDWIDTH in placements else ALL
        tried = pl.concat(rows[policy, proxy] for policy in policies)
        strongest = min(policies, key=validation_order(tried, "policy").__getitem__)
        subsets = [
            Placement(kept).label
            for size in range(1, len(types))
            for kept in itertools.combinations(types, size)
        ]
        tried = pl.concat(run(strongest, subset) for subset in subsets)
        subset = min(subsets, key=validation_order(tried, "placement").__getitem__)
        rows[strongest, subset] = tried.filter(pl.col("placement") == subset)
        rows |= {(p, subset): run(p, subset) for p in policies if p != strongest}
    chosen = []
    for policy in policies:
        candidates = pl.concat(frame for (p, _), frame in rows.items() if p == policy)
        order = validation_order(candidates, "placement")
        best = min(candidates["placement"].unique(maintain_order=True), key=order.__getitem__)
        chosen.append(candidates.filter(pl.col("placement") == best))
    return pl.concat(chosen)


def placement_option(
    policy: str, placements: Mapping[str, str] | None, source: str | Path | None = None
) -> dict[str, str]:
    """The `placement` option of a baseline that takes one (`catalog.placed`): the one chosen
    for it on the validation traces (`placements`, from `read_placements`), else the whole
    system; nothing for the other policies."""
    if policy not in catalog.placed():
        return {}
    if placements is None:
        return {"placement": ALL}
    if policy not in placements:
        raise InputError(source, "policy", f"a validation row of {policy} with its placement")
    return {"placement": placements[policy]}


def planned_rule(policy: str, agent: str | Path | None) -> dict[str, str]:
    """The `rule` and `placement` options of a planner (`catalog.planners`): the rule the
    scenario's `relmas` agent (`agent`, its directory) deploys, its teacher with the placement
    chosen for it, beside which its keeper gives jobs up; nothing for the other policies."""
    if policy not in catalog.planners():
        return {}
    if agent is None:
        raise InputError(None, "--agent", "the relmas agent whose rule the planner plans for")
    from relmas.rl.agent import read_agent_info

    observation = read_agent_info(agent).observation
    return {"rule": observation.reference, "placement": observation.placement}


def read_placements(path: str | Path, scenario: str, types: Sequence[str]) -> dict[str, str]:
    """Each baseline's placement chosen on the validation traces of `scenario`: policy ->
    placement, from the validation rows `relmas validate` wrote (`validation_summaries`), each a
    placement of the system's accelerator `types` (a hand-edited file is refused naming it)."""
    rows = read_parquet(path, SummaryRows)
    if (other := rows.filter(pl.col("scenario") != scenario)).height:
        raise InputError(path, "scenario", f"validation rows of {scenario}", other["scenario"][0])
    chosen = rows.filter(pl.col("placement").is_not_null()).unique(["policy", "placement"])
    twice = chosen.filter(pl.col("policy").is_duplicated())
    if twice.height:
        expected = "one placement per policy"
        raise InputError(path, "placement", expected, f"several for {twice['policy'][0]}")
    for placement in chosen["placement"]:
        Placement.parse(placement, path).allowed(types, path)
    return dict(chosen.select("policy", "placement").iter_rows())


def best_placed(
    path: str | Path, scenario: str, types: Sequence[str], among: Sequence[str] | None = None
) -> tuple[str, str]:
    """The rule or target-aware baseline (`catalog.placed`; only those `among`, if given) of the
    best validation rows of `scenario` (`validation_order`, as the report's best baseline; ties
    in the catalog's order) and its placement chosen there: the agent's reference baseline and
    teacher."""
    placements = read_placements(path, scenario, types)
    names = [p for p in placements if among is None or p in among]
    rows = read_parquet(path, SummaryRows).filter(pl.col("policy").is_in(names))
    if rows.height == 0:
        raise InputError(path, "policy", "validation rows of a rule or target-aware baseline")
    order = validation_order(rows, "policy")
    best = min((p for p in catalog.placed() if p in order), key=order.__getitem__)
    return best, placements[best]


# What an evaluation logs of each service group: `achieved.<group>` beside `target.<group>`.
SERVICE_QUANTITIES = ("achieved", "target")


def shared_metric(name: str) -> bool:
    """Whether a summary column is an outcome every policy has (SUMMARY_SCHEMA's numbers but the
    seed and the trace's job count, the SLA rate per tenant, and each service group's achieved
    rate and target): the metrics of an evaluation's MLflow run, so that the compare view of a
    scenario's runs shows `sla_rate` without scrolling, not among each policy's own diagnostics
    (those are in per_seed.json)."""
    numbers = {k for k, dtype in SUMMARY_SCHEMA.items() if dtype.is_numeric()} - {"seed", "jobs"}
    prefixes = tuple(f"{quantity}." for quantity in ("sla_rate", *SERVICE_QUANTITIES))
    return name in numbers or name.startswith(prefixes)
