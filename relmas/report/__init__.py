"""Evaluation results -> the study's report: summary.parquet, statistics, figures, report.md.

Statistics are over evaluation seeds (traces the agents never saw): means with Student-t 95%
confidence intervals (none with one seed: n = 1 is said, not drawn as an interval). The
headline: for each scenario the ratio of every learned policy's mean SLA
rate to the best baseline's — the online non-learned policy with the best SLA rate on the
validation traces (`relmas validate`), so that evaluation only measures it — with a paired
bootstrap 95% interval (seeds resampled together, since all policies ran on the same traces), in
one table after a one-line tally per learned policy; the former ratio to the best heuristic picked
on the evaluation traces is in columns of the same table. Nothing is tuned or filtered: every
policy evaluated is in the tables (the SLA rate figure draws the best of each kind).

Besides the per-scenario evaluation: generalisation runs (a learned policy deployed with the agent
of another scenario: rows whose `agent_scenario` is not their scenario), sweeps (SLA rate against
load and bandwidth, `relmas.sweep`) and the agents' learning curves (`curve.parquet`).

One module per part, so that each section has a room of its own: `load` (what the report reads),
`stats` (intervals, bootstrap ratios, the best baseline's choice), `headline` (the first section),
`service` (on scenarios with service targets, the headline in target terms: shortfall against the
best baseline), `ceiling` (what was left to win), `tables` (the sections after them),
`figures` (drawing and saving them), `markdown` (tables and links as Markdown) and `page`
(report.md and report.html, and `write_report`). The names below are
the package's interface: the command line, the benchmarks and the tests import them from here.
"""

from relmas.report.headline import (
    headline_sentences,
    headline_table,
    headline_tally,
    verdict,
)
from relmas.report.load import collect_summaries, collect_sweeps, read_validation
from relmas.report.markdown import interval, markdown_table, mean_text
from relmas.report.page import write_report
from relmas.report.stats import (
    aggregate,
    best_baselines,
    generalisation_table,
    mean_ci,
    paired_ratio,
    resizing_table,
    split_generalisation,
)
from relmas.report.tables import heuristic_ranking, resizing_verdicts

__all__ = [
    "aggregate",
    "best_baselines",
    "collect_summaries",
    "collect_sweeps",
    "generalisation_table",
    "headline_sentences",
    "headline_table",
    "headline_tally",
    "heuristic_ranking",
    "interval",
    "markdown_table",
    "mean_ci",
    "mean_text",
    "paired_ratio",
    "read_validation",
    "resizing_table",
    "resizing_verdicts",
    "split_generalisation",
    "verdict",
    "write_report",
]
