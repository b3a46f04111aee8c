"""Report statistics: confidence intervals, the headline (the best baseline chosen on validation),
the ranking table."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch
import yaml

from relmas import catalog
from relmas.ceiling.rows import best_under, policy_rows, with_kinds
from relmas.config import load_config
from relmas.errors import InputError
from relmas.figures.results import plot_sweep
from relmas.io import write_parquet
from relmas.paths import evaluation_file, summary_of
from relmas.report import (
    aggregate,
    best_baselines,
    collect_summaries,
    collect_sweeps,
    generalisation_table,
    headline_sentences,
    headline_table,
    headline_tally,
    heuristic_ranking,
    interval,
    mean_ci,
    paired_ratio,
    read_validation,
    resizing_table,
    resizing_verdicts,
    split_generalisation,
    verdict,
)
from relmas.report.headline import headline_markdown
from relmas.rl.checkpoint import load_checkpoint
from relmas.rl.curve import CURVE, read_curve
from relmas.rl.train import train
from relmas.schemas import SUMMARY_SCHEMA
from relmas.sim.service import SERVICE_METRICS
from relmas.study import sweep_points
from tests.test_rl_dqn import TOY, make_chain, validate_chain


def summary(
    values: dict[str, list[float]], scenario: str = "mixed", agent: str | None = None
) -> pl.DataFrame:
    """Rows of `scenario` (learned policies with `agent`'s agent, the scenario's own if None)."""
    rows = [
        {
            "scenario": scenario,
            "policy": policy,
            "seed": seed,
            "sla_rate": value,
            "agent_scenario": (agent or scenario) if policy in catalog.learned() else None,
        }
        for policy, series in values.items()
        for seed, value in enumerate(series)
    ]
    metrics = ("antt", "stp", "fairness", "utilization", "energy_j", "decision_us")
    return pl.DataFrame(rows).with_columns(
        *(pl.lit(1.0).alias(m) for m in metrics),
        pl.lit(None, pl.String()).alias("placement"),  # as if no rule baseline ran
        # no drops (soft deadlines) and no targets
        *(
            pl.lit(0 if key == "dropped" else None, SUMMARY_SCHEMA[key]).alias(key)
            for key in ("dropped", *SERVICE_METRICS)
        ),
    )


def test_mean_ci_is_student_t() -> None:
    mean, half = mean_ci([1.0, 2.0, 3.0])
    assert mean == 2.0
    assert half == pytest.approx(4.302653 / 3**0.5, rel=1e-6)  # t(0.975, 2) * s / sqrt(n)
    assert math.isnan(mean_ci([0.7])[1])  # one seed: no interval


def validation(values: dict[str, list[float]], scenario: str = "mixed") -> pl.DataFrame:
    """Baselines' rows on the validation traces of `scenario` (seeds 100, 101, ...)."""
    return summary(values, scenario).with_columns(pl.col("seed") + 100)


def test_the_best_baseline_is_chosen_on_validation_not_on_evaluation() -> None:
    """edf is the best baseline on the evaluation traces, sjf on validation: the headline measures
    relmas against sjf; the former comparison (best heuristic after the fact) against edf."""
    chosen = best_baselines(
        validation(
            {
                "sjf": [0.7, 0.7],
                "edf": [0.6, 0.6],
                "random": [0.95, 0.95],  # a floor, never the best baseline
                "relmas": [0.99, 0.99],  # learned: not a baseline
            }
        )
    )
    assert chosen == {"mixed": ("sjf", pytest.approx(0.7))}
    frame = summary(
        {
            "sjf": [0.5, 0.6],
            "edf": [0.8, 0.8],
            "random": [0.9, 0.9],
            "ga_offline": [1.0, 1.0],
            "relmas": [0.55, 0.66],
        }
    )
    (row,) = headline_table(frame, chosen).iter_rows(named=True)
    assert (row["best_baseline"], row["best_heuristic"]) == ("sjf", "edf")
    assert row["baseline_validation_sla_rate"] == pytest.approx(0.7)
    assert row["baseline_sla_rate"] == pytest.approx(0.55)
    assert row["ratio"] == pytest.approx(1.1)
    # the per-seed ratio is 1.1 on both seeds, so every bootstrap resample gives 1.1
    assert row["ratio_ci_low"] == pytest.approx(1.1) == row["ratio_ci_high"]
    assert row["heuristic_ratio"] == pytest.approx(0.605 / 0.8)
    assert row["offline_ratio"] == pytest.approx(0.605)
    # the former comparison is in the table's row; below it only the offline share
    assert headline_sentences(headline_table(frame, chosen)) == [
        "Under 90% of ga_offline's SLA rate, the share aimed at: relmas on mixed (60% [55%, 66%]).",
    ]


