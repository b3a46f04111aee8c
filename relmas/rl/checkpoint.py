"""The files of a training directory, all readable with `torch.load(..., weights_only=True)`.

    best.pt                 the policy with the best validation score (what evaluation deploys)
    last.pt                 the full training state at the last checkpoint (to resume from)
    replay-<step>.npz       the replay buffer that belongs to that last.pt, while the training
                            runs: the last.pt of a finished training has none (nothing reads it
                            again, and it is the study's largest file by far)

Both .pt files hold plain dicts of tensors and Python scalars/strings (no pickled classes):
`format`, `network` (the QNetwork spec), `online` (its state dict), `step`. best.pt adds `config`
(the DQNConfig as a dict) and `metrics` (the validation result). last.pt adds `manifest` (the run's
settings: `dqn`, the DQNConfig, and whatever else the run depends on; a last.pt of another
manifest is not resumed), `target`, `optimizer`, the fields of `TrainingState`, `rng` (torch's
generator state; exploration draws depend on the step alone) and `replay_file` (None once the
training has ended: resuming it takes no step, so it needs no buffer). Every write is
atomic, and the replay file is written under a new name before the last.pt that points to it, so
an interruption at any moment leaves a consistent pair. A payload gives the same bytes whatever
the file's name: two runs of one config compare by checksum. A pair that cannot be read back all
the same (a disk error, a file cut short or deleted by hand) is `DamagedState`: not an input to
refuse, since the run that wrote it can make it again by training afresh.
"""

from __future__ import annotations

import io
import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
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

    torch.save writes into memory, then the bytes go to disk: torch's own writer fails on a full
    disk with a RuntimeError that names no file, a plain write with an OSError that names `path`
    (one line from the command line). Saving into a stream rather than to a file name also names
    the records of the zip archive `archive/`, not after the random temporary name, so that the
    same payload gives the same bytes (two runs compare by checksum)."""
    buffer = io.BytesIO()
    torch.save({"format": FORMAT, **payload}, buffer)
    with atomic_path(path, suffix=".pt") as tmp:
        tmp.write_bytes(buffer.getbuffer())


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by this module, weights only (no code runs while loading).

    torch's warnings about a foreign file (a plain pickle of another protocol) are not shown: the
    file is refused, or checked like any other, in one line."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, None, "an existing DQN checkpoint")
    try:
        with warnings.catch_warnings(action="ignore"):
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

    def add_update(self, metrics: Mapping[str, float]) -> None:
        """Add the metrics of one gradient update to the sums since the last report."""
        for key, value in metrics.items():
            self.update_sums[key] = self.update_sums.get(key, 0.0) + value
        self.update_count += 1

    def pop_update_averages(self) -> dict[str, float]:
        """The mean of each update metric since the last report; starts the next period."""
        averages = {k: v / self.update_count for k, v in self.update_sums.items()}
        self.update_sums, self.update_count = {}, 0
        return averages


def save_training_state(
    out_dir: Path,
    manifest: Mapping[str, Any],
    state: TrainingState,
    learner: Learner,
    *,
    finished: bool,
) -> None:
    """Write the replay buffer (not once the training has `finished`), then last.pt pointing to
    it, then drop every other replay file."""
    replay_file = None if finished else f"replay-{state.step:012d}.npz"  # paths.REPLAY_FILE
    if replay_file is not None:
        learner.buffer.save(out_dir / replay_file)
    saved = {f.name: getattr(state, f.name) for f in fields(TrainingState)}
    payload = {
        "manifest": _as_json(manifest),
        "network": learner.online.spec,
        "online": learner.online.state_dict(),
        "target": learner.target.state_dict(),
        "optimizer": learner.optimizer.state_dict(),
        **saved,
        "curve": [list(row) for row in state.curve],
        "rng": {"torch": torch.get_rng_state()},
        "replay_file": replay_file,
    }
    save_checkpoint(out_dir / LAST, payload)
    for stale in out_dir.glob("replay-*.npz"):
        if stale.name != replay_file:
            stale.unlink()


class DamagedState(Exception):
    """A training directory's last.pt or its replay file cannot be read back: its message names
    the file and what failed. The learner it was being restored into is then unusable."""


def load_training_state(
    out_dir: Path, manifest: Mapping[str, Any], learner: Learner
) -> tuple[TrainingState | None, list[str]]:
    """The state in `out_dir`/last.pt, restored into `learner` (networks, optimizer, replay,
    generators), and [] — or (None, the manifest keys that changed) when last.pt belongs to a
    run of other settings (resuming it would mix two experiments), or (None, []) without one.
    A finished training's last.pt restores no replay (its buffer stays empty: no step is left).
    Raises `DamagedState` when last.pt or its replay file cannot be read back, or when an
    unfinished training's last.pt names no replay file."""
    path = out_dir / LAST
    if not path.is_file():
        return None, []
    try:
        payload = load_checkpoint(path)
    except InputError as error:
        raise DamagedState(str(error)) from None
    current = _as_json(manifest)
    changed = changed_keys(payload.get("manifest", {}), current)
    if changed:
        return None, changed
    if payload.get("replay_file") is not None:
        replay = out_dir / str(payload["replay_file"])
        try:
            learner.buffer.load(replay)
        except Exception as error:  # numpy and zipfile raise several types for cut or foreign files
            raise DamagedState(f"{replay}: unreadable replay buffer ({_reason(error)})") from None
    elif payload.get("step", 0) < current["dqn"]["total_steps"]:
        raise DamagedState(f"{path}: an unfinished training without its replay buffer")
    try:
        learner.online.load_state_dict(payload["online"])
        learner.target.load_state_dict(payload["target"])
        learner.optimizer.load_state_dict(payload["optimizer"])
        torch.set_rng_state(payload["rng"]["torch"])
        state = TrainingState(**{f.name: payload[f.name] for f in fields(TrainingState)})
    except (KeyError, TypeError, ValueError, RuntimeError) as error:
        raise DamagedState(f"{path}: unusable training state ({_reason(error)})") from None
    state.curve = [tuple(row) for row in state.curve]
    return state, []


def _reason(error: Exception) -> str:
    """`error` on one short line: its type and the first line of its message."""
    lines = str(error).splitlines()
    return f"{type(error).__name__}: {lines[0][:120]}" if lines else type(error).__name__


def changed_keys(saved: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """The keys of the manifest `current` that differ from `saved`, as `section.key` one level
    into sections that are mappings on both sides."""
    changed = []
    for key in sorted(saved.keys() | current.keys()):
        old, new = saved.get(key), current.get(key)
        if isinstance(old, dict) and isinstance(new, dict):
            inner = sorted(old.keys() | new.keys())
            changed += [f"{key}.{sub}" for sub in inner if old.get(sub) != new.get(sub)]
        elif old != new:
            changed.append(key)
    return changed


def _as_json(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """`manifest` as read back from a file: tuples as lists, keys sorted."""
    return json.loads(json.dumps(manifest, sort_keys=True))
