"""The `relmas` command line: one subcommand per pipeline stage.

This module parses the command line and dispatches each subcommand to its stage's module, which
loads and validates its inputs, calls the library, writes its output atomically and logs one
MLflow run. Bad input of any kind ends with one line on stderr naming the file, the key and what
was expected, and exit status 2. The stages are imported only when their subcommand runs: the
Snakefile imports `load_configs` from here while it plans the DAG, without Numba or torch.
"""

from __future__ import annotations

import argparse
import errno
import fnmatch
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from relmas import arguments, catalog
from relmas.command import load_configs
from relmas.errors import InputError
from relmas.paths import ResultPaths

POLICY_HELP = 'a policy name of relmas.catalog (docs/design.md, "Policies")'


def _run_stage(args: argparse.Namespace) -> None:
    """Run subcommand `args.command`: its stage's function, imported only now."""
    match args.command:
        case "zoo":
            from relmas.zoo_stage import zoo_command as command
        case "profile":
            from relmas.profile_stage import profile_command as command
        case "workload":
            from relmas.workload_stage import workload_command as command
        case "keeper":
            from relmas.rl.keeping import keeper_command as command
        case "train":
            from relmas.rl.run import train_command as command
        case "validate":
            from relmas.evaluate_stage import validate_command as command
        case "bound":
            from relmas.ceiling.stage import bound_command as command
        case "evaluate":
            from relmas.evaluate_stage import evaluate_command as command
        case "sweep":
            from relmas.sweep import sweep_command as command
        case "report":
            from relmas.report_stage import report_command as command
        case "simulate":
            from relmas.evaluate_stage import simulate_command as command
        case "recover":
            from relmas.recover import recover_command as command
    command(args)


