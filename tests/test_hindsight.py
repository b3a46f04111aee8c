"""Learning which jobs to give up from the future's labels (relmas.rl.hindsight): the labels are
the clairvoyant planner's, the keeper that keeps every job is its rule, and the fit ranks what it
was shown."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl
import pytest
import torch
from torch import nn

from relmas.policies import make_policy
from relmas.policies.planner import GivingUp, PlannerConfig
from relmas.rl.hindsight import (
    HindsightConfig,
    auc,
    fit,
    keep_all,
    label_runs,
    learn_keeper,
)
from relmas.rl.keeper import FEATURES, KeptRule, KernelKeeper, served_chance
from relmas.sim import Engine
from tests.synthetic import contended_case, memory_bound_case
from tests.test_ceiling_admission import _one_instance
from tests.test_ceiling_exact import _trace
from tests.test_ceiling_targets import _serve
from tests.test_rl_env import hand_keeper


def test_the_label_gives_up_the_job_whose_loss_lets_two_meet():
    # One instance: a long job (1.5 s) alone at 0, due at 2; two short ones (0.5 s) at 0.1, due
    # at 1.2. At 0 the rule sees the long job alone and starts it; the future's label says the
    # clairvoyant gives it up, so that both short ones meet.
    system, tables = _one_instance({"long": 1.5, "short": 0.5})
    jobs = _trace([("long", 0.0, 2.0), ("short", 0.1, 1.2), ("short", 0.1, 1.2)])
    features, labels = label_runs(
        system, tables, [jobs], make_policy("edf_feasible"), keep_all, PlannerConfig(samples=1)
    )
    assert features.shape[1] == len(FEATURES) and np.isfinite(features).all()
    assert labels[0] == np.False_  # the long job, at 0
    # with the label followed, the two short ones are what is left to label, both served
    clairvoyant = GivingUp(make_policy("edf_feasible"), lambda e, p: p != 0, "followed")
    assert Engine(system, tables, jobs).run(clairvoyant).jobs["met"].sum() == 2


def test_a_keeper_that_keeps_every_job_is_its_rule_schedule_for_schedule():
    system, tables, jobs = contended_case(4, 30, {"a": 3, "b": 5}, 8.0, (1.5, 3.0))
    rule = "edf_feasible_patient"
    model = fit(*_separable(4), HindsightConfig(fit_epochs=5))
    keeper = KernelKeeper(model.weights(threshold=0.0).arrays())
    kept = Engine(system, tables, jobs).run(GivingUp(make_policy(rule), keeper, "keeper"))
    alone = Engine(system, tables, jobs).run(make_policy(rule))
    assert kept.jobs.drop("dropped").equals(alone.jobs.drop("dropped"))
    assert not kept.jobs["dropped"].any()


@pytest.mark.parametrize(
    ("rule", "placement"), [("edf_feasible", "all"), ("sjf_feasible_patient_gated", "bandwidth")]
)
def test_a_rule_with_a_keeper_runs_fused_as_it_steps(rule, placement):
    """`KeptRule`'s one jitted loop gives the stepping path's schedule: the same jobs given up,
    the same timeline (training scores its candidate rules by it)."""
    system, tables, jobs = contended_case(5, 40, {"a": 3, "b": 5}, 8.0, (1.2, 2.5))
    weights = replace(hand_keeper(), first_bias=(0.5,))  # gives up about half the jobs
    stepping = GivingUp(
        make_policy(rule, placement=placement), KernelKeeper(weights.arrays()), "kept"
    )
    fused = KeptRule(make_policy(rule, placement=placement), weights.arrays(), "kept")
    stepped = Engine(system, tables, jobs, record=True).run(stepping)
    ran = Engine(system, tables, jobs, record=True).run(fused)
    assert 0 < fused.given_up == stepping.given_up < jobs.height
    assert fused.plans == stepping.plans
    assert ran.jobs.equals(stepped.jobs)
    assert ran.timeline is not None and ran.timeline.equals(stepped.timeline)
    assert ran.metrics["sla_rate"] == stepped.metrics["sla_rate"]


def _separable(seed: int, n: int = 400) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, len(FEATURES))).astype(np.float32)
    return x, x[:, 2] - 0.5 * x[:, 0] < 0.3


def test_the_fit_ranks_held_out_labels_it_can_separate():
    """Scored by the keeper's kernel on the exported weights, as the agent acts."""
    model = fit(*_separable(0), HindsightConfig(fit_epochs=300))
    x, y = _separable(1)
    chance = served_chance(model.weights(threshold=0.5).arrays(), x.astype(np.float64))
    assert auc(chance, y) > 0.97
    assert auc(-chance, y) < 0.03


def test_the_fit_is_the_same_on_any_core_count():
    """Torch sums over one thread per core by default: a keeper fitted where torch may use two
    threads must end with the weights of one fitted on one, and leave the caller's setting."""
    x, y = _separable(3, n=100_000)  # large enough for torch to split its sums over threads
    config = HindsightConfig(fit_epochs=10)
    before = torch.get_num_threads()
    try:
        weights = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            model = fit(x, y, config)
            weights.append(np.concatenate([p.detach().numpy().ravel() for p in model.parameters()]))
            assert torch.get_num_threads() == threads
    finally:
        torch.set_num_threads(before)
    assert np.array_equal(weights[0], weights[1])


