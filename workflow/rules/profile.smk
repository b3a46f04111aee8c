rule profile:
    """Cost table of one accelerator: depends only on the layer table and that accelerator's spec.

    Marked for Snakemake's between-workflow cache: with `--cache` and SNAKEMAKE_OUTPUT_CACHE set,
    another checkout (or a later run) with the same layers and spec reuses the table unprofiled.
    Snakemake refuses `benchmark:` on cached rules (a cache hit has no time to record), so the
    profiling time is in the log and in the MLflow run (`seconds`) instead.
    """
    input:
        layers=PATHS.layers,
    output:
        PATHS.costs("{accelerator}"),
    params:
        spec=lambda wildcards: slice_of("accelerators", wildcards.accelerator),
        objective=CONFIG["profile"]["objective"],
    cache: True
    log:
        PATHS.log("profile", "{accelerator}"),
    shell:
        "{RELMAS} profile --layers {input.layers:q} --accelerator {wildcards.accelerator:q}"
        " {CONFIG_ARGS} --out {output:q} > {log:q} 2>&1"


rule profile_pieces:
    """Costs of the layers cut into pieces (operator resizing, docs/gacer.md) on one accelerator.

    A rule of its own, beside `profile`, so that the cost table never re-profiles when only
    `resizing:` changes, and cached the same way (Snakemake caches rules with one output file).
    """
    input:
        layers=PATHS.layers,
    output:
        PATHS.pieces("{accelerator}"),
    params:
        spec=lambda wildcards: slice_of("accelerators", wildcards.accelerator),
        objective=CONFIG["profile"]["objective"],
        resizing=json.dumps(CONFIG["resizing"], sort_keys=True),
    cache: True
    log:
        PATHS.log("profile", "{accelerator}.pieces"),
    shell:
        "{RELMAS} profile --layers {input.layers:q} --accelerator {wildcards.accelerator:q}"
        " --pieces {CONFIG_ARGS} --out {output:q} > {log:q} 2>&1"
