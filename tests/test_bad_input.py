"""A corpus of bad inputs as a hostile but fair user would try them: config, accelerator spec,
Parquet inputs, agents, command-line values and paths, the MLflow store.

Each case asserts the promise of relmas.errors: exit status 2, one line on stderr naming the file
and the key (or option) at fault, and no new file left behind. The command line's `main` runs
in-process (the code path of `python -m relmas`, without an interpreter start per case).
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from relmas import cli, io
from relmas.config import config_hash, load_config
from relmas.errors import InputError
from relmas.hw.spec import parse_spec
from relmas.paths import cost_table
from relmas.profile import write_cost_table
from relmas.report.load import collect_summaries
from relmas.report.markdown import mean_text
from relmas.report.stats import aggregate
from relmas.study import Study
from relmas.workload import Arrivals
from relmas.yaml_load import MAX_BYTES
from tests.synthetic import synthetic_costs

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "handwritten"
QUICK = yaml.safe_load((ROOT / "config" / "quick.yaml").read_text())
# MLflow's own log lines (store creation) are not the command's output
MLFLOW_LOG = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d INFO ")
# nor are the progress lines of relmas.progress (profile, train) written before the failure
PROGRESS_LOG = re.compile(r"^.+: \d+/\d+ \S+ \(\d+%\) in [\d:]+, ETA ")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's hand-written inputs (system, trace, two cost tables), a one-layer layer table,
    an accelerator spec, the quick config with cost tables of its accelerators (`qcosts`, made
    up, not profiled) and a trace of its scenario (`trace.parquet`), made once."""
    base = tmp_path_factory.mktemp("inputs")
    for name in ("system.yaml", "make_inputs.py"):
        shutil.copy2(EXAMPLE / name, base / name)
    subprocess.run([sys.executable, str(base / "make_inputs.py")], check=True)
    (base / "make_inputs.py").unlink()
    one_layer_table().write_parquet(base / "layers.parquet")
    spec = dict(QUICK["accelerators"]["simba_chiplet"], name="my_simba")
    (base / "spec.yaml").write_text(yaml.safe_dump(spec))
    (base / "config.yaml").write_text(yaml.safe_dump(QUICK))
    config = load_config(base / "config.yaml")
    quick_costs(base / "qcosts", config)
    trace = Study(config).trace("mixed", 1, base / "qcosts")
    trace.write_parquet(base / "trace.parquet")
    return base


def quick_costs(directory: Path, config: dict[str, Any]) -> None:
    """Cost tables of the quick config's accelerators for its models, with the provenance that
    `relmas profile` records (spec, cost model, objective, the `models:` config's hash), and its
    latencies: whole cycles at the spec's clock."""
    layers = {"mobilenet_v2": 6, "alexnet": 4, "bert_base": 5}
    table = synthetic_costs(layers, list(config["accelerators"]), mean_latency_s=1e-3)
    models = config_hash(config["models"])
    for name, raw in config["accelerators"].items():
        spec = parse_spec(name, raw, None)
        rows = table.filter(pl.col("accelerator") == name)
        rows = rows.with_columns(latency_s=pl.col("cycles") / (spec.clock_ghz * 1e9))
        path = cost_table(directory, name)
        write_cost_table(rows, path, name, spec, "-", models_hash=models)


def one_layer_table() -> pl.DataFrame:
    row = {"model": "m", "layer": 0, "name": "conv", "op": "conv", "N": 1, "K": 16, "C": 8}
    row |= {"Y": 14, "X": 14, "R": 3, "S": 3, "stride": 1, "groups": 1}
    row |= {"macs": 16 * 8 * 14 * 14 * 9, "in_elems": 8 * 16 * 16, "w_elems": 16 * 8 * 9}
    row |= {"out_elems": 16 * 14 * 14}
    ints = ("layer", "N", "K", "C", "Y", "X", "R", "S", "stride", "groups")
    return pl.DataFrame([row]).with_columns(pl.col(c).cast(pl.Int32) for c in ints)


def files(directory: Path) -> set[Path]:
    """Everything under `directory` but an MLflow store's lock file (the store's, not an output)."""
    return {p for p in directory.rglob("*") if not p.name.endswith(".db.lock")}


def run_main(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str]:
    try:
        code = cli.main(argv)
    except SystemExit as exit_:  # argparse's usage errors
        code = exit_.code
    err = capsys.readouterr().err
    kept = (
        line
        for line in err.splitlines()
        if not (MLFLOW_LOG.match(line) or PROGRESS_LOG.match(line))
    )
    return code, "\n".join(kept)


