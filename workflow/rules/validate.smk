rule validate:
    """Every online baseline on the validation traces of one scenario (the agents' validation
    traces, generated in the job): the rows the report chooses the scenario's best baseline by, so
    that the baseline learned policies are measured against is not picked on the evaluation
    traces, and the placement of each rule and target-aware baseline (`evaluation.placements`),
    which its evaluation and the sweeps then run with. Few, small traces: one job per scenario."""
    input:
        costs=baseline_costs,
        replay=scenario_trace_file,
    output:
        PATHS.validation("{scenario}"),
    params:
        scenario=lambda wildcards: slice_of("scenarios", wildcards.scenario),
        system=slice_hash("system"),
        # what it reads: the validation traces' settings, the baselines and their own options
        validation=lambda wildcards: config_hash(
            {
                "seeds": CONFIG["training"]["validation_seeds"],
                "jobs": CONFIG["training"]["jobs"],
                "placements": CONFIG["evaluation"]["placements"],
                "options": {
                    policy: policy_options(CONFIG, policy)
                    for policy in baseline_policies(CONFIG, wildcards.scenario)
                },
            }
        ),
        costs=lambda wildcards, input: Path(input.costs[0]).parent,
    # the first of each scenario's chain to its agents (validate, keeper, train): the whole chain
    # goes before the jobs that wait on nothing, so that no chain is left running alone at the end
    priority: 10
    log:
        PATHS.log("validate", "{scenario}"),
    benchmark:
        PATHS.benchmark("validate", "{scenario}")
    shell:
        "{RELMAS} validate {CONFIG_ARGS} --scenario {wildcards.scenario:q}"
        " --costs {params.costs:q} --out {output:q} > {log:q} 2>&1"
