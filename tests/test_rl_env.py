"""The RELMAS environment, policy, training entry point and overhead, on synthetic cost tables."""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import mlflow
import numpy as np
import polars as pl
import pytest
import torch
import yaml
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relmas import catalog, cli
from relmas.ceiling.admission import deadline_rules
from relmas.config import load_config, validate_config
from relmas.errors import InputError
from relmas.evaluate import evaluate_scenario, simulate
from relmas.io import read_parquet, write_parquet
from relmas.policies import make_policy
from relmas.policies.planner import GivingUp
from relmas.rl import keeping
from relmas.rl import train as train_module
from relmas.rl.agent import read_agent_info, write_agent_info
from relmas.rl.checkpoint import (
    load_checkpoint,
    load_network,
    load_policy,
    save_checkpoint,
    save_training_state,
)
from relmas.rl.collect import FusedSteps, episode_steps
from relmas.rl.dqn import Learner
from relmas.rl.env import SchedulingEnv
from relmas.rl.features import GlobalFeature, PairFeature, SlotFeature
from relmas.rl.keeper import FEATURES, KeeperWeights, KernelKeeper
from relmas.rl.keeping import keeper_made_for, kept_candidates, learn_agent_keeper, read_keeper
from relmas.rl.network import (
    GreedyPolicy,
    QNetwork,
    build_network,
    forward_macs,
    policy_layer_table,
    to_numpy_weights,
)
from relmas.rl.overhead import COSTS, overhead_energy_j, overhead_metrics
from relmas.rl.overhead import decision_cost as priced_decision
from relmas.rl.replay_buffer import NStepCollector
from relmas.rl.run import best_scored, train_scenario
from relmas.rl.settings import parse_training
from relmas.rl.setup import rollout, training_setup
from relmas.rl.teacher import BaselineTeacher, named_teacher
from relmas.rl.train import train
from relmas.schemas import SummaryRows
from relmas.sim import access
from relmas.sim.costs import CostTables, load_costs
from relmas.sim.engine import Engine
from relmas.sim.system import load_system
from relmas.study import Study
from relmas.workload import generate_trace, scenario_system
from tests.defaults import (
    decision_cost,
    dqn_config,
    observation_settings,
    reward_settings,
    write_untrained_agent,
)
from tests.synthetic import synthetic_costs, synthetic_pieces
from tests.test_report import validation

SYSTEM = load_system(
    {"instances": [{"name": "x", "count": 2}, {"name": "y", "count": 1}], "dram_gbps": 8.0}
)
SCARCE = load_system({**SYSTEM.to_dict(), "dram_gbps": 2.0})
SCENARIO = {
    "models": {"a": 1, "b": 1, "c": 1},
    "tenants": [
        {"name": "gold", "priority": 9, "slack": 3.0, "share": 0.3},
        {"name": "silver", "priority": 3, "slack": 5.0, "share": 0.3},
        {"name": "bronze", "priority": 1, "slack": 10.0, "share": 0.4},
    ],
    "arrival": {"process": "poisson", "load": 1.2},
    "jobs": 60,
}


@pytest.fixture(scope="module")
def tables() -> CostTables:
    costs = synthetic_costs({"a": 5, "b": 8, "c": 3}, ["x", "y"], seed=3)
    return CostTables.from_frame(costs, SYSTEM.accelerator_types)


# The environment's settings unless a test gives its own: the schema's with the reference slot of
# a rule baseline on the whole system (not `best`, which training resolves), and the discount of
# the pinned rollouts.
TEACHER = "sjf_feasible_patient_gated"
ENV_SETTINGS = {
    "observation": observation_settings(reference=TEACHER),
    "reward": reward_settings(),
    "gamma": 0.99,
}


def make_env(tables, seed=0, system=SYSTEM, firm=False, **settings) -> SchedulingEnv:
    jobs = generate_trace("synthetic", SCENARIO, system, tables, seed)
    jobs = jobs.with_columns(firm=pl.lit(firm))
    return SchedulingEnv(system, tables, jobs, **{**ENV_SETTINGS, **settings})


def instances(state) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per instance, read through the engine's accessors: its running job (-1: idle), its type,
    the time until it is free at current rates, its task's full-speed bandwidth demand."""
    n = access.accelerator_count(state)
    return (
        np.array([access.running_job(state, a) for a in range(n)]),
        np.array([access.accelerator_type(state, a) for a in range(n)]),
        np.array([access.busy_left(state, a) for a in range(n)]),
        np.array([access.task_demand(state, a) for a in range(n)]),
    )


def ready_jobs(state) -> list[int]:
    return [access.ready_job(state, i) for i in range(access.ready_count(state))]


def check_mask(env: SchedulingEnv, mask: np.ndarray) -> None:
    """Every valid (slot, type) action offers a ready job of its slot on a type with an idle
    instance (recomputed from the engine); every such pair of a filled slot is offered whole."""
    layout, state = env.layout, env.engine.state
    jobs, types, _, _ = instances(state)
    idle_types = set(types[jobs < 0].tolist())
    for slot in range(layout.slots):
        job = env.observer.slots[slot]
        for kind in range(layout.types):
            whole = layout.action(slot, kind)
            offered = mask[whole : whole + layout.variants]
            if job < 0 or kind not in idle_types:
                assert not offered.any()
            else:
                assert offered[0] and job in ready_jobs(state)


def random_rollout(env: SchedulingEnv, seed: int):
    """Random valid actions; checks the mask and every assignment against the engine before it is
    made. Returns the rewards, the credits and the observations."""
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    rewards, credits, observations = [], [info["credit"]], [obs]
    done = False
    while not done:
        mask = info["action_mask"]
        assert mask.any() and env.observation_space.contains(obs)
        check_mask(env, mask)
        action = int(rng.choice(np.flatnonzero(mask)))
        for job, acc, _ in env.observer.assignments(action):
            state = env.engine.state
            assert job in ready_jobs(state) and access.is_idle(state, acc)
        obs, reward, done, truncated, info = env.step(action)
        assert not info["invalid_action"] and not truncated
        rewards.append(reward)
        credits.append(info["credit"])
        observations.append(obs)
    return np.array(rewards), np.array(credits), np.array(observations)


def test_check_env_accepts_the_environment(tables):
    check_env(make_env(tables), skip_render_check=True)


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 10_000), candidates=st.integers(1, 4))
def test_masked_random_rollouts_only_make_legal_assignments(tables, seed, candidates):
    env = make_env(
        tables,
        seed % 5,
        observation=observation_settings(
            candidates=candidates, reference="edf_feasible", placement="bandwidth"
        ),
    )
    random_rollout(env, seed)
    assert env.engine.finished and env.met + env.missed == env.jobs.height


def test_wait_is_valid_only_when_safe_and_no_candidate_could_start_on_its_fastest_type_or_fit(
    tables,
):
    """Waiting is allowed when no candidate's fastest idle type is its fastest type, or when every
    candidate would push the running layers' demand (recomputed from the engine) past the
    bandwidth there, or when the teacher waits; each case occurs (the teacher on the type y
    alone waits while an x is idle)."""
    settings = observation_settings(reference="sjf_feasible", placement="y")
    env = make_env(tables, 5, system=SCARCE, observation=settings)
    rng = np.random.default_rng(0)
    layout = env.layout
    width = layout.slot_features
    obs, info = env.reset()
    done, waits, reasons = False, 0, set()
    while not done:
        state = env.engine.state
        can_wait = access.can_wait(state)  # something runs, or a job is still to arrive
        present = np.flatnonzero(obs[SlotFeature.PRESENT : layout.slots * width : width] == 1.0)
        jobs, types, _, demands = instances(state)
        idle = types[jobs < 0]
        # each candidate's fastest idle type (the first idle instance's on ties)
        fastest = []
        for slot in present:
            latency = [obs[layout.pair_feature(slot, t, PairFeature.LATENCY)] for t in idle]
            fastest.append(idle[int(np.argmin(latency))])
        slow = all(
            obs[layout.pair_feature(s, t, PairFeature.SLOWDOWN)] > 0
            for s, t in zip(present, fastest, strict=True)
        )
        demand = demands[jobs >= 0].sum()
        capacity = access.bandwidth_capacity(state)
        running_share = obs[layout.global_feature(GlobalFeature.RUNNING_DEMAND)]
        assert running_share == pytest.approx(demand / capacity, rel=1e-6)
        starting = np.array(
            [
                obs[layout.pair_feature(s, t, PairFeature.DEMAND)] * capacity
                for s, t in zip(present, fastest, strict=True)
            ]
        )
        full = demand > 0 and bool(np.all(demand + starting > capacity * (1 + 1e-6)))
        teacher = obs[layout.global_feature(GlobalFeature.TEACHER_WAITS)] == 1.0
        assert info["action_mask"][-1] == (can_wait and (slow or full or teacher))
        reasons |= {"slow"} if can_wait and slow else set()
        reasons |= {"full"} if can_wait and full and not slow else set()
        reasons |= {"teacher"} if can_wait and teacher and not (slow or full) else set()
        action = int(rng.choice(np.flatnonzero(info["action_mask"])))
        waits += action == layout.actions - 1
        obs, _, done, _, info = env.step(action)
    assert waits > 0 and reasons == {"slow", "full", "teacher"}, reasons
    lone = SchedulingEnv(SYSTEM, tables, env.jobs.head(1), **ENV_SETTINGS)
    _, info = lone.reset()
    assert not info["action_mask"][-1] and info["action_mask"][0]  # nothing runs or will arrive