def assert_refused(argv: list[str], work: Path, capsys: pytest.CaptureFixture, *names: str) -> str:
    """`argv` exits 2 with one line naming every string of `names`, and leaves no new file."""
    before = files(work)
    code, err = run_main(argv, capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for name in names:
        assert name in lines[0], (name, lines[0])
    assert files(work) == before, files(work) - before
    return lines[0]


# ----------------------------------------------------------------------------- the config file


def edit(path: str, value: Any) -> Callable[[dict], None]:
    """Set the dotted `path` of the config to `value` (None deletes it)."""

    def change(config: dict) -> None:
        *parents, last = path.split(".")
        node = config
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if value is None:
            del node[last]
        else:
            node[last] = value

    return change


def rename(section: str, old: str, new: str) -> Callable[[dict], None]:
    """Rename entry `old` of config section `section` to `new`, and the references to it (a
    scenario's by the sweeps, an accelerator's by the system's instances)."""

    def change(config: dict) -> None:
        config[section] = {(new if k == old else k): v for k, v in config[section].items()}
        for sweep in config.get("sweeps", {}).values():
            if section == "scenarios" and sweep["scenario"] == old:
                sweep["scenario"] = new
        for instance in config["system"]["instances"]:
            if section == "accelerators" and instance["name"] == old:
                instance["name"] = new

    return change


# names that become file names, directories and Snakemake wildcards (issue 39, item 5)
BAD_NAMES = {
    "that climbs out": "../../../../x",
    "with a slash": "a/b",
    "with a command": "$(touch PWNED)",
    "with a space": "my scenario",
    "with a leading dot": ".hidden",
    "with a leading dash": "-x",
}
NAME_CASES = {
    f"a {kind} {what}": (rename(section, first, name), section)
    for kind, section, first in (
        ("scenario", "scenarios", "mixed"),
        ("accelerator", "accelerators", "eyeriss_168"),
        ("model", "models", "alexnet"),
        ("sweep", "sweeps", "load"),
    )
    for what, name in BAD_NAMES.items()
}

CONFIG_CASES = {
    "unknown top-level key": (edit("colour", "blue"), "colour"),
    "no models": (edit("models", None), "models"),
    "empty models": (edit("models", {}), "models"),
    "experiment with a slash": (edit("experiment", "../../../elsewhere/x"), "experiment"),
    "experiment with dot-dot": (edit("experiment", "a..b"), "experiment"),
    "experiment with a backslash": (edit("experiment", "a\\b"), "experiment"),
    "empty experiment": (edit("experiment", ""), "experiment"),
    "a trillion jobs": (edit("scenarios.mixed.jobs", 10**12), "scenarios.mixed.jobs"),
    "zero jobs": (edit("scenarios.mixed.jobs", 0), "scenarios.mixed.jobs"),
    "jobs as text": (edit("scenarios.mixed.jobs", "many"), "scenarios.mixed.jobs"),
    "a trillion training jobs": (edit("training.jobs", 10**12), "training.jobs"),
    "unknown instance": (edit("system.instances.0.name", "tpu"), "system.instances[0].name"),
    "no instances": (edit("system.instances", []), "system.instances"),
    "zero instances": (edit("system.instances.0.count", 0), "system.instances[0].count"),
    "negative bandwidth": (edit("system.dram_gbps", -1.0), "system.dram_gbps"),
    "unknown sharing": (edit("system.sharing", "fair"), "system.sharing"),
    "unknown scenario model": (
        edit("scenarios.mixed.models", {"gpt5": 1}),
        "scenarios.mixed.models",
    ),
    "unknown arrival process": (
        edit("scenarios.mixed.arrival", {"process": "storm", "load": 1}),
        "scenarios.mixed.arrival",
    ),
    "negative load": (edit("scenarios.mixed.arrival.load", -0.5), "scenarios.mixed.arrival.load"),
    "unknown accelerator kind": (
        edit("accelerators.simba_chiplet.kind", "tpu"),
        "accelerators.simba_chiplet.kind",
    ),
    "zero PE rows": (edit("accelerators.eyeriss_168.pe_rows", 0), "accelerators.eyeriss_168"),
    "buffer as text": (
        edit("accelerators.simba_chiplet.glb_kib", "big"),
        "accelerators.simba_chiplet.glb_kib",
    ),
    "unknown policy": (edit("evaluation.policies", ["fcfs", "magic"]), "evaluation.policies"),
    "bad factory path": (edit("models.alexnet.factory", "not a path"), "models.alexnet.factory"),
    "negative training steps": (
        edit("training.dqn.total_steps", -5),
        "training.dqn.total_steps",
    ),
    "no tenants": (edit("scenarios.mixed.tenants", []), "scenarios.mixed.tenants"),
    "3-bit words": (
        edit("accelerators.eyeriss_168.word_bits", 3),
        "accelerators.eyeriss_168.word_bits",
    ),
    "sweep of an unknown scenario": (edit("sweeps.load.scenario", "nope"), "sweeps.load.scenario"),
    "a ceiling time limit of 0": (
        edit("evaluation.ceiling", {"time_limit_s": 0}),
        "evaluation.ceiling.time_limit_s",
    ),
    "a ceiling time limit of nan": (
        edit("evaluation.ceiling", {"time_limit_s": float("nan")}),
        "evaluation.ceiling.time_limit_s",
    ),
    "a ceiling time limit of inf": (
        edit("evaluation.ceiling", {"time_limit_s": float("inf")}),
        "evaluation.ceiling.time_limit_s",
    ),
    "a learning rate of nan": (
        edit("training.dqn", {"learning_rate": float("nan")}),
        "training.dqn.learning_rate",
    ),
    "a reward of inf": (edit("training.reward", {"met": float("inf")}), "training.reward.met"),
    "a model argument of nan": (
        edit("models.alexnet.kwargs", {"dropout": float("nan")}),
        "models.alexnet.kwargs.dropout",
    ),
    "no solver thread": (
        edit("evaluation.ceiling", {"threads": 0}),
        "evaluation.ceiling.threads",
    ),
    "generalisation from an unknown scenario": (
        edit("evaluation.generalisation", [{"agent": "nope", "scenario": "mixed"}]),
        "evaluation.generalisation[0].agent",
    ),
    "a target above 1": (
        edit("scenarios.mixed.tenants.0.target", 1.5),
        "scenarios.mixed.tenants[0].target",
    ),
    "a negative target": (
        edit("scenarios.mixed.tenants.1.target", -0.1),
        "scenarios.mixed.tenants[1].target",
    ),
    "a target as text": (
        edit("scenarios.mixed.tenants.0.target", "high"),
        "scenarios.mixed.tenants[0].target",
    ),
    "a per-model target above 1": (
        edit("scenarios.mixed.tenants.0.targets", {"alexnet": 2}),
        "scenarios.mixed.tenants[0].targets.alexnet",
    ),
    "a per-model target of an unknown model": (
        edit("scenarios.mixed.tenants.0.targets", {"gpt5": 0.9}),
        "scenarios.mixed.tenants[0].targets.gpt5",
    ),
    "a per-model target outside the tenant's mix": (
        edit(
            "scenarios.mixed.tenants",
            [
                {"name": "cam", "priority": 9, "slack": 4.0, "share": 1, "models": {"alexnet": 1}}
                | {"targets": {"bert_base": 0.9}}
            ],
        ),
        "scenarios.mixed.tenants[0].targets.bert_base",
    ),
    "firm deadlines as text": (
        edit("scenarios.mixed.deadline", {"firm": "yes"}),
        "scenarios.mixed.deadline.firm",
    ),
    "experiment with a command": (edit("experiment", "$(touch PWNED)"), "experiment"),
    # issue 48, item 6a: valid in type, absurd in value; each training number has a maximum
    "a teacher bonus of 1e300": (
        edit("training.dqn.teacher_bonus", 1e300),
        "training.dqn.teacher_bonus: expected a value <= 1000, got 1e+300",
    ),
    "a learning rate of 2": (
        edit("training.dqn.learning_rate", 2.0),
        "training.dqn.learning_rate: expected a value <= 1",
    ),
    "ten billion training steps": (
        edit("training.dqn.total_steps", 10**10),
        "training.dqn.total_steps: expected a value <= 1000000000",
    ),
    "a replay of a trillion transitions": (
        edit("training.dqn.buffer_size", 10**12),
        "training.dqn.buffer_size: expected a value <= 10000000",
    ),
    "a layer of a million units": (
        edit("training.dqn.hidden", [16, 10**6]),
        "training.dqn.hidden[1]: expected a value <= 1024",
    ),
    "a miss penalty of 1e300": (
        edit("training.reward", {"missed": 1e300}),
        "training.reward.missed: expected a value <= 1000",
    ),
    "a priority exponent of 100": (
        edit("training.reward", {"priority_exponent": 100}),
        "training.reward.priority_exponent: expected a value <= 7",
    ),
    "a thousand candidates": (
        edit("training.observation", {"candidates": 1000}),
        "training.observation.candidates: expected a value <= 64",
    ),
    "a training seed of 2^32": (
        edit("training.seeds", [2**32]),
        "training.seeds[0]: expected a value <= 4294967295",
    ),
    "a share of the bandwidth twice": (  # issue 48, item 5c: was "expected [1.0, 1.0] has ..."
        edit("evaluation.ceiling", {"admission_bandwidth": [1.0, 1.0]}),
        "evaluation.ceiling.admission_bandwidth: expected distinct values, got [1.0, 1.0]",
    ),
    **NAME_CASES,
}


@pytest.mark.parametrize("case", sorted(CONFIG_CASES))
def test_bad_config_values(case: str, work: Path, capsys: pytest.CaptureFixture) -> None:
    change, key = CONFIG_CASES[case]
    config = yaml.safe_load((work / "config.yaml").read_text())
    change(config)
    (work / "bad.yaml").write_text(yaml.safe_dump(config))
    line = assert_refused(
        ["zoo", "--config", "bad.yaml", "--out", "l.parquet"], work, capsys, "bad.yaml", key
    )
    if case in NAME_CASES:
        assert "expected a name matching ^[A-Za-z0-9_][A-Za-z0-9_-]*$" in line, line


ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{b}: &{b} [{', '.join([f'*{a}'] * 10)}]\n" for a, b in zip("abcdef", "bcdefg", strict=True)
)

YAML_TEXT_CASES = {
    "duplicate top-level key": (b"experiment: a\nexperiment: b\n", "experiment"),
    "duplicate nested key": (b"system:\n  sharing: maxmin\n  sharing: proportional\n", "sharing"),
    "not UTF-8": (b"experiment: caf\xe9\n", "byte 15"),
    "alias bomb": (ALIAS_BOMB.encode(), "aliases expanded"),
    "syntax error": (b"models: [alexnet\n", "line"),
    "nested too deep": (b"a: " + b"[" * 150 + b"]" * 150 + b"\n", "nesting"),
    "a list, not a mapping": (b"- models\n", "mapping"),
    "empty file": (b"", "mapping"),
    "too large": (b"#" * (MAX_BYTES + 1), f"at most {MAX_BYTES} bytes"),
}


@pytest.mark.parametrize("case", sorted(YAML_TEXT_CASES))
def test_bad_config_files(case: str, work: Path, capsys: pytest.CaptureFixture) -> None:
    text, key = YAML_TEXT_CASES[case]
    (work / "bad.yaml").write_bytes(text)
    assert_refused(
        ["zoo", "--config", "bad.yaml", "--out", "l.parquet"], work, capsys, "bad.yaml", key
    )


