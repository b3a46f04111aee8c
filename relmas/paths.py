"""Where each artefact of the pipeline lives, relative to one results root.

The command line's defaults, the Snakemake rules, the cost-table loader and the report take their
paths from here, so that a file is named in one place. Every method also works with Snakemake
wildcards as arguments (`paths.workload("{scenario}", "{seed}")` is the rule's pattern).
Each configuration names its own root (`results:`, `ResultPaths.of(config)`), so that two studies
never write into each other's files.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from relmas.errors import InputError
from relmas.yaml_load import load_yaml

# the config schema: key names, types, defaults and bounds of every config file
CONFIG_SCHEMA = Path(__file__).resolve().parents[1] / "workflow" / "schemas" / "config.schema.yaml"
PIECES_SUFFIX = ".pieces.parquet"
SUMMARY_SUFFIX = ".summary.parquet"
GROUPS_SUFFIX = ".groups.parquet"
# The keeper file's version (relmas.rl.keeping), here so that the DAG's keeper rule relearns a
# keeper of another version instead of handing it to a training that refuses it. 2: label traces
# at most the scenario's length; no keeper where nothing is to be given up. 3: a feature of
# the tenant's deficit, and labels that count service targets.
KEEPER_FORMAT = "relmas-keeper/3"
# an agent directory's replay buffer, replay-<step>.npz (relmas.rl.checkpoint), kept only while its
# training runs
REPLAY_FILE = re.compile(r"^replay-\d{12}\.npz$")


def check_name(name: Any, source: str | Path | None, key: str) -> None:
    """Refuse a name that is not the config schema's `$defs/name`, the one pattern of every name
    that becomes a file or directory name here (the schema applies it to the config's names;
    this, to those of the other files a user writes: a system, an accelerator spec)."""
    definition = _name_definition()
    if not isinstance(name, str) or not re.fullmatch(definition["pattern"], name):
        raise InputError(source, key, definition["description"], name)


@cache
def _name_definition() -> dict[str, str]:
    """The schema's `$defs/name`, read once per process: planning a DAG checks thousands of
    names, and parsing the schema for each made planning the default study take minutes."""
    return load_yaml(CONFIG_SCHEMA)["$defs"]["name"]


def cost_table(costs_dir: str | Path, accelerator: str) -> Path:
    """The cost table of `accelerator` in a directory of cost tables."""
    return Path(costs_dir) / f"{accelerator}.parquet"


def piece_table(costs_dir: str | Path, accelerator: str) -> Path:
    """The piece table (operator resizing, docs/gacer.md) beside the cost table of `accelerator`."""
    return Path(costs_dir) / f"{accelerator}{PIECES_SUFFIX}"


def workload_file(workloads_dir: str | Path, scenario: str, seed: int | str) -> Path:
    """The job trace of one scenario and seed in a directory of traces."""
    return Path(workloads_dir) / scenario / f"seed{seed}.parquet"


def agent_dir(agents_dir: str | Path, scenario: str, policy: str) -> Path:
    """The agent of `policy` trained on `scenario`: a directory (best.pt, agent.json, ...)."""
    return Path(agents_dir) / scenario / policy


def evaluation_file(
    eval_dir: str | Path, scenario: str, policy: str, seed: int | str, agent: str | None = None
) -> Path:
    """Per-job results of one run; `agent`: the scenario of another scenario's agent."""
    directory = Path(eval_dir) / scenario / policy
    if agent is not None:
        directory = directory / f"from-{agent}"
    return directory / f"seed{seed}.parquet"


def validation_file(validation_dir: str | Path, scenario: str) -> Path:
    """Every online baseline's SLA rate on the validation traces of one scenario (the traces the
    agents are validated on): what the report chooses the scenario's best baseline by."""
    return Path(validation_dir) / f"{scenario}.parquet"


def bound_file(bounds_dir: str | Path, scenario: str, seed: int | str) -> Path:
    """The ceiling of one evaluation trace (`relmas bound`)."""
    return Path(bounds_dir) / scenario / f"seed{seed}.parquet"


def sweep_file(sweeps_dir: str | Path, sweep: str, label: str) -> Path:
    """The summary rows of one sweep point (`label`: the value as in file names)."""
    return Path(sweeps_dir) / sweep / f"{label}.parquet"


def summary_of(results: str | Path) -> Path:
    """Where the one-row summary of a per-job results file goes: beside it, `.summary.parquet`."""
    return _beside(results, SUMMARY_SUFFIX)


def groups_of(results: str | Path) -> Path:
    """Where the service groups' rows of a per-job results file go (each tenant's achieved rate
    against its target): beside it, `.groups.parquet`."""
    return _beside(results, GROUPS_SUFFIX)


def _beside(results: str | Path, suffix: str) -> Path:
    results = Path(results)
    return results.with_name(results.name.removesuffix(".parquet") + suffix)


@dataclass(frozen=True)
class ResultPaths:
    """The files of one study under `root`."""

    root: Path

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> ResultPaths:
        """The files of the study a (validated) configuration describes: under its `results:`."""
        return cls(Path(config["results"]))

    @property
    def layers(self) -> Path:
        return self.root / "layers.parquet"

    @property
    def costs_dir(self) -> Path:
        return self.root / "costs"

    def costs(self, accelerator: str) -> Path:
        return cost_table(self.costs_dir, accelerator)

    def pieces(self, accelerator: str) -> Path:
        return piece_table(self.costs_dir, accelerator)

    @property
    def workloads_dir(self) -> Path:
        return self.root / "workloads"

    def workload(self, scenario: str, seed: int | str) -> Path:
        return workload_file(self.workloads_dir, scenario, seed)

    @property
    def agents_dir(self) -> Path:
        return self.root / "agents"

    def agent(self, scenario: str, policy: str) -> Path:
        return agent_dir(self.agents_dir, scenario, policy)

    def keeper(self, scenario: str) -> Path:
        """The keeper every learned policy of `scenario` trains with (`relmas keeper`)."""
        return self.agents_dir / scenario / "keeper.json"

    @property
    def eval_dir(self) -> Path:
        return self.root / "eval"

    def evaluation(
        self, scenario: str, policy: str, seed: int | str, agent: str | None = None
    ) -> Path:
        return evaluation_file(self.eval_dir, scenario, policy, seed, agent)

    @property
    def validation_dir(self) -> Path:
        return self.root / "validation"

    def validation(self, scenario: str) -> Path:
        return validation_file(self.validation_dir, scenario)

    @property
    def bounds_dir(self) -> Path:
        return self.root / "bounds"

    def bound(self, scenario: str, seed: int | str) -> Path:
        return bound_file(self.bounds_dir, scenario, seed)

    @property
    def sweeps_dir(self) -> Path:
        return self.root / "sweeps"

    def sweep_point(self, sweep: str, label: str) -> Path:
        return sweep_file(self.sweeps_dir, sweep, label)

    @property
    def report_dir(self) -> Path:
        return self.root / "report"

    def figure(self, name: str) -> Path:
        return self.report_dir / "figures" / f"{name}.png"

    def log(self, *parts: str) -> Path:
        """A job's log: `logs/{parts...}.log` (e.g. `log("evaluate", scenario, policy)`)."""
        return self.root / "logs" / Path(*parts[:-1]) / f"{parts[-1]}.log"

    def benchmark(self, *parts: str) -> Path:
        """A job's Snakemake benchmark: `benchmarks/{parts...}.tsv`."""
        return self.root / "benchmarks" / Path(*parts[:-1]) / f"{parts[-1]}.tsv"
