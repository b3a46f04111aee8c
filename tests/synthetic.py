"""Synthetic cost tables (COST_SCHEMA) for tests and benchmarks that must not depend on profiling,
hand-made traces, and a policy's run through the Python stepping path.

Layer latencies are log-normal with a per-(layer, type) speed factor, so that no type is uniformly
fastest; DRAM traffic gives each layer a bandwidth demand of a few GB/s, comparable to the shared
bandwidth of the default system, so that contention matters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from relmas.policies import Policy, make_policy
from relmas.schemas import COST_SCHEMA, JOB_SCHEMA
from relmas.sim import CostTables, Engine, SimResult, System, load_system
from relmas.sim.costs import PIECE_SCHEMA


def job_trace(rows: list[tuple[str, float, float, int]]) -> pl.DataFrame:
    """A hand-made trace of one tenant: (model, arrival_s, deadline_s, priority) per job, ids in
    order."""
    return pl.DataFrame(
        {
            "job_id": list(range(len(rows))),
            "tenant": ["t"] * len(rows),
            "model": [r[0] for r in rows],
            "arrival_s": [float(r[1]) for r in rows],
            "deadline_s": [float(r[2]) for r in rows],
            "priority": [r[3] for r in rows],
        },
        schema_overrides=JOB_SCHEMA,
    )


def tenant_jobs(
    rows: Sequence[tuple[str, str, float, float]],
    firm: list[bool],
    targets: Mapping[str, float] | None = None,
) -> pl.DataFrame:
    """Jobs (tenant, model, arrival, deadline) of priority 1 with ids in the given order, `firm`
    per job; with `targets`, each job has its tenant's target (none for a tenant not in it)."""
    columns = {
        "job_id": list(range(len(rows))),
        "tenant": [r[0] for r in rows],
        "model": [r[1] for r in rows],
        "arrival_s": [float(r[2]) for r in rows],
        "deadline_s": [float(r[3]) for r in rows],
        "priority": [1] * len(rows),
        "firm": firm,
    }
    if targets is not None:
        columns["target"] = [targets.get(r[0]) for r in rows]
    return pl.DataFrame(columns, schema_overrides=JOB_SCHEMA)


def stepped_result(
    system: System, tables: CostTables, jobs: pl.DataFrame, policy: Policy, name: str
) -> SimResult:
    """`policy` on `jobs` through the Python stepping path, decision by decision (never its jitted
    loop), as `name`'s result."""
    engine = Engine(system, tables, jobs)
    policy.reset(engine)
    while (view := engine.next_decision()) is not None:
        engine.step(policy.decide(view))
    return engine.result(name)


def both_ways(system: System, tables: CostTables, jobs: pl.DataFrame, name: str) -> SimResult:
    """Policy `name` on `jobs` by its jitted loop, checked against the stepping path: the same
    schedule and the same number of decisions."""
    fast = Engine(system, tables, jobs).run(make_policy(name))
    slow = stepped_result(system, tables, jobs, make_policy(name), name)
    assert slow.jobs.equals(fast.jobs), name
    assert slow.metrics["decisions"] == fast.metrics["decisions"], name
    return fast


def synthetic_costs(
    layers: Mapping[str, int],
    accelerators: Sequence[str],
    seed: int = 0,
    mean_latency_s: float = 1e-4,
    mean_demand_gbps: float = 4.0,
    byte_scale: Mapping[str, float] | None = None,
) -> pl.DataFrame:
    """Costs of models with `layers[model]` layers on each accelerator name; a layer moves the
    same bytes on every type but those of `byte_scale`, which move that many times more."""
    rng = np.random.default_rng(seed)
    frames = []
    for model, count in layers.items():
        base = mean_latency_s * rng.lognormal(0.0, 0.7, count)
        demand = mean_demand_gbps * 1e9 * rng.lognormal(0.0, 0.5, count)
        for name in accelerators:
            latency = base * rng.uniform(0.4, 2.5, count)
            scale = 1.0 if byte_scale is None else byte_scale.get(name, 1.0)
            dram = np.rint(demand * base * scale).astype(np.int64)
            frames.append(
                pl.DataFrame(
                    {
                        "model": [model] * count,
                        "layer": np.arange(count, dtype=np.int32),
                        "accelerator": [name] * count,
                        "cycles": np.rint(latency * 1e9).astype(np.int64),
                        "latency_s": latency,
                        "dram_bytes": dram,
                        "energy_j": 1e-12 * dram * 100 + latency * 0.5,
                        "utilization": rng.uniform(0.2, 1.0, count),
                        "mapping": ["synthetic"] * count,
                    },
                    schema=COST_SCHEMA,
                )
            )
    return pl.concat(frames)


