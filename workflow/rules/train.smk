rule train:
    """Train the RELMAS agent of one scenario on its training seeds (validated on others).

    Only best.pt, agent.json and curve.parquet are declared: Snakemake removes declared outputs
    before a job, so last.pt and the replay buffer of an interrupted training survive and the
    rerun resumes from them (last.pt also holds the learning curve, which it rewrites).
    """
    input:
        costs=scenario_costs,
    output:
        agent=f"{RESULTS}/agents/{{scenario}}/relmas/best.pt",
        info=f"{RESULTS}/agents/{{scenario}}/relmas/agent.json",
        curve=f"{RESULTS}/agents/{{scenario}}/relmas/curve.parquet",
    params:
        training=slice_hash("training"),
        scenario=lambda wildcards: slice_of("scenarios", wildcards.scenario),
        system=slice_hash("system"),
        costs=lambda wildcards, input: Path(input.costs[0]).parent,
        out=lambda wildcards, output: Path(output.agent).parent,
    threads: 1
    log:
        f"{RESULTS}/logs/train/{{scenario}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/train/{{scenario}}.tsv"
    shell:
        "{RELMAS} train {CONFIG_ARGS} --scenario {wildcards.scenario} --costs {params.costs}"
        " --out {params.out} > {log} 2>&1"