def test_invalid_actions_are_replaced_and_flagged(tables):
    env = make_env(tables)
    _, info = env.reset()
    invalid = int(np.flatnonzero(~info["action_mask"])[0])
    _, _, _, _, info = env.step(invalid)
    assert info["invalid_action"]
    with pytest.raises(RuntimeError, match="reset"):
        SchedulingEnv(SYSTEM, tables, env.jobs, **ENV_SETTINGS).step(0)


@pytest.mark.parametrize(("exponent", "firm"), [(0.0, False), (1.0, False), (1.0, True)])
def test_credits_add_up_to_weighted_met_minus_missed(tables, exponent, firm):
    """A job dropped past its firm deadline is missed, charged once like a late one."""
    reward = reward_settings(met=1.0, missed=2.0, priority_exponent=exponent, progress=0.5)
    env = make_env(tables, 1, firm=firm, reward=reward)
    _, credits, _ = random_rollout(env, 7)
    result = env.engine.result("relmas")
    assert result.jobs["dropped"].any() == firm
    met = result.jobs["met"].to_numpy()
    weight = result.jobs["priority"].to_numpy().astype(float) ** exponent
    weight /= weight.mean()
    assert 0 < met.sum() < met.size  # both kinds of outcome occur
    assert credits.sum() == pytest.approx(weight[met].sum() - 2.0 * weight[~met].sum())
    assert env.episode_metrics()["episode_credit"] == pytest.approx(credits.sum())
    assert env.penalized.sum() == (~met).sum()  # every miss charged exactly once
    assert env.episode_metrics()["sla_rate"] == pytest.approx(result.metrics["sla_rate"])


def test_progress_shaping_is_potential_based(tables):
    """Undiscounted, the shaping telescopes to zero over an episode: rewards add up to credits;
    without shaping, rewards are the credits step by step."""
    shaped = make_env(tables, 2, reward=reward_settings(progress=1.0), gamma=1.0)
    rewards, credits, _ = random_rollout(shaped, 3)
    assert not np.allclose(rewards, credits[1:])  # the shaping moves reward in time...
    assert rewards.sum() == pytest.approx(credits.sum())  # ...but adds none
    plain = make_env(tables, 2, reward=reward_settings(progress=0.0))
    rewards, credits, _ = random_rollout(plain, 3)
    np.testing.assert_array_equal(rewards, credits[1:])
    assert credits[0] == 0.0  # nothing can be late before the first decision


def test_environment_is_deterministic(tables):
    first = random_rollout(make_env(tables, 2), 11)
    second_env = make_env(tables, 2)
    second = random_rollout(second_env, 11)
    again = random_rollout(second_env, 11)  # reset replays the same trace
    for a, b, c in zip(first, second, again, strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)


TEACHERS = [  # (baseline, placement): the bandwidth-aware one, a subset of types, the system
    ("sjf_feasible_patient_gated", "bandwidth"),
    ("sjf_feasible", "bandwidth"),
    ("edf_feasible_patient", "x"),
    ("sjf_feasible_patient_gated_ordered", "y"),
    ("sjf_feasible", "all"),
]


@pytest.mark.parametrize("system", [SYSTEM, SCARCE], ids=["8GBps", "2GBps"])
def test_always_taking_the_teachers_action_reproduces_its_baseline(tables, system):
    """Slot 0 holds the reference baseline's job and its (slot 0, type) action, or wait, is the
    teacher's: always taking it gives the rule baseline's schedule with its placement (the jobs,
    the instances and the start times: the timelines), on a system of two types and two
    instances of one, for the bandwidth-aware placement, a subset of the types and the whole
    system, decision for decision; the placements give different schedules."""
    schedules = set()
    for name, placement in TEACHERS:
        settings = observation_settings(reference=name, placement=placement)
        env = make_env(tables, 3, system, observation=settings)
        teacher = BaselineTeacher(name, env.layout)
        engine = Engine(system, tables, env.jobs, record=True)
        policy = make_policy(name, placement=placement)
        policy.reset(engine)
        obs, info = env.reset()
        view, done = engine.next_decision(), False
        while not done:  # the baseline decides on an engine in the same state
            action = teacher(obs, info["action_mask"])
            assert info["action_mask"][action]
            expected = policy.decide(view)
            assert [(job, acc) for job, acc, _ in env.observer.assignments(action)] == expected
            obs, _, done, _, info = env.step(action)
            engine.step(expected)
            view = engine.next_decision()
        assert view is None
        baseline = engine.result(name)
        assert env.engine.result(name).jobs.equals(baseline.jobs)
        rollout(env, teacher)  # the fused kernel: the same schedule
        assert env.engine.result(name).jobs.equals(baseline.jobs)
        schedules.add(tuple(baseline.jobs["finish_s"].to_list()))
    assert len(schedules) >= 4


def validation_scores(rates: dict, shortfalls: dict) -> dict[str, dict[str, float]]:
    """Validation scores of the heuristics or slot rules as training ranked them
    (relmas.rl.run.best_scored), in training's order (`rates`, a training result's: agent.json
    sorts its keys): the SLA rate, and the shortfall on traces with targets."""
    return {
        name: {"sla_rate": rate, **({"shortfall": shortfalls[name]} if shortfalls else {})}
        for name, rate in rates.items()
    }


def has_targets(config, scenario: str) -> bool:
    tenants = config["scenarios"][scenario]["tenants"]
    return any("target" in tenant or "targets" in tenant for tenant in tenants)


def holds(state, tables, jobs, targets, patient: bool, gated: bool) -> np.ndarray:
    """Per job of `jobs` bound for instance `targets`, whether a holding rule must skip it,
    recomputed from the engine: (`patient`) its layer would end sooner on a busy instance once
    that one's task ends, or (`gated`) starting it would push the running layers' demand above the
    bandwidth."""
    running, types, busy_left, demands = instances(state)
    rows = np.array([access.job_next_row(state, int(job)) for job in jobs])
    latency = tables.latency_s[rows][:, types]  # [job, instance]
    on_target = latency[np.arange(rows.size), targets]
    sooner = (busy_left + latency).min(axis=1) < on_target * (1 - 1e-5)
    demand = demands[running >= 0].sum()
    target_demand = tables.demand_bps[rows, types[targets]]
    over = (demand > 0) & (demand + target_demand > access.bandwidth_capacity(state) * (1 + 1e-5))
    return (patient & sooner) | (gated & over)


RULE_BASELINES = catalog.of_kind("rule")  # named <ranking>_feasible<form>


@pytest.mark.parametrize(
    "name", [n for n in RULE_BASELINES if "_patient" in n and "_ordered" not in n]
)
def test_holding_baselines_skip_what_they_hold_back_and_wait_only_when_they_hold_all(tables, name):
    """A holding rule baseline starts a job it must hold back (recomputed from the engine) only
    when it holds back every candidate (the feasible jobs and the hopeless one with the least
    remaining work) and may not wait; it waits only when it holds them all. Both happen."""
    patient, gated = True, name.endswith("_gated")
    jobs = make_env(tables, 5).jobs
    engine, policy = Engine(SYSTEM, tables, jobs), make_policy(name)
    policy.reset(engine)
    waits = passed_over = 0
    while (view := engine.next_decision()) is not None:
        ready, remaining = view.ready_jobs, view.remaining_work_s
        feasible = view.now + remaining <= view.deadline_s * (1 + 1e-9)
        order = np.lexsort((ready, remaining))
        hopeless = [i for i in order if not feasible[i]][:1]
        candidates = np.flatnonzero(feasible).tolist() + hopeless
        idle = view.idle_accelerators
        latency = view.next_latency_s[:, view.accelerator_types[idle]]
        targets = idle[np.argmin(latency, axis=1)]  # the fastest idle instance, lowest index
        decision = policy.decide(view)  # refreshes the rates `holds` reads
        held = holds(engine.state, tables, ready, targets, patient, gated)
        if not decision:
            waits += 1
            assert held[candidates].all()
        else:
            ((job, accelerator),) = decision
            i = int(np.flatnonzero(ready == job)[0])
            assert i in candidates and accelerator == targets[i]
            assert not held[i] or held[candidates].all()
            passed_over += held[candidates].any() and not held[i]
        engine.step(decision)
    assert waits > 0 and passed_over > 0


