import gc

from relmas.cli import main

status = main()
# The process ends here: skip the interpreter's final garbage collection over the objects MLflow
# and SQLAlchemy leave behind (1-2 s per job, docs/benchmarks.md). Files and runs are closed by now.
gc.freeze()
raise SystemExit(status)
