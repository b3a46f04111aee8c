rule evaluate:
    """One policy on every evaluation trace of one scenario: one MLflow run, seeds as steps. The
    policies of an evaluation batch run in that batch's rule (below)."""
    wildcard_constraints:
        policy=UNBATCHED_POLICIES,
    input:
        traces=rules.workload.output,
        costs=scenario_costs,
        agent=policy_agent,
    output:
        results=expand(
            str(PATHS.evaluation("{{scenario}}", "{{policy}}", "{seed}")), seed=EVAL_SEEDS
        ),
        summaries=expand(
            str(summary_of(PATHS.evaluation("{{scenario}}", "{{policy}}", "{seed}"))),
            seed=EVAL_SEEDS,
        ),
        # each tenant's (or tenant and model's) achieved deadline-hit rate against its target
        groups=expand(
            str(groups_of(PATHS.evaluation("{{scenario}}", "{{policy}}", "{seed}"))),
            seed=EVAL_SEEDS,
        ),
    params:
        seeds=EVAL_SEED_ARGS,
        agent=lambda wildcards, input: (
            f"--agent {shlex.quote(str(Path(input.agent[0]).parent))}" if input.agent else ""
        ),
        # the validation rows a foreign agent's deployment is chosen by (evaluate_generalisation)
        placements=lambda wildcards, input: (
            f"--placements {shlex.quote(input.placements)}" if "placements" in input.keys() else ""
        ),
        scenario=lambda wildcards: slice_of("scenarios", wildcards.scenario),
        system=slice_hash("system"),
        # what one policy's run reads of `evaluation:`: the seeds and its own settings (not the
        # policy list, the generalisation pairs or another policy's settings)
        evaluation=lambda wildcards: config_hash(
            {"seeds": EVAL_SEEDS, "options": policy_options(CONFIG, wildcards.policy)}
        ),
        costs=lambda wildcards, input: Path(input.costs[0]).parent,
        # one results file per seed: the command fills in {seed}
        out=lambda wildcards, output: Path(output.results[0]).with_name("seed{seed}.parquet"),
    log:
        PATHS.log("evaluate", "{scenario}", "{policy}"),
    benchmark:
        PATHS.benchmark("evaluate", "{scenario}", "{policy}")
    shell:
        "{RELMAS} evaluate {CONFIG_ARGS} --scenario {wildcards.scenario:q}"
        " --policy {wildcards.policy} {params.seeds} {params.agent} {params.placements}"
        " --costs {params.costs:q}"
        " --out {params.out:q} > {log:q} 2>&1"


# The cheap baselines of one scenario, one job per batch (relmas.study.EVALUATION_BATCHES): each
# policy its own results and MLflow run, as in rule evaluate, in one process.
for batch, policies in EVAL_BATCHES.items():
    if not policies:
        continue

    rule:
        name:
            f"evaluate_{batch}"
        input:
            traces=rules.workload.output,
            costs=batch_costs(policies),
            # the placement chosen for each rule and target-aware baseline on validation
            placements=PATHS.validation("{scenario}"),
        output:
            results=expand(
                str(PATHS.evaluation("{{scenario}}", "{policy}", "{seed}")),
                policy=policies,
                seed=EVAL_SEEDS,
            ),
            summaries=expand(
                str(summary_of(PATHS.evaluation("{{scenario}}", "{policy}", "{seed}"))),
                policy=policies,
                seed=EVAL_SEEDS,
            ),
            groups=expand(
                str(groups_of(PATHS.evaluation("{{scenario}}", "{policy}", "{seed}"))),
                policy=policies,
                seed=EVAL_SEEDS,
            ),
        params:
            policies=" ".join(f"--policy {policy}" for policy in policies),
            seeds=EVAL_SEED_ARGS,
            scenario=lambda wildcards: slice_of("scenarios", wildcards.scenario),
            system=slice_hash("system"),
            # what the batch's runs read of `evaluation:`: the seeds and its policies' settings
            evaluation=config_hash(
                {
                    "seeds": EVAL_SEEDS,
                    "options": {policy: policy_options(CONFIG, policy) for policy in policies},
                }
            ),
            costs=lambda wildcards, input: Path(input.costs[0]).parent,
            # one results file per policy and seed: the command fills in {policy} and {seed}
            out=lambda wildcards: PATHS.evaluation(wildcards.scenario, "{policy}", "{seed}"),
        log:
            PATHS.log("evaluate", "{scenario}", batch),
        benchmark:
            PATHS.benchmark("evaluate", "{scenario}", batch)
        shell:
            "{RELMAS} evaluate {CONFIG_ARGS} --scenario {wildcards.scenario:q} {params.policies}"
            " {params.seeds} --costs {params.costs:q} --placements {input.placements:q}"
            " --out {params.out:q} > {log:q} 2>&1"


use rule evaluate as evaluate_generalisation with:
    # A learned policy on one scenario with the agent trained on another ({agent}; pairs from
    # evaluation.generalisation). Same command; policy_agent() picks wildcards.agent's agent, and
    # the scenario's validation rows choose how it is deployed there (relmas.rl.travel).
    input:
        traces=rules.workload.output,
        costs=scenario_costs,
        agent=policy_agent,
        placements=PATHS.validation("{scenario}"),
    output:
        results=expand(
            str(PATHS.evaluation("{{scenario}}", "{{policy}}", "{seed}", agent="{{agent}}")),
            seed=EVAL_SEEDS,
        ),
        summaries=expand(
            str(summary_of(PATHS.evaluation("{{scenario}}", "{{policy}}", "{seed}", agent="{{agent}}"))),
            seed=EVAL_SEEDS,
        ),
        groups=expand(
            str(groups_of(PATHS.evaluation("{{scenario}}", "{{policy}}", "{seed}", agent="{{agent}}"))),
            seed=EVAL_SEEDS,
        ),
    log:
        PATHS.log("evaluate", "{scenario}", "{policy}-from-{agent}"),
    benchmark:
        PATHS.benchmark("evaluate", "{scenario}", "{policy}-from-{agent}")
