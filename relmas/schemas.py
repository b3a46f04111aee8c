"""Contracts of the Parquet files exchanged between stages (docs/design.md, "data files").

Each file has ONE declarative contract, a dataframely schema: its columns' types, nullability,
ranges (floats finite unless said otherwise), keys, and rules between columns.
`relmas.io.read_parquet` checks a file against its contract where it is read, and names the file,
the column and the first row at fault. A rule's name starts with the column it is about
(`<column>__<what>`) and its docstring says what is expected there.

Every number has an upper bound, so that a value valid in type but absurd (a layer latency of
1e300 s) is refused rather than turned into a quietly wrong result; the bounds below follow from
first principles (docs/design.md, "Bounds of the numbers").
"""

from __future__ import annotations

import functools
from typing import Any

import dataframely as dy
import polars as pl

from relmas.paths import CONFIG_SCHEMA
from relmas.sim.times import MAX_TIME_S
from relmas.yaml_load import load_yaml

# -- Bounds of the numbers (docs/design.md, "Bounds of the numbers") ---------------------------
# No DNN layer has more MACs: 1000x GPT-3's largest matmul at 2,048 tokens (~1.2e12 MACs).
MAX_LAYER_MACS = 2**50
# No accelerator's clock is faster (4.3 GHz): a layer takes at least one such cycle.
MAX_CLOCK_HZ = 2**32
MIN_LAYER_S = 1 / MAX_CLOCK_HZ
# No accelerator worth scheduling is slower than one MAC per ns (a single MAC unit at 1 GHz): the
# largest layer takes at most 2^50 / 2^30 s (~12 days).
MAX_LAYER_S = float(2**20)
MAX_CYCLES = int(MAX_LAYER_S) * MAX_CLOCK_HZ  # the longest layer at the fastest clock
# At most 8 bytes of off-chip traffic per MAC of the largest layer (every operand fetched and the
# result stored each MAC); also where float64 stops counting bytes exactly.
MAX_LAYER_BYTES = 2**53
# No accelerator draws more than 16 kW (a wafer-scale engine draws ~23 kW for ~100 sub-chips).
MAX_POWER_W = 2.0**14
MAX_LAYER_J = MAX_POWER_W * MAX_LAYER_S
# Results: times within twice the traces' horizon (relmas.sim.times), where the engine's float64
# clock still resolves 2 us; a run of at most 2^10 accelerators drawing MAX_POWER_W that long.
MAX_RESULT_S = 2 * MAX_TIME_S
MAX_RUN_J = MAX_POWER_W * MAX_RESULT_S * 2**10
# A turnaround over an isolated latency: the longest result time over the shortest layer.
MAX_SLOWDOWN = MAX_RESULT_S / MIN_LAYER_S
# achieved / target: beyond it a target would be below 2^-20, finer than one job in a million.
MAX_TARGET_RATIO = 2.0**20

# A job's priority: low, medium, high, the values a configured tenant may have.
PRIORITIES = (1, 3, 9)
LAYER_OPS = ("conv", "dwconv", "linear", "matmul")


@functools.cache
def max_jobs() -> int:
    """The most jobs a trace may have (the config schema's `job_count` maximum): a trace file of
    more is refused from its footer, before it is read. Read once per process: the schema ships
    with the package, and parsing it cost more than reading a trace."""
    return load_yaml(CONFIG_SCHEMA)["$defs"]["job_count"]["maximum"]


def column_types(contract: type[dy.Schema]) -> dict[str, pl.DataType]:
    """The column types of `contract`, in its order (frames are built with these)."""
    return {name: column.dtype for name, column in contract.columns().items()}


def nullable(column: dy.Column) -> dy.Column:
    """`column`'s definition, but null allowed (a contract that extends another's)."""
    kept = {k: v for k, v in vars(column).items() if not k.startswith("_") and k != "nullable"}
    return type(column)(nullable=True, **kept)