def test_observation_scales_and_slots(tables):
    env = make_env(tables, 4, observation=observation_settings(candidates=3, reference=TEACHER))
    layout = env.layout
    assert layout.slots == 8 and layout.types == 2 and layout.actions == 8 * 2 + 1
    # slots' (their jobs'), types', (slot, type) pairs' and global features
    assert env.observation_space.shape == (8 * 8 + 2 * 5 + 8 * 2 * 10 + 9,)
    _, _, observations = random_rollout(env, 5)
    assert np.isfinite(observations).all()
    assert np.abs(observations).max() <= env.observation_space.high[0]


# ----------------------------------------------------------------------------- training


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The quick config with tiny training settings, on synthetic cost tables of its models."""
    root = tmp_path_factory.mktemp("quick")
    config = load_config("config/quick.yaml")
    layers = {model: 4 + 3 * i for i, model in enumerate(config["models"])}
    costs = synthetic_costs(layers, list(config["accelerators"]), seed=5)
    for (name,), part in costs.group_by("accelerator"):
        write_parquet(part, root / "costs" / f"{name}.parquet")
    # the validation rows of relmas validate: the best rule baseline and its placement
    rates = {"sjf": [0.9], "sjf_feasible": [0.5], TEACHER: [0.7], "edf_feasible": [0.6]}
    rates["edf_feasible_patient"] = [0.55]
    placements = {"sjf_feasible": "all", TEACHER: "bandwidth", "edf_feasible": "simba_chiplet"}
    placements["edf_feasible_patient"] = "all"
    rows = validation(rates).with_columns(
        pl.col("policy").replace_strict(placements, default=None).alias("placement"),
        jobs=pl.lit(30),
        makespan_s=pl.lit(1.0),
    )
    write_parquet(rows, root / "validation.parquet")
    config["training"].update(
        {"jobs": 30, "seeds": [0, 1], "validation_seeds": [100]},
        dqn={
            **config["training"]["dqn"],
            "total_steps": 900,
            "learning_starts": 100,
            "batch_size": 32,
            "train_frequency": 2,
            "target_update_every": 100,
            "validation_every": 300,
            "checkpoint_every": 250,
            "log_every": 100,
            "teacher_steps": 200,
            "margin_weight": 1.0,
        },
    )
    return config, root


@pytest.fixture(scope="module")
def trained(quick):
    config, root = quick
    logs = []
    result = train_scenario(
        config,
        "mixed",
        root / "agent",
        root / "costs",
        logger=lambda m, s: logs.append((m, s)),
        validation=root / "validation.parquet",
    )
    return result, logs


def test_quick_training_gives_an_agent_that_evaluation_runs(quick, trained):
    config, root = quick
    result, logs = trained
    assert result.learner.steps == 900 and result.learner.resumed_from is None
    logged = {key for metrics, _ in logs for key in metrics}
    assert {"loss", "val_sla_rate", f"val_teacher_{TEACHER}_sla_rate"} <= logged
    info = read_agent_info(root / "agent")
    # the best rule baseline of the validation rows, with the placement chosen for it there
    assert (info.observation.reference, info.observation.placement) == (TEACHER, "bandwidth")
    assert result.reference == TEACHER == result.teacher == info.teacher
    service = has_targets(config, "mixed")
    assert info.observation.service == service
    assert set(result.teachers_validation) == {TEACHER}
    assert bool(info.teachers_shortfall) == service
    assert info.decision_cost == result.decision_cost
    validated_at = [step for metrics, step in logs if "val_sla_rate" in metrics]
    assert validated_at == [200, 300, 600, 900]  # after the warm start, every 300, at the end
    jobs = Study(config).trace("mixed", 1000, root / "costs")
    write_parquet(jobs, root / "jobs.parquet")
    evaluated = evaluate_scenario(
        config,
        "mixed",
        "relmas",
        1000,
        root / "jobs.parquet",
        root / "costs",
        policy_options={"agent": str(root / "agent")},
    )
    metrics = evaluated.metrics
    assert metrics["jobs"] == jobs.height and 0.0 <= metrics["sla_rate"] <= 1.0
    cost = result.decision_cost
    fixed = cost["fixed"]["energy_j"] * metrics["decisions"]
    rows = metrics["rows_scored"]
    assert metrics["energy_overhead_j"] == pytest.approx(fixed + rows * cost["per_row"]["energy_j"])
    assert metrics["decisions"] <= rows < cost["rows"] * metrics["decisions"]
    assert cost["energy_j"] == pytest.approx(cost["fixed"]["energy_j"] + rows_cost(cost))
    assert result.metrics()["train_steps"] == 900


def test_policy_acts_exactly_as_in_the_environment(quick, trained):
    config, root = quick
    system = scenario_system(config, "mixed")
    tables = load_costs(root / "costs", system, models=tuple(config["models"]))
    jobs = generate_trace("mixed", config["scenarios"]["mixed"], system, tables, 7)
    info = read_agent_info(root / "agent")
    env = SchedulingEnv(system, tables, jobs, info.observation, info.reward, ENV_SETTINGS["gamma"])
    metrics = rollout(env, load_policy(root / "agent"))
    simulated = simulate(system, jobs, tables, make_policy("relmas", agent=root / "agent"))
    assert simulated.jobs["finish_s"].to_list() == env.engine.result("x").jobs["finish_s"].to_list()
    assert simulated.metrics["sla_rate"] == metrics["sla_rate"]
    assert simulated.metrics["decisions"] == env.engine.decisions


def test_an_agent_with_a_prohibitive_teacher_bonus_schedules_as_its_teacher(
    quick, trained, tmp_path
):
    """The bonus is applied where the agent is deployed as where it is validated: with one no
    Q-value can overcome, both give exactly the teacher rule's schedule, even from a network
    that schedules otherwise (here, untrained)."""
    config, root = quick
    agent = tmp_path / "agent"
    shutil.copytree(root / "agent", agent)
    info = read_agent_info(agent)
    write_agent_info(agent, replace(info, teacher_bonus=1e6))
    payload = load_checkpoint(agent / "best.pt")
    torch.manual_seed(1)
    payload["online"] = build_network(payload["network"]).state_dict()
    save_checkpoint(agent / "best.pt", {k: v for k, v in payload.items() if k != "format"})
    system = scenario_system(config, "mixed")
    tables = load_costs(root / "costs", system, models=tuple(config["models"]))
    jobs = generate_trace("mixed", config["scenarios"]["mixed"], system, tables, 7)
    env = SchedulingEnv(system, tables, jobs, info.observation, info.reward, ENV_SETTINGS["gamma"])
    teacher = named_teacher(info.teacher, info.observation.reference, env.layout, ())
    taught = rollout(env, teacher)
    finish = env.engine.result("x").jobs["finish_s"].to_list()
    favouring = rollout(env, GreedyPolicy(load_policy(agent).weights, teacher, 1e6))
    assert favouring == taught
    assert rollout(env, load_policy(agent)) != taught  # the network alone is not its teacher
    simulated = simulate(system, jobs, tables, make_policy("relmas", agent=agent))
    assert simulated.jobs["finish_s"].to_list() == finish
    write_agent_info(agent, replace(info, teacher="fastest_first", teacher_bonus=1.0))
    with pytest.raises(InputError, match="teacher.*fastest_first"):
        simulate(system, jobs, tables, make_policy("relmas", agent=agent))


def rows_cost(cost: dict) -> float:
    """The energy of scoring every row, by the part per row."""
    return cost["rows"] * cost["per_row"]["energy_j"]


def test_overhead_is_positive_and_consistent(quick, trained):
    config, root = quick
    result, _ = trained
    net = load_network(root / "agent" / "best.pt")
    cost = result.decision_cost
    assert cost["macs"] == forward_macs(net) == policy_layer_table(net)["macs"].sum() > 0
    assert cost["fixed"]["macs"] == forward_macs(net, 0) > 0
    assert cost["per_row"]["macs"] == forward_macs(net, 1) - forward_macs(net, 0) > 0
    assert cost["energy_j"] > 0 and cost["latency_s"] > 0
    assert cost["accelerator"] in config["accelerators"]
    system = scenario_system(config, "mixed")
    tables = load_costs(root / "costs", system, models=tuple(config["models"]))
    jobs = generate_trace("mixed", config["scenarios"]["mixed"], system, tables, 8)
    run = simulate(system, jobs, tables, make_policy("relmas", agent=root / "agent"))
    overhead = overhead_metrics(cost, run)
    assert overhead.pop("overhead_keeper_jobs_per_decision") == 0  # no keeper
    assert all(value > 0 for value in overhead.values())
    assert overhead["overhead_energy_j"] == pytest.approx(run.metrics["energy_overhead_j"])
    assert overhead["overhead_energy_ratio"] > overhead["overhead_energy_share"]


class Interrupted(Exception):
    pass


def test_resume_after_interruption_gives_the_same_agent(quick, trained):
    config, root = quick
    rows = {"validation": root / "validation.parquet"}

    def interrupt(metrics, step):
        if step >= 600:
            raise Interrupted

    with pytest.raises(Interrupted):
        train_scenario(config, "mixed", root / "cut", root / "costs", logger=interrupt, **rows)
    saved = load_checkpoint(root / "cut" / "last.pt")["step"]
    assert 250 <= saved < 600  # the last episode end after a checkpoint period
    resumed = train_scenario(config, "mixed", root / "cut", root / "costs", **rows)
    assert resumed.learner.resumed_from == saved and resumed.learner.steps == 900
    for name in ("best.pt", "last.pt"):
        full = load_checkpoint(root / "agent" / name)["online"]
        cut = load_checkpoint(root / "cut" / name)["online"]
        assert all(torch.equal(full[key], cut[key]) for key in full)
    assert read_agent_info(root / "cut") == read_agent_info(root / "agent")

    changed = copy.deepcopy(config)
    changed["training"]["reward"]["missed"] = 3.0
    changed["training"]["dqn"]["learning_rate"] *= 2
    restarted = train_scenario(changed, "mixed", root / "cut", root / "costs", **rows)
    assert restarted.restarted_because == ["dqn.learning_rate", "reward.missed"]
    assert restarted.learner.resumed_from is None and restarted.learner.steps == 900
    again = train_scenario(changed, "mixed", root / "cut", root / "costs", **rows)
    assert again.restarted_because == [] and again.learner.resumed_from == 900
    changed["scenarios"]["mixed"]["tenants"][0]["slack"] += 1.0
    other_problem = train_scenario(changed, "mixed", root / "cut", root / "costs", **rows)
    assert other_problem.restarted_because == ["scenario.tenants"]


class Killed(BaseException):
    """A training killed where the test says (no handler of the command line catches it)."""


def save_and_die(*args: Any, **kwargs: Any) -> None:
    """The training's first checkpoint, then its death."""
    save_training_state(*args, **kwargs)
    raise Killed


