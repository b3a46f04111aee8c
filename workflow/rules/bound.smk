rule bound:
    """The ceiling of one evaluation trace: a proven upper bound on the deadlines any schedule
    meets (the relaxation of every trace; the exact search on small ones), docs/ceiling.md."""
    input:
        trace=PATHS.workload("{scenario}", "{seed}"),
        costs=scenario_costs,
    output:
        PATHS.bound("{scenario}", "{seed}"),
    params:
        scenario=lambda wildcards: slice_of("scenarios", wildcards.scenario),
        system=slice_hash("system"),
        ceiling=config_hash(CONFIG["evaluation"]["ceiling"]),
        costs=lambda wildcards, input: Path(input.costs[0]).parent,
    threads: CONFIG["evaluation"]["ceiling"]["threads"]
    log:
        PATHS.log("bound", "{scenario}", "seed{seed}"),
    benchmark:
        PATHS.benchmark("bound", "{scenario}", "seed{seed}")
    shell:
        "{RELMAS} bound {CONFIG_ARGS} --scenario {wildcards.scenario:q} --seed {wildcards.seed}"
        " --jobs {input.trace:q} --costs {params.costs:q} --out {output:q} > {log:q} 2>&1"
