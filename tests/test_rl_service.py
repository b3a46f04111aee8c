"""The learner's service levels (docs/relmas.md, "Service levels"): the service-level slots and
features on a hand state, the target-aware baselines as the agent's reference slot and teacher,
the reward's deficit weighting and end-of-episode shortfall on a two-job case, and validation
ranked by shortfall."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl
import pytest

from relmas import catalog
from relmas.errors import InputError
from relmas.evaluate import simulate
from relmas.policies.triage import feasible
from relmas.rl.agent import AgentInfo, read_agent_info, write_agent_info
from relmas.rl.env import SchedulingEnv
from relmas.rl.features import (
    GLOBAL_FEATURES,
    GlobalFeature,
    ServiceFeature,
    ServiceGlobalFeature,
    SlotFeature,
)
from relmas.rl.observation import Observer, tenant_targets
from relmas.rl.run import best_scored
from relmas.rl.setup import rollout
from relmas.rl.teacher import BaselineTeacher
from relmas.rl.train import validation_key
from relmas.sim import Engine, access
from relmas.workload import generate_trace
from tests.defaults import decision_cost, observation_settings, reward_settings
from tests.test_firm import jobs_frame, one_instance
from tests.test_rl_env import SCARCE, SCENARIO, SYSTEM, tables  # noqa: F401 (a fixture)

# The hand case: one instance; model A is two layers of 1 s, model B one. Job 0 of tenant a
# cannot meet its deadline; started at 0 it ends at 1 s, late, and leaves a's rate at 0. Then
# job 1 (a, A: 2 s) and job 2 (b, B: 1 s) are ready: SJF takes job 2, a tenant below its target
# (a: 0.9, rate 0) comes first for a deficit-first rule.
HAND = [("a", "B", 0.0, 0.5), ("a", "A", 0.1, 9.0), ("b", "B", 0.2, 9.0)]
TARGETS = [0.9, 0.9, 0.5]


def hand_jobs(rows=HAND, targets=TARGETS) -> pl.DataFrame:
    return jobs_frame(rows, False).with_columns(target=pl.Series(targets, dtype=pl.Float64()))


def at_one_second(service: bool | None):
    """The hand case's engine at 1 s (job 0 started at 0 and finished late) and its observer."""
    system, costs = one_instance()
    engine = Engine(system, costs, hand_jobs())
    engine.next_decision()
    engine.step([(0, 0)])
    view = engine.next_decision()
    assert view.now == 1.0 and sorted(view.ready_jobs) == [1, 2]
    settings = observation_settings(candidates=2, reference="sjf_feasible", service=service)
    observer = Observer(engine, settings)
    return observer, observer.observe(view)


def test_a_tenant_below_its_target_shows_its_deficit():
    observer, (obs, mask) = at_one_second(None)  # the jobs carry targets: service features on
    layout = observer.layout
    assert observer.settings.service and layout.slots == 2 + 3 * 2
    slots = observer.slots.tolist()
    assert slots == [2, 2, 1, 1, 2, -1, 1, 2]  # reference, shortest, earliest, hopeless, deficit
    assert mask.tolist() == [True] * 5 + [False] + [True] * 2 + [False]

    def features(slot: int) -> list[float]:
        return [float(obs[layout.service_feature(slot, f)]) for f in ServiceFeature]

    # target, has target, the tenant's rate so far, deficit, its share of the ready jobs
    assert features(6) == pytest.approx([0.9, 1.0, 0.0, 0.9, 0.5])  # job 1: a, 0 of 1 met
    assert features(7) == pytest.approx([0.5, 1.0, 1.0, 0.0, 0.5])  # job 2: b, none decided
    assert features(5) == [0.0] * 5  # an empty slot
    worst = obs[layout.service_global_feature(ServiceGlobalFeature.WORST_DEFICIT)]
    below = obs[layout.service_global_feature(ServiceGlobalFeature.BELOW_TARGET)]
    assert (worst, below) == pytest.approx((0.9, 0.5))  # a below, b not
    # the service features follow the others, which keep their places
    assert obs[layout.slot_feature(6, SlotFeature.PRESENT)] == 1.0
    assert obs[layout.global_feature(GlobalFeature.QUEUE)] == pytest.approx(np.log1p(2))
    assert layout.size == layout.global_feature(0) + GLOBAL_FEATURES + len(ServiceGlobalFeature)


