"""The offline genetic algorithm: never worse than the policies it is seeded with (it reproduces
their schedules, holds included), optimal on hand-made cases where no online policy can be,
seeded, and its schedule obeys the simulator; on the quick DAG it meets at least the deadlines of
every online policy."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from relmas.errors import InputError
from relmas.evaluate import simulate
from relmas.policies import Policy, ga_kernels, make_policy
from relmas.policies.ga_offline import SEED_POLICIES, GeneLayout, _Search, build_plans
from relmas.sim import Engine
from tests.synthetic import contended_case, job_trace, one_type
from tests.test_pipeline import results_root

SMALL_BUDGET = {"population": 12, "generations": 15, "time_limit_s": None}


def random_case(seed: int, jobs: int, sharing: str = "proportional"):
    """Jobs of three synthetic models on 2 + 1 instances sharing scarce bandwidth, tight slack."""
    return contended_case(seed, jobs, {"a": 6, "b": 10, "c": 3}, 5.0, (1.2, 4.0), sharing)


def one_instance(durations: dict[str, float]):
    return one_type({model: [duration] for model, duration in durations.items()})


def met(result) -> int:
    return int(result.jobs["met"].sum())


def heuristic_met(system, tables, jobs) -> dict[str, int]:
    return {
        name: met(Engine(system, tables, jobs).run(make_policy(name, seed=0)))
        for name in SEED_POLICIES
    }


@pytest.mark.parametrize(("seed", "sharing"), [(1, "proportional"), (2, "maxmin"), (3, "maxmin")])
def test_never_worse_than_the_heuristics_it_is_seeded_with(seed, sharing):
    system, tables, jobs = random_case(seed, jobs=18, sharing=sharing)
    heuristics = heuristic_met(system, tables, jobs)
    policy = make_policy("ga_offline", seed=0, **SMALL_BUDGET)
    result = Engine(system, tables, jobs).run(policy)
    # The decoder reproduces every heuristic's schedule exactly from its instances and start times.
    assert policy.report.seed_met == heuristics
    assert met(result) == policy.report.best_met >= max(heuristics.values())
    assert min(heuristics.values()) < jobs.height  # contended enough to discriminate
    assert policy.report.history == sorted(policy.report.history)  # elitism: never loses the best


def test_waits_for_an_urgent_job_that_no_online_policy_can_foresee():
    # A long job with a loose deadline arrives first, a short urgent one 1 s later. Any
    # work-conserving policy starts the long one at 0 and the short one misses; knowing the
    # future, the instance stays idle until 1 s, runs the short job, then the long one.
    system, tables = one_instance({"long": 10.0, "short": 1.0})
    jobs = job_trace([("long", 0.0, 100.0, 1), ("short", 1.0, 2.5, 1)])
    assert max(heuristic_met(system, tables, jobs).values()) == 1
    policy = make_policy("ga_offline", seed=0, population=8, generations=40)
    result = Engine(system, tables, jobs).run(policy)
    finish = dict(zip(result.jobs["job_id"], result.jobs["finish_s"], strict=True))
    assert met(result) == 2
    assert finish == {0: pytest.approx(12.0), 1: pytest.approx(2.0)}


def test_finds_the_optimum_number_of_deadlines_where_the_orders_of_the_heuristics_fail():
    # Four jobs at t = 0 on one instance, (duration, deadline): A (4, 5), B (3, 6), C (3, 7),
    # D (2.5, 20). A and B cannot both meet (4 + 3 > 6), but A, C, D (or B, C, D) can, in that
    # order. EDF, LLF and FCFS run A then B, which makes B and C late (2 met); SJF and PREMA run D
    # first, then B, which makes C late (2 met).
    system, tables = one_instance({"A": 4.0, "B": 3.0, "C": 3.0, "D": 2.5})
    jobs = job_trace(
        [("A", 0.0, 5.0, 1), ("B", 0.0, 6.0, 1), ("C", 0.0, 7.0, 1), ("D", 0.0, 20.0, 1)]
    )
    heuristics = heuristic_met(system, tables, jobs)
    assert all(heuristics[name] == 2 for name in ("fcfs", "sjf", "edf", "llf", "prema"))
    result = Engine(system, tables, jobs).run(make_policy("ga_offline", seed=0, population=8))
    assert met(result) == 3
    assert result.jobs.filter(~pl.col("met"))["model"].to_list() in (["A"], ["B"])


def test_seeded_by_one_policy_it_searches_from_that_schedule_alone():
    # The four jobs above; from FCFS's schedule alone (2 met) the search still finds 3.
    system, tables = one_instance({"A": 4.0, "B": 3.0, "C": 3.0, "D": 2.5})
    jobs = job_trace(
        [("A", 0.0, 5.0, 1), ("B", 0.0, 6.0, 1), ("C", 0.0, 7.0, 1), ("D", 0.0, 20.0, 1)]
    )
    policy = make_policy("ga_offline", seed=0, population=8, seed_policies=("fcfs",))
    result = Engine(system, tables, jobs).run(policy)
    assert policy.report.seed_met == {"fcfs": 2}
    assert met(result) == 3
    with pytest.raises(InputError, match="seed_policies"):
        make_policy("ga_offline", seed_policies=())


def test_any_genes_decode_to_a_complete_schedule():
    # Keys are sorted within each job, so no plan can deadlock, whatever the genes.
    system, tables, jobs = random_case(7, jobs=10)
    rng = np.random.default_rng(0)
    layout = GeneLayout.of(Engine(system, tables, jobs))
    instances = sum(i.count for i in system.instances)
    accelerators = rng.integers(0, instances, size=(20, layout.genes))
    keys = rng.normal(0.0, 1.0, size=(20, layout.genes)) + jobs["arrival_s"].max() / 2
    holds = rng.random((20, layout.genes)) < 0.5
    sequences, starts, releases = build_plans(accelerators, keys, holds, layout, instances)
    bounds = zip(layout.job_start[:-1], layout.job_start[1:], strict=True)
    blocks = [slice(lo, hi) for lo, hi in bounds]
    for individual in range(20):
        sequence, start = sequences[individual], starts[individual]
        ordered = np.concatenate([np.sort(keys[individual, block]) for block in blocks])
        assert np.array_equal(releases[individual], np.where(holds[individual], ordered, -np.inf))
        # Instance a runs exactly its genes, in order of the job-sorted keys.
        for a in range(instances):
            genes = sequence[start[a] : start[a + 1]]
            assert sorted(genes.tolist()) == np.flatnonzero(accelerators[individual] == a).tolist()
            assert np.all(np.diff(ordered[genes]) >= 0)
        engine = Engine(system, tables, jobs)
        out = np.zeros(instances, dtype=np.int64), np.zeros(instances, dtype=np.int64)
        held = np.zeros(layout.genes, dtype=np.bool_)
        plan = (sequence, start, start[:-1].copy(), layout.gene_job, layout.gene_row)
        engine.run_jitted(ga_kernels.run_plan, *plan, releases[individual], held, *out)
        assert engine.finished
        assert held.any() and not held[~holds[individual]].any()  # only held layers waited


class Hesitant(Policy):
    """An online policy that holds work back: it starts a ready layer only on the fastest idle
    instance for it, at random leaves idle instances idle, and waits now and then."""

    name = "hesitant"

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def decide(self, view):
        if view.can_wait and self.rng.random() < 0.3:
            return []
        pairs, free = [], set(view.idle_accelerators.tolist())
        for i in self.rng.permutation(view.ready_jobs.size):
            on = min(free, key=lambda a: view.next_latency_s[i, view.accelerator_types[a]])
            if self.rng.random() < 0.7 or not view.can_wait:
                pairs.append((int(view.ready_jobs[i]), on))
                free.discard(on)
            if not free:
                break
        return pairs


@pytest.mark.parametrize(("seed", "firm"), [(0, False), (1, False), (0, True), (1, True)])
def test_the_decoder_reproduces_a_schedule_that_holds_work_back_exactly(seed, firm):
    # The genes of an online policy's schedule (instances, start times, holds) decode to the very
    # same schedule, to the last bit, although the policy left ready layers and idle instances
    # waiting; without the holds the decoder would start those layers sooner. Under firm
    # deadlines the layers the schedule never ran (of dropped jobs) are skipped.
    system, tables, jobs = random_case(10 + seed, jobs=12)
    jobs = jobs.with_columns(firm=pl.lit(firm))
    recorded = Engine(system, tables, jobs, record=True)
    expected = recorded.run(Hesitant(seed))
    assert expected.jobs["dropped"].any() == firm
    engine = Engine(system, tables, jobs, record=True)
    layout = GeneLayout.of(engine)
    search = _Search(make_policy("ga_offline"), engine, layout)
    accelerator, key, hold = search.schedule_genes(Hesitant(seed))
    assert hold.any()
    instances = sum(i.count for i in system.instances)
    plans = build_plans(accelerator[None], key[None], hold[None], layout, instances)
    sequence, start, release = (plan[0] for plan in plans)
    out = np.zeros(instances, dtype=np.int64), np.zeros(instances, dtype=np.int64)
    held = np.zeros(layout.genes, dtype=np.bool_)
    plan = (sequence, start, start[:-1].copy(), layout.gene_job, layout.gene_row, release, held)
    engine.run_jitted(ga_kernels.run_plan, *plan, *out)
    result = engine.result("replay")
    assert result.jobs.drop("policy", strict=False).equals(
        expected.jobs.drop("policy", strict=False)
    )
    assert engine.timeline().equals(recorded.timeline())
    unheld = Engine(system, tables, jobs)
    plans = build_plans(accelerator[None], key[None], ~hold[None] & False, layout, instances)
    plan = (plans[0][0], plans[1][0], plans[1][0][:-1].copy(), layout.gene_job, layout.gene_row)
    unheld.run_jitted(ga_kernels.run_plan, *plan, plans[2][0], held, *out)
    assert not np.array_equal(
        unheld.result("x").jobs["finish_s"].to_numpy(), result.jobs["finish_s"].to_numpy()
    )


def test_same_seed_same_schedule_and_stepping_replays_it():
    system, tables, jobs = random_case(4, jobs=12)
    runs = [
        Engine(system, tables, jobs).run(make_policy("ga_offline", seed=7, **SMALL_BUDGET))
        for _ in range(2)
    ]
    assert runs[0].jobs.equals(runs[1].jobs)
    engine = Engine(system, tables, jobs)
    policy = make_policy("ga_offline", seed=7, **SMALL_BUDGET)
    policy.reset(engine)
    while (view := engine.next_decision()) is not None:
        engine.step(policy.decide(view))
    assert engine.result("ga_offline").jobs.equals(runs[0].jobs)


def test_schedule_obeys_the_simulator_invariants():
    system, tables, jobs = random_case(5, jobs=15)
    policy = make_policy("ga_offline", seed=1, **SMALL_BUDGET)
    engine = Engine(system, tables, jobs, record=True, record_buffer=16)
    result = engine.run(policy)
    out = result.jobs
    assert sorted(engine.state.done_log.tolist()) == list(range(jobs.height))
    assert (out["start_s"] >= out["arrival_s"]).all()
    tasks = result.timeline.group_by(["accelerator", "job_id", "layer"]).agg(
        pl.col("start_s").min(), pl.col("end_s").max()
    )
    assert tasks.select("job_id", "layer").is_unique().all()  # every layer runs once
    layers = dict(zip(tables.models, tables.n_layers.tolist(), strict=True))
    finish = dict(zip(out["job_id"], out["finish_s"], strict=True))
    for job in tasks.sort("start_s").partition_by("job_id"):
        model = jobs.filter(pl.col("job_id") == job["job_id"][0])["model"][0]
        assert job["layer"].to_list() == list(range(layers[model]))  # all layers, in order
        assert np.all(job["start_s"].to_numpy()[1:] >= job["end_s"].to_numpy()[:-1] - 1e-12)
        assert job["end_s"][-1] == pytest.approx(finish[job["job_id"][0]], rel=1e-12)
    for acc in tasks.sort("start_s").partition_by("accelerator"):  # one layer at a time
        assert np.all(acc["start_s"].to_numpy()[1:] >= acc["end_s"].to_numpy()[:-1] - 1e-12)
    in_use = result.timeline.group_by("start_s", "end_s").agg(pl.col("bandwidth_bps").sum())
    assert in_use["bandwidth_bps"].max() <= system.bandwidth_bytes_per_s * (1 + 1e-9)
    assert met(result) == policy.report.best_met
    # Decision time covers the search, spread over the replay's decisions.
    total_us = result.metrics["decision_us"] * result.metrics["decisions"]
    assert total_us >= 1e6 * policy.report.search_s > 0


def test_runs_by_name_through_simulate_and_refuses_long_traces():
    system, tables, jobs = random_case(6, jobs=6)
    result = simulate(system, jobs, tables, "ga_offline", seed=2)
    assert result.policy == "ga_offline" and result.metrics["jobs"] == 6
    with pytest.raises(InputError, match=r"evaluation\.ga\.max_jobs: .*at most 5 jobs.*'6 jobs'"):
        Engine(system, tables, jobs).run(make_policy("ga_offline", max_jobs=5))
    with pytest.raises(InputError, match=r"evaluation\.ga\.population: expected an integer >= 2"):
        make_policy("ga_offline", population=1)
    with pytest.raises(InputError, match=r"evaluation\.ga\.time_limit_s"):
        make_policy("ga_offline", time_limit_s=0)


@pytest.mark.slow
def test_on_the_quick_dag_it_meets_at_least_the_deadlines_of_every_online_policy(quick_run):
    project, _, _ = quick_run
    summary = pl.read_parquet(results_root(project) / "report" / "summary.parquet")
    summary = summary.with_columns(met=(pl.col("sla_rate") * pl.col("jobs")).round().cast(int))
    bound = summary.filter(pl.col("policy") == "ga_offline").select("scenario", "seed", bound="met")
    assert bound.height >= 1
    others = summary.filter(pl.col("policy") != "ga_offline").join(bound, on=["scenario", "seed"])
    assert {"relmas", "relmas_resize", "gacer"} <= set(others["policy"])
    assert others.filter(pl.col("met") > pl.col("bound")).is_empty()
