"""MLflow tracking: the only module that talks to MLflow.

Every pipeline stage is one MLflow run in the experiment named by the config's `experiment` key;
under Snakemake, every job's run is nested under one `pipeline` run per `snakemake` invocation.
docs/tracking.md lists the names of experiments, runs, tags, params and metrics.
The tracking URI is `MLFLOW_TRACKING_URI` when set (e.g. a tracking server for cluster runs),
otherwise the embedded SQLite store `sqlite:///mlflow.db` in the working directory (the project root
under Snakemake).

Several Snakemake jobs start at once and log into one SQLite file, so store creation and experiment
creation happen under an exclusive file lock, and every call that writes retries when SQLite reports
that the database is locked.

A store that cannot be read or written (corrupt file, read-only filesystem) is an InputError naming
it. Each run records the host and process that opened it; a run still RUNNING whose process is gone
(a job killed with kill -9) is closed as KILLED, with the reason as a tag, when a stage next starts.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import re
import socket
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from relmas.errors import InputError

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
PIPELINE_ID_ENV = "RELMAS_PIPELINE_ID"
# The pipeline run of the `snakemake` invocation that started this job (its parent run).
PIPELINE_RUN_ENV = "RELMAS_PIPELINE_RUN_ID"
STAGES = (
    "pipeline",
    "zoo",
    "profile",
    "workload",
    "keeper",
    "train",
    "validate",
    "evaluate",
    "bound",
    "sweep",
    "report",
)
# MLflow's own tag that nests a run under another in the UI.
_PARENT_TAG = "mlflow.parentRunId"
HOST_TAG, PID_TAG, KILLED_TAG = "relmas.host", "relmas.pid", "relmas.killed_reason"

_T = TypeVar("_T")

# Characters MLflow refuses in a metric name; a name from the config (a tenant's, a service
# group's) has them replaced by "_".
_METRIC_UNSAFE = re.compile(r"[^\w.\- /]", re.ASCII)


def metric_name(quantity: str, of: str) -> str:
    """The metric name of `quantity` of one tenant or service group `of` (`sla_rate.<tenant>`,
    `achieved.<group>`): the quantity, then the name with MLflow's forbidden characters replaced."""
    return f"{quantity}.{_METRIC_UNSAFE.sub('_', of)}"


def tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI


def pipeline_id() -> str | None:
    """The id shared by all runs of one `snakemake` invocation (set by the Snakefile); None for a
    command run by hand."""
    return os.environ.get(PIPELINE_ID_ENV)


def new_pipeline_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]


