"""The `bound` stage: the ceiling of one evaluation trace of a configured scenario, as one row.

The ceiling is the least of the proven upper bounds on the deadlines any schedule meets: the
relaxation's (every trace) and, on traces of at most `exact_max_jobs` jobs, the exact search's
(with its replayed schedule, a lower side). The LP's jobs served (relmas.ceiling.admission),
and the window search from them (relmas.ceiling.window_search), are another lower side, on every
trace. The report puts every policy between the best
schedule known and this ceiling. On a trace whose jobs carry service targets, the row also says
whether the targets are proven unreachable, with a proven lower bound on the shortfall
(relmas.ceiling.targets).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from importlib.metadata import version
from pathlib import Path
from typing import Any

import dataframely as dy
import polars as pl

from relmas.ceiling.admission import Admission, serve_lp_jobs
from relmas.ceiling.bound import Bound, relaxation_bound
from relmas.ceiling.exact import solve_exact
from relmas.ceiling.instance import Instance
from relmas.ceiling.targets import has_targets, shortfall_bound
from relmas.ceiling.window_search import configured_search
from relmas.command import (
    check_distinct_outputs,
    check_repeated,
    cost_inputs,
    fill_template,
    load_configs,
)
from relmas.evaluate import evaluation_inputs
from relmas.profile import check_profiled
from relmas.schemas import column_types
from relmas.sim.costs import CostTables
from relmas.sim.system import System
from relmas.sim.times import MAX_TIME_S
from relmas.study import Study, relaxation_options


def _count(**kwargs: Any) -> dy.Int64:
    return dy.Int64(min=0, **kwargs)


def _seconds(**kwargs: Any) -> dy.Float64:
    return dy.Float64(min=0, max=MAX_TIME_S, **kwargs)


class BoundRows(dy.Schema):
    """`bounds/{scenario}/seed{n}.parquet`: one row per (scenario, seed); exact_* are null where
    the trace is too large for the search, and the targets' columns where its jobs carry none."""

    scenario = dy.String()
    seed = dy.Int64(min=0)
    jobs = dy.Int64(min=1)
    ceiling_met = _count()  # the least proven upper bound on the deadlines met
    ceiling_sla = dy.Float64(min=0, max=1)  # ceiling_met / jobs
    relaxation_met = _count()
    # its certified LP value (relaxation_met is the floor): at most one deadline per job
    relaxation_value = dy.Float64(min=0)
    relaxation_status = dy.String()  # converged, time_limit, "solver: ..."
    relaxation_rounds = _count()
    relaxation_windows = _count()
    relaxation_s = _seconds()
    # deadlines met by the search's schedule, replayed in the engine
    exact_lower = _count(nullable=True)
    exact_upper = _count(nullable=True)
    exact_status = dy.String(nullable=True)  # optimal, or which model did not finish
    exact_s = _seconds(nullable=True)
    # the LP's jobs served (relmas.ceiling.admission): of `admitted`, chosen by the LP with the
    # share `admission_bandwidth` of the bandwidth, this many deadlines met (replayed on the
    # whole trace) by `admission_by` (rule@placement; null: the LP counts none)
    admitted = _count()
    admission_met = _count()
    admission_bandwidth = dy.Float64(min=0, max=1)
    admission_by = dy.String(nullable=True)
    admission_s = _seconds()
    # the window search (relmas.ceiling.window_search) from the LP's jobs served: deadlines met
    # (replayed; admission_met when it did not run or kept nothing), windows re-solved, kept and
    # closed, whether its last pass closed every window (null: not run, nothing to win)
    searched_met = _count()
    search_windows = _count()
    search_kept = _count()
    search_closed = _count()
    search_converged = dy.Bool(nullable=True)
    search_s = _seconds()
    # every schedule's `shortfall` (relmas.sim.service) is at least this
    shortfall_lower = dy.Float64(nullable=True, min=0, max=1)
    targets_reachable = dy.String(nullable=True)  # "unreachable" (proven) or "not proven"
    targets_status = dy.String(nullable=True)  # its relaxation's status, as relaxation_status
    targets_s = _seconds(nullable=True)
    solver = dy.String()

    @dy.rule()
    def ceiling_met__at_most_jobs(cls) -> pl.Expr:
        """0 <= ceiling_met <= jobs, and at most relaxation_met and exact_upper"""
        ceiling = pl.col("ceiling_met")
        upper = pl.col("exact_upper").fill_null(pl.col("jobs"))
        return (
            (ceiling <= pl.col("jobs")) & (ceiling <= pl.col("relaxation_met")) & (ceiling <= upper)
        )

    @dy.rule()
    def relaxation_value__at_most_jobs(cls) -> pl.Expr:
        """a certified LP value of at most jobs"""
        return pl.col("relaxation_value") <= pl.col("jobs")

    @dy.rule()
    def admission_met__at_most_ceiling(cls) -> pl.Expr:
        """admission_met <= ceiling_met: a schedule above a proven ceiling is a wrong bound"""
        return pl.col("admission_met") <= pl.col("ceiling_met")

    @dy.rule()
    def searched_met__between_served_and_ceiling(cls) -> pl.Expr:
        """admission_met <= searched_met <= ceiling_met: the search keeps only what meets more,
        and a schedule above a proven ceiling is a wrong bound"""
        searched = pl.col("searched_met")
        return (pl.col("admission_met") <= searched) & (searched <= pl.col("ceiling_met"))

    @dy.rule()
    def exact_lower__at_most_upper(cls) -> pl.Expr:
        """exact_lower <= exact_upper <= jobs, both null or neither"""
        lower, upper = pl.col("exact_lower"), pl.col("exact_upper")
        both = lower.is_null() == upper.is_null()
        return both & (lower.is_null() | ((lower <= upper) & (upper <= pl.col("jobs"))))


