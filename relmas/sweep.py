"""Sweeps: how every online policy's SLA rate moves as one parameter of one scenario moves.

Config `sweeps.<name> = {scenario, parameter, values}` (parameter `load`: the arrival load;
`dram_gbps`: the shared off-chip bandwidth). A *point* is the base scenario with that one value
changed, and its traces are the base scenario's with that one change:

- a load point generates the scenario at that load under the base scenario's name, so from the same
  random stream: the very same jobs, with arrival times rescaled (deadline windows unchanged);
- a bandwidth point replays the base scenario's own traces (arrival times and deadlines in seconds,
  as `relmas workload` writes them) on the system with that bandwidth. Regenerating them at that
  bandwidth would also move the arrivals and deadlines (both are defined from latencies at the
  system's bandwidth), and the curve would no longer show what bandwidth alone does to one workload.

A point runs every evaluated policy except the offline bound (`ga_offline`) on the evaluation
seeds, in one process, and proves the ceiling of each of those traces (the relaxation bound of
relmas.ceiling.bound, with `evaluation.ceiling`'s time limit and threads), so that a sweep's figure
shows how much any schedule could still win at every point. Learned policies deploy the agent
trained on the base scenario, without retraining per point: the agent sees bandwidth only as shares
of the system's capacity and load only through its queue, so it runs at any point of a system with
the same instances, and every point other than the training one measures how well it holds up off
its training distribution.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import dataframely as dy
import polars as pl

from relmas import catalog
from relmas.ceiling.bound import relaxation_bound
from relmas.ceiling.instance import Instance
from relmas.ceiling.rows import CEILING, best_under, with_kinds
from relmas.errors import InputError
from relmas.evaluate import (
    agent_scenario,
    placement_option,
    policy_extra,
    simulate,
    summary_row,
)
from relmas.policies import make_policy
from relmas.schemas import SummaryRows, nullable
from relmas.sim.times import MAX_TIME_S
from relmas.study import Study, policy_options, relaxation_options, sweep_policies, sweep_scenario

# The metrics of a policy's run that a ceiling row has not (it has a seed, jobs and SLA rate);
# antt and fairness too, but a run in which no job finished has none (SummaryRows' rule).
RUN_METRICS = (
    "stp",
    "utilization",
    "energy_j",
    "makespan_s",
    "decision_us",
    "dropped",
)


class SweepRows(SummaryRows):
    """`sweeps/{sweep}/{value}.parquet`: the summary rows of the sweep's policies at one point,
    then one `ceiling` row per trace (relmas.ceiling.rows), told apart by `kind`."""

    antt = nullable(SummaryRows.antt)
    stp = nullable(SummaryRows.stp)
    fairness = nullable(SummaryRows.fairness)
    utilization = nullable(SummaryRows.utilization)
    energy_j = nullable(SummaryRows.energy_j)
    makespan_s = nullable(SummaryRows.makespan_s)
    decision_us = nullable(SummaryRows.decision_us)
    dropped = nullable(SummaryRows.dropped)
    sweep = dy.String()
    parameter = dy.String()
    # a load or an off-chip bandwidth in GB/s: 2^20 GB/s is beyond any memory system
    value = dy.Float64(min_exclusive=0, max=2.0**20)
    kind = dy.String()  # the policy's catalog kind, or `ceiling` (relmas.ceiling.rows)
    ceiling_status = dy.String(nullable=True)  # the bound's status on the ceiling rows, else null
    # the bound's seconds on the ceiling rows, else null
    ceiling_s = dy.Float64(nullable=True, min=0, max=MAX_TIME_S)

    @dy.rule()
    def policy__metrics_unless_ceiling(cls) -> pl.Expr:
        """every run metric (stp, utilization, energy_j, makespan_s, decision_us, dropped) on a
        policy's row: nulls only on a ceiling row"""
        present = pl.all_horizontal(pl.col(name).is_not_null() for name in RUN_METRICS)
        return present | (pl.col("kind") == CEILING)

    @dy.rule()
    def antt__null_where_no_job_finished(cls) -> pl.Expr:
        """antt and fairness null exactly where no job finished (every one dropped), and on a
        ceiling row"""
        ceiling = pl.col("kind") == CEILING
        none_finished = ceiling | (pl.col("dropped") == pl.col("jobs"))
        undefined = [pl.col(name).is_null() == none_finished for name in ("antt", "fairness")]
        return pl.all_horizontal(undefined)


