"""The training loop, written out in full (CleanRL style): act, store, learn, validate, checkpoint.

Reproducibility: the network is initialised from `torch.manual_seed(config.seed)`, exploration and
replay sampling use their own numpy generators seeded from `config.seed`, episode k runs
`make_env(train_seeds[k % len(train_seeds)])` reset with a seed derived from (config.seed, k), and
torch runs single-threaded with deterministic algorithms during training. Same config → identical
weights on the same machine (CPU kernels may differ across instruction sets).

Resuming: last.pt is written at episode boundaries (the first one after every `checkpoint_every`
steps, and at the end), so it holds no half-finished episode: restarting from it replays exactly the
steps an uninterrupted run would take, and gives identical weights. The replay buffer is saved
beside it while the training runs and deleted once it has ended (the last.pt of a finished training
needs none: a rerun takes no step). A last.pt or replay file that
cannot be read back (cut short, deleted by hand) is named on one line of the log and the run trains
afresh, which gives those weights too. last.pt also holds the learning curve so far, written beside
it as curve.parquet (`relmas.rl.curve`) at every checkpoint and at the end, so the file is a copy
that a resumed run rebuilds.

The run's manifest — the learner config plus whatever else the caller says the run depends on (for
a scenario: observation, reward, the problem; `relmas.rl.run`) — is kept in last.pt: a last.pt of
another manifest is not resumed (that would mix two experiments); the run starts afresh and says
which keys changed (`TrainResult.restarted_because`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from relmas.errors import InputError
from relmas.rl.checkpoint import (
    BEST,
    LAST,
    DamagedState,
    TrainingState,
    load_training_state,
    save_checkpoint,
    save_training_state,
)
from relmas.rl.collect import Teacher, episode_steps
from relmas.rl.curve import CURVE, curve_rows, write_curve
from relmas.rl.determinism import deterministic_torch
from relmas.rl.dqn import (
    CONFIG_SECTION,
    DQNConfig,
    Learner,
    linear_epsilon,
    margin_weight_at,
    td_update,
    update_target,
)
from relmas.rl.network import GreedyPolicy, NumpyWeights, to_numpy_weights
from relmas.rl.replay_buffer import NStepCollector

MakeEnv = Callable[[int], gym.Env]
Logger = Callable[[dict[str, float], int], None]
Validator = Callable[[GreedyPolicy], dict[str, float]]


@dataclass(frozen=True)
class TrainResult:
    best_path: Path
    last_path: Path
    steps: int
    episodes: int
    best_step: int  # step at which best.pt was taken
    best_metrics: dict[str, float]  # validate()'s result for best.pt (empty without validate)
    resumed_from: int | None  # step of the last.pt this run resumed from, if any
    restarted_because: list[str]  # manifest keys changed since last.pt, which was not resumed


def train(
    make_env: MakeEnv,
    config: DQNConfig,
    out_dir: str | Path,
    *,
    manifest: Mapping[str, Any] | None = None,
    logger: Logger | None = None,
    validate: Validator | None = None,
    teacher: Teacher | None = None,
    resume: bool = True,
) -> TrainResult:
    """Train a masked Double DQN on `make_env` episodes; resume from `out_dir`/last.pt if present,
    of the same manifest (`config` plus `manifest`, JSON-able settings the run depends on), and
    `resume`; otherwise it starts afresh and overwrites the checkpoints.

    `validate(policy)` is called every `validation_every` steps, after the teacher's last step
    (so that best.pt is never worse on validation than what imitation reached) and at the end;
    the policy with the highest `validation_key` of `validate(...)` is saved as best.pt (without
    `validate`, best.pt is the final policy). `logger(metrics, step)` receives loss,
    q_mean, epsilon (every `log_every` steps), episode_return / episode_length (every episode)
    and val_<metric>; the same rows go to `out_dir`/curve.parquet at every checkpoint.
    `teacher(obs, mask) -> action` acts for the first `teacher_steps` steps (imitation warm start;
    its transitions feed the large-margin loss when `margin_weight` > 0, for the whole run with
    `keep_teacher`, its weight decaying after the teacher's steps with `margin_decay_steps`);
    after them, every greedy choice of the network (exploring and validated) adds `teacher_bonus`
    to the Q-value of the teacher's action.
    """
    if config.teacher_steps > 0 and teacher is None:
        raise ValueError("config.teacher_steps > 0 needs a teacher(obs, mask) callable")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    run = _Run(config, {"dqn": asdict(config), **(manifest or {})}, out_dir, logger)
    with (
        deterministic_torch(),
        contextlib.closing(_EpisodeEnvs(make_env, config.train_seeds)) as envs,
    ):
        return _train(run, envs, validate, teacher, resume)


def _train(
    run: _Run,
    envs: _EpisodeEnvs,
    validate: Validator | None,
    teacher: Teacher | None,
    resume: bool,
) -> TrainResult:
    """The loop: act (teacher, then epsilon-greedy), store, learn, validate, checkpoint."""
    config = run.config
    obs_dim, n_actions = envs.dims
    learner = Learner.create(config, obs_dim, n_actions, *envs.network_rows)
    try:
        saved, restarted_because = (
            load_training_state(run.out_dir, run.manifest, learner) if resume else (None, [])
        )
    except DamagedState as damage:
        # the run's own file, not an input: training afresh makes what it held again, and the
        # first checkpoint replaces it (and deletes the damaged replay file)
        print(f"{damage}: not resumed, training afresh from step 0", flush=True)
        learner = Learner.create(config, obs_dim, n_actions, *envs.network_rows)
        saved, restarted_because = None, []
    resumed_from = None if saved is None else saved.step
    state = saved or TrainingState()
    if resumed_from is not None:
        print(f"{run.out_dir}: resumed from last.pt at step {resumed_from}", flush=True)
    # A workflow deletes its declared outputs (best.pt, curve.parquet) before rerunning a job:
    # last.pt holds what rewrites them, also when the rerun finds the training complete.
    if state.best_weights is not None and not (run.out_dir / BEST).is_file():
        run.write_best(learner, state)
    collector = NStepCollector(config.n_step, config.gamma, obs_dim, n_actions)
    # Acting uses a snapshot of the online network run by the Numba forward pass (a torch call
    # per step costs more than a simulator step); it is refreshed after every gradient update.
    acting = to_numpy_weights(learner.online)
    checkpoint_step = state.step
    while state.step < config.total_steps:
        env = envs.for_episode(state.episode)
        obs, info = env.reset(seed=_episode_seed(config.seed, state.episode))
        collector.clear()
        steps = episode_steps(env, obs, info, teacher, collector, learner, config)
        episode_return, episode_length, episode_over = 0.0, 0, False
        while not episode_over and state.step < config.total_steps:
            # the steps up to the next one at which something else happens, in one call
            stop = _next_event(state.step, config)
            taken, episode_over, rewards = steps.run(state.step, stop, acting)
            episode_return += rewards
            episode_length += taken
            state.step += taken
            step = state.step
            if config.keep_teacher and step == config.teacher_steps:
                learner.buffer.protect()

            learning = step > config.learning_starts and len(learner.buffer) >= config.batch_size
            if learning and step % config.train_frequency == 0:
                acting = _learn(learner, state, config)
            if step % config.target_update_every == 0:
                update_target(learner.online, learner.target, config.tau)
            if step % config.log_every == 0:
                averages = state.pop_update_averages()
                run.report(state, {**averages, "epsilon": linear_epsilon(step, config)})
            if validate is not None and (
                step % config.validation_every == 0
                or step in (config.teacher_steps, config.total_steps)
            ):
                run.validate(validate, learner, state, teacher)

        state.episode += 1
        if episode_over:
            run.report(state, {"episode_return": episode_return, "episode_length": episode_length})
        period = state.step // config.checkpoint_every
        if period > checkpoint_step // config.checkpoint_every or state.step >= config.total_steps:
            write_curve(run.out_dir / CURVE, state.curve)
            finished = state.step >= config.total_steps
            save_training_state(run.out_dir, run.manifest, state, learner, finished=finished)
            checkpoint_step = state.step

    if validate is None:
        state.best_step, state.best_metrics = state.step, {}
        run.keep_best(learner, state)
    write_curve(run.out_dir / CURVE, state.curve)  # also when resuming a run that was complete
    return TrainResult(
        best_path=run.out_dir / BEST,
        last_path=run.out_dir / LAST,
        steps=state.step,
        episodes=state.episode,
        best_step=state.best_step,
        best_metrics=state.best_metrics,
        resumed_from=resumed_from,
        restarted_because=restarted_because,
    )


def mean_metrics(runs: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Each metric's mean over validation `runs`, of the metrics every run has a value of (a
    trace without service targets has no shortfall): the one score of several traces."""
    keys = [key for key in runs[0] if all(run.get(key) is not None for run in runs)]
    return {key: float(np.mean([run[key] for run in runs])) for key in keys}


def validation_key(metrics: Mapping[str, float], metric: str) -> tuple[float, ...]:
    """What ranks validation results, larger first: on traces whose jobs carry service targets
    (the results have a `shortfall`) the least shortfall, ties by `metric`; elsewhere `metric`.
    The one ranking of best.pt, the reference heuristic and the warm start's teacher."""
    if "shortfall" in metrics:
        return -metrics["shortfall"], metrics[metric]
    return (metrics[metric],)


def _learn(learner: Learner, state: TrainingState, config: DQNConfig) -> NumpyWeights:
    """One gradient step on a replayed batch at `state.step`; the acting snapshot of the updated
    network."""
    batch = learner.buffer.sample(config.batch_size)
    margin_weight = margin_weight_at(state.step, config)
    online, target, optimizer = learner.online, learner.target, learner.optimizer
    state.add_update(td_update(online, target, optimizer, batch, config, margin_weight))
    return to_numpy_weights(learner.online)


def _next_event(step: int, config: DQNConfig) -> int:
    """The first step after `step` at which the loop may learn, update the target, log, validate,
    protect the teacher's transitions or stop: the inner steps run up to it in one call."""
    periods = (
        config.train_frequency,
        config.target_update_every,
        config.log_every,
        config.validation_every,
    )
    ends = [end for end in (config.teacher_steps, config.total_steps) if end > step]
    return min([(step // period + 1) * period for period in periods] + ends)


@dataclass
class _Run:
    """What the steps of a run share besides the learner and the loop's state: its config, its
    manifest (what a last.pt must match to be resumed), its directory, its logger."""

    config: DQNConfig
    manifest: dict[str, Any]
    out_dir: Path
    logger: Logger | None

    def report(self, state: TrainingState, metrics: dict[str, float]) -> None:
        """Log `metrics` at the current step and keep them for the curve."""
        state.curve.extend(curve_rows(metrics, state.step))
        if self.logger is not None:
            self.logger(metrics, state.step)

    def validate(
        self,
        validate: Validator,
        learner: Learner,
        state: TrainingState,
        teacher: Teacher | None,
    ) -> None:
        """Score the online network's greedy policy (favouring the `teacher`'s action by the
        configured bonus); keep it as best.pt if it beats the best so far."""
        weights = to_numpy_weights(learner.online)
        policy = GreedyPolicy(weights, teacher, self.config.teacher_bonus)
        metrics = {k: float(v) for k, v in validate(policy).items()}
        metric = self.config.validation_metric
        if metric not in metrics:
            raise InputError(
                None,
                f"{CONFIG_SECTION}.validation_metric",
                f"one of the metrics returned by validation {sorted(metrics)}",
                metric,
            )
        key = validation_key(metrics, metric)
        if state.best_score is None or key > validation_key(state.best_metrics, metric):
            state.best_score, state.best_step, state.best_metrics = (
                metrics[metric],
                state.step,
                metrics,
            )
            self.keep_best(learner, state)
        self.report(state, {f"val_{k}": v for k, v in metrics.items()})

    def keep_best(self, learner: Learner, state: TrainingState) -> None:
        """The online network becomes the best policy (in the state and in best.pt)."""
        online = learner.online.state_dict()
        state.best_weights = {k: v.detach().clone() for k, v in online.items()}
        self.write_best(learner, state)

    def write_best(self, learner: Learner, state: TrainingState) -> None:
        payload = {
            "network": learner.online.spec,
            "online": state.best_weights,
            "step": state.best_step,
            "config": asdict(self.config),
            "metrics": state.best_metrics,
        }
        save_checkpoint(self.out_dir / BEST, payload)


class _EpisodeEnvs:
    """One environment per training seed, made when first needed; episode k runs that of
    `seeds[k % len(seeds)]`. All must have the spaces of the first."""

    def __init__(self, make_env: MakeEnv, seeds: tuple[int, ...]) -> None:
        self.make_env, self.seeds = make_env, seeds
        self.envs = {seeds[0]: make_env(seeds[0])}
        self.dims = _env_dims(self.envs[seeds[0]])
        # what the network scores: an environment's `network_rows` (rows of the observation,
        # scores per row; the scheduling environment's (slot, type) pairs), else the whole
        # observation
        first = self.envs[seeds[0]].unwrapped
        self.network_rows = getattr(first, "network_rows", (None, None, None))

    def for_episode(self, episode: int) -> gym.Env:
        seed = self.seeds[episode % len(self.seeds)]
        if seed not in self.envs:
            self.envs[seed] = self.make_env(seed)
            if _env_dims(self.envs[seed]) != self.dims:
                raise ValueError(f"make_env({seed}) has other spaces than make_env(first seed)")
        return self.envs[seed]

    def close(self) -> None:
        for env in self.envs.values():
            env.close()


def _env_dims(env: gym.Env) -> tuple[int, int]:
    """(observation length, number of actions), after checking the spaces of the env contract."""
    obs_space, action_space = env.observation_space, env.action_space
    if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1):
        raise TypeError(f"observation_space must be a 1-D Box, got {obs_space}")
    if not (isinstance(action_space, gym.spaces.Discrete) and action_space.start == 0):
        raise TypeError(f"action_space must be Discrete(M + 1) starting at 0, got {action_space}")
    return int(obs_space.shape[0]), int(action_space.n)


def _episode_seed(seed: int, episode: int) -> int:
    return int(np.random.SeedSequence([seed, episode]).generate_state(1)[0])