def test_tenant_targets_are_exact_and_do_not_depend_on_job_order():
    """A tenant's target from its jobs' is its own value, bit for bit, however many jobs carry it
    and in whatever order (a grouped mean in polars sums 0.9 a thousand times in a
    thread-dependent order: its last bit changed from run to run, and with it whether a rate of
    exactly 0.9 counts as below target); per-model targets give the mean over the jobs."""
    rng = np.random.default_rng(3)
    tenants = rng.choice(["a", "b", "c", "d"], 4000)
    rows = [(tenant, "B", 0.0, 9.0) for tenant in tenants]
    own = {"a": 0.98, "b": 0.9, "c": 0.7, "d": None}
    targets = [own[tenant] for tenant in tenants]
    targets[0], targets[1] = 0.9, 0.6  # tenant "d": per-model targets, mean 0.75
    tenants[0] = tenants[1] = "d"
    jobs = jobs_frame(rows, False).with_columns(
        tenant=pl.Series(tenants.tolist()), target=pl.Series(targets, dtype=pl.Float64())
    )
    system, costs = one_instance()
    settings = replace(observation_settings(), service=True)
    for frame in (jobs, jobs.sample(fraction=1.0, shuffle=True, seed=5)):
        engine = Engine(system, costs, frame)
        expected = {"a": 0.98, "b": 0.9, "c": 0.7, "d": 0.75}
        got = tenant_targets(engine, settings)
        assert {t: got[i] for i, t in enumerate(engine.tenants)} == expected  # exact equality


def test_a_ready_job_that_cannot_meet_its_deadline_counts_as_missed():
    """At 0 s job 0 (a) cannot make its deadline: nothing is decided in the engine's counters
    (rate 1), but a's rate so far counts the certain miss: 0 of 1, deficit 0.9."""
    system, costs = one_instance()
    engine = Engine(system, costs, hand_jobs())
    view = engine.next_decision()
    assert view.now == 0.0 and access.tenant_achieved(engine.state, 0) == 1.0
    observer = Observer(engine, observation_settings(candidates=2, reference="sjf_feasible"))
    obs, _ = observer.observe(view)
    layout, hopeless = observer.layout, 2 * 2 + 1
    assert observer.slots[hopeless] == 0
    achieved = obs[layout.service_feature(hopeless, ServiceFeature.ACHIEVED)]
    shortfall = obs[layout.service_feature(hopeless, ServiceFeature.DEFICIT)]
    assert (achieved, shortfall) == pytest.approx((0.0, 0.9))


def test_without_the_option_the_layout_is_the_one_before():
    observer, (obs, _) = at_one_second(False)
    plain = observer.layout
    assert plain.slots == 6 and not plain.service
    # per slot 8, per type 5, per (slot, type) pair 10, 9 globals
    assert obs.shape == (6 * 8 + 5 + 6 * 10 + 9,)


def test_a_deficit_first_reference_serves_the_tenant_below_its_target():
    """The reference slot holds the job its baseline starts: the least work for sjf_feasible, the
    job of the tenant below its target for its deficit-first forms."""
    system, costs = one_instance()
    picks = {}
    for name in ("sjf_feasible", "sjf_feasible_deficit", "sjf_feasible_below"):
        engine = Engine(system, costs, hand_jobs())
        engine.next_decision()
        engine.step([(0, 0)])
        view = engine.next_decision()
        observer = Observer(engine, observation_settings(candidates=2, reference=name))
        observer.observe(view)
        picks[name] = observer.slots[0]
    assert picks == {"sjf_feasible": 2, "sjf_feasible_deficit": 1, "sjf_feasible_below": 1}


TARGET_SCENARIO = {
    **SCENARIO,
    "tenants": [
        {**SCENARIO["tenants"][0], "target": 0.95},
        {**SCENARIO["tenants"][1], "target": 0.8},
        SCENARIO["tenants"][2],  # no target: ranked after every job with one
    ],
}