@pytest.mark.parametrize("damaged", ["replay", "last.pt"])
def test_train_over_a_damaged_resume_file_trains_afresh(quick, tmp_path, capsys, damaged):
    """`relmas train` on an agent directory of a training killed after its first checkpoint, whose
    replay-*.npz or last.pt was cut short: one line names the file, the run trains afresh (the
    agent of an uninterrupted run), and the next rerun resumes as usual: nothing to delete by
    hand."""
    config, root = quick
    config = copy.deepcopy(config)
    config["training"]["dqn"].update(total_steps=300, validation_every=150, checkpoint_every=150)
    config["training"]["jobs"] = 3  # episodes shorter than 150 steps: a checkpoint before the end
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))

    def argv_of(agent: Path) -> list[str]:
        argv = ["train", "--config", str(tmp_path / "config.yaml"), "--scenario", "mixed"]
        argv += ["--costs", str(root / "costs"), "--out", str(agent)]
        return argv + ["--validation", str(root / "validation.parquet")]

    assert cli.main(argv_of(tmp_path / "uninterrupted")) == 0
    best = (tmp_path / "uninterrupted" / "best.pt").read_bytes()
    agent = tmp_path / "agent"
    argv = argv_of(agent)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(train_module, "save_training_state", save_and_die)
        with pytest.raises(Killed):
            cli.main(argv)
    assert load_checkpoint(agent / "last.pt")["step"] < 300
    target = next(agent.glob("replay-*.npz")) if damaged == "replay" else agent / "last.pt"
    target.write_bytes(target.read_bytes()[: target.stat().st_size // 2])
    capsys.readouterr()
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    named = [line for line in (out + err).splitlines() if target.name in line]
    assert len(named) == 1 and "training afresh" in named[0] and "Traceback" not in err, out + err
    assert (agent / "best.pt").read_bytes() == best
    assert cli.main(argv) == 0
    assert f"{agent}: resumed from last.pt at step 300" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"seeds": [1000, 1]}, "training.seeds"),
        ({"validation_seeds": [0]}, "training.validation_seeds"),
        (
            {"observation": {"candidates": 2, "reference": "random"}},
            "training.observation.reference",
        ),
        ({"overhead_accelerator": "tpu"}, "training.overhead_accelerator"),
        ({"dqn": {"train_seeds": [3]}}, "training.dqn.train_seeds"),
        ({"dqn": {"gamma": 2.0}}, "training.dqn.gamma"),
        ({"dqn": {"gama": 0.9}}, "training.dqn.gama"),
        ({"dqn": {"batch_size": 32.5}}, "training.dqn.batch_size"),
        ({"dqn": {"dueling": "yes"}}, "training.dqn.dueling"),
        ({"dqn": {"keep_teacher": True, "buffer_size": 10}}, "training.dqn.buffer_size"),
    ],
)
def test_training_settings_errors_name_the_key(quick, change, key):
    config = copy.deepcopy(quick[0])
    config["training"].update(change)
    with pytest.raises(InputError, match=key.replace(".", r"\.")):  # the schema's or ours
        parse_training(validate_config(config, "config.yaml"), "config.yaml")


def test_relmas_policy_needs_an_agent_of_the_same_system(quick, trained, tables):
    config, root = quick
    with pytest.raises(InputError, match="--agent"):
        make_policy("relmas")
    jobs = generate_trace("synthetic", SCENARIO, SYSTEM, tables, 0)
    policy = make_policy("relmas", agent=root / "agent")
    with pytest.raises(InputError, match="instance_types"):
        policy.reset(Engine(SYSTEM, tables, jobs))


def untrained_agent(directory, tables, cost) -> None:
    """An agent directory for SYSTEM whose decisions cost `cost` (agent.json), untrained."""
    settings = observation_settings(candidates=2, reference=TEACHER, service=False)
    env = make_env(tables, observation=settings)
    torch.manual_seed(0)
    rows = env.network_rows
    net = QNetwork(env.layout.size, env.layout.actions, (16, 16), True, *rows)
    write_untrained_agent(
        directory,
        net,
        settings,
        scenario="synthetic",
        instance_types=SYSTEM.instance_types,
        accelerator_types=SYSTEM.accelerator_types,
        cost=cost,
        teacher=TEACHER,
        teacher_bonus=0.1,
    )


def test_the_run_pays_each_decision_by_the_rows_it_scored(tables, tmp_path):
    """The engine's overhead energy is the sum over decisions of the fixed part plus the rows
    of valid actions scored (recomputed from each decision's mask) per row, in the fused loop
    as step by step; the summary's MACs per decision are their mean."""
    cost = decision_cost("x", macs=100, energy_j=1e-9)
    cost["fixed"] = {"macs": 40, "energy_j": 3e-9, "latency_s": 1e-8}
    untrained_agent(tmp_path / "agent", tables, cost)
    jobs = generate_trace("synthetic", SCENARIO, SYSTEM, tables, 3)
    fused = simulate(SYSTEM, jobs, tables, make_policy("relmas", agent=tmp_path / "agent"))
    engine = Engine(SYSTEM, tables, jobs)
    stepping = make_policy("relmas", agent=tmp_path / "agent")
    stepping.reset(engine)
    layout, decisions, rows = stepping.observer.layout, 0, 0
    while (view := engine.next_decision()) is not None:
        mask = stepping.observer.observe(view).mask
        pairs = mask[:-1].reshape(layout.pairs, layout.variants).any(axis=1)
        decisions, rows = decisions + 1, rows + int(pairs.sum() + mask[-1])
        engine.step(stepping.decide(view))
    assert decisions == fused.metrics["decisions"] and rows < decisions * layout.rows.shape[0]
    expected = decisions * 3e-9 + rows * 1e-9
    assert fused.metrics["energy_overhead_j"] == pytest.approx(expected, rel=1e-12)
    assert stepping.overhead_energy_j(decisions) == pytest.approx(expected, rel=1e-12)
    overhead = overhead_metrics(cost, fused)
    assert overhead["overhead_rows_per_decision"] == pytest.approx(rows / decisions)
    assert overhead["overhead_macs_per_decision"] == pytest.approx(40 + 100 * rows / decisions)