def test_the_fit_reads_the_tenant_deficit():
    x, _ = _separable(2)
    x[:, -1] = np.where(np.arange(x.shape[0]) % 2, 0.3, -0.1)  # a tenant's deficit
    y = x[:, -1] < 0.0  # served: the jobs of tenants above their targets
    model = fit(x, y, HindsightConfig(fit_epochs=300))
    chance = served_chance(model.weights(threshold=0.5).arrays(), x.astype(np.float64))
    assert auc(chance, y) > 0.99


def test_without_targets_the_keeper_is_the_one_of_eight_features():
    """Fitted where every job's deficit is 0, the keeper is, weight for weight, the classifier of
    the other eight features alone fitted as before it had a ninth; it reads no deficit."""
    x, y = _separable(3)
    x[:, -1] = 0.0
    config = HindsightConfig(fit_epochs=30)
    weights = fit(x, y, config).weights(threshold=0.5)
    plain = len(FEATURES) - 1
    torch.manual_seed(config.seed)
    mean = torch.as_tensor(x.mean(axis=0)[:plain])
    std = torch.as_tensor(x.std(axis=0)[:plain] + 1e-6)
    before = nn.Sequential(nn.Linear(plain, 32), nn.ReLU(), nn.Linear(32, 1))
    optimiser = torch.optim.Adam(before.parameters(), lr=config.fit_learning_rate)
    inputs, targets = torch.as_tensor(x[:, :plain]), torch.as_tensor(y, dtype=torch.float32)
    for _ in range(config.fit_epochs):
        optimiser.zero_grad()
        nn.BCEWithLogitsLoss()(before((inputs - mean) / std).squeeze(-1), targets).backward()
        optimiser.step()
    first = np.array(weights.first)
    assert np.array_equal(first[:, :plain], before[0].weight.detach().double().numpy())
    assert np.array_equal(weights.second, before[2].weight[0].detach().double().numpy())
    assert not first[:, plain:].any()  # a deficit on a trace with targets moves nothing


def test_the_deficit_feature_is_the_target_less_the_tenants_rate_so_far():
    # One instance. At 0 tenant a's job a0 (1 s, due 1.2) and a1 (1 s, due 0.5: hopeless on
    # arrival, a miss), and tenant b's job without a target: a's rate so far is 0 of 1, so a0's
    # deficit is its target 0.9; b's job reads 0.
    system, tables = _one_instance({"one": 1.0})
    jobs = _serve(
        _trace([("one", 0.0, 1.2), ("one", 0.0, 0.5), ("one", 0.0, 3.0)]),
        ["a", "a", "b"],
        {"a": 0.9},
    )
    features, _ = label_runs(
        system, tables, [jobs], make_policy("edf_feasible"), keep_all, PlannerConfig(samples=1)
    )
    assert features[:2, -1] == pytest.approx([0.9, 0.0])


@pytest.mark.parametrize("short", ["a", "b"])
def test_the_labels_serve_the_job_the_targets_need(short):
    # One instance; at 0 two 1 s jobs due at 1, of tenants a and b (ids 7 and 3: the LP's
    # instance orders them otherwise than the engine), one of which can meet. The `short`
    # tenant's target is 1.0, the other's 0.5: the labels serve the former's job. Told apart by
    # their deficits at 0: 1.0 - 1 = 0 and 0.5 - 1.
    system, tables = _one_instance({"one": 1.0})
    targets = {short: 1.0, ("b" if short == "a" else "a"): 0.5}
    trace = _trace([("one", 0.0, 1.0), ("one", 0.0, 1.0)]).with_columns(
        job_id=pl.Series([7, 3], dtype=pl.Int64)
    )
    jobs = _serve(trace, ["a", "b"], targets)
    features, labels = label_runs(
        system, tables, [jobs], make_policy("edf_feasible"), keep_all, PlannerConfig(samples=1)
    )
    assert sorted(features[:2, -1]) == pytest.approx([-0.5, 0.0])
    assert labels[:2].tolist() == (features[:2, -1] == 0.0).tolist()


def test_auc_is_the_chance_a_served_job_scores_above_one_given_up():
    labels = np.array([True, True, False, False])
    assert auc(np.array([4.0, 3.0, 2.0, 1.0]), labels) == 1.0
    assert auc(np.array([1.0, 2.0, 3.0, 4.0]), labels) == 0.0
    assert auc(np.array([1.0, 3.0, 2.0, 4.0]), labels) == 0.25
    assert auc(np.ones(4), labels) == 0.5
    assert np.isnan(auc(np.ones(2), np.array([True, True])))


def test_dagger_labels_the_states_of_the_keeper_learned_so_far():
    system, tables, jobs = memory_bound_case(2, 12, spread=3.0)
    rule = make_policy("edf_feasible")
    labels_of = PlannerConfig(samples=1, horizon_jobs=10)
    config = HindsightConfig(rounds=2, fit_epochs=50, planner=labels_of)
    keeper, features, labels = learn_keeper(system, tables, [jobs], rule, config)
    first, first_labels = label_runs(system, tables, [jobs], rule, keep_all, config.planner)
    assert features.shape[0] == labels.size > first.shape[0]  # both rounds' states
    assert np.array_equal(features[: first.shape[0]], first)
    assert np.array_equal(labels[: first.shape[0]], first_labels)
    assert 0 < first_labels.mean() < 1  # contended: the future gives some jobs up
    assert keeper is not None and keeper.threshold == config.threshold


def test_bad_shapes_are_refused():
    with pytest.raises(RuntimeError):
        fit(np.zeros((3, len(FEATURES) + 1), np.float32), np.ones(3, bool), HindsightConfig())