def point_config(
    config: Mapping[str, Any], sweep: str, value: float, source: str | Path | None = None
) -> dict[str, Any]:
    """A copy of `config` whose base scenario of `sweep` has its swept parameter set to `value`."""
    base = sweep_scenario(config, sweep, source)
    if not value > 0:
        raise InputError(source, "--value", "a positive number", value)
    spec = config["sweeps"][sweep]
    changed = copy.deepcopy(dict(config))
    scenario = changed["scenarios"][base]
    if spec["parameter"] == "load":
        scenario["arrival"]["load"] = value
    else:
        scenario["system"] = {**scenario.get("system", {}), "dram_gbps": value}
    return changed


def point_traces(
    config: Mapping[str, Any],
    sweep: str,
    value: float,
    costs_dir: str | Path,
    source: str | Path | None = None,
) -> dict[int, pl.DataFrame]:
    """The job trace of every evaluation seed at one point (see the module docstring)."""
    spec = config["sweeps"][sweep]
    base = spec["scenario"]
    workload = point_config(config, sweep, value, source) if spec["parameter"] == "load" else config
    return Study(workload, source).traces(base, config["evaluation"]["seeds"], costs_dir)


def run_sweep_point(
    config: Mapping[str, Any],
    sweep: str,
    value: float,
    costs_dir: str | Path,
    agents_dir: str | Path | None,
    *,
    placements: Mapping[str, str] | None = None,
    placements_source: str | Path | None = None,
    static_w: Mapping[str, float] | None = None,
    source: str | Path | None = None,
    progress: Callable[[str, int, float], None] | None = None,
) -> pl.DataFrame:
    """Summary rows (SweepRows) of every sweep policy on every evaluation seed at one
    point, then one `ceiling` row per seed: the proven bound of that trace, refused if a policy
    met more. Learned policies load `agents_dir`/{policy} (the base scenario's agents); the
    rule and target-aware baselines take the base scenario's `placements` (`read_placements` of
    `placements_source`; none: the whole system).
    `progress(policy, seed, sla_rate)` is called after each simulation and each bound (policy
    `ceiling`)."""
    point = Study(point_config(config, sweep, value, source), source)
    base = config["sweeps"][sweep]["scenario"]
    system = point.system(base)
    tables = point.costs(base, costs_dir)
    limits = relaxation_options(config)
    rows, ceilings = [], []
    for seed, jobs in point_traces(config, sweep, value, costs_dir, source).items():
        runs = []
        for policy in sweep_policies(config, sweep):
            options = policy_options(config, policy)
            options |= placement_option(policy, placements, placements_source)
            agent = None
            if policy in catalog.learned():
                if agents_dir is None:
                    raise InputError(source, "--agents", f"the agents directory of {base}")
                agent = Path(agents_dir) / policy
                options["agent"] = str(agent)
            chosen = make_policy(policy, seed=seed, source=source, key="policy", **options)
            result = simulate(system, jobs, tables, chosen, static_w=static_w)
            extra = policy_extra(policy, agent, result)
            trained_on = agent_scenario(policy, agent)
            placement = options.get("placement")
            runs.append(summary_row(result, base, seed, extra, trained_on, placement))
            if progress is not None:
                progress(policy, seed, float(result.metrics["sla_rate"]))
        bound = relaxation_bound(Instance.of(system, tables, jobs), **limits)
        trace = f"{base}, seed {seed} at {sweep} {value:g}"
        best_under(pl.concat(runs, how="diagonal_relaxed"), bound.met, trace)
        rows += runs
        ceilings.append(
            {
                "scenario": base,
                "policy": CEILING,
                "seed": seed,
                "jobs": bound.jobs,
                "sla_rate": bound.met / bound.jobs,
                "kind": CEILING,
                "ceiling_status": bound.status,
                "ceiling_s": bound.seconds,
            }
        )
        if progress is not None:
            progress(CEILING, seed, bound.met / bound.jobs)
    spec = config["sweeps"][sweep]
    summary = pl.concat(rows, how="diagonal_relaxed")
    return with_kinds(summary, pl.DataFrame(ceilings)).with_columns(
        pl.lit(sweep, pl.String()).alias("sweep"),
        pl.lit(spec["parameter"], pl.String()).alias("parameter"),
        pl.lit(float(value), pl.Float64()).alias("value"),
    )