def cost_frame(
    layers: Mapping[str, Mapping[str, Sequence[tuple[float, int, float]]]],
) -> pl.DataFrame:
    """Explicit costs: `layers[model][accelerator]` = [(latency_s, dram_bytes, energy_j), ...]."""
    rows = [
        {
            "model": model,
            "layer": index,
            "accelerator": name,
            "cycles": int(round(latency * 1e9)),
            "latency_s": float(latency),
            "dram_bytes": int(dram),
            "energy_j": float(energy),
            "utilization": 1.0,
            "mapping": "explicit",
        }
        for model, per_type in layers.items()
        for name, entries in per_type.items()
        for index, (latency, dram, energy) in enumerate(entries)
    ]
    return pl.DataFrame(rows, schema=COST_SCHEMA)


def one_type(latencies: Mapping[str, Sequence[float]], count: int = 1) -> tuple[System, CostTables]:
    """Models of the given layer latencies (seconds; no DRAM traffic, no energy) on `count`
    instances of one type, x."""
    layers = {model: {"x": [(t, 0, 0.0) for t in times]} for model, times in latencies.items()}
    system = load_system({"instances": [{"name": "x", "count": count}]})
    return system, CostTables.from_frame(cost_frame(layers), ["x"])


def synthetic_pieces(
    costs: pl.DataFrame, splits: Sequence[int] = (2, 4), seed: int = 0
) -> pl.DataFrame:
    """Piece costs (PIECE_SCHEMA) of the layers of `costs`, cut along K and Y into k pieces.

    For tests of the engine and policies only (real pieces come from `relmas profile --pieces`):
    a piece takes 1/k of the latency times an overhead in [1, 1.5), and moves 1/k of the layer's
    bytes plus a re-read share (30-70 %) of the whole layer's, so that splitting is never free.
    """
    rng = np.random.default_rng(seed)
    frames = []
    for dim in ("K", "Y"):
        for k in splits:
            n = costs.height
            overhead = rng.uniform(1.0, 1.5, (k, n))
            reread = rng.uniform(0.3, 0.7, n)
            for piece in range(k):
                latency = costs["latency_s"].to_numpy() / k * overhead[piece]
                dram = costs["dram_bytes"].to_numpy() * (1.0 / k + reread)
                frames.append(
                    costs.select("model", "layer", "accelerator").with_columns(
                        dim=pl.lit(dim),
                        splits=pl.lit(k, pl.Int32()),
                        pieces=pl.lit(k, pl.Int32()),
                        piece=pl.lit(piece, pl.Int32()),
                        # one MAC a cycle: the piece contract wants at least one
                        macs=pl.Series(np.maximum(1, np.rint(latency * 1e9)).astype(np.int64)),
                        cycles=pl.Series(np.rint(latency * 1e9).astype(np.int64)),
                        latency_s=pl.Series(latency),
                        dram_bytes=pl.Series(np.ceil(dram).astype(np.int64)),
                        energy_j=pl.Series(costs["energy_j"].to_numpy() / k * overhead[piece]),
                        utilization=pl.lit(1.0),
                        mapping=pl.lit("synthetic"),
                    )
                )
    return pl.concat(frames).select(list(PIECE_SCHEMA))