def test_greedy_policy_of_a_fresh_network_only_picks_valid_actions(tables):
    env = make_env(tables, 6)
    torch.manual_seed(0)
    policy = GreedyPolicy(
        to_numpy_weights(
            QNetwork(env.layout.size, env.layout.actions, (128, 128), False, *env.network_rows)
        )
    )
    obs, info = env.reset()
    done = False
    while not done:
        action = policy(obs, info["action_mask"])
        assert info["action_mask"][action]
        obs, _, done, _, info = env.step(action)
        assert not info["invalid_action"]
    assert isinstance(env.engine.result("x").jobs, pl.DataFrame)


# ----------------------------------------------------------------------------- relmas_resize

RESIZE = observation_settings(candidates=2, reference="sjf_feasible", resize=True)


@pytest.fixture(scope="module")
def cut_tables(tables) -> CostTables:
    """`tables` with synthetic pieces: variants whole, K2, K4, Y2, Y4."""
    costs = synthetic_costs({"a": 5, "b": 8, "c": 3}, ["x", "y"], seed=3)
    return tables.with_pieces(synthetic_pieces(costs, splits=(2, 4), seed=1))


def test_check_env_accepts_the_resizing_environment(cut_tables, tables):
    env = make_env(cut_tables, observation=RESIZE)
    assert env.layout.variants == 5 and env.layout.actions == 6 * 2 * 5 + 1
    assert env.observation_space.shape == (6 * (8 + 1) + 2 * 5 + 6 * 2 * (10 + 2 * 4) + 9,)
    check_env(env, skip_render_check=True)
    with pytest.raises(ValueError, match="piece tables"):
        make_env(tables, observation=RESIZE)


def expected_potential(env: SchedulingEnv) -> float:
    """Phi recomputed job by job (weights 1): each unpenalized job once, its layer done once all
    its pieces started (a job with pieces still to start is ready)."""
    S, T = env.engine.state, env.engine.tables
    ready = ready_jobs(S)
    running = {int(job) for job in instances(S)[0] if job >= 0} - set(ready)
    potential = 0.0
    for job, done in [(job, 0) for job in ready] + [(job, 1) for job in running]:
        if not env.penalized[job]:
            left = T.remaining_work_s[access.job_next_row(S, job) + done]
            potential += 1.0 - left / env.initial_work[job]
    return potential


@pytest.mark.parametrize("seed", [0, 1])
def test_resizing_rollouts_cut_only_unstarted_layers_and_count_each_job_once(cut_tables, seed):
    env = make_env(cut_tables, seed, observation=RESIZE)
    layout = env.layout
    rng = np.random.default_rng(seed)
    obs, info = env.reset()
    done, cuts = False, 0
    while not done:
        S, mask = env.engine.state, info["action_mask"]
        count = env.engine.kernel_pieces.count
        assert env.potential == pytest.approx(expected_potential(env))
        for action in np.flatnonzero(mask[:-1]):
            job = env.observer.slots[layout.slot_of(action)]
            variant = layout.variant_of(action)
            ongoing = access.job_pieces_left(S, job) > 0
            row = access.job_next_row(S, job)
            assert variant == 0 or (not ongoing and count[row, variant] > 1)
        action = int(rng.choice(np.flatnonzero(mask)))
        cuts += layout.variant_of(action) > 0
        obs, _, done, _, info = env.step(action)
        assert not info["invalid_action"]
    assert cuts > 0 and env.met + env.missed == env.jobs.height


def test_resizing_without_cuts_reproduces_the_whole_layer_schedule(cut_tables):
    env = make_env(cut_tables, 3, observation=RESIZE)
    rollout(env, BaselineTeacher("sjf_feasible", env.layout))
    heuristic = simulate(SYSTEM, env.jobs, cut_tables, "sjf_feasible")
    finish = env.engine.result("relmas_resize").jobs["finish_s"]
    assert finish.to_list() == heuristic.jobs["finish_s"].to_list()


def test_cut_rules_cut_only_onto_spare_instances_by_the_first_finishing_cut(cut_tables):
    env = make_env(cut_tables, 2, observation=RESIZE)
    layout = env.layout
    pieces = cut_tables.pieces.most_pieces
    assert pieces == (1, 2, 4, 2, 4)  # whole, K2, K4, Y2, Y4
    rule = BaselineTeacher("sjf_feasible_cut", layout, pieces)
    obs, info = env.reset()
    done, cuts = False, 0
    while not done:
        action = rule(obs, info["action_mask"])
        variant = layout.variant_of(action)
        if variant:
            cuts += 1
            state = env.engine.state
            spare = access.idle_count(state) - access.ready_count(state)
            assert pieces[variant] <= 1 + spare
            slot, kind = layout.slot_of(action), layout.type_of(action)
            assert slot == 0  # the reference baseline's job, on the type it chose
            allowed = [
                v
                for v in range(1, layout.variants)
                if info["action_mask"][layout.action(slot, kind, v)] and pieces[v] <= 1 + spare
            ]
            finish = [obs[layout.cut_finish_feature(slot, kind, v)] for v in allowed]
            assert variant == allowed[int(np.argmin(finish))] and min(finish) < 0
        obs, _, done, _, info = env.step(action)
    assert cuts > 0


def test_cut_finish_is_a_list_schedule_of_the_pieces_on_the_idle_instances(cut_tables):
    env = make_env(cut_tables, 0, observation=RESIZE)
    obs, info = env.reset()
    S, pieces, layout = env.engine.state, cut_tables.pieces, env.layout
    job = env.observer.slots[0]
    row = access.job_next_row(S, job)
    jobs, types, _, _ = instances(S)
    idle_types = list(types[jobs < 0])
    assert len(idle_types) == 3  # the first job arrives on an idle system
    for variant in range(1, layout.variants):
        busy = [0.0] * len(idle_types)
        for piece in range(pieces.count[row, variant]):
            column = pieces.offset[variant] + piece
            ends = [
                b + pieces.latency_s[row, column, t] for b, t in zip(busy, idle_types, strict=True)
            ]
            busy[int(np.argmin(ends))] = min(ends)
        for kind in range(layout.types):  # against the whole layer on each type
            expected = np.log(max(busy) / cut_tables.latency_s[row, kind])
            finish = obs[layout.cut_finish_feature(0, kind, variant)]
            assert finish == pytest.approx(expected, rel=1e-5)


@pytest.fixture(scope="module")
def resized(quick):
    """A relmas_resize agent trained on the quick config's synthetic costs with K2/Y2 pieces."""
    config, root = quick
    costs = pl.concat(
        [pl.read_parquet(path) for path in sorted((root / "costs").glob("*.parquet"))]
    )
    pieces = synthetic_pieces(costs, splits=(2,), seed=2)
    for (name,), part in costs.group_by("accelerator"):
        write_parquet(part, root / "cut_costs" / f"{name}.parquet")
    for (name,), part in pieces.group_by("accelerator"):
        write_parquet(part, root / "cut_costs" / f"{name}.pieces.parquet")
    result = train_scenario(
        config,
        "mixed",
        root / "resize",
        root / "cut_costs",
        policy="relmas_resize",
        validation=root / "validation.parquet",
    )
    return result, root


