"""The training loop, written out in full (CleanRL style): act, store, learn, validate, checkpoint.

Reproducibility: the network is initialised from `torch.manual_seed(config.seed)`, exploration and
replay sampling use their own numpy generators seeded from `config.seed`, episode k runs
`make_env(train_seeds[k % len(train_seeds)])` reset with a seed derived from (config.seed, k), and
torch runs single-threaded with deterministic algorithms during training. Same config → identical
weights on the same machine (CPU kernels may differ across instruction sets).

Resuming: last.pt is written at episode boundaries (the first one after every `checkpoint_every`
steps, and at the end), so it holds no half-finished episode: restarting from it replays exactly the
steps an uninterrupted run would take, and gives identical weights. last.pt also holds the learning
curve so far, written beside it as curve.parquet (`relmas.rl.curve`) at every checkpoint and at the
end, so the file is a copy that a resumed run rebuilds.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from relmas.errors import InputError
from relmas.rl.checkpoint import (
    BEST,
    LAST,
    load_training_state,
    save_checkpoint,
    save_training_state,
)
from relmas.rl.curve import CURVE, CurveRows, curve_rows, write_curve
from relmas.rl.dqn import (
    CONFIG_SECTION,
    DQNConfig,
    linear_epsilon,
    select_action,
    td_update,
    update_target,
)
from relmas.rl.network import GreedyPolicy, QNetwork, to_numpy_weights
from relmas.rl.replay import NStepCollector, ReplayBuffer

MakeEnv = Callable[[int], gym.Env]
Logger = Callable[[dict[str, float], int], None]
Validator = Callable[[GreedyPolicy], dict[str, float]]
Teacher = Callable[[np.ndarray, dict[str, Any]], int]


@dataclass(frozen=True)
class TrainResult:
    best_path: Path
    last_path: Path
    steps: int
    episodes: int
    best_step: int  # step at which best.pt was taken
    best_metrics: dict[str, float]  # validate()'s result for best.pt (empty without validate)
    resumed_from: int | None  # step of the last.pt this run resumed from, if any


@dataclass
class _Progress:
    step: int = 0
    episode: int = 0
    checkpoint_step: int = 0
    best_score: float | None = None
    best_step: int = 0
    best_metrics: dict[str, float] = field(default_factory=dict)
    curve: CurveRows = field(default_factory=list)  # (step, metric, value) as logged
    update_sums: dict[str, float] = field(default_factory=dict)  # since the last loss report
    update_count: int = 0
    best_weights: dict[str, torch.Tensor] | None = None  # best.pt's network


def train(
    make_env: MakeEnv,
    config: DQNConfig,
    out_dir: str | Path,
    *,
    logger: Logger | None = None,
    validate: Validator | None = None,
    teacher: Teacher | None = None,
    resume: bool = True,
) -> TrainResult:
    """Train a masked Double DQN on `make_env` episodes; resume from `out_dir`/last.pt if present
    (and `resume`; with `resume=False` it starts afresh and overwrites the checkpoints).

    `validate(policy)` is called every `validation_every` steps, after the teacher's last step
    (so that best.pt is never worse on validation than what imitation reached) and at the end;
    the policy with the highest `validate(...)[config.validation_metric]` is saved as best.pt
    (without `validate`, best.pt is the final policy). `logger(metrics, step)` receives loss,
    q_mean, epsilon (every `log_every` steps), episode_return / episode_length (every episode)
    and val_<metric>; the same rows go to `out_dir`/curve.parquet at every checkpoint.
    `teacher(obs, info) -> action` acts for the first `teacher_steps` steps (imitation warm start;
    its transitions feed the large-margin loss when `margin_weight` > 0, for the whole run with
    `keep_teacher`).
    """
    if config.teacher_steps > 0 and teacher is None:
        raise ValueError("config.teacher_steps > 0 needs a teacher(obs, info) callable")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    log = logger or (lambda metrics, step: None)
    envs: dict[int, gym.Env] = {}
    with _deterministic_torch():
        try:
            return _train(make_env, envs, config, out_dir, log, validate, teacher, resume)
        finally:
            for env in envs.values():
                env.close()


def _train(
    make_env: MakeEnv,
    envs: dict[int, gym.Env],
    config: DQNConfig,
    out_dir: Path,
    log: Logger,
    validate: Validator | None,
    teacher: Teacher | None,
    resume: bool,
) -> TrainResult:
    def env_for_episode(episode: int) -> gym.Env:
        seed = config.train_seeds[episode % len(config.train_seeds)]
        if seed not in envs:
            envs[seed] = make_env(seed)
            if _env_dims(envs[seed]) != (obs_dim, n_actions):
                raise ValueError(f"make_env({seed}) has other spaces than make_env(first seed)")
        return envs[seed]

    first_env = make_env(config.train_seeds[0])
    envs[config.train_seeds[0]] = first_env
    obs_dim, n_actions = _env_dims(first_env)

    torch.manual_seed(config.seed)
    online = QNetwork(obs_dim, n_actions, config.hidden, config.dueling)
    target = copy.deepcopy(online)
    optimizer = torch.optim.Adam(online.parameters(), lr=config.learning_rate)
    replay_seed, explore_seed = np.random.SeedSequence(config.seed).spawn(2)
    buffer = ReplayBuffer(config.buffer_size, obs_dim, n_actions, seed=replay_seed)
    explore_rng = np.random.default_rng(explore_seed)
    collector = NStepCollector(config.n_step, config.gamma)
    progress = _Progress()

    saved = load_training_state(out_dir, asdict(config), buffer) if resume else None
    if saved is not None:
        online.load_state_dict(saved["online"])
        target.load_state_dict(saved["target"])
        optimizer.load_state_dict(saved["optimizer"])
        torch.set_rng_state(saved["rng"]["torch"])
        explore_rng.bit_generator.state = json.loads(saved["rng"]["explore"])
        progress = _Progress(
            step=saved["step"],
            episode=saved["episode"],
            checkpoint_step=saved["step"],
            best_score=saved["best"]["score"],
            best_step=saved["best"]["step"],
            best_metrics=saved["best"]["metrics"],
            # checkpoints written before these were recorded resume without them
            curve=[tuple(row) for row in saved.get("curve", [])],
            update_sums=dict(saved.get("updates", {}).get("sums", {})),
            update_count=saved.get("updates", {}).get("count", 0),
            best_weights=saved["best"].get("weights"),
        )
    resumed_from = saved["step"] if saved is not None else None
    if resumed_from is not None:
        print(f"{out_dir}: resumed from last.pt at step {resumed_from}", flush=True)
    # Acting uses a snapshot of the online network run by the Numba forward pass (a torch call
    # per step costs more than a simulator step); it is refreshed after every gradient update.
    acting = GreedyPolicy(to_numpy_weights(online))

    def report(metrics: dict[str, float], step: int) -> None:
        progress.curve.extend(curve_rows(metrics, step))
        log(metrics, step)

    def save_best() -> None:
        progress.best_weights = {k: v.detach().clone() for k, v in online.state_dict().items()}
        write_best()

    def write_best() -> None:
        payload = {"network": online.spec, "online": progress.best_weights}
        save_checkpoint(
            out_dir / BEST,
            {
                **payload,
                "step": progress.best_step,
                "config": asdict(config),
                "metrics": progress.best_metrics,
            },
        )

    # A workflow deletes its declared outputs (best.pt, curve.parquet) before rerunning a job:
    # last.pt holds what rewrites them, also when the rerun finds the training complete.
    if progress.best_weights is not None and not (out_dir / BEST).is_file():
        write_best()

    def run_validation(validate: Validator) -> None:
        metrics = {k: float(v) for k, v in validate(GreedyPolicy(to_numpy_weights(online))).items()}
        if config.validation_metric not in metrics:
            raise InputError(
                None,
                f"{CONFIG_SECTION}.validation_metric",
                f"one of the metrics returned by validation {sorted(metrics)}",
                config.validation_metric,
            )
        score = metrics[config.validation_metric]
        if progress.best_score is None or score > progress.best_score:
            progress.best_score, progress.best_step, progress.best_metrics = (
                score,
                progress.step,
                metrics,
            )
            save_best()
        report({f"val_{k}": v for k, v in metrics.items()}, progress.step)

    def save_last() -> None:
        state = {
            "config": asdict(config),
            "network": online.spec,
            "online": online.state_dict(),
            "target": target.state_dict(),
            "optimizer": optimizer.state_dict(),
            "step": progress.step,
            "episode": progress.episode,
            "best": {
                "score": progress.best_score,
                "step": progress.best_step,
                "metrics": progress.best_metrics,
                **({"weights": progress.best_weights} if progress.best_weights else {}),
            },
            "curve": [list(row) for row in progress.curve],
            "updates": {"sums": progress.update_sums, "count": progress.update_count},
            "rng": {
                "torch": torch.get_rng_state(),
                "explore": json.dumps(explore_rng.bit_generator.state),
            },
        }
        write_curve(out_dir / CURVE, progress.curve)
        save_training_state(out_dir, state, buffer)
        progress.checkpoint_step = progress.step

    while progress.step < config.total_steps:
        env = env_for_episode(progress.episode)
        obs, info = env.reset(seed=_episode_seed(config.seed, progress.episode))
        obs, mask = _observation(obs), _action_mask(info, n_actions)
        collector.clear()
        episode_return, episode_length, episode_over = 0.0, 0, False
        while not episode_over and progress.step < config.total_steps:
            expert = progress.step < config.teacher_steps
            if expert:
                action = int(teacher(obs, info))
                if not mask[action]:
                    raise ValueError(f"the teacher chose the invalid action {action}")
            else:
                q_values = acting.q_values(obs)
                epsilon = linear_epsilon(progress.step, config)
                action = select_action(q_values, mask, epsilon, explore_rng)
            next_obs, reward, terminated, truncated, info = env.step(action)
            next_obs, next_mask = _observation(next_obs), _action_mask(info, n_actions)
            for transition in collector.push(
                obs, mask, action, float(reward), next_obs, next_mask, terminated, truncated, expert
            ):
                buffer.add(transition)
            obs, mask = next_obs, next_mask
            episode_return += float(reward)
            episode_length += 1
            episode_over = terminated or truncated
            progress.step += 1
            step = progress.step
            if config.keep_teacher and step == config.teacher_steps:
                buffer.protect()

            learning = step > config.learning_starts and len(buffer) >= config.batch_size
            if learning and step % config.train_frequency == 0:
                batch = buffer.sample(config.batch_size)
                for key, value in td_update(online, target, optimizer, batch, config).items():
                    progress.update_sums[key] = progress.update_sums.get(key, 0.0) + value
                progress.update_count += 1
                acting = GreedyPolicy(to_numpy_weights(online))
            if step % config.target_update_every == 0:
                update_target(online, target, config.tau)
            if step % config.log_every == 0:
                averages = {k: v / progress.update_count for k, v in progress.update_sums.items()}
                report({**averages, "epsilon": linear_epsilon(step, config)}, step)
                progress.update_sums, progress.update_count = {}, 0
            if validate is not None and (
                step % config.validation_every == 0
                or step in (config.teacher_steps, config.total_steps)
            ):
                run_validation(validate)

        progress.episode += 1
        if episode_over:
            report(
                {"episode_return": episode_return, "episode_length": episode_length}, progress.step
            )
        period = progress.step // config.checkpoint_every
        if (
            period > progress.checkpoint_step // config.checkpoint_every
            or progress.step >= config.total_steps
        ):
            save_last()

    if validate is None:
        progress.best_step, progress.best_metrics = progress.step, {}
        save_best()
    write_curve(out_dir / CURVE, progress.curve)  # also when resuming a run that was complete
    return TrainResult(
        best_path=out_dir / BEST,
        last_path=out_dir / LAST,
        steps=progress.step,
        episodes=progress.episode,
        best_step=progress.best_step,
        best_metrics=progress.best_metrics,
        resumed_from=resumed_from,
    )


@contextlib.contextmanager
def _deterministic_torch() -> Iterator[None]:
    """One thread and deterministic kernels while training; the caller's settings are restored."""
    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)


def _env_dims(env: gym.Env) -> tuple[int, int]:
    """(observation length, number of actions), after checking the spaces of the env contract."""
    obs_space, action_space = env.observation_space, env.action_space
    if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1):
        raise TypeError(f"observation_space must be a 1-D Box, got {obs_space}")
    if not (isinstance(action_space, gym.spaces.Discrete) and action_space.start == 0):
        raise TypeError(f"action_space must be Discrete(M + 1) starting at 0, got {action_space}")
    return int(obs_space.shape[0]), int(action_space.n)


def _observation(obs: Any) -> np.ndarray:
    return np.array(obs, dtype=np.float32)


def _action_mask(info: dict[str, Any], n_actions: int) -> np.ndarray:
    mask = np.asarray(info.get("action_mask"), dtype=bool)
    if mask.shape != (n_actions,):
        raise ValueError(f'info["action_mask"] must have shape ({n_actions},), got {mask.shape}')
    return mask


def _episode_seed(seed: int, episode: int) -> int:
    return int(np.random.SeedSequence([seed, episode]).generate_state(1)[0])
