"""The `relmas` command line: one subcommand per pipeline stage.

Each subcommand is a thin layer over library functions: it loads and validates its inputs, calls the
library, writes its output atomically and logs one MLflow run. Bad input of any kind ends with one
line on stderr naming the file, the key and what was expected, and exit status 2.
"""

from __future__ import annotations

import argparse
import errno
import fnmatch
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from relmas import arguments, catalog
from relmas.errors import InputError
from relmas.paths import ResultPaths, cost_table, piece_table, summary_of

POLICY_HELP = 'a policy name of relmas.catalog (docs/design.md, "Policies")'


def load_configs(paths: Sequence[str]) -> dict[str, Any]:
    """Load one or several config files, merged left to right like Snakemake's `--configfile`.

    Also checks the scenarios that sweeps and generalisation pairs name, which relmas.config
    cannot (relmas.study, which plans them, may not import it): every command and the Snakefile
    refuse an unknown one alike, not only the stages that run them."""
    from relmas.config import merge_into, validate_config
    from relmas.study import generalisation_runs, sweep_points
    from relmas.yaml_load import load_yaml

    merged: dict[str, Any] = {}
    for path in paths:
        raw = load_yaml(path)
        if not isinstance(raw, Mapping):
            raise InputError(path, None, "a mapping of configuration keys", type(raw).__name__)
        merge_into(merged, raw)
    source = ", ".join(paths)
    config = validate_config(merged, source)
    generalisation_runs(config, source)
    sweep_points(config, source)
    return config


def check_distinct_outputs(
    inputs: Mapping[str, Iterable[str | Path | None]],
    outputs: Mapping[str, Iterable[str | Path | None]],
) -> None:
    """Refuse an output path that is one of the command's inputs or another of its outputs.

    Writing it would replace a file the command reads or writes, and the command would still
    succeed: a layer table replaced by its cost table, a trace by its results, results by a chart.
    Paths compare resolved (relative spellings, `..` and symbolic links lead to the same file),
    before anything is read or written. Both mappings go from the option that gave the paths (or
    what they are) to the paths; None stands for an option left out.
    """
    owners: dict[str, str] = {}
    for option, paths in inputs.items():
        for path in paths:
            if path is not None:
                owners.setdefault(os.path.realpath(path), option)
    for option, paths in outputs.items():
        for path in paths:
            if path is None:
                continue
            resolved = os.path.realpath(path)
            if resolved in owners:
                expected = f"a path that is not also {owners[resolved]} ({resolved})"
                raise InputError(path, option, expected)
            owners[resolved] = option


def _cost_inputs(costs: Path, accelerators: Iterable[str]) -> list[Path]:
    """A --costs directory and the tables a command may read in it (cost and piece tables)."""
    names = list(accelerators)
    return [costs, *(cost_table(costs, n) for n in names), *(piece_table(costs, n) for n in names)]


def _directory_inputs(directory: Path | None) -> list[Path]:
    """A directory read as a whole (a trained agent) and the files in it."""
    if directory is None or not directory.is_dir():
        return [directory] if directory is not None else []
    return [directory, *sorted(directory.iterdir())]


def cmd_zoo(args: argparse.Namespace) -> None:
    from relmas import tracking
    from relmas.config import config_hash
    from relmas.io import write_parquet

    config = load_configs(args.config)
    check_distinct_outputs({"--config": args.config}, {"--out": [args.out]})
    from relmas.zoo import layer_table, model_summary

    models = config["models"]
    with tracking.stage_run("zoo", config, params={"models": models}) as run:
        start = time.perf_counter()
        layers = layer_table(models, source=", ".join(args.config))
        seconds = time.perf_counter() - start
        write_parquet(layers, args.out, metadata={"relmas.models_hash": config_hash(models)})
        summary = model_summary(models, layers)
        for row in summary.iter_rows(named=True):
            name = row.pop("model")
            run.log_metrics({f"{name}.{key}": value for key, value in row.items()})
        run.log_metrics({"layers": layers.height, "extract_seconds": seconds})
        run.log_dict(summary.to_dict(as_series=False), "model_summary.json")
        run.log_input(layers, "layers", args.out, context="zoo")
        run.log_artifact(args.out)
    print(f"{layers.height} layers of {len(models)} models in {seconds:.2f} s -> {args.out}")