class StageRun:
    """The MLflow run of one stage; thin wrappers that retry on SQLite lock contention."""

    def __init__(self, run_id: str):
        self.run_id = run_id

    def log_params(self, params: Mapping[str, Any]) -> None:
        import mlflow

        flat = {k: _param_text(v) for k, v in flatten(params).items()}
        items = list(flat.items())
        for start in range(0, len(items), 100):
            _retry(lambda s=start: mlflow.log_params(dict(items[s : s + 100])))

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        import mlflow

        clean = {k: float(v) for k, v in metrics.items() if v is not None}
        _retry(lambda: mlflow.log_metrics(clean, step=step))

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        import mlflow

        _retry(lambda: mlflow.log_artifact(str(path), artifact_path=artifact_path))

    def log_dict(self, data: Mapping[str, Any], name: str) -> None:
        import mlflow

        _retry(lambda: mlflow.log_dict(dict(data), name))

    def log_figure(self, figure: Any, name: str) -> None:
        """A matplotlib figure as an image artifact (closed after logging)."""
        import matplotlib.pyplot as plt
        import mlflow

        _retry(lambda: mlflow.log_figure(figure, name))
        plt.close(figure)

    def log_table(self, frame: Any, name: str) -> None:
        """A polars table as a JSON table artifact (`name` ends in .json): the UI shows it as a
        table, beside the run's metrics."""
        import mlflow

        _retry(lambda: mlflow.log_table(frame.to_dict(as_series=False), name))

    def log_child(
        self,
        run_name: str,
        tags: Mapping[str, Any],
        params: Mapping[str, Any],
        metrics: Mapping[str, float],
    ) -> None:
        """A finished child run of this run (e.g. one policy of a sweep point), with this run's
        own tags unless `tags` overrides them."""
        import mlflow
        from mlflow.entities import Metric, Param

        client = mlflow.MlflowClient()
        own = _retry(lambda: client.get_run(self.run_id))
        all_tags = {k: v for k, v in own.data.tags.items() if not k.startswith("mlflow.")}
        all_tags |= {k: str(v) for k, v in tags.items()} | {_PARENT_TAG: self.run_id}
        child = _retry(
            lambda: client.create_run(own.info.experiment_id, tags=all_tags, run_name=run_name)
        )
        now = int(time.time() * 1000)
        _retry(
            lambda: client.log_batch(
                child.info.run_id,
                metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items() if v is not None],
                params=[Param(k, _param_text(v)) for k, v in flatten(params).items()],
            )
        )
        _retry(lambda: client.set_terminated(child.info.run_id, "FINISHED"))

    def log_input(self, frame: Any, name: str, source: str | Path, context: str) -> None:
        """Record a Parquet table (layer table, trace) as an MLflow dataset input of this run."""
        import mlflow

        dataset = mlflow.data.from_polars(frame, source=_file_source(source), name=name)
        _retry(lambda: mlflow.log_input(dataset, context=context))


def _file_source(path: str | Path) -> Any:
    """The dataset source of a local file, as MLflow's own local source class and an absolute
    file URI. Named explicitly because MLflow registers that class twice (for the schemes "" and
    "file"), so resolving a path warns that it "can be interpreted in multiple ways"."""
    from mlflow.data.dataset_source_registry import get_registered_sources

    local = [source for source in get_registered_sources() if source._get_source_type() == "local"]
    return local[-1](Path(path).resolve().as_uri())  # the one MLflow's resolution would pick


@contextlib.contextmanager
def stage_run(
    stage: str,
    config: Mapping[str, Any] | None,
    *,
    tags: Mapping[str, Any] | None = None,
    params: Mapping[str, Any] | None = None,
    run_name: str | None = None,
) -> Iterator[StageRun]:
    """Open the MLflow run of one stage, tagged with stage, source, pipeline id and the config's
    hash, and nested under the pipeline run when Snakemake started it.

    A failing stage ends its run with status FAILED, so the UI shows what broke.
    """
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}")
    import mlflow

    experiment = (config or {}).get("experiment", "relmas")
    all_tags = _identity_tags(stage, config)
    if os.environ.get(PIPELINE_RUN_ENV):
        all_tags[_PARENT_TAG] = os.environ[PIPELINE_RUN_ENV]
    all_tags.update({k: str(v) for k, v in (tags or {}).items()})
    all_tags.update(_process_tags())
    with _store_errors():
        _check_store()
        _use_store()
        experiment_id = _ensure_experiment(experiment)
        close_dead_runs(experiment_id)
        run = _retry(
            lambda: mlflow.start_run(
                experiment_id=experiment_id,
                run_name=run_name or _run_name(stage, tags),
                tags=all_tags,
            )
        )
    status = "FAILED"
    try:
        handle = StageRun(run.info.run_id)
        if params:
            handle.log_params(params)
        yield handle
        status = "FINISHED"
    finally:
        with _store_errors():
            _retry(lambda: mlflow.end_run(status=status))


def _use_store() -> None:
    """Point MLflow at the store. Creating one, MLflow logs two INFO lines ("Creating initial
    MLflow database tables...") to stderr, which carries nothing but errors: they are left out."""
    import logging

    import mlflow

    logging.getLogger("mlflow.store.db.utils").setLevel(logging.WARNING)
    mlflow.set_tracking_uri(tracking_uri())


