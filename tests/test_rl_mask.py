"""Which of the agent's actions are valid (`relmas.rl.mask`), on hand-made states."""

from __future__ import annotations

import numpy as np
import pytest

from relmas.policies.triage import scan_instances
from relmas.rl.mask import build_mask
from relmas.sim import CostTables, Engine, load_system
from tests.synthetic import cost_frame
from tests.test_firm import jobs_frame

# Two types, one instance each: model A is fastest on x (1 s, against 2 s on y) and moves 4 GB
# there, model B fastest on y (1 s, against 3 s on x) and moves nothing; 8 GB/s shared.
COSTS = cost_frame(
    {
        "A": {"x": [(1.0, 4_000_000_000, 0.0)], "y": [(2.0, 4_000_000_000, 0.0)]},
        "B": {"x": [(3.0, 0, 0.0)], "y": [(1.0, 0, 0.0)]},
    }
)
SYSTEM = load_system(
    {"instances": [{"name": "x", "count": 1}, {"name": "y", "count": 1}], "dram_gbps": 8.0}
)
SLOTS, TYPES = 4, 2
WAIT = SLOTS * TYPES  # the last action


def engine_at_first_decision(models: list[str]) -> Engine:
    """Jobs of `models` ready at 0 and one more arriving at 5 s (waiting cannot deadlock)."""
    rows = [("u", model, 0.0, 100.0) for model in models] + [("u", "B", 5.0, 100.0)]
    engine = Engine(SYSTEM, CostTables.from_frame(COSTS, ["x", "y"]), jobs_frame(rows, False))
    engine.next_decision()
    return engine


def mask_of(
    engine: Engine,
    slots: list[int],
    idle_of_type: list[int],
    can_wait: bool = True,
    teacher_waits: bool = False,
    running_demand: float | None = None,
) -> np.ndarray:
    if running_demand is None:
        running_demand = scan_instances(engine.state)[0]
    mask = np.ones(SLOTS * TYPES + 1, dtype=bool)  # every entry is written
    build_mask(
        engine.kernel_tables,
        engine.kernel_pieces,
        engine.state,
        np.array(slots, dtype=np.int64),
        np.array(idle_of_type, dtype=np.int64),
        can_wait,
        teacher_waits,
        running_demand,
        mask,
    )
    return mask


def valid(mask: np.ndarray) -> list[int]:
    return np.flatnonzero(mask).tolist()


def test_every_filled_slot_is_valid_on_every_type_with_an_idle_instance():
    engine = engine_at_first_decision(["A", "B"])
    # slot 0 holds job 0, slot 2 job 1: pairs (slot x types + type)
    assert valid(mask_of(engine, [0, -1, 1, -1], [1, 1])) == [0, 1, 4, 5]
    assert valid(mask_of(engine, [0, -1, 1, -1], [0, 1])) == [1, 5]


@pytest.mark.parametrize(
    "can_wait, teacher_waits, running_demand, waits",
    [
        (True, False, 0.0, False),  # a candidate starts on its fastest type, within bandwidth
        (True, True, 0.0, True),  # the teacher waits
        (False, True, 0.0, False),  # waiting could deadlock: never
        (True, False, 1e12, True),  # every candidate would oversubscribe the bandwidth
        (False, False, 1e12, False),
    ],
)
def test_wait_is_valid_only_when_safe_and_the_teacher_or_the_candidates_hold_back(
    can_wait, teacher_waits, running_demand, waits
):
    engine = engine_at_first_decision(["A", "B"])
    mask = mask_of(engine, [0, -1, 1, -1], [1, 1], can_wait, teacher_waits, running_demand)
    assert mask[WAIT] == waits
    assert valid(mask[:WAIT]) == [0, 1, 4, 5]  # the pairs do not depend on it


@pytest.mark.parametrize("model, waits", [("A", True), ("B", False)])
def test_wait_is_valid_when_no_candidate_could_start_on_its_fastest_type(model, waits):
    """x runs job 0 (A): a ready A could start only on y, its slower type, so the agent may wait
    for x; a ready B has its fastest type y idle, and starts within the bandwidth."""
    engine = engine_at_first_decision(["A", model])
    engine.step([(0, 0)])  # job 0 on x
    engine.next_decision()
    mask = mask_of(engine, [1, -1, -1, -1], [0, 1])
    assert valid(mask[:WAIT]) == [1]
    assert mask[WAIT] == waits