def test_a_tie_on_validation_goes_to_the_first_baseline_in_catalog_order() -> None:
    tied = validation({"sjf": [0.5, 0.7], "fcfs": [0.7, 0.5], "edf": [0.1, 0.2]})
    assert catalog.online_baselines().index("fcfs") < catalog.online_baselines().index("sjf")
    assert best_baselines(tied)["mixed"][0] == "fcfs"
    assert best_baselines(tied.filter(pl.col("policy") != "fcfs"))["mixed"][0] == "sjf"


def test_with_targets_the_baseline_of_least_shortfall_is_chosen() -> None:
    """On a scenario whose traces carry targets: the online baseline of least mean shortfall, ties
    by the higher SLA rate, a rule that ignores the targets included (it is the stronger baseline
    when it falls short by less); without targets the SLA rate alone, as before."""
    rates = {
        "sjf_feasible": [0.9, 0.9],  # the best rate, not target-aware
        "edf_feasible": [0.5, 0.5],  # not target-aware, the least shortfall below
        "sjf_feasible_deficit": [0.7, 0.7],
        "sjf_feasible_tokens": [0.8, 0.8],
        "sjf_feasible_by_target": [0.6, 0.6],
    }
    shortfall = {
        "sjf_feasible": 0.03,
        "edf_feasible": 0.01,
        "sjf_feasible_deficit": 0.02,
        "sjf_feasible_tokens": 0.02,
        "sjf_feasible_by_target": 0.05,
    }
    rows = validation(rates).with_columns(shortfall=pl.col("policy").replace_strict(shortfall))
    assert best_baselines(rows)["mixed"] == ("edf_feasible", pytest.approx(0.5))
    # tokens and deficit tie at 0.02; tokens' rate is higher
    without_edf = rows.filter(pl.col("policy") != "edf_feasible")
    assert best_baselines(without_edf)["mixed"] == ("sjf_feasible_tokens", pytest.approx(0.8))
    assert best_baselines(validation(rates))["mixed"][0] == "sjf_feasible"


def test_headline_values_are_recomputed_from_the_summary_rows() -> None:
    """Means, ratio and paired interval of every row follow from the summary rows alone."""
    frame = pl.concat(
        [
            summary({"sjf": [0.4, 0.6, 0.5], "edf": [0.3, 0.7, 0.2], "relmas": [0.5, 0.5, 0.7]}),
            summary({"fcfs": [0.2, 0.3, 0.1], "relmas": [0.2, 0.4, 0.2]}, scenario="heavy"),
        ]
    )
    chosen = {"mixed": ("edf", 0.9), "heavy": ("fcfs", 0.25)}
    table = headline_table(frame, chosen, seed=3)
    assert table.select("scenario", "policy").rows() == [("mixed", "relmas"), ("heavy", "relmas")]
    rng = np.random.default_rng(3)
    for row in table.iter_rows(named=True):
        rows = frame.filter(pl.col("scenario") == row["scenario"]).sort("seed")
        ours = rows.filter(pl.col("policy") == "relmas")["sla_rate"].to_numpy()
        theirs = rows.filter(pl.col("policy") == row["best_baseline"])["sla_rate"].to_numpy()
        assert row["seeds"] == 3
        assert row["sla_rate"] == pytest.approx(ours.mean())
        assert row["baseline_sla_rate"] == pytest.approx(theirs.mean())
        assert row["baseline_validation_sla_rate"] == chosen[row["scenario"]][1]
        expected = paired_ratio(ours, theirs, rng)
        assert (row["ratio"], row["ratio_ci_low"], row["ratio_ci_high"]) == expected
        paired_ratio(ours, theirs, rng)  # the former comparison's draw (same rng, same order)
        assert row["ratio_ci_low"] < row["ratio"] < row["ratio_ci_high"]
    assert verdict(table.row(0, named=True)) == "ties"  # 1.417 [0.714, 3.500]: it contains 1
    assert table["offline_ratio"].to_list() == [None, None]


