"""Policies x job traces -> results: one simulation, its per-job Parquet and its summary row.

Also the checks of user-supplied inputs of `relmas simulate` (a SYSTEM.yaml, a hand-written job
trace, a directory of cost tables): every problem is an InputError naming the file and the column.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from relmas import catalog
from relmas.errors import InputError
from relmas.io import read_parquet, write_parquet
from relmas.policies import Policy, make_policy
from relmas.schemas import JOB_DEFAULTS, JOB_SCHEMA, SUMMARY_SCHEMA, JobTrace, max_jobs
from relmas.sim.costs import CostTables, load_costs
from relmas.sim.engine import Engine
from relmas.sim.result import SimResult
from relmas.sim.system import System, load_system
from relmas.study import Study, baseline_policies, policy_options

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
) -> pl.DataFrame:
    """One SUMMARY_SCHEMA row (plus SUMMARY_EXTRA columns, plus the policy's `extra` metrics),
    and `agent_scenario`: the scenario a learned policy's agent was trained on (null without one;
    another scenario than `scenario` in generalisation runs)."""
    metrics = result.metrics
    row: dict[str, Any] = {"scenario": scenario, "policy": result.policy, "seed": seed}
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
) -> None:
    """Per-job results (JOB_RESULT_SCHEMA, metrics in the file metadata), optionally the summary
    (with the policy's `extra` metrics, e.g. RELMAS's overhead, and its agent's scenario) and the
    service groups' rows (`group_rows`)."""
    metadata = {
        "relmas.scenario": scenario,
        "relmas.policy": result.policy,
        "relmas.seed": str(seed),
        "relmas.metrics": json.dumps(result.metrics, sort_keys=True),
        "relmas.sla_by_tenant": json.dumps(result.sla_by_tenant, sort_keys=True),
    }
    write_parquet(result.jobs, jobs_path, metadata=metadata)
    if summary_path is not None:
        write_parquet(summary_row(result, scenario, seed, extra, agent_scenario), summary_path)
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
    system, tables, jobs = evaluation_inputs(
        Study(config, source), scenario, jobs_path, costs_dir, tables
    )
    chosen = make_policy(policy, seed=seed, key="--policy", **dict(policy_options or {}))
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
    baseline on these rows, never on the evaluation traces it then measures it on.

    `progress(policy, seed, sla_rate)` is called after each simulation.
    """
    study = Study(config, source)
    system = study.system(study.check_scenario(scenario))
    tables = study.costs(scenario, costs_dir)
    rows = []
    for seed, jobs in study.validation_traces(scenario, costs_dir).items():
        for policy in baseline_policies(config, scenario):
            options = policy_options(config, policy)
            chosen = make_policy(policy, seed=seed, source=source, key="policy", **options)
            result = simulate(system, jobs, tables, chosen)
            rows.append(summary_row(result, scenario, seed))
            if progress is not None:
                progress(policy, seed, float(result.metrics["sla_rate"]))
    if not rows:
        return pl.DataFrame(schema=SUMMARY_SCHEMA)
    return pl.concat(rows, how="diagonal_relaxed")
