"""A trained agent directory as deployed: the network (best.pt) plus `agent.json`, which records
what the network was trained to see (observation settings, the resolved reference heuristic, the
system layout) and what one decision costs (MACs, energy on the configured accelerator).

    agent.json = {"format", "scenario", "observation": {candidates, reference, placement, ...},
                  "reward": {...},
                  "instance_types": [...], "accelerator_types": [...], "split_variants": [...],
                  "decision_cost": {accelerator, macs, energy_j, latency_s (every row scored),
                                    fixed: {...}, per_row: {...}, keeper_plan: {...},
                                    keeper_job: {...}, rows},
                  "validation": {...}, "teacher", "teacher_bonus",
                  "teachers_validation": {...}, "teachers_shortfall": {...},
                  "keeper": null or the learned keeper's weights (relmas.rl.keeper)}
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from relmas import catalog
from relmas.errors import InputError
from relmas.io import atomic_path
from relmas.policies.placement import Placement
from relmas.rl.checkpoint import BEST, load_policy
from relmas.rl.env import RewardSettings
from relmas.rl.features import FEATURES_VERSION, Layout
from relmas.rl.keeper import KeeperWeights
from relmas.rl.network import GreedyPolicy
from relmas.rl.observation import ObservationSettings, observation_layout
from relmas.rl.overhead import COST_VERSION, COSTS, PAID_PER
from relmas.rl.teacher import named_teacher

AGENT_FILE = "agent.json"
# an agent sees the features it was trained on, its decisions priced as `decision_cost` does
FORMAT = f"relmas-agent/{FEATURES_VERSION}.{COST_VERSION}"


@dataclass(frozen=True)
class AgentInfo:
    scenario: str
    observation: ObservationSettings  # reference resolved to a baseline with its placement
    reward: RewardSettings
    instance_types: tuple[str, ...]
    accelerator_types: tuple[str, ...]
    split_variants: tuple[str, ...]  # the cuts its actions choose among (whole only: relmas)
    decision_cost: dict[str, Any]
    validation: dict[str, float]
    teacher: str | None  # the reference baseline (+ _cut when it cuts), None without a teacher
    teacher_bonus: float  # added to the Q-value of the teacher's action when deciding
    teachers_validation: dict[str, float]  # SLA rate of the teacher (whole, cut) on validation
    # on traces with service targets, their shortfall, which ranks them first (relmas.rl.run)
    teachers_shortfall: dict[str, float] = field(default_factory=dict)
    keeper: KeeperWeights | None = None  # gives jobs up before each decision; None: keeps all

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, **asdict(self)}


def write_agent_info(directory: str | Path, info: AgentInfo) -> None:
    with atomic_path(Path(directory) / AGENT_FILE, suffix=".json") as tmp:
        Path(tmp).write_text(json.dumps(info.to_json(), indent=2, sort_keys=True))


def read_agent_info(directory: str | Path) -> AgentInfo:
    path = Path(directory) / AGENT_FILE
    if not path.is_file():
        raise InputError(path, None, "a trained RELMAS agent directory (agent.json, best.pt)")
    try:
        raw: Mapping[str, Any] = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise InputError(path, None, "well-formed JSON", error.msg) from None
    if raw.get("format") != FORMAT:
        raise InputError(path, "format", f"{FORMAT!r}", raw.get("format"))
    try:
        info = AgentInfo(
            scenario=raw["scenario"],
            observation=ObservationSettings(**raw["observation"]),
            # the service terms are absent from agents trained before them
            reward=RewardSettings(**raw["reward"]),
            instance_types=tuple(raw["instance_types"]),
            accelerator_types=tuple(raw["accelerator_types"]),
            split_variants=tuple(raw["split_variants"]),
            decision_cost=dict(raw["decision_cost"]),
            validation=dict(raw["validation"]),
            teacher=raw["teacher"],
            teacher_bonus=float(raw["teacher_bonus"]),
            teachers_validation=dict(raw["teachers_validation"]),
            teachers_shortfall=dict(raw["teachers_shortfall"]),
            keeper=_keeper(path, raw.get("keeper")),  # absent from agents before keepers
        )
    except (KeyError, TypeError) as error:
        raise InputError(path, str(error), "the keys of an agent.json") from None
    if info.observation.service is None:  # `resolve_service` decides it before training
        raise InputError(path, "observation.service", "true or false", None)
    if info.observation.reference not in catalog.placed():
        expected = f"a rule or target-aware baseline {list(catalog.placed())}"
        raise InputError(path, "observation.reference", expected, info.observation.reference)
    placement = Placement.parse(info.observation.placement, path, "observation.placement")
    placement.allowed(info.accelerator_types, path)
    check_decision_cost(path, info.decision_cost)
    return info


def _keeper(path: Path, raw: Any) -> KeeperWeights | None:
    """agent.json's keeper: null, or weights of the keeper's shapes (an edited one is refused)."""
    if raw is None:
        return None
    try:
        return KeeperWeights.parse(raw)
    except (KeyError, TypeError, ValueError) as error:
        raise InputError(path, "keeper", str(error), "other weights") from None


def check_decision_cost(path: Path, cost: Mapping[str, Any]) -> None:
    """Refuse a decision cost that would price the run's decisions wrongly or not at all: each
    part's costs finite and >= 0, a row's energy > 0 (a network's row costs something)."""
    for part in PAID_PER:
        for key in COSTS:
            value = cost.get(part, {}).get(key) if isinstance(cost.get(part), dict) else None
            positive = part == "per_row" and key == "energy_j"
            valid = isinstance(value, int | float) and 0 <= value < float("inf")
            if not valid or (positive and value == 0):
                expected = "a positive number" if positive else "a number >= 0"
                raise InputError(path, f"decision_cost.{part}.{key}", expected, value)


def load_agent(directory: str | Path) -> tuple[AgentInfo, GreedyPolicy]:
    """The agent's description and its deployable greedy policy (best.pt), after checking that
    the network reads the observation agent.json describes: a network fed another observation
    width would still decide, on features it never saw."""
    info = read_agent_info(directory)
    policy = load_policy(Path(directory) / BEST)
    check_shapes(Path(directory) / AGENT_FILE, info, policy)
    return info, policy


def check_shapes(path: Path, info: AgentInfo, policy: GreedyPolicy) -> None:
    """Refuse an agent.json whose observation (candidates, system, cuts) gives other inputs and
    actions than the network was trained with (its rows of the observation), naming the key."""
    weights = policy.weights
    trained = (weights.obs_dim, weights.n_actions)

    def widths(observation: ObservationSettings) -> tuple[int, int] | None:
        types, instances = len(info.accelerator_types), len(info.instance_types)
        try:
            layout = observation_layout(observation, types, instances, info.split_variants)
        except ValueError:  # a resizing observation without cuts
            return None
        return layout.size, layout.actions

    if widths(info.observation) == trained:
        return
    network = f"best.pt's network was trained with {trained[0]} inputs and {trained[1]} actions"
    observation = info.observation
    candidates = range(1, trained[1])
    fits = [k for k in candidates if widths(replace(observation, candidates=k)) == trained]
    if fits:
        expected = f"{fits[0]} ({network})"
        raise InputError(path, "observation.candidates", expected, observation.candidates)
    keys = "observation, instance_types, accelerator_types, split_variants"
    raise InputError(path, keys, f"the widths {network}", widths(info.observation))


def deployed(
    info: AgentInfo, network: GreedyPolicy, layout: Layout, cut_pieces: tuple[int, ...]
) -> GreedyPolicy:
    """The agent's decisions on `layout`: its network's greedy choice, the action of its teacher
    (its reference baseline, cutting into `cut_pieces` for a resizing agent whose teacher cuts)
    favoured by its bonus."""
    if info.teacher is None or info.teacher_bonus == 0:
        return network
    teacher = named_teacher(info.teacher, info.observation.reference, layout, cut_pieces)
    return GreedyPolicy(network.weights, teacher, info.teacher_bonus)
