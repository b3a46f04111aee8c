"""An independent check of the simulator's semantics: a small reference simulator, written from
docs/simulator.md alone in exact rational arithmetic, must give the same per-job finish times as the
engine for FCFS, SJF and EDF on random traces.

The reference knows nothing of the engine's arrays, heaps or tolerances. Latencies, arrivals and
deadlines are small integers so that ties (equal keys, simultaneous events) are frequent and the
documented tie rules are exercised: between jobs, the earlier arrival then the lower job_id; between
idle instances, the lowest `latency_s` for the job's next layer, then the lowest instance index.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relmas.policies import make_policy
from relmas.schemas import JOB_SCHEMA
from relmas.sim import CostTables, Engine, load_system
from tests.synthetic import cost_frame

TYPES = ("t0", "t1", "t2")
RULES = ("fcfs", "sjf", "edf")


@dataclass(frozen=True)
class Job:
    """One request: layers[i][type] = (latency_s, dram_bytes) of its i-th layer on each type."""

    job_id: int
    arrival: int
    deadline: int
    layers: tuple[dict[str, tuple[int, int]], ...]


def fluid_rates(demands: dict[int, Fraction], capacity: Fraction | None, sharing: str) -> dict:
    """Rate of each running task (by instance) from its full-speed demand: 1 while the demands fit
    the capacity; else proportional (every task with traffic at capacity / total demand) or max-min
    fair (share = min(demand, level), the level making the shares sum to the capacity)."""
    total = sum(demands.values())
    if capacity is None or total <= capacity:
        return {acc: Fraction(1) for acc in demands}
    if sharing == "proportional":
        return {acc: capacity / total if d > 0 else Fraction(1) for acc, d in demands.items()}
    # The level: the smallest demands are served whole while they are below an equal split of
    # what they leave.
    left, pending = capacity, sorted(d for d in demands.values() if d > 0)
    while pending and pending[0] <= left / len(pending):
        left -= pending.pop(0)
    level = left / len(pending)
    return {acc: min(d, level) / d if d > 0 else Fraction(1) for acc, d in demands.items()}


def reference_finish(
    jobs: list[Job],
    instances: list[str],
    rule: str,
    capacity: Fraction | None,
    sharing: str = "proportional",
) -> dict[int, Fraction]:
    """Finish time of every job under `rule`, following docs/simulator.md step by step.

    `capacity` is the shared DRAM bandwidth in B/s (None = unlimited), shared by the running layers
    as a fluid (`fluid_rates`).
    """

    def alone(layer: dict[str, tuple[int, int]], kind: str) -> Fraction:
        latency, dram = layer[kind]
        return Fraction(latency) if capacity is None else max(Fraction(latency), dram / capacity)

    def key(job: Job) -> tuple:
        remaining = sum(
            min(alone(layer, kind) for kind in set(instances))
            for layer in job.layers[nxt[job.job_id] :]
        )
        rule_key = {"fcfs": job.arrival, "sjf": remaining, "edf": job.deadline}[rule]
        return (rule_key, job.arrival, job.job_id)

    nxt = {job.job_id: 0 for job in jobs}  # index of each job's next layer
    future = sorted(jobs, key=lambda j: (j.arrival, j.job_id))
    ready: list[Job] = []
    running: dict[int, list] = {}  # instance -> [job, work left (s at rate 1), demand (B/s)]
    finish: dict[int, Fraction] = {}
    now = Fraction(future[0].arrival)
    while len(finish) < len(jobs):
        while future and future[0].arrival <= now:
            ready.append(future.pop(0))
        # Decision point: fill the idle instances one job at a time.
        while ready and len(running) < len(instances):
            job = min(ready, key=key)
            ready.remove(job)
            layer = job.layers[nxt[job.job_id]]
            idle = [i for i in range(len(instances)) if i not in running]
            acc = min(idle, key=lambda i: (layer[instances[i]][0], i))
            latency, dram = layer[instances[acc]]
            running[acc] = [job, Fraction(latency), Fraction(dram, latency)]
        # Rates of the running layers, then time runs to the next event.
        rates = fluid_rates({acc: task[2] for acc, task in running.items()}, capacity, sharing)
        events = [now + task[1] / rates[acc] for acc, task in running.items()]
        if future:
            events.append(Fraction(future[0].arrival))
        later = min(events)
        for acc in sorted(running):
            task = running[acc]
            task[1] -= rates[acc] * (later - now)
            if task[1] == 0:
                job = task[0]
                del running[acc]
                nxt[job.job_id] += 1
                if nxt[job.job_id] == len(job.layers):
                    finish[job.job_id] = later
                else:
                    ready.append(job)
        now = later
    return finish


@st.composite
def traces(draw, kinds: int, bandwidth: bool):
    """(jobs, instance types, dram_gbps) of a small random trace on integer times."""
    types = TYPES[:kinds]
    instances = [kind for kind in types for _ in range(draw(st.integers(1, 2)))]
    if kinds == 1:
        instances = instances[:1]
    count = draw(st.integers(1, 9))
    arrivals = draw(st.lists(st.integers(0, 6), min_size=count, max_size=count))
    jobs = []
    for job_id, arrival in enumerate(arrivals):
        layers = tuple(
            {
                kind: (
                    draw(st.integers(1, 4)),
                    draw(st.sampled_from([0, 2, 4, 8])) if bandwidth else 0,
                )
                for kind in types
            }
            for _ in range(draw(st.integers(1, 3)))
        )
        deadline = arrival + draw(st.integers(1, 12))
        jobs.append(Job(job_id, arrival, deadline, layers))
    dram_gbps = draw(st.sampled_from([1e-9, 3e-9, 8e-9])) if bandwidth else None
    return jobs, instances, dram_gbps


def engine_finish(
    jobs: list[Job], instances: list[str], dram_gbps: float | None, sharing: str, rule: str
) -> tuple[dict[int, float], float]:
    """Finish times of the engine's run of `rule` (public API only), and the bandwidth in B/s."""
    types = list(dict.fromkeys(instances))
    costs = cost_frame(
        {
            f"m{job.job_id}": {
                kind: [(float(layer[kind][0]), layer[kind][1], 0.0) for layer in job.layers]
                for kind in types
            }
            for job in jobs
        }
    )
    counts = {kind: instances.count(kind) for kind in types}
    system = load_system(
        {
            "instances": [{"name": kind, "count": n} for kind, n in counts.items()],
            "dram_gbps": dram_gbps,
            "sharing": sharing,
        }
    )
    assert list(system.instance_types) == instances
    bandwidth = system.bandwidth_bytes_per_s
    tables = CostTables.from_frame(costs, types, bandwidth_bps=bandwidth)
    trace = pl.DataFrame(
        {
            "job_id": [job.job_id for job in jobs],
            "tenant": ["t"] * len(jobs),
            "model": [f"m{job.job_id}" for job in jobs],
            "arrival_s": [float(job.arrival) for job in jobs],
            "deadline_s": [float(job.deadline) for job in jobs],
            "priority": [1] * len(jobs),
        },
        schema_overrides=JOB_SCHEMA,
    )
    result = Engine(system, tables, trace).run(make_policy(rule))
    out = result.jobs
    return dict(zip(out["job_id"].to_list(), out["finish_s"].to_list(), strict=True)), bandwidth