def expected_pick(env: SchedulingEnv, precedence: str) -> int:
    """The job a target-aware SJF rule starts, recomputed from the engine: among the feasible
    ready jobs, a tenant's by its rate counting its hopeless ready jobs as missed — the one
    furthest below its target (`deficit`) or any below it (`below`) — then least work; the
    reference (sjf over all ready jobs) when none is feasible. Gaps as the features hold them
    (float32)."""
    S = env.engine.state
    now, remaining = access.now(S), env.tables.remaining_work_s
    ready = [access.ready_job(S, i) for i in range(access.ready_count(S))]
    work = {j: remaining[access.job_next_row(S, j)] for j in ready}
    hopeless = [j for j in ready if not feasible(now, work[j], access.job_deadline(S, j))]
    feasible_jobs = [j for j in ready if j not in hopeless]
    if not feasible_jobs:
        return min(ready, key=lambda j: (work[j], j))

    def rank(job: int) -> float:
        tenant, target = access.job_tenant(S, job), access.job_target(S, job)
        if np.isnan(target):
            return np.inf
        met = access.tenant_met(S, tenant)
        late = sum(access.job_tenant(S, j) == tenant for j in hopeless)
        decided = met + access.tenant_missed(S, tenant) + late
        rate = met / decided if decided > 0 else 1.0
        gap = float(np.float32(target)) - float(np.float32(rate))
        return -gap if precedence == "deficit" else (0.0 if gap > 0.0 else 1.0)

    return min(feasible_jobs, key=lambda j: (rank(j), work[j], j))


@pytest.mark.parametrize("precedence", ["deficit", "below"])
def test_a_target_aware_teacher_takes_the_tenant_below_target_counting_certain_misses(
    tables,  # noqa: F811 (the fixture)
    precedence,
):
    """The teacher `sjf_feasible_<precedence>` starts, at every decision of a loaded trace, the
    job `expected_pick` recomputes from the engine's counters and ready jobs; tenants fall below
    their targets on the way, and the rule leaves SJF's order."""
    jobs = generate_trace("synthetic", TARGET_SCENARIO, SCARCE, tables, 6)
    name = f"sjf_feasible_{precedence}"
    settings = observation_settings(candidates=2, reference=name)
    env = SchedulingEnv(SCARCE, tables, jobs, settings, reward_settings(), 0.99)
    rule = BaselineTeacher(name, env.layout)
    obs, info = env.reset()
    done, decisions, below, other_than_sjf = False, 0, 0, 0
    while not done:
        action = rule(obs, info["action_mask"])
        job = env.observer.slots[env.layout.slot_of(action)]
        assert job == expected_pick(env, precedence)
        worst = obs[env.layout.service_global_feature(ServiceGlobalFeature.WORST_DEFICIT)]
        below += worst > 0
        other_than_sjf += job != env.observer.slots[1] and env.observer.slots[1] >= 0
        decisions += 1
        obs, _, done, _, info = env.step(action)
    assert below > decisions / 4 and other_than_sjf > 0


@pytest.mark.parametrize("system", [SYSTEM, SCARCE], ids=["8GBps", "2GBps"])
def test_target_aware_teachers_reproduce_their_baselines(
    tables,  # noqa: F811 (the fixture)
    system,
):
    """Each deficit-first and below-target baseline as the agent's teacher: always taking its
    action gives the baseline's schedule (one rate, `triage.service_rates`, and one decision
    kernel for both). The targets change the schedules."""
    jobs = generate_trace("synthetic", TARGET_SCENARIO, system, tables, 6)
    names = [n for n in catalog.of_kind("target") if n.endswith(("_deficit", "_below"))]
    assert len(names) == 12
    changed = 0
    for name in names:
        settings = observation_settings(candidates=2, reference=name)
        env = SchedulingEnv(system, tables, jobs, settings, reward_settings(), 0.99)
        rollout(env, BaselineTeacher(name, env.layout))
        expected = env.engine.result("rule").jobs["finish_s"].to_list()
        assert simulate(system, jobs, tables, name).jobs["finish_s"].to_list() == expected, name
        base = name.removesuffix("_deficit").removesuffix("_below")
        changed += simulate(system, jobs, tables, base).jobs["finish_s"].to_list() != expected
    assert changed >= 6


def two_job_env(**reward) -> SchedulingEnv:
    """Tenant a (target 0.8), one-layer jobs: job 0 cannot meet its deadline, job 1 can; no
    shaping."""
    system, costs = one_instance()
    jobs = hand_jobs([HAND[0], ("a", "B", 0.1, 9.0)], [0.8, 0.8])
    settings = observation_settings(candidates=1, reference="sjf_feasible")
    rewards = reward_settings(progress=0.0, **reward)
    return SchedulingEnv(system, costs, jobs, settings, rewards, 0.99)


def credits(env: SchedulingEnv) -> list[float]:
    """The credits of the episode, acting by the reference slot (job 0, then job 1)."""
    _, info = env.reset()
    seen = [info["credit"]]
    done = False
    while not done:
        _, _, done, _, info = env.step(0)
        seen.append(info["credit"])
    return seen


