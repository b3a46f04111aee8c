"""Placement, a parameter of the rule kernel (relmas.policies.placement): a rule restricted to a
set of types is the rule on the system of those types alone, schedule for schedule; the
bandwidth-aware placement leaves a byte-heavy type idle where memory binds (a hand case) and uses
it where memory is slack; the jitted loop and the stepping path agree for every placement."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from relmas import catalog
from relmas.errors import InputError
from relmas.policies import make_policy
from relmas.policies.placement import Placement
from relmas.schemas import JOB_SCHEMA
from relmas.sim import CostTables, Engine, load_system
from tests.synthetic import cost_frame, stepped_result, synthetic_costs

PLACED = catalog.placed()
TYPES = ["e", "s", "t"]


def three_types(kept: list[str] | None = None, jobs: int = 80):
    """Synthetic models on 2 + 1 + 2 instances of three types sharing scarce bandwidth (or only
    the instances of the `kept` types), and one trace with service targets for three tenants:
    the trace drawn on the whole system, so that both systems run the very same jobs."""
    costs = synthetic_costs({"a": 4, "b": 7, "c": 3}, TYPES, seed=5)
    counts = {"e": 2, "s": 1, "t": 2}

    def system_of(types):
        instances = [{"name": name, "count": counts[name]} for name in types]
        return load_system({"instances": instances, "dram_gbps": 6.0})

    whole = CostTables.from_frame(costs, TYPES, bandwidth_bps=6e9)
    rng = np.random.default_rng(2)
    models = rng.choice(["a", "b", "c"], jobs)
    isolated = np.array([whole.isolated_latency(m) for m in models])
    arrival = np.cumsum(rng.exponential(isolated.mean() / 3.0, jobs))
    tenants = np.array(["gold", "silver", "free"])[np.arange(jobs) % 3]
    targets = {"gold": 0.95, "silver": 0.8}
    trace = pl.DataFrame(
        {
            "job_id": np.arange(jobs),
            "tenant": tenants,
            "model": models,
            "arrival_s": arrival,
            "deadline_s": arrival + rng.uniform(1.5, 6.0, jobs) * isolated,
            "priority": rng.choice([1, 3, 9], jobs),
            "target": [targets.get(t) for t in tenants],
        },
        schema_overrides=JOB_SCHEMA,
    )
    types = TYPES if kept is None else kept
    return system_of(types), CostTables.from_frame(costs, types, bandwidth_bps=6e9), trace


def schedule(engine: Engine, instances: list[int]) -> pl.DataFrame:
    """The recorded timeline, instances renamed by `instances` (position -> name)."""
    timeline = engine.timeline()
    named = timeline["accelerator"].map_elements(instances.__getitem__, return_dtype=pl.Int64)
    return timeline.with_columns(named).sort("start_s", "accelerator")


# The token rule normalises its tokens by a job's isolated latency, which the engine computes over
# the system's types: on the system of the kept types alone that latency (not the rule) differs.
ISOLATED_READERS = ("sjf_feasible_tokens",)


@pytest.mark.parametrize("kept", [["e", "t"], ["s"], ["e", "s"]])
def test_a_rule_on_a_set_of_types_is_the_rule_on_a_system_of_those_types_alone(kept):
    """Every rule and target-aware baseline with placement `kept` on the whole system starts
    the same layers at the same times on the same instances as on the system of `kept` alone
    (the other instances idle), and meets the same deadlines."""
    whole, tables, jobs = three_types()
    alone, alone_tables, _ = three_types(kept)
    names = [name for name in whole.instance_types]
    instances = [k for k, name in enumerate(names) if name in kept]
    differs = 0
    for name in PLACED:
        if name in ISOLATED_READERS:
            continue
        placed = Engine(whole, tables, jobs, record=True)
        placed_result = placed.run(make_policy(name, placement="+".join(kept)))
        own = Engine(alone, alone_tables, jobs, record=True)
        own_result = own.run(make_policy(name))
        assert schedule(placed, list(range(len(names)))).equals(schedule(own, instances)), name
        assert placed_result.jobs["met"].equals(own_result.jobs["met"]), name
        assert placed_result.jobs["finish_s"].equals(own_result.jobs["finish_s"]), name
        unrestricted = Engine(whole, tables, jobs).run(make_policy(name))
        differs += not unrestricted.jobs["finish_s"].equals(placed_result.jobs["finish_s"])
    assert differs >= len(PLACED) - len(ISOLATED_READERS) - 2  # the restriction changes most


def one_layer(bandwidth: float | None):
    """One single-layer model on two types, one instance each: `fast` (1 s, 10 B) and `heavy`
    (1 s, 20 B); two jobs at 0 due at 10 s."""
    costs = cost_frame({"m": {"fast": [(1.0, 10, 0.0)], "heavy": [(1.0, 20, 0.0)]}})
    instances = [{"name": "fast", "count": 1}, {"name": "heavy", "count": 1}]
    system = load_system({"instances": instances, "dram_gbps": bandwidth and bandwidth / 1e9})
    tables = CostTables.from_frame(
        costs, ["fast", "heavy"], bandwidth_bps=system.bandwidth_bytes_per_s
    )
    jobs = pl.DataFrame(
        {
            "job_id": [0, 1],
            "tenant": ["t", "t"],
            "model": ["m", "m"],
            "arrival_s": [0.0, 0.0],
            "deadline_s": [10.0, 10.0],
            "priority": [1, 1],
        },
        schema_overrides=JOB_SCHEMA,
    )
    return system, tables, jobs


def finishes(system, tables, jobs, policy) -> tuple[list[float], list[int], float]:
    engine = Engine(system, tables, jobs, record=True)
    result = engine.run(policy)
    used = sorted(set(engine.timeline()["accelerator"].to_list()))
    return result.jobs.sort("job_id")["finish_s"].to_list(), used, result.metrics["bytes_moved"]


def test_the_bandwidth_placement_leaves_a_byte_heavy_type_idle_where_memory_binds():
    """15 B/s. The rule starts job 0 on `fast` and job 1 on `heavy` (the fastest idle): 30 B/s
    wanted, both at rate 1/2, both end at 2 s, 30 B moved. The bandwidth placement starts job 0
    on its home `fast` (1 s against 20 / 15 s); job 1's home, with the 5 B/s job 0 leaves, is
    `fast` again (max(1, 10 / 5) = 2 s against 4 s), and on `heavy` 10 + 20 B/s would not fit in
    15: it waits and starts on `fast` at 1 s. Ends at 1 and 2 s, 20 B moved, `heavy` never
    used."""
    system, tables, jobs = one_layer(15.0)
    rule = finishes(system, tables, jobs, make_policy("sjf_feasible"))
    assert rule == (pytest.approx([2.0, 2.0]), [0, 1], pytest.approx(30))
    placed = finishes(system, tables, jobs, make_policy("sjf_feasible", placement="bandwidth"))
    assert placed == (pytest.approx([1.0, 2.0]), [0], pytest.approx(20))


@pytest.mark.parametrize("bandwidth", [100.0, None], ids=["slack", "unlimited"])
def test_the_bandwidth_placement_uses_the_whole_system_where_memory_is_slack(bandwidth):
    """With 100 B/s (or none) job 1 takes 1 s on either type with the 90 B/s left (its home
    is both; and 10 + 20 B/s fit): both placements start both jobs at once."""
    system, tables, jobs = one_layer(bandwidth)
    for placement in ("all", "bandwidth"):
        policy = make_policy("sjf_feasible", placement=placement)
        assert finishes(system, tables, jobs, policy) == (
            pytest.approx([1.0, 1.0]),
            [0, 1],
            pytest.approx(30),
        )


@pytest.mark.parametrize("placement", ["all", "bandwidth", "e+t", "s"])
def test_jitted_loop_and_stepping_give_the_same_schedule(placement):
    system, tables, jobs = three_types()
    for name in PLACED:
        fast = Engine(system, tables, jobs).run(make_policy(name, placement=placement))
        slow = stepped_result(system, tables, jobs, make_policy(name, placement=placement), name)
        assert slow.jobs.equals(fast.jobs), name
        assert slow.metrics["decisions"] == fast.metrics["decisions"], name


def test_placements_are_parsed_and_checked_against_the_system():
    assert Placement.parse("all") == Placement()
    assert Placement.parse("bandwidth").label == "bandwidth"
    assert Placement.parse("t+e").label == "e+t"
    assert list(Placement.parse("t+e").allowed(TYPES)) == [True, False, True]
    for bad in ("", "types", "e+", "e+e"):
        with pytest.raises(InputError, match="placement: expected all, bandwidth or"):
            Placement.parse(bad)
    with pytest.raises(InputError, match=r"expected accelerator types of the system.*got 'x'"):
        Placement.parse("e+x").allowed(TYPES)
