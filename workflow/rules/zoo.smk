rule zoo:
    """Trace the configured models on the meta device into the layer table."""
    output:
        f"{RESULTS}/layers.parquet",
    params:
        models=slice_hash("models"),
    log:
        f"{RESULTS}/logs/zoo.log",
    benchmark:
        f"{RESULTS}/benchmarks/zoo.tsv"
    shell:
        "{RELMAS} zoo {CONFIG_ARGS} --out {output:q} > {log:q} 2>&1"
