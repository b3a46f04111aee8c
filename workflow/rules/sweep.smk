rule sweep:
    """One point of a sweep (relmas.sweep): the base scenario with one parameter changed, every
    policy but the offline bound and the planner (relmas.study.sweep_policies) on the evaluation
    seeds in one process and one MLflow run (a job's start-up costs more than the point's
    simulations), and each trace's proven ceiling (the relaxation bound, `evaluation.ceiling`);
    learned policies use the base scenario's agents.
    Traces are generated in the job, from the same generator as `relmas workload`. The point at
    the base scenario's own value reads the base scenario's evaluation and bounds instead: the same
    traces, policies and relaxation."""
    input:
        costs=sweep_costs,
        agents=sweep_agents,
        # the placement chosen for each rule and target-aware baseline on the base scenario
        placements=lambda wildcards: PATHS.validation(sweep_base(wildcards)),
        base_runs=sweep_base_runs,
    output:
        PATHS.sweep_point("{sweep}", "{value}"),
    params:
        # what a point depends on (not the other values: adding one runs only the new point)
        sweep=lambda wildcards: sweep_point_spec(wildcards.sweep),
        scenario=lambda wildcards: slice_of("scenarios", sweep_base(wildcards)),
        system=slice_hash("system"),
        # what a point reads of `evaluation:`: the seeds, the policies it runs with their options
        # (not the offline bound's or the planner's, which no point runs) and the relaxation's
        evaluation=lambda wildcards: config_hash(
            {
                "seeds": CONFIG["evaluation"]["seeds"],
                "options": {
                    policy: policy_options(CONFIG, policy)
                    for policy in sweep_policies(CONFIG, wildcards.sweep)
                },
                "ceiling": relaxation_options(CONFIG),
            }
        ),
        costs=lambda wildcards, input: Path(input.costs[0]).parent,
        # the base scenario's agents directory: results/agents/{scenario}/{policy}/best.pt
        agents=lambda wildcards, input: (
            f"--agents {shlex.quote(str(Path(input.agents[0]).parents[1]))}"
            if input.agents
            else ""
        ),
        base_runs=lambda wildcards, input: (
            f"--evaluations {shlex.quote(str(PATHS.eval_dir))}"
            f" --bounds {shlex.quote(str(PATHS.bounds_dir))}"
            if input.base_runs
            else ""
        ),
    priority: 5  # after the agents, before the short evaluation jobs (a point takes minutes)
    log:
        PATHS.log("sweep", "{sweep}", "{value}"),
    benchmark:
        PATHS.benchmark("sweep", "{sweep}", "{value}")
    shell:
        "{RELMAS} sweep {CONFIG_ARGS} --sweep {wildcards.sweep:q} --value {wildcards.value}"
        " --costs {params.costs:q} {params.agents} --placements {input.placements:q}"
        " {params.base_runs} --out {output:q} > {log:q} 2>&1"
