"""The one lease, on both graph backends and the in-memory fake: exclusive, re-entrant for its holder,
expiring for a dead one."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from taskzilla_sleep.runtime.lease import Lease
from taskzilla_sleep.stores.cypher import CypherGraphStore
from taskzilla_sleep.stores.memory import MemoryGraphStore
from taskzilla_sleep.stores.ports import GraphStore


@pytest.fixture(params=["memory", "falkordb", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def graph(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GraphStore]:
    g: GraphStore
    if request.param == "memory":
        g = MemoryGraphStore()
    elif request.param == "falkordb":
        from taskzilla_sleep.stores.falkordb import open_falkordb

        g = open_falkordb(tmp_path / "f")
    else:
        from taskzilla_sleep.stores.neo4j import open_neo4j
        from tests.neo4j_service import neo4j_auth

        g = open_neo4j(request.getfixturevalue("neo4j_uri"), neo4j_auth())
        g.delete_all()
    g.ensure_schema()
    yield g
    g.delete_all()
    g.close()


def test_exclusive_reentrant_and_released(graph: GraphStore) -> None:
    a, b = Lease(graph, "x", 60, me="a"), Lease(graph, "x", 60, me="b")
    assert a.try_acquire() and a.try_acquire()  # the holder renews
    assert not b.try_acquire()
    assert a.holder()[0] == "a"
    a.release()
    assert b.try_acquire() and b.holder()[0] == "b"
    assert not a.try_acquire()


def test_a_dead_holders_lease_expires(graph: GraphStore) -> None:
    dead, alive = Lease(graph, "x", 1, me="dead"), Lease(graph, "x", 60, me="alive")
    assert dead.try_acquire()
    assert not alive.try_acquire()
    time.sleep(1.2)
    assert alive.try_acquire()


def test_keep_alive_renews_past_the_ttl(graph: GraphStore) -> None:
    a, b = Lease(graph, "x", 1.5, me="a"), Lease(graph, "x", 60, me="b")
    assert a.try_acquire()
    a.keep_alive()
    time.sleep(2.5)
    assert not b.try_acquire()
    a.release()
    assert b.try_acquire()


@pytest.mark.parametrize("name", ["fresh-1", "fresh-2", "fresh-3"])
def test_many_contenders_one_winner(graph: GraphStore, name: str) -> None:
    leases = [Lease(graph, name, 60, me=f"w{i}") for i in range(8)]
    for _round in range(4):  # the first round also races on creating the lease node
        wins: list[str] = []
        barrier = threading.Barrier(len(leases))

        def go(lease: Lease, barrier: threading.Barrier, wins: list[str]) -> None:
            barrier.wait()
            if lease.try_acquire():
                wins.append(lease.me)

        threads = [threading.Thread(target=go, args=(x, barrier, wins)) for x in leases]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert len(wins) == 1
        assert leases[0].holder()[0] == wins[0]
        next(x for x in leases if x.me == wins[0]).release()


def test_a_lease_of_a_gone_process_on_this_machine_is_taken_at_once(graph: GraphStore) -> None:
    import subprocess

    gone = subprocess.Popen(["true"])
    gone.wait()  # reaped: its pid names no process now
    alive = subprocess.Popen(["sleep", "30"])
    try:
        held, other = Lease(graph, "x", 600, me="held"), Lease(graph, "x", 600, me="other")

        def holder_is(pid: int, host: str | None = None) -> None:
            assert held.try_acquire()
            if isinstance(graph, MemoryGraphStore):
                state = graph.leases["x"]
                graph.leases["x"] = dataclasses.replace(state, pid=pid, host=host or state.host)
                return
            assert isinstance(graph, CypherGraphStore)
            graph.executor.write(
                "MATCH (l:Lease {name: 'x'}) SET l.pid = $pid, l.host = coalesce($host, l.host)",
                {"pid": pid, "host": host},
            )

        holder_is(alive.pid)  # a live process of this machine: wait for it (or its TTL)
        assert not other.try_acquire()
        holder_is(gone.pid, host="another-machine")  # a pid on another host says nothing here
        assert not other.try_acquire()
        holder_is(gone.pid)  # gone, here: no need to wait out the 600 s TTL
        assert other.try_acquire() and other.holder()[0] == "other"
    finally:
        alive.kill()
        alive.wait()
