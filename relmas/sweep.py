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
shows how much any schedule could still win at every point. The point at the base scenario's own
value (`base_value`) is the base scenario itself: its rows are the evaluation's summaries and the
bound stage's relaxations of the same traces (`base_point_rows`), not the same runs again.
Learned policies deploy the agent trained on the base scenario, without retraining per point:
the agent sees bandwidth only as shares of the system's capacity and load only through its queue,
so it runs at any point of a system with the same instances, and every point other than the
training one measures how well it holds up off its training distribution.
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import dataframely as dy
import polars as pl

from relmas import catalog
from relmas.ceiling.bound import relaxation_bound
from relmas.ceiling.instance import Instance
from relmas.ceiling.rows import CEILING, best_under, policy_rows, with_kinds
from relmas.ceiling.stage import BoundRows
from relmas.command import check_distinct_outputs, cost_inputs, directory_inputs, load_configs
from relmas.errors import InputError
from relmas.evaluate import (
    agent_scenario,
    placement_option,
    policy_extra,
    read_placements,
    shared_metric,
    simulate,
    summary_row,
)
from relmas.io import read_parquet, write_parquet
from relmas.paths import bound_file, evaluation_file, summary_of
from relmas.policies import make_policy
from relmas.profile import configured_static_power
from relmas.schemas import SummaryRows, nullable
from relmas.sim.times import MAX_TIME_S
from relmas.study import (
    Study,
    base_value,
    point_label,
    policy_options,
    relaxation_options,
    sweep_policies,
    sweep_scenario,
)

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


def require_base_value(
    config: Mapping[str, Any], sweep: str, value: float, source: str | Path | None = None
) -> None:
    """Refuse to read a point's rows from the base scenario's runs (`--evaluations`) at a value
    other than its own: they are another point's."""
    base = base_value(config, sweep, source)
    if value != base:
        raise InputError(
            source, "--evaluations", f"only at the base scenario's own value {base}", value
        )


def base_point_rows(
    config: Mapping[str, Any],
    sweep: str,
    eval_dir: str | Path,
    bounds_dir: str | Path,
    source: str | Path | None = None,
) -> tuple[list[pl.DataFrame], list[dict[str, Any]]]:
    """The policy rows and ceilings of the point at `base_value`, read from the base scenario's
    evaluation summaries (`eval_dir`, relmas evaluate) and bound rows (`bounds_dir`, relmas bound:
    the same relaxation with the same options as a point's) of the same traces."""
    base = sweep_scenario(config, sweep, source)
    rows, ceilings = [], []
    for seed in config["evaluation"]["seeds"]:
        runs = []
        for policy in sweep_policies(config, sweep):
            summary = summary_of(evaluation_file(eval_dir, base, policy, seed))
            runs.append(read_parquet(summary, SummaryRows, first=_of(summary, base, policy, seed)))
        path = bound_file(bounds_dir, base, seed)
        bound = read_parquet(path, BoundRows, max_rows=1, first=_of(path, base, None, seed))
        met, jobs = bound["relaxation_met"].item(), bound["jobs"].item()
        status, seconds = bound["relaxation_status"].item(), bound["relaxation_s"].item()
        trace = f"{base}, seed {seed}"
        ceilings.append(_ceiling_row(runs, trace, path, base, seed, jobs, met, status, seconds))
        rows += runs
    return rows, ceilings


def _of(path: Path, scenario: str, policy: str | None, seed: int) -> Callable[[pl.DataFrame], None]:
    """A check that the rows of `path` are `scenario`'s (and `policy`'s) on trace `seed`: a file
    of another run under the expected name is refused, not reused."""
    expected = {"scenario": scenario, "seed": seed} | ({} if policy is None else {"policy": policy})

    def check(frame: pl.DataFrame) -> None:
        for key, value in expected.items():
            found = frame[key].unique().to_list()
            if found != [value]:
                raise InputError(path, key, f"only {value!r} (the sweep's base point)", found)

    return check


