"""The benchmarks' agents: trained once into the benchmark's OUT, reused by later runs.

A training's figures are written beside its agent only once it has finished, so a run killed
mid-training trains again and a finished one is never repeated (unless asked).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from relmas.paths import ResultPaths
from relmas.rl.run import ScenarioTrainResult, train_scenario


def train_or_load(
    config: Mapping[str, Any],
    scenario: str,
    agent: Path,
    costs: Path,
    *,
    record: str,
    figures: Callable[[ScenarioTrainResult], dict[str, Any]],
    retrain: bool = False,
) -> dict[str, Any]:
    """Train the agent of `scenario` into `agent` (cost tables `costs`, the config's validation
    traces) unless it holds `record`, or `retrain`; then its training `figures`, as `record`
    keeps them."""
    done = agent / record
    if retrain or not done.is_file():
        trained = train_scenario(
            config,
            scenario,
            agent,
            costs,
            resume=False,
            validation=ResultPaths.of(config).validation(scenario),
        )
        print(f"{scenario}: trained in {trained.wall_seconds:.0f} s", flush=True)
        done.write_text(json.dumps(figures(trained)))
    return json.loads(done.read_text())