BOUND_SCHEMA = column_types(BoundRows)


def solvers() -> str:
    """The solvers behind every figure of a row, with their versions."""
    return f"HiGHS {version('highspy')}; OR-Tools CP-SAT {version('ortools')}"


def trace_ceiling(
    config: Mapping[str, Any],
    scenario: str,
    seed: int,
    jobs_path: str | Path,
    costs_dir: str | Path,
    *,
    source: str | Path | None = None,
) -> pl.DataFrame:
    """`relmas bound`: the row of the trace `jobs_path` of `scenario` (BOUND_SCHEMA)."""
    options = config["evaluation"]["ceiling"]
    system, tables, jobs = evaluation_inputs(Study(config, source), scenario, jobs_path, costs_dir)
    instance = Instance.of(system, tables, jobs)
    bound = relaxation_bound(instance, **relaxation_options(config))
    row: dict[str, Any] = {
        "scenario": scenario,
        "seed": seed,
        "jobs": bound.jobs,
        "relaxation_met": bound.met,
        "relaxation_value": bound.value,
        "relaxation_status": bound.status,
        "relaxation_rounds": bound.rounds,
        "relaxation_windows": bound.windows,
        "relaxation_s": bound.seconds,
        "solver": solvers(),
    }
    served = serve_lp_jobs(
        system,
        tables,
        jobs,
        bound,
        scales=options["admission_bandwidth"],
        **relaxation_options(config),
    )
    row |= {
        "admitted": served.admitted,
        "admission_met": served.met,
        "admission_bandwidth": served.scale,
        "admission_by": served.source,
        "admission_s": served.seconds,
    } | _searched(system, tables, jobs, bound, served, options)
    if has_targets(jobs):
        targets = shortfall_bound(instance, jobs, **relaxation_options(config))
        row |= {
            "shortfall_lower": targets.shortfall,
            "targets_reachable": targets.reachable,
            "targets_status": targets.status,
            "targets_s": targets.seconds,
        }
    ceiling = bound.met
    if (
        instance.n_jobs <= options["exact_max_jobs"]
        and instance.n_ops <= options["exact_max_layers"]
    ):
        exact = solve_exact(
            system,
            tables,
            jobs,
            time_limit_s=options["exact_time_limit_s"],
            threads=options["threads"],
            max_jobs=options["exact_max_jobs"],
            max_operations=options["exact_max_layers"],
            trace=str(jobs_path),
        )
        row |= {
            "exact_lower": exact.lower,
            "exact_upper": exact.upper,
            "exact_status": exact.status,
            "exact_s": exact.solve_s,
        }
        ceiling = min(ceiling, exact.upper)
    row |= {"ceiling_met": ceiling, "ceiling_sla": ceiling / bound.jobs}
    return pl.DataFrame([row], schema=BOUND_SCHEMA)


