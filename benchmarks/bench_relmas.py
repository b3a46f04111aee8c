"""RELMAS versus every heuristic: train one agent per scenario, evaluate on the unseen seeds.

    .venv/bin/python benchmarks/bench_relmas.py [--config config/config.yaml] [--out DIR]
        [--costs DIR] [--scenarios a,b] [--transfer train:eval,...] [--retrain]

Cost tables are profiled into OUT/costs unless --costs names a directory that has them; agents are
trained into OUT/agents/{scenario} (an existing finished agent is reused unless --retrain). Then
every policy of `evaluation.policies` plus `relmas` runs on every `evaluation.seeds` trace.

Per scenario the table gives each policy's mean SLA rate over the seeds and the ratio of relmas's
mean to the best heuristic's mean (best = highest mean on these seeds among the online policies,
chosen after the fact, which favours the baseline; ga_offline, where configured, is shown as the
offline upper reference) with a 95% paired bootstrap interval: seeds are resampled with replacement
(10,000 resamples) and the ratio of the two means recomputed. `--transfer` evaluates the agent of
one scenario on another (same instances) against fcfs and sjf. Also printed: training wall and CPU
time, and the policy's energy overhead (its energy / the jobs' dynamic energy) and decision time
relative to the mean layer time.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from train_or_load import train_or_load  # a sibling module

from relmas import arguments
from relmas.config import config_hash, load_config
from relmas.evaluate import simulate
from relmas.hw.spec import parse_spec
from relmas.io import write_parquet
from relmas.policies import make_policy
from relmas.profile import layers_hash, profile_layers, write_cost_table
from relmas.rl.agent import read_agent_info
from relmas.rl.overhead import overhead_metrics
from relmas.rl.run import ScenarioTrainResult
from relmas.sim.costs import load_costs
from relmas.study import Study, evaluation_runs, policy_options
from relmas.workload import scenario_system
from relmas.zoo import layer_table

RESAMPLES = 10_000
NOT_BASELINES = ("relmas", "relmas_resize")  # the agents under test
OFFLINE = ("ga_offline",)  # knows the future: an upper reference, not a baseline to beat


def ensure_costs(config: dict, costs: Path) -> None:
    """Profile every configured accelerator into `costs` unless its table is already there."""
    missing = [name for name in config["accelerators"] if not (costs / f"{name}.parquet").is_file()]
    if not missing:
        return
    layers = layer_table(config["models"])
    digest = layers_hash(layers)
    for name in missing:
        spec = parse_spec(name, config["accelerators"][name], None)
        table, _ = profile_layers(layers, name, spec)
        path = costs / f"{name}.parquet"
        write_cost_table(table, path, name, spec, digest, models_hash=config_hash(config["models"]))


def training_times(trained: ScenarioTrainResult) -> dict[str, float]:
    """What the report keeps of an agent's training: its wall and CPU seconds."""
    return {"wall_s": trained.wall_seconds, "cpu_s": trained.cpu_seconds}


def ratio_interval(ours: np.ndarray, base: np.ndarray, rng: np.random.Generator) -> tuple:
    """Ratio of means and its 95% paired bootstrap interval over seeds."""
    index = rng.integers(0, ours.size, size=(RESAMPLES, ours.size))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = ours[index].mean(axis=1) / base[index].mean(axis=1)
        low, high = np.nanpercentile(ratios, [2.5, 97.5])
        return ours.mean() / base.mean(), low, high


def evaluate(config, scenario, costs, agent, policies, seeds) -> dict[str, list[dict]]:
    """SLA rate of each policy (plus relmas with `agent`) on each seed; relmas's overhead too."""
    system = scenario_system(config, scenario)
    tables = load_costs(costs, system, models=tuple(config["models"]))
    info = read_agent_info(agent)
    runs: dict[str, list[dict]] = {name: [] for name in (*policies, "relmas")}
    for seed in seeds:
        jobs = Study(config).trace(scenario, seed, costs)
        for name in runs:
            options = {"agent": agent} if name == "relmas" else policy_options(config, name)
            result = simulate(system, jobs, tables, make_policy(name, seed=seed, **options))
            row = {"sla_rate": result.metrics["sla_rate"]}
            if name == "relmas":
                row.update(overhead_metrics(info.decision_cost, result))
            runs[name].append(row)
    return runs