def test_verdicts_follow_the_interval_and_one_seed_prints_none(quick_config) -> None:
    chosen = {"mixed": ("sjf", 0.6)}
    short = headline_table(summary({"sjf": [0.5, 0.6], "relmas": [0.45, 0.54]}), chosen)
    assert verdict(short.row(0, named=True)) == "falls short of"  # 0.900 [0.900, 0.900]
    one = headline_table(summary({"sjf": [0.5], "relmas": [0.6]}), chosen)
    (row,) = one.iter_rows(named=True)
    assert row["seeds"] == 1 and verdict(row) == "beats"
    section = "\n".join(headline_markdown(load_config(quick_config), one))
    assert "Verdict by the ratio alone: one evaluation seed, so no interval (n = 1)." in section
    assert (
        "| mixed | relmas | sjf (0.600) | — | 0.500 | 0.600 | 1.200 (n = 1) | beats | "
        "sjf (0.500) | 1.200 (n = 1) | beats |" in section
    )
    assert "n/a" not in section
    two = summary({"sjf": [0.5], "relmas": [0.6], "relmas_resize": [0.45], "ga_offline": [0.7]})
    assert headline_sentences(headline_table(two, chosen)) == [
        "Under 90% of ga_offline's SLA rate, the share aimed at: relmas on mixed (86%), "
        "relmas_resize on mixed (64%).",
    ]
    assert interval(1.2, 1.2, 1.2, 1) == "1.200 (n = 1)"
    zero = headline_table(summary({"sjf": [0.0, 0.0], "relmas": [0.1, 0.0]}), chosen)
    assert verdict(zero.row(0, named=True)) == "beats"  # the baseline met no deadline
    assert headline_table(summary({"sjf": [0.5]}), chosen).height == 0  # nothing learned


def test_the_headline_is_one_table_and_sentences_only_for_what_it_does_not_show(
    quick_config,
) -> None:
    """Issue 32, item 15: one bullet per scenario and policy repeated the same sentence; issue 39,
    item 13: it came back one level down, 22 bullets "ties its best baseline but beats the best
    former heuristic on evaluation, X (ratio ...)". The former heuristic, its ratio and the
    verdict against it are columns of the table; no sentence repeats a row."""
    ties = {"sjf": [0.5, 0.6, 0.7], "edf": [0.4, 0.5, 0.6], "relmas": [0.5, 0.62, 0.68]}
    frame = pl.concat(
        [
            summary(ties | {"sjf_feasible": [0.5, 0.6, 0.7]}, scenario="light"),
            summary(ties | {"edf": [0.1, 0.7, 0.5]}, scenario="bursty"),
            summary({"sjf": [0.5, 0.6, 0.7], "relmas": [0.4, 0.48, 0.56]}, scenario="heavy"),
            # ties sjf_feasible, beats sjf (the best former heuristic): a bullet before
            summary(
                {"sjf": [0.4, 0.5, 0.5], "sjf_feasible": [0.6, 0.5, 0.7], "relmas": [0.6] * 3},
                scenario="loaded",
            ),
        ]
    )
    chosen = {
        "light": ("sjf", 0.6),
        "bursty": ("edf", 0.55),
        "heavy": ("sjf", 0.6),
        "loaded": ("sjf_feasible", 0.6),
    }
    table = headline_table(frame, chosen)
    assert [verdict(row) for row in table.iter_rows(named=True)] == [
        "ties",
        "ties",
        "falls short of",
        "ties",
    ]
    assert verdict(table.row(3, named=True), "heuristic_") == "beats"
    assert headline_sentences(table) == []
    section = headline_markdown(load_config(quick_config), table)
    rows = [line for line in section if line.startswith("| ")]
    assert len(rows) == 1 and rows[0].count("\n") == 1 + table.height  # header, rule, rows
    assert rows[0].splitlines()[0] == (
        "| scenario | policy | best baseline (validation SLA rate) | its placement | "
        "its SLA rate | SLA rate | ratio [95% CI] | verdict | best former heuristic (SLA rate) | "
        "ratio to it [95% CI] | verdict to it |"
    )
    cells = [cell.strip() for cell in rows[0].splitlines()[-1].strip("|").split("|")]
    assert cells[:6] + cells[7:9] == [
        "loaded",
        "relmas",
        "sjf_feasible (0.600)",
        "—",
        "0.600",
        "0.600",
        "ties",
        "sjf (0.467)",
    ]
    assert cells[9].startswith("1.286 [") and cells[10] == "beats"
    assert section.index(rows[0]) > next(i for i, x in enumerate(section) if "- **relmas" in x)
    # the tally's one line, and no sentence under the table
    assert sum(line.startswith("- ") for text in section for line in text.splitlines()) == 1


