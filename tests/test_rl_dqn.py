"""The masked Double-DQN learner on toy environments: selection, replay, targets, learning,
determinism, resumption and the fast inference path."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from relmas.errors import InputError
from relmas.io import check_frame
from relmas.rl.checkpoint import load_checkpoint, load_network, load_policy
from relmas.rl.dqn import (
    DQNConfig,
    dqn_target,
    epsilon_greedy,
    explore_uniform,
    large_margin_loss,
    linear_epsilon,
    margin_weight_at,
    update_target,
)
from relmas.rl.features import TYPE_FEATURES, Layout
from relmas.rl.network import (
    GreedyPolicy,
    QNetwork,
    forward_macs,
    greedy_action,
    greedy_decision,
    network_arrays,
    numpy_q_values,
    policy_layer_table,
    to_numpy_weights,
)
from relmas.rl.replay_buffer import NStepCollector, ReplayBuffer, Step, Transition
from relmas.rl.train import train
from relmas.schemas import LAYER_SCHEMA, LayerTable
from tests.defaults import dqn_config

FORWARD, BACK, BAIT, WAIT = range(4)


class MaskedChainEnv(gym.Env):
    """A chain of `length` cells; reaching the last one pays 1 and ends the episode.

    FORWARD is blocked (masked) at random 30% of the time, BACK is invalid in cell 0, BAIT (valid
    only in cell 0) pays 0.2 at once and ends the episode, WAIT does nothing. Optimal: FORWARD when
    valid, else WAIT — return 1. A random valid policy often takes the bait (mean return ≈ 0.24).
    """

    def __init__(self, length: int = 5, max_steps: int = 20):
        self.length, self.max_steps = length, max_steps
        self.observation_space = gym.spaces.Box(0.0, 1.0, (length + 4,), np.float32)
        self.action_space = gym.spaces.Discrete(4)

    def _mask(self) -> np.ndarray:
        return np.array(
            [self.forward_open, self.position > 0, self.position == 0, True], dtype=np.int8
        )

    def _observe(self) -> tuple[np.ndarray, dict]:
        self.forward_open = bool(self.np_random.random() >= 0.3)
        mask = self._mask()
        obs = np.zeros(self.length + 4, np.float32)
        obs[self.position] = 1.0
        obs[self.length :] = mask
        return obs, {"action_mask": mask}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position, self.steps = 0, 0
        return self._observe()

    def step(self, action):
        assert self._mask()[action], "the agent took an invalid action"
        self.steps += 1
        reward, terminated = 0.0, False
        if action == FORWARD:
            self.position += 1
            reward, terminated = (1.0, True) if self.position == self.length - 1 else (0.0, False)
        elif action == BACK:
            self.position -= 1
        elif action == BAIT:
            reward, terminated = 0.2, True
        obs, info = self._observe()
        return obs, reward, terminated, self.steps >= self.max_steps, info


def make_chain(seed: int) -> MaskedChainEnv:
    return MaskedChainEnv()


def chain_teacher(obs: np.ndarray, mask: np.ndarray) -> int:
    return FORWARD if mask[FORWARD] else WAIT


def mean_return(policy, episodes: int = 40, seed: int = 10_000) -> float:
    env, total = MaskedChainEnv(), 0.0
    for episode in range(episodes):
        obs, info = env.reset(seed=seed + episode)
        done = False
        while not done:
            obs, reward, terminated, truncated, info = env.step(policy(obs, info["action_mask"]))
            total += reward
            done = terminated or truncated
    return total / episodes


def random_policy(seed: int):
    rng = np.random.default_rng(seed)
    return lambda obs, mask: int(rng.choice(np.flatnonzero(mask)))


TOY = dqn_config(
    seed=3,
    train_seeds=(0, 1),
    total_steps=600,
    learning_rate=1e-3,
    gamma=0.9,
    n_step=1,
    buffer_size=5_000,
    batch_size=32,
    learning_starts=100,
    train_frequency=1,
    target_update_every=100,
    epsilon_start=1.0,
    epsilon_end=0.05,
    epsilon_fraction=0.5,
    hidden=(32, 32),
    dueling=False,
    validation_every=200,
    validation_metric="mean_return",
    checkpoint_every=150,
    log_every=100,
    teacher_steps=0,
    margin_weight=0.0,
    keep_teacher=False,
)


def validate_chain(policy: GreedyPolicy) -> dict[str, float]:
    return {"mean_return": mean_return(policy, episodes=10)}


def online_weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, weights_only=True)["online"]


def assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


# --- action selection -----------------------------------------------------------------------


@st.composite
def q_and_mask(draw):
    n = draw(st.integers(1, 12))
    q = draw(hnp.arrays(np.float32, n, elements=st.floats(-1e6, 1e6, width=32)))
    mask = draw(hnp.arrays(np.bool_, n))
    mask[draw(st.integers(0, n - 1))] = True
    return q, mask


@settings(max_examples=200, deadline=None)
@given(q_and_mask(), st.floats(0.0, 1.0), st.integers(0, 2**62))
def test_epsilon_greedy_only_picks_valid_actions(qm, epsilon, seed):
    q, mask = qm
    for step in range(5):
        assert mask[epsilon_greedy(q, mask, epsilon, seed, step, -1, 0.0)]
    greedy = epsilon_greedy(q, mask, 0.0, seed, 0, -1, 0.0)
    assert q[greedy] == q[mask].max()
    assert mask[epsilon_greedy(q, mask, 1.0, seed, 0, -1, 0.0)]


@settings(max_examples=200, deadline=None)
@given(q_and_mask(), st.sampled_from([0.25, 1.0, 3.0]), st.data())
def test_greedy_action_leaves_the_favoured_action_only_for_a_larger_gain(qm, bonus, data):
    q, mask = qm
    valid = np.flatnonzero(mask)
    favoured = data.draw(st.sampled_from(valid.tolist()))
    before = q.copy()
    action = greedy_action(q, mask, favoured, bonus)
    assert np.array_equal(q, before)  # the Q-values are not changed in place
    boosted = np.float32(q[favoured] + np.float32(bonus))  # exact in float32, rounded once
    others = [q[a] for a in valid if a != favoured]
    if action == favoured:
        assert not others or max(others) <= boosted
    else:
        assert q[action] == max(others) >= boosted  # ties: the first valid action
    # no bonus: the plain masked argmax, as epsilon-greedy's greedy branch
    assert greedy_action(q, mask, favoured, 0.0) == epsilon_greedy(q, mask, 0.0, 0, 0, -1, 0.0)
    assert epsilon_greedy(q, mask, 0.0, 0, 0, favoured, bonus) == action


def test_epsilon_greedy_rejects_a_mask_without_valid_action():
    for epsilon in (0.0, 1.0):
        with pytest.raises(ValueError, match="no valid action"):
            epsilon_greedy(np.zeros(3, np.float32), np.zeros(3, bool), epsilon, 0, 0, -1, 0.0)


def test_exploration_draws_are_uniform_and_depend_only_on_seed_step_and_draw():
    draws = np.array([explore_uniform(7, step, 0) for step in range(20_000)])
    assert draws.min() >= 0.0 and draws.max() < 1.0
    counts = np.histogram(draws, bins=10, range=(0.0, 1.0))[0]
    assert counts.min() > 1_800 and counts.max() < 2_200  # 2,000 expected per tenth
    assert explore_uniform(7, 123, 0) == explore_uniform(7, 123, 0)
    others = {explore_uniform(7, 123, 1), explore_uniform(8, 123, 0), explore_uniform(7, 124, 0)}
    assert explore_uniform(7, 123, 0) not in others
    # explored actions spread over every valid one
    mask = np.array([True, False, True, True])
    picks = {
        epsilon_greedy(np.zeros(4, np.float32), mask, 1.0, 7, step, -1, 0.0) for step in range(200)
    }
    assert picks == {0, 2, 3}


def test_epsilon_decays_linearly_then_stays():
    config = dqn_config(total_steps=1000, epsilon_start=1.0, epsilon_end=0.1, epsilon_fraction=0.5)
    assert linear_epsilon(0, config) == 1.0
    assert linear_epsilon(250, config) == pytest.approx(0.55)
    assert linear_epsilon(500, config) == pytest.approx(0.1)
    assert linear_epsilon(900, config) == pytest.approx(0.1)


def test_margin_weight_holds_through_the_teacher_then_decays_to_zero():
    config = dqn_config(teacher_steps=100, margin_weight=2.0, margin_decay_steps=400)
    assert margin_weight_at(0, config) == margin_weight_at(100, config) == 2.0
    assert margin_weight_at(300, config) == pytest.approx(1.0)
    assert margin_weight_at(500, config) == margin_weight_at(10_000, config) == 0.0
    constant = replace(config, margin_decay_steps=0)
    assert margin_weight_at(10_000, constant) == 2.0


# --- replay ---------------------------------------------------------------------------------


def transition(value: float, obs_dim: int = 2, n_actions: int = 3) -> Transition:
    obs = np.full(obs_dim, value, np.float32)
    mask = np.ones(n_actions, bool)
    return Transition(obs, mask, 1, value, obs + 1, mask, False, 0.9, False)


def test_replay_wraps_around_and_overwrites_the_oldest():
    buffer = ReplayBuffer(3, obs_dim=2, n_actions=3, seed=0)
    for value in range(5):
        buffer.add(transition(float(value)))
    assert len(buffer) == 3 and buffer.position == 2
    assert buffer.transitions.reward.tolist() == [3.0, 4.0, 2.0]
    assert buffer.transitions.next_obs[:, 0].tolist() == [4.0, 5.0, 3.0]


def test_replay_keeps_protected_transitions_for_good(tmp_path):
    buffer = ReplayBuffer(4, obs_dim=2, n_actions=3, seed=0)
    for value in (10.0, 11.0):
        buffer.add(transition(value))
    buffer.protect()
    for value in range(5):
        buffer.add(transition(float(value)))
    assert buffer.transitions.reward.tolist() == [10.0, 11.0, 4.0, 3.0]
    buffer.save(tmp_path / "replay.npz")
    restored = ReplayBuffer(4, obs_dim=2, n_actions=3, seed=0)
    restored.load(tmp_path / "replay.npz")
    restored.add(transition(5.0))
    assert restored.transitions.reward.tolist() == [10.0, 11.0, 4.0, 5.0]
    with pytest.raises(ValueError, match="full"):
        restored.protect()
    with pytest.raises(InputError, match="buffer_size"):
        dqn_config(teacher_steps=10, buffer_size=10, keep_teacher=True)


def test_replay_samples_only_filled_slots_reproducibly():
    def filled(seed: int) -> ReplayBuffer:
        buffer = ReplayBuffer(10, obs_dim=2, n_actions=3, seed=seed)
        for value in (1.0, 2.0, 3.0, 4.0):
            buffer.add(transition(value))
        return buffer

    sample = filled(7).sample(500)
    assert set(sample["reward"].tolist()) == {1.0, 2.0, 3.0, 4.0}
    np.testing.assert_array_equal(sample["obs"][:, 0], sample["reward"])
    assert np.array_equal(filled(7).sample(64)["reward"], filled(7).sample(64)["reward"])
    assert not np.array_equal(filled(7).sample(64)["reward"], filled(8).sample(64)["reward"])
    with pytest.raises(ValueError, match="empty"):
        ReplayBuffer(4, 2, 3, seed=0).sample(1)


def test_replay_save_load_round_trip_continues_identically(tmp_path):
    original = ReplayBuffer(4, obs_dim=2, n_actions=3, seed=5)
    for value in range(6):
        original.add(transition(float(value)))
    original.sample(3)
    original.save(tmp_path / "replay.npz")
    restored = ReplayBuffer(4, obs_dim=2, n_actions=3, seed=99)
    restored.load(tmp_path / "replay.npz")
    assert (restored.size, restored.position) == (original.size, original.position)
    expected, got = original.sample(16), restored.sample(16)
    for key, array in expected.items():
        np.testing.assert_array_equal(got[key], array)
    with pytest.raises(ValueError, match="capacity"):
        ReplayBuffer(8, obs_dim=2, n_actions=3, seed=0).load(tmp_path / "replay.npz")


@pytest.mark.parametrize("terminated", [True, False])
def test_n_step_returns_by_hand(terminated):
    """γ = 0.5, n = 3, rewards 1, 2, 3, 4, the episode ends after the 4th step."""
    collector = NStepCollector(n_step=3, gamma=0.5, obs_dim=1, n_actions=2)
    buffer = ReplayBuffer(8, obs_dim=1, n_actions=2, seed=0)
    mask = np.ones(2, bool)
    states = [np.array([float(i)], np.float32) for i in range(5)]
    written = []
    for t, reward in enumerate([1.0, 2.0, 3.0, 4.0]):
        end = t == 3
        step = Step(
            states[t],
            mask,
            t % 2,
            reward,
            states[t + 1],
            mask,
            terminated and end,
            not terminated and end,
            expert=t == 1,
        )
        collector.push(buffer, step)
        written.append(len(buffer))
    assert written == [0, 0, 1, 4]
    R = buffer.transitions
    got = [
        (R.obs[i, 0], R.action[i], R.reward[i], R.next_obs[i, 0], R.done[i], R.discount[i])
        for i in range(4)
    ]
    assert got == [
        (0.0, 0, 1 + 0.5 * 2 + 0.25 * 3, 3.0, False, 0.125),
        (1.0, 1, 2 + 0.5 * 3 + 0.25 * 4, 4.0, terminated, 0.125),
        (2.0, 0, 3 + 0.5 * 4, 4.0, terminated, 0.25),
        (3.0, 1, 4.0, 4.0, terminated, 0.5),
    ]
    assert R.expert[:4].tolist() == [False, True, False, False]
    collector.clear()  # a new episode starts with an empty window
    collector.push(buffer, Step(states[0], mask, 0, 1.0, states[1], mask, True, False))
    assert len(buffer) == 5 and R.reward[4] == 1.0 and R.discount[4] == 0.5


# --- targets and updates --------------------------------------------------------------------


def test_double_dqn_target_by_hand():
    next_q_online = torch.tensor([[1.0, 5.0, 3.0], [2.0, 0.0, 1.0], [0.0, 0.0, 9.0]])
    next_q_target = torch.tensor([[10.0, 20.0, 30.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
    next_mask = torch.tensor([[True, False, True], [True, True, True], [True, True, False]])
    reward = torch.tensor([1.0, 1.0, 1.0])
    discount = torch.tensor([0.5, 0.25, 0.9])
    done = torch.tensor([False, False, True])
    # online argmax among valid actions: 2 (not the masked 1), then 0; terminal row: no bootstrap
    double = dqn_target(reward, discount, done, next_mask, next_q_target, next_q_online)
    assert double.tolist() == [1 + 0.5 * 30, 1 + 0.25 * 4, 1.0]
    vanilla = dqn_target(reward, discount, done, next_mask, next_q_target)
    assert vanilla.tolist() == [1 + 0.5 * 30, 1 + 0.25 * 6, 1.0]


def test_large_margin_loss_by_hand():
    q = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[True, True, False], [True, True, True]])
    action = torch.tensor([0, 2])
    # row 0: max(1, 2 + 0.8) − 1 (action 2 masked); row 1 is no teacher transition
    loss = large_margin_loss(q, mask, action, torch.tensor([True, False]), margin=0.8)
    assert loss.item() == pytest.approx(1.8)
    assert large_margin_loss(q, mask, action, torch.tensor([False, False]), 0.8).item() == 0.0


def test_hard_target_update_copies_and_soft_update_blends():
    torch.manual_seed(0)
    online, target = QNetwork(4, 3, (8,), dueling=False), QNetwork(4, 3, (8,), dueling=False)
    before = [p.detach().clone() for p in target.parameters()]
    update_target(online, target, tau=0.25)
    for old, new, source in zip(before, target.parameters(), online.parameters(), strict=True):
        expected = 0.75 * old.double() + 0.25 * source.detach().double()
        torch.testing.assert_close(new.detach().double(), expected, rtol=0, atol=1e-7)
    update_target(online, target, tau=1.0)
    for new, source in zip(target.parameters(), online.parameters(), strict=True):
        assert torch.equal(new, source)


# --- network and inference ------------------------------------------------------------------


# (slot, type) pairs of 3 slots and 3 types, 2 split variants each: the agent's network
PAIRS = Layout(slots=3, types=3, instances=4, variants=2)


def pair_network(layout: Layout, hidden=(16, 16), dueling=True) -> QNetwork:
    rows, blocks = layout.rows, layout.row_blocks
    return QNetwork(layout.size, layout.actions, hidden, dueling, rows, layout.variants, blocks)


@pytest.mark.parametrize(
    ("hidden", "dueling", "pairs"),
    [((128, 128), False, False), ((64, 32, 16), True, False), ((16, 16), False, True)]
    + [((32, 16), True, True)],
)
def test_numba_inference_matches_torch(hidden, dueling, pairs):
    """The Numba forward pass gives torch's Q-values, for a plain MLP and for the pair network
    (one MLP scoring every (slot, type) pair and wait)."""
    torch.manual_seed(1)
    net = pair_network(PAIRS, hidden, dueling) if pairs else QNetwork(100, 9, hidden, dueling)
    net = net.eval()
    size, actions = net.spec["obs_dim"], net.spec["n_actions"]
    policy = GreedyPolicy(to_numpy_weights(net))
    rng = np.random.default_rng(2)
    obs = rng.standard_normal((300, size)).astype(np.float32)
    masks = rng.random((300, actions)) < 0.5
    masks[:, -1] = True
    with torch.no_grad():
        expected = net(torch.from_numpy(obs)).numpy()
    assert expected.shape == (300, actions)
    for row in range(len(obs)):
        np.testing.assert_allclose(
            numpy_q_values(policy.weights, obs[row]), expected[row], atol=1e-5
        )
        valid_q = np.where(masks[row], expected[row], -np.inf)
        assert policy(obs[row], masks[row]) == int(valid_q.argmax())
        assert policy(obs[row], masks[row].astype(np.int8)) == int(valid_q.argmax())
    with pytest.raises(ValueError, match="no valid action"):
        policy(obs[0], np.zeros(actions, bool))


def permuted_types(obs: np.ndarray, layout: Layout, order: list[int]) -> np.ndarray:
    """`obs` with type k's features (its own and its pairs') those of type `order[k]`, of a
    layout of len(order) types (the slots' and global features unchanged)."""
    fewer = Layout(layout.slots, len(order), layout.instances, layout.variants)
    out = np.zeros(fewer.size, dtype=np.float32)
    out[: layout.slots * layout.slot_features] = obs[: layout.slots * layout.slot_features]
    for k, source in enumerate(order):
        for f in range(TYPE_FEATURES):
            out[fewer.type_feature(k, f)] = obs[layout.type_feature(source, f)]
        for slot in range(layout.slots):
            for f in range(layout.pair_features):
                out[fewer.pair_feature(slot, k, f)] = obs[layout.pair_feature(slot, source, f)]
    for f in range(layout.globals):
        out[fewer.global_feature(f)] = obs[layout.global_feature(f)]
    return out


@pytest.mark.parametrize("dueling", [False, True])
def test_one_pair_network_serves_any_order_and_number_of_types(dueling):
    """Permuting the accelerator types permutes the scores of their pairs (wait unchanged), and
    the same weights score a system of fewer types: one network for any number of types."""
    torch.manual_seed(3)
    net = pair_network(PAIRS, dueling=dueling).eval()
    obs = np.random.default_rng(4).standard_normal(PAIRS.size).astype(np.float32)
    order = [2, 0, 1]
    q = numpy_q_values(to_numpy_weights(net), obs)
    q_permuted = numpy_q_values(to_numpy_weights(net), permuted_types(obs, PAIRS, order))
    for slot in range(PAIRS.slots):
        for k, source in enumerate(order):
            for v in range(PAIRS.variants):
                permuted, original = PAIRS.action(slot, k, v), PAIRS.action(slot, source, v)
                assert q_permuted[permuted] == pytest.approx(q[original], abs=1e-5)
    assert q_permuted[-1] == pytest.approx(q[-1], abs=1e-5)
    fewer = Layout(PAIRS.slots, 2, PAIRS.instances, PAIRS.variants)
    small = pair_network(fewer, dueling=dueling).eval()
    small.load_state_dict(net.state_dict())  # the same weights
    q_fewer = numpy_q_values(to_numpy_weights(small), permuted_types(obs, PAIRS, [0, 1]))
    assert q_fewer.shape == (fewer.actions,)
    if not dueling:  # each pair's score is its own row's alone
        kept = [PAIRS.action(s, k, v) for s in range(3) for k in range(2) for v in range(2)]
        np.testing.assert_allclose(q_fewer[:-1], q[kept], atol=1e-5)
        assert q_fewer[-1] == pytest.approx(q[-1], abs=1e-5)


def test_exported_weights_are_a_snapshot():
    net = QNetwork(3, 2, (4,), dueling=False)
    weights = to_numpy_weights(net)
    before = weights.params.copy()
    with torch.no_grad():
        for p in net.parameters():
            p.add_(1.0)
    np.testing.assert_array_equal(weights.params, before)


def test_a_pair_network_projects_the_shared_blocks_once_and_the_rest_per_row_scored():
    """The slots', types' and globals' projections once per decision, each pair's own features
    and the later layers per row scored; the value head not at all (the choice reads the
    advantages)."""
    net = pair_network(PAIRS, (16, 16), dueling=True)
    rows = PAIRS.rows.shape[0]
    assert rows == PAIRS.slots * PAIRS.types + 1  # and wait
    sf, pf, g = PAIRS.slot_features, PAIRS.pair_features, PAIRS.globals
    fixed = (PAIRS.slots * sf + PAIRS.types * TYPE_FEATURES + g) * 16
    per_row = (pf + 1) * 16 + 16 * 16 + 16 * PAIRS.variants  # the pair's, the wait flag
    for scored in (0, 1, 5, rows):
        assert forward_macs(net, scored) == fixed + scored * per_row
        table = policy_layer_table(net, scored)
        assert table["macs"].sum() == forward_macs(net, scored)
    assert forward_macs(net) == forward_macs(net, rows)
    table = check_frame(policy_layer_table(net), LayerTable, None)
    assert table["name"].to_list() == [
        *["trunk.0.block0", "trunk.0.block1", "trunk.0.block3"],
        *["trunk.0", "trunk.2", "advantage"],
    ]
    assert table["N"].to_list() == [PAIRS.slots, PAIRS.types, 1, rows, rows, rows]
    assert table["C"].to_list() == [sf, TYPE_FEATURES, g, pf + 1, 16, 16]


def test_macs_and_layer_table_of_the_policy_network():
    net = QNetwork(100, 9, (128, 128), dueling=False)
    assert forward_macs(net) == 100 * 128 + 128 * 128 + 128 * 9
    dueling = QNetwork(100, 9, (128, 128), dueling=True)
    assert forward_macs(dueling) == 100 * 128 + 128 * 128 + 128 * 9
    table = check_frame(policy_layer_table(dueling, model="relmas_policy"), LayerTable, None)
    assert table.columns == list(LAYER_SCHEMA)
    assert table["name"].to_list() == ["trunk.0", "trunk.2", "advantage"]
    assert table["K"].to_list() == [128, 128, 9] and table["C"].to_list() == [100, 128, 128]
    assert set(table["op"]) == {"linear"} and table["macs"].sum() == forward_macs(dueling)
    assert table["layer"].to_list() == [0, 1, 2]


@pytest.mark.parametrize("dueling", [False, True])
def test_the_factorised_first_layer_gives_the_row_wise_network(dueling):
    """The Numba pass sums the blocks' projections (a slot's once for all its pairs); torch
    multiplies each gathered row: the same Q-values but for float rounding, and the same as
    the network without blocks (each row whole)."""
    torch.manual_seed(5)
    net = pair_network(PAIRS, (16, 16), dueling).eval()
    whole = QNetwork(PAIRS.size, PAIRS.actions, (16, 16), dueling, PAIRS.rows, PAIRS.variants)
    whole.load_state_dict(net.state_dict())
    blocks = to_numpy_weights(net).factors.blocks
    assert blocks[:, 1].tolist() == list(PAIRS.row_blocks)
    assert blocks[:, 2].tolist() == [1, 1, 0, 1, 0]  # the pair's and the wait flag per row
    obs = np.random.default_rng(6).standard_normal((50, PAIRS.size)).astype(np.float32)
    with torch.no_grad():
        expected = net(torch.from_numpy(obs)).numpy()
        np.testing.assert_array_equal(expected, whole(torch.from_numpy(obs)).numpy())
    for row in range(len(obs)):
        factorised = numpy_q_values(to_numpy_weights(net), obs[row])
        np.testing.assert_allclose(factorised, expected[row], rtol=1e-5, atol=1e-6)
        rowwise = numpy_q_values(to_numpy_weights(whole), obs[row])
        np.testing.assert_allclose(factorised, rowwise, rtol=1e-5, atol=1e-6)


@settings(max_examples=60, deadline=None)
@given(
    dueling=st.booleans(),
    seed=st.integers(0, 2**16),
    valid=st.floats(0.0, 1.0),
    bonus=st.sampled_from([0.0, 0.05, 1.0]),
)
def test_scoring_only_the_valid_rows_chooses_as_the_full_network(dueling, seed, valid, bonus):
    """The greedy decision scores only the rows of valid actions, yet picks the full forward
    pass's masked argmax with the teacher's bonus; its rows scored are those with a valid
    action."""
    torch.manual_seed(seed % 7)
    net = pair_network(PAIRS, (16, 16), dueling).eval()
    rng = np.random.default_rng(seed)
    obs = rng.standard_normal(PAIRS.size).astype(np.float32)
    mask = rng.random(PAIRS.actions) < valid
    mask[rng.integers(PAIRS.actions)] = True
    favoured = int(rng.choice(np.flatnonzero(mask)))
    weights = to_numpy_weights(net)
    q = numpy_q_values(weights, obs)
    action, rows = greedy_decision(network_arrays(weights), obs, mask, favoured, bonus)
    assert action == greedy_action(q, mask, favoured, bonus)
    pairs = mask[:-1].reshape(-1, PAIRS.variants).any(axis=1)
    assert rows == pairs.sum() + mask[-1]


# --- configuration --------------------------------------------------------------------------


def test_config_from_validated_yaml_values_and_the_check_across_values():
    config = dqn_config(hidden=[64, 64], train_seeds=[1, 2], gamma=1, grad_clip=None)
    assert config.hidden == (64, 64) and config.train_seeds == (1, 2)
    assert config.gamma == 1.0 and isinstance(config.gamma, float) and config.grad_clip is None
    values = {**dataclasses.asdict(TOY), "teacher_steps": 10, "buffer_size": 10}
    with pytest.raises(
        InputError, match=r"c\.yaml: training\.dqn\.buffer_size: expected more than teacher_steps"
    ):
        DQNConfig.from_dict({**values, "keep_teacher": True}, "c.yaml")
    assert DQNConfig.from_dict(values, "c.yaml").buffer_size == 10


# --- training -------------------------------------------------------------------------------


def test_learns_the_masked_chain_well_above_random(tmp_path):
    config = replace(
        TOY, total_steps=1500, validation_every=500, checkpoint_every=1000, n_step=3, dueling=True
    )
    result = train(make_chain, config, tmp_path, validate=validate_chain)
    learned = mean_return(load_policy(tmp_path))
    baseline = mean_return(random_policy(0))
    assert baseline < 0.3
    assert learned >= 0.95, (learned, result)
    assert result.best_metrics["mean_return"] == pytest.approx(learned, abs=0.05)


def test_teacher_warm_start_imitates_the_teacher(tmp_path):
    config = replace(TOY, total_steps=400, learning_starts=50, teacher_steps=400, margin_weight=1.0)
    train(make_chain, config, tmp_path, teacher=chain_teacher)
    policy = load_policy(tmp_path / "best.pt")
    env = MaskedChainEnv()
    for seed in range(20):
        obs, info = env.reset(seed=seed)
        assert policy(obs, info["action_mask"]) == chain_teacher(obs, info["action_mask"])
    with pytest.raises(ValueError, match="teacher"):
        train(make_chain, config, tmp_path / "other")


def test_same_seed_same_weights(tmp_path):
    logs: list[tuple[dict, int]] = []
    first = train(
        make_chain,
        TOY,
        tmp_path / "a",
        validate=validate_chain,
        logger=lambda m, s: logs.append((m, s)),
    )
    train(make_chain, TOY, tmp_path / "b", validate=validate_chain)
    for name in ("best.pt", "last.pt"):
        assert_same_weights(
            online_weights(tmp_path / "a" / name), online_weights(tmp_path / "b" / name)
        )
    # byte for byte too, so that checksums (md5sum best.pt) can compare two runs
    files = sorted(path.name for path in (tmp_path / "a").iterdir())
    assert files == sorted(path.name for path in (tmp_path / "b").iterdir())
    assert {"best.pt", "last.pt", "curve.parquet"} <= set(files)
    differing = [
        name
        for name in files
        if (tmp_path / "a" / name).read_bytes() != (tmp_path / "b" / name).read_bytes()
    ]
    assert differing == []
    assert first.steps == TOY.total_steps and first.resumed_from is None
    logged = {key for metrics, _ in logs for key in metrics}
    assert {"loss", "q_mean", "epsilon", "episode_return", "val_mean_return"} <= logged
    other = train(make_chain, replace(TOY, seed=4), tmp_path / "c", validate=validate_chain)
    assert other.steps == TOY.total_steps
    assert not torch.equal(
        online_weights(tmp_path / "a" / "last.pt")["head.weight"],
        online_weights(tmp_path / "c" / "last.pt")["head.weight"],
    )


class Interrupted(Exception):
    pass


def test_resume_after_interruption_gives_identical_weights(tmp_path):
    uninterrupted = train(make_chain, TOY, tmp_path / "full", validate=validate_chain)

    def interrupt_late(metrics: dict, step: int) -> None:
        if step >= 400:
            raise Interrupted

    with pytest.raises(Interrupted):
        train(make_chain, TOY, tmp_path / "cut", validate=validate_chain, logger=interrupt_late)
    checkpoint = load_checkpoint(tmp_path / "cut" / "last.pt")
    assert 300 <= checkpoint["step"] < 400
    assert [p.name for p in (tmp_path / "cut").glob("replay-*.npz")] == [checkpoint["replay_file"]]

    resumed = train(make_chain, TOY, tmp_path / "cut", validate=validate_chain)
    assert resumed.resumed_from == checkpoint["step"] and resumed.steps == TOY.total_steps
    # a finished training keeps no replay buffer: nothing reads it again
    for run in ("full", "cut"):
        assert not list((tmp_path / run).glob("replay-*.npz"))
        assert load_checkpoint(tmp_path / run / "last.pt")["replay_file"] is None
    for name in ("best.pt", "last.pt"):
        assert_same_weights(
            online_weights(tmp_path / "full" / name), online_weights(tmp_path / "cut" / name)
        )
    assert resumed.best_step == uninterrupted.best_step
    assert resumed.best_metrics == uninterrupted.best_metrics

    net = load_network(tmp_path / "cut" / "best.pt")
    policy = GreedyPolicy(to_numpy_weights(net))
    assert mean_return(policy, episodes=5) >= 0.0  # the env asserts every action is valid

    (tmp_path / "cut" / "best.pt").unlink()  # as Snakemake does before rerunning the job
    again = train(make_chain, TOY, tmp_path / "cut", validate=validate_chain)
    assert again.resumed_from == TOY.total_steps and again.steps == TOY.total_steps
    assert_same_weights(
        online_weights(tmp_path / "full" / "best.pt"), online_weights(tmp_path / "cut" / "best.pt")
    )
    changed = train(make_chain, replace(TOY, learning_rate=1e-2), tmp_path / "cut")
    assert changed.restarted_because == ["dqn.learning_rate"] and changed.resumed_from is None
    assert changed.steps == TOY.total_steps  # another experiment: trained afresh, not mixed
    fresh = train(make_chain, replace(TOY, total_steps=200), tmp_path / "cut", resume=False)
    assert fresh.resumed_from is None and load_checkpoint(fresh.last_path)["step"] == 200


def test_checkpoint_errors_name_the_file(tmp_path):
    bogus = tmp_path / "bogus.pt"
    bogus.write_bytes(b"not a checkpoint")
    with pytest.raises(InputError, match=r"bogus\.pt: expected a readable weights-only checkpoint"):
        load_checkpoint(bogus)
    torch.save({"format": "other"}, tmp_path / "foreign.pt")
    with pytest.raises(InputError, match=r"foreign\.pt: format: expected checkpoint format"):
        load_checkpoint(tmp_path / "foreign.pt")
    with pytest.raises(InputError, match="expected an existing DQN checkpoint"):
        load_policy(tmp_path)


def test_validation_must_return_the_configured_metric(tmp_path):
    with pytest.raises(InputError, match=r"training\.dqn\.validation_metric: expected one of"):
        train(make_chain, replace(TOY, total_steps=20), tmp_path, validate=lambda p: {"sla": 1.0})