def build_parser() -> argparse.ArgumentParser:
    parser = arguments.Parser(
        prog="relmas",
        description="Multi-tenant DNN scheduling on heterogeneous multi-accelerators.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_build_commands(sub)
    _add_ceiling_commands(sub)
    _add_run_commands(sub)
    return parser


COSTS_HELP = "directory of cost tables {accelerator}.parquet (default: the config's results:)"

# Options whose default lies under the config's results directory (`results:`), by command: filled
# in once the config is read (relmas.paths.ResultPaths), so that a command run by hand finds the
# files of the study it is given.
RESULT_DEFAULTS: dict[str, dict[str, Callable[[ResultPaths], Any]]] = {
    "workload": {"costs": lambda paths: paths.costs_dir},
    "keeper": {"costs": lambda paths: paths.costs_dir},
    "train": {"costs": lambda paths: paths.costs_dir},
    "evaluate": {
        "costs": lambda paths: paths.costs_dir,
        "jobs": lambda paths: str(paths.workload("{scenario}", "{seed}")),
    },
    "bound": {
        "costs": lambda paths: paths.costs_dir,
        "jobs": lambda paths: str(paths.workload("{scenario}", "{seed}")),
    },
    "sweep": {"costs": lambda paths: paths.costs_dir},
    "validate": {"costs": lambda paths: paths.costs_dir},
    "report": {
        "eval": lambda paths: paths.eval_dir,
        "costs": lambda paths: paths.costs_dir,
        "workloads": lambda paths: paths.workloads_dir,
        "validation": lambda paths: paths.validation_dir,
        "sweeps": lambda paths: paths.sweeps_dir,
        "agents": lambda paths: paths.agents_dir,
        "bounds": lambda paths: paths.bounds_dir,
        "out": lambda paths: paths.report_dir,
    },
}


def _fill_result_defaults(args: argparse.Namespace) -> None:
    """Set the options of RESULT_DEFAULTS left out on the command line from the config's root."""
    missing = {
        dest: default
        for dest, default in RESULT_DEFAULTS.get(args.command, {}).items()
        if getattr(args, dest) is None
    }
    if missing:
        paths = ResultPaths.of(load_configs(args.config))
        for dest, default in missing.items():
            setattr(args, dest, default(paths))


def _command(sub: Any, name: str, help: str) -> argparse.ArgumentParser:
    sp = sub.add_parser(name, help=help, description=help)
    sp.set_defaults(func=_run_stage)
    return sp


def _config_arg(sp: argparse.ArgumentParser, required: bool = True) -> None:
    sp.add_argument(
        "--config",
        action="append",
        required=required,
        metavar="C",
        help="config YAML (repeat to merge several, later ones win)",
    )


def _seeds_arg(sp: argparse.ArgumentParser, seed: str) -> None:
    """The repeatable `--seed` of a command that runs on several traces."""
    sp.add_argument(
        "--seed", required=True, type=arguments.seed, action="append", help=f"{seed} (repeatable)"
    )


def _add_build_commands(sub: Any) -> None:
    """The stages that build the study's inputs: zoo, profile, workload, keeper, train."""
    zoo = _command(sub, "zoo", "extract the layer table of the configured models")
    _config_arg(zoo)
    zoo.add_argument("--out", required=True, type=Path, help="layer table Parquet to write")

    profile = _command(sub, "profile", "cost table of one accelerator for the layer table")
    profile.add_argument("--layers", required=True, type=Path, help="layer table Parquet")
    target = profile.add_mutually_exclusive_group(required=True)
    target.add_argument("--accelerator", metavar="NAME", help="an accelerator of the config")
    target.add_argument("--spec", type=Path, help="an accelerator spec in its own YAML file")
    _config_arg(profile, required=False)
    profile.add_argument("--objective", choices=("latency", "energy", "edp"), help="override")
    profile.add_argument(
        "--pieces",
        action="store_true",
        help="cost the layers cut into pieces (config resizing:): {accelerator}.pieces.parquet",
    )
    profile.add_argument("--out", required=True, type=Path, help="cost table Parquet to write")

    workload = _command(sub, "workload", "the job traces of a scenario's seeds")
    _config_arg(workload)
    workload.add_argument("--scenario", required=True, help="a scenario of the config")
    _seeds_arg(workload, "trace seed")
    workload.add_argument("--costs", type=Path, help=COSTS_HELP)
    workload.add_argument(
        "--out", required=True, help="job trace Parquet to write ('{seed}' with several seeds)"
    )

    keeper = _command(sub, "keeper", "learn which jobs a scenario's agents give up")
    _config_arg(keeper)
    keeper.add_argument("--scenario", required=True, help="a scenario of the config")
    keeper.add_argument("--costs", type=Path, help=COSTS_HELP)
    keeper.add_argument(
        "--validation",
        required=True,
        type=Path,
        help="the scenario's validation rows (relmas validate): the keeper's rule is read there",
    )
    keeper.add_argument("--out", required=True, type=Path, help="keeper JSON to write")

    train = _command(sub, "train", "train the RELMAS agent of one scenario")
    _config_arg(train)
    train.add_argument("--scenario", required=True, help="a scenario of the config")
    train.add_argument("--costs", type=Path, help=COSTS_HELP)
    train.add_argument("--out", required=True, type=Path, help="agent directory to write")
    train.add_argument(
        "--validation",
        type=Path,
        help="the scenario's validation rows (relmas validate): the reference baseline and its "
        "placement are read there (needed with training.observation.reference: best)",
    )
    train.add_argument(
        "--keeper",
        type=Path,
        help="the scenario's keeper (relmas keeper; with training.keeper.traces > 0): learned "
        "here without it",
    )
    # an interrupted training resumes from last.pt and the replay buffer: keep them on failure
    train.set_defaults(keep_partial=True)
    train.add_argument(
        "--fresh", action="store_true", help="start over instead of resuming from OUT/last.pt"
    )
    train.add_argument(
        "--policy",
        default=catalog.learned()[0],
        choices=catalog.learned(),
        help="a learned policy (relmas.catalog); a resizing one's actions also cut layers (needs "
        "the piece tables)",
    )


def _add_ceiling_commands(sub: Any) -> None:
    """The stages that score a scenario's traces beside the evaluation: validate, bound."""
    validate = _command(sub, "validate", "every online baseline on a scenario's validation traces")
    _config_arg(validate)
    validate.add_argument("--scenario", required=True, help="a scenario of the config")
    validate.add_argument("--costs", type=Path, help=COSTS_HELP)
    validate.add_argument(
        "--out", required=True, type=Path, help="summary rows Parquet to write (one per run)"
    )

    bound = _command(sub, "bound", "a proven upper bound on the deadlines met of each trace")
    _config_arg(bound)
    bound.add_argument("--scenario", required=True, help="a scenario of the config")
    _seeds_arg(bound, "a trace's seed")
    bound.add_argument(
        "--jobs",
        help="trace path template (default: the study's trace of {scenario}, {seed}; "
        "'{seed}' with several seeds)",
    )
    bound.add_argument("--costs", type=Path, help=COSTS_HELP)
    bound.add_argument(
        "--out",
        required=True,
        help="the row's Parquet file to write ('{seed}' with several seeds)",
    )


PLACEMENTS_HELP = (
    "the scenario's validation rows (relmas validate), whose placement of each rule and "
    "target-aware baseline it runs with (default: the whole system)"
)


def _add_run_commands(sub: Any) -> None:
    """The stages that run policies and report: evaluate, sweep, report, simulate."""
    evaluate = _command(sub, "evaluate", "run policies on a scenario's traces")
    _config_arg(evaluate)
    evaluate.add_argument("--scenario", required=True, help="a scenario of the config")
    evaluate.add_argument(
        "--policy", required=True, action="append", help=f"{POLICY_HELP} (repeatable)"
    )
    _seeds_arg(evaluate, "trace seed")
    evaluate.add_argument(
        "--out",
        required=True,
        help="per-job results Parquet ('{seed}' with several seeds, '{policy}' with several "
        "policies)",
    )
    evaluate.add_argument(
        "--jobs",
        help="job trace path template (default: workloads/{scenario}/seed{seed}.parquet under "
        "the config's results:)",
    )
    evaluate.add_argument("--costs", type=Path, help=COSTS_HELP)
    evaluate.add_argument("--agent", type=Path, help="a trained RELMAS agent directory")
    evaluate.add_argument(
        "--placements",
        type=Path,
        help=PLACEMENTS_HELP + "; with an --agent trained on another scenario, they choose whether "
        "it runs as trained or re-aimed at the scenario's best rule (docs/relmas.md)",
    )
    evaluate.add_argument(
        "--gantt",
        type=Path,
        help="also write the first seed's Gantt chart (its first jobs) here ('{policy}' with "
        "several policies)",
    )

    sweep = _command(sub, "sweep", "every policy but ga_offline at one point of a sweep")
    _config_arg(sweep)
    sweep.add_argument("--sweep", required=True, help="a sweep of the config (sweeps:)")
    sweep.add_argument(
        "--value", required=True, type=arguments.finite, help="the swept parameter's value"
    )
    sweep.add_argument("--costs", type=Path, help=COSTS_HELP)
    sweep.add_argument(
        "--agents", type=Path, help="the base scenario's agents: one directory per learned policy"
    )
    sweep.add_argument("--placements", type=Path, help=PLACEMENTS_HELP)
    sweep.add_argument(
        "--evaluations",
        type=Path,
        help="at the base scenario's own value only, with --bounds: the evaluations dir whose "
        "summaries of the base scenario are the point's rows (not run again)",
    )
    sweep.add_argument(
        "--bounds", type=Path, help="with --evaluations: the bounds dir of the point's ceilings"
    )
    sweep.add_argument("--out", required=True, type=Path, help="summary rows Parquet to write")

    report = _command(sub, "report", "summary.parquet, figures and report.md of a study")
    _config_arg(report)
    # defaults: the directories under the config's results: (RESULT_DEFAULTS)
    report.add_argument("--eval", type=Path, help="evaluation results dir")
    report.add_argument("--costs", type=Path, help=COSTS_HELP)
    report.add_argument("--workloads", type=Path, help="job traces dir")
    report.add_argument(
        "--validation",
        type=Path,
        help="the baselines' validation rows ({scenario}.parquet), which choose the best baseline",
    )
    report.add_argument("--sweeps", type=Path, help="sweeps dir")
    report.add_argument("--agents", type=Path, help="agents dir (learning curves)")
    report.add_argument("--bounds", type=Path, help="the traces' ceilings dir (relmas bound)")
    report.add_argument("--out", type=Path, help="report dir")

    simulate = _command(sub, "simulate", "run one policy on any job trace and cost tables")
    simulate.add_argument("--system", required=True, type=Path, help="SYSTEM.yaml")
    simulate.add_argument("--jobs", required=True, type=Path, help="job trace Parquet")
    simulate.add_argument("--costs", required=True, type=Path, help=COSTS_HELP)
    simulate.add_argument("--policy", required=True, help=POLICY_HELP)
    simulate.add_argument(
        "--seed", type=arguments.seed, default=0, help="seed of randomised policies"
    )
    simulate.add_argument("--agent", type=Path, help="a trained RELMAS agent directory")
    simulate.add_argument("--out", required=True, type=Path, help="per-job results Parquet")

    recover = _command(
        sub,
        "recover",
        "after a kill: check the study's config, unlock the workflow and sweep relmas's temporary"
        " files under the study's results (--config: config/config.yaml in --dir, like snakemake)",
    )
    recover.add_argument("--dir", type=Path, default=Path("."), help="the project directory")
    _config_arg(recover, required=False)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand. Bad input and OS errors (a path that is a directory, a read-only
    filesystem, ...) end as one line on stderr and exit 2, and the failed command's outputs are
    removed (but for a training's checkpoints, which a rerun resumes from)."""
    args = build_parser().parse_args(argv)
    from relmas import io

    io.forget_outputs()
    try:
        _fill_result_defaults(args)
        args.func(args)
    except (InputError, OSError) as exc:
        if not getattr(args, "keep_partial", False):
            io.discard_outputs()
        error = exc if isinstance(exc, InputError) else _os_input_error(exc, args)
        print(f"relmas {args.command}: error: {error}", file=sys.stderr)
        return 2
    return 0


_EXPECTED = {
    errno.ENOENT: "an existing path",
    errno.EISDIR: "a file path, not a directory",
    errno.ENOTDIR: "a path whose parents are directories",
    errno.EEXIST: "a directory path, not an existing file",
    errno.EACCES: "a path this user may access",
    errno.EPERM: "a path this user may access",
    errno.EROFS: "a path on a writable filesystem",
    errno.ENOSPC: "a filesystem with free space",
    errno.ENAMETOOLONG: "a shorter path",
}


def _os_input_error(exc: OSError, args: argparse.Namespace) -> InputError:
    """An OSError as an InputError naming its file and the option that gave the path."""
    filename = exc.filename2 if exc.filename is None else exc.filename
    expected = _EXPECTED.get(exc.errno, "a usable path")
    return InputError(filename, _option_for(filename, args), expected, exc.strerror or str(exc))


def _option_for(filename: object, args: argparse.Namespace) -> str | None:
    """The option whose path is `filename`, contains it or lies under it (the closest one)."""
    if filename is None:
        return None
    path = os.path.abspath(os.fsdecode(filename))
    best: tuple[int, str] | None = None
    for name, value in vars(args).items():
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, str | Path) or name in ("command", "func"):
                continue
            given = os.path.abspath(str(item))
            pattern = given.replace("{seed}", "*").replace("{scenario}", "*")
            related = (
                fnmatch.fnmatchcase(path, pattern)
                or path.startswith(given + os.sep)
                or given.startswith(path + os.sep)
            )
            if related and (best is None or len(given) > best[0]):
                best = (len(given), "--" + name.replace("_", "-"))
    return best[1] if best else None
