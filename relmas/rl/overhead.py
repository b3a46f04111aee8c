"""What running the RELMAS policy itself costs, priced by the same cost model as the jobs.

The policy network is a small DNN run at every decision. A decision projects the shared blocks
of the network's rows once (every slot's, type's and the global features: a fixed part) and
scores only the rows of its valid actions (`relmas.rl.network.greedy_decision`), so its cost is
fixed + rows scored x per row. An agent's keeper (`relmas.rl.keeper`) is a second small network,
run at a plan (a decision point after arrivals) over the present jobs: keeper_plan + jobs
scored x keeper_job. `decision_cost` maps the layers (`linear_layer_table`) onto one of the
system's accelerators with `profile_layers`: each fixed part, and each per-row (per-job) part as
the slope of the cost between one row and many (a batch shares its weight fetches: the
intercept goes to the fixed part). `overhead_energy_j` is the one rule that turns what a run
scored into energy; `overhead_metrics` relates a simulated run's to the jobs' (dynamic) energy
— the paper's "< 1.5 %" figure — and the wall time of a decision against the mean time of a
layer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from relmas.hw.spec import Spec
from relmas.profile import profile_layers
from relmas.rl.keeper import KeeperWeights
from relmas.rl.network import QNetwork, decision_layers, linear_layer_table
from relmas.sim.result import SimResult

COSTS = ("macs", "energy_j", "latency_s")  # of each part of a decision's cost
# each part of a decision's cost by the count of a run (`SimResult.metrics`) it is paid per: a
# decision, a row scored, a keeper's plan, a present job the keeper scored
PAID_PER = {
    "fixed": "decisions",
    "per_row": "rows_scored",
    "keeper_plan": "keeper_plans",
    "keeper_job": "keeper_jobs_scored",
}
COST_VERSION = 3  # 3: the keeper's plans and jobs priced (2: a fixed part and a part per row)
KEEPER_BATCH = 64  # present jobs of the plan the keeper's slope is measured to

Layers = Sequence[tuple[str, int, int, int]]


def decision_cost(
    net: QNetwork, accelerator: str, spec: Spec, keeper: KeeperWeights | None = None
) -> dict[str, Any]:
    """MACs, energy (J) and latency (s) of a decision of `net` (and of a plan of its `keeper`)
    on `accelerator`: the parts of `PAID_PER`, and at the top level the network's worst case,
    every row scored."""

    def priced(layers: Layers) -> dict[str, float]:
        table = linear_layer_table(layers)
        if table.is_empty():  # no shared blocks and no row
            return dict.fromkeys(COSTS, 0.0)
        profiled, _ = profile_layers(table, accelerator, spec)
        return {
            "macs": float(sum(n * c * k for _, n, c, k in layers)),
            "energy_j": float(profiled["energy_j"].sum()),
            "latency_s": float(profiled["latency_s"].sum()),
        }

    every = net.row_count
    worst = priced(decision_layers(net, every))
    if every > 1:
        fixed, per_row = _fixed_and_slope(lambda rows: priced(decision_layers(net, rows)), every)
    else:
        shared, one = priced(decision_layers(net, 0)), priced(decision_layers(net, 1))
        fixed, per_row = shared, {key: one[key] - shared[key] for key in COSTS}
    plan = job = dict.fromkeys(COSTS, 0.0)
    if keeper is not None:
        plan, job = _fixed_and_slope(lambda jobs: priced(keeper.layers(jobs)), KEEPER_BATCH)
    parts = {"fixed": fixed, "per_row": per_row, "keeper_plan": plan, "keeper_job": job}
    return {"accelerator": accelerator, **worst, **parts, "rows": every}


def _fixed_and_slope(
    priced: Callable[[int], dict[str, float]], many: int
) -> tuple[dict[str, float], dict[str, float]]:
    """The cost of a batch as fixed + size x slope, the slope between a batch of one and of
    `many`."""
    one, batch = priced(1), priced(many)
    slope = {key: (batch[key] - one[key]) / (many - 1) for key in COSTS}
    return {key: one[key] - slope[key] for key in COSTS}, slope


def overhead_energy_j(cost: Mapping[str, Any], counts: Mapping[str, float]) -> float:
    """The policy's energy over a run of these `counts` (decisions, rows scored, ...:
    `PAID_PER`)."""
    return sum(counts[count] * cost[part]["energy_j"] for part, count in PAID_PER.items())


def overhead_metrics(cost: Mapping[str, Any], result: SimResult) -> dict[str, float]:
    """The policy's overhead in a run `result` simulated with it (its energy already counted,
    `overhead_energy_j`, and its counts in the run's metrics), per decision the mean over the
    run's decisions.

    - `overhead_macs_per_decision`, `overhead_rows_per_decision`: MACs and rows scored;
    - `overhead_keeper_jobs_per_decision`: present jobs its keeper scored;
    - `overhead_energy_ratio`: policy energy / dynamic energy of the jobs' layers;
    - `overhead_energy_share`: policy energy / total energy of the run;
    - `decision_time_ratio`: mean wall time of a decision / mean time a layer occupies an instance;
    - `decision_latency_ratio`: the networks' mean latency on their accelerator / that layer time.
    """
    metrics = result.metrics
    decisions = max(metrics["decisions"], 1.0)
    policy_energy = metrics["energy_overhead_j"]
    mean = {
        key: sum(metrics[count] * cost[part][key] for part, count in PAID_PER.items()) / decisions
        for key in COSTS
    }
    layer_time = float(result.accelerators["busy_s"].sum()) / metrics["assignments"]
    return {
        "overhead_macs_per_decision": mean["macs"],
        "overhead_rows_per_decision": metrics["rows_scored"] / decisions,
        "overhead_keeper_jobs_per_decision": metrics["keeper_jobs_scored"] / decisions,
        "overhead_energy_per_decision_j": mean["energy_j"],
        "overhead_energy_j": policy_energy,
        "overhead_energy_ratio": policy_energy / metrics["energy_dynamic_j"],
        "overhead_energy_share": policy_energy / metrics["energy_j"],
        "decision_time_ratio": metrics["decision_us"] * 1e-6 / layer_time,
        "decision_latency_ratio": mean["latency_s"] / layer_time,
        "mean_layer_time_s": layer_time,
    }