def cmd_profile(args: argparse.Namespace) -> None:
    from relmas import tracking
    from relmas.hw.spec import load_spec_file, parse_spec, spec_hash, spec_json
    from relmas.profile import (
        layers_hash,
        models_hash,
        profile_layers,
        profile_pieces,
        write_cost_table,
    )
    from relmas.schemas import LayerTable

    if args.spec is not None:
        config = None
        name, spec = load_spec_file(args.spec)
        objective = args.objective or "latency"
        from relmas.config import load_schema

        resizing = load_schema()["properties"]["resizing"]["default"]
    else:
        if not args.config or not args.accelerator:
            raise InputError(None, "--accelerator", "--accelerator NAME with --config, or --spec")
        config = load_configs(args.config)
        source = ", ".join(args.config)
        if args.accelerator not in config["accelerators"]:
            raise InputError(
                source,
                "accelerators",
                f"an entry named {args.accelerator!r} (one of {sorted(config['accelerators'])})",
            )
        name = args.accelerator
        spec = parse_spec(name, config["accelerators"][name], source)
        objective = args.objective or config["profile"]["objective"]
        resizing = config["resizing"]
    check_distinct_outputs(
        {"--layers": [args.layers], "--spec": [args.spec], "--config": args.config or []},
        {"--out": [args.out]},
    )
    from relmas.io import read_parquet

    layers = read_parquet(args.layers, LayerTable)
    digest = layers_hash(layers)
    models = models_hash(args.layers, config)  # the layer table's models: config, checked
    with tracking.stage_run(
        "profile",
        config,
        tags={"accelerator": name, "table": "pieces" if args.pieces else "costs"},
        params={
            "accelerator": name,
            "kind": spec.kind,
            "objective": objective,
            "spec": spec_hash(spec),
            **({"resizing": json.dumps(resizing, sort_keys=True)} if args.pieces else {}),
        },
    ) as run:
        if args.pieces:
            table, stats = profile_pieces(
                layers, name, spec, resizing["splits"], resizing["dims"], objective, args.layers
            )
        else:
            table, stats = profile_layers(layers, name, spec, objective, source=args.layers)
        resized = resizing if args.pieces else None
        write_cost_table(table, args.out, name, spec, digest, objective, resized, models)
        run.log_dict(json.loads(spec_json(spec)), "spec.json")
        run.log_metrics(stats)
        run.log_artifact(args.out)
    costed = f"{stats['layers']} layers"
    if args.pieces:
        costed = f"{stats['pieces']} pieces ({stats['layers']} distinct shapes)"
    print(
        f"{name}: {costed}, {stats['mappings_evaluated']} mappings "
        f"in {stats['seconds']:.2f} s -> {args.out}"
    )


def cmd_workload(args: argparse.Namespace) -> None:
    """The job trace of a scenario for each seed: per seed a Parquet file and an MLflow run, in
    one process (the pipeline writes a scenario's evaluation traces in one job)."""
    from relmas import tracking
    from relmas.io import write_parquet
    from relmas.study import Study

    config = load_configs(args.config)
    study = Study(config, ", ".join(args.config))
    scenario = config["scenarios"][study.check_scenario(args.scenario)]
    replay = f"scenarios.{args.scenario}.arrival.path"
    _check_repeated("--seed", args.seed, "seed", {"--out": args.out})
    outs = {seed: Path(_fill("--out", str(args.out), seed=seed)) for seed in args.seed}
    check_distinct_outputs(
        {
            "--config": args.config,
            "--costs": _cost_inputs(args.costs, study.system(args.scenario).accelerator_types),
            replay: [scenario["arrival"].get("path")],
        },
        {"--out": outs.values()},
    )
    for seed, jobs in study.traces(args.scenario, args.seed, args.costs).items():
        with tracking.stage_run(
            "workload",
            config,
            tags={"scenario": args.scenario, "seed": seed},
            params={"scenario": scenario, "seed": seed},
        ) as run:
            write_parquet(jobs, outs[seed], metadata={"relmas.scenario": args.scenario})
            span = float(jobs["arrival_s"].max() - jobs["arrival_s"].min())
            run.log_metrics(
                {
                    "jobs": jobs.height,
                    "span_s": span,
                    "arrival_rate_per_s": (jobs.height - 1) / span if span > 0 else 0.0,
                    "mean_window_s": float((jobs["deadline_s"] - jobs["arrival_s"]).mean()),
                }
            )
            run.log_input(jobs, f"{args.scenario}-seed{seed}", outs[seed], context="workload")
        print(f"{args.scenario} seed {seed}: {jobs.height} jobs over {span:.3f} s -> {outs[seed]}")