def test_the_tally_counts_each_verdict_and_names_where_it_beats_or_falls_short() -> None:
    frame = pl.concat(
        [
            summary({"sjf": [0.5, 0.6], "relmas": [0.55, 0.66]}, scenario="light"),
            summary({"sjf": [0.5, 0.6], "relmas": [0.45, 0.54]}, scenario="heavy"),
            summary({"sjf": [0.4, 0.6, 0.5], "relmas": [0.5, 0.5, 0.7]}, scenario="bursty"),
        ]
    )
    chosen = {name: ("sjf", 0.5) for name in ("light", "heavy", "bursty")}
    assert headline_tally(headline_table(frame, chosen)) == [
        "relmas beats its best baseline on 1 (light) of 3 scenarios, ties it on 1 and falls "
        "short of it on 1 (heavy)."
    ]


def test_resizing_is_judged_against_relmas_by_its_interval() -> None:
    frame = pl.concat(
        [
            summary(
                {
                    "sjf": [0.5, 0.5],
                    "gacer": [0.6, 0.6],
                    "relmas": [0.5, 0.6],
                    "relmas_resize": [0.6, 0.72],
                },
                scenario="light",
            ),
            summary({"relmas": [0.5, 0.6], "relmas_resize": [0.45, 0.55]}, scenario="heavy"),
            summary({"relmas": [0.5, 0.6], "relmas_resize": [0.4, 0.7]}, scenario="tie"),
            summary({"relmas": [0.5, 0.6]}, scenario="no_resize"),
        ]
    )
    table = resizing_table(frame)
    assert table["scenario"].to_list() == ["light", "heavy", "tie"]
    light = table.row(0, named=True)
    assert light["ratio_relmas"] == pytest.approx(1.2) == light["ratio_relmas_ci_low"]
    assert light["ratio_gacer"] == pytest.approx(1.1)
    assert math.isnan(table.row(1, named=True)["gacer_sla_rate"])  # gacer did not run there
    verdicts = resizing_verdicts(table)
    assert verdicts[0].startswith("On light, letting the agent cut layers pays off: ")
    assert verdicts[1].startswith("On heavy, letting the agent cut layers costs SLA: ")
    assert "makes no measurable difference" in verdicts[2]


def test_ranking_orders_heuristics_by_sla_rate(quick_config) -> None:
    config = load_config(quick_config)
    frame = summary({"fcfs": [0.2, 0.4], "sjf": [0.8, 0.6], "relmas": [0.9, 0.9]})
    (row,) = heuristic_ranking(config, aggregate(frame)).iter_rows(named=True)
    assert row["ranking (SLA rate)"] == "sjf 0.700, fcfs 0.300"
    assert row["spread"] == pytest.approx(0.4)
    assert row["load"] == config["scenarios"]["mixed"]["arrival"]["load"]


