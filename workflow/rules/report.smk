rule report:
    """summary.parquet, the figures and report.md of the whole study."""
    input:
        summaries=[
            f"{RESULTS}/eval/{scenario}/{policy}/seed{seed}.summary.parquet"
            for scenario, policy in EVAL_RUNS
            for seed in EVAL_SEEDS
        ],
        generalisation=[
            f"{RESULTS}/eval/{scenario}/{policy}/from-{agent}/seed{seed}.summary.parquet"
            for agent, scenario, policy in GENERALISATION_RUNS
            for seed in EVAL_SEEDS
        ],
        sweeps=[
            f"{RESULTS}/sweeps/{sweep}/{point_label(value)}.parquet"
            for sweep, value in SWEEP_POINTS
        ],
        # learning curves and validation scores of the evaluated agents
        agents=[
            f"{RESULTS}/agents/{scenario}/{policy}/{name}"
            for scenario, policy in EVAL_RUNS
            if policy in LEARNED
            for name in ("agent.json", "curve.parquet")
        ],
        costs=expand(f"{RESULTS}/costs/{{accelerator}}.parquet", accelerator=CONFIG["accelerators"]),
        traces=expand(
            f"{RESULTS}/workloads/{{scenario}}/seed{{seed}}.parquet",
            scenario=CONFIG["scenarios"],
            seed=EVAL_SEEDS,
        ),
    output:
        summary=report(
            f"{RESULTS}/report/summary.parquet", caption="../report/summary.rst", category="Summary"
        ),
        markdown=f"{RESULTS}/report/report.md",
        sla=report(
            f"{RESULTS}/report/figures/sla_rate.png",
            caption="../report/sla_rate.rst",
            category="Evaluation",
        ),
        gantt=report(
            f"{RESULTS}/report/figures/gantt.png", caption="../report/gantt.rst", category="Schedule"
        ),
        sweeps=[
            report(
                f"{RESULTS}/report/figures/sweep_{sweep}.png",
                caption="../report/sweep.rst",
                category="Sweeps",
                labels={"sweep": sweep, "parameter": spec["parameter"], "scenario": spec["scenario"]},
            )
            for sweep, spec in CONFIG["sweeps"].items()
        ],
        curves=[
            report(
                f"{RESULTS}/report/figures/learning_curves.png",
                caption="../report/learning_curves.rst",
                category="Training",
            )
        ]
        if any(policy in LEARNED for _, policy in EVAL_RUNS)
        else [],
    params:
        evaluation=slice_hash("evaluation", "scenarios", "system", "models"),
        # directories of the inputs and outputs above (results/eval/{scenario}/{policy}/...)
        eval=lambda wildcards, input: Path(input.summaries[0]).parents[2],
        costs=lambda wildcards, input: Path(input.costs[0]).parent,
        workloads=lambda wildcards, input: Path(input.traces[0]).parents[1],
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
        f"{RESULTS}/logs/report.log",
    benchmark:
        f"{RESULTS}/benchmarks/report.tsv"
    shell:
        "{RELMAS} report {CONFIG_ARGS} --eval {params.eval:q} --costs {params.costs:q}"
        " --workloads {params.workloads:q} {params.sweeps} {params.agents}"
        " --out {params.out:q} > {log:q} 2>&1"