def cmd_train(args: argparse.Namespace) -> None:
    """Train the RELMAS agent of one scenario (`--policy relmas_resize`: one that also cuts
    layers); one MLflow run with its learning curves."""
    import polars as pl

    from relmas import tracking
    from relmas.figures.results import plot_learning_curves
    from relmas.progress import advance_to, progress
    from relmas.rl.curve import read_curve
    from relmas.rl.run import train_scenario
    from relmas.rl.settings import parse_training
    from relmas.study import Study

    config = load_configs(args.config)
    source = ", ".join(args.config)
    study = Study(config, source)
    system = study.system(study.check_scenario(args.scenario))
    check_distinct_outputs(
        {
            "--config": args.config,
            "--costs": _cost_inputs(args.costs, system.accelerator_types),
            "--validation": [args.validation] if args.validation else [],
        },
        {"--out": [args.out]},
    )
    settings = parse_training(config, source)
    bar = progress(settings.dqn.total_steps, f"train {args.scenario} {args.policy}", "step")
    with tracking.stage_run(
        "train",
        config,
        tags={"scenario": args.scenario, "policy": args.policy},
        params={"scenario": args.scenario, "policy": args.policy, "training": config["training"]},
    ) as run:
        baselines: dict[tuple[str, str], dict[str, Any]] = {}

        def logger(metrics: Mapping[str, float], step: int) -> None:
            own = {}
            for name, value in metrics.items():
                match = _BASELINE_METRIC.fullmatch(name)
                if match:  # a baseline policy's validation score: a table row, not a metric name
                    kind, policy, metric = match.groups()
                    row = baselines.setdefault((kind, policy), {"policy": policy, "kind": kind})
                    row[f"val_{metric}"] = value
                else:
                    own[name] = value
            run.log_metrics(own, step=step)
            advance_to(bar, step, own)

        result = train_scenario(
            config,
            args.scenario,
            args.out,
            args.costs,
            source=source,
            logger=logger,
            resume=not args.fresh,
            policy=args.policy,
            validation=args.validation,
        )
        bar.close()
        run.log_metrics(result.metrics())
        if baselines:
            table = pl.from_dicts(list(baselines.values()), infer_schema_length=None)
            run.log_table(table, "validation_baselines.json")
        for name in ("best.pt", "agent.json", "curve.parquet"):
            run.log_artifact(args.out / name, "agent")
        best = (result.reference, result.teachers_validation[result.reference])
        curve = read_curve(args.out / "curve.parquet")
        run.log_figure(
            plot_learning_curves(
                {f"{args.scenario}: {args.policy}": curve},
                {f"{args.scenario}: {args.policy}": best},
                {f"{args.scenario}: {args.policy}": args.policy},
            ),
            "learning_curve.png",
        )
    if result.restarted_because:
        print(
            f"{args.out}: trained afresh (settings changed since last.pt: "
            f"{', '.join(result.restarted_because)})"
        )
    print(
        f"{args.scenario}: {result.learner.steps} steps in {result.wall_seconds:.0f} s, "
        f"best validation {result.validation} at step {result.learner.best_step} -> {args.out}"
    )


# The validation scores of the baseline policies that rl.run logs beside the agent's own.
_BASELINE_METRIC = re.compile(r"val_(teacher)_([a-z0-9_]+?)_(sla_rate|shortfall)")