def test_a_missing_config_and_a_directory(work: Path, capsys: pytest.CaptureFixture) -> None:
    (work / "dir.yaml").mkdir()
    for path in ("missing.yaml", "dir.yaml"):
        argv = ["zoo", "--config", path, "--out", "l.parquet"]
        assert_refused(argv, work, capsys, path, "an existing YAML file")


# ----------------------------------------------------------------------------- accelerator spec

SPEC_CASES = {
    "unknown key": (lambda s: s | {"colour": 1}, "colour"),
    "unknown kind": (lambda s: s | {"kind": "tpu"}, "kind"),
    "zero lanes": (lambda s: s | {"lanes": 0}, "lanes"),
    "negative clock": (lambda s: s | {"clock_ghz": -1.0}, "clock_ghz"),
    "empty name": (lambda s: s | {"name": ""}, "name"),
    "a name that climbs out": (lambda s: s | {"name": "../../x"}, "name"),
    "a list": (lambda s: [s], "mapping"),
    "3-bit words": (lambda s: s | {"word_bits": 3}, "word_bits"),
    "12-bit words": (lambda s: s | {"word_bits": 12}, "word_bits"),
}


@pytest.mark.parametrize("case", sorted(SPEC_CASES))
def test_bad_spec_files(case: str, work: Path, capsys: pytest.CaptureFixture) -> None:
    change, key = SPEC_CASES[case]
    spec = yaml.safe_load((work / "spec.yaml").read_text())
    (work / "bad.yaml").write_text(yaml.safe_dump(change(spec)))
    argv = ["profile", "--layers", "layers.parquet", "--spec", "bad.yaml", "--out", "c.parquet"]
    assert_refused(argv, work, capsys, "bad.yaml", key)


@pytest.mark.parametrize(
    ("text", "key"), [(b"lanes: 1\nlanes: 2\n", "lanes"), (b"kind: \xff\n", "byte 6")]
)
def test_bad_spec_text(text: bytes, key: str, work: Path, capsys: pytest.CaptureFixture) -> None:
    (work / "bad.yaml").write_bytes(text)
    argv = ["profile", "--layers", "layers.parquet", "--spec", "bad.yaml", "--out", "c.parquet"]
    assert_refused(argv, work, capsys, "bad.yaml", key)


# ----------------------------------------------------------------------------- Parquet inputs


def profile_argv(layers: str = "bad.parquet", out: str = "c.parquet") -> list[str]:
    return ["profile", "--layers", layers, "--spec", "spec.yaml", "--out", out]


LAYER_CASES = {
    "no rows": (lambda f: f.clear(), "at least one row"),
    "a missing column": (lambda f: f.drop("macs"), "macs"),
    "text for a number": (lambda f: f.with_columns(pl.col("K").cast(pl.String)), "K"),
    "zero output channels": (lambda f: f.with_columns(K=pl.lit(0, pl.Int32)), "K"),
    "unknown operator": (lambda f: f.with_columns(op=pl.lit("fft")), "op"),
}


@pytest.mark.parametrize("case", sorted(LAYER_CASES))
def test_bad_layer_tables(case: str, work: Path, capsys: pytest.CaptureFixture) -> None:
    change, key = LAYER_CASES[case]
    change(pl.read_parquet(work / "layers.parquet")).write_parquet(work / "bad.parquet")
    assert_refused(profile_argv(), work, capsys, "bad.parquet", key)


def test_layer_tables_that_are_not_parquet(work: Path, capsys: pytest.CaptureFixture) -> None:
    (work / "bad.parquet").write_text("model,layer\nm,0\n")
    assert_refused(profile_argv(), work, capsys, "bad.parquet", "a readable Parquet file")
    (work / "dir.parquet").mkdir()
    assert_refused(profile_argv("dir.parquet"), work, capsys, "dir.parquet", "Parquet file")
    assert_refused(profile_argv("none.parquet"), work, capsys, "none.parquet", "existing")


def simulate_argv(jobs: str = "jobs.parquet", costs: str = "costs", *extra: str) -> list[str]:
    argv = ["simulate", "--system", "system.yaml", "--jobs", jobs, "--costs", costs]
    return [*argv, "--policy", "edf", *extra, "--out", "out.parquet"]


TRACE_CASES = {
    "no rows": (lambda f: f.clear(), "at least one row"),
    "negative arrival": (lambda f: f.with_columns(pl.col("arrival_s") - 1.0), "arrival_s"),
    "deadline before arrival": (lambda f: f.with_columns(pl.col("deadline_s") - 1.0), "deadline"),
    "unknown model": (lambda f: f.with_columns(model=pl.lit("gpt5")), "model"),
    "a missing column": (lambda f: f.drop("tenant"), "tenant"),
    "text for a time": (lambda f: f.with_columns(pl.col("arrival_s").cast(pl.String)), "arrival"),
    "priority 5": (lambda f: f.with_columns(priority=pl.lit(5, pl.Int32)), "priority"),
    "a target above 1": (lambda f: f.with_columns(target=pl.lit(1.5)), "target"),
    "text for a target": (lambda f: f.with_columns(target=pl.lit("high")), "target"),
    "two targets for one tenant": (
        lambda f: f.with_columns(target=pl.int_range(pl.len()) / pl.len()),
        "one target per service group",
    ),
    "a model's target that is none": (
        lambda f: f.with_columns(model_target=pl.lit(True)),
        "model_target",
    ),
    "firm unknown": (lambda f: f.with_columns(firm=pl.lit(None, pl.Boolean)), "firm"),
    "a deadline beyond 2^32 s": (  # issue 48, item 5b: its range was printed as (inf, 2^32]
        lambda f: f.with_columns(deadline_s=pl.lit(2.0**33)),
        "deadline_s: expected finite Float64 values in (-inf, 2^32], not null",
    ),
}


@pytest.mark.parametrize("case", sorted(TRACE_CASES))
def test_bad_job_traces(case: str, work: Path, capsys: pytest.CaptureFixture) -> None:
    change, key = TRACE_CASES[case]
    change(pl.read_parquet(work / "jobs.parquet")).write_parquet(work / "bad.parquet")
    assert_refused(simulate_argv("bad.parquet"), work, capsys, "bad.parquet", key)


COST_CASES = {
    "no rows": (lambda f: f.clear(), "at least one row"),
    "a missing column": (lambda f: f.drop("latency_s"), "latency_s"),
    "text for a latency": (lambda f: f.with_columns(pl.col("latency_s").cast(pl.String)), "lat"),
}


@pytest.mark.parametrize("case", sorted(COST_CASES))
def test_bad_cost_tables(case: str, work: Path, capsys: pytest.CaptureFixture) -> None:
    change, key = COST_CASES[case]
    path = work / "costs" / "big.parquet"
    change(pl.read_parquet(path)).write_parquet(path)
    assert_refused(simulate_argv(), work, capsys, "big.parquet", key)


def test_corrupt_and_missing_cost_tables(work: Path, capsys: pytest.CaptureFixture) -> None:
    (work / "costs" / "big.parquet").write_bytes(b"PAR1 not really")
    assert_refused(simulate_argv(), work, capsys, "big.parquet", "Parquet")
    (work / "costs" / "big.parquet").unlink()
    assert_refused(simulate_argv(), work, capsys, "system.yaml", "instances[0].name")


