"""MACs of a RELMAS decision on the default config's observation layout: the worst case (every
(slot, type) pair and wait valid) and the mean over the decisions of real traces.

    .venv/bin/python benchmarks/bench_decision_macs.py [--config config/config.yaml]
        [--scenarios vision_light mixed_overload] [--seeds 1 2 3]

A decision projects the shared blocks of the network's rows once (`forward_macs(net, 0)`) and
scores the rows of its valid actions (`forward_macs(net, 1) - forward_macs(net, 0)` each,
`relmas.rl.network.greedy_decision`). The mean counts the rows the fused policy (`run_agent`)
scored on each scenario's trace of its system, with synthetic cost tables (tests/synthetic.py:
the default zoo's layer counts) and an untrained network of the config's width favouring its
teacher by the config's bonus, so that its decisions follow a rule baseline as a trained
agent's mostly do. The MACs are computed from the layout; the energy share of the jobs' energy
needs the real tables and a trained agent (`make run`, docs/benchmarks.md).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch

from relmas import arguments
from relmas.config import load_config
from relmas.evaluate import simulate
from relmas.policies import make_policy
from relmas.rl.network import QNetwork, forward_macs
from relmas.rl.observation import ObservationSettings, Observer
from relmas.sim import CostTables, Engine
from relmas.workload import generate_trace, scenario_system

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.bench_sim import ZOO_LAYERS  # noqa: E402
from tests.defaults import decision_cost, write_untrained_agent  # noqa: E402
from tests.synthetic import synthetic_costs  # noqa: E402

TEACHER = "sjf_feasible_patient_gated"  # the rule baseline the untrained network favours


def agent(directory: Path, config: dict, engine: Engine, settings: ObservationSettings) -> QNetwork:
    """An untrained agent of the config's network for `engine`'s system, favouring TEACHER."""
    layout = Observer(engine, settings).layout
    dqn = config["training"]["dqn"]
    torch.manual_seed(0)
    net = QNetwork(
        layout.size,
        layout.actions,
        dqn["hidden"],
        dqn["dueling"],
        layout.rows,
        layout.variants,
        layout.row_blocks,
    )
    system = engine.system
    write_untrained_agent(
        directory,
        net,
        settings,
        scenario="bench",
        instance_types=system.instance_types,
        accelerator_types=system.accelerator_types,
        cost=decision_cost(system.accelerator_types[0]),
        teacher=TEACHER,
        teacher_bonus=float(dqn["teacher_bonus"]),
    )
    return net


def main() -> None:
    parser = arguments.Parser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--scenarios", nargs="+", default=["vision_light", "mixed_overload"])
    parser.add_argument("--seeds", nargs="+", type=arguments.seed, default=[1, 2, 3])
    args = parser.parse_args()
    config = load_config(args.config)
    observation = config["training"]["observation"]
    settings = ObservationSettings(observation["candidates"], TEACHER, service=False)
    with tempfile.TemporaryDirectory() as scratch:
        for index, name in enumerate(args.scenarios):
            scenario = config["scenarios"][name]
            system = scenario_system(config, name)
            costs = synthetic_costs(ZOO_LAYERS, system.accelerator_types, seed=1)
            tables = CostTables.from_frame(costs, system.accelerator_types)
            decisions = rows = 0
            for seed in args.seeds:
                jobs = generate_trace(name, scenario, system, tables, seed)
                directory = Path(scratch) / f"{index}-{seed}"
                net = agent(directory, config, Engine(system, tables, jobs), settings)
                policy = make_policy("relmas", agent=directory)
                result = simulate(system, jobs, tables, policy)
                decisions += int(result.metrics["decisions"])
                rows += int(policy.rows_scored[0])
            fixed, per_row = forward_macs(net, 0), forward_macs(net, 1) - forward_macs(net, 0)
            every = net.row_count
            mean_rows = rows / decisions
            print(
                f"{name}: {every} rows ({len(system.accelerator_types)} types), "
                f"MACs/decision worst {forward_macs(net)} = {fixed} + {every} x {per_row}, "
                f"mean {fixed + mean_rows * per_row:.0f} ({mean_rows:.2f} rows scored, "
                f"{decisions} decisions over seeds {args.seeds})"
            )


if __name__ == "__main__":
    main()
