# relmas — the two commands: `make run` (build everything, run the default study) and `make test`.
# Both create .venv on first use and install the project with the versions pinned in
# requirements.lock (torch==2.13.0, the CPU build; a looser pin would download a CUDA build).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CORES ?= all
# the study's config file: `make run CONFIG=my.yaml` runs another one (`quick` is config/quick.yaml)
CONFIG ?= config/config.yaml
quick: CONFIG = config/quick.yaml

# After an interrupted run (Ctrl-C, kill -9, a lost node) the same target just continues:
# `relmas recover` removes Snakemake's stale lock and relmas's temporary files of killed writes under
# the study's results directory (only when no other snakemake or relmas process works in this
# directory), and --rerun-incomplete redoes the jobs that were cut short. README "Recovering from an
# interrupted run" explains it. Reading the config first, it also refuses a bad one in one line
# before Snakemake (which would evaluate a YTE config, or print a traceback) reads it.
SNAKEMAKE := PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --rerun-incomplete
RECOVER := $(BIN)/python -m relmas recover

.PHONY: run quick test lint bench ui-check clean

# A registry connection that drops mid-download (seen in CI: a 54 MB wheel stalled at 22 MB) is
# retried: pip resumes the download itself, and the whole install is tried three times, a minute
# apart, before make gives up. pip 25.1 is the first with --resume-retries.
PIP_INSTALL := $(BIN)/python -m pip install --quiet --retries 10 --resume-retries 10

$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	for attempt in 1 2 3; do \
	  $(BIN)/python -m pip install --quiet --retries 10 --upgrade "pip>=25.1" && \
	  $(PIP_INSTALL) -r requirements.lock && break; \
	  test $$attempt = 3 && exit 1; echo "install attempt $$attempt failed; retrying in 60 s" >&2; sleep 60; \
	done
	$(PIP_INSTALL) --no-deps --no-build-isolation -e .
	touch $@

run quick: $(STAMP)  ## the whole study of $(CONFIG) (run), the whole DAG on the tiny config/quick.yaml (quick)
	$(RECOVER) --config '$(CONFIG)'
	$(SNAKEMAKE) --cores $(CORES) --configfile '$(CONFIG)'

test: $(STAMP)  ## lint and the test suite
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest -n 2

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --lint

bench: $(STAMP)  ## every benchmark script; figures go to docs/benchmarks.md by hand
	for script in benchmarks/bench_*.py; do $(BIN)/python $$script || exit 1; done

ui-check: $(STAMP)  ## the MLflow UI in headless Chromium against the quick study's store (after make quick)
	command -v chromium >/dev/null || { apt-get update && apt-get install -y chromium; }
	$(BIN)/python tests/ui_check.py --out results/quick/ui-check

clean:  ## every config's results (each under its own results/<name>, `results:`), Snakemake's state, the store
	rm -rf results .snakemake mlflow.db mlflow.db.lock mlartifacts