def test_ties_go_to_the_first_in_catalog_order_whatever_the_rows_order(quick_config) -> None:
    """Issue 39, item 8: sjf and edf tie at 0.950, and the best former heuristic was sjf in one
    run and edf in another (an unordered `unique()`). sjf comes first in the catalog: it is the
    best heuristic, ranks first and met the most deadlines, in every order of the rows."""
    assert catalog.position("sjf") < catalog.position("edf")
    config = load_config(quick_config)
    frame = summary(
        {"fcfs": [0.5, 0.6], "edf": [0.95, 0.95], "sjf": [0.95, 0.95], "relmas": [0.9, 0.95]}
    ).with_columns(jobs=pl.lit(40))
    chosen = {"mixed": ("fcfs", 0.55)}
    for seed in range(16):
        shuffled = frame.sample(fraction=1.0, shuffle=True, seed=seed)
        (row,) = headline_table(shuffled, chosen).iter_rows(named=True)
        assert row["best_heuristic"] == "sjf"
        (ranked,) = heuristic_ranking(config, aggregate(shuffled)).iter_rows(named=True)
        assert ranked["ranking (SLA rate)"] == "sjf 0.950, edf 0.950, fcfs 0.550"
        trace = shuffled.filter(pl.col("seed") == 0)
        assert best_under(trace, 40, "mixed, seed 0")["policy"] == "sjf"


def test_generalisation_rows_are_compared_with_the_scenario_they_ran_on() -> None:
    own = summary({"fcfs": [0.2, 0.4], "sjf": [0.5, 0.5], "edf": [0.6, 0.8], "relmas": [0.9, 0.9]})
    moved = summary({"relmas": [0.6, 0.6]}, agent="heavy")
    both = pl.concat([own, moved])
    kept, transferred = split_generalisation(both)
    assert kept.equals(own) and transferred.equals(moved)
    # edf is the best on these evaluation traces; the scenario's baseline chosen on validation: sjf
    (row,) = generalisation_table(both, {"mixed": ("sjf", 0.8)}).iter_rows(named=True)
    assert (row["agent_scenario"], row["scenario"], row["policy"]) == ("heavy", "mixed", "relmas")
    assert row["sla_rate"] == pytest.approx(0.6) and row["sla_rate_ci95"] == 0.0
    assert row["own_agent_sla_rate"] == pytest.approx(0.9)
    assert row["best_baseline"] == "sjf"
    assert row["ratio_fcfs"] == pytest.approx(2.0) and row["ratio_sjf"] == pytest.approx(1.2)
    assert row["ratio_best"] == pytest.approx(1.2)
    # sjf and the moved agent are constant over seeds: every resample gives the same ratio
    assert row["ratio_sjf_ci_low"] == pytest.approx(1.2) == row["ratio_sjf_ci_high"]
    assert row["ratio_fcfs_ci_low"] <= 2.0 <= row["ratio_fcfs_ci_high"]


def with_ceiling(rows: pl.DataFrame, sla_rate: float = 1.0) -> pl.DataFrame:
    """A sweep point's rows: `rows` with their kinds, then a ceiling row per seed (no metrics
    but the SLA rate)."""
    ceilings = rows.group_by("scenario", "seed", "jobs").agg().sort("seed")
    ceilings = ceilings.with_columns(
        policy=pl.lit("ceiling"),
        sla_rate=pl.lit(sla_rate),
        kind=pl.lit("ceiling"),
        ceiling_status=pl.lit("converged"),
        ceiling_s=pl.lit(0.1),
    )
    return with_kinds(rows, ceilings)


def test_sweep_points_are_read_and_drawn_per_policy(tmp_path, quick_config) -> None:
    config = load_config(quick_config)
    for name, spec in config["sweeps"].items():
        for value in spec["values"]:
            rows = summary({"fcfs": [value / 100, 0.5], "relmas": [0.7, 0.9]}).with_columns(
                pl.lit(1, pl.Int64).alias("jobs"), pl.lit(1.0).alias("makespan_s")
            )
            rows = with_ceiling(rows).with_columns(
                sweep=pl.lit(name), parameter=pl.lit(spec["parameter"]), value=pl.lit(float(value))
            )
            write_parquet(rows, tmp_path / name / f"{value:g}.parquet")
    sweeps = collect_sweeps(config, tmp_path)  # the ceiling rows' null metrics are not refused
    assert sweeps.height == 6 * sum(len(spec["values"]) for spec in config["sweeps"].values())
    assert sweeps.filter(pl.col("policy") == "ceiling")["antt"].null_count() == 8
    load = aggregate(policy_rows(sweeps.filter(pl.col("sweep") == "load")), by=("value", "policy"))
    assert load.filter(pl.col("policy") == "relmas")["sla_rate"].to_list() == [0.8, 0.8]
    fig = plot_sweep(load, "load", "load", trained_at=0.8)
    assert [line.get_label() for line in fig.axes[0].get_lines()] == [
        "fcfs",
        "relmas",
        "agent trained here",
    ]


