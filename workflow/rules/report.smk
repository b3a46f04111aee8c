rule report:
    """summary.parquet, the figures and report.md of the whole study."""
    input:
        summaries=[
            summary_of(PATHS.evaluation(scenario, policy, seed))
            for scenario, policy in EVAL_RUNS
            for seed in EVAL_SEEDS
        ],
        generalisation=[
            summary_of(PATHS.evaluation(scenario, policy, seed, agent=agent))
            for agent, scenario, policy in GENERALISATION_RUNS
            for seed in EVAL_SEEDS
        ],
        # every baseline's SLA rate on each scenario's validation traces (the best baseline's choice)
        validation=expand(rules.validate.output[0], scenario=CONFIG["scenarios"]),
        sweeps=[
            PATHS.sweep_point(sweep, point_label(value))
            for sweep, value in SWEEP_POINTS
        ],
        # learning curves and validation scores of the evaluated agents
        agents=[
            PATHS.agent(scenario, policy) / name
            for scenario, policy in EVAL_RUNS
            if policy in catalog.learned()
            for name in ("agent.json", "curve.parquet")
        ],
        costs=expand(str(PATHS.costs("{accelerator}")), accelerator=CONFIG["accelerators"]),
        traces=expand(
            str(PATHS.workload("{scenario}", "{seed}")),
            scenario=CONFIG["scenarios"],
            seed=EVAL_SEEDS,
        ),
    output:
        summary=report(
            PATHS.report_dir / "summary.parquet", caption="../report/summary.rst", category="Summary"
        ),
        markdown=PATHS.report_dir / "report.md",
        sla=report(
            PATHS.figure("sla_rate"),
            caption="../report/sla_rate.rst",
            category="Evaluation",
        ),
        gantt=report(
            PATHS.figure("gantt"), caption="../report/gantt.rst", category="Schedule"
        ),
        sweeps=[
            report(
                PATHS.figure(f"sweep_{sweep}"),
                caption="../report/sweep.rst",
                category="Sweeps",
                labels={"sweep": sweep, "parameter": spec["parameter"], "scenario": spec["scenario"]},
            )
            for sweep, spec in CONFIG["sweeps"].items()
        ],
        curves=[
            report(
                PATHS.figure("learning_curves"),
                caption="../report/learning_curves.rst",
                category="Training",
            )
        ]
        if any(policy in catalog.learned() for _, policy in EVAL_RUNS)
        else [],
    params:
        evaluation=slice_hash("evaluation", "scenarios", "system", "models"),
        # directories of the inputs and outputs above (results/eval/{scenario}/{policy}/...)
        eval=lambda wildcards, input: Path(input.summaries[0]).parents[2],
        costs=lambda wildcards, input: Path(input.costs[0]).parent,
        workloads=lambda wildcards, input: Path(input.traces[0]).parents[1],
        validation=lambda wildcards, input: Path(input.validation[0]).parent,
        # results/sweeps/{sweep}/{value}.parquet, results/agents/{scenario}/{policy}/... (if any)
        sweeps=lambda wildcards, input: (
            f"--sweeps {shlex.quote(str(Path(input.sweeps[0]).parents[1]))}"
            if input.sweeps
            else ""
        ),
        agents=lambda wildcards, input: (
            f"--agents {shlex.quote(str(Path(input.agents[0]).parents[2]))}"
            if input.agents
            else ""
        ),
        out=lambda wildcards, output: Path(output.markdown).parent,
    log:
        PATHS.log("report"),
    benchmark:
        PATHS.benchmark("report")
    shell:
        "{RELMAS} report {CONFIG_ARGS} --eval {params.eval:q} --costs {params.costs:q}"
        " --workloads {params.workloads:q} --validation {params.validation:q}"
        " {params.sweeps} {params.agents}"
        " --out {params.out:q} > {log:q} 2>&1"
