"""The stages that run policies on traces: `relmas evaluate` (a scenario's evaluation traces, per
policy its results files and one MLflow run), `relmas validate` (every online baseline on the
validation traces) and `relmas simulate` (one policy on any trace and cost tables).

Not in relmas.evaluate, the library they call: what they read, check, write and log is here.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from relmas import catalog, tracking
from relmas.command import (
    check_distinct_outputs,
    check_repeated,
    cost_inputs,
    directory_inputs,
    fill_template,
    load_configs,
)
from relmas.errors import InputError
from relmas.evaluate import (
    SERVICE_QUANTITIES,
    agent_scenario,
    best_placed,
    evaluate_scenario,
    placement_option,
    planned_rule,
    policy_extra,
    read_placements,
    shared_metric,
    simulate,
    simulate_files,
    summary_row,
    validation_simulations,
    validation_summaries,
    write_results,
)
from relmas.figures.contents import GANTT_JOBS
from relmas.io import copy_file, write_parquet
from relmas.paths import groups_of, summary_of
from relmas.policies import make_policy
from relmas.profile import configured_static_power, recorded_static_power
from relmas.progress import progress
from relmas.sim.system import load_system
from relmas.study import Study, baseline_policies, policy_options


def evaluate_command(args: argparse.Namespace) -> None:
    """Policies on the traces of one scenario: per policy and seed a results file, per policy one
    MLflow run. Several policies share one process (the pipeline's batches of cheap baselines:
    relmas.study.EVALUATION_BATCHES), so that its start-up is paid once."""
    config = load_configs(args.config)
    source = ", ".join(args.config)
    study = Study(config, source)
    study.check_scenario(args.scenario)
    seeds, policies = args.seed, args.policy
    check_repeated("--seed", seeds, "seed", {"--out": args.out, "--jobs": args.jobs})
    check_repeated("--policy", policies, "policy", {"--out": args.out, "--gantt": args.gantt})
    if len(policies) > 1 and args.agent:
        raise InputError(None, "--agent", "one --policy (the learned one) with an agent")
    for policy in policies:  # all of them before the first one writes its results
        if catalog.entry(policy) is None:
            raise InputError(
                None, "--policy", f"one of the policies {list(catalog.names())}", policy
            )
    fill_template("--out", str(args.out), seed=0, policy="")
    fill_template("--jobs", args.jobs, scenario=args.scenario, seed=0)
    system = study.system(args.scenario)
    outs = [
        fill_template("--out", str(args.out), seed=seed, policy=policy)
        for policy in policies
        for seed in seeds
    ]
    check_distinct_outputs(
        {
            "--config": args.config,
            "--jobs": [
                fill_template("--jobs", args.jobs, scenario=args.scenario, seed=s) for s in seeds
            ],
            "--costs": cost_inputs(args.costs, system.accelerator_types),
            "--agent": directory_inputs(args.agent),
            "--placements": [args.placements] if args.placements else [],
        },
        {
            "--out": outs,
            "the summary of --out": map(summary_of, outs),
            "the service groups of --out": map(groups_of, outs),
            "--gantt": [
                args.gantt and fill_template("--gantt", str(args.gantt), policy=p) for p in policies
            ],
        },
    )
    static_w = configured_static_power(config, args.costs, system.accelerator_types, source)
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
    seeds = args.seed
    options = policy_options(config, policy)
    options |= placement_option(policy, placements, args.placements)
    options |= planned_rule(policy, args.agent)
    if args.agent and policy not in catalog.planners():
        options["agent"] = str(args.agent)
    trained_on = agent_scenario(policy, args.agent)
    if trained_on not in (None, args.scenario):
        if args.placements is None:
            print(f"{args.scenario} {policy}: agent of {trained_on} as trained (no --placements)")
        else:
            options |= _foreign_deployment(config, source, policy, options, args, tables)
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
            out = Path(fill_template("--out", str(args.out), seed=seed, policy=policy))
            record = index == 0  # the Gantt chart of the first seed
            result = evaluate_scenario(
                config,
                args.scenario,
                policy,
                seed,
                fill_template("--jobs", args.jobs, scenario=args.scenario, seed=seed),
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
                gantt = args.gantt and Path(
                    fill_template("--gantt", str(args.gantt), policy=policy)
                )
                _log_gantt(run, result, gantt, f"{args.scenario}, seed {seed}: {policy}")
            print(f"{args.scenario} {policy} seed {seed}: sla_rate {row['sla_rate']:.3f}")
            bar.update()
        bar.close()
        # the quantities every policy has, as means over the seeds (a service group's over the
        # seeds whose trace has jobs of it); each seed's values and the policy's own diagnostics
        # as a table (docs/tracking.md)
        names = dict.fromkeys(name for row in rows for name in row if shared_metric(name))
        run.log_metrics({k: statistics.fmean(r[k] for r in rows if k in r) for k in names})
        run.log_table(pl.DataFrame(rows), "per_seed.json")


def _foreign_deployment(
    config: Mapping[str, Any],
    source: str,
    policy: str,
    options: Mapping[str, Any],
    args: argparse.Namespace,
    tables: Any,
) -> dict[str, str]:
    """The options of a learned `policy` whose agent was trained on another scenario, deployed
    on `args.scenario`: as trained or re-aimed at the scenario's best rule (`--placements`, its
    validation rows), whichever is better on its validation traces (`relmas.rl.travel`)."""
    from relmas.rl.travel import deployment_options

    study = Study(config, source)
    system = study.system(args.scenario)
    if not read_placements(args.placements, args.scenario, system.accelerator_types):
        print(f"{args.scenario} {policy}: as trained (no rule in {args.placements} to re-aim at)")
        return {}
    traces = study.validation_traces(args.scenario, args.costs)
    best_rule = best_placed(args.placements, args.scenario, system.accelerator_types)

    def score(extra: Mapping[str, str]) -> list[dict[str, Any]]:
        deployed = {seed: make_policy(policy, seed=seed, **options, **extra) for seed in traces}
        return [simulate(system, jobs, tables, deployed[s]).metrics for s, jobs in traces.items()]

    chosen = deployment_options(best_rule, score)
    print(f"{args.scenario} {policy}: agent of {args.agent} deployed {chosen or 'as trained'}")
    return chosen


def _seed_values(row: Mapping[str, Any], result: Any) -> dict[str, float]:
    """One seed's numbers of an evaluation run: its summary `row`'s but the seed (none of a
    metric without a value), the SLA rate per tenant and each service group's achieved rate and
    target, named as MLflow metrics."""
    values = {k: v for k, v in row.items() if isinstance(v, int | float) and k != "seed"}
    for tenant, rate in result.sla_by_tenant.items():
        values[tracking.metric_name("sla_rate", tenant)] = rate
    for group in result.service.iter_rows(named=True):
        for quantity in SERVICE_QUANTITIES:
            values[tracking.metric_name(quantity, group["group"])] = group[quantity]
    return values


def _log_gantt(run: Any, result: Any, path: Path | None, title: str) -> None:
    """The schedule of the first GANTT_JOBS jobs as `gantt.png` of the run (and at `path`)."""
    from relmas.figures.gantt import plot_gantt

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


def validate_command(args: argparse.Namespace) -> None:
    """Every online baseline on the validation traces of one scenario: the rows the report
    chooses the scenario's best baseline by. One MLflow run; the rates are a table, not metrics
    (a metric name never names a policy, docs/tracking.md)."""
    config = load_configs(args.config)
    source = ", ".join(args.config)
    study = Study(config, source)
    system = study.system(study.check_scenario(args.scenario))
    check_distinct_outputs(
        {"--config": args.config, "--costs": cost_inputs(args.costs, system.accelerator_types)},
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


def simulate_command(args: argparse.Namespace) -> None:
    system = load_system(args.system)
    check_distinct_outputs(
        {
            "--system": [args.system],
            "--jobs": [args.jobs],
            "--costs": cost_inputs(args.costs, system.accelerator_types),
            "--agent": directory_inputs(args.agent),
        },
        {"--out": [args.out]},
    )
    static_w = recorded_static_power(args.costs, system.accelerator_types)
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
