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
    """The ceiling of each evaluation trace of one scenario: a proven upper bound on the deadlines
    any schedule meets (the relaxation of every trace; the exact search on small ones) and, where
    its jobs carry service targets, whether they are proven unreachable, with a proven lower bound
    on the shortfall (docs/ceiling.md). One job (one process) for the scenario's traces, a row
    and an MLflow run per trace."""
    input:
        traces=rules.workload.output,
        costs=bound_costs,
    output:
        expand(str(PATHS.bound("{{scenario}}", "{seed}")), seed=EVAL_SEEDS),
    params:
        seeds=EVAL_SEED_ARGS,
        scenario=lambda wildcards: slice_of("scenarios", wildcards.scenario),
        system=slice_hash("system"),
        ceiling=config_hash(CONFIG["evaluation"]["ceiling"]),
        costs=lambda wildcards, input: Path(input.costs[0]).parent,
        # one trace and one row per seed: the command fills in {seed}
        jobs=lambda wildcards: PATHS.workload(wildcards.scenario, "{seed}"),
        out=lambda wildcards: PATHS.bound(wildcards.scenario, "{seed}"),
    threads: CONFIG["evaluation"]["ceiling"]["threads"]
    priority: 5  # as a sweep point: minutes long, so before the short evaluation jobs
    log:
        PATHS.log("bound", "{scenario}"),
    benchmark:
        PATHS.benchmark("bound", "{scenario}")
    shell:
        "{RELMAS} bound {CONFIG_ARGS} --scenario {wildcards.scenario:q} {params.seeds}"
        " --jobs {params.jobs:q} --costs {params.costs:q} --out {params.out:q} > {log:q} 2>&1"