def cmd_evaluate(args: argparse.Namespace) -> None:
    """Policies on the traces of one scenario: per policy and seed a results file, per policy one
    MLflow run. Several policies share one process (the pipeline's batches of cheap baselines:
    relmas.study.EVALUATION_BATCHES), so that its start-up is paid once."""
    from relmas.evaluate import read_placements
    from relmas.paths import groups_of
    from relmas.study import Study

    config = load_configs(args.config)
    source = ", ".join(args.config)
    study = Study(config, source)
    study.check_scenario(args.scenario)
    seeds, policies = args.seed, args.policy
    _check_repeated("--seed", seeds, "seed", {"--out": args.out, "--jobs": args.jobs})
    _check_repeated("--policy", policies, "policy", {"--out": args.out, "--gantt": args.gantt})
    if len(policies) > 1 and args.agent:
        raise InputError(None, "--agent", "one --policy (the learned one) with an agent")
    for policy in policies:  # all of them before the first one writes its results
        if catalog.entry(policy) is None:
            raise InputError(
                None, "--policy", f"one of the policies {list(catalog.names())}", policy
            )
    _fill("--out", str(args.out), seed=0, policy="")
    _fill("--jobs", args.jobs, scenario=args.scenario, seed=0)
    system = study.system(args.scenario)
    outs = [
        _fill("--out", str(args.out), seed=seed, policy=policy)
        for policy in policies
        for seed in seeds
    ]
    check_distinct_outputs(
        {
            "--config": args.config,
            "--jobs": [_fill("--jobs", args.jobs, scenario=args.scenario, seed=s) for s in seeds],
            "--costs": _cost_inputs(args.costs, system.accelerator_types),
            "--agent": _directory_inputs(args.agent),
            "--placements": [args.placements] if args.placements else [],
        },
        {
            "--out": outs,
            "the summary of --out": map(summary_of, outs),
            "the service groups of --out": map(groups_of, outs),
            "--gantt": [
                args.gantt and _fill("--gantt", str(args.gantt), policy=p) for p in policies
            ],
        },
    )
    static_w = _checked_static_power(config, args.costs, system.accelerator_types, source)
    tables = study.costs(args.scenario, args.costs)  # read and checked once for every run
    placements = None
    if args.placements is not None:
        placements = read_placements(args.placements, args.scenario, system.accelerator_types)
    for policy in policies:
        _evaluate_policy(args, config, source, policy, static_w, tables, placements)


def _evaluate_policy(
    args: argparse.Namespace,
    config: Mapping[str, Any],
    source: str,
    policy: str,
    static_w: Mapping[str, float],
    tables: Any,
    placements: Mapping[str, str] | None,
) -> None:
    """One policy of `relmas evaluate` on every seed (the scenario's cost `tables`, the
    baselines' `placements` chosen on validation): its results files and its MLflow run."""
    import statistics

    import polars as pl

    from relmas import tracking
    from relmas.evaluate import (
        agent_scenario,
        evaluate_scenario,
        placement_option,
        policy_extra,
        summary_row,
        write_results,
    )
    from relmas.paths import groups_of
    from relmas.progress import progress
    from relmas.study import policy_options

    seeds = args.seed
    options = policy_options(config, policy)
    options |= placement_option(policy, placements, args.placements)
    if args.agent:
        options["agent"] = str(args.agent)
    trained_on = agent_scenario(policy, args.agent)
    tags = {"scenario": args.scenario, "policy": policy, "seeds": ",".join(map(str, seeds))}
    with tracking.stage_run(
        "evaluate",
        config,
        tags=tags | ({"agent_scenario": trained_on} if trained_on else {}),
        params={"scenario": args.scenario, "policy": policy, **options} | {"seeds": tags["seeds"]},
    ) as run:
        rows = []
        bar = progress(len(seeds), f"evaluate {args.scenario} {policy}", "seed")
        for index, seed in enumerate(seeds):
            out = Path(_fill("--out", str(args.out), seed=seed, policy=policy))
            record = index == 0  # the Gantt chart of the first seed
            result = evaluate_scenario(
                config,
                args.scenario,
                policy,
                seed,
                _fill("--jobs", args.jobs, scenario=args.scenario, seed=seed),
                args.costs,
                source=source,
                static_w=static_w,
                policy_options=options,
                record=record,
                tables=tables,
            )
            extra = policy_extra(policy, args.agent, result)
            write_results(
                result,
                out,
                summary_of(out),
                groups_of(out),
                scenario=args.scenario,
                seed=seed,
                extra=extra,
                agent_scenario=trained_on,
                placement=options.get("placement"),
            )
            row = summary_row(result, args.scenario, seed, extra).row(0, named=True)
            rows.append({"seed": seed} | _seed_values(row, result))
            run.log_artifact(out, "results")
            if record:
                gantt = args.gantt and Path(_fill("--gantt", str(args.gantt), policy=policy))
                _log_gantt(run, result, gantt, f"{args.scenario}, seed {seed}: {policy}")
            print(f"{args.scenario} {policy} seed {seed}: sla_rate {row['sla_rate']:.3f}")
            bar.update()
        bar.close()
        # the quantities every policy has, as means over the seeds (a service group's over the
        # seeds whose trace has jobs of it); each seed's values and the policy's own diagnostics
        # as a table (docs/tracking.md)
        names = dict.fromkeys(name for row in rows for name in row if shared(name))
        run.log_metrics({k: statistics.fmean(r[k] for r in rows if k in r) for k in names})
        run.log_table(pl.DataFrame(rows), "per_seed.json")


