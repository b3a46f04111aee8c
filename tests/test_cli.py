"""The command line as a user meets it: real subprocesses, real files, one-line errors, exit 2."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml

from relmas.schemas import COST_SCHEMA

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "handwritten"


def relmas(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "relmas", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=dict(os.environ),
    )


@pytest.fixture
def handwritten(tmp_path: Path) -> Path:
    """The README's hand-written example, made in a scratch copy."""
    for name in ("system.yaml", "make_inputs.py"):
        shutil.copy2(EXAMPLE / name, tmp_path / name)
    subprocess.run([sys.executable, str(tmp_path / "make_inputs.py")], check=True)
    return tmp_path


def simulate(directory: Path, jobs: str = "jobs.parquet", policy: str = "edf"):
    return relmas(
        "simulate",
        "--system",
        "system.yaml",
        "--jobs",
        jobs,
        "--costs",
        "costs",
        "--policy",
        policy,
        "--out",
        "out.parquet",
        cwd=directory,
    )


def test_simulate_runs_the_handwritten_example(handwritten: Path) -> None:
    proc = simulate(handwritten)
    assert proc.returncode == 0, proc.stderr
    results = pl.read_parquet(handwritten / "out.parquet")
    assert sorted(results["job_id"]) == [0, 1, 2, 3, 4]
    assert (results["finish_s"] >= results["arrival_s"] + results["isolated_s"] - 1e-12).all()
    assert "sla_rate" in proc.stdout


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            pl.col("deadline_s") - 1.0,
            "jobs.parquet: deadline_s: expected deadlines not before arrival_s",
        ),
        (
            pl.col("arrival_s") - 1.0,
            "jobs.parquet: arrival_s: expected finite Float64 values in [0, 2^32]",
        ),
    ],
)
def test_simulate_rejects_bad_traces_in_one_line(handwritten: Path, change, message) -> None:
    jobs = pl.read_parquet(handwritten / "jobs.parquet")
    column = "deadline_s" if "deadline" in message else "arrival_s"
    jobs.with_columns(change.alias(column)).write_parquet(handwritten / "bad.parquet")
    proc = simulate(handwritten, jobs="bad.parquet")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and message.replace("jobs", "bad") in proc.stderr
    assert not (handwritten / "out.parquet").exists()


def test_simulate_rejects_unknown_model_and_accelerator(handwritten: Path) -> None:
    jobs = pl.read_parquet(handwritten / "jobs.parquet")
    jobs.with_columns(model=pl.lit("gpt5")).write_parquet(handwritten / "bad.parquet")
    proc = simulate(handwritten, jobs="bad.parquet")
    assert proc.returncode == 2 and "bad.parquet: model: expected one of" in proc.stderr
    system = yaml.safe_load((handwritten / "system.yaml").read_text())
    system["instances"][0]["name"] = "tpu"
    (handwritten / "system.yaml").write_text(yaml.safe_dump(system))
    proc = simulate(handwritten)
    assert proc.returncode == 2
    assert (
        "system.yaml: instances[0].name: expected an accelerator with a cost table" in proc.stderr
    )


def test_profile_with_a_spec_file(tmp_path: Path, quick_config: Path) -> None:
    config = yaml.safe_load(quick_config.read_text())
    spec = dict(config["accelerators"]["eyeriss_168"], name="my_eyeriss")
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    layers = pl.DataFrame(
        {
            "model": ["m"],
            "layer": [0],
            "name": ["conv"],
            "op": ["conv"],
            "N": [1],
            "K": [16],
            "C": [8],
            "Y": [14],
            "X": [14],
            "R": [3],
            "S": [3],
            "stride": [1],
            "groups": [1],
            "macs": [16 * 8 * 14 * 14 * 9],
            "in_elems": [8 * 16 * 16],
            "w_elems": [16 * 8 * 9],
            "out_elems": [16 * 14 * 14],
        }
    ).with_columns(
        pl.col(c).cast(pl.Int32)
        for c in ("layer", "N", "K", "C", "Y", "X", "R", "S", "stride", "groups")
    )
    layers.write_parquet(tmp_path / "layers.parquet")
    args = ("profile", "--layers", "layers.parquet", "--spec", "spec.yaml", "--out")
    proc = relmas(*args, "c.parquet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    table = pl.read_parquet(tmp_path / "c.parquet")
    assert dict(table.schema) == COST_SCHEMA
    assert table["accelerator"].to_list() == ["my_eyeriss"]

    spec["pe_rows"] = 0
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    proc = relmas(*args, "d.parquet", cwd=tmp_path)
    assert proc.returncode == 2 and "spec.yaml: pe_rows: expected" in proc.stderr
    assert not (tmp_path / "d.parquet").exists()


def test_unknown_scenario_is_named(tmp_path: Path, quick_config: Path) -> None:
    proc = relmas(
        "workload",
        "--config",
        str(quick_config),
        "--scenario",
        "nope",
        "--seed",
        "1",
        "--out",
        "w.parquet",
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert (
        "--scenario: expected one of the configured scenarios ['mixed'], got 'nope'" in proc.stderr
    )


def test_sweep_names_an_unknown_sweep(tmp_path: Path, quick_config: Path) -> None:
    args = ("--sweep", "nope", "--value", "1", "--out", "s.parquet")
    proc = relmas("sweep", "--config", str(quick_config), *args, cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "--sweep: expected one of the configured sweeps ['bandwidth', 'load'], got 'nope'" in (
        proc.stderr
    )
    assert not (tmp_path / "s.parquet").exists()


def test_left_out_paths_default_under_the_configs_results(quick_config: Path) -> None:
    """A command run by hand finds the files of the study it is given (its `results:`)."""
    from relmas.cli import _fill_result_defaults, build_parser
    from relmas.config import load_config

    root = Path(load_config(quick_config)["results"])
    assert root == Path("results/quick")
    argv = ["report", "--config", str(quick_config), "--out", "elsewhere"]
    args = build_parser().parse_args(argv)
    _fill_result_defaults(args)
    assert (args.eval, args.costs, args.out) == (root / "eval", root / "costs", Path("elsewhere"))
    argv = ["evaluate", "--config", str(quick_config), "--scenario", "mixed", "--policy", "edf"]
    args = build_parser().parse_args([*argv, "--seed", "1", "--out", "x.parquet"])
    _fill_result_defaults(args)
    assert args.jobs == str(root / "workloads" / "{scenario}" / "seed{seed}.parquet")


def test_an_output_over_an_input_is_refused_however_spelled(handwritten: Path) -> None:
    """`--out` naming the trace through a symbolic link and `..`: one line, exit 2, and the trace
    and the link are as they were (an atomic write would have replaced the link by results)."""
    (handwritten / "sub").mkdir()
    (handwritten / "sub" / "link.parquet").symlink_to(handwritten / "jobs.parquet")
    trace = (handwritten / "jobs.parquet").read_bytes()
    proc = relmas(
        "simulate",
        "--system",
        "system.yaml",
        "--jobs",
        "jobs.parquet",
        "--costs",
        "costs",
        "--policy",
        "edf",
        "--out",
        "costs/../sub/link.parquet",
        cwd=handwritten,
    )
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert (
        "costs/../sub/link.parquet: --out: expected a path that is not also --jobs" in proc.stderr
    )
    assert (handwritten / "jobs.parquet").read_bytes() == trace
    assert (handwritten / "sub" / "link.parquet").is_symlink()