def test_the_curve_and_best_pt_are_rebuilt_when_a_workflow_reruns_training(tmp_path) -> None:
    class Interrupted(Exception):
        pass

    def interrupt(metrics: dict, step: int) -> None:
        if step >= 200:
            raise Interrupted

    config = replace(TOY, total_steps=300, learning_starts=50, validation_every=100)
    train(make_chain, config, tmp_path / "full", validate=validate_chain)
    with pytest.raises(Interrupted):
        train(make_chain, config, tmp_path / "cut", validate=validate_chain, logger=interrupt)
    for name in (CURVE, "best.pt"):  # a workflow deletes declared outputs before a rerun
        (tmp_path / "cut" / name).unlink()
    resumed = train(make_chain, config, tmp_path / "cut", validate=validate_chain)
    assert resumed.resumed_from is not None
    full, cut = (read_curve(tmp_path / name / CURVE) for name in ("full", "cut"))
    assert cut.equals(full)
    for name in (CURVE, "best.pt"):  # and a rerun of a complete training rewrites them too
        (tmp_path / "cut" / name).unlink()
    again = train(make_chain, config, tmp_path / "cut", validate=validate_chain)
    assert again.resumed_from == config.total_steps and read_curve(tmp_path / "cut" / CURVE).equals(
        full
    )
    best = [load_checkpoint(tmp_path / name / "best.pt") for name in ("full", "cut")]
    assert best[0]["step"] == best[1]["step"] and best[0]["metrics"] == best[1]["metrics"]
    assert all(torch.equal(best[0]["online"][k], best[1]["online"][k]) for k in best[0]["online"])
    assert {"val_mean_return", "loss", "epsilon", "episode_return"} <= set(full["metric"])
    assert full["step"].is_sorted() and full["step"].max() == config.total_steps


# --- every summary the report reads is checked: one line per bad file -------------------------


def summary_file(path, **change) -> Path:
    """A summary file of edf on mixed, seeds 1000 and 1001, with `change` (column -> the value of
    seed 1001's row) applied."""
    rows = summary({"edf": [0.7, 0.8]}).with_columns(
        pl.col("seed") + 1000, jobs=pl.lit(40, pl.Int64), makespan_s=pl.lit(0.5)
    )
    for column, value in change.items():
        new = pl.when(pl.col("seed") == 1001).then(pl.lit(value)).otherwise(pl.col(column))
        rows = rows.with_columns(new.alias(column))
    write_parquet(rows, path)
    return path


RATE = "finite Float64 values in [0, 1], not null"
KEYS = "scenario mixed, policy edf, seed 1001"


@pytest.mark.parametrize(
    ("column", "value", "expected"),
    [
        ("sla_rate", math.nan, RATE),
        ("sla_rate", 1.5, RATE),
        ("fairness", -0.1, "finite Float64 values in [0, 1], or null"),
        ("antt", -1.0, "finite Float64 values in [0, 2^65], or null"),
        ("antt", None, "antt and fairness null exactly where no job finished (every one dropped)"),
        ("energy_j", math.inf, "finite Float64 values in [0, 2^57], not null"),
        ("jobs", 0, "Int64 values in [1, inf), not null"),
        ("seed", -3, "Int64 values in [0, inf), not null"),
        ("decision_us", None, "finite Float64 values in [0, 8.58993e+15], not null"),
        ("shortfall", math.nan, "finite Float64 values in [0, 1], or null"),
    ],
)
def test_a_bad_summary_value_is_refused_naming_the_file_column_policy_and_seed(
    tmp_path, column, value, expected
) -> None:
    path = summary_file(tmp_path / "edf.summary.parquet", **{column: value})
    keys = "scenario mixed, policy edf" + (", seed 1001" if column != "seed" else "")
    with pytest.raises(InputError) as error:
        collect_summaries([path])
    got = "null" if value is None else value
    assert str(error.value) == f"{path}: {column}: expected {expected}, got '{got} (row 1, {keys})'"