def test_resize_training_gives_an_agent_that_acts_as_in_its_environment(quick, resized):
    config, _ = quick
    result, root = resized
    info = read_agent_info(root / "resize")
    assert info.observation.resize and info.split_variants == ("whole", "K2", "Y2")
    # the reference baseline scored whole and cut; the better is the teacher
    assert set(result.teachers_validation) == {TEACHER, TEACHER + "_cut"}
    scores = validation_scores(result.teachers_validation, info.teachers_shortfall)
    assert result.teacher == info.teacher == best_scored(scores)
    system = scenario_system(config, "mixed")
    tables = load_costs(root / "cut_costs", system, models=tuple(config["models"]))
    jobs = generate_trace("mixed", config["scenarios"]["mixed"], system, tables, 7)
    env = SchedulingEnv(system, tables, jobs, info.observation, info.reward, ENV_SETTINGS["gamma"])
    metrics = rollout(env, load_policy(root / "resize"))
    policy = make_policy("relmas_resize", agent=root / "resize")
    simulated = simulate(system, jobs, tables, policy, record=True)
    assert simulated.jobs["finish_s"].to_list() == env.engine.result("x").jobs["finish_s"].to_list()
    # one cutting decision per cut layer (its further pieces are "next piece" decisions)
    cut_layers = simulated.timeline.filter(pl.col("split") > 0).select("job_id", "layer").unique()
    assert metrics["share_split"] == cut_layers.height / simulated.metrics["decisions"]


@pytest.mark.parametrize(
    ("agent", "policy", "bonus"),
    [("agent", "relmas", None), ("agent", "relmas", 0.5), ("resize", "relmas_resize", None)],
)
def test_a_learned_policy_decides_in_one_kernel_as_step_by_step(
    quick, trained, resized, tmp_path, agent, policy, bonus
):
    """`run_agent` (every evaluation's path: `run_to_completion`) against `decide` at each
    decision point from Python: the same job times, timeline and decision count, also with a
    teacher favoured by a bonus and for a resizing agent (whose cuts `apply_action` starts as in
    training's environment)."""
    config, root = quick
    directory = root / agent
    if bonus is not None:
        directory = tmp_path / agent
        shutil.copytree(root / agent, directory)
        info = read_agent_info(directory)
        assert info.teacher is not None
        write_agent_info(directory, replace(info, teacher_bonus=bonus))
    costs = root / ("cut_costs" if policy == "relmas_resize" else "costs")
    system = scenario_system(config, "mixed")
    tables = load_costs(costs, system, models=tuple(config["models"]))
    jobs = generate_trace("mixed", config["scenarios"]["mixed"], system, tables, 7)
    fused = simulate(system, jobs, tables, make_policy(policy, agent=directory), record=True)
    engine = Engine(system, tables, jobs, record=True)
    stepping = make_policy(policy, agent=directory)
    stepping.reset(engine)
    while (view := engine.next_decision()) is not None:
        engine.step(stepping.decide(view))
    stepped = engine.result(policy)
    assert fused.jobs.equals(stepped.jobs) and fused.timeline.equals(stepped.timeline)
    assert fused.metrics["decisions"] == stepped.metrics["decisions"] > 0


def test_learned_policies_refuse_each_others_agents_and_missing_pieces(quick, trained, resized):
    config, root = quick
    with pytest.raises(InputError, match="observation.resize"):
        make_policy("relmas", agent=root / "resize")
    with pytest.raises(InputError, match="relmas train --policy relmas_resize"):
        make_policy("relmas_resize", agent=root / "agent")
    system = scenario_system(config, "mixed")
    tables = load_costs(root / "costs", system, models=tuple(config["models"]))
    jobs = generate_trace("mixed", config["scenarios"]["mixed"], system, tables, 7)
    policy = make_policy("relmas_resize", agent=root / "resize")
    with pytest.raises(InputError, match="split_variants"):
        policy.reset(Engine(system, tables, jobs))  # no piece tables: whole layers only
    with pytest.raises(InputError, match="resizing"):
        train_scenario(
            config,
            "mixed",
            root / "nocut",
            root / "costs",
            policy="relmas_resize",
            validation=root / "validation.parquet",
        )


# ----------------------------------------------------------------------------- golden

# sha256 of the observations, masks and rewards of teacher rollouts, pinned so that a refactoring of
# the features, the mask or the reward keeps them bit-identical (change only with the features).
GOLDEN_ROLLOUTS = {
    "whole": "cfee623725223451ca5f28eae308b8e68560e91259a8073a43e4b2a9555c10b8",
    "resize": "aac74bd9b6a2c48fdbd43b6976f5c146440624c04c3a757de5bfc5c0a13c614b",
}


@pytest.mark.parametrize("case", sorted(GOLDEN_ROLLOUTS))
def test_teacher_rollouts_give_the_pinned_observations_masks_and_rewards(tables, cut_tables, case):
    settings = replace(RESIZE if case == "resize" else ENV_SETTINGS["observation"], candidates=3)
    settings = replace(settings, reference=TEACHER, placement="bandwidth")
    env = make_env(
        cut_tables if case == "resize" else tables,
        2,
        system=SCARCE,
        observation=settings,
        reward=reward_settings(priority_exponent=1.0, progress=0.5),
    )
    pieces = cut_tables.pieces.most_pieces if case == "resize" else ()
    rule = BaselineTeacher(TEACHER, env.layout, pieces)
    digest = hashlib.sha256()
    obs, info = env.reset()
    done = False
    while not done:
        digest.update(obs.tobytes() + info["action_mask"].tobytes())
        obs, reward, done, _, info = env.step(rule(obs, info["action_mask"]))
        digest.update(np.float64(reward).tobytes())
    assert digest.hexdigest() == GOLDEN_ROLLOUTS[case]


# ----------------------------------------------------------------------------- fused training


@pytest.mark.parametrize("case, bonus", [("whole", 0.0), ("whole", 0.3), ("resize", 0.3)])
def test_fused_training_steps_give_the_python_loops_replay_and_weights(
    tables, cut_tables, tmp_path, monkeypatch, case, bonus
):
    """`collect` runs the inner steps in one jitted call; behind a plain Gymnasium wrapper the
    same environment is stepped by the Python loop, one call per step. Teacher steps, explored
    steps, n-step returns across episode ends, cut layers, the teacher's action favoured: the
    same bytes in every file, the replay buffer of every checkpoint included (copied aside as it
    is written: a finished training keeps none)."""
    keep_replays(monkeypatch)
    settings = RESIZE if case == "resize" else ENV_SETTINGS["observation"]
    costs = cut_tables if case == "resize" else tables

    def make(seed: int) -> SchedulingEnv:
        return make_env(costs, seed, observation=settings)

    pieces = cut_tables.pieces.most_pieces if case == "resize" else ()
    rule = BaselineTeacher(settings.reference + ("_cut" if pieces else ""), make(0).layout, pieces)
    config = dqn_config(
        **{"total_steps": 2_500, "teacher_steps": 500, "learning_starts": 200, "batch_size": 32},
        **{"train_frequency": 16, "target_update_every": 100, "log_every": 250, "n_step": 3},
        **{"validation_every": 1_000, "checkpoint_every": 700, "buffer_size": 4_000},
        **{"epsilon_start": 0.5, "epsilon_end": 0.1, "hidden": (16,), "train_seeds": (0, 1)},
        teacher_bonus=bonus,
    )
    env = make(0)
    obs, info = env.reset()
    learner = Learner.create(config, env.layout.size, env.layout.actions, *env.network_rows)
    collector = NStepCollector(config.n_step, config.gamma, env.layout.size, env.layout.actions)
    assert isinstance(episode_steps(env, obs, info, rule, collector, learner, config), FusedSteps)
    fused = train(make, config, tmp_path / "fused", teacher=rule)
    stepped = train(lambda seed: gym.Wrapper(make(seed)), config, tmp_path / "python", teacher=rule)
    assert fused == replace(stepped, best_path=fused.best_path, last_path=fused.last_path)
    assert fused.episodes > 2
    for name in ("best.pt", "last.pt"):
        assert (tmp_path / "fused" / name).read_bytes() == (tmp_path / "python" / name).read_bytes()
    replays = sorted(path.name.removeprefix("fused-") for path in tmp_path.glob("fused-replay-*"))
    assert (
        len(replays) >= 2
        and sorted(path.name.removeprefix("python-") for path in tmp_path.glob("python-replay-*"))
        == replays
    )
    for name in replays:
        fused_replay, stepped_replay = tmp_path / f"fused-{name}", tmp_path / f"python-{name}"
        assert fused_replay.read_bytes() == stepped_replay.read_bytes()


def keep_replays(monkeypatch: pytest.MonkeyPatch) -> None:
    """Copy every replay buffer a training writes to `<dir>-<name>` beside its directory, where
    it stays after the training deleted it."""
    save_training_state = train_module.save_training_state

    def save_and_keep(out_dir: Path, *args: Any, **kwargs: Any) -> None:
        save_training_state(out_dir, *args, **kwargs)
        for replay in out_dir.glob("replay-*.npz"):
            shutil.copy2(replay, out_dir.parent / f"{out_dir.name}-{replay.name}")

    monkeypatch.setattr(train_module, "save_training_state", save_and_keep)


