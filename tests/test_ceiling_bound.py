"""The relaxation bound (relmas.ceiling.bound): cases counted by hand, and a certificate that
agrees with the solver. That no policy, search or exact optimum exceeds it on generated traces is
checked with the exact search, in tests/test_ceiling_exact.py."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from relmas.ceiling.bound import Relaxation, WindowCounts, _layer_costs, relaxation_bound
from relmas.ceiling.exact import solve_exact
from relmas.ceiling.instance import Instance
from relmas.policies import make_policy
from relmas.sim import CostTables, load_system
from tests.synthetic import cost_frame, memory_bound_case, synthetic_costs, synthetic_pieces
from tests.test_ceiling_exact import _case, _met, _trace


def _bound(system, tables, jobs, time_limit_s: float = 10.0, counts: bool = True):
    instance = Instance.of(system, tables, jobs)
    return relaxation_bound(instance, time_limit_s=time_limit_s, counts=counts)


def _one_type(models: dict[str, list[tuple[float, int]]], count: int, dram_gbps=None):
    """Models of (latency_s, dram_bytes) layers on `count` instances of one type `x`."""
    system = load_system({"instances": [{"name": "x", "count": count}], "dram_gbps": dram_gbps})
    frame = cost_frame(
        {m: {"x": [(lat, b, 0.0) for lat, b in layers]} for m, layers in models.items()}
    )
    tables = CostTables.from_frame(frame, ["x"], bandwidth_bps=system.bandwidth_bytes_per_s)
    return system, tables


def test_two_jobs_that_cannot_share_a_window_count_once():
    # One instance; two 1 s jobs at 0 due at 1.5: the window [0, 1.5] holds 1.5 s of work, so
    # x0 + x1 <= 1.5 and the bound is 1 (what every schedule meets). A third job due at 3 fits
    # after either: bound 2. A job of 2 s due at 1 cannot meet even alone: never counted.
    system, tables = _one_type({"one": [(1.0, 0)], "two": [(2.0, 0)]}, count=1)
    jobs = _trace([("one", 0.0, 1.5), ("one", 0.0, 1.5), ("one", 0.0, 3.0), ("two", 0.0, 1.0)])
    bound = _bound(system, tables, jobs)
    assert (bound.met, bound.jobs, bound.status) == (2, 4, "converged")
    assert _met(system, tables, jobs, make_policy("sjf")) == 2


def test_bandwidth_windows_bound_memory_bound_jobs():
    # Two instances but 1 GB/s: each job moves 1 GB in a layer of 0.1 s (alone it takes 1 s).
    # Due at 1.5, two such jobs need 2 s of the bandwidth inside [0, 1.5]: only one is met.
    system, tables = _one_type({"m": [(0.1, 1_000_000_000)]}, count=2, dram_gbps=1.0)
    jobs = _trace([("m", 0.0, 1.5), ("m", 0.0, 1.5)])
    assert _bound(system, tables, jobs).met == 1
    unlimited, free_tables = _one_type({"m": [(0.1, 1_000_000_000)]}, count=2)
    assert _bound(unlimited, free_tables, jobs).met == 2


def test_count_rows_count_whole_jobs():
    # The two memory-bound jobs above: the window [0, 1.5] moves 1.5 GB, so the bytes row lets
    # x0 + x1 = 1.5; but the met jobs are whole, and two need 2 GB: the count row x0 + x1 <= 1.
    system, tables = _one_type({"m": [(0.1, 1_000_000_000)]}, count=2, dram_gbps=1.0)
    jobs = _trace([("m", 0.0, 1.5), ("m", 0.0, 1.5)])
    assert _bound(system, tables, jobs, counts=False).value == pytest.approx(1.5, abs=1e-6)
    assert _bound(system, tables, jobs).value == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("seed", [0, 3, 5])
def test_count_rows_tighten_the_bound_but_never_below_the_optimum(seed):
    # Bursts where memory binds (tests/synthetic.py), whose optimum the exact search proves:
    # the count rows cut fractions off the bound (docs/ceiling.md, "Count rows"), never below.
    system, tables, jobs = memory_bound_case(seed, 8)
    exact = solve_exact(system, tables, jobs, time_limit_s=10.0, max_jobs=8)
    assert exact.exact
    loose = _bound(system, tables, jobs, counts=False)
    tight = _bound(system, tables, jobs)
    assert exact.lower <= tight.value + 1e-6 < loose.value - 0.1
    assert tight.met >= exact.lower


def test_the_certificate_is_the_lp_optimum():
    system, tables, jobs = _case(7, 12, 3, 2, 3.0, True, (1.0, 3.0))
    lp = Relaxation(Instance.of(system, tables, jobs), threads=1)
    counts = WindowCounts(lp)
    for _ in range(4):
        lp.highs.run()
        objective = lp.highs.getInfo().objective_function_value  # -(jobs met)
        assert lp.certificate() == pytest.approx(objective, rel=1e-6, abs=1e-6)
        solution = np.asarray(lp.highs.getSolution().col_value)
        lp.add_windows(lp.separate(solution, 50))
        counts.add_violated(solution, 50)


@pytest.mark.parametrize(
    ("seed", "met", "value", "rounds", "windows"),
    [(11, 55, 55.0, 6, 602), (13, 54, 54.893253, 8, 668)],
)
def test_separation_adds_the_windows_it_did(seed, met, value, rounds, windows):
    """Pinned before the relaxation was rebuilt by arrays (888fbb3): which windows a round adds
    (the most violated, ties in order) decides the rounds, the windows and the LP each round
    solves, though any choice would give a sound bound."""
    args = {11: (80, 3, 2, 3.0, True, (1.0, 3.0)), 13: (100, 3, 1, 2.0, True, (1.0, 4.0))}
    system, tables, jobs = _case(seed, *args[seed])
    bound = relaxation_bound(Instance.of(system, tables, jobs), time_limit_s=60.0)
    assert (bound.status, bound.met, bound.rounds, bound.windows) == (
        "converged",
        met,
        rounds,
        windows,
    )
    assert bound.value == pytest.approx(value, abs=1e-6)


def test_a_time_limit_must_be_positive():
    system, tables = _one_type({"one": [(1.0, 0)]}, count=1)
    with pytest.raises(ValueError, match="time limit must be positive"):
        _bound(system, tables, _trace([("one", 0.0, 2.0)]), time_limit_s=0.0)


def test_a_deadline_is_widened_as_the_engine_widens_it_before_zero():
    # The engine's clock starts at -1 s, the whole second before the arrival at -0.5 s: the 1 s
    # layer ends at 1.5 s on it, 1.3e-12 s past the deadline but within the engine's tolerance
    # of "met" there (relmas.sim.engine_kernels.met_by: 1e-12 x 1.5 s), so the engine meets the job.
    system, tables = _one_type({"one": [(1.0, 0)]}, count=1)
    jobs = _trace([("one", -0.5, -0.5 + 1.0 - 1.3e-12)])
    assert _met(system, tables, jobs, make_policy("edf")) == 1
    assert _bound(system, tables, jobs).met == 1


@pytest.mark.parametrize("padding", [0.0, 1e3])
@pytest.mark.parametrize("dram_gbps", [None, 2.0])
def test_layer_costs_are_the_least_of_the_whole_and_every_cut(dram_gbps, padding):
    # the costs are computed for all cost rows at once, with pieces of 2 and 4 (padded to 4): each
    # must be the per-layer definition, which reads the layer's own pieces only, whatever the
    # padding holds (small values would lower a minimum, large ones raise a maximum)
    names = ["e", "s"]
    costs = synthetic_costs({"a": 5, "b": 3}, names, seed=3)
    system = load_system(
        {
            "instances": [{"name": "e", "count": 2}, {"name": "s", "count": 1}],
            "dram_gbps": dram_gbps,
        }
    )
    tables = CostTables.from_frame(costs, names, bandwidth_bps=system.bandwidth_bytes_per_s)
    pieces = synthetic_pieces(costs, splits=(2, 4), seed=3)
    # layer 1 of a has 2 units along K: 2 pieces where the cut asks 4 (a padded row)
    short = (pl.col("model") == "a") & (pl.col("layer") == 1) & (pl.col("dim") == "K")
    short = short & (pl.col("splits") == 4)
    pieces = pieces.filter(~short | (pl.col("piece") < 2))
    pieces = pieces.with_columns(pieces=pl.when(short).then(2).otherwise(pl.col("pieces")))
    tables = tables.with_pieces(pieces.cast(pieces.schema))
    split = tables.pieces
    k4 = split.variants.index("K4")
    row = tables.first_row[tables.model_index("a")] + 1
    assert split.count[row, k4] == 2 and split.count[row - 1, k4] == 4
    padded = np.zeros(split.latency_s.shape[:2], dtype=bool)
    padded[row, split.offset[k4] + 2 : split.offset[k4] + 4] = True
    split.latency_s[padded] = split.dram_bytes[padded] = split.demand_bps[padded] = padding
    jobs = _trace([("a", 0.0, 1.0), ("b", 0.1, 1.0), ("a", 0.2, 1.0)])
    whole = Instance.of(system, tables, jobs)
    instance = whole.remaining(np.array([1, 0, 4]), whole.arrival_s)  # a keeps its layer 1
    unit, per_byte = 0.5, 0.0 if dram_gbps is None else 1e-9
    time, moved, chain = _layer_costs(instance, unit, per_byte)
    assert time.shape == (instance.n_ops, 2)
    for op in range(instance.n_ops):
        want_time = instance.alone_s[op] / unit
        want_moved = instance.dram_bytes[op] * per_byte
        want_chain = want_time.copy()
        for alone, _, dram in instance.cuts(op):
            count = alone.shape[0]
            want_time = np.minimum(want_time, count * alone.min(axis=0) / unit)
            want_moved = np.minimum(want_moved, count * dram.min(axis=0) * per_byte)
            want_chain = np.minimum(want_chain, alone.min(axis=1).max() / unit)
        assert np.array_equal(time[op], want_time)
        assert np.array_equal(moved[op], want_moved)
        assert np.array_equal(chain[op], want_chain)
    assert np.all(chain < time)  # a cut holds the chain less than the whole: the cuts are read


def test_structure_rows_of_each_job_as_written_out_by_hand():
    # one type, no bandwidth limit, a model of layers costing 1, 1 and 2 s: two classes (the two
    # 1 s layers, then the 2 s one, in order of appearance), a block both jobs share
    system, tables = _one_type({"m": [(1.0, 0), (1.0, 0), (2.0, 0)]}, count=1)
    jobs = _trace([("m", 0.0, 5.0), ("m", 1.0, 9.0)])
    lp = Relaxation(Instance.of(system, tables, jobs), threads=1)
    assert lp.blocks[0] is lp.blocks[1] and lp.resources == 1
    matrix = lp.rows[0].toarray()
    rows = []
    for j in range(2):
        first, span = lp.block_start[j], lp.deadline[j] - lp.arrival[j]
        per_job = [
            ({first: 1.0, j: -2.0}, 0.0),  # the two 1 s layers are placed
            ({first + 1: 1.0, j: -1.0}, 0.0),  # the 2 s layer is placed
            ({first: 1.0, first + 1: 2.0, j: -span}, -np.inf),  # the chain fits the span
            ({first: 1.0, first + 1: 2.0, lp.u(j, 0): -1.0}, 0.0),  # its time on the type
        ]
        rows += per_job
    assert matrix.shape[0] == len(rows)
    for i, (entries, lower) in enumerate(rows):
        want = np.zeros(lp.columns)
        for column, value in entries.items():
            want[column] = value
        assert np.array_equal(matrix[i], want), i
        assert lp.row_lower[0][i] == lower and lp.row_upper[0][i] == 0.0