def _check_store() -> None:
    """Refuse a damaged SQLite store before anything is written to it: SQLite reads only the pages
    a statement needs, so MLflow writes into a file with a corrupt page elsewhere, and the damage
    surfaces later, in another run. `PRAGMA quick_check` reads every page (about 2 ms per MB).
    Opened for writing (not created): a transaction that a killed job left half done is rolled
    back first, as MLflow's own connection would, where a read-only one refuses the store.
    A store that does not exist yet is MLflow's to create; one that cannot be opened or read
    (permissions, a directory) is an error of the store (`_store_errors`)."""
    db = _sqlite_path()
    if db is None or not db.is_file():
        return
    try:
        with contextlib.closing(sqlite3.connect(db.as_uri() + "?mode=rw", uri=True)) as connection:
            rows = _retry(lambda: connection.execute("PRAGMA quick_check").fetchall())
    except sqlite3.DatabaseError as exc:  # a page too damaged to list problems, or no SQLite file
        name = exc.sqlite_errorname or ""
        if not (name.startswith("SQLITE_CORRUPT") or name == "SQLITE_NOTADB"):
            raise
        rows = [(str(exc),)]
    if rows != [("ok",)]:  # the problems, after a `*** in database main ***` heading
        found = [line for (text,) in rows for line in text.splitlines() if line[:3] != "***"]
        expected = "an undamaged MLflow store (SQLite PRAGMA quick_check: ok)"
        raise InputError(db, "MLFLOW_TRACKING_URI", expected, found[0])