# ----------------------------------------------------------------------------- keeper


def hand_keeper() -> KeeperWeights:
    """A keeper of one hidden unit: it gives a job up when its fluid EDF lateness estimate says
    it ends later than a seventh of its slack before its deadline (P(served) = sigmoid(-10 x
    max(0, log_edf_lateness + 2)) < 0.5): an eager keeper, for a lightly loaded trace."""
    first = tuple(1.0 if name == "log_edf_lateness" else 0.0 for name in FEATURES)
    ones = (1.0,) * len(FEATURES)
    return KeeperWeights((first,), (2.0,), (-10.0,), 0.0, (0.0,) * len(FEATURES), ones, 0.5)


KEEPER_PLAN = {"macs": 0.0, "energy_j": 7e-9, "latency_s": 0.0}
KEEPER_JOB = {"macs": 9.0, "energy_j": 2e-9, "latency_s": 1e-9}


def test_a_keeper_is_priced_per_plan_and_per_job_it_scores(quick, trained):
    """The keeper's MACs per job are its MLP's (features x hidden + hidden), none per plan; its
    weights' fetch makes a plan cost energy of its own; an agent without one pays nothing."""
    config, root = quick
    net = load_network(root / "agent" / "best.pt")
    spec = Study(config).spec("simba_chiplet")
    kept = priced_decision(net, "simba_chiplet", spec, hand_keeper())
    assert kept["keeper_job"]["macs"] == pytest.approx(len(FEATURES) + 1)
    assert kept["keeper_plan"]["macs"] == pytest.approx(0.0, abs=1e-9)
    assert kept["keeper_job"]["energy_j"] > 0 and kept["keeper_plan"]["energy_j"] > 0
    plain = priced_decision(net, "simba_chiplet", spec)
    assert all(plain[part] == dict.fromkeys(COSTS, 0.0) for part in ("keeper_plan", "keeper_job"))
    assert all(plain[part] == kept[part] for part in ("fixed", "per_row"))


def test_an_agent_with_a_keeper_gives_jobs_up_as_its_rule_does_beside_it(quick, trained, tmp_path):
    """Following its teacher, an agent with a keeper is `GivingUp(its rule, the keeper)`
    schedule for schedule — on the stepping path, in the fused kernel and in training's
    environment — and the keeper gives jobs up."""
    config, root = quick
    agent = tmp_path / "agent"
    shutil.copytree(root / "agent", agent)
    info = read_agent_info(agent)
    cost = {**info.decision_cost, "keeper_plan": KEEPER_PLAN, "keeper_job": KEEPER_JOB}
    info = replace(info, keeper=hand_keeper(), teacher_bonus=1e6, decision_cost=cost)
    write_agent_info(agent, info)
    assert read_agent_info(agent).keeper == hand_keeper()
    system = scenario_system(config, "mixed")
    tables = load_costs(root / "costs", system, models=tuple(config["models"]))
    jobs = generate_trace("mixed", config["scenarios"]["mixed"], system, tables, 7)
    rule = make_policy(info.observation.reference, placement=info.observation.placement)
    keeper = KernelKeeper(hand_keeper().arrays())
    given = simulate(system, jobs, tables, GivingUp(rule, keeper, "kept"))
    assert given.jobs["dropped"].sum() > 0
    fused = simulate(system, jobs, tables, make_policy("relmas", agent=agent))
    engine = Engine(system, tables, jobs)
    stepping = make_policy("relmas", agent=agent)
    stepping.reset(engine)
    while (view := engine.next_decision()) is not None:
        engine.step(stepping.decide(view))
    for run in (fused, engine.result("relmas")):
        assert run.jobs["finish_s"].equals(given.jobs["finish_s"])
        assert run.jobs["dropped"].to_list() == given.jobs["dropped"].to_list()
        assert run.metrics["decisions"] == given.metrics["decisions"]
    # the keeper's plans are paid for: per plan, and per present job scored
    counts = stepping.overhead_counts()
    assert all(fused.metrics[key] == value for key, value in counts.items())
    plans, scored = counts["keeper_plans"], counts["keeper_jobs_scored"]
    assert 1 <= plans <= jobs.height and scored >= plans
    network = overhead_energy_j(cost, {**counts, "keeper_plans": 0, "keeper_jobs_scored": 0,
                                       "decisions": fused.metrics["decisions"]})  # fmt: skip
    paid = network + plans * KEEPER_PLAN["energy_j"] + scored * KEEPER_JOB["energy_j"]
    assert fused.metrics["energy_overhead_j"] == pytest.approx(paid, rel=1e-12)
    overhead = overhead_metrics(cost, fused)
    assert overhead["overhead_keeper_jobs_per_decision"] == scored / fused.metrics["decisions"]
    env = SchedulingEnv(
        system, tables, jobs, info.observation, info.reward, 0.95, keeper=hand_keeper()
    )
    teacher = named_teacher(info.teacher, info.observation.reference, env.layout, ())
    assert rollout(env, teacher)["sla_rate"] == given.metrics["sla_rate"]
    assert env.engine.result("x").jobs["finish_s"].equals(given.jobs["finish_s"])


@pytest.mark.parametrize("keeper", [False, True])
def test_a_teacher_is_scored_whole_by_its_rule_as_in_the_environment(quick, keeper):
    """The engine's run of the teacher's rule (with the keeper giving jobs up) scores what its
    episodes in the environment score, to the last bit: the SLA rate and, the quick scenario's
    tenants carrying targets, the shortfall."""
    config, root = quick
    config = copy.deepcopy(config)
    config["training"]["validation_seeds"] = [100, 101]
    config["scenarios"]["mixed"]["arrival"]["load"] = 3.0  # misses, and jobs to give up
    setup = training_setup(config, "mixed", root / "costs", validation=root / "validation.parquet")
    if keeper:
        setup = replace(setup, keeper=hand_keeper())
    layout = setup.env(setup.validation_traces[0]).layout
    validate = setup.validator()
    for name in (TEACHER, "edf_feasible"):
        observation = replace(setup.observation, reference=name)
        scored = replace(setup, observation=observation)
        envs = replace(setup, observation=observation).validator()
        episodes = envs(BaselineTeacher(name, layout))
        assert scored.rule_scores(name) == {k: episodes[k] for k in ("sla_rate", "shortfall")}
    assert 0 < validate(BaselineTeacher(TEACHER, layout))["sla_rate"] < 1


def test_an_edited_keeper_is_refused(quick, trained, tmp_path):
    _, root = quick
    agent = tmp_path / "agent"
    shutil.copytree(root / "agent", agent)
    raw = json.loads((agent / "agent.json").read_text())
    raw["keeper"] = {**asdict(hand_keeper()), "std": [0.0] * len(FEATURES)}
    (agent / "agent.json").write_text(json.dumps(raw))
    with pytest.raises(InputError, match="keeper"):
        read_agent_info(agent)


def with_keeper(config: dict, targets: bool = True) -> dict:
    """`config` with a tiny keeper to learn, at a load and slack where its labels give jobs up
    (at the quick scenario's every label serves: no keeper); without `targets`, its tenants'
    service targets removed."""
    config = copy.deepcopy(config)
    keeper = {"traces": 1, "jobs": 30, "rounds": 1, "horizon_jobs": 10}
    config["training"]["keeper"] = {**config["training"]["keeper"], **keeper}
    scenario = config["scenarios"]["mixed"]
    scenario["arrival"]["load"] = 3.0
    scenario["tenants"] = [
        {k: v for k, v in tenant.items() if targets or k != "target"} | {"slack": 1.5}
        for tenant in scenario["tenants"]
    ]
    return config