# What an evaluation logs of each service group: `achieved.<group>` beside `target.<group>`.
SERVICE_QUANTITIES = ("achieved", "target")


def _seed_values(row: Mapping[str, Any], result: Any) -> dict[str, float]:
    """One seed's numbers of an evaluation run: its summary `row`'s but the seed (none of a
    metric without a value), the SLA rate per tenant and each service group's achieved rate and
    target, named as MLflow metrics."""
    from relmas import tracking

    values = {k: v for k, v in row.items() if isinstance(v, int | float) and k != "seed"}
    for tenant, rate in result.sla_by_tenant.items():
        values[tracking.metric_name("sla_rate", tenant)] = rate
    for group in result.service.iter_rows(named=True):
        for quantity in SERVICE_QUANTITIES:
            values[tracking.metric_name(quantity, group["group"])] = group[quantity]
    return values


def shared(name: str) -> bool:
    """Whether a summary column is an outcome every policy has (SUMMARY_SCHEMA's numbers but the
    seed and the trace's job count, the SLA rate per tenant, and each service group's achieved
    rate and target): the metrics of an evaluation's MLflow run, so that the compare view of a
    scenario's runs shows `sla_rate` without scrolling, not among each policy's own diagnostics
    (those are in per_seed.json)."""
    from relmas.schemas import SUMMARY_SCHEMA

    numbers = {k for k, dtype in SUMMARY_SCHEMA.items() if dtype.is_numeric()} - {"seed", "jobs"}
    prefixes = tuple(f"{quantity}." for quantity in ("sla_rate", *SERVICE_QUANTITIES))
    return name in numbers or name.startswith(prefixes)


def _check_repeated(
    option: str, values: Sequence[object], field: str, templates: Mapping[str, object]
) -> None:
    """The values of a repeatable option (`--seed`, `--policy`): each once, and with several of
    them every path template given (option -> template, None when left out) names `{field}`, so
    that no output is written twice."""
    if len(set(values)) < len(values):
        raise InputError(None, option, f"each {field} once", " ".join(map(str, values)))
    if len(values) > 1:
        for flag, template in templates.items():
            if template is not None and "{" + field + "}" not in str(template):
                raise InputError(
                    None, flag, f"a path with '{{{field}}}' when several {option} are given"
                )


def _fill(option: str, template: str, **fields: object) -> str:
    """A path template of an option with its placeholders filled in (a stray brace is an error)."""
    try:
        return template.format(**fields)
    except (KeyError, IndexError, ValueError):
        names = ", ".join("{" + name + "}" for name in fields)
        raise InputError(
            None, option, f"a path whose only placeholders are {names}", template
        ) from None


# Jobs drawn in an evaluate run's Gantt chart: the first ones of the trace (a chart of a whole
# trace of 1,000 jobs takes minutes to draw and shows nothing).
GANTT_JOBS = 24


def _log_gantt(run: Any, result: Any, path: Path | None, title: str) -> None:
    """The schedule of the first GANTT_JOBS jobs as `gantt.png` of the run (and at `path`)."""
    import dataclasses
    import tempfile

    import polars as pl

    from relmas.figures.gantt import plot_gantt
    from relmas.io import copy_file

    first = result.jobs.sort("arrival_s").head(GANTT_JOBS)["job_id"]
    window = dataclasses.replace(
        result,
        jobs=result.jobs.filter(pl.col("job_id").is_in(first.implode())),
        timeline=result.timeline.filter(pl.col("job_id").is_in(first.implode())),
    )
    with tempfile.TemporaryDirectory() as tmp:
        chart = Path(tmp) / "gantt.png"
        plot_gantt(window, chart, title=f"{title}, first {GANTT_JOBS} jobs")
        run.log_artifact(chart)
        if path is not None:
            copy_file(chart, path)


