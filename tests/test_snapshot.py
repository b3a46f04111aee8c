"""Engine snapshots: restoring one puts back everything a caller of the engine can observe.

A search over the engine's decisions (try a branch, go back, try another) relies on it: after
`restore`, the same decisions must give the same decision points, finished-job reports, tenant
counters, results and recorded timeline as if the abandoned branches had never been taken (firm
deadlines' drops included).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relmas.sim import Engine
from tests.synthetic import contended_case

Decision = list[tuple[int, int, int]]


def random_decision(engine: Engine, rng: np.random.Generator) -> Decision | None:
    """A random legal decision at the engine's next decision point (None at the end): some ready
    jobs on some idle instances, layers cut at random, or a wait where one is allowed."""
    view = engine.next_decision()
    if view is None:
        return None
    if view.can_wait and rng.random() < 0.2:
        return []
    count = int(rng.integers(1, min(view.ready_jobs.size, view.idle_accelerators.size) + 1))
    picked = rng.choice(view.ready_jobs.size, count, replace=False)
    accelerators = rng.choice(view.idle_accelerators, count, replace=False)
    variants = len(engine.split_variants)
    return [
        (
            int(view.ready_jobs[i]),
            int(accelerator),
            int(rng.integers(0, variants)) if view.pieces_left[i] == 0 else 0,
        )
        for i, accelerator in zip(picked, accelerators, strict=True)
    ]


def observed(engine: Engine, report: bool) -> tuple:
    """What a caller sees at the current decision point (after `next_decision`), with the jobs
    finished since the last report if `report`."""
    view = engine.next_decision()
    finished, met = engine.pop_finished() if report else (np.zeros(0, np.int64), np.zeros(0))
    point = None
    if view is not None:
        point = (
            view.now,
            sorted(view.ready_jobs.tolist()),
            view.idle_accelerators.tolist(),
            view.pieces_left[np.argsort(view.ready_jobs)].tolist(),
            view.busy_left_s.tolist(),
            view.can_wait,
            view.tenant_arrived.tolist(),
            view.tenant_met.tolist(),
            view.tenant_missed.tolist(),
        )
    return point, finished.tolist(), met.tolist(), engine.decisions, engine.finished


def play(engine: Engine, decisions: list[Decision]) -> list[tuple]:
    """Take `decisions` in turn; what was observed before each and after the last, finished jobs
    reported at every third decision point and at the end."""
    seen = []
    for index, decision in enumerate(decisions):
        seen.append(observed(engine, report=index % 3 == 2))
        engine.step(decision)
    seen.append(observed(engine, report=True))
    return seen


def replay(engine: Engine, decisions: list[Decision]) -> None:
    """Take `decisions` in turn, observing nothing (as `explore` took them)."""
    for decision in decisions:
        engine.next_decision()
        engine.step(decision)


def explore(engine: Engine, rng: np.random.Generator, limit: int) -> list[Decision]:
    """Up to `limit` random decisions taken (fewer if the simulation ends)."""
    taken = []
    while len(taken) < limit and (decision := random_decision(engine, rng)) is not None:
        engine.step(decision)
        taken.append(decision)
    return taken


def outcome(engine: Engine) -> tuple:
    """The result, NaN (a dropped job's times) as None, so that equal outcomes compare equal."""
    result = engine.result("random")
    timeline = result.timeline
    return (
        result.jobs.sort("job_id").fill_nan(None).to_dicts(),
        {name: None if value != value else value for name, value in result.metrics.items()},
        None if timeline is None else timeline.to_dicts(),
        engine.state.tc.tolist(),
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    record=st.booleans(),
    pieces=st.booleans(),
    firm=st.booleans(),
    prefix=st.integers(0, 30),
    branch=st.integers(0, 30),
)
def test_restore_replays_every_branch_as_if_the_others_had_not_been_taken(
    seed, record, pieces, firm, prefix, branch
):
    """Random decisions, a snapshot, more decisions (branch B, with a second snapshot inside it),
    back to the first snapshot for other decisions (branch A), then back into B: each branch
    observes what an engine that only ever took it observes, results and timeline included."""
    system, tables, jobs = contended_case(
        seed, 12, {"a": 3, "b": 5}, 4.0, (1.0, 3.0), splits=(2,) if pieces else ()
    )
    tenants = pl.Series(["u", "v", "w"] * 4)
    jobs = jobs.with_columns(tenant=tenants, firm=pl.lit(firm))
    rng = np.random.default_rng(seed)

    def new_engine() -> Engine:
        return Engine(system, tables, jobs, record=record, record_buffer=4)  # flushes often

    engine = new_engine()
    start = explore(engine, rng, prefix)
    first = engine.snapshot()
    b_head = explore(engine, rng, branch)
    second = engine.snapshot()
    b_tail = explore(engine, rng, 10_000)
    b_outcome = outcome(engine)

    engine.restore(first)
    a_decisions = explore(engine, rng, 10_000)
    engine.restore(first)
    a_seen = play(engine, a_decisions)
    a_outcome = outcome(engine)
    engine.restore(second)
    b_seen = play(engine, b_tail)
    assert outcome(engine) == b_outcome

    reference = new_engine()
    replay(reference, start)
    assert play(reference, a_decisions) == a_seen
    assert outcome(reference) == a_outcome
    reference = new_engine()
    replay(reference, start + b_head)
    assert play(reference, b_tail) == b_seen


def test_finished_jobs_are_reported_again_after_going_back():
    """The issue's case: jobs that finished after a snapshot and were reported are reported again
    once the engine went back before them and finished them anew; decisions go back too."""
    system, tables, jobs = contended_case(3, 6, {"a": 2}, 4.0, (1.0, 3.0))
    engine = Engine(system, tables, jobs)
    start = engine.snapshot()
    decisions = explore(engine, np.random.default_rng(0), 10_000)
    assert sorted(engine.pop_finished()[0].tolist()) == list(range(6))
    engine.restore(start)
    assert engine.decisions == 0
    replay(engine, decisions)
    assert engine.next_decision() is None
    assert sorted(engine.pop_finished()[0].tolist()) == list(range(6))
    assert engine.decisions == len(decisions)


def test_a_snapshot_is_cheap_and_runs_jitted_loops_without_recording():
    """Snapshots leave the timeline buffer out (kilobytes per snapshot, not the buffer's 1 MiB),
    so a jitted search can simulate from one; another engine's snapshot is refused."""
    system, tables, jobs = contended_case(5, 8, {"a": 2, "b": 3}, 4.0, (1.0, 3.0))
    engine = Engine(system, tables, jobs, record=True)
    snapshot = engine.snapshot()
    assert snapshot.record.size == 0
    assert sum(array.nbytes for array in snapshot) < 4096
    other = Engine(system, tables, jobs.head(5))
    with pytest.raises(ValueError, match="another engine"):
        other.restore(snapshot)


def test_a_snapshot_taken_mid_run_restores_its_timeline_exactly():
    """The recorded timeline after going back holds the rows recorded before the snapshot, none
    of the abandoned branch's."""
    system, tables, jobs = contended_case(7, 10, {"a": 3, "b": 2}, 4.0, (1.0, 3.0))
    rng = np.random.default_rng(1)
    engine = Engine(system, tables, jobs, record=True, record_buffer=4)
    explore(engine, rng, 6)
    middle = engine.snapshot()
    rest = explore(engine, rng, 10_000)
    whole = engine.timeline()
    engine.restore(middle)
    before = engine.timeline()
    assert 0 < before.height < whole.height
    assert whole.head(before.height).equals(before)
    play(engine, rest)
    assert engine.timeline().equals(whole)
