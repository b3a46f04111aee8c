"""What running the RELMAS policy itself costs, priced by the same cost model as the jobs.

The policy network is a small DNN run at every decision. A decision projects the shared blocks
of the network's rows once (every slot's, type's and the global features: a fixed part) and
scores only the rows of its valid actions (`relmas.rl.network.greedy_decision`), so its cost is
fixed + rows scored x per row. `decision_cost` maps the layers (`policy_layer_table`) onto one of
the system's accelerators with `profile_layers`: the fixed part, and the per-row part as the
slope of the rows' cost between one row and every row (a batch of rows shares its weight
fetches: the intercept goes to the fixed part). `overhead_energy_j` is the one rule that turns
decisions and rows scored into energy; `overhead_metrics` relates a simulated run's to the jobs'
(dynamic) energy — the paper's "< 1.5 %" figure — and the wall time of a decision against the
mean time of a layer.
"""

from __future__ import annotations

from typing import Any

from relmas.hw.spec import Spec
from relmas.profile import profile_layers
from relmas.rl.network import QNetwork, forward_macs, policy_layer_table
from relmas.sim.result import SimResult

COSTS = ("macs", "energy_j", "latency_s")  # of each part of a decision's cost
COST_VERSION = 2  # 2: a fixed part and a part per row scored (agents price their decisions so)


def decision_cost(net: QNetwork, accelerator: str, spec: Spec) -> dict[str, Any]:
    """MACs, energy (J) and latency (s) of a decision of `net` on `accelerator`: `fixed` (the
    shared projections, per decision), `per_row` (per row scored), and at the top level the worst
    case, every row scored."""

    def priced(rows: int) -> dict[str, float]:
        layers = policy_layer_table(net, rows)
        if layers.is_empty():  # no shared blocks and no row
            return dict.fromkeys(COSTS, 0.0)
        table, _ = profile_layers(layers, accelerator, spec)
        return {
            "macs": float(forward_macs(net, rows)),
            "energy_j": float(table["energy_j"].sum()),
            "latency_s": float(table["latency_s"].sum()),
        }

    every = net.row_count
    shared, one, worst = priced(0), priced(1), priced(every)
    per_row = {
        key: (worst[key] - one[key]) / (every - 1) if every > 1 else one[key] - shared[key]
        for key in COSTS
    }
    fixed = {key: one[key] - per_row[key] for key in COSTS}
    return {"accelerator": accelerator, **worst, "fixed": fixed, "per_row": per_row, "rows": every}


def overhead_energy_j(cost: dict[str, Any], decisions: int, rows: int) -> float:
    """The network's energy over `decisions` decisions that scored `rows` rows in all."""
    return decisions * cost["fixed"]["energy_j"] + rows * cost["per_row"]["energy_j"]


def overhead_metrics(cost: dict[str, Any], result: SimResult) -> dict[str, float]:
    """The policy's overhead in a run `result` simulated with it (its energy already counted,
    `overhead_energy_j`), per decision the mean over the run's decisions.

    - `overhead_macs_per_decision`, `overhead_rows_per_decision`: MACs and rows scored;
    - `overhead_energy_ratio`: policy energy / dynamic energy of the jobs' layers;
    - `overhead_energy_share`: policy energy / total energy of the run;
    - `decision_time_ratio`: mean wall time of a decision / mean time a layer occupies an instance;
    - `decision_latency_ratio`: the network's mean latency on its accelerator / that layer time.
    """
    metrics = result.metrics
    decisions = max(metrics["decisions"], 1.0)
    policy_energy = metrics["energy_overhead_j"]
    # the rows scored, from the energy counted for them (the one rule, `overhead_energy_j`)
    fixed, per_row = cost["fixed"], cost["per_row"]
    rows = (policy_energy / decisions - fixed["energy_j"]) / per_row["energy_j"]
    mean = {key: fixed[key] + rows * per_row[key] for key in COSTS}
    layer_time = float(result.accelerators["busy_s"].sum()) / metrics["assignments"]
    return {
        "overhead_macs_per_decision": mean["macs"],
        "overhead_rows_per_decision": rows,
        "overhead_energy_per_decision_j": mean["energy_j"],
        "overhead_energy_j": policy_energy,
        "overhead_energy_ratio": policy_energy / metrics["energy_dynamic_j"],
        "overhead_energy_share": policy_energy / metrics["energy_j"],
        "decision_time_ratio": metrics["decision_us"] * 1e-6 / layer_time,
        "decision_latency_ratio": mean["latency_s"] / layer_time,
        "mean_layer_time_s": layer_time,
    }