def cmd_validate(args: argparse.Namespace) -> None:
    """Every online baseline on the validation traces of one scenario: the rows the report
    chooses the scenario's best baseline by. One MLflow run; the rates are a table, not metrics
    (a metric name never names a policy, docs/tracking.md)."""
    from relmas import tracking
    from relmas.evaluate import validation_simulations, validation_summaries
    from relmas.io import write_parquet
    from relmas.progress import progress
    from relmas.study import Study, baseline_policies

    config = load_configs(args.config)
    source = ", ".join(args.config)
    study = Study(config, source)
    system = study.system(study.check_scenario(args.scenario))
    check_distinct_outputs(
        {"--config": args.config, "--costs": _cost_inputs(args.costs, system.accelerator_types)},
        {"--out": [args.out]},
    )
    policies = baseline_policies(config, args.scenario)
    seeds = config["training"]["validation_seeds"]
    tags = {
        "scenario": args.scenario,
        "policies": ",".join(policies),
        "seeds": ",".join(map(str, seeds)),
    }
    with tracking.stage_run(
        "validate", config, tags=tags, params=tags, run_name=f"validate-{args.scenario}"
    ) as run:
        simulations = validation_simulations(config, args.scenario, len(system.accelerator_types))
        bar = progress(simulations, f"validate {args.scenario}", "simulation")

        def simulated(policy: str, seed: int, sla_rate: float) -> None:
            print(f"{args.scenario} {policy} validation seed {seed}: sla_rate {sla_rate:.3f}")
            bar.update()

        frame = validation_summaries(
            config, args.scenario, args.costs, source=source, progress=simulated
        )
        bar.close()
        write_parquet(frame, args.out)
        columns = ("policy", "placement", "seed", "sla_rate")
        run.log_table(frame.select(columns), "validation_baselines.json")
        run.log_artifact(args.out)
    print(f"validate {args.scenario}: {frame.height} runs -> {args.out}")


def cmd_bound(args: argparse.Namespace) -> None:
    """The ceiling of each given evaluation trace (relmas.ceiling): per seed one row and one
    MLflow run, in one process (the pipeline bounds a scenario's traces in one job)."""
    from relmas import tracking
    from relmas.ceiling.stage import trace_ceiling
    from relmas.io import write_parquet
    from relmas.study import Study

    config = load_configs(args.config)
    source = ", ".join(args.config)
    study = Study(config, source)
    study.check_scenario(args.scenario)
    seeds = args.seed
    _check_repeated("--seed", seeds, "seed", {"--out": args.out, "--jobs": args.jobs})
    jobs = {s: _fill("--jobs", args.jobs, scenario=args.scenario, seed=s) for s in seeds}
    outs = {s: _fill("--out", str(args.out), seed=s) for s in seeds}
    check_distinct_outputs(
        {
            "--config": args.config,
            "--jobs": jobs.values(),
            "--costs": _cost_inputs(args.costs, study.system(args.scenario).accelerator_types),
        },
        {"--out": outs.values()},
    )
    _check_profiled(config, args.costs, study.system(args.scenario).accelerator_types, source)
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
            f"{values['admission_met']} ({values['admission_s']:.1f} s){targets} -> {outs[seed]}"
        )


def cmd_sweep(args: argparse.Namespace) -> None:
    """One point of a sweep: every policy but ga_offline on the evaluation seeds, one MLflow run.

    One process and one run per point, not per policy: a job's start-up (imports, MLflow) costs
    more than the point's simulations. Each policy's means over the seeds go to a child run of the
    point's run, with the same metric names as an evaluate run (docs/tracking.md); the ceiling's
    mean SLA rate and seconds are the point's own metrics (`ceiling_sla_rate`, `ceiling_s`).
    """
    import polars as pl

    from relmas import tracking
    from relmas.ceiling.rows import CEILING, policy_rows
    from relmas.evaluate import read_placements
    from relmas.io import write_parquet
    from relmas.progress import progress
    from relmas.study import Study, point_label, relaxation_options, sweep_policies
    from relmas.sweep import point_config, run_sweep_point

    config = load_configs(args.config)
    source = ", ".join(args.config)
    changed = point_config(config, args.sweep, args.value, source)
    spec = config["sweeps"][args.sweep]
    system = Study(changed, source).system(spec["scenario"])
    agents = [] if args.agents is None else [args.agents]
    agents += [
        path for agent in agents for p in catalog.learned() for path in _directory_inputs(agent / p)
    ]
    base_runs = _base_runs(args, config, source)
    check_distinct_outputs(
        {
            "--config": args.config,
            "--costs": _cost_inputs(args.costs, system.accelerator_types),
            "--agents": agents,
            "--placements": [args.placements] if args.placements else [],
            "--evaluations": _directory_inputs(args.evaluations),
            "--bounds": _directory_inputs(args.bounds),
        },
        {"--out": [args.out]},
    )
    static_w = _checked_static_power(config, args.costs, system.accelerator_types, source)
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
    import polars as pl

    from relmas.ceiling.rows import CEILING, policy_rows

    numeric = [name for name, dtype in frame.schema.items() if dtype.is_numeric() and shared(name)]
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
    from relmas.sweep import require_base_value

    if (args.evaluations is None) != (args.bounds is None):
        missing = "--bounds" if args.bounds is None else "--evaluations"
        expected = "a directory (--evaluations and --bounds go together)"
        raise InputError(None, missing, expected, "none given")
    if args.evaluations is None:
        return None
    require_base_value(config, args.sweep, args.value, source)
    return args.evaluations, args.bounds