def _searched(
    system: System,
    tables: CostTables,
    jobs: pl.DataFrame,
    bound: Bound,
    served: Admission,
    options: Mapping[str, Any],
) -> dict[str, Any]:
    """The window search's columns of a row: from the LP's jobs served, for `search_s` seconds,
    where they meet fewer than the relaxation's bound (elsewhere nothing is left to win)."""
    if served.schedule is None or served.met >= bound.met or options["search_s"] == 0:
        return {
            "searched_met": served.met,
            "search_windows": 0,
            "search_kept": 0,
            "search_closed": 0,
            "search_converged": None,
            "search_s": 0.0,
        }
    searched = configured_search(system, tables, jobs, served.schedule, bound.shares, options)
    return {
        "searched_met": searched.met,
        "search_windows": searched.windows,
        "search_kept": searched.kept,
        "search_closed": searched.closed,
        "search_converged": searched.converged,
        "search_s": searched.seconds,
    }


def bound_command(args: argparse.Namespace) -> None:
    """The ceiling of each given evaluation trace (relmas.ceiling): per seed one row and one
    MLflow run, in one process (the pipeline bounds a scenario's traces in one job)."""
    from relmas import tracking
    from relmas.io import write_parquet

    config = load_configs(args.config)
    source = ", ".join(args.config)
    study = Study(config, source)
    study.check_scenario(args.scenario)
    seeds = args.seed
    check_repeated("--seed", seeds, "seed", {"--out": args.out, "--jobs": args.jobs})
    jobs = {s: fill_template("--jobs", args.jobs, scenario=args.scenario, seed=s) for s in seeds}
    outs = {s: fill_template("--out", str(args.out), seed=s) for s in seeds}
    check_distinct_outputs(
        {
            "--config": args.config,
            "--jobs": jobs.values(),
            "--costs": cost_inputs(args.costs, study.system(args.scenario).accelerator_types),
        },
        {"--out": outs.values()},
    )
    check_profiled(config, args.costs, study.system(args.scenario).accelerator_types, source)
    options = config["evaluation"]["ceiling"]
    for seed in seeds:
        tags = {"scenario": args.scenario, "seed": str(seed)}
        with tracking.stage_run(
            "bound",
            config,
            tags=tags,
            params=tags | {f"ceiling.{key}": value for key, value in options.items()},
            run_name=f"bound-{args.scenario}-{seed}",
        ) as run:
            row = trace_ceiling(config, args.scenario, seed, jobs[seed], args.costs, source=source)
            write_parquet(row, outs[seed])
            values = row.row(0, named=True)
            run.log_params(
                {"solver": values["solver"], "status": values["relaxation_status"]}
                | {
                    k: values[k]
                    for k in ("targets_reachable", "targets_status", "admission_by")
                    if values[k]
                }
            )
            run.log_metrics(
                {
                    k: float(v)
                    for k, v in values.items()
                    if isinstance(v, int | float) and k != "seed"
                }
            )
            run.log_artifact(outs[seed])
        targets = (
            f"; targets {values['targets_reachable']} (shortfall >= "
            f"{values['shortfall_lower']:.4f}, {values['targets_status']}, "
            f"{values['targets_s']:.1f} s)"
            if values["targets_reachable"]
            else ""
        )
        print(
            f"bound {args.scenario} seed {seed}: at most {values['ceiling_met']} of "
            f"{values['jobs']} deadlines ({values['relaxation_status']}, "
            f"{values['relaxation_s']:.1f} s), the LP's jobs served meet "
            f"{values['admission_met']} ({values['admission_s']:.1f} s), searched "
            f"{values['searched_met']} ({values['search_s']:.1f} s){targets} -> {outs[seed]}"
        )