def check(case, rule: str, exact: bool, sharing: str = "proportional") -> None:
    jobs, instances, dram_gbps = case
    got, bandwidth = engine_finish(jobs, instances, dram_gbps, sharing, rule)
    capacity = None if dram_gbps is None else Fraction(bandwidth)
    want = reference_finish(jobs, instances, rule, capacity, sharing)
    if exact:
        assert got == {job: float(t) for job, t in want.items()}
    else:
        assert got == pytest.approx({job: float(t) for job, t in want.items()}, rel=1e-9)


SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_reference_reproduces_a_hand_computed_schedule():
    # Guards the reference itself: one instance, a (2 s) and b (1 s) at 0, c (1 s) at 1.
    a = Job(0, 0, 9, ({"t0": (2, 0)},))
    b = Job(1, 0, 2, ({"t0": (1, 0)},))
    c = Job(2, 1, 3, ({"t0": (1, 0)},))
    jobs, one = [a, b, c], ["t0"]
    assert reference_finish(jobs, one, "fcfs", None) == {0: 2, 1: 3, 2: 4}
    assert reference_finish(jobs, one, "sjf", None) == {0: 4, 1: 1, 2: 2}
    assert reference_finish(jobs, one, "edf", None) == {0: 4, 1: 1, 2: 2}
    # docs/simulator.md's worked example: a = (1 s, 10 B), b = (2 s, 40 B) on 15 B/s, proportional.
    a = Job(0, 0, 9, ({"t0": (1, 10)},))
    b = Job(1, 0, 9, ({"t0": (2, 40)},))
    finish = reference_finish([a, b], ["t0", "t0"], "fcfs", Fraction(15))
    assert finish == {0: 2, 1: 2 + Fraction(4, 3)}
    # ... and max-min fair: shares 7.5 / 7.5, a ends at 4/3 s, b at 10/3 s.
    finish = reference_finish([a, b], ["t0", "t0"], "fcfs", Fraction(15), "maxmin")
    assert finish == {0: Fraction(4, 3), 1: Fraction(10, 3)}


@pytest.mark.parametrize("rule", RULES)
@SETTINGS
@given(case=traces(kinds=1, bandwidth=False))
def test_one_accelerator_matches_the_reference(rule, case):
    check(case, rule, exact=True)


@pytest.mark.parametrize("rule", RULES)
@SETTINGS
@given(case=traces(kinds=3, bandwidth=False))
def test_heterogeneous_instances_match_the_reference(rule, case):
    check(case, rule, exact=True)


@pytest.mark.parametrize("sharing", ["proportional", "maxmin"])
@pytest.mark.parametrize("rule", RULES)
@SETTINGS
@given(case=traces(kinds=2, bandwidth=True))
def test_shared_bandwidth_matches_the_reference(rule, sharing, case):
    # Fluid rates are rational but not dyadic: the engine's floats agree up to rounding.
    check(case, rule, exact=False, sharing=sharing)
