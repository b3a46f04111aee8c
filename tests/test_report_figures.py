"""The report people read: one colour per policy in every figure, policies grouped by kind, no
interval with one seed, readable axes, and `snakemake --report` holding every figure and table."""

from __future__ import annotations

import base64
import json
import math
import re
import subprocess
from pathlib import Path

import matplotlib
import polars as pl
import pytest
from matplotlib.collections import FillBetweenPolyCollection
from matplotlib.colors import to_hex
from matplotlib.container import BarContainer, ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from relmas import catalog
from relmas.ceiling.rows import policy_rows
from relmas.config import load_config
from relmas.figures import palette
from relmas.figures.contents import report_figures
from relmas.figures.results import plot_best_by_kind, plot_sweep, thousands
from relmas.paths import ResultPaths
from relmas.report import aggregate, mean_ci, mean_text, write_report
from relmas.report.stats import METRICS, ceiling_means, differing_window, shown_policies
from relmas.report.tables import sweeps_markdown
from tests.test_pipeline import SNAKEMAKE, results_root


def test_every_catalog_policy_has_a_group_and_its_own_colour() -> None:
    colours = palette.colours()
    assert set(colours) == set(catalog.names())
    competitors = [p for p in catalog.names() if p not in catalog.floors()]
    assert len({colours[p] for p in competitors}) == len(competitors)
    # the learned policies are drawn in colours no other group uses
    learned = {colours[p] for p in catalog.learned()}
    assert not learned & {colours[p] for p in catalog.names() if p not in catalog.learned()}


def test_policies_are_grouped_by_kind_in_catalog_order() -> None:
    shown = ["relmas", "sjf", "ga_offline", "random", "gacer", "fcfs", "relmas_resize"]
    assert palette.order(shown) == [
        "fcfs",
        "sjf",
        "random",
        "gacer",
        "ga_offline",
        "relmas",
        "relmas_resize",
    ]


def test_one_seed_has_no_interval() -> None:
    mean, half = mean_ci([0.7])
    assert mean == 0.7 and math.isnan(half)
    assert mean_text(0.7, half) == "0.700"
    assert mean_text(0.7, 0.05) == "0.700 ± 0.050"


def sweep_rows() -> pl.DataFrame:
    """A sweep's points as `relmas sweep` writes them: fcfs and sjf on two seeds at two loads,
    and each trace's ceiling row."""
    rates = {"fcfs": (0.6, 0.4), "sjf": (0.7, 0.5), "ceiling": (0.9, 0.8)}
    rows = [
        {
            "policy": policy,
            "kind": "ceiling" if policy == "ceiling" else "heuristic",
            "value": value,
            "seed": seed,
            "sla_rate": rates[policy][index] + seed / 100,
            "antt": None if policy == "ceiling" else 2.0,
        }
        for policy in rates
        for index, value in enumerate((0.5, 1.5))
        for seed in (1, 2)
    ]
    frame = pl.DataFrame(rows).with_columns(sweep=pl.lit("load"), jobs=pl.lit(100))
    return frame.with_columns([pl.col("antt").alias(m) for m in METRICS if m not in frame.columns])


def test_a_sweep_figure_draws_the_ceiling_as_a_reference_not_a_policy() -> None:
    sweeps = sweep_rows()
    points = aggregate(policy_rows(sweeps), by=("value", "policy"))
    fig = plot_sweep(points, "load", "load", None, ceiling_means(sweeps))
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    assert set(lines) == {"fcfs", "sjf", "ceiling (proven)"}
    ceiling = lines["ceiling (proven)"]
    assert list(ceiling.get_xdata()) == [0.5, 1.5]
    assert list(ceiling.get_ydata()) == pytest.approx([0.915, 0.815])  # mean of the seeds
    assert ceiling.get_linestyle() == "--"
    assert to_hex(ceiling.get_color()) == palette.CEILING_STYLE["color"]
    assert "ceiling (proven)" in fig.axes[0].get_legend_handles_labels()[1]
    assert policy_colours(fig) == {p: {palette.colour(p)} for p in ("fcfs", "sjf")}
    # the table counts the policies only; the headroom is ceiling − best policy at each value
    figures = {"sweep_load": Path("/r/figures/sweep_load.png")}
    config = {"sweeps": {"load": {"scenario": "mixed", "parameter": "load", "values": [0.5, 1.5]}}}
    text = "\n".join(sweeps_markdown(config, sweeps, figures, Path("/r")))
    assert "| ceiling |" not in text and "| sjf |" in text
    assert "Headroom on load (ceiling − best policy, SLA points): +20.0 at 0.5 (sjf), +30.0" in text