def test_every_bad_summary_file_gets_one_line(tmp_path) -> None:
    good = summary_file(tmp_path / "good.parquet")
    nan = summary_file(tmp_path / "nan.parquet", sla_rate=math.nan, antt=-1.0)
    missing = tmp_path / "missing.parquet"
    write_parquet(pl.read_parquet(good).drop("stp"), missing)
    with pytest.raises(InputError) as error:
        collect_summaries([good, nan, missing])
    assert str(error.value).splitlines() == [
        "2 of 3 summary files are refused:",
        f"{nan}: sla_rate: expected {RATE}, got 'nan (row 1, {KEYS})'",
        f"{missing}: stp: expected a column 'stp' of type Float64, got 'missing'",
    ]
    assert collect_summaries([good]).height == 2


def test_validation_and_sweep_rows_are_checked_too(tmp_path, quick_config) -> None:
    summary_file(tmp_path / "validation" / "mixed.parquet", utilization=2.0)
    with pytest.raises(InputError, match=r"mixed.parquet: utilization: .*policy edf, seed 1001"):
        read_validation(tmp_path / "validation", ["mixed"])
    config = load_config(quick_config)
    for name, value in sweep_points(config):
        spec = config["sweeps"][name]
        point = pl.read_parquet(summary_file(tmp_path / "point.parquet", stp=math.nan))
        point = with_ceiling(point).with_columns(
            sweep=pl.lit(name), parameter=pl.lit(spec["parameter"]), value=pl.lit(float(value))
        )
        write_parquet(point, tmp_path / "sweeps" / name / f"{value:g}.parquet")
    with pytest.raises(InputError) as error:
        collect_sweeps(config, tmp_path / "sweeps")
    lines = str(error.value).splitlines()
    assert lines[0] == "4 of 4 summary files are refused:" and len(lines) == 5
    assert all(
        ": stp: expected finite Float64 values" in x and "policy edf, seed 1001" in x
        for x in lines[1:]
    )
    # a ceiling row's SLA rate is checked like a policy's
    point = with_ceiling(pl.read_parquet(summary_file(tmp_path / "point.parquet")), 1.5)
    point = point.with_columns(sweep=pl.lit("load"), parameter=pl.lit("load"), value=pl.lit(0.5))
    write_parquet(point, tmp_path / "sweeps" / "load" / "0.5.parquet")
    with pytest.raises(InputError) as error:
        collect_sweeps(config, tmp_path / "sweeps")
    assert f"0.5.parquet: sla_rate: expected {RATE}, got '1.5 (row 2, scenario mixed, " in str(
        error.value
    )


def test_relmas_report_refuses_a_nan_summary_in_one_line_and_writes_nothing(
    tmp_path, capsys
) -> None:
    """Issue 32, item 6: a NaN SLA rate made edf the best heuristic ('edf 0.nan' ranked first)."""
    from relmas.cli import main
    from tests.test_report_golden import golden_config, write_inputs

    config = golden_config() | {"results": str(tmp_path / "results")}
    paths = write_inputs(config, tmp_path / "results")
    bad = summary_of(evaluation_file(paths.eval_dir, "mixed", "edf", 1001))
    write_parquet(pl.read_parquet(bad).with_columns(sla_rate=pl.lit(math.nan)), bad)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    assert main(["report", "--config", str(tmp_path / "config.yaml")]) == 2
    err = capsys.readouterr().err  # MLflow's own log lines aside
    assert [line for line in err.splitlines() if line.startswith("relmas")] == [
        f"relmas report: error: {bad}: sla_rate: expected {RATE}, got 'nan (row 0, scenario mixed, "
        "policy edf, seed 1001)'"
    ]
    assert "Traceback" not in err
    assert not paths.report_dir.exists()


