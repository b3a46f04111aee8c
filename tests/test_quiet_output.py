"""What commands and library functions write besides their results: stderr carries nothing but
errors, and progress never lands in a script's output."""

from __future__ import annotations

import io

import pytest

from relmas import progress as progress_module
from relmas.hw import silicon
from relmas.progress import hidden, progress
from relmas.tracking import PIPELINE_ID_ENV


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