def test_training_steps_read_in_thousands() -> None:
    assert [thousands(v) for v in (0, 500, 20000, 1_500_000)] == ["0", "500", "20k", "1.5M"]


def policy_colours(fig: Figure) -> dict[str, set[str]]:
    """The colours a figure gives each policy: its legend entries (bars, lines) and panel titles
    named after a policy."""
    found: dict[str, set[str]] = {}
    names = set(catalog.names())
    for ax in fig.axes:
        handles, labels = ax.get_legend_handles_labels()
        for handle, label in zip(handles, labels, strict=True):
            if label in names:
                found.setdefault(label, set()).add(to_hex(artist_colour(handle)))
        title = ax.get_title().split(" ")[0] if ax.get_title() else ""
        if title in names:
            found.setdefault(title, set()).add(to_hex(ax.title.get_color()))
    return found


def artist_colour(handle: object) -> object:
    """The colour of a legend handle: a bar's face, a line's colour."""
    if isinstance(handle, BarContainer):
        return handle.patches[0].get_facecolor()
    if isinstance(handle, Line2D):
        return handle.get_color()
    return handle.get_facecolor()


def intervals(fig: Figure) -> int:
    """Error bars and confidence bands (fill_between) drawn in a figure."""
    count = 0
    for ax in fig.axes:
        count += sum(
            getattr(c, "errorbar", None) is not None or isinstance(c, ErrorbarContainer)
            for c in ax.containers
        )
        count += sum(isinstance(c, FillBetweenPolyCollection) for c in ax.collections)
    return count


