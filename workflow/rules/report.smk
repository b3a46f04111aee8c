rule report:
    """summary.parquet, the figures and report.md of the whole study."""
    input:
        summaries=[
            f"{RESULTS}/eval/{scenario}/{policy}/seed{seed}.summary.parquet"
            for scenario, policy in EVAL_RUNS
            for seed in EVAL_SEEDS
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
    params:
        evaluation=slice_hash("evaluation", "scenarios", "system", "models"),
        # directories of the inputs and outputs above (results/eval/{scenario}/{policy}/...)
        eval=lambda wildcards, input: Path(input.summaries[0]).parents[2],
        costs=lambda wildcards, input: Path(input.costs[0]).parent,
        workloads=lambda wildcards, input: Path(input.traces[0]).parents[1],
        out=lambda wildcards, output: Path(output.markdown).parent,
    log:
        f"{RESULTS}/logs/report.log",
    benchmark:
        f"{RESULTS}/benchmarks/report.tsv"
    shell:
        "{RELMAS} report {CONFIG_ARGS} --eval {params.eval} --costs {params.costs}"
        " --workloads {params.workloads} --out {params.out} > {log} 2>&1"