def cmd_simulate(args: argparse.Namespace) -> None:
    from relmas.evaluate import simulate_files
    from relmas.sim.system import load_system

    system = load_system(args.system)
    check_distinct_outputs(
        {
            "--system": [args.system],
            "--jobs": [args.jobs],
            "--costs": _cost_inputs(args.costs, system.accelerator_types),
            "--agent": _directory_inputs(args.agent),
        },
        {"--out": [args.out]},
    )
    static_w = _static_power(args.costs, system.accelerator_types)
    options = {"agent": str(args.agent)} if args.agent else {}
    result = simulate_files(
        args.system,
        args.jobs,
        args.costs,
        args.policy,
        args.out,
        seed=args.seed,
        static_w=static_w,
        policy_options=options,
    )
    metrics = result.metrics
    print(
        f"{args.policy}: {int(metrics['jobs'])} jobs, sla_rate {metrics['sla_rate']:.3f}, "
        f"makespan {metrics['makespan_s']:.4f} s -> {args.out}"
    )


def cmd_report(args: argparse.Namespace) -> None:
    from relmas import tracking
    from relmas.report import write_report

    config = load_configs(args.config)
    source = ", ".join(args.config)
    directories = ("eval", "costs", "workloads", "validation", "sweeps", "agents", "bounds")
    check_distinct_outputs(
        {"--config": args.config} | {f"--{name}": [getattr(args, name)] for name in directories},
        {"--out": [args.out]},
    )
    with tracking.stage_run("report", config, params={"evaluation": config["evaluation"]}) as run:
        made = write_report(
            config,
            source,
            args.eval,
            args.costs,
            args.workloads,
            args.out,
            sweeps_dir=args.sweeps,
            agents_dir=args.agents,
            validation_dir=args.validation,
            bounds_dir=args.bounds,
        )
        for path in made["figures"].values():
            run.log_artifact(path, "figures")
        for path in made["tables"]:
            run.log_artifact(path)
    print(f"report -> {args.out / 'report.md'}")


def _static_power(costs: Path, names: Sequence[str]) -> dict[str, float]:
    """Static power per accelerator from the spec recorded in its cost table (0 if hand-written).

    A missing table is left for the simulator's input checks, which name the system key.
    """
    from relmas.hw.spec import spec_from_json
    from relmas.io import read_metadata
    from relmas.profile import META_SPEC_JSON

    power = {}
    for name in names:
        path = cost_table(costs, name)
        recorded = read_metadata(path).get(META_SPEC_JSON) if path.is_file() else None
        power[name] = spec_from_json(recorded, path).static_w if recorded else 0.0
    return power


def _checked_static_power(
    config: Mapping[str, Any], costs: Path, names: Sequence[str], source: str
) -> dict[str, float]:
    """Static power of the configured specs, after `_check_profiled`."""
    from relmas.hw.spec import parse_spec

    _check_profiled(config, costs, names, source)
    return {name: parse_spec(name, config["accelerators"][name], source).static_w for name in names}


def _check_profiled(
    config: Mapping[str, Any], costs: Path, names: Sequence[str], source: str
) -> None:
    """Refuse a cost table not profiled from the configured spec of its accelerator, one written
    by hand too: evaluate, bound and sweep report their results as of the configured system (its
    static power, its accelerators)."""
    from relmas.profile import check_cost_tables

    check_cost_tables(costs, names, config, source, required=True)


