"""Which jobs fill the agent's candidate slots (`relmas.rl.candidates`), on hand-made states."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from relmas.rl.candidates import deficit, pick_candidates
from relmas.sim import Engine, access
from tests.test_firm import jobs_frame, one_instance

# On one instance of type x, model A is 2 s of work, model B 1 s; every job arrives at 0.
# (tenant, model, arrival, deadline): feasible iff the deadline leaves room for the work.
JOBS = [
    ("u", "A", 0.0, 10.0),  # 0: feasible, 2 s left, the latest deadline
    ("u", "B", 0.0, 5.0),  # 1: feasible, 1 s
    ("v", "B", 0.0, 3.0),  # 2: feasible, 1 s, the earliest feasible deadline
    ("v", "A", 0.0, 1.0),  # 3: hopeless, 2 s left
    ("u", "B", 0.0, 0.5),  # 4: hopeless, 1 s left: the hopeless one with the least work
    ("v", "A", 0.0, 4.0),  # 5: feasible, 2 s
    ("v", "B", 0.0, 6.0),  # 6: feasible, 1 s: ties with 1 and 2 on work, a higher id
]


def first_decision(rows, targets=None) -> Engine:
    system, tables = one_instance()
    jobs = jobs_frame(rows, False)
    if targets is not None:
        jobs = jobs.with_columns(target=pl.Series(targets, dtype=pl.Float64()))
    engine = Engine(system, tables, jobs)
    engine.next_decision()
    return engine


def job_ids(engine: Engine, slots: np.ndarray) -> list[int]:
    """The job ids of the slots' internal job indices (-1 stays -1)."""
    ids = engine.jobs["job_id"].to_list()
    return [ids[job] if job >= 0 else -1 for job in slots.tolist()]


def test_the_slots_rank_feasible_jobs_by_work_and_by_deadline_and_keep_one_hopeless():
    engine = first_decision(JOBS)
    slots = np.full(2 + 2 * 2, -7, dtype=np.int64)  # two candidates per ranking
    reference = int(np.flatnonzero(engine.jobs["job_id"].to_numpy() == 5)[0])
    queue, feasible, work = pick_candidates(
        engine.kernel_tables, engine.state, reference, slots, np.zeros(0)
    )
    # reference, shortest (ties of work: lower id first), earliest deadlines, hopeless
    assert job_ids(engine, slots) == [5, 1, 2, 2, 5, 4]
    assert (queue, feasible, work) == (7, 5, pytest.approx(2 + 1 + 1 + 2 + 1))


def test_rankings_with_fewer_jobs_than_slots_leave_the_rest_empty():
    engine = first_decision([JOBS[3], JOBS[1]])  # one hopeless, one feasible job
    slots = np.zeros(2 + 2 * 3, dtype=np.int64)
    queue, feasible, work = pick_candidates(
        engine.kernel_tables, engine.state, -1, slots, np.zeros(0)
    )
    assert job_ids(engine, slots) == [-1, 1, -1, -1, 1, -1, -1, 0]
    assert (queue, feasible, work) == (2, 1, 1.0)


def test_the_deficit_slots_rank_tenants_furthest_below_target_first_then_by_work():
    """Tenant u is at rate 0.5 with target 0.9 (deficit 0.4), v at 0.9 with target 0.95 (0.05);
    a job without a target ranks after every job with one."""
    rows = [("u", "A", 0.0, 10.0), ("v", "B", 0.0, 10.0), ("u", "B", 0.0, 10.0)]
    rows += [("w", "B", 0.0, 10.0), ("v", "A", 0.0, 10.0)]
    engine = first_decision(rows, targets=[0.9, 0.95, 0.9, None, 0.95])
    rates = np.zeros(access.tenant_count(engine.state))
    rates[engine.tenants.index("u")] = 0.5
    rates[engine.tenants.index("v")] = 0.9
    rates[engine.tenants.index("w")] = 0.0
    state = engine.state
    gaps = [deficit(state, job, rates) for job in range(5)]
    by_id = dict(zip(engine.jobs["job_id"].to_list(), gaps, strict=True))
    assert by_id[0] == pytest.approx(0.4) and by_id[1] == pytest.approx(0.05)
    assert np.isnan(by_id[3])
    slots = np.zeros(2 + 3 * 4, dtype=np.int64)  # four candidates per ranking
    pick_candidates(engine.kernel_tables, state, -1, slots, rates)
    # u's jobs (least work first: job 2's 1 s, then job 0's 2 s), v's (1, then 4); w's last is cut
    assert job_ids(engine, slots)[-4:] == [2, 0, 1, 4]