@pytest.mark.slow
def test_every_figure_gives_a_policy_the_same_colour_and_one_seed_no_interval(
    quick_run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Draw the quick study's report again, recording each figure as it is saved."""
    project, _, _ = quick_run
    config = load_config(project / "config" / "quick.yaml")
    assert len(config["evaluation"]["seeds"]) == 1
    paths = ResultPaths(results_root(project))
    drawn: dict[str, Figure] = {}
    savefig = Figure.savefig

    def recording(fig: Figure, fname, *args, **kwargs):
        drawn[Path(fname).name] = fig
        return savefig(fig, fname, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", recording)
    made = write_report(
        config,
        "quick.yaml",
        paths.eval_dir,
        paths.costs_dir,
        paths.workloads_dir,
        tmp_path,
        sweeps_dir=paths.sweeps_dir,
        agents_dir=paths.agents_dir,
        validation_dir=paths.validation_dir,
        bounds_dir=paths.bounds_dir,
    )
    assert set(made["figures"]) == {figure.name for figure in report_figures(config)}
    colours: dict[str, set[str]] = {}
    with_policies = set()
    for name, fig in drawn.items():
        for policy, seen in policy_colours(fig).items():
            colours.setdefault(policy, set()).update(seen)
            with_policies.add(name)
        assert intervals(fig) == 0, name
    # bars, tenants, sweeps, learning curves and the Gantt chart's panel titles
    assert len(with_policies) >= 10
    assert set(config["evaluation"]["policies"]) <= set(colours)
    assert colours == {policy: {palette.colour(policy)} for policy in colours}
    assert matplotlib.get_backend().lower() == "agg"
    report = (tmp_path / "report.md").read_text()
    assert "±" not in report and "n = 1" in report


@pytest.mark.slow
def test_snakemake_report_holds_every_figure_and_the_tables(quick_run) -> None:
    """`snakemake --report` for the config given on the command line, with no warning."""
    project, env, _ = quick_run
    proc = subprocess.run(
        [str(SNAKEMAKE), "--report", "quick.html", "--configfile", "config/quick.yaml"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    warnings = [
        line for line in proc.stderr.splitlines() if re.search("warn|missing|could not", line, re.I)
    ]
    assert not warnings, warnings[:5]
    html = (project / "quick.html").read_text()
    # the report's files: a JSON object of path -> name, caption, data URI, ...
    results = json.loads(re.search(r"var results = (\{.*?\});\s*\n", html, re.S)[1])
    paths = ResultPaths(results_root(project).relative_to(project))
    config = load_config(project / "config" / "quick.yaml")
    expected = {str(paths.figure(figure.name)) for figure in report_figures(config)}
    expected |= {str(paths.report_dir / name) for name in ("report.html", "summary.parquet")}
    assert set(results) == expected
    uri = results[str(paths.report_dir / "report.html")]["data_uri"]
    page = base64.b64decode(uri.split(",", 1)[1]).decode()
    assert "<table>" in page and "SLA satisfaction rate" in page


def test_the_sla_figure_draws_the_best_of_each_kind_chosen_on_validation() -> None:
    """Issue 39, item 14: 42 bars per scenario and a 40-entry legend. Per scenario one dot per
    kind (its best on validation, not on evaluation), the offline bound, every learned policy,
    and the proven ceiling as a mark."""
    rates = {
        "fcfs": 0.5,
        "sjf": 0.6,
        "edf": 0.7,  # the best heuristic on evaluation, not on validation
        "random": 0.9,  # the floor: never a kind's best
        "sjf_feasible": 0.75,
        "edf_feasible": 0.72,
        "gacer": 0.65,
        "ga_offline": 0.95,
        "relmas": 0.8,
        "relmas_resize": 0.78,
    }
    rows = [
        {"scenario": "mixed", "policy": p, "seed": seed, "sla_rate": rate + seed / 100}
        for p, rate in rates.items()
        for seed in (1, 2)
    ]
    summary = pl.DataFrame(rows).with_columns(
        [pl.lit(1.0).alias(m) for m in METRICS if m != "sla_rate"]
    )
    validation = summary.filter(pl.col("policy").is_in(catalog.online_baselines()))
    validation = validation.with_columns(
        sla_rate=pl.when(pl.col("policy") == "sjf").then(0.99).otherwise(pl.col("sla_rate")),
        shortfall=pl.lit(None, pl.Float64),
    )
    shown = shown_policies(aggregate(summary), validation, ["mixed"])
    assert shown == {
        "mixed": ["sjf", "sjf_feasible", "gacer", "ga_offline", "relmas", "relmas_resize"]
    }
    fig = plot_best_by_kind(aggregate(summary), shown, {"mixed": 0.97})
    (ax,) = fig.axes
    dots = {line.get_label(): line for line in ax.get_lines() if line.get_marker() == "o"}
    assert list(dots) == shown["mixed"]
    assert dots["sjf"].get_xdata()[0] == pytest.approx(0.615)
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "heuristic",
        "rule",
        "search",
        "ga_offline",
        "relmas",
        "relmas_resize",
    ]
    assert intervals(fig) == len(shown["mixed"])
    (ceiling,) = [line for line in ax.get_lines() if line.get_label() == "ceiling (proven)"]
    assert list(ceiling.get_xdata()) == [0.97, 0.97] and ceiling.get_linestyle() == "--"
    assert policy_colours(fig) == {p: {palette.colour(p)} for p in shown["mixed"]}


def test_each_sla_panel_has_its_own_rows_and_rates_within_0_and_1() -> None:
    """Issue 48, item 7: the SLA rate figure kept an empty target-aware and ga_offline row in the
    panels of scenarios that evaluated neither, and vision_light's axis ran past a rate of 1 (the
    interval of a mean near 1 reaches beyond it)."""
    rates = {
        "services": {"sjf_feasible": 0.8, "sjf_feasible_deficit": 0.85, "ga_offline": 0.9},
        "vision_light": {"sjf": 0.97, "sjf_feasible": 0.985, "relmas": 0.99},
    }
    rows = [
        {"scenario": s, "policy": p, "seed": seed, "sla_rate": min(1.0, rate + (seed - 2) / 100)}
        for s, of_scenario in rates.items()
        for p, rate in of_scenario.items()
        for seed in (1, 2, 3)
    ]
    summary = pl.DataFrame(rows).with_columns(
        [pl.lit(1.0).alias(m) for m in METRICS if m != "sla_rate"]
    )
    aggregated = aggregate(summary)
    assert aggregated.filter(pl.col("policy") == "relmas")["sla_rate_ci95"][0] > 0.01  # past 1
    shown = {scenario: list(of_scenario) for scenario, of_scenario in rates.items()}
    fig = plot_best_by_kind(aggregated, shown, {"services": 0.95, "vision_light": 1.0})
    panels = {ax.get_title(): ax for ax in fig.axes}
    kinds = {
        scenario: [t.get_text() for t in ax.get_yticklabels()] for scenario, ax in panels.items()
    }
    assert kinds == {
        "services": ["rule", "target-aware", "ga_offline"],
        "vision_light": ["heuristic", "rule", "relmas"],
    }
    for ax in panels.values():
        assert 0.0 <= ax.get_xlim()[0] < ax.get_xlim()[1] <= 1.0, ax.get_xlim()
        bars = [c.lines[2][0] for c in ax.containers if isinstance(c, ErrorbarContainer)]
        ends = [x for bar in bars for segment in bar.get_segments() for x in segment[:, 0]]
        assert len(bars) == 3 and min(ends) >= 0.0 and max(ends) <= 1.0, ends


def per_job(met: list[bool]) -> pl.DataFrame:
    return pl.DataFrame(
        {"job_id": range(len(met)), "arrival_s": [0.1 * i for i in range(len(met))], "met": met}
    )


def test_the_gantt_window_is_where_relmas_and_its_best_baseline_differ_most() -> None:
    """Issue 39, item 14: the Gantt chart showed the first jobs of vision_light, where every
    policy meets every deadline. Of every window of N jobs by arrival of every trace: the largest
    |met by relmas − met by the best baseline|; ties to the first scenario, seed and window."""
    same = per_job([True] * 10)
    results = {
        **{("light", p, n): same for p in ("relmas", "sjf") for n in (1, 2)},
        ("heavy", "relmas", 1): per_job([True] * 4 + [False] * 3 + [True] * 3),
        ("heavy", "sjf_feasible", 1): per_job([True] * 10),
        # the same difference, on a later seed: the earlier one wins
        ("heavy", "relmas", 2): per_job([False] * 3 + [True] * 7),
        ("heavy", "sjf_feasible", 2): per_job([True] * 10),
    }
    pairs = {"light": ("relmas", "sjf"), "heavy": ("relmas", "sjf_feasible")}
    window = differing_window(results, pairs, [1, 2], jobs=4)
    assert (window.scenario, window.seed, window.start) == ("heavy", 1, 3)
    assert window.job_ids == (3, 4, 5, 6)
    assert (window.agent_met, window.baseline_met) == (1, 4)
    # shuffled rows, the same window: jobs are ordered by arrival
    shuffled = {
        run: jobs.sample(fraction=1.0, shuffle=True, seed=5) for run, jobs in results.items()
    }
    assert differing_window(shuffled, pairs, [1, 2], jobs=4) == window
    # no difference anywhere: the first window of the first trace
    calm = differing_window(results, {"light": ("relmas", "sjf")}, [1], jobs=4)
    assert (calm.scenario, calm.start, calm.agent_met - calm.baseline_met) == ("light", 0, 0)
