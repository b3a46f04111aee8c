"""The files of a training directory, all readable with `torch.load(..., weights_only=True)`.

    best.pt                 the policy with the best validation score (what evaluation deploys)
    last.pt                 the full training state at the last checkpoint (to resume from)
    replay-<step>.npz       the replay buffer that belongs to that last.pt

Both .pt files hold plain dicts of tensors and Python scalars/strings (no pickled classes):
`format`, `config` (the DQNConfig as a dict), `network` (the QNetwork spec), `online` (its state
dict), `step`; best.pt adds `metrics` (the validation result); last.pt adds `target`,
`optimizer`, `episode`, `best` (score, step, metrics), `rng` (torch and numpy generator states)
and `replay_file`. Every write is atomic, and the replay file is written under a new name before the
last.pt that points to it, so an interruption at any moment leaves a consistent pair. A payload
gives the same bytes whatever the file's name: two runs of one config compare by checksum.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from relmas.errors import InputError
from relmas.io import atomic_path
from relmas.rl.curve import CurveRows
from relmas.rl.dqn import Learner
from relmas.rl.network import GreedyPolicy, QNetwork, build_network, to_numpy_weights

FORMAT = "relmas-dqn/1"
BEST = "best.pt"
LAST = "last.pt"


def save_checkpoint(path: str | Path, payload: dict[str, Any]) -> None:
    """Atomically write `payload` (plus the format tag) with torch.save.

    torch.save names the records of its zip archive after the file it is given, here a random
    temporary name; writing through an open stream names them `archive/` instead, so that the
    same payload gives the same bytes (two runs compare by checksum)."""
    with atomic_path(path, suffix=".pt") as tmp, open(tmp, "wb") as stream:
        torch.save({"format": FORMAT, **payload}, stream)


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by this module, weights only (no code runs while loading)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, None, "an existing DQN checkpoint")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for corrupt or foreign files
        raise InputError(
            path, None, "a readable weights-only checkpoint", type(exc).__name__
        ) from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        got = payload.get("format") if isinstance(payload, dict) else type(payload).__name__
        raise InputError(path, "format", f"checkpoint format {FORMAT!r}", got)
    return payload


def load_network(path: str | Path) -> QNetwork:
    """The online network stored in a best.pt or last.pt, in eval mode."""
    payload = load_checkpoint(path)
    net = build_network(payload["network"])
    net.load_state_dict(payload["online"])
    return net.eval()


def load_policy(path: str | Path) -> GreedyPolicy:
    """The deployable greedy policy of a checkpoint (a file, or a training directory's best.pt)."""
    path = Path(path)
    return GreedyPolicy(to_numpy_weights(load_network(path / BEST if path.is_dir() else path)))


@dataclass
class TrainingState:
    """The training loop's own state: where it is, the best policy so far, the curve reported so
    far and the update metrics summed since the last report. last.pt holds it with the learner."""

    step: int = 0
    episode: int = 0
    best_score: float | None = None
    best_step: int = 0  # step at which best.pt was taken
    best_metrics: dict[str, float] = field(default_factory=dict)
    best_weights: dict[str, torch.Tensor] | None = None  # best.pt's network
    curve: CurveRows = field(default_factory=list)  # (step, metric, value) as reported
    update_sums: dict[str, float] = field(default_factory=dict)
    update_count: int = 0


def save_training_state(
    out_dir: Path, config: dict[str, Any], state: TrainingState, learner: Learner
) -> None:
    """Write the replay buffer, then last.pt pointing to it, then drop older replay files."""
    replay_file = f"replay-{state.step:012d}.npz"
    learner.buffer.save(out_dir / replay_file)
    best = {"score": state.best_score, "step": state.best_step, "metrics": state.best_metrics}
    payload = {
        "config": config,
        "network": learner.online.spec,
        "online": learner.online.state_dict(),
        "target": learner.target.state_dict(),
        "optimizer": learner.optimizer.state_dict(),
        "step": state.step,
        "episode": state.episode,
        "best": {**best, **({"weights": state.best_weights} if state.best_weights else {})},
        "curve": [list(row) for row in state.curve],
        "updates": {"sums": state.update_sums, "count": state.update_count},
        "rng": {
            "torch": torch.get_rng_state(),
            "explore": json.dumps(learner.explore_rng.bit_generator.state),
        },
        "replay_file": replay_file,
    }
    save_checkpoint(out_dir / LAST, payload)
    for stale in out_dir.glob("replay-*.npz"):
        if stale.name != replay_file:
            stale.unlink()


def load_training_state(
    out_dir: Path, config: dict[str, Any], learner: Learner
) -> TrainingState | None:
    """The state in `out_dir`/last.pt, restored into `learner` (networks, optimizer, replay,
    generators); None if there is no last.pt. Refuses a checkpoint of another config: resuming it
    would mix two experiments."""
    path = out_dir / LAST
    if not path.is_file():
        return None
    changed = changed_config_keys(out_dir, config)
    if changed:
        raise InputError(
            path,
            "config",
            "the same training config as the run being resumed (or a new out dir)",
            f"changed keys {changed}",
        )
    payload = load_checkpoint(path)
    learner.buffer.load(out_dir / payload["replay_file"])
    learner.online.load_state_dict(payload["online"])
    learner.target.load_state_dict(payload["target"])
    learner.optimizer.load_state_dict(payload["optimizer"])
    torch.set_rng_state(payload["rng"]["torch"])
    learner.explore_rng.bit_generator.state = json.loads(payload["rng"]["explore"])
    best = payload["best"]
    return TrainingState(
        step=payload["step"],
        episode=payload["episode"],
        best_score=best["score"],
        best_step=best["step"],
        best_metrics=best["metrics"],
        # checkpoints written before these were recorded resume without them
        best_weights=best.get("weights"),
        curve=[tuple(row) for row in payload.get("curve", [])],
        update_sums=dict(payload.get("updates", {}).get("sums", {})),
        update_count=payload.get("updates", {}).get("count", 0),
    )


def changed_config_keys(out_dir: Path, config: dict[str, Any]) -> list[str]:
    """The learner config keys that differ from those of `out_dir`/last.pt (none without one)."""
    path = out_dir / LAST
    if not path.is_file():
        return []
    saved = load_checkpoint(path)["config"]
    return sorted(k for k in config.keys() | saved.keys() if config.get(k) != saved.get(k))