def test_the_deficit_weights_a_credit_by_the_tenant_s_deficit_when_it_is_settled():
    """Job 0's miss is charged at 0 s, when it is certain: tenant a's rate counts it (0 of 1,
    deficit 0.8), 1 + w x 0.8 / 0.8. Job 1 meets its deadline at 2 s, when a has met 1 of 2
    (rate 0.5, deficit 0.3): its credit is 1 + w x 0.3 / 0.8."""
    assert credits(two_job_env()) == pytest.approx([-1.0, 0.0, 1.0])
    assert credits(two_job_env(deficit_weight=2.0)) == pytest.approx([-3.0, 0.0, 1.75])


def test_the_episode_ends_with_the_shortfall_in_deadlines():
    """Tenant a meets 1 of its 2 jobs against 0.8: shortfall (2/2)(0.8 - 0.5) = 0.3, 0.6 deadlines
    missing, charged x `shortfall` with the last credit."""
    env = two_job_env(shortfall=1.5)
    assert credits(env) == pytest.approx([-1.0, 0.0, 1.0 - 1.5 * 0.6])
    metrics = env.episode_metrics()
    assert metrics["shortfall"] == pytest.approx(0.3) and metrics["targets_met"] == 0.0
    result = simulate(env.system, env.jobs, env.tables, "fcfs")
    assert metrics["shortfall"] == result.metrics["shortfall"]


def test_validation_ranks_by_least_shortfall_on_traces_with_targets():
    """On traces with targets the least shortfall wins, ties by the SLA rate; without targets the
    metric alone: the ranking of best.pt, the reference and the teacher."""
    low, high = {"sla_rate": 0.6, "shortfall": 0.05}, {"sla_rate": 0.7, "shortfall": 0.08}
    assert validation_key(low, "sla_rate") > validation_key(high, "sla_rate")
    tie = {"sla_rate": 0.65, "shortfall": 0.05}
    assert validation_key(tie, "sla_rate") > validation_key(low, "sla_rate")
    assert validation_key({"sla_rate": 0.7}, "sla_rate") > validation_key(
        {"sla_rate": 0.6}, "sla_rate"
    )
    assert best_scored({"r": high, "s": low, "t": dict(low)}) == "s"  # first of equals
    assert best_scored({"r": {"sla_rate": 0.6}, "s": {"sla_rate": 0.7}}) == "s"


def test_validation_shortfall_is_the_service_metric(tables):  # noqa: F811 (the fixture)
    """A rollout's shortfall on a trace with targets is the simulator's (the teacher replays
    sjf_feasible); without targets there is none."""
    jobs = generate_trace("synthetic", TARGET_SCENARIO, SYSTEM, tables, 3)
    settings = observation_settings(candidates=2, reference="sjf_feasible")
    env = SchedulingEnv(SYSTEM, tables, jobs, settings, reward_settings(), 0.99)
    run = rollout(env, BaselineTeacher("sjf_feasible", env.layout))
    result = simulate(SYSTEM, jobs, tables, "sjf_feasible")
    assert run["shortfall"] == result.metrics["shortfall"] > 0
    assert run["targets_met"] == result.metrics["targets_met"]
    plain = SchedulingEnv(SYSTEM, tables, jobs.drop("target"), settings, reward_settings(), 0.99)
    assert "shortfall" not in rollout(plain, BaselineTeacher("sjf_feasible", plain.layout))


def test_an_agent_json_without_the_service_decided_is_refused(tmp_path):
    """Training decides the option (`resolve_service`); an agent.json left at null would give
    the network a width it was not trained with on one trace and another on the next."""
    info = AgentInfo(
        scenario="s",
        observation=observation_settings(reference="sjf_feasible"),  # the schema's null
        reward=reward_settings(),
        instance_types=("x",),
        accelerator_types=("x",),
        split_variants=("whole",),
        decision_cost=decision_cost("x"),
        validation={},
        teacher=None,
        teacher_bonus=0.0,
        teachers_validation={},
    )
    write_agent_info(tmp_path, info)
    with pytest.raises(InputError, match="observation.service: expected true or false"):
        read_agent_info(tmp_path)
    write_agent_info(tmp_path, replace(info, observation=replace(info.observation, service=True)))
    assert read_agent_info(tmp_path).observation.service
