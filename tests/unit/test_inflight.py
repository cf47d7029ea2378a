"""Issue 27 item 8 on the in-memory stores: an ingest in flight is announced, and reconcile (repair or
check) leaves the episodes it is still embedding out of drift, while real drift is still found; a
crashed ingest's mark hides nothing once its holder is gone or its mark expired.

The reconcile runs from the ingest's own progress callback, after each batch of vectors: the moment a
reconcile in another process would see the graph written and the vectors half done. The real second
process, on both backend pairs, is tests/e2e/test_ingest_in_flight.py.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from taskzilla_sleep.core.host import pid_namespace
from taskzilla_sleep.core.models import Episode, Provenance
from taskzilla_sleep.memory import inflight
from taskzilla_sleep.memory.ingest import EMBED_BATCH, Ingestor, IngestProgress, Limits, WriteDiscipline
from taskzilla_sleep.memory.reconcile import ReconcileReport, reconcile
from taskzilla_sleep.rules.entities import EntityExtractor
from taskzilla_sleep.stores.memory import MemoryGraphStore, MemoryVectorStore
from taskzilla_sleep.stores.ports import IngestMark

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def lines(n: int, team: str = "platform", prefix: str = "msg") -> list[str]:
    return [
        json.dumps(
            {
                "id": f"{prefix}-{i:05d}",
                "team": team,
                "channel": "dev",
                "author": f"person{i % 7}",
                "text": f"{prefix} number {i}: the deploy of service {i % 13} is on the {i % 28 + 1}th",
                "ts": "2026-11-30T10:02:00+01:00",
                "provenance": "human",
            }
        )
        for i in range(n)
    ]


def stores() -> tuple[Ingestor, MemoryGraphStore, MemoryVectorStore]:
    g, v = MemoryGraphStore(), MemoryVectorStore()
    return Ingestor(g, v, EntityExtractor(), WriteDiscipline({}), Limits(), lambda: NOW, mark_ttl_s=60), g, v


def during(ingestor: Ingestor, rows: list[str], look: Callable[[IngestProgress], None]) -> IngestProgress:
    """Ingest ``rows``, calling ``look`` after each batch of vectors but the last."""
    progress = IngestProgress()

    def on_change(p: IngestProgress) -> None:
        if p.stored is not None and 0 < p.embedded < p.to_embed:
            look(p)

    progress.on_change = on_change
    ingestor.ingest_lines(rows, "big.jsonl", progress)
    return progress


def test_reconcile_during_an_ingest_finds_no_drift_and_embeds_nothing_twice() -> None:
    ing, g, v = stores()
    seen: list[tuple[ReconcileReport, ReconcileReport, int]] = []

    def look(p: IngestProgress) -> None:
        seen.append((reconcile(g, v, repair=False), reconcile(g, v, repair=True), p.to_embed - p.embedded))

    p = during(ing, lines(3 * EMBED_BATCH + 10), look)
    assert len(seen) == 3 and p.embedded == p.to_embed == 3 * EMBED_BATCH + 10
    for check, repair, left in seen:
        assert (check.drift, repair.drift, repair.repaired) == (0, 0, 0)  # before marks: `left` missing
        assert repair.in_flight == check.in_flight == left
    assert [left for _, _, left in seen] == [2 * EMBED_BATCH + 10, EMBED_BATCH + 10, 10]
    after = reconcile(g, v, repair=False)
    assert (after.drift, after.in_flight) == (0, 0)  # the ingest ended: nothing in flight any more


def test_real_drift_is_still_found_and_repaired_while_an_ingest_runs() -> None:
    ing, g, v = stores()
    ing.ingest_lines(lines(5, prefix="old"), "old.jsonl")
    v.delete("platform", "episodes", ["old-00002"])  # a vector deleted behind our back
    found: list[ReconcileReport] = []

    def look(p: IngestProgress) -> None:
        if not found:
            found.append(reconcile(g, v, repair=False))
            found.append(reconcile(g, v, repair=True))

    during(ing, lines(2 * EMBED_BATCH), look)
    check, repair = found
    assert (check.missing, repair.missing, repair.repaired) == (1, 1, 1)
    assert "old-00002" in v.present("platform", "episodes") and check.in_flight == EMBED_BATCH
    assert reconcile(g, v, repair=False).drift == 0


def test_an_ingest_into_one_team_hides_no_drift_of_another() -> None:
    ing, g, v = stores()
    ing.ingest_lines(lines(3, team="billing"), "billing.jsonl")
    v.delete("billing", "episodes", ["msg-00001"])
    found: list[ReconcileReport] = []
    during(ing, lines(2 * EMBED_BATCH, prefix="p"), lambda p: found.append(reconcile(g, v, repair=False)))
    billing, platform = found[0].by_team["billing"]["episodes"], found[0].by_team["platform"]["episodes"]
    assert (billing.missing_vectors, platform.missing_vectors) == (1, 0)
    assert (billing.in_flight, platform.in_flight) == (0, EMBED_BATCH)


def _stored_by(g: MemoryGraphStore, v: MemoryVectorStore, mark: IngestMark, n: int = 3) -> list[str]:
    """Episodes an ingest under ``mark`` stored in the graph, then died before any vector."""
    g.mark_ingest(mark)
    eps = [
        Episode(
            id=f"crashed-{i}",
            team="platform",
            channel="dev",
            author="lena",
            text=f"half-ingested message {i}",
            ts=NOW,
            provenance=Provenance.HUMAN,
            ingested_at=NOW,
        )
        for i in range(n)
    ]
    g.upsert_episodes(eps, [], ingest=mark.id)
    return [e.id for e in eps]


def _mark(**over: object) -> IngestMark:
    now = inflight.now_ms()
    base: dict[str, object] = {
        "id": "ingest_x",
        "holder": "ingest@elsewhere:1:abc",
        "host": "elsewhere",
        "pid_ns": None,
        "pid": 1,
        "teams": ("platform",),
        "started_at_ms": now - 1000,
        "expires_at_ms": now + 60_000,
    }
    return IngestMark(**(base | over))  # type: ignore[arg-type]


def test_a_killed_local_ingest_hides_nothing_once_its_process_is_gone() -> None:
    _, g, v = stores()
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=30)  # a process of this machine that no longer exists (kill -9 leaves the same)
    here = {"host": socket.gethostname(), "pid_ns": pid_namespace(), "pid": child.pid}
    ids = _stored_by(g, v, _mark(holder=f"ingest@{here['host']}:{child.pid}:dead", **here))
    check = reconcile(g, v, repair=False)
    assert (check.missing, check.in_flight) == (3, 0)  # at once, long before its mark would expire
    alive = _mark(
        id="ingest_alive", holder="ingest@me", host=socket.gethostname(), pid_ns=pid_namespace(), pid=os.getpid()
    )
    g.mark_ingest(alive)
    g.upsert_episodes(
        [e.model_copy(update={"id": f"{e.id}-b"}) for e in g.get_episodes(ids)], [], ingest="ingest_alive"
    )
    check = reconcile(g, v, repair=False)
    assert (check.missing, check.in_flight) == (3, 3)  # a live holder (this process): in flight


def test_a_mark_of_another_host_hides_its_episodes_until_it_expires() -> None:
    _, g, v = stores()
    mark = _mark()
    _stored_by(g, v, mark)
    assert reconcile(g, v, repair=False).in_flight == 3  # its pid means nothing here: only its expiry counts
    # Its holder stopped renewing long enough ago (allowing for another host's clock): it is drift now.
    g.mark_ingest(replace(mark, expires_at_ms=inflight.now_ms() - inflight.SKEW_MS - 1))
    expired = reconcile(g, v, repair=False)
    assert (expired.missing, expired.in_flight) == (3, 0)
    repaired = reconcile(g, v, repair=True)
    assert repaired.repaired == 3 and reconcile(g, v, repair=False).drift == 0


def test_the_mark_ends_with_the_ingest_also_when_it_fails() -> None:
    ing, g, v = stores()
    ing.ingest_lines(lines(3), "a.jsonl")
    (m,) = g.ingest_marks(0)
    assert m.ended and m.teams == ("platform",) and m.holder.startswith("ingest@")
    assert m.expires_at_ms <= inflight.now_ms()
    assert g.ingest_episodes("platform", [m.id]) == {"msg-00000", "msg-00001", "msg-00002"}
    v.fail_next = RuntimeError("chroma went away")
    with pytest.raises(RuntimeError, match="went away"):
        ing.ingest_lines(lines(2, prefix="b"), "b.jsonl")
    assert all(x.ended for x in g.ingest_marks(0)) and len(g.ingest_marks(0)) == 2
    present = ing.ingest_lines(lines(3), "a.jsonl")  # nothing new: nothing announced
    assert present.new == 0 and len(g.ingest_marks(0)) == 2
