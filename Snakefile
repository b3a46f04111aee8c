# relmas pipeline: the rules live in workflow/ (rules/*.smk by stage, schemas/, scripts/).
include: "workflow/Snakefile"


# Defined here, not in workflow/Snakefile: Snakemake ignores default targets of included files.
rule all:
    default_target: True
    input:
        ALL_TARGETS,
