"""The `bound` stage: the ceiling of one evaluation trace of a configured scenario, as one row.

The ceiling is the least of the proven upper bounds on the deadlines any schedule meets: the
relaxation's (every trace) and, on traces of at most `exact_max_jobs` jobs, the exact search's
(with its replayed schedule, the lower side). The report puts every policy between the best
schedule known and this ceiling. On a trace whose jobs carry service targets, the row also says
whether the targets are proven unreachable, with a proven lower bound on the shortfall
(relmas.ceiling.targets).
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import version
from pathlib import Path
from typing import Any

import polars as pl

from relmas.ceiling.bound import relaxation_bound
from relmas.ceiling.exact import solve_exact
from relmas.ceiling.instance import Instance
from relmas.ceiling.targets import has_targets, shortfall_bound
from relmas.evaluate import load_job_trace
from relmas.study import Study, relaxation_options

# One row per (scenario, seed); exact_* are null where the trace is too large for the search, and
# the targets' columns where its jobs carry no target.
BOUND_SCHEMA: dict[str, pl.DataType] = {
    "scenario": pl.String(),
    "seed": pl.Int64(),
    "jobs": pl.Int64(),
    "ceiling_met": pl.Int64(),  # the least proven upper bound on the deadlines met
    "ceiling_sla": pl.Float64(),  # ceiling_met / jobs
    "relaxation_met": pl.Int64(),
    "relaxation_value": pl.Float64(),  # its certified LP value (relaxation_met is the floor)
    "relaxation_status": pl.String(),  # converged, time_limit, "solver: ..."
    "relaxation_rounds": pl.Int64(),
    "relaxation_windows": pl.Int64(),
    "relaxation_s": pl.Float64(),
    "exact_lower": pl.Int64(),  # deadlines met by the search's schedule, replayed in the engine
    "exact_upper": pl.Int64(),
    "exact_status": pl.String(),  # optimal, or which model did not finish
    "exact_s": pl.Float64(),
    # every schedule's `shortfall` (relmas.sim.service) is at least this
    "shortfall_lower": pl.Float64(),
    "targets_reachable": pl.String(),  # "unreachable" (proven) or "not proven"
    "targets_status": pl.String(),  # its relaxation's status, as relaxation_status
    "targets_s": pl.Float64(),
    "solver": pl.String(),
}


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
    study = Study(config, source)
    system = study.system(study.check_scenario(scenario))
    tables = study.costs(scenario, costs_dir)
    jobs = load_job_trace(jobs_path, tables)
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