def cmd_recover(args: argparse.Namespace) -> None:
    """Unlock the workflow and sweep the stale temporary files of the study's results after a
    kill, unless another instance runs. Loading the config first also checks it in one line before
    Snakemake reads it (`make run` and `make quick` call this first)."""
    from relmas.recover import DEFAULT_CONFIG, recover

    if not args.dir.is_dir():
        raise InputError(args.dir, "--dir", "an existing project directory")
    results = ResultPaths.of(load_configs(args.config or [str(args.dir / DEFAULT_CONFIG)])).root
    done = recover(args.dir, [results])
    if done.busy:
        pids = ", ".join(map(str, done.busy))
        print(f"recover: another instance works in {args.dir} (pid {pids}): nothing touched")
        return
    lock_note = "removed the stale Snakemake lock" if done.unlocked else "no Snakemake lock"
    print(f"recover: {lock_note}, swept {len(done.swept)} stale temporary file(s) in {results}")
    replay_bytes = sum(path.stat().st_size for path in done.replay_buffers)
    print(
        f"recover: {results} holds {done.on_disk / 1e6:.1f} MB, of which "
        f"{len(done.replay_buffers)} replay buffer(s) of unfinished trainings "
        f"{replay_bytes / 1e6:.1f} MB (a training deletes its own once it has ended)"
    )


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


def _command(sub: Any, name: str, func: Callable[[argparse.Namespace], None], help: str):
    sp = sub.add_parser(name, help=help, description=help)
    sp.set_defaults(func=func)
    return sp


def _config_arg(sp: argparse.ArgumentParser, required: bool = True) -> None:
    sp.add_argument(
        "--config",
        action="append",
        required=required,
        metavar="C",
        help="config YAML (repeat to merge several, later ones win)",
    )


def _add_build_commands(sub: Any) -> None:
    """The stages that build the study's inputs: zoo, profile, workload, train."""
    zoo = _command(sub, "zoo", cmd_zoo, "extract the layer table of the configured models")
    _config_arg(zoo)
    zoo.add_argument("--out", required=True, type=Path, help="layer table Parquet to write")

    profile = _command(
        sub, "profile", cmd_profile, "cost table of one accelerator for the layer table"
    )
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

    workload = _command(sub, "workload", cmd_workload, "the job traces of a scenario's seeds")
    _config_arg(workload)
    workload.add_argument("--scenario", required=True, help="a scenario of the config")
    workload.add_argument(
        "--seed",
        required=True,
        type=arguments.seed,
        action="append",
        help="trace seed (repeatable)",
    )
    workload.add_argument("--costs", type=Path, help=COSTS_HELP)
    workload.add_argument(
        "--out", required=True, help="job trace Parquet to write ('{seed}' with several seeds)"
    )

    train = _command(sub, "train", cmd_train, "train the RELMAS agent of one scenario")
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
    validate = _command(
        sub, "validate", cmd_validate, "every online baseline on a scenario's validation traces"
    )
    _config_arg(validate)
    validate.add_argument("--scenario", required=True, help="a scenario of the config")
    validate.add_argument("--costs", type=Path, help=COSTS_HELP)
    validate.add_argument(
        "--out", required=True, type=Path, help="summary rows Parquet to write (one per run)"
    )

    bound = _command(
        sub, "bound", cmd_bound, "a proven upper bound on the deadlines met of each trace"
    )
    _config_arg(bound)
    bound.add_argument("--scenario", required=True, help="a scenario of the config")
    bound.add_argument(
        "--seed",
        required=True,
        type=arguments.seed,
        action="append",
        help="a trace's seed (repeatable)",
    )
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
    evaluate = _command(sub, "evaluate", cmd_evaluate, "run policies on a scenario's traces")
    _config_arg(evaluate)
    evaluate.add_argument("--scenario", required=True, help="a scenario of the config")
    evaluate.add_argument(
        "--policy", required=True, action="append", help=f"{POLICY_HELP} (repeatable)"
    )
    evaluate.add_argument(
        "--seed",
        required=True,
        type=arguments.seed,
        action="append",
        help="trace seed (repeatable)",
    )
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
    evaluate.add_argument("--placements", type=Path, help=PLACEMENTS_HELP)
    evaluate.add_argument(
        "--gantt",
        type=Path,
        help="also write the first seed's Gantt chart (its first jobs) here ('{policy}' with "
        "several policies)",
    )

    sweep = _command(sub, "sweep", cmd_sweep, "every policy but ga_offline at one point of a sweep")
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

    report = _command(
        sub, "report", cmd_report, "summary.parquet, figures and report.md of a study"
    )
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

    simulate = _command(
        sub, "simulate", cmd_simulate, "run one policy on any job trace and cost tables"
    )
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
        cmd_recover,
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
