"""RELMAS's learner: a masked Double DQN, generic over any Gymnasium environment that follows the
contract below, so it can be unit-tested on toy environments and trained on the simulator alike.

Environment contract (what `relmas.rl.train.train` assumes of `make_env(seed)`):

- gymnasium 1.x API: `reset(seed=...) -> (obs, info)`,
  `step(action) -> (obs, reward, terminated, truncated, info)`; `terminated` ends the episode in a
  true terminal state (no bootstrap), `truncated` cuts it for any other reason (bootstrap kept).
- `observation_space`: a 1-D `gymnasium.spaces.Box` of float32 features (already normalised).
- `action_space`: `gymnasium.spaces.Discrete(M + 1)` starting at 0 — M actions plus "wait" (for
  the scheduler: (candidate slot, accelerator type[, split variant]) pairs; an environment with
  `network_rows` gets a network that scores those rows of its observation, `relmas.rl.network`).
- `info["action_mask"]`: a bool or int8 numpy array of shape (M + 1,), returned by `reset` and by
  every `step`, true for the valid actions. A non-terminal state has at least one valid action.
- Determinism: an episode is a function of the `seed` given to `make_env` and the `seed` given to
  `reset` (and of the actions), which is what makes training reproducible and resumable.

Modules: `network` (Q-network, numpy inference, MACs, layer table), `replay_buffer` (replay buffer
and n-step returns), `dqn` (config, action selection, Double-DQN targets and update),
`checkpoint` (weights-only checkpoint files), `train` (the training loop), `collect` (its inner
steps: one Python call per step, or one jitted call per stretch of steps for `env`).

The scheduler on top of it (docs/relmas.md): `observation` (the observation kernel composing
`features`, the feature table and layout, `candidates`, the candidate slots, `observed`, the
slots', types' and pairs' features, and `mask`, the valid actions), `env` (the Gymnasium
environment and its reward), `teacher` (the reference baseline as teacher), `acting` (what a
jitted loop acts by: network, teacher and bonus), `settings` (the `training:` config section),
`run` (`train_scenario`), `agent` (an agent directory), `policy` (the `relmas` policy),
`overhead` (the cost of a decision).
"""
