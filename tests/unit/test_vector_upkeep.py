"""The rebuild trigger: deleted slots over a share of the live ones, once, on the in-memory store."""

from __future__ import annotations

import pytest

from taskzilla_sleep.core.errors import ConfigError
from taskzilla_sleep.core.settings import load_settings
from taskzilla_sleep.memory.vector_upkeep import heavy, rebuild_heavy
from taskzilla_sleep.stores.memory.vectors import MemoryVectorStore


@pytest.mark.parametrize(
    ("live", "deleted", "ratio", "expected"),
    [(10, 5, 0.5, False), (10, 6, 0.5, True), (0, 0, 0.5, False), (0, 1, 0.5, True), (100, 99, 1.0, False)],
)
def test_heavy_is_more_deleted_than_the_share_of_live(live: int, deleted: int, ratio: float, expected: bool) -> None:
    assert heavy(live, deleted, ratio) is expected


def _store(live: int, deleted: int) -> MemoryVectorStore:
    store = MemoryVectorStore()
    ids = [f"e{i}" for i in range(live + deleted)]
    store.upsert("alpha", "episodes", ids, [f"text {i}" for i in ids], [{} for _ in ids])
    store.upsert("alpha", "patterns", ["p"], ["a pattern"], [{}])
    store.delete("alpha", "episodes", [*ids[:deleted], "unknown"])  # an unknown id is no dead slot
    return store


def test_only_the_heavy_collection_is_rebuilt_and_a_second_pass_does_nothing() -> None:
    store = _store(live=4, deleted=3)
    assert store.health("alpha", "episodes").__dict__ == {"live": 4, "deleted": 3, "generation": 0}

    assert rebuild_heavy(store, "alpha", 0.5) == 1
    assert store.health("alpha", "episodes").__dict__ == {"live": 4, "deleted": 0, "generation": 1}
    assert store.health("alpha", "patterns").generation == 0
    assert rebuild_heavy(store, "alpha", 0.5) == 0  # the same night again: nothing left to drop
    assert store.present("alpha", "episodes") == {"e3", "e4", "e5", "e6"}


def test_a_light_collection_or_no_ratio_rebuilds_nothing() -> None:
    store = _store(live=10, deleted=5)
    assert rebuild_heavy(store, "alpha", 0.5) == 0
    assert rebuild_heavy(_store(live=1, deleted=9), "alpha", None) == 0
    assert rebuild_heavy(store, "nobody", 0.5) == 0


def test_the_ratio_is_a_setting_with_a_packaged_default_and_is_checked() -> None:
    assert load_settings(env={}).vector.rebuild_deleted_ratio == 0.5
    off = load_settings(env={"TASKZILLA__VECTOR__REBUILD_DELETED_RATIO": "null"})
    assert off.vector.rebuild_deleted_ratio is None
    with pytest.raises(ConfigError, match="rebuild_deleted_ratio = -1 .*greater than 0"):
        load_settings(env={"TASKZILLA__VECTOR__REBUILD_DELETED_RATIO": "-1"})