def contended_case(
    seed: int,
    jobs: int,
    layers: Mapping[str, int],
    dram_gbps: float,
    slack: tuple[float, float],
    sharing: str = "proportional",
    splits: Sequence[int] = (),
) -> tuple[System, CostTables, pl.DataFrame]:
    """Jobs of the synthetic models `layers` on 2 + 1 instances of two types sharing scarce
    bandwidth: Poisson arrivals near saturation, deadlines `slack` x the isolated latency
    (uniform), priorities 1, 3 or 9; with `splits`, piece tables cut k ways for each k."""
    types = ["e", "s"]
    costs = synthetic_costs(layers, types, seed=seed)
    system = load_system(
        {
            "instances": [{"name": "e", "count": 2}, {"name": "s", "count": 1}],
            "dram_gbps": dram_gbps,
            "sharing": sharing,
        }
    )
    tables = CostTables.from_frame(costs, types)
    if splits:
        tables = tables.with_pieces(synthetic_pieces(costs, splits=splits, seed=seed))
    rng = np.random.default_rng(seed)
    models = rng.choice(list(layers), jobs)
    isolated = np.array([tables.isolated_latency(m) for m in models])
    arrival = np.cumsum(rng.exponential(isolated.mean() / 2.5, jobs))
    deadline = arrival + rng.uniform(*slack, jobs) * isolated
    trace = pl.DataFrame(
        {
            "job_id": list(range(jobs)),
            "tenant": ["t"] * jobs,
            "model": models.tolist(),
            "arrival_s": arrival,
            "deadline_s": deadline,
            "priority": rng.choice([1, 3, 9], jobs).tolist(),
        },
        schema_overrides=JOB_SCHEMA,
    )
    return system, tables, trace


def burst_trace(
    tables: CostTables,
    models: Sequence[str],
    jobs: int,
    seed: int,
    spread: float = 1.0,
    slack: tuple[float, float] = (1.5, 4.0),
) -> pl.DataFrame:
    """`jobs` jobs of `models` (uniformly) in one burst: arrivals uniform within `spread` x their
    mean isolated latency, each due `slack` (uniform) x its isolated latency after arriving."""
    rng = np.random.default_rng(seed)
    chosen = rng.choice(list(models), jobs)
    isolated = np.array([tables.isolated_latency(m) for m in chosen])
    arrival = np.sort(rng.uniform(0.0, spread * isolated.mean(), jobs))
    deadline = arrival + rng.uniform(*slack, jobs) * isolated
    return pl.DataFrame(
        {
            "job_id": list(range(jobs)),
            "tenant": ["t"] * jobs,
            "model": chosen.tolist(),
            "arrival_s": arrival,
            "deadline_s": deadline,
            "priority": [1] * jobs,
        },
        schema_overrides=JOB_SCHEMA,
    )


def memory_bound_case(
    seed: int,
    jobs: int,
    dram_gbps: float = 3.0,
    spread: float = 1.0,
    slack: tuple[float, float] = (1.5, 4.0),
) -> tuple[System, CostTables, pl.DataFrame]:
    """A burst of jobs where memory binds: models of 3 and 2 layers demanding about twice the
    bandwidth, on 2 + 1 instances of two types, the 2-instance type `e` moving twice the bytes
    of `s` (16-bit against 8-bit operands)."""
    system = load_system(
        {
            "instances": [{"name": "e", "count": 2}, {"name": "s", "count": 1}],
            "dram_gbps": dram_gbps,
        }
    )
    costs = synthetic_costs(
        {"a": 3, "b": 2}, ["e", "s"], seed=seed, mean_demand_gbps=6.0, byte_scale={"e": 2.0}
    )
    tables = CostTables.from_frame(costs, ["e", "s"], bandwidth_bps=system.bandwidth_bytes_per_s)
    return system, tables, burst_trace(tables, ["a", "b"], jobs, seed, spread, slack)
