"""One trace on one system as a scheduling instance: the engine's own inputs, flattened for bounds.

The exact search (relmas.ceiling.exact) and the relaxation bounds of large traces read the same
numbers the engine simulates: jobs in the engine's internal order (arrival, then job_id), each job's
layer chain with, per accelerator type, the layer's alone latency (costs.py) and its DRAM traffic,
and the instances per type. Layers of all jobs are stored as one flat array of *operations* (job j's
layers are operations `first_op[j] .. first_op[j + 1] - 1`), so that a 1,000-job trace with ~50
layers per job stays a handful of numpy arrays. Times are on the engine's clock: seconds since its
origin, the whole second at or before the first arrival (relmas.sim.times), so that they are the
engine's own numbers to the bit (its test of "met", `relmas.sim.engine_kernels.met_by`, depends on
their size) and integer time grids start at 0.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from relmas.sim.costs import CostTables, PieceTables
from relmas.sim.system import System
from relmas.sim.times import time_origin


@dataclass(frozen=True, eq=False)
class Instance:
    """Jobs, layer chains and accelerators of one simulation, as the engine would run them."""

    job_id: np.ndarray  # int64[jobs], in the engine's internal order (arrival_s, job_id)
    tenant: np.ndarray  # int64[jobs]: index into `tenants`
    tenants: tuple[str, ...]
    model: np.ndarray  # int64[jobs]: index into the cost tables' models
    origin_s: float  # the engine's origin (absolute); every time below is seconds since it
    arrival_s: np.ndarray  # float64[jobs]
    deadline_s: np.ndarray  # float64[jobs]
    first_op: np.ndarray  # int64[jobs + 1]: job j's layers are ops first_op[j]..first_op[j+1]-1
    op_job: np.ndarray  # int64[ops]
    op_row: np.ndarray  # int64[ops]: the layer's row in the cost tables (and piece tables)
    alone_s: np.ndarray  # float64[ops, types]: the layer alone with the whole bandwidth
    latency_s: np.ndarray  # float64[ops, types]: its work at rate 1 (the engine's task work)
    dram_bytes: np.ndarray  # float64[ops, types]
    demand_bps: np.ndarray  # float64[ops, types]: dram_bytes / latency_s
    types: tuple[str, ...]
    count: np.ndarray  # int64[types]: instances of each type
    instance_type: np.ndarray  # int64[instances]: type of each engine instance (its index order)
    dram_gbps: float | None  # None = unlimited
    pieces: PieceTables | None  # the tables' piece costs (resizing), indexed by `op_row`

    @classmethod
    def of(cls, system: System, tables: CostTables, jobs: pl.DataFrame) -> Instance:
        """The instance the engine simulates for `jobs` (JOB_SCHEMA) on `system` with `tables`.

        `tables` must be indexed for the system's bandwidth (as `load_costs` does), so that their
        alone latencies are the engine's; other tables are refused with a ValueError.
        """
        if jobs.height == 0:
            raise ValueError("an instance needs at least one job")
        if set(tables.types) != set(system.accelerator_types):
            raise ValueError(
                f"cost tables of {tables.types}, the system has {system.accelerator_types}"
            )
        capacity = system.bandwidth_bytes_per_s
        if not np.allclose(
            tables.alone_s,
            alone_latency(tables.latency_s, tables.demand_bps, capacity),
            rtol=1e-9,
            atol=0.0,
        ):
            raise ValueError(
                "cost tables indexed for another bandwidth than the system's "
                "(CostTables.from_frame(bandwidth_bps=system.bandwidth_bytes_per_s))"
            )
        jobs = jobs.sort(["arrival_s", "job_id"])
        index = {name: i for i, name in enumerate(tables.models)}
        model = np.array([index[m] for m in jobs["model"].to_list()], dtype=np.int64)
        sizes = tables.n_layers[model]
        first_op = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        op_job = np.repeat(np.arange(jobs.height, dtype=np.int64), sizes)
        op_row = tables.first_row[model][op_job] + (np.arange(first_op[-1]) - first_op[op_job])
        tenant_names = jobs["tenant"].to_list()
        tenants = tuple(dict.fromkeys(tenant_names))
        arrival = jobs["arrival_s"].to_numpy().astype(np.float64)
        origin = time_origin(arrival[0])
        types = tables.types
        instance_type = np.array([types.index(n) for n in system.instance_types], dtype=np.int64)
        return cls(
            job_id=jobs["job_id"].to_numpy().astype(np.int64),
            tenant=np.array([tenants.index(t) for t in tenant_names], dtype=np.int64),
            tenants=tenants,
            model=model,
            origin_s=origin,
            arrival_s=arrival - origin,
            deadline_s=jobs["deadline_s"].to_numpy().astype(np.float64) - origin,
            first_op=first_op,
            op_job=op_job,
            op_row=op_row.astype(np.int64),
            alone_s=tables.alone_s[op_row],
            latency_s=tables.latency_s[op_row],
            dram_bytes=tables.dram_bytes[op_row],
            demand_bps=tables.demand_bps[op_row],
            types=types,
            count=np.bincount(instance_type, minlength=len(types)).astype(np.int64),
            instance_type=instance_type,
            dram_gbps=system.dram_gbps,
            pieces=tables.pieces,
        )

    @property
    def n_jobs(self) -> int:
        return int(self.job_id.size)

    @property
    def n_ops(self) -> int:
        return int(self.op_job.size)

    @property
    def n_instances(self) -> int:
        return int(self.instance_type.size)

    @property
    def bandwidth_bps(self) -> float:
        """Shared off-chip bandwidth in B/s (inf when unlimited)."""
        return np.inf if self.dram_gbps is None else self.dram_gbps * 1e9

    def cuts(self, op: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Each split variant of layer `op` (none without piece tables): its pieces' alone
        latencies, bandwidth demands and DRAM bytes, float64[pieces, types] each."""
        if self.pieces is None:
            return []
        row, out = int(self.op_row[op]), []
        for v in range(1, len(self.pieces.variants)):
            columns = self.pieces.offset[v] + np.arange(self.pieces.count[row, v])
            demand = self.pieces.demand_bps[row, columns]
            alone = alone_latency(self.pieces.latency_s[row, columns], demand, self.bandwidth_bps)
            out.append((alone, demand, self.pieces.dram_bytes[row, columns]))
        return out

    def remaining(self, done: np.ndarray, release_s: np.ndarray) -> Instance:
        """What is left of this instance at a point of a run: job j with its first `done[j]`
        layers run (int64[jobs], fewer than its layers), released anew at `release_s[j]` (on this
        instance's clock): an online planner's view of the jobs present (relmas.policies.planner).
        """
        sizes = np.diff(self.first_op)
        if done.shape != (self.n_jobs,) or np.any(done < 0) or np.any(done >= sizes):
            raise ValueError("each job must keep at least one layer to run")
        keep = np.arange(self.n_ops) - self.first_op[self.op_job] >= done[self.op_job]
        first_op = np.concatenate(([0], np.cumsum(sizes - done))).astype(np.int64)
        return replace(
            self,
            arrival_s=np.asarray(release_s, dtype=np.float64),
            first_op=first_op,
            op_job=self.op_job[keep],
            op_row=self.op_row[keep],
            alone_s=self.alone_s[keep],
            latency_s=self.latency_s[keep],
            dram_bytes=self.dram_bytes[keep],
            demand_bps=self.demand_bps[keep],
        )

    def ops(self, job: int) -> range:
        """The operations (layers, in order) of internal job `job`."""
        return range(int(self.first_op[job]), int(self.first_op[job + 1]))


def alone_latency(latency_s: np.ndarray, demand_bps: np.ndarray, capacity_bps: float) -> np.ndarray:
    """A task's time when it runs alone: its work over the engine's rate for it then, which is
    min(1, capacity / demand) under both sharing modes (engine_kernels.refresh_rates). Used for
    piece costs, which have no alone latency of their own, and to check that cost tables fit a
    system."""
    with np.errstate(divide="ignore"):
        rate = np.minimum(1.0, capacity_bps / demand_bps)
    return latency_s / rate