def _positive(**kwargs: Any) -> dy.Int32:
    return dy.Int32(min=1, **kwargs)


class LayerRows(dy.Schema):
    """Layers or pieces of layers, as the cost model reads them (relmas.hw.problem)."""

    model = dy.String()
    layer = dy.Int32(min=0)
    name = dy.String()
    op = dy.String()
    N = _positive()
    K = _positive()
    C = _positive()
    Y = _positive()
    X = _positive()
    R = _positive()
    S = _positive()
    stride = _positive()
    groups = _positive()
    macs = dy.Int64(min=1, max=MAX_LAYER_MACS)
    in_elems = dy.Int64(min=1, max=MAX_LAYER_MACS)
    w_elems = dy.Int64(min=1, max=MAX_LAYER_MACS)
    out_elems = dy.Int64(min=1, max=MAX_LAYER_MACS)

    @dy.rule()
    def op__known(cls) -> pl.Expr:
        """one of conv, dwconv, linear, matmul"""
        return pl.col("op").is_in(LAYER_OPS)

    @dy.rule()
    def K__multiple_of_groups(cls) -> pl.Expr:  # noqa: N802
        """a multiple of groups for convolutions (K counts all groups)"""
        return (pl.col("op") == "matmul") | (pl.col("K") % pl.col("groups") == 0)


class LayerTable(LayerRows):
    """`layers.parquet`: one row per MAC-bearing operator (docs/zoo.md)."""

    model = dy.String(primary_key=True)
    layer = dy.Int32(primary_key=True, min=0)


LAYER_SCHEMA = column_types(LayerTable)


class CostTable(dy.Schema):
    """`costs/{accelerator}.parquet`: one row per (model, layer) on one accelerator type."""

    model = dy.String(primary_key=True)
    layer = dy.Int32(primary_key=True, min=0)
    accelerator = dy.String(primary_key=True)
    cycles = dy.Int64(min=0, max=MAX_CYCLES)
    latency_s = dy.Float64(min=MIN_LAYER_S, max=MAX_LAYER_S)
    dram_bytes = dy.Int64(min=0, max=MAX_LAYER_BYTES)
    energy_j = dy.Float64(min=0, max=MAX_LAYER_J)
    utilization = dy.Float64(min=0, max=1)
    mapping = dy.String()


COST_SCHEMA = column_types(CostTable)


class JobTrace(dy.Schema):
    """`workloads/{scenario}/seed{n}.parquet`: one row per job (times absolute, in seconds)."""

    job_id = dy.Int64(primary_key=True)
    tenant = dy.String()
    model = dy.String()
    arrival_s = dy.Float64(min=0, max=MAX_TIME_S)
    deadline_s = dy.Float64(max=MAX_TIME_S)  # not before arrival_s: a rule
    priority = dy.Int32(is_in=PRIORITIES)
    # the deadline-hit-rate target the job counts towards (docs/simulator.md, "Service levels");
    # null: none
    target = dy.Float64(nullable=True, min=0, max=1)
    # whether that target is its model's own (tenants[*].targets, service group "tenant/model")
    # rather than its tenant's (group "tenant"); group_key below
    model_target = dy.Bool()
    # whether the job's deadline is firm: once it has passed, the engine drops the job
    firm = dy.Bool()

    @dy.rule()
    def deadline_s__not_before_arrival(cls) -> pl.Expr:
        """deadlines not before arrival_s"""
        return pl.col("deadline_s") >= pl.col("arrival_s")

    @dy.rule()
    def model_target__with_target(cls) -> pl.Expr:
        """false where target is null (a model's own target is a target)"""
        return ~pl.col("model_target") | pl.col("target").is_not_null()

    @dy.rule()
    def target__one_per_group(cls) -> pl.Expr:
        """one target per service group (a tenant's jobs, or its jobs of a model_target model)"""
        first = pl.col("target").first().over(group_key())
        return pl.col("target").is_null() | (pl.col("target") == first)


JOB_SCHEMA = column_types(JobTrace)