def close_dead_runs(experiment_id: str) -> list[str]:
    """Mark KILLED the RUNNING runs of this host whose process has ended; return their ids.

    A run found RUNNING is read again once its process is seen dead: a process that closed its
    run and exited between the search and the check (a short job beside others) committed its
    status before it exited, and that status stands."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    host = socket.gethostname()
    running = _retry(lambda: client.search_runs([experiment_id], "attributes.status = 'RUNNING'"))
    closed = []
    for run in running:
        run_tags = run.data.tags
        pid = run_tags.get(PID_TAG, "")
        if run_tags.get(HOST_TAG) != host or not pid.isdigit() or _alive(int(pid)):
            continue
        if _retry(lambda r=run: client.get_run(r.info.run_id)).info.status != "RUNNING":
            continue
        reason = f"process {pid} on {host} ended without closing the run (killed)"
        _retry(lambda r=run, why=reason: client.set_tag(r.info.run_id, KILLED_TAG, why))
        _retry(lambda r=run: client.set_terminated(r.info.run_id, status="KILLED"))
        closed.append(run.info.run_id)
    return closed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


@contextlib.contextmanager
def _store_errors() -> Iterator[None]:
    """Turn a store that cannot be opened, read or written into one InputError naming it."""
    import mlflow
    import sqlalchemy

    try:
        yield
    except (sqlalchemy.exc.SQLAlchemyError, sqlite3.Error, mlflow.exceptions.MlflowException) as e:
        raise _store_error(e) from None
    except OSError as exc:  # the store's directory or lock file
        raise _store_error(exc) from None


def _store_error(exc: BaseException) -> InputError:
    store = _sqlite_path() or tracking_uri()
    reason = str(getattr(exc, "orig", None) or getattr(exc, "strerror", None) or exc)
    reason = reason.strip().splitlines()
    got = reason[0] if reason else type(exc).__name__
    return InputError(store, "MLFLOW_TRACKING_URI", "a readable and writable MLflow store", got)


def start_pipeline_run(config: Mapping[str, Any]) -> str:
    """Open the parent run of one `snakemake` invocation (Snakefile `onstart:`) and export its id,
    so that every job started afterwards, locally or by a cluster executor, nests under it."""
    import mlflow

    with _store_errors():
        _check_store()
        _use_store()
        experiment_id = _ensure_experiment(config.get("experiment", "relmas"))
        close_dead_runs(experiment_id)
        client = mlflow.MlflowClient()
        run = _retry(
            lambda: client.create_run(
                experiment_id,
                tags={**_identity_tags("pipeline", config), **_process_tags()},
                run_name=f"pipeline-{pipeline_id()}",
            )
        )
    os.environ[PIPELINE_RUN_ENV] = run.info.run_id
    return run.info.run_id


def end_pipeline_run(status: str) -> None:
    """Close the pipeline run (Snakefile `onsuccess:` FINISHED, `onerror:` FAILED)."""
    run_id = os.environ.get(PIPELINE_RUN_ENV)
    if not run_id:
        return
    import mlflow

    client = mlflow.MlflowClient(tracking_uri())
    _retry(lambda: client.set_terminated(run_id, status))


def _process_tags() -> dict[str, str]:
    """Host and pid of the process that owns a run: a later run closes it as KILLED once that
    process is gone (`close_dead_runs`)."""
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid())}


def _identity_tags(stage: str, config: Mapping[str, Any] | None) -> dict[str, str]:
    """stage; source `pipeline` (a Snakemake job) or `manual` (a command run by hand); the
    pipeline id; the config's hash."""
    tags = {"stage": stage, "source": "pipeline" if pipeline_id() else "manual"}
    if pipeline_id():
        tags["pipeline_id"] = pipeline_id()
    if config is not None:
        from relmas.config import config_hash

        tags["config_hash"] = config_hash(config)
    return tags


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"a": {"b": 1}}` -> `{"a.b": 1}`: MLflow parameters are flat."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def _param_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text[:6000]


def _run_name(stage: str, tags: Mapping[str, Any] | None) -> str:
    parts = [stage] + [str(v) for k, v in (tags or {}).items() if k != "stage"]
    return "-".join(parts)


def _ensure_experiment(name: str) -> str:
    """Get or create the experiment, race-free across processes."""
    import mlflow

    with _store_lock():
        experiment = _retry(lambda: mlflow.get_experiment_by_name(name))
        if experiment is not None:
            return experiment.experiment_id
        try:
            return _retry(
                lambda: mlflow.create_experiment(name, artifact_location=_artifacts(name))
            )
        except mlflow.exceptions.MlflowException:
            # created meanwhile by a process that does not share our lock (e.g. a tracking server)
            return mlflow.get_experiment_by_name(name).experiment_id


def _artifacts(experiment: str) -> str | None:
    """Artifacts of the embedded store live beside it (`mlartifacts/`); a server decides its own."""
    db = _sqlite_path()
    if db is None:
        return None
    root = (db.parent / "mlartifacts").resolve()
    location = (root / experiment).resolve()
    if root not in location.parents:
        expected = f"a name whose artifacts stay under {root}"
        raise InputError(None, "experiment", expected, experiment)
    return location.as_uri()


def _sqlite_path() -> Path | None:
    uri = tracking_uri()
    if not uri.startswith("sqlite:///"):
        return None
    return Path(uri.removeprefix("sqlite:///")).absolute()


@contextlib.contextmanager
def _store_lock() -> Iterator[None]:
    """Exclusive lock over store/experiment creation for the embedded SQLite store."""
    db = _sqlite_path()
    if db is None:
        yield
        return
    db.parent.mkdir(parents=True, exist_ok=True)
    lock_path = db.with_name(db.name + ".lock")
    with open(lock_path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _retry(call: Callable[[], _T], attempts: int = 12) -> _T:
    """Retry `call` while SQLite reports lock contention, with jittered exponential back-off."""
    for attempt in range(attempts):
        try:
            return call()
        except Exception as exc:  # MLflow wraps sqlite3.OperationalError in several types
            text = str(exc).lower()
            if "locked" not in text and "busy" not in text or attempt == attempts - 1:
                raise
            time.sleep(min(5.0, 0.05 * 2**attempt) * (0.5 + random.random()))
    raise AssertionError("unreachable")
