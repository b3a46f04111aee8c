# relmas pipeline: everything lives in workflow/ (rules by stage, schemas, scripts).
include: "workflow/Snakefile"
