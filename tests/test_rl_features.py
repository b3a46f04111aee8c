"""The observation's layout (`relmas.rl.features`): every feature has one place of its own, and the
jitted readers agree with the layout's."""

from __future__ import annotations

import numpy as np
import pytest

from relmas.rl.features import (
    GLOBAL_FEATURES,
    PAIR_BASE_FEATURES,
    SERVICE_FEATURES,
    SERVICE_GLOBAL_FEATURES,
    SLOT_BASE_FEATURES,
    TYPE_FEATURES,
    GlobalFeature,
    Layout,
    ServiceFeature,
    ServiceGlobalFeature,
    SlotFeature,
    TypeFeature,
    cut_finish_index,
    global_index,
    idle_instances,
    pair_index,
    queue_length,
    type_index,
)

LAYOUTS = [Layout(4, 2, 3), Layout(6, 3, 5, variants=3), Layout(8, 2, 3, service=True)]
LAYOUTS += [Layout(8, 3, 4, variants=2, service=True)]


def every_index(layout: Layout) -> list[int]:
    """Each feature's index, named through the layout's own methods."""
    cut_share = 1 if layout.variants > 1 else 0
    indices = []
    for slot in range(layout.slots):
        indices += [layout.slot_feature(slot, f) for f in SlotFeature]
        indices += [layout.slot_feature(slot, SLOT_BASE_FEATURES)] * cut_share
        if layout.service:
            indices += [layout.service_feature(slot, f) for f in ServiceFeature]
    for kind in range(layout.types):
        indices += [layout.type_feature(kind, f) for f in TypeFeature]
    for slot in range(layout.slots):
        for kind in range(layout.types):
            indices += [layout.pair_feature(slot, kind, f) for f in range(PAIR_BASE_FEATURES)]
            for variant in range(1, layout.variants):
                finish = layout.cut_finish_feature(slot, kind, variant)
                indices += [finish, finish + 1]  # finish, extra traffic
    indices += [layout.global_feature(f) for f in GlobalFeature]
    if layout.service:
        indices += [layout.service_global_feature(f) for f in ServiceGlobalFeature]
    return indices


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_feature_has_its_own_place_and_they_fill_the_observation(layout):
    indices = every_index(layout)
    assert indices == list(range(layout.size))  # in the documented order, no gap, no overlap
    per_slot = SLOT_BASE_FEATURES + (layout.variants > 1) + SERVICE_FEATURES * layout.service
    per_pair = PAIR_BASE_FEATURES + 2 * (layout.variants - 1)
    globals_ = GLOBAL_FEATURES + SERVICE_GLOBAL_FEATURES * layout.service
    expected = layout.slots * per_slot + layout.types * TYPE_FEATURES
    assert layout.size == expected + layout.pairs * per_pair + globals_


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_jitted_readers_index_as_the_layout(layout):
    sizes = layout.sizes
    for kind in range(layout.types):
        assert type_index(sizes, kind, 1) == layout.type_feature(kind, TypeFeature.IDLE)
    for slot in range(layout.slots):
        for kind in range(layout.types):
            assert pair_index(sizes, slot, kind, 2) == layout.pair_feature(slot, kind, 2)
            for variant in range(1, layout.variants):
                got = cut_finish_index(sizes, slot, kind, variant)
                assert got == layout.cut_finish_feature(slot, kind, variant)
    assert global_index(sizes, 3) == layout.global_feature(3)


def test_actions_are_pairs_then_variants_then_wait():
    layout = Layout(slots=3, types=2, instances=4, variants=3)
    assert layout.actions == 3 * 2 * 3 + 1
    for slot in range(3):
        for kind in range(2):
            for variant in range(3):
                action = layout.action(slot, kind, variant)
                assert layout.slot_of(action) == slot and layout.type_of(action) == kind
                assert layout.variant_of(action) == variant
    assert layout.variant_of(layout.actions - 1) == 0
    assert sorted(layout.action(s, k, v) for s in range(3) for k in range(2) for v in range(3)) == (
        list(range(layout.actions - 1))
    )


def test_the_queue_and_the_idle_instances_read_back_from_the_globals():
    layout = Layout(slots=4, types=2, instances=5)
    obs = np.zeros(layout.size, dtype=np.float32)
    obs[layout.global_feature(GlobalFeature.QUEUE)] = np.log1p(7)
    obs[layout.global_feature(GlobalFeature.IDLE)] = 3 / 5
    assert queue_length(obs, layout.sizes) == 7
    assert idle_instances(obs, layout.sizes) == 3


def test_each_row_reads_its_slot_type_pair_and_the_globals():
    layout = Layout(slots=2, types=2, instances=2)
    rows = layout.rows
    assert rows.shape == (layout.pairs + 1, sum(layout.row_blocks))
    slot, kind = 1, 0
    row = rows[slot * layout.types + kind]
    first_pair = layout.pair_feature(slot, kind, 0)
    assert row[0] == layout.slot_feature(slot, 0)
    assert row[layout.slot_features] == layout.type_feature(kind, TypeFeature.INSTANCES)
    assert row[layout.slot_features + TYPE_FEATURES] == first_pair
    assert row[-1] == layout.size  # 0: not wait
    assert rows[-1, -1] == layout.size + 1  # 1: wait
