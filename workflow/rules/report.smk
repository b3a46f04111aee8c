rule report:
    """summary.parquet, the figures and report.md of the whole study."""
    input:
        summaries=[
            summary_of(PATHS.evaluation(scenario, policy, seed))
            for scenario, policy in EVAL_RUNS
            for seed in EVAL_SEEDS
        ],
        # each service group's achieved rate against its target, on the scenarios with targets
        groups=[
            groups_of(PATHS.evaluation(scenario, policy, seed))
            for scenario, policy in EVAL_RUNS
            if scenario in TARGET_SCENARIOS
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
        # learning curves and validation scores of the evaluated agents (best.pt: the Gantt chart)
        agents=[
            PATHS.agent(scenario, policy) / name
            for scenario, policy in EVAL_RUNS
            if policy in catalog.learned()
            for name in ("agent.json", "curve.parquet", "best.pt")
        ],
        # the ceiling of every evaluation trace (the report's "how much was left to win")
        bounds=expand(rules.bound.output, scenario=CONFIG["scenarios"]),
        costs=expand(str(PATHS.costs("{accelerator}")), accelerator=CONFIG["accelerators"]),
        traces=expand(
            str(PATHS.workload("{scenario}", "{seed}")),
            scenario=CONFIG["scenarios"],
            seed=EVAL_SEEDS,
        ),
    output:
        summary=report(
            PATHS.report_dir / "summary.parquet", caption="../report/summary.rst", category="Tables"
        ),
        markdown=PATHS.report_dir / "report.md",
        # report.md as HTML, its figures inlined: the tables in `snakemake --report`
        html=report(
            PATHS.report_dir / "report.html",
            caption="../report/report_md.rst",
            category="Tables",
            labels={"table": "report.md"},
        ),
        sweeps=[PATHS.report_dir / "sweeps.parquet"] if CONFIG["sweeps"] else [],
        # every figure the report draws (relmas.figures.contents), each in Snakemake's report
        figures=[
            report(
                PATHS.figure(figure.name),
                caption=f"../report/{figure.caption}.rst",
                category=figure.category,
                labels=figure.labels,
            )
            for figure in report_figures(CONFIG)
        ],
    params:
        evaluation=slice_hash("evaluation", "scenarios", "system", "models"),
        # directories of the inputs and outputs above (results/eval/{scenario}/{policy}/...)
        eval=lambda wildcards, input: Path(input.summaries[0]).parents[2],
        costs=lambda wildcards, input: Path(input.costs[0]).parent,
        workloads=lambda wildcards, input: Path(input.traces[0]).parents[1],
        validation=lambda wildcards, input: Path(input.validation[0]).parent,
        bounds=lambda wildcards, input: Path(input.bounds[0]).parents[1],
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
        " --bounds {params.bounds:q}"
        " {params.sweeps} {params.agents}"
        " --out {params.out:q} > {log:q} 2>&1"