@pytest.mark.parametrize("jobs", [5, 500])
def test_a_keeper_labels_traces_no_longer_than_its_scenario_s(quick, monkeypatch, jobs):
    """`training.keeper.jobs` per labelled trace, or the scenario's own number where smaller."""
    config, root = quick
    config = with_keeper(config)
    config["training"]["keeper"]["jobs"] = jobs
    study, settings = Study(config), parse_training(config)
    own = study.scenario("mixed").jobs
    assert 5 < own < 500
    lengths = []

    def recorded(scenario, parsed, *args):
        lengths.append(parsed.jobs)
        raise StopIteration

    monkeypatch.setattr(keeping, "generate_trace", recorded)
    system, tables = study.system("mixed"), study.costs("mixed", root / "costs")
    rule = ("edf_feasible", "all")
    with pytest.raises(StopIteration):
        learn_agent_keeper(study, "mixed", system, tables, settings.seeds, settings.keeper, rule)
    assert lengths == [min(jobs, own)]
    # a replayed trace's scenario may leave its number of jobs to the trace: the keeper's
    config["scenarios"]["mixed"] |= {"arrival": {"process": "trace", "path": "replay.parquet"}}
    del config["scenarios"]["mixed"]["jobs"]
    study = Study(config)
    assert study.scenario("mixed").jobs is None
    with pytest.raises(StopIteration):
        learn_agent_keeper(study, "mixed", system, tables, settings.seeds, settings.keeper, rule)
    assert lengths[1] == jobs


def test_no_keeper_is_learned_where_its_rule_meets_every_deadline(quick, monkeypatch):
    """At a load where edf_feasible meets every deadline of the label traces, giving a job up
    could only lose one: no keeper, and no label's LP solved; under overload, labels."""
    config, root = quick
    config = with_keeper(config)
    labelled = []

    def labels(*args):
        labelled.append(args)
        return hand_keeper(), None, np.array([True, False, True])

    monkeypatch.setattr(keeping, "learn_keeper", labels)
    for load, solved in ((0.05, 0), (10.0, 1)):
        config["scenarios"]["mixed"]["arrival"]["load"] = load
        study, settings = Study(config), parse_training(config)
        system, tables = study.system("mixed"), study.costs("mixed", root / "costs")
        seeds, rule = settings.seeds, ("edf_feasible", "all")
        learned = learn_agent_keeper(study, "mixed", system, tables, seeds, settings.keeper, rule)
        assert len(labelled) == solved
        assert learned.labels == 3 * solved and (learned.weights is None) == (not solved)


def test_no_keeper_is_kept_where_every_label_serves(quick, monkeypatch):
    config, root = quick
    config = with_keeper(config)
    config["scenarios"]["mixed"]["arrival"]["load"] = 10.0
    weights = hand_keeper()
    study, settings = Study(config), parse_training(config)
    system, tables = study.system("mixed"), study.costs("mixed", root / "costs")
    seeds, rule = settings.seeds, ("edf_feasible", "all")
    for served, kept in (([True, True], False), ([True, False], True)):
        labels = np.array(served)
        monkeypatch.setattr(keeping, "learn_keeper", lambda *a, y=labels: (weights, None, y))
        learned = learn_agent_keeper(study, "mixed", system, tables, seeds, settings.keeper, rule)
        assert (learned.weights is weights) == kept and learned.labels == 2


def test_a_keeper_serves_target_aware_deadline_rules_only_where_jobs_carry_targets(quick, tmp_path):
    """Where tenants carry targets a keeper may serve a deadline-ranked rule that puts the
    targets first; elsewhere only the plain deadline forms."""
    config, root = quick
    rows = read_parquet(root / "validation.parquet", SummaryRows)
    deficit = rows.filter(pl.col("policy") == "edf_feasible").with_columns(
        policy=pl.lit("edf_feasible_deficit"), placement=pl.lit("all")
    )
    write_parquet(pl.concat([rows, deficit]), tmp_path / "validation.parquet")
    types = tuple(config["accelerators"])
    plain = [("edf_feasible", "simba_chiplet"), ("edf_feasible_patient", "all")]
    assert kept_candidates(tmp_path / "validation.parquet", "mixed", types) == plain
    targeted = kept_candidates(tmp_path / "validation.parquet", "mixed", types, True)
    assert targeted == [*plain, ("edf_feasible_deficit", "all")]


@pytest.mark.parametrize(
    ("targets", "rule"),
    [(False, ("edf_feasible", "simba_chiplet")), (True, (TEACHER, "bandwidth"))],
)
def test_training_learns_a_keeper_and_keeps_it_only_where_it_wins_validation(
    quick, tmp_path, targets, rule
):
    """With `training.keeper`, a keeper is learned from the future's labels under edf_feasible
    at its validation placement (where jobs carry targets, under the best baseline of
    validation); the agent gives jobs up by it only if a deadline-ranked rule with it beats the
    reference baseline on validation (the best such rule is then its reference and teacher),
    and its environment is then the keeper's."""
    config, root = quick
    config = with_keeper(config, targets)
    logs = []
    result = train_scenario(
        config,
        "mixed",
        tmp_path / "kept",
        root / "costs",
        logger=lambda m, s: logs.append(m),
        validation=root / "validation.parquet",
    )
    assert result.keeper is not None and result.keeper.rule == rule
    assert result.keeper.labels > 0 and result.keeper.weights is not None
    scores = {k: v for m in logs for k, v in m.items() if k.startswith("val_")}

    def ranked(kind: str, rule: str) -> tuple[float, float]:
        """Least shortfall first where jobs carry targets, then the SLA rate."""
        shortfall = scores.get(f"val_{kind}_{rule}_shortfall", 0.0)
        assert (f"val_{kind}_{rule}_shortfall" in scores) == targets
        return -shortfall, scores[f"val_{kind}_{rule}_sla_rate"]

    kept = {
        rule: ranked("kept", rule)
        for rule in deadline_rules(targets)
        if f"val_kept_{rule}_sla_rate" in scores
    }
    assert set(kept) == {"edf_feasible", "edf_feasible_patient"}  # those of the validation rows
    alone = ranked("teacher", TEACHER)
    info = read_agent_info(tmp_path / "kept")
    best = max(kept, key=kept.__getitem__)
    assert result.kept == (kept[best] > alone) == (info.keeper == result.keeper.weights)
    assert info.observation.reference == (best if result.kept else TEACHER)
    assert result.metrics()["keeper_kept"] == float(result.kept)


def test_a_scenario_s_keeper_is_learned_once_into_a_file_and_a_stale_one_is_refused(
    quick, tmp_path
):
    """`relmas keeper` (the DAG's keeper rule) learns the keeper the scenario's agents train
    with: the same as training learns without the file. A file learned for other settings, or
    with edited weights, is refused, by training too, before it trains."""
    config, root = quick
    config = with_keeper(config)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    inputs = ["--costs", str(root / "costs"), "--validation", str(root / "validation.parquet")]
    argv = ["keeper", "--config", str(tmp_path / "c.yaml"), "--scenario", "mixed", *inputs]
    assert cli.main([*argv, "--out", str(tmp_path / "keeper.json")]) == 0
    rule = (TEACHER, "bandwidth")  # the best baseline of validation: the jobs carry targets
    made_for = keeper_made_for(config, "mixed", rule)
    keeper = read_keeper(tmp_path / "keeper.json", made_for)
    study, settings = Study(config), parse_training(config)
    system, tables = study.system("mixed"), study.costs("mixed", root / "costs")
    seeds = settings.seeds
    learned = learn_agent_keeper(study, "mixed", system, tables, seeds, settings.keeper, rule)
    assert keeper.rule == rule and keeper.weights is not None
    assert (keeper.weights, keeper.labels) == (learned.weights, learned.labels)
    (run,) = mlflow.search_runs(
        experiment_names=[config["experiment"]],
        filter_string="tags.stage = 'keeper'",
        output_format="list",
    )
    assert run.data.metrics["keeper_labels"] == keeper.labels
    # learned for another threshold: stale
    other = copy.deepcopy(config)
    other["training"]["keeper"]["threshold"] = 0.3
    with pytest.raises(InputError, match="made_for"):
        train_scenario(
            other, "mixed", tmp_path / "agent", root / "costs",
            validation=root / "validation.parquet", keeper_file=tmp_path / "keeper.json",
        )  # fmt: skip
    assert not (tmp_path / "agent" / "best.pt").exists()
    raw = json.loads((tmp_path / "keeper.json").read_text())
    raw["weights"]["second"] = [1.0, 2.0]  # another number of hidden units
    (tmp_path / "keeper.json").write_text(json.dumps(raw))
    with pytest.raises(InputError, match="weights"):
        read_keeper(tmp_path / "keeper.json", made_for)
    # a keeper of the version before label traces were cut at the scenario's length
    (tmp_path / "keeper.json").write_text(json.dumps(raw | {"format": "relmas-keeper/1"}))
    with pytest.raises(InputError, match="format: expected 'relmas-keeper/3'.*rerun"):
        read_keeper(tmp_path / "keeper.json", made_for)