def test_an_over_long_replay_trace_is_refused_before_loading(
    work: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from relmas import config as config_module

    schema = config_module.load_schema()
    schema["$defs"]["job_count"]["maximum"] = 3
    monkeypatch.setattr(config_module, "load_schema", lambda: schema)
    pl.DataFrame({"arrival_s": [0.0, 0.1, 0.2, 0.3]}).write_parquet(work / "replay.parquet")
    with pytest.raises(Exception, match=r"replay.parquet: expected at most 3 rows, got 4"):
        io.read_parquet(work / "replay.parquet", Arrivals, max_rows=3)


def evaluate_argv(*extra: str) -> list[str]:
    """`relmas evaluate` of fcfs on the quick config's scenario with the made-up cost tables."""
    argv = ["evaluate", "--config", "config.yaml", "--scenario", "mixed", "--policy", "fcfs"]
    return [*argv, "--seed", "1", "--costs", "qcosts", *extra]


def test_the_scenarios_traces_are_checked_against_it(
    work: Path, capsys: pytest.CaptureFixture
) -> None:
    """A trace evaluated on a scenario holds only its tenants and the priorities 1, 3, 9 (a trace
    run with `relmas simulate`, outside any scenario, may name any tenant)."""
    trace = pl.read_parquet(work / "trace.parquet")
    assert run_main(evaluate_argv("--jobs", "trace.parquet", "--out", "r.parquet"), capsys)[0] == 0
    for name in ("r.parquet", "r.summary.parquet", "r.groups.parquet"):
        (work / name).unlink()
    trace.with_columns(tenant=pl.lit("nobody")).write_parquet(work / "bad.parquet")
    argv = evaluate_argv("--jobs", "bad.parquet", "--out", "r.parquet")
    line = assert_refused(argv, work, capsys, "bad.parquet", "tenant", "nobody")
    assert "['interactive', 'batch']" in line
    trace.with_columns(priority=pl.lit(5, pl.Int32)).write_parquet(work / "bad.parquet")
    assert_refused(argv, work, capsys, "bad.parquet", "priority", "1, 3, 9")
    jobs = pl.read_parquet(work / "jobs.parquet")
    jobs.with_columns(tenant=pl.lit("nobody")).write_parquet(work / "free.parquet")
    assert run_main(simulate_argv("free.parquet"), capsys)[0] == 0


# ----------------------------------------------------------------------------- outputs over inputs

OVERWRITE_CASES = {
    "profile over its layer table": (
        profile_argv("layers.parquet", "layers.parquet"),
        "layers.parquet",
        "--out",
        "--layers",
    ),
    "profile over a link to its layer table": (
        profile_argv("layers.parquet", "link.parquet"),
        "link.parquet",
        "--out",
        "--layers",
    ),
    "profile over its spec": (profile_argv("layers.parquet", "spec.yaml"), "spec.yaml", "--spec"),
    "zoo over its config": (
        ["zoo", "--config", "config.yaml", "--out", "./config.yaml"],
        "config.yaml",
        "--config",
    ),
    "workload over a cost table": (
        ["workload", "--config", "config.yaml", "--scenario", "mixed", "--seed", "1"]
        + ["--costs", "qcosts", "--out", "qcosts/eyeriss_168.parquet"],
        "eyeriss_168.parquet",
        "--costs",
    ),
    "evaluate over its trace": (
        evaluate_argv("--jobs", "trace.parquet", "--out", "trace.parquet"),
        "trace.parquet",
        "--out",
        "--jobs",
    ),
    "evaluate's chart over its results": (
        evaluate_argv("--jobs", "trace.parquet", "--gantt", "r.parquet", "--out", "r.parquet"),
        "r.parquet",
        "--gantt",
        "--out",
    ),
    "evaluate's chart over its summary": (
        evaluate_argv(
            "--jobs", "trace.parquet", "--gantt", "r.summary.parquet", "--out", "r.parquet"
        ),
        "r.summary.parquet",
        "--gantt",
    ),
    "evaluate over its trace, per seed": (
        evaluate_argv("--seed", "2", "--jobs", "t{seed}.parquet", "--out", "t{seed}.parquet"),
        "t1.parquet",
        "--jobs",
    ),
    "bound over its trace": (
        ["bound", "--config", "config.yaml", "--scenario", "mixed", "--seed", "1"]
        + ["--jobs", "trace.parquet", "--costs", "qcosts", "--out", "trace.parquet"],
        "trace.parquet",
        "--out",
        "--jobs",
    ),
    "train into its cost tables' directory": (
        ["train", "--config", "config.yaml", "--scenario", "mixed", "--costs", "qcosts"]
        + ["--out", "qcosts"],
        "qcosts",
        "--out",
        "--costs",
    ),
    "validate over a cost table": (
        ["validate", "--config", "config.yaml", "--scenario", "mixed", "--costs", "qcosts"]
        + ["--out", "qcosts/simba_chiplet.parquet"],
        "simba_chiplet.parquet",
        "--costs",
    ),
    "sweep over a cost table": (
        ["sweep", "--config", "config.yaml", "--sweep", "load", "--value", "0.5"]
        + ["--costs", "qcosts", "--out", "qcosts/simba_chiplet.parquet"],
        "simba_chiplet.parquet",
        "--costs",
    ),
    "report into its results": (
        ["report", "--config", "config.yaml", "--eval", "ev", "--out", "ev/"],
        "ev",
        "--out",
        "--eval",
    ),
    "simulate over its trace": (
        simulate_argv() + ["--out", "jobs.parquet"],
        "jobs.parquet",
        "--out",
        "--jobs",
    ),
    "simulate over a cost table": (
        simulate_argv() + ["--out", "costs/big.parquet"],
        "big.parquet",
        "--costs",
    ),
}


@pytest.mark.parametrize("case", sorted(OVERWRITE_CASES))
def test_outputs_over_inputs(case: str, work: Path, capsys: pytest.CaptureFixture) -> None:
    """An output path that is one of the command's inputs (or another of its outputs, or a link
    to one) is refused before anything is read or written: every file keeps its bytes."""
    argv, *names = OVERWRITE_CASES[case]
    (work / "link.parquet").symlink_to("layers.parquet")
    before = {path: path.read_bytes() for path in files(work) if path.is_file()}
    assert_refused(argv, work, capsys, *names)
    assert {path: path.read_bytes() for path in files(work) if path.is_file()} == before


# ----------------------------------------------------------------------------- agents


def test_bad_agents(work: Path, capsys: pytest.CaptureFixture) -> None:
    relmas = ["simulate", "--system", "system.yaml", "--jobs", "jobs.parquet", "--costs", "costs"]
    relmas += ["--policy", "relmas", "--out", "out.parquet"]
    assert_refused([*relmas, "--agent", "nope"], work, capsys, "nope", "agent")
    assert_refused(relmas, work, capsys, "--agent")
    (work / "agent").mkdir()
    (work / "agent" / "agent.json").write_text("{")
    assert_refused([*relmas, "--agent", "agent"], work, capsys, "agent.json", "JSON")
    (work / "agent" / "agent.json").write_text(json.dumps({"network": "?"}))
    (work / "agent" / "best.pt").write_bytes(b"not a checkpoint")
    assert_refused([*relmas, "--agent", "agent"], work, capsys, "agent")


# ----------------------------------------------------------------------------- command line


USAGE_CASES = {
    "negative seed": (["workload", "--seed", "-1"], "--seed"),
    "seed as text": (["workload", "--seed", "one"], "--seed"),
    "huge seed": (["workload", "--seed", str(2**40)], "--seed"),
    "sweep value nan": (["sweep", "--sweep", "load", "--value", "nan"], "--value"),
    "sweep value inf": (["sweep", "--sweep", "load", "--value", "inf"], "--value"),
    "sweep evaluations without bounds": (
        ["sweep", "--sweep", "load", "--value", "0.8", "--evaluations", "ev"],
        "--bounds: expected a directory (--evaluations and --bounds go together)",
    ),
    "sweep evaluations of another point": (
        ["sweep", "--sweep", "load", "--value", "0.5", "--evaluations", "ev", "--bounds", "b"],
        "--evaluations: expected only at the base scenario's own value 0.8, got 0.5",
    ),
    "unknown objective": (profile_argv("layers.parquet") + ["--objective", "speed"], "--objective"),
    "unknown command": (["fly"], "fly"),
    # issue 48, item 5f: argparse said "the following arguments are required: command"
    "unknown option": (["--versio"], "relmas: error: unrecognized option --versio"),
    "unknown option of a command": (
        ["zoo", "--config", "config.yaml", "--ot", "l.parquet"],
        "relmas zoo: error: unrecognized option --ot",
    ),
}


@pytest.mark.parametrize("case", sorted(USAGE_CASES))
def test_bad_option_values(case: str, work: Path, capsys: pytest.CaptureFixture) -> None:
    argv, option = USAGE_CASES[case]
    if argv[0] in ("workload", "sweep"):
        argv = [argv[0], "--config", "config.yaml", "--scenario", "mixed", *argv[1:]]
        argv += ["--out", "o.parquet"]
        if argv[0] == "sweep":
            argv.remove("--scenario")
            argv.remove("mixed")
    assert_refused(argv, work, capsys, option)


BENCHMARK_CASES = {
    "a negative ceiling time limit": ("bench_ceiling.py", ["subsets", "--time-limit", "-1"]),
    "a ceiling time limit of 0": ("bench_ceiling.py", ["subsets", "--time-limit", "0"]),
    "a ceiling time limit of nan": ("bench_ceiling.py", ["subsets", "--time-limit", "nan"]),
    "a target of nan": ("bench_ceiling.py", ["targets", "--targets", "camera=nan"]),
    "an exact time limit of inf": ("bench_ceiling_exact.py", ["--time-limit", "inf"]),
    "no traces": ("bench_ceiling_exact.py", ["--traces", "0"]),
    "a tick of 0": ("bench_ceiling_medium.py", ["--tick", "0"]),
    "windows of no jobs": ("bench_ceiling_medium.py", ["--jobs", "100", "0"]),
    "a load of nan": ("bench_sim.py", ["--load", "nan"]),
    "a trace of 0 jobs": ("bench_ga.py", ["--sizes", "10", "0"]),
    "a negative seed": ("bench_gacer.py", ["--costs", "c", "--seeds", "-1"]),
    "a horizon of nan": ("bench_headroom.py", ["rollout", "--horizon", "nan"]),
    # issue 48, item 5e: argparse named its type function ("invalid _rates value")
    "a target as text": ("bench_ceiling.py", ["targets", "--targets", "camera=high"]),
    # issue 48, item 3: a traceback or argparse's four-line usage ("invalid <lambda> value")
    "a share of the bandwidth above 1": ("bench_admission.py", ["--scales", "1,1.5"]),
    "a share of the bandwidth of 0": ("bench_admission.py", ["--scales", "0"]),
    "a share of the bandwidth of nan": ("bench_admission.py", ["--scales", "nan"]),
    "a seed as text": ("bench_admission.py", ["--seeds", "abc"]),
    "a negative admission seed": ("bench_admission.py", ["--seeds", "1000,-1"]),
    "no repeat": ("bench_policy_time.py", ["--study", ".", "--repeats", "0"]),
}


@pytest.mark.parametrize("case", sorted(BENCHMARK_CASES))
def test_bad_benchmark_options(
    case: str, work: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A benchmark script's numeric option out of range is one usage line (exit 2) before it
    starts: `bench_ceiling.py subsets --time-limit -1` was a 15-line traceback from the solver."""
    import runpy

    script, argv = BENCHMARK_CASES[case]
    monkeypatch.setattr(sys, "argv", [script, *argv])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_path(str(ROOT / "benchmarks" / script), run_name="__main__")
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.strip().splitlines()) == 1, err
    option = [word for word in argv if word.startswith("--")][-1]
    assert err.startswith(script) and f": error: argument {option}: expected" in err


STUDY = ["--study", "."]  # the checks below come before its report is read
ADMISSION_CASES = {
    "no study": ([], ["bench_admission.py: error: the following arguments are required: --study"]),
    "a missing study": (["--study", "nope"], ["summary.parquet", "--study"]),
    "a missing config": ([*STUDY, "--config", "no.yaml"], ["no.yaml", "an existing YAML file"]),
    "an unknown scenario": ([*STUDY, "--scenarios", "mixed,nope"], ["config.yaml", "--scenarios"]),
    "a seed of no evaluation": ([*STUDY, "--seeds", "5"], ["config.yaml", "--seeds", "got 5"]),
    "a config with a target of nan": ([*STUDY, "--config", "nan.yaml"], ["nan.yaml", "finite"]),
}


@pytest.mark.parametrize("case", sorted(ADMISSION_CASES))
def test_bench_admission_refuses_in_one_line(
    case: str, work: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 48, item 3: each was a traceback (FileNotFoundError, InputError) or argparse's
    four-line usage; the options are checked before any trace is run."""
    import runpy

    config = yaml.safe_load((work / "config.yaml").read_text())
    config["scenarios"]["mixed"]["tenants"][0]["target"] = float("nan")
    (work / "nan.yaml").write_text(yaml.safe_dump(config))
    given, names = ADMISSION_CASES[case]
    argv = ["bench_admission.py", "--config", "config.yaml", *given]
    monkeypatch.setattr(sys, "argv", argv)
    before = files(work)
    with pytest.raises(SystemExit) as exit_:
        runpy.run_path(str(ROOT / "benchmarks" / "bench_admission.py"), run_name="__main__")
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert exit_.value.code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert all(name in lines[0] for name in names), (names, lines[0])
    assert files(work) == before


def test_a_cost_table_without_provenance_is_called_so(
    work: Path, capsys: pytest.CaptureFixture
) -> None:
    """Issue 48, item 5d: a table written by hand, with no metadata at all, was said to be
    "profiled by another cost model"."""
    rewrite_cost_table(cost_table(work / "qcosts", "eyeriss_168"), [], keep_metadata=False)
    argv = evaluate_argv("--jobs", "trace.parquet", "--out", "r.parquet")
    line = assert_refused(argv, work, capsys, "eyeriss_168.parquet", "lacks the provenance")
    assert "another cost model" not in line, line


def test_unknown_names_in_options(work: Path, capsys: pytest.CaptureFixture) -> None:
    argv = ["workload", "--config", "config.yaml", "--scenario", "nope", "--seed", "1"]
    assert_refused([*argv, "--out", "w.parquet"], work, capsys, "config.yaml", "--scenario")
    argv = ["validate", "--config", "config.yaml", "--scenario", "nope", "--out", "v.parquet"]
    assert_refused(argv, work, capsys, "config.yaml", "--scenario")
    argv = ["profile", "--layers", "layers.parquet", "--config", "config.yaml"]
    argv += ["--accelerator", "tpu", "--out", "c.parquet"]
    assert_refused(argv, work, capsys, "config.yaml", "accelerators")
    assert_refused(
        simulate_argv()[:-2] + ["--policy", "magic", "--out", "o.parquet"], work, capsys, "--policy"
    )


def test_path_templates_with_unknown_placeholders(
    work: Path, capsys: pytest.CaptureFixture
) -> None:
    argv = ["evaluate", "--config", "config.yaml", "--scenario", "mixed", "--policy", "fcfs"]
    argv += ["--seed", "1", "--costs", "costs"]
    for option, template in (("--out", "r{run}.parquet"), ("--jobs", "{seed}{.parquet")):
        other = ("--jobs", "jobs.parquet") if option == "--out" else ("--out", "r.parquet")
        assert_refused([*argv, option, template, *other], work, capsys, option, "placeholders")


def test_outputs_that_cannot_be_written(work: Path, capsys: pytest.CaptureFixture) -> None:
    (work / "outdir").mkdir()
    (work / "afile").write_text("")
    argv = profile_argv("layers.parquet", "outdir")
    assert_refused(argv, work, capsys, "outdir", "--out", "not a directory")
    argv = profile_argv("layers.parquet", "afile/c.parquet")
    assert_refused(argv, work, capsys, "afile", "--out", "parents are directories")
    argv = profile_argv("layers.parquet", "new/deeper/" + "x" * 300 + ".parquet")
    assert_refused(argv, work, capsys, "--out", "shorter path")


def test_train_into_an_existing_file(work: Path, capsys: pytest.CaptureFixture) -> None:
    (work / "agent").write_text("")
    pl.read_parquet(work / "costs" / "big.parquet")  # costs exist; the scenario's do not matter
    argv = ["train", "--config", "config.yaml", "--scenario", "mixed", "--costs", "costs"]
    code, err = run_main([*argv, "--out", "agent"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "config.yaml" in err


def test_a_failed_command_leaves_none_of_its_outputs(
    work: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command that wrote some outputs (results) and then failed on another (`--gantt` a
    directory) leaves none of them, nor the directories it made."""

    def writes_then_fails(args) -> None:
        io.write_parquet(pl.DataFrame({"a": [1]}), "made/one.parquet")
        io.write_parquet(pl.DataFrame({"a": [1]}), "made/two.parquet")
        with io.atomic_path(work / "costs", suffix=".png") as tmp:
            tmp.write_bytes(b"png")

    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    parser._subparsers._group_actions[0].choices["zoo"].set_defaults(func=writes_then_fails)
    line = assert_refused(["zoo", "--config", "x", "--out", "made/x"], work, capsys, "costs")
    assert "a file path, not a directory" in line


def test_an_unusable_mlflow_store(
    work: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    (work / "corrupt.db").write_bytes(os.urandom(4096))
    (work / "afile").write_text("")
    argv = ["zoo", "--config", "config.yaml", "--out", "l.parquet"]
    for store in ("corrupt.db", "afile/mlflow.db"):
        monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{work / store}")
        assert_refused(argv, work, capsys, store, "MLFLOW_TRACKING_URI")


def test_outputs_follow_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0o022)
    try:
        io.write_parquet(pl.DataFrame({"a": [1]}), tmp_path / "a.parquet")
        os.umask(0o027)
        io.write_parquet(pl.DataFrame({"a": [1]}), tmp_path / "b.parquet")
    finally:
        os.umask(previous)
    assert (tmp_path / "a.parquet").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "b.parquet").stat().st_mode & 0o777 == 0o640


def test_the_corpus_is_large() -> None:
    cases = len(CONFIG_CASES) + len(YAML_TEXT_CASES) + 2 + len(SPEC_CASES) + 2
    cases += len(LAYER_CASES) + 3 + len(TRACE_CASES) + len(COST_CASES) + 2 + 4
    cases += len(USAGE_CASES) + len(BENCHMARK_CASES) + 3 + 2 + 3 + 1 + 1 + 2 + 2
    cases += 1 + len(OVERWRITE_CASES)
    assert cases >= 60


def test_a_read_only_filesystem(
    work: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EROFS cannot be provoked without mounting; the error is what the kernel would raise."""

    def read_only(prefix: str, suffix: str, dir: Path) -> None:
        raise OSError(
            errno.EROFS, "Read-only file system", str(Path(dir) / f"{prefix}abcd1234{suffix}")
        )

    monkeypatch.setattr(io.tempfile, "mkstemp", read_only)
    line = assert_refused(profile_argv("layers.parquet"), work, capsys, "c.parquet", "--out")
    assert "expected a path on a writable filesystem" in line


def test_a_read_only_store(
    work: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mlflow
    import sqlalchemy

    def read_only(*args, **kwargs) -> None:
        cause = sqlite3.OperationalError("attempt to write a readonly database")
        raise sqlalchemy.exc.OperationalError("INSERT INTO runs", {}, cause)

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{work / 'ro' / 'mlflow.db'}")
    monkeypatch.setattr(mlflow, "start_run", read_only)
    argv = ["zoo", "--config", "config.yaml", "--out", "l.parquet"]
    before = files(work)
    code, err = run_main(argv, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "ro/mlflow.db: MLFLOW_TRACKING_URI: expected a readable and writable MLflow store" in err
    assert "attempt to write a readonly database" in err
    assert {p for p in files(work) - before if p.relative_to(work).parts[0] != "ro"} == set()


def metrics_leaf(db: Path) -> tuple[int, int]:
    """(page number, page size) of a leaf page in the middle of the store's `metrics` table: from
    its root, the middle cell's child down to a leaf (SQLite's b-tree pages: type byte, cell count
    at 3, cell pointers from 12, an interior cell starting with its child's page number)."""
    with contextlib.closing(sqlite3.connect(db)) as connection:
        query = "SELECT rootpage FROM sqlite_master WHERE name = 'metrics'"
        (page,) = connection.execute(query).fetchone()
        (size,) = connection.execute("PRAGMA page_size").fetchone()
    data = db.read_bytes()
    while data[(page - 1) * size] == 0x05:  # an interior page of a table
        start = (page - 1) * size
        middle = start + 12 + 2 * (int.from_bytes(data[start + 3 : start + 5]) // 2)
        cell = start + int.from_bytes(data[middle : middle + 2])
        page = int.from_bytes(data[cell : cell + 4])
    assert data[(page - 1) * size] == 0x0D, "not a leaf page of a table"
    return page, size


def test_a_store_damaged_in_its_middle_is_refused_and_left_as_it_is(
    work: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 48, item 4: random bytes over a page of the metrics table, which the next run's
    writes do not touch; the store is checked whole before a stage writes to it."""
    from relmas import tracking

    store = work / "mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{store}")
    with tracking.stage_run("train", {"experiment": "damaged"}) as run:
        for step in range(5):
            run.log_metrics({f"loss.{k}": step / (k + 1) for k in range(100)}, step=step)
    page, size = metrics_leaf(store)
    with open(store, "r+b") as handle:
        handle.seek((page - 1) * size)
        handle.write(random.Random(48).randbytes(size))
    damaged = store.read_bytes()
    argv = ["zoo", "--config", "config.yaml", "--out", "l.parquet"]
    line = assert_refused(argv, work, capsys, "mlflow.db", "MLFLOW_TRACKING_URI", "quick_check")
    # SQLite names the page, or (as 3.40 does for this one) gives up on the whole file
    assert re.search(r"expected an undamaged .* got '(Page \d+|database disk image)", line), line
    assert store.read_bytes() == damaged


# ----------------------------------------------------------------------------- issue 32


def small_agent(directory: Path) -> None:
    """A trained agent (untrained weights, agent.json) for the hand-written system."""
    import torch

    from relmas.rl.agent import AgentInfo, write_agent_info
    from relmas.rl.checkpoint import BEST, save_checkpoint
    from relmas.rl.features import Layout
    from relmas.rl.network import QNetwork
    from tests.defaults import decision_cost, observation_settings, reward_settings

    settings = observation_settings(candidates=1, reference="sjf_feasible", service=False)
    layout = Layout(settings.slots, 2, 3)  # the hand-written system: big, small × 2
    torch.manual_seed(0)
    net = QNetwork(layout.size, layout.actions, (8,), False, layout.rows, layout.variants)
    directory.mkdir()
    save_checkpoint(directory / BEST, {"network": net.spec, "online": net.state_dict()})
    info = AgentInfo(
        scenario="handwritten",
        observation=settings,
        reward=reward_settings(),
        instance_types=("big", "small", "small"),
        accelerator_types=("big", "small"),
        split_variants=("whole",),
        decision_cost=decision_cost("big", macs=1),
        validation={},
        teacher=None,
        teacher_bonus=0.0,
        teachers_validation={},
    )
    write_agent_info(directory, info)


def test_an_agent_json_edited_after_training(work: Path, capsys: pytest.CaptureFixture) -> None:
    """agent.json's observation candidates 1 → 5 for weights trained with 1: the network would
    read the first features of a longer observation and decide without a word; a reference that
    is no rule baseline, a placement on a type the system lacks; an agent of older features."""
    from relmas.rl.agent import AGENT_FILE

    small_agent(work / "agent")
    argv = simulate_argv()[:-4] + ["--policy", "relmas", "--agent", "agent"]
    assert run_main([*argv, "--out", "trained.parquet"], capsys)[0] == 0
    raw = json.loads((work / "agent" / AGENT_FILE).read_text())
    raw["observation"]["candidates"] = 5
    (work / "agent" / AGENT_FILE).write_text(json.dumps(raw))
    line = assert_refused([*argv, "--out", "edited.parquet"], work, capsys, "agent.json")
    assert "observation.candidates: expected 1 (best.pt's network was trained with" in line
    assert line.endswith("got 5")
    for key, value in (("reference", "sjf"), ("placement", "big+tpu")):  # not a rule, no tpu
        edited = {**raw, "observation": {**raw["observation"], "candidates": 1, key: value}}
        (work / "agent" / AGENT_FILE).write_text(json.dumps(edited))
        line = assert_refused([*argv, "--out", f"{key}.parquet"], work, capsys, "agent.json")
        assert key in line, line
    # an agent trained on the features before the (slot, type) actions, one whose decisions
    # were priced before the rows scored, one before its keeper's plans
    for old in ("relmas-agent/2", "relmas-agent/3", "relmas-agent/3.2"):
        (work / "agent" / AGENT_FILE).write_text(json.dumps({**raw, "format": old}))
        line = assert_refused([*argv, "--out", "old.parquet"], work, capsys, "agent.json")
        assert "format: expected 'relmas-agent/3.3'" in line, line
    # a decision cost without its part per row, or with a row that costs nothing
    for per_row in ({}, {**raw["decision_cost"]["per_row"], "energy_j": 0.0}):
        cost = {**raw["decision_cost"], "per_row": per_row}
        edited = {**raw, "observation": {**raw["observation"], "candidates": 1}}
        (work / "agent" / AGENT_FILE).write_text(json.dumps({**edited, "decision_cost": cost}))
        line = assert_refused([*argv, "--out", "cost.parquet"], work, capsys, "agent.json")
        assert "decision_cost.per_row." in line, line


def test_cost_tables_profiled_for_other_models(work: Path, capsys: pytest.CaptureFixture) -> None:
    """Cost tables profiled from the layer table of mobilenet_v2 at 96 px, read with a config
    that now says 128 px: every stage that reads them for the config refuses them in one line,
    naming the table (`relmas workload`, `relmas evaluate`), as `relmas profile` refuses the
    layer table itself."""
    from relmas.config import config_hash

    models = cli.load_configs(["config.yaml"])["models"]
    layers = pl.concat(
        [one_layer_table().with_columns(model=pl.lit(name)) for name in QUICK["models"]]
    )
    io.write_parquet(layers, "layers.parquet", metadata={"relmas.models_hash": config_hash(models)})
    for name in QUICK["accelerators"]:
        argv = ["profile", "--layers", "layers.parquet", "--accelerator", name]
        assert (
            run_main([*argv, "--config", "config.yaml", "--out", f"q/{name}.parquet"], capsys)[0]
            == 0
        )
    argv = ["workload", "--scenario", "mixed", "--seed", "1", "--costs", "q"]
    assert run_main([*argv, "--config", "config.yaml", "--out", "w.parquet"], capsys)[0] == 0
    larger = yaml.safe_load((work / "config.yaml").read_text())
    larger["models"]["mobilenet_v2"]["image_size"] = 128
    (work / "larger.yaml").write_text(yaml.safe_dump(larger))
    line = assert_refused(
        [*argv, "--config", "larger.yaml", "--out", "w2.parquet"], work, capsys, "eyeriss_168"
    )
    assert "metadata.relmas.models_hash" in line and "another `models:` config" in line
    argv = ["evaluate", "--config", "larger.yaml", "--scenario", "mixed", "--policy", "fcfs"]
    argv += ["--seed", "1", "--jobs", "w.parquet", "--costs", "q", "--out", "e.parquet"]
    assert_refused(argv, work, capsys, "q/eyeriss_168.parquet", "models_hash")
    argv = ["profile", "--layers", "layers.parquet", "--accelerator", "eyeriss_168"]
    argv += ["--config", "larger.yaml", "--out", "c.parquet"]
    assert_refused(argv, work, capsys, "layers.parquet", "models_hash", "re-run relmas zoo")


def test_times_too_far_from_zero(work: Path, capsys: pytest.CaptureFixture) -> None:
    """A job at 1e300 s gave STP = inf and 5e298 J; times beyond 2^32 s resolve no microsecond.
    (Epoch seconds are simulated relative to the trace's first second: tests/test_sim.py.)"""
    jobs = pl.read_parquet(work / "jobs.parquet")
    far = pl.when(pl.col("job_id") == jobs["job_id"][-1])
    for column, time in (("arrival_s", 1e300), ("deadline_s", 2.0**33)):
        late = far.then(time).otherwise(pl.col(column)).alias(column)
        if column == "arrival_s":
            late = [late, far.then(time).otherwise(pl.col("deadline_s")).alias("deadline_s")]
        jobs.with_columns(late).write_parquet(work / "far.parquet")
        line = assert_refused(simulate_argv("far.parquet"), work, capsys, "far.parquet", column)
        assert "finite" in line


def test_a_replayed_arrival_too_far_from_zero(work: Path, capsys: pytest.CaptureFixture) -> None:
    config = yaml.safe_load((work / "config.yaml").read_text())
    config["scenarios"]["mixed"]["arrival"] = {"process": "trace", "path": "replay.parquet"}
    (work / "replay.yaml").write_text(yaml.safe_dump(config))
    pl.DataFrame({"arrival_s": [0.0, 1.0, 1e300]}).write_parquet(work / "replay.parquet")
    argv = ["workload", "--config", "replay.yaml", "--scenario", "mixed", "--seed", "1"]
    argv += ["--costs", "qcosts", "--out", "w.parquet"]
    line = assert_refused(argv, work, capsys, "replay.parquet", "arrival_s")
    assert "finite Float64 values in [0, 2^32]" in line


def test_a_trace_whose_every_job_is_dropped(work: Path, capsys: pytest.CaptureFixture) -> None:
    """Firm deadlines that no job can meet: validate and evaluate write the metrics of the
    finished jobs (ANTT, fairness) as null, undefined, never NaN; the pipeline's next readers
    take their files (evaluate's placements, the report's contract and means)."""
    config = yaml.safe_load((work / "config.yaml").read_text())
    scenario = config["scenarios"]["mixed"]
    scenario["deadline"] = {"firm": True}
    for tenant in scenario["tenants"]:
        tenant["slack"] = 1e-6
    config["evaluation"].update(policies=["fcfs", "edf_feasible"], placements=["bandwidth"])
    config["training"] = {"validation_seeds": [100]}
    (work / "hopeless.yaml").write_text(yaml.safe_dump(config))
    common = ["--config", "hopeless.yaml", "--scenario", "mixed", "--costs", "qcosts"]
    code, err = run_main(["validate", *common, "--out", "v.parquet"], capsys)
    assert code == 0, err
    code, err = run_main(["workload", *common, "--seed", "1", "--out", "h.parquet"], capsys)
    assert code == 0, err
    argv = ["evaluate", *common, "--policy", "edf_feasible", "--policy", "fcfs", "--seed", "1"]
    argv += ["--jobs", "h.parquet", "--placements", "v.parquet", "--out", "{policy}.parquet"]
    code, err = run_main(argv, capsys)
    assert code == 0, err
    paths = ["v.parquet", "edf_feasible.summary.parquet", "fcfs.summary.parquet"]
    rows = collect_summaries([work / path for path in paths])
    assert rows.height > 2 and (rows["dropped"] == rows["jobs"]).all()
    assert rows["antt"].is_null().all() and rows["fairness"].is_null().all()
    assert (rows["sla_rate"] == 0).all() and (rows["stp"] == 0).all()
    means = aggregate(rows)
    assert means["antt"].is_nan().all() and mean_text(means["antt"][0], math.nan) == "n/a"
    assert not means["sla_rate"].is_nan().any()
    # a null where a job finished is no run's: the contract still refuses it
    edited = rows.with_columns(dropped=pl.lit(0, pl.Int64))
    edited.write_parquet(work / "edited.parquet")
    with pytest.raises(InputError, match=r"edited\.parquet.*antt"):
        collect_summaries([work / "edited.parquet"])


# ----------------------------------------------------------------------------- issue 39


class _RunsCode:
    """A pickled payload that would run code when unpickled (`touch PWNED`)."""

    def __reduce__(self) -> tuple:
        return (os.system, ("touch PWNED",))


def test_a_pickled_agent_is_refused_in_one_line_without_a_warning(work: Path) -> None:
    """A best.pt that is a plain pickle (protocol 4, no torch archive): torch's weights-only
    loader printed a two-line UserWarning about the protocol before the refusal. Run as its own
    process: pytest would catch the warning before it reached stderr."""
    import pickle

    small_agent(work / "agent")
    (work / "agent" / "best.pt").write_bytes(pickle.dumps(_RunsCode(), protocol=4))
    argv = simulate_argv()[:-2] + ["--policy", "relmas", "--agent", "agent", "--out", "o.parquet"]
    before = files(work)
    done = subprocess.run(
        [sys.executable, "-m", "relmas", *argv], cwd=work, capture_output=True, text=True
    )
    lines = [line for line in done.stderr.splitlines() if not MLFLOW_LOG.match(line)]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "best.pt" in lines[0] and "weights-only checkpoint" in lines[0], lines[0]
    assert files(work) == before and not (work / "PWNED").exists()


def test_a_system_naming_a_cost_table_outside_its_directory(
    work: Path, capsys: pytest.CaptureFixture
) -> None:
    """An instance name of `relmas simulate --system` names its cost table in `--costs`."""
    system = yaml.safe_load((work / "system.yaml").read_text())
    system["instances"][1]["name"] = "../../small"
    (work / "bad.yaml").write_text(yaml.safe_dump(system))
    argv = ["simulate", "--system", "bad.yaml", "--jobs", "jobs.parquet", "--costs", "costs"]
    argv += ["--policy", "edf", "--out", "out.parquet"]
    line = assert_refused(argv, work, capsys, "bad.yaml", "instances[1].name", "'../../small'")
    assert "expected a name matching" in line


@pytest.mark.slow
def test_snakemake_refuses_a_scenario_name_before_planning(tmp_path: Path) -> None:
    """A scenario named `../../../../x` passed the DAG and its workload rule wrote seed1000.parquet
    four directories up; one named `$(touch PWNED)/x` gave a MissingInputException in rule sweep.
    Both are one line naming the file and the key, exit 2, before any job is planned."""
    from tests.test_pipeline import SNAKEMAKE

    project = tmp_path / "a" / "b" / "c" / "d"
    project.mkdir(parents=True)
    for name in ("Snakefile", "workflow", "config"):
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy2)(ROOT / name, project / name)
    env = dict(os.environ, MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'mlflow.db'}")
    for name in ("../../../../x", "$(touch PWNED)/x"):
        config = yaml.safe_load((ROOT / "config" / "quick.yaml").read_text())
        rename("scenarios", "mixed", name)(config)
        (project / "bad.yaml").write_text(yaml.safe_dump(config))
        before = set(tmp_path.rglob("*"))
        done = subprocess.run(
            [str(SNAKEMAKE), "-n", "--configfile", "bad.yaml"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
        )
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, done.stderr
        assert "bad.yaml: scenarios: expected a name matching" in lines[0], lines[0]
        assert repr(name) in lines[0]
        assert set(tmp_path.rglob("*")) == before


# ---------------------------------------------- issue 39: what a stage reads is checked, and sized


def bound_argv(jobs: str = "trace.parquet", costs: str = "qcosts") -> list[str]:
    argv = ["bound", "--config", "config.yaml", "--scenario", "mixed", "--seed", "1"]
    return [*argv, "--jobs", jobs, "--costs", costs, "--out", "b.parquet"]


def rewrite_cost_table(path: Path, change: pl.Expr, keep_metadata: bool = True) -> None:
    """`path` with `change` applied, its provenance kept (or dropped, as a hand-made copy)."""
    metadata = io.read_metadata(path) if keep_metadata else None
    io.write_parquet(pl.read_parquet(path).with_columns(change), path, metadata=metadata)


def test_a_layer_latency_of_1e300_is_refused(work: Path, capsys: pytest.CaptureFixture) -> None:
    """Issue 39, item 2: makespan 1e300 and a moved SLA rate, from one absurd layer latency."""
    path = cost_table(work / "qcosts", "simba_chiplet")
    first = pl.int_range(pl.len()) == 0
    rewrite_cost_table(path, pl.when(first).then(1e300).otherwise("latency_s").alias("latency_s"))
    argv = evaluate_argv("--jobs", "trace.parquet", "--out", "r.parquet")
    line = assert_refused(argv, work, capsys, "simba_chiplet.parquet", "latency_s", "1e+300")
    assert "row 0" in line
    assert_refused(bound_argv(), work, capsys, "simba_chiplet.parquet", "latency_s", "1e+300")


def test_a_latency_that_is_not_its_cycles_at_the_clock_is_refused(
    work: Path, capsys: pytest.CaptureFixture
) -> None:
    """Issue 48, item 6b: a cost table records the spec it was profiled for, and so its clock; a
    latency edited away from its cycles at that clock (doubled, in row 3) is refused wherever the
    table is read. Tables without a recorded spec (examples/handwritten) have no clock to check."""
    path = cost_table(work / "qcosts", "simba_chiplet")
    third = pl.int_range(pl.len()) == 3
    rewrite_cost_table(path, pl.when(third).then(pl.col("latency_s") * 2).otherwise("latency_s"))
    argv = evaluate_argv("--jobs", "trace.parquet", "--out", "r.parquet")
    for command in (argv, bound_argv()):
        line = assert_refused(command, work, capsys, "simba_chiplet.parquet", "latency_s", "row 3")
        assert "expected cycles / (1 GHz x 1e9) within 1e-06 of it" in line, line


def test_bound_refuses_a_cost_table_without_provenance_as_evaluate_does(
    work: Path, capsys: pytest.CaptureFixture
) -> None:
    """Issue 39, item 3: the same tables, loaded by the same path, by evaluate and bound."""
    rewrite_cost_table(cost_table(work / "qcosts", "eyeriss_168"), [], keep_metadata=False)
    argv = evaluate_argv("--jobs", "trace.parquet", "--out", "r.parquet")
    for command in (argv, bound_argv()):
        assert_refused(command, work, capsys, "eyeriss_168.parquet", "metadata.", "missing")


def test_bound_refuses_a_trace_of_an_unknown_tenant_as_evaluate_does(
    work: Path, capsys: pytest.CaptureFixture
) -> None:
    trace = pl.read_parquet(work / "trace.parquet")
    trace.with_columns(tenant=pl.lit("nobody")).write_parquet(work / "bad.parquet")
    argv = evaluate_argv("--jobs", "bad.parquet", "--out", "r.parquet")
    for command in (argv, bound_argv("bad.parquet")):
        assert_refused(command, work, capsys, "bad.parquet", "tenant", "nobody")


def test_a_trace_of_a_million_and_one_jobs_is_refused_before_it_is_read(
    work: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 39, item 4: evaluate reached 10.9 GB and bound 6.4 GB on such a trace; its footer
    says how many rows it has, and every reader of traces asks it first."""
    row = pl.read_parquet(work / "trace.parquet").head(1)
    big = row.select(pl.all().repeat_by(1_000_001).explode())
    big = big.with_columns(job_id=pl.int_range(pl.len(), dtype=pl.Int64))
    big.write_parquet(work / "huge.parquet")
    read = io.pl.read_parquet

    def refuse_big(source: Any, *args: Any, **kwargs: Any) -> pl.DataFrame:
        assert Path(source).name != "huge.parquet", "the oversized trace was read"
        return read(source, *args, **kwargs)

    monkeypatch.setattr(io.pl, "read_parquet", refuse_big)
    expected = "huge.parquet: expected at most 1000000 rows, got 1000001"
    argv = evaluate_argv("--jobs", "huge.parquet", "--out", "r.parquet")
    for command in (argv, bound_argv("huge.parquet")):
        assert_refused(command, work, capsys, expected)
    jobs = pl.read_parquet(work / "jobs.parquet").head(1)
    jobs.select(pl.all().repeat_by(1_000_001).explode()).write_parquet(work / "huge.parquet")
    assert_refused(simulate_argv("huge.parquet"), work, capsys, expected)
