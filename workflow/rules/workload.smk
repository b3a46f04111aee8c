rule workload:
    """Job trace of one scenario and seed: arrivals, tenants, deadlines from the cost tables."""
    input:
        costs=scenario_costs,
        replay=scenario_trace_file,
    output:
        f"{RESULTS}/workloads/{{scenario}}/seed{{seed}}.parquet",
    params:
        scenario=lambda wildcards: slice_of("scenarios", wildcards.scenario),
        system=slice_hash("system"),
        costs=lambda wildcards, input: Path(input.costs[0]).parent,
    log:
        f"{RESULTS}/logs/workload/{{scenario}}/seed{{seed}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/workload/{{scenario}}/seed{{seed}}.tsv"
    shell:
        "{RELMAS} workload {CONFIG_ARGS} --scenario {wildcards.scenario:q} --seed {wildcards.seed}"
        " --costs {params.costs:q} --out {output:q} > {log:q} 2>&1"