def main() -> None:
    parser = arguments.Parser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--out", type=Path, default=Path("results/bench_relmas"))
    parser.add_argument("--costs", type=Path, default=None)
    parser.add_argument("--scenarios", default=None, help="comma-separated (default: all)")
    parser.add_argument(
        "--transfer",
        default="mixed_overload:bursty,bursty:bandwidth_scarce,vision_heavy:vision_light",
    )
    parser.add_argument("--retrain", action="store_true")
    args = parser.parse_args()

    config = load_config(args.config)
    costs = args.costs or args.out / "costs"
    ensure_costs(config, costs)
    scenarios = args.scenarios.split(",") if args.scenarios else list(config["scenarios"])
    seeds = config["evaluation"]["seeds"]
    evaluated = evaluation_runs(config)
    rng = np.random.default_rng(0)
    report: dict[str, dict] = {}

    for scenario in scenarios:
        agent = args.out / "agents" / scenario
        training = train_or_load(
            config,
            scenario,
            agent,
            costs,
            record="bench_training.json",
            figures=training_times,
            retrain=args.retrain,
        )
        others = [p for s, p in evaluated if s == scenario and p not in NOT_BASELINES]
        runs = evaluate(config, scenario, costs, agent, others, seeds)
        sla = {name: np.array([r["sla_rate"] for r in rows]) for name, rows in runs.items()}
        online = [p for p in others if p not in OFFLINE]
        best = max(online, key=lambda p: sla[p].mean())
        ratio = ratio_interval(sla["relmas"], sla[best], rng)
        overhead = {
            key: float(np.mean([r[key] for r in runs["relmas"]]))
            for key in ("overhead_energy_ratio", "decision_time_ratio", "decision_latency_ratio")
        }
        report[scenario] = {
            "mean_sla": {name: float(values.mean()) for name, values in sla.items()},
            "per_seed_sla": {name: values.tolist() for name, values in sla.items()},
            "best_heuristic": best,
            "ratio": ratio,
            "training": training,
            "overhead": overhead,
        }
        print_scenario(scenario, report[scenario])

    transfers = {}
    for pair in filter(None, args.transfer.split(",")):
        source, target = pair.split(":")
        if source not in scenarios or target not in config["scenarios"]:
            continue
        runs = evaluate(config, target, costs, args.out / "agents" / source, ["fcfs", "sjf"], seeds)
        means = {name: float(np.mean([r["sla_rate"] for r in rows])) for name, rows in runs.items()}
        transfers[pair] = means
        print(
            f"transfer {source} -> {target}: " + "  ".join(f"{k} {v:.3f}" for k, v in means.items())
        )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.json").write_text(
        json.dumps({"scenarios": report, "transfer": transfers}, indent=2)
    )
    write_parquet_summary(report, args.out / "summary.parquet")


def print_scenario(scenario: str, entry: dict) -> None:
    means = entry["mean_sla"]
    ratio, low, high = entry["ratio"]
    cells = "  ".join(f"{name} {value:.3f}" for name, value in means.items())
    print(
        f"{scenario:18s} {cells}\n{'':18s} relmas / {entry['best_heuristic']} = {ratio:.3f} "
        f"[{low:.3f}, {high:.3f}]  train {entry['training']['wall_s']:.0f} s wall, "
        f"{entry['training']['cpu_s']:.0f} s CPU  energy overhead "
        f"{100 * entry['overhead']['overhead_energy_ratio']:.2f}%  decision time / layer time "
        f"{entry['overhead']['decision_time_ratio']:.3f}",
        flush=True,
    )


def write_parquet_summary(report: dict, path: Path) -> None:
    import polars as pl

    rows = [
        {"scenario": scenario, "policy": policy, "seed_index": i, "sla_rate": value}
        for scenario, entry in report.items()
        for policy, values in entry["per_seed_sla"].items()
        for i, value in enumerate(values)
    ]
    write_parquet(pl.DataFrame(rows), path)


if __name__ == "__main__":
    main()
