rule zoo:
    """Trace the configured models on the meta device into the layer table."""
    output:
        PATHS.layers,
    params:
        models=slice_hash("models"),
    log:
        PATHS.log("zoo"),
    benchmark:
        PATHS.benchmark("zoo")
    shell:
        "{RELMAS} zoo {CONFIG_ARGS} --out {output:q} > {log:q} 2>&1"
