"""What running the RELMAS policy itself costs, priced by the same cost model as the jobs.

The policy network is a small DNN: one forward pass per decision, batch 1. `decision_cost` maps its
layers (`policy_layer_table`) onto one of the system's accelerators with `profile_layers`, giving
the energy and latency of one decision on that hardware. `overhead_metrics` relates that to a
simulated run: the policy's energy over the run against the jobs' (dynamic) energy — the paper's
"< 1.5 %" figure — and the wall time of a decision against the mean time of a layer.
"""

from __future__ import annotations

from typing import Any

from relmas.hw.spec import Spec
from relmas.profile import profile_layers
from relmas.rl.network import QNetwork, forward_macs, policy_layer_table
from relmas.sim.result import SimResult


def decision_cost(net: QNetwork, accelerator: str, spec: Spec) -> dict[str, Any]:
    """MACs, energy (J) and latency (s) of one forward pass of `net` on `accelerator`."""
    table, _ = profile_layers(policy_layer_table(net), accelerator, spec)
    return {
        "accelerator": accelerator,
        "macs": forward_macs(net),
        "energy_j": float(table["energy_j"].sum()),
        "latency_s": float(table["latency_s"].sum()),
    }


def overhead_metrics(cost: dict[str, Any], result: SimResult) -> dict[str, float]:
    """The policy's overhead in a run `result` simulated with it (its energy already counted).

    - `overhead_energy_ratio`: policy energy / dynamic energy of the jobs' layers;
    - `overhead_energy_share`: policy energy / total energy of the run;
    - `decision_time_ratio`: mean wall time of a decision / mean time a layer occupies an instance;
    - `decision_latency_ratio`: the network's latency on its accelerator / that same layer time.
    """
    metrics = result.metrics
    decisions = metrics["decisions"]
    policy_energy = cost["energy_j"] * decisions
    layer_time = float(result.accelerators["busy_s"].sum()) / metrics["assignments"]
    return {
        "overhead_macs_per_decision": float(cost["macs"]),
        "overhead_energy_per_decision_j": float(cost["energy_j"]),
        "overhead_energy_j": policy_energy,
        "overhead_energy_ratio": policy_energy / metrics["energy_dynamic_j"],
        "overhead_energy_share": policy_energy / metrics["energy_j"],
        "decision_time_ratio": metrics["decision_us"] * 1e-6 / layer_time,
        "decision_latency_ratio": cost["latency_s"] / layer_time,
        "mean_layer_time_s": layer_time,
    }
