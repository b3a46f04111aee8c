rule keeper:
    """Learn which jobs the agents of one scenario give up (training.keeper.traces > 0), from
    labels of the future on training traces under edf_feasible at its validation placement (where
    jobs carry service targets, the best baseline of validation; each training then chooses the
    deadline rule it serves best). Learned once per scenario,
    for every learned policy's training: its labels cost an LP per plan. It reads only
    training.keeper and training.seeds of the training section: the learner's knobs do not
    relearn it."""
    input:
        costs=scenario_costs,
        validation=PATHS.validation("{scenario}"),
    output:
        PATHS.keeper("{scenario}"),
    params:
        keeper=slice_of("training", "keeper"),
        keeper_format=KEEPER_FORMAT,  # a keeper of another version is learned again
        seeds=slice_of("training", "seeds"),
        scenario=lambda wildcards: slice_of("scenarios", wildcards.scenario),
        system=slice_hash("system"),
        costs=lambda wildcards, input: Path(input.costs[0]).parent,
    threads: 1
    # the training of the scenario's agents waits for it
    priority: 10
    log:
        PATHS.log("keeper", "{scenario}"),
    benchmark:
        PATHS.benchmark("keeper", "{scenario}")
    shell:
        "{RELMAS} keeper {CONFIG_ARGS} --scenario {wildcards.scenario:q} --costs {params.costs:q}"
        " --validation {input.validation:q} --out {output:q} > {log:q} 2>&1"


rule train:
    """Train the agent of one learned policy (relmas, or relmas_resize: its actions also cut
    layers, so it reads the piece tables) for one scenario on its training seeds (validated on
    others). Its reference baseline and teacher is the rule or target-aware baseline with the
    placement chosen on the scenario's validation traces (the validate rule's rows).

    Only best.pt, agent.json and curve.parquet are declared: Snakemake removes declared outputs
    before a job, so last.pt and the replay buffer of an interrupted training survive and the
    rerun resumes from them (last.pt also holds the learning curve, which it rewrites).
    """
    input:
        costs=scenario_costs,
        validation=PATHS.validation("{scenario}"),
        keeper=scenario_keeper,
    output:
        agent=PATHS.agent("{scenario}", "{policy}") / "best.pt",
        info=PATHS.agent("{scenario}", "{policy}") / "agent.json",
        curve=PATHS.agent("{scenario}", "{policy}") / "curve.parquet",
    params:
        training=slice_hash("training"),
        scenario=lambda wildcards: slice_of("scenarios", wildcards.scenario),
        system=slice_hash("system"),
        costs=lambda wildcards, input: Path(input.costs[0]).parent,
        out=lambda wildcards, output: Path(output.agent).parent,
        keeper=lambda wildcards, input: (
            f"--keeper {shlex.quote(str(input.keeper))}" if input.keeper else ""
        ),
    wildcard_constraints:
        policy="|".join(catalog.learned()),
    threads: 1
    # the longest jobs, and every evaluation and sweep of a learned policy waits for them: start
    # them first, so that no agent is left training alone at the end of a run
    priority: 10
    log:
        PATHS.log("train", "{scenario}", "{policy}"),
    benchmark:
        PATHS.benchmark("train", "{scenario}", "{policy}")
    shell:
        "{RELMAS} train {CONFIG_ARGS} --scenario {wildcards.scenario:q} --policy {wildcards.policy}"
        " --costs {params.costs:q} --validation {input.validation:q} --out {params.out:q}"
        " {params.keeper} > {log:q} 2>&1"