# The JOB_SCHEMA columns a trace may leave out (a hand-written one, one written before service
# levels), with the value each job then has: no target (or its tenant's), a soft deadline.
JOB_DEFAULTS: dict[str, Any] = {"target": None, "model_target": False, "firm": False}


def with_job_defaults(jobs: pl.DataFrame) -> pl.DataFrame:
    """`jobs` with every JOB_DEFAULTS column it lacks filled in, and those columns of their
    JOB_SCHEMA types: where job frames enter the system (trace files, the engine), so that frames
    built by hand without service levels run as before."""
    return jobs.with_columns(
        pl.col(name).cast(JOB_SCHEMA[name])
        if name in jobs.columns
        else pl.lit(default, JOB_SCHEMA[name]).alias(name)
        for name, default in JOB_DEFAULTS.items()
    )


def group_key() -> pl.Expr:
    """Each job's service group (docs/simulator.md, "Service levels"): its tenant's, or with a
    model's own target "tenant/model"; null without a target."""
    return (
        pl.when(pl.col("target").is_null())
        .then(pl.lit(None, pl.String()))
        .when(pl.col("model_target"))
        .then(pl.concat_str("tenant", pl.lit("/"), "model"))
        .otherwise(pl.col("tenant"))
    )


def _rate(**kwargs: Any) -> dy.Float64:
    return dy.Float64(min=0, max=1, **kwargs)


class SummaryRows(dy.Schema):
    """`….summary.parquet` and `validation/{scenario}.parquet`: one row per run (extra metric
    columns may follow; the report reads these)."""

    scenario = dy.String(primary_key=True)
    policy = dy.String(primary_key=True)
    # where a rule baseline starts layers (relmas.policies.placement: all, bandwidth or types
    # joined by +), chosen on the validation traces; null for a policy that takes no placement
    placement = dy.String(nullable=True)
    seed = dy.Int64(primary_key=True, min=0)
    jobs = dy.Int64(min=1)
    sla_rate = _rate()
    # over the finished jobs: null where none finished (every job dropped past a firm deadline)
    antt = dy.Float64(nullable=True, min=0, max=MAX_SLOWDOWN)
    stp = dy.Float64(min=0, max=MAX_SLOWDOWN)
    fairness = _rate(nullable=True)
    utilization = _rate()
    energy_j = dy.Float64(min=0, max=MAX_RUN_J)
    makespan_s = dy.Float64(min=0, max=MAX_RESULT_S)
    decision_us = dy.Float64(min=0, max=MAX_RESULT_S * 1e6)
    # jobs dropped past their firm deadline (0 without firm deadlines)
    dropped = dy.Int64(min=0)
    # the service levels (relmas.sim.service): null on a trace without targets
    targets_met = dy.Int64(nullable=True, min=0)
    targets = dy.Int64(nullable=True, min=1)
    shortfall = _rate(nullable=True)
    worst_ratio = dy.Float64(nullable=True, min=0, max=MAX_TARGET_RATIO)
    jain_target = _rate(nullable=True)

    @dy.rule()
    def dropped__at_most_jobs(cls) -> pl.Expr:
        """at most the run's jobs"""
        return pl.col("dropped") <= pl.col("jobs")

    @dy.rule()
    def antt__null_where_no_job_finished(cls) -> pl.Expr:
        """antt and fairness null exactly where no job finished (every one dropped)"""
        none_finished = pl.col("dropped") == pl.col("jobs")
        undefined = [pl.col(name).is_null() == none_finished for name in ("antt", "fairness")]
        return pl.all_horizontal(undefined)

    @dy.rule()
    def targets_met__at_most_targets(cls) -> pl.Expr:
        """at most `targets` targets met, null exactly where targets is null"""
        met, targets = pl.col("targets_met"), pl.col("targets")
        return (met.is_null() == targets.is_null()) & (met.is_null() | (met <= targets))


SUMMARY_SCHEMA = column_types(SummaryRows)
