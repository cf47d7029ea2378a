"""Nothing half-written, nothing silently dropped, nothing stored that stops a night — on both backend pairs.

- a backend error in the middle of a file leaves neither store holding any of it, and re-ingesting works;
- characters a backend cannot carry are refused identically by both graph adapters, before sending;
- an id already stored with other content is an error, even after the episode's text was dropped;
- a stored item whose properties cannot be read is quarantined; recall, reconcile and the night go on.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from taskzilla_sleep.app import Services, build
from taskzilla_sleep.core.errors import StoreError
from taskzilla_sleep.core.models import (
    Contradiction,
    Episode,
    EpisodeIn,
    EpisodeStatus,
    Pattern,
    PatternKind,
    PatternStatus,
    Provenance,
)
from taskzilla_sleep.core.settings import load_settings
from taskzilla_sleep.memory.ingest import EpisodeFileError
from taskzilla_sleep.memory.recall import recall
from taskzilla_sleep.memory.reconcile import reconcile
from taskzilla_sleep.stores import queries
from taskzilla_sleep.stores.codec import contradiction_props, episode_props, pattern_props
from taskzilla_sleep.stores.cypher import CypherGraphStore
from taskzilla_sleep.stores.ports import Retirement
from tests.contract.test_api import client
from tests.contract.test_api import ep as api_ep
from tests.contract.test_cycle import NIGHT, TEAM, Stack

YEAR_0 = int(datetime.fromisoformat("0001-01-01T00:00:00+01:00").timestamp() * 1000)  # year 0 in UTC
YEAR_10000 = int(datetime.fromisoformat("9999-12-31T23:59:59-05:00").timestamp() * 1000)


def big_file(n: int = 600) -> list[str]:
    """More lines than one 500-row batch; each mentions its own person, so each creates an entity."""
    return [
        json.dumps(
            {
                "team": TEAM,
                "channel": "dev",
                "author": f"author{i % 7}",
                "text": f"note {i}: @person{i} reviews the billing-api change",
                "ts": (NIGHT - timedelta(hours=1, seconds=i)).isoformat(),
                "provenance": "human",
            }
        )
        for i in range(n)
    ]


def fail_writes(stack: Stack, monkeypatch: pytest.MonkeyPatch, when: Any) -> None:
    """The graph's ``_write`` raises a backend error on every call ``when(nth_call_with_rows, query)`` picks."""
    real = stack.graph._write
    seen = [0]

    def write(query: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        if params and "rows" in params:
            seen[0] += 1
        if when(seen[0] if params and "rows" in params else 0, query):
            raise StoreError(f"{stack.graph.backend}: injected failure")
        return real(query, params)

    monkeypatch.setattr(stack.graph, "_write", write)


def test_an_error_in_the_second_batch_leaves_nothing_and_a_rerun_stores_it_all(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = stack.snapshot()
    lines = big_file()
    fail_writes(stack, monkeypatch, lambda nth, _q: nth == 2)
    with pytest.raises(StoreError, match="injected failure"):
        stack.ingestor(NIGHT).ingest_lines(lines, "big.jsonl")
    assert stack.snapshot() == empty  # no episode, no staged node, no entity, no vector

    monkeypatch.undo()
    report = stack.ingestor(NIGHT).ingest_lines(lines, "big.jsonl")
    assert (report.new, report.present) == (600, 0)
    assert stack.graph.counts().episodes == {"raw": 600}
    assert stack.vectors.count(TEAM, "episodes") == 600
    nodes = stack.graph.snapshot()["nodes"]
    assert {label for n in nodes for label in n["labels"]} == {"Episode", "Entity"}
    assert not [n for n in nodes if {"stage", "staged_id", "staged_status", "staged_at"} & set(n["props"])]
    assert stack.graph.counts().entities == 600 + 7 + 1  # @person{i}, 7 authors, the channel


def test_a_stage_left_behind_is_invisible_and_dropped_once_stale(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    stack.ingestor(NIGHT).ingest_lines(big_file(3), "first.jsonl")  # entities another file shares
    before = stack.snapshot()
    lines = big_file(600)[3:]
    # The commit fails and so does the cleanup (the backend went away): the stage stays behind.
    q = queries.load("episodes")
    gone = {q["commit_stage"], q["drop_staged"]}

    def fail_and_leave_a_stage() -> None:
        fail_writes(stack, monkeypatch, lambda _nth, q: q in gone)
        with pytest.raises(StoreError, match="injected failure"):
            stack.ingestor(NIGHT).ingest_lines(lines, "big.jsonl")
        monkeypatch.undo()

    fail_and_leave_a_stage()
    g = stack.graph
    left = [n for n in g.snapshot()["nodes"] if n["labels"] == ["Episode"] and n["props"].get("status") == "staged"]
    assert len(left) == 597  # left behind, staged
    staged = [Episode.from_input(EpisodeIn.model_validate_json(x), NIGHT).id for x in lines]
    assert g.get_episodes(staged) == [] and g.existing_episodes(staged) == {}  # no reader sees it
    assert g.counts().episodes == {"raw": 3} and len(g.episodes_by_status(TEAM, ["raw"])) == 3
    assert len(g.live_ids(TEAM, "episode")) == 3 and stack.vectors.count(TEAM, "episodes") == 3
    assert reconcile(g, stack.vectors).stale_stages == 0  # touched a moment ago: maybe still writing
    time.sleep(0.05)
    assert g.drop_stale_stages(older_than_s=0) == 1
    assert stack.snapshot() == before  # its episodes, links and the entities only it created are gone

    fail_and_leave_a_stage()  # a leftover holding the same ids does not block them
    assert stack.ingestor(NIGHT).ingest_lines(lines, "big.jsonl").new == 597
    time.sleep(0.05)
    assert g.drop_stale_stages(older_than_s=0) == 1  # the entities the file now uses stay
    nodes = g.snapshot()["nodes"]
    assert not [n for n in nodes if {"stage", "staged_id", "staged_status", "staged_at"} & set(n["props"])]
    counts = g.counts()
    assert (counts.episodes, counts.entities, counts.relationships) == ({"raw": 600}, 600 + 7 + 1, 600 * 3)
    assert stack.vectors.count(TEAM, "episodes") == 600


def test_an_id_reused_with_other_content_is_refused_even_after_its_text_was_dropped(stack: Stack) -> None:
    def line(**over: str) -> str:
        obj = {"id": "msg-1", "team": TEAM, "channel": "dev", "author": "martin", "text": "keep PRs small"}
        return json.dumps(obj | {"ts": "2026-11-27T10:00:00+01:00", "provenance": "human"} | over)

    ing = stack.ingestor(NIGHT)
    assert ing.ingest_lines([line()], "a.jsonl").new == 1
    stack.graph.retire_episodes([Retirement("msg-1", EpisodeStatus.RETIRED, NIGHT, "absorbed", "p1")])
    before = stack.snapshot()
    other = [line(id="msg-2", text="a new message"), line(text="we deploy on fridays now")]
    with pytest.raises(EpisodeFileError) as info:
        ing.ingest_lines(other, "b.jsonl")
    assert str(info.value) == (
        "b.jsonl:2: field 'id': id 'msg-1' is already stored with other content: text 'we deploy on fridays now' "
        "(the stored text was dropped when the episode was retired)"
    )
    for text in ("keep PRs small", "we deploy on fridays now"):  # another team: nothing of the stored message
        with pytest.raises(EpisodeFileError) as info:
            ing.ingest_lines([line(team="ops", text=text)], "b.jsonl")
        assert str(info.value) == (
            "b.jsonl:1: field 'id': id 'msg-1' is already used by another message (ids are unique per store: "
            "prefix a connector's ids, e.g. tg-<chat>-<message>, or leave id out)"
        )
    assert stack.snapshot() == before  # msg-2 was not stored either
    again = ing.ingest_lines([line()], "a.jsonl")  # the same message again: a no-op
    assert (again.new, again.present) == (0, 1)
    assert stack.snapshot() == before


@pytest.fixture(params=["falkordb", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def cypher_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CypherGraphStore]:
    store: CypherGraphStore
    if request.param == "falkordb":
        from taskzilla_sleep.stores.falkordb import open_falkordb

        store = open_falkordb(tmp_path / "falkordb")
    else:
        from taskzilla_sleep.stores.neo4j import open_neo4j
        from tests.neo4j_service import neo4j_auth

        store = open_neo4j(request.getfixturevalue("neo4j_uri"), neo4j_auth())
        store.delete_all()
    store.ensure_schema()
    try:
        yield store
    finally:
        store.delete_all()
        store.close()


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("a\x00b", "'p.t': character 2 is U+0000 (NUL)"),
        ("x\ud800", "'p.t': character 2 is U+D800 (a lone surrogate)"),
        (float("nan"), "'p.t': nan is not a finite number"),
        (2**70, "'p.t': an integer beyond 64 bits"),
    ],
)
def test_both_adapters_refuse_what_a_backend_cannot_carry_before_sending(
    cypher_store: CypherGraphStore, value: object, why: str
) -> None:
    with pytest.raises(StoreError, match=rf"refused to send parameter {re.escape(why)}.*; the query was not sent"):
        cypher_store.executor.write("CREATE (n:Probe) SET n += $p", {"p": {"t": value, "ok": 1}})
    assert cypher_store.executor.read("MATCH (n:Probe) RETURN count(n) AS n") == [{"n": 0}]


def test_every_other_character_round_trips_on_both_adapters(cypher_store: CypherGraphStore) -> None:
    awkward = "".join(chr(c) for c in [*range(1, 32), 0x7F, 0x85, 0x2028, 0x2029, 0xFEFF, 0xFFFF, 0x10FFFF])
    text = f'{awkward} \\u0000 "quoted" `tick` $rows 😀'
    cypher_store.executor.write("CREATE (n:Probe {t: $t})", {"t": text})
    assert cypher_store.executor.read("MATCH (n:Probe) RETURN n.t AS t") == [{"t": text}]


def _poisoned_episode(eid: str, ts_ms: int, text: str) -> dict[str, Any]:
    ok = Episode(
        id=eid,
        team=TEAM,
        channel="dev",
        author="martin",
        text=text,
        ts=NIGHT - timedelta(days=20),
        provenance=Provenance.HUMAN,
        ingested_at=NIGHT - timedelta(days=20),
    )
    return episode_props(ok) | {"ts": ts_ms}  # as an older version or a hand edit wrote it


def _poisoned_pattern(pid: str, statement: str, **over: Any) -> dict[str, Any]:
    t = NIGHT - timedelta(days=3)
    ok = Pattern(
        id=pid,
        team=TEAM,
        statement=statement,
        kind=PatternKind.NORM,
        status=PatternStatus.ACTIVE,
        confidence=0.9,
        first_seen=t,
        last_seen=t,
        created_at=t,
        updated_at=t,
        valid_from=t,
    )
    return pattern_props(ok) | over


def test_an_unreadable_stored_item_is_quarantined_and_every_step_goes_on(stack: Stack) -> None:
    stack.ingest_sample()
    g, v = stack.graph, stack.vectors
    create = "CREATE (n:{label}) SET n = $p"
    # Recall meets these two through their vectors; reconcile's repair meets the third (no vector).
    for props in (
        _poisoned_episode("ep-year-0", YEAR_0, "we never deploy on fridays, ever"),
        _poisoned_episode("ep-year-10000", YEAR_10000, "deploys on friday are fine again"),
    ):
        g.executor.write(create.format(label="Episode"), {"p": props})
    v.upsert(TEAM, "episodes", ["ep-year-0"], ["we never deploy on fridays, ever"], [{"channel": "dev"}])
    g.executor.write(
        create.format(label="Pattern"), {"p": _poisoned_pattern("pat-status", "no deploys on friday", status=7)}
    )
    v.upsert(TEAM, "patterns", ["pat-status"], ["no deploys on friday"], [{"kind": "pattern"}])

    items = recall(g, v, "do we deploy on friday", NIGHT, k=10)  # today: ValueError, year 0 is out of range
    assert not {"ep-year-0", "pat-status"} & {i.id for i in items}
    fixed = reconcile(g, v, now=NIGHT)
    assert fixed.quarantined == 1  # ep-year-10000; recall already set the other two aside
    assert reconcile(g, v, repair=False).drift == 0

    # Written after the reconcile: the night's steps meet these (prune, distill, reflect read them).
    g.executor.write(
        create.format(label="Pattern"), {"p": _poisoned_pattern("pat-time", "ship daily", created_at=YEAR_0)}
    )
    v.upsert(TEAM, "patterns", ["pat-time"], ["ship daily"], [{"kind": "pattern"}])
    con = Contradiction(id="con-x", team=TEAM, old_pattern_id="a", new_pattern_id="b", opened_at=NIGHT)
    g.executor.write(create.format(label="Contradiction"), {"p": contradiction_props(con) | {"opened_at": YEAR_10000}})

    result = stack.night(NIGHT)
    assert result.ok, [(s.step, s.error) for s in result.run.steps]
    # Counted on the step that met them (distill reads the patterns, reflect the contradictions).
    by_step = {s.step: s.counts.get("quarantined", 0) for s in result.run.steps}
    assert by_step == {"prune": 0, "distill": 1, "reflect": 1, "decay": 0}
    assert len(g.patterns(TEAM)) >= 3  # the night still learned from the sample week

    poisoned = ["ep-year-0", "ep-year-10000", "pat-status", "pat-time", "con-x"]
    rows = g.executor.read(
        "MATCH (n) WHERE n.id IN $ids RETURN n.id AS id, n.status AS s, n.quarantined_from AS was", {"ids": poisoned}
    )
    assert sorted((r["id"], r["s"], r["was"]) for r in rows) == [
        ("con-x", "quarantined", "open"),
        ("ep-year-0", "quarantined", "raw"),
        ("ep-year-10000", "quarantined", "raw"),
        ("pat-status", "quarantined", 7),
        ("pat-time", "quarantined", "active"),
    ]
    assert not v.present(TEAM, "episodes", poisoned) and not v.present(TEAM, "patterns", poisoned)
    assert g.counts().sizes()["quarantined"] == 5
    assert reconcile(g, v, repair=False).drift == 0
    later = stack.night(NIGHT + timedelta(days=8))  # prune and decay over the old items: still fine
    assert later.ok and not any(s.counts.get("quarantined") for s in later.run.steps)
    assert g.get_episodes(poisoned) == [] and g.existing_episodes(["ep-year-0"]) == {
        "ep-year-0": EpisodeStatus.QUARANTINED
    }


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    with build(load_settings(env={"TASKZILLA_DATA_DIR": str(tmp_path)})) as s:
        yield s


def test_api_refuses_a_nul_in_the_last_of_600_items_and_writes_nothing(services: Services) -> None:
    c = client(services)
    body = [api_ep(i) for i in range(599)] + [api_ep(599, text="the end\u0000")]
    r = c.post("/v1/episodes", json={"episodes": body})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["details"] == [
        {"index": 599, "field": "text", "reason": "character 8 is U+0000 (NUL), which the stores cannot hold"}
    ]
    # JSON allows a lone surrogate as an escape (a client library would refuse to send it raw).
    raw = json.dumps({"episodes": [api_ep(1, author="x\ud800")]})
    surrogate = c.post("/v1/episodes", content=raw, headers={"content-type": "application/json"})
    assert surrogate.status_code == 422 and surrogate.json()["error"]["details"][0]["field"] == "author"
    assert services.graph.counts().episodes == {} and services.vectors.teams() == []


def test_api_refuses_an_id_reused_with_other_content(services: Services) -> None:
    c = client(services)
    assert c.post("/v1/episodes", json={"episodes": [api_ep(1, id="msg-1")]}).json()["new"] == 1
    r = c.post("/v1/episodes", json={"episodes": [api_ep(2), api_ep(1, id="msg-1", team="ops")]})
    assert r.status_code == 422
    assert r.json()["error"]["details"] == [
        {
            "index": 1,
            "field": "id",
            "reason": "id 'msg-1' is already used by another message (ids are unique per store: prefix a "
            "connector's ids, e.g. tg-<chat>-<message>, or leave id out)",
        }
    ]
    same = c.post("/v1/episodes", json={"episodes": [api_ep(1, id="msg-1")]}).json()
    assert (same["new"], same["present"]) == (0, 1)
    assert services.graph.counts().episodes == {"raw": 1}
    future = c.post(
        "/v1/episodes", json={"episodes": [api_ep(3, ts="2026-11-30T03:05:00+01:00")]}
    )  # the clock is 2026-11-28
    assert future.status_code == 422 and future.json()["error"]["details"][0]["field"] == "ts"
    numeric = c.post("/v1/episodes", json={"episodes": [api_ep(3, ts=1764493320)]})
    assert (
        numeric.status_code == 422 and "a number is not a timestamp" in numeric.json()["error"]["details"][0]["reason"]
    )
