"""The fast subset of the hard-case harness: weeks w01 and w04, offline provider, FalkorDB + Chroma embedded.

It checks that the harness produces every figure and asserts only the invariants that hold on
today's code and must hold forever; the quality targets (BENCHMARKS.md, Judgement) that today's code misses are
printed (the table shows in the test log), not asserted. Tighten the assertions as the code improves.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ops.bench import hard_cases
from ops.bench import hard_score as hs
from taskzilla_sleep.stores.ports import Embedder

WEEKS = ("w01", "w04")


def test_two_hard_case_weeks_offline(
    tmp_path: Path, offline_embedder: Embedder, capsys: pytest.CaptureFixture[str]
) -> None:
    result = hard_cases.run(WEEKS, ["offline"], tmp_path, embedder=offline_embedder)
    with capsys.disabled():
        print("\n" + hard_cases.render(result, failures=0))
    r = result["providers"]["offline"]

    # Every figure is there, with a denominator: the corpus has each class in these two weeks.
    assert set(r["headline"]) == set(hard_cases.LABELS)
    # (Typed shares are of what was flagged: none when nothing of that class was.)
    assert all(v is not None for k, v in r["headline"].items() if not k.endswith("_typed")), r["headline"]
    assert r["headline"]["changes_typed"] is not None
    assert set(r["by_class"]) == set(hs.CLASSES)
    c = r["counts"]
    assert c["messages"] == sum(len(hard_cases.load_week(w).episodes) for w in WEEKS) == 320
    assert c["stored"] + c["skipped"] == c["messages"]
    assert c["habits"] == 6 and c["changes"] == 4 and c["disagreements"] == 2 and c["recall_questions"] == 10
    assert {"change amount", "change time", "change count", "change named"} <= set(r["by_slot"])

    # Invariants (hold today, must hold forever).
    for w in WEEKS:
        assert r["weeks"][w]["nights_ok"], r["weeks"][w]["night_errors"]
    assert c.get("episodes_lost", 0) == 0  # a stored message is live, or gone with a tombstone
    draft = r["by_class"]["draft"]
    assert draft["evidence"] == draft["absorbed"] == draft["retired"] == 0  # ai-drafts are never learned from
    assert c.get("false_contradictions", 0) == 0
    assert c.get("changes_lost_after_decay", 0) == 0
    # The guards (taskzilla_sleep/rules/beliefs/): the bot never gets its own drafts back, nor a message
    # that reads as an order to it, from recall, the patterns or MEMORY.md.
    assert c.get("drafts_in_recall", 0) == 0
    assert c.get("injection_effects", 0) == 0
    # Targets these two weeks meet since the topic, value and person slots: no pattern
    # holds two values of one belief, and what is learned is a belief.
    assert c.get("silent_merges", 0) == 0
    assert r["headline"]["belief_precision"] >= 0.95, r["headline"]
