rule workload:
    """Job trace of one scenario and seed: arrivals, tenants, deadlines from the cost tables."""
    input:
        costs=scenario_costs,
        replay=scenario_trace_file,
    output:
        PATHS.workload("{scenario}", "{seed}"),
    params:
        scenario=lambda wildcards: slice_of("scenarios", wildcards.scenario),
        system=slice_hash("system"),
        costs=lambda wildcards, input: Path(input.costs[0]).parent,
    log:
        PATHS.log("workload", "{scenario}", "seed{seed}"),
    benchmark:
        PATHS.benchmark("workload", "{scenario}", "seed{seed}")
    shell:
        "{RELMAS} workload {CONFIG_ARGS} --scenario {wildcards.scenario:q} --seed {wildcards.seed}"
        " --costs {params.costs:q} --out {output:q} > {log:q} 2>&1"