def _ceiling_row(
    runs: list[pl.DataFrame],
    trace: str,
    source: Path | None,
    scenario: str,
    seed: int,
    jobs: int,
    met: int,
    status: str,
    seconds: float,
) -> dict[str, Any]:
    """The `ceiling` row of one trace: the relaxation's proven count `met` of its `jobs`, refused
    if one of the policies' `runs` on it met more (best_under: `trace` names it, `source` is the
    bound's file when the bound was read, not computed)."""
    best_under(pl.concat(runs, how="diagonal_relaxed"), met, trace, source)
    return {
        "scenario": scenario,
        "policy": CEILING,
        "seed": seed,
        "jobs": jobs,
        "sla_rate": met / jobs,
        "kind": CEILING,
        "ceiling_status": status,
        "ceiling_s": seconds,
    }


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
    base_runs: tuple[str | Path, str | Path] | None = None,
) -> pl.DataFrame:
    """Summary rows (SweepRows) of every sweep policy on every evaluation seed at one
    point, then one `ceiling` row per seed: the proven bound of that trace, refused if a policy
    met more. Learned policies load `agents_dir`/{policy} (the base scenario's agents); the
    rule and target-aware baselines take the base scenario's `placements` (`read_placements` of
    `placements_source`; none: the whole system).
    `progress(policy, seed, sla_rate)` is called after each simulation and each bound (policy
    `ceiling`). `base_runs` = (evaluation dir, bounds dir): the point is at `base_value`, and
    its rows are read from there (`base_point_rows`) instead of run again."""
    if base_runs is not None:
        require_base_value(config, sweep, value, source)
        rows, ceilings = base_point_rows(config, sweep, *base_runs, source)
        if progress is not None:
            for row in (*pl.concat(rows, how="diagonal_relaxed").iter_rows(named=True), *ceilings):
                progress(row["policy"], row["seed"], row["sla_rate"])
        return _point_frame(config, sweep, value, rows, ceilings)
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
        met, status, seconds = bound.met, bound.status, bound.seconds
        ceilings.append(
            _ceiling_row(runs, trace, None, base, seed, bound.jobs, met, status, seconds)
        )
        rows += runs
        if progress is not None:
            progress(CEILING, seed, bound.met / bound.jobs)
    return _point_frame(config, sweep, value, rows, ceilings)


def _point_frame(
    config: Mapping[str, Any],
    sweep: str,
    value: float,
    rows: list[pl.DataFrame],
    ceilings: list[dict[str, Any]],
) -> pl.DataFrame:
    """The point's SweepRows from its policy `rows` and `ceilings`."""
    spec = config["sweeps"][sweep]
    summary = pl.concat(rows, how="diagonal_relaxed")
    return with_kinds(summary, pl.DataFrame(ceilings)).with_columns(
        pl.lit(sweep, pl.String()).alias("sweep"),
        pl.lit(spec["parameter"], pl.String()).alias("parameter"),
        pl.lit(float(value), pl.Float64()).alias("value"),
    )


