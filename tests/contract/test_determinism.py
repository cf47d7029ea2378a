"""Replay is deterministic: the same week, under two hash seeds and on both backend pairs, writes the
same bytes — graph, vectors, memory index and topic files, and recall answers alike
(tests/replay_driver.py takes the snapshot).

A decision that follows set or dict order, or the order rows come back from a backend, shows up as a
difference here: the week holds ties on purpose (replay_driver.TIES), and the two seeds are chosen so
that the tied channels iterate in opposite orders. Ties the week cannot stage (equal similarities,
a store's answer order) have their own small tests at the end.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from taskzilla_sleep.core.models import Pattern, PatternKind, PatternStatus, to_ms
from taskzilla_sleep.core.settings import load_settings
from taskzilla_sleep.llm.base import LLMUsage, ReflectRequest, Verdict
from taskzilla_sleep.llm.offline import OfflineProvider
from taskzilla_sleep.night.steps import reflect
from taskzilla_sleep.night.steps.base import StepContext
from taskzilla_sleep.stores.chroma import ChromaVectorStore
from taskzilla_sleep.stores.falkordb import open_falkordb
from taskzilla_sleep.stores.memory import HashEmbedder, MemoryGraphStore
from taskzilla_sleep.stores.ports import Embedder
from tests.crash_driver import NIGHT
from tests.replay_driver import TIES

ROOT = Path(__file__).resolve().parents[2]
EMBEDDED = "falkordb+chroma-embedded"
SERVERS = "neo4j+chroma-server"


@pytest.fixture(scope="module")
def seeds() -> tuple[str, str]:
    """Seed 1, and the first seed after it under which a set of the tied channels (built as the week
    states them) iterates the other way: set order alone would then tell the two replays apart."""
    probe = f"print(list({{c for c in {[channel for channel, _, _ in TIES]!r}}}))"

    def order(seed: int) -> str:
        # Not -I/-E: those ignore PYTHONHASHSEED.
        env = {"PYTHONHASHSEED": str(seed)}
        return subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True).stdout

    first = order(1)
    other = next(s for s in range(2, 100) if order(s) != first)
    return "1", str(other)


def _replay(stack_env: dict[str, str], data_dir: Path, seed: str, backends: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASKZILLA")}
    env.update(
        stack_env,
        PYTHONHASHSEED=seed,
        TASKZILLA_DATA_DIR=str(data_dir),
        HF_HUB_OFFLINE="1",
        TASKZILLA_LOG_LEVEL="warning",
    )
    done = subprocess.run(
        [sys.executable, "-m", "tests.replay_driver"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, f"replay (seed {seed}) failed: {done.stderr[-3000:]}"
    snapshot = json.loads(done.stdout.strip().splitlines()[-1])
    assert snapshot.pop("backends") == backends
    return json.dumps(snapshot, sort_keys=True)


def _assert_same(expected: str, got: str, what: str) -> None:
    if got == expected:
        return
    a = json.dumps(json.loads(expected), indent=1, sort_keys=True).splitlines()
    b = json.dumps(json.loads(got), indent=1, sort_keys=True).splitlines()
    diff = [line[:300] for line in difflib.unified_diff(a, b, "expected", "got", lineterm="", n=2)]
    pytest.fail(f"{what}: the replays differ\n" + "\n".join(diff[:120]), pytrace=False)


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory, seeds: tuple[str, str]) -> dict[str, str]:
    """The week on FalkorDB + Chroma embedded, once per seed (the server pair compares against it); the
    two replays at once, each on its own data dir."""
    dirs = {seed: tmp_path_factory.mktemp(f"embedded-seed{seed}") for seed in seeds}
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = {seed: pool.submit(_replay, {}, dirs[seed], seed, EMBEDDED) for seed in seeds}
        return {seed: run.result() for seed, run in runs.items()}


def test_the_replay_exercises_every_store(embedded: dict[str, str], seeds: tuple[str, str]) -> None:
    snap = json.loads(embedded[seeds[0]])
    labels = [n["labels"][0] for n in snap["graph"]["nodes"]]
    assert labels.count("Pattern") >= 5 and labels.count("Contradiction") == 1 and labels.count("Tombstone") > 0
    assert labels.count("Run") == 3
    assert {"platform/episodes", "platform/patterns"} <= set(snap["vectors"])
    assert "platform/MEMORY.md" in snap["memory"] and any(p.startswith("platform/topics/") for p in snap["memory"])


def test_replay_is_identical_under_two_hash_seeds(embedded: dict[str, str], seeds: tuple[str, str]) -> None:
    a, b = seeds
    _assert_same(embedded[a], embedded[b], f"{EMBEDDED}, PYTHONHASHSEED={a} vs {b}")


@pytest.mark.neo4j
@pytest.mark.chroma_server
def test_replay_on_neo4j_and_chroma_server_equals_the_embedded_replay(
    neo4j_uri: str,
    chroma_address: tuple[str, int],
    embedded: dict[str, str],
    seeds: tuple[str, str],
    tmp_path: Path,
) -> None:
    from tests.neo4j_service import servers_env

    env = servers_env(neo4j_uri, chroma_address)
    a, b = seeds
    got = {seed: _replay(env, tmp_path / f"seed{seed}", seed, SERVERS) for seed in seeds}
    _assert_same(got[a], got[b], f"{SERVERS}, PYTHONHASHSEED={a} vs {b}")
    _assert_same(embedded[a], got[a], f"{EMBEDDED} vs {SERVERS}")


def test_stored_vectors_come_back_in_the_order_asked(tmp_path: Path, offline_embedder: Embedder) -> None:
    """Chroma answers a get in its own storage order; the steps scan what they get (an argmax keeps
    the first of equal scores), so they must get the order they asked for."""
    store = ChromaVectorStore.embedded(tmp_path / "chroma", offline_embedder)
    try:
        ids = [f"pat_{i}" for i in range(6)]
        store.upsert("platform", "patterns", ids, [text for _, _, text in TIES], [{"kind": "norm"}] * len(ids))
        ctx = StepContext(
            "platform",
            NIGHT,
            load_settings(env={}),
            MemoryGraphStore(),  # type: ignore[arg-type]
            store,
            offline_embedder,
            OfflineProvider(offline_embedder),
        )
        asked = ids[::-1]
        assert list(ctx.vectors_of("patterns", asked)) == asked
    finally:
        store.close()


class _Unrelated:
    """Answers every pair "unrelated" and keeps what it was asked."""

    name = "unrelated"
    prompt_ids = {"distill": "unrelated-v1", "reflect": "unrelated-v1"}

    def __init__(self) -> None:
        self.usage = LLMUsage()
        self.asked: list[str] = []

    def distill_many(self, requests: Sequence[object]) -> list[tuple[()]]:
        return [() for _ in requests]

    def classify_many(self, requests: Sequence[ReflectRequest]) -> list[Verdict]:
        self.asked += [r.old.id for r in requests]
        return [Verdict(relation="unrelated", reason="test") for _ in requests]


def test_reflect_takes_equally_similar_neighbours_in_id_order(tmp_path: Path) -> None:
    """20 older beliefs, every other one exactly as similar to the new one (one-word statements, so
    every similarity is exact): the neighbours compared are the first of them by id, whatever order
    an unstable sort leaves equal similarities in."""
    embedder = HashEmbedder()
    settings = load_settings(env={})
    old_at, new_at = NIGHT - timedelta(days=2), NIGHT - timedelta(days=1)

    def belief(pid: str, statement: str, at: datetime) -> Pattern:
        return Pattern(
            id=pid,
            team="platform",
            statement=statement,
            kind=PatternKind.NORM,
            status=PatternStatus.ACTIVE,
            confidence=0.9,
            first_seen=at,
            last_seen=at,
            created_at=at,
            updated_at=at,
            valid_from=at,
        )

    beliefs = [belief(f"pat_{i:02d}", "retro" if i % 2 else "retro planning", old_at) for i in range(20)]
    beliefs.append(belief("pat_new", "retro", new_at))
    graph = open_falkordb(tmp_path / "falkordb")
    vectors = ChromaVectorStore.embedded(tmp_path / "chroma", embedder)
    try:
        graph.ensure_schema()
        for b in beliefs:
            graph.write_pattern(b, [], [])
        vectors.upsert("platform", "patterns", [b.id for b in beliefs], [b.statement for b in beliefs], [{}] * 21)
        graph.set_meta(reflect.WATERMARK.format(team="platform"), str(to_ms(old_at)))  # only pat_new is new
        llm = _Unrelated()

        reflect.read(StepContext("platform", NIGHT, settings, graph, vectors, embedder, llm))  # type: ignore[arg-type]

        tied = [b.id for b in beliefs if b.statement == "retro" and b.id != "pat_new"]
        assert llm.asked == tied[: settings.reflect.neighbours]
    finally:
        vectors.close()
        graph.close()
