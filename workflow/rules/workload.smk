rule workload:
    """Job traces of one scenario, one per evaluation seed: arrivals, tenants, deadlines from the
    cost tables. One job (one process) for all its seeds, one MLflow run per seed."""
    input:
        costs=scenario_costs,
        replay=scenario_trace_file,
    output:
        expand(str(PATHS.workload("{{scenario}}", "{seed}")), seed=EVAL_SEEDS),
    params:
        seeds=EVAL_SEED_ARGS,
        scenario=lambda wildcards: slice_of("scenarios", wildcards.scenario),
        system=slice_hash("system"),
        costs=lambda wildcards, input: Path(input.costs[0]).parent,
        # one trace per seed: the command fills in {seed}
        out=lambda wildcards: PATHS.workload(wildcards.scenario, "{seed}"),
    priority: 10  # seconds of work that every bound and evaluation of the scenario waits for
    log:
        PATHS.log("workload", "{scenario}"),
    benchmark:
        PATHS.benchmark("workload", "{scenario}")
    shell:
        "{RELMAS} workload {CONFIG_ARGS} --scenario {wildcards.scenario:q} {params.seeds}"
        " --costs {params.costs:q} --out {params.out:q} > {log:q} 2>&1"