def sweep_command(args: argparse.Namespace) -> None:
    """One point of a sweep: every policy but ga_offline on the evaluation seeds, one MLflow run.

    One process and one run per point, not per policy: a job's start-up (imports, MLflow) costs
    more than the point's simulations. Each policy's means over the seeds go to a child run of the
    point's run, with the same metric names as an evaluate run (docs/tracking.md); the ceiling's
    mean SLA rate and seconds are the point's own metrics (`ceiling_sla_rate`, `ceiling_s`).
    """
    from relmas import tracking
    from relmas.progress import progress

    config = load_configs(args.config)
    source = ", ".join(args.config)
    changed = point_config(config, args.sweep, args.value, source)
    spec = config["sweeps"][args.sweep]
    system = Study(changed, source).system(spec["scenario"])
    agents = [] if args.agents is None else [args.agents]
    agents += [
        path for agent in agents for p in catalog.learned() for path in directory_inputs(agent / p)
    ]
    base_runs = _base_runs(args, config, source)
    check_distinct_outputs(
        {
            "--config": args.config,
            "--costs": cost_inputs(args.costs, system.accelerator_types),
            "--agents": agents,
            "--placements": [args.placements] if args.placements else [],
            "--evaluations": directory_inputs(args.evaluations),
            "--bounds": directory_inputs(args.bounds),
        },
        {"--out": [args.out]},
    )
    static_w = configured_static_power(config, args.costs, system.accelerator_types, source)
    placements = None
    if args.placements is not None:
        placements = read_placements(args.placements, spec["scenario"], system.accelerator_types)
    policies = sweep_policies(config, args.sweep)
    label = point_label(args.value)
    tags = {
        "scenario": spec["scenario"],
        "sweep": args.sweep,
        "parameter": spec["parameter"],
        "value": label,
        "policies": ",".join(policies),
        "seeds": ",".join(map(str, config["evaluation"]["seeds"])),
    }
    ceiling = {f"ceiling.{key}": value for key, value in relaxation_options(config).items()}
    with tracking.stage_run(
        "sweep",
        config,
        tags=tags,
        params={**tags, "agents": str(args.agents), **ceiling},
        run_name=f"sweep-{args.sweep}-{label}",
    ) as run:
        runs = (len(policies) + 1) * len(config["evaluation"]["seeds"])  # + each trace's bound
        bar = progress(runs, f"sweep {args.sweep} {label}", "run")

        def simulated(policy: str, seed: int, sla_rate: float) -> None:
            print(f"{args.sweep} {label} {policy} seed {seed}: sla_rate {sla_rate:.3f}", flush=True)
            bar.update()

        frame = run_sweep_point(
            config,
            args.sweep,
            args.value,
            args.costs,
            args.agents,
            placements=placements,
            placements_source=args.placements,
            static_w=static_w,
            source=source,
            progress=simulated,
            base_runs=base_runs,
        )
        bar.close()
        write_parquet(frame, args.out)
        _log_sweep_point(run, frame, f"sweep-{args.sweep}-{label}")
        run.log_artifact(args.out)
    runs = policy_rows(frame).height
    ceilings = frame.filter(pl.col("kind") == CEILING).height
    print(f"sweep {args.sweep} at {label}: {runs} runs, {ceilings} ceilings -> {args.out}")


def _log_sweep_point(run: Any, frame: Any, name: str) -> None:
    """A sweep point's MLflow run: the ceiling's mean SLA rate and seconds, and one child run
    `name`-{policy} per policy with its means over the seeds (docs/tracking.md)."""
    numeric = [
        name for name, dtype in frame.schema.items() if dtype.is_numeric() and shared_metric(name)
    ]
    bounds = frame.filter(pl.col("kind") == CEILING)
    run.log_metrics(
        {"ceiling_sla_rate": bounds["sla_rate"].mean(), "ceiling_s": bounds["ceiling_s"].mean()}
    )
    means = policy_rows(frame).group_by("policy", "placement", maintain_order=True)
    means = means.agg(pl.col(numeric).mean())
    for row in means.iter_rows(named=True):
        placed = {"placement": row["placement"]} if row["placement"] else {}
        run.log_child(
            f"{name}-{row['policy']}",
            tags={"policy": row["policy"]},
            params={"policy": row["policy"]} | placed,
            metrics={key: row[key] for key in numeric},
        )


def _base_runs(
    args: argparse.Namespace, config: Mapping[str, Any], source: str
) -> tuple[Path, Path] | None:
    """`relmas sweep`'s (--evaluations, --bounds), given together and only at the base value."""
    if (args.evaluations is None) != (args.bounds is None):
        missing = "--bounds" if args.bounds is None else "--evaluations"
        expected = "a directory (--evaluations and --bounds go together)"
        raise InputError(None, missing, expected, "none given")
    if args.evaluations is None:
        return None
    require_base_value(config, args.sweep, args.value, source)
    return args.evaluations, args.bounds
