def bound_costs(wildcards):
    """The scenario's cost tables, and its piece tables when a resizing policy is evaluated: the
    ceiling must bound the schedules that cut layers too (and must not depend on whether the
    piece tables happen to exist yet)."""
    names = scenario_accelerators(wildcards.scenario)
    tables = [str(PATHS.costs(name)) for name in names]
    if set(CONFIG["evaluation"]["policies"]) & set(catalog.resizing()):
        tables += [str(PATHS.pieces(name)) for name in names]
    return tables


rule bound:
    """The ceiling of one evaluation trace: a proven upper bound on the deadlines any schedule
    meets (the relaxation of every trace; the exact search on small ones) and, where its jobs
    carry service targets, whether they are proven unreachable, with a proven lower bound on the
    shortfall (docs/ceiling.md)."""
    input:
        trace=PATHS.workload("{scenario}", "{seed}"),
        costs=bound_costs,
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
