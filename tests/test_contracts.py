"""Every Parquet file a stage reads has one contract (relmas.schemas and the modules owning a
file), checked where it is read: a NaN, an infinity, an absurd 1e300 or a value of the wrong type
in any numeric column is refused in one line naming the file and the column. The cases come from
the contracts themselves, so a new contract or column is covered without a new test."""

from __future__ import annotations

import functools
import importlib
import math
from pathlib import Path

import dataframely as dy
import polars as pl
import pytest

from relmas.errors import InputError
from relmas.io import read_parquet, write_parquet

# The modules that own a file's contract.
OWNERS = (
    "relmas.schemas",
    "relmas.sim.costs",
    "relmas.sim.result",
    "relmas.sim.service",
    "relmas.report.service",
    "relmas.ceiling.stage",
    "relmas.rl.curve",
    "relmas.sweep",
    "relmas.workload",
)
# Values a contract's own rules need, where random sampling would rarely find them.
SAMPLING = {
    "LayerRows": {"op": "matmul"},
    "LayerTable": {"op": "matmul"},
    "PieceTable": {"dim": "K", "splits": 2, "pieces": 1, "piece": 0},
    "BoundRows": {
        "ceiling_met": 0,
        "admission_met": 0,
        "searched_met": 0,
        "relaxation_value": 0.0,
        "exact_lower": None,
        "exact_upper": None,
    },
    "JobTrace": {"arrival_s": 0.0, "deadline_s": 1.0},
    "JobResults": {"dropped": False, "start_s": 1.0, "finish_s": 2.0, "turnaround_s": 1.5},
}
BAD = {"nan": math.nan, "inf": math.inf, "1e300": 1e300, "text": "x"}


def contracts() -> list[type[dy.Schema]]:
    for module in OWNERS:
        importlib.import_module(module)
    found, todo = [], list(dy.Schema.__subclasses__())
    while todo:
        contract = todo.pop()
        todo += contract.__subclasses__()
        if contract.__module__.startswith("relmas.") and contract not in found:
            found.append(contract)
    return sorted(found, key=lambda c: c.__name__)


CASES = [
    pytest.param(contract, column, bad, id=f"{contract.__name__}.{column}={bad}")
    for contract in contracts()
    for column, spec in contract.columns().items()
    if spec.dtype.is_numeric()
    for bad in BAD
]


@functools.cache
def valid_rows(contract: type[dy.Schema], rows: int = 3) -> pl.DataFrame:
    overrides = SAMPLING.get(contract.__name__, {})
    columns = {name: [value] * rows for name, value in overrides.items()}
    generator = dy.random.Generator(seed=3)
    return contract.sample(rows, overrides=columns or None, generator=generator)


def test_every_file_a_stage_reads_has_a_contract() -> None:
    names = {contract.__name__ for contract in contracts()}
    assert names >= {
        "LayerTable",
        "CostTable",
        "PieceTable",
        "JobTrace",
        "Arrivals",
        "JobResults",
        "SummaryRows",
        "SweepRows",
        "RunGroups",
        "BoundRows",
        "Curve",
    }


@pytest.mark.parametrize(("contract", "column", "bad"), CASES)
def test_a_bad_number_is_refused_naming_the_file_and_column(
    tmp_path: Path, contract: type[dy.Schema], column: str, bad: str
) -> None:
    rows = valid_rows(contract)
    path = tmp_path / f"{contract.__name__}.parquet"
    write_parquet(rows, path)
    assert read_parquet(path, contract).height == 3  # the rows are valid as sampled
    value = BAD[bad]
    dtype = pl.String if isinstance(value, str) else pl.Float64
    changed = pl.when(pl.int_range(pl.len()) == 1).then(pl.lit(value, dtype))
    write_parquet(
        rows.with_columns(changed.otherwise(pl.col(column).cast(dtype)).alias(column)), path
    )
    with pytest.raises(InputError) as error:
        read_parquet(path, contract)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: {column}: expected "), message
