"""benchmarks/bench_study.py: a study's job time per stage from Snakemake's benchmark files."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def bench(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["bench_study.py", *argv])
    runpy.run_path(str(ROOT / "benchmarks" / "bench_study.py"), run_name="__main__")


def write(path: Path, wall: float, cpu: float | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + f"{wall}\t0:00:01\t1\t1\t1\t1\t0\t0\t50\t{cpu}\n")


def test_the_stages_sum_their_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    write(tmp_path / "benchmarks" / "train" / "a" / "relmas.tsv", 70.4, 43.5)
    write(tmp_path / "benchmarks" / "train" / "b" / "relmas.tsv", 20.0, 15.0)
    write(tmp_path / "benchmarks" / "zoo.tsv", 7.0, 6.6)
    write(tmp_path / "benchmarks" / "report.tsv", 0.4, "NA")  # ended before the first sample
    bench(["--study", str(tmp_path)], monkeypatch)
    lines = capsys.readouterr().out.splitlines()
    assert "| train | 2 | 90 | 58 | 0 |" in lines and "| zoo | 1 | 7 | 7 | 0 |" in lines
    assert "| report | 1 | 0 | 0 | 1 |" in lines
    assert lines[-1] == "| total | 4 | 98 | 65 | 1 |"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "--study: expected a study's results with its benchmarks/"),
        ("", "expected a Snakemake benchmark file with a row"),
        (HEADER + "1.0\t0\t1\t1\t1\t1\t0\t0\t50\tmany\n", "s, cpu_time: expected numbers"),
    ],
)
def test_a_bad_study_is_refused_in_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    content: str | None,
    expected: str,
) -> None:
    if content is not None:
        (tmp_path / "benchmarks").mkdir()
        (tmp_path / "benchmarks" / "zoo.tsv").write_text(content)
    with pytest.raises(SystemExit) as exit_:
        bench(["--study", str(tmp_path)], monkeypatch)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith("bench_study.py: error:") and expected in err