def test_relmas_report_refuses_a_wrong_bounds_file_in_one_line_naming_it(tmp_path, capsys) -> None:
    """Issue 39, item 7: a `--bounds` file whose ceiling is below a policy's count was refused as
    an 18-line RuntimeError that never named the file."""
    import shutil

    from relmas.ceiling.stage import BoundRows
    from relmas.cli import main
    from relmas.io import read_parquet
    from relmas.paths import bound_file
    from tests.test_report_golden import golden_config, write_inputs

    config = golden_config() | {"results": str(tmp_path / "results")}
    paths = write_inputs(config, tmp_path / "results")
    given = tmp_path / "my bounds"
    shutil.copytree(paths.bounds_dir, given)
    bad = bound_file(given, "mixed", 1001)
    row = read_parquet(bad, BoundRows)
    zero = pl.lit(0, pl.Int64)
    lowered = {"ceiling_met": pl.lit(1, pl.Int64), "admission_met": zero, "searched_met": zero}
    write_parquet(row.with_columns(**lowered, ceiling_sla=1 / 40), bad)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    argv = ["report", "--config", str(tmp_path / "config.yaml"), "--bounds", str(given)]
    assert main(argv) == 2
    err = capsys.readouterr().err  # MLflow's own log lines aside
    lines = [line for line in err.splitlines() if line.startswith("relmas")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"relmas report: error: {bad}: ceiling_met: expected at least the ")
    assert lines[0].endswith("(a ceiling below a schedule's count is a wrong bound), got 1")
    assert not paths.report_dir.exists()


def test_relmas_report_refuses_a_wrong_targets_bound_and_leaves_no_directory(
    tmp_path, capsys
) -> None:
    """Issue 48, item 5g: a `--bounds` file whose proven least shortfall is above a policy's was
    refused after the report had drawn its figures, and left report/ and report/figures/ behind
    (empty)."""
    import shutil

    from relmas.cli import main
    from relmas.paths import bound_file
    from tests.test_report_golden import golden_config, write_inputs

    config = golden_config() | {"results": str(tmp_path / "results")}
    paths = write_inputs(config, tmp_path / "results")
    edf = summary_of(evaluation_file(paths.eval_dir, "mixed", "edf", 1001))
    write_parquet(pl.read_parquet(edf).with_columns(shortfall=pl.lit(0.01)), edf)
    given = tmp_path / "given"
    shutil.copytree(paths.bounds_dir, given)
    bad = bound_file(given, "mixed", 1001)
    unreachable = pl.read_parquet(bad).with_columns(
        shortfall_lower=pl.lit(0.5),  # edf's shortfall is 0.01
        targets_reachable=pl.lit("unreachable"),
        targets_status=pl.lit("converged"),
    )
    write_parquet(unreachable, bad)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    before = set(paths.root.rglob("*"))
    assert main(["report", "--config", str(tmp_path / "config.yaml"), "--bounds", str(given)]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("relmas")]
    assert len(lines) == 1 and f"{bad}: shortfall_lower: expected at most" in lines[0], lines
    assert set(paths.root.rglob("*")) == before


@pytest.mark.parametrize(
    ("file", "column"),
    [("validation", "shortfall"), ("summary", "shortfall"), ("bound", "shortfall_lower")],
)
def test_relmas_report_refuses_a_nan_shortfall_in_one_line(tmp_path, capsys, file, column) -> None:
    """Issue 39, item 1: a NaN shortfall in the validation rows chose another best baseline, in an
    evaluation summary it printed `+nan`, in a bound 'proven least shortfall >= nan points'."""
    from relmas.cli import main
    from relmas.paths import bound_file, validation_file
    from tests.test_report_golden import SEEDS, golden_config, write_inputs

    config = golden_config() | {"results": str(tmp_path / "results")}
    paths = write_inputs(config, tmp_path / "results")
    bad = {
        "validation": validation_file(paths.validation_dir, "mixed"),
        "summary": summary_of(evaluation_file(paths.eval_dir, "mixed", "edf", SEEDS[0])),
        "bound": bound_file(paths.bounds_dir, "mixed", SEEDS[0]),
    }[file]
    rows = pl.read_parquet(bad)
    write_parquet(rows.with_columns(pl.lit(math.nan).alias(column)), bad)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    assert main(["report", "--config", str(tmp_path / "config.yaml")]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("relmas")]
    assert len(err) == 1 and err[0].startswith(f"relmas report: error: {bad}: {column}: expected")
    assert "got 'nan (row 0" in err[0]
    assert not paths.report_dir.exists()
