"""What commands and library functions write besides their results: stderr carries nothing but
errors, and progress never lands in a script's output."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from relmas import progress as progress_module
from relmas.hw import silicon
from relmas.progress import hidden, progress
from relmas.tracking import PIPELINE_ID_ENV, PIPELINE_RUN_ENV

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "config" / "quick.yaml"

# A new user's first commands on the quick config, in one process (one start-up), into a new store.
FIRST_COMMANDS = f"""
import sys
from relmas.cli import main
quick = {str(QUICK)!r}
for argv in (
    ["zoo", "--config", quick, "--out", "layers.parquet"],
    *(
        ["profile", "--layers", "layers.parquet", "--accelerator", name, "--config", quick,
         "--out", f"costs/{{name}}.parquet"]
        for name in ("eyeriss_168", "simba_chiplet")
    ),
    ["workload", "--config", quick, "--scenario", "mixed", "--seed", "1000", "--costs", "costs",
     "--out", "trace.parquet"],
    ["evaluate", "--config", quick, "--scenario", "mixed", "--policy", "edf", "--seed", "1000",
     "--jobs", "trace.parquet", "--costs", "costs", "--out", "edf.parquet"],
):
    if main(argv) != 0:
        sys.exit(argv[0])
"""


def test_relmas_evaluate_on_the_quick_config_writes_nothing_to_stderr(tmp_path: Path) -> None:
    """zoo, profile, workload and evaluate, run by hand into a new MLflow store: no warning about
    the datasets' sources, no log line of the store's creation, no progress on stderr; the
    datasets' sources name their files."""
    env = {k: v for k, v in os.environ.items() if k not in (PIPELINE_ID_ENV, PIPELINE_RUN_ENV)}
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env["MLFLOW_TRACKING_URI"] = store
    done = subprocess.run(
        [sys.executable, "-c", FIRST_COMMANDS],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "sla_rate" in done.stdout and "ETA" not in done.stdout  # no progress off a terminal

    import mlflow

    client = mlflow.MlflowClient(store)
    runs = client.search_runs(
        [e.experiment_id for e in client.search_experiments()], "tags.stage = 'workload'"
    )
    (dataset,) = [entry.dataset for entry in runs[0].inputs.dataset_inputs]
    assert dataset.source_type == "local"
    assert json.loads(dataset.source) == {"uri": (tmp_path / "trace.parquet").as_uri()}


def test_progress_is_drawn_only_where_someone_watches(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Off a terminal: lines into a pipeline job's log (its stdout), nothing in any other
    process, nothing inside `hidden()` even on a stream given."""
    monkeypatch.delenv(PIPELINE_ID_ENV, raising=False)

    def count_to(total: int, **options) -> None:
        bar = progress(total, "count", "step", **options)
        bar.update(total)
        bar.close()

    count_to(3)
    assert capsys.readouterr() == ("", "")
    monkeypatch.setenv(PIPELINE_ID_ENV, "20261203T000000-abcdef")
    count_to(3)
    out, err = capsys.readouterr()
    assert out.splitlines()[-1].startswith("count: 3/3 step (100%)") and err == ""
    log = io.StringIO()
    with hidden():
        count_to(3, stream=log)
        with hidden(False):  # an inner call that does not hide does not show either
            count_to(3, stream=log)
    assert log.getvalue() == "" and capsys.readouterr() == ("", "")
    count_to(3, stream=log)
    assert "count: 3/3 step" in log.getvalue()


def test_the_silicon_comparison_profiles_without_progress_unless_asked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """`bench_silicon.py > table.md` got progress lines in its Markdown: compare_eyeriss draws
    none, even where progress would go to stdout (a pipeline job), unless asked."""
    monkeypatch.setenv(PIPELINE_ID_ENV, "20261203T000000-abcdef")
    reference = silicon.load_reference()
    eyeriss = reference["eyeriss"]
    network, entry = next(iter(eyeriss["networks"].items()))
    one_layer = {network: {**entry, "layers": entry["layers"][:1]}}
    small = {**reference, "eyeriss": {**eyeriss, "networks": one_layer}}
    assert silicon.compare_eyeriss(small).height == 1
    assert capsys.readouterr() == ("", "")
    silicon.compare_eyeriss(small, progress=True)
    assert "profile eyeriss: 1/1 layer" in capsys.readouterr().out
    assert not progress_module._HIDDEN.get()
