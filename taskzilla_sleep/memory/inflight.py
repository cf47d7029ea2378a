"""Ingests in flight, announced in the graph store, so that no process takes them for drift.

An ingest writes the graph first (all or nothing), then the vectors in batches: in between, its new
episodes are live without a vector, which is what drift looks like. So an ingest in any process (the
CLI, the worker's API, an MCP server) announces itself before its graph write with a mark in the graph
(holder, host and pid, teams, an expiry renewed while it runs), stores its episodes with the mark's
id, and when it is done sets the mark's expiry to its end. A reconcile (the worker's before a night
or a watchdog pass, the CLI's, repairing or ``--check``) leaves out of drift the episodes stored by
the marks that were live at any time since it began: what it still finds is real drift.

A crashed ingest hides nothing for long: its mark expires ``worker.lease_ttl_s`` after its last
renewal, and counts for nothing at once when its holder was a process of this machine that is gone
(``kill -9``), as a lease's holder does. Its episodes without a vector are then drift, repaired.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import replace

import structlog

from taskzilla_sleep.core.errors import StoreError
from taskzilla_sleep.core.host import holder_id, local_pid, pid_alive, pid_namespace
from taskzilla_sleep.stores.ports import GraphStore, IngestMark, LeaseState

log = structlog.get_logger(__name__)

# Mark times are wall clock, as a lease's: a reconcile counts another host's marks live since a little
# before it began, so a clock a few seconds behind does not turn that ingest's end into drift.
SKEW_MS = 5000


def now_ms() -> int:
    return int(time.time() * 1000)


@contextlib.contextmanager
def announced(graph: GraphStore, teams: Sequence[str], ttl_s: float, role: str = "ingest") -> Iterator[str]:
    """Announce an ingest into ``teams`` while the body runs (renewed every ttl/3); yields the mark's
    id, to store the episodes with. At the end, also on an error or Ctrl-C, the mark says it ended."""
    start = now_ms()
    mark = IngestMark(
        id=f"ingest_{uuid.uuid4().hex}",
        holder=holder_id(role),
        host=socket.gethostname(),
        pid_ns=pid_namespace(),
        pid=os.getpid(),
        teams=tuple(sorted(set(teams))),
        started_at_ms=start,
        expires_at_ms=start + int(ttl_s * 1000),
    )
    graph.mark_ingest(mark)
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(ttl_s / 3):
            try:
                graph.mark_ingest(replace(mark, expires_at_ms=now_ms() + int(ttl_s * 1000)))
            except StoreError as exc:  # the graph is down for now: try again, while the mark lasts
                log.warning("ingest_mark_renew_failed", ingest=mark.id, error=str(exc)[:200])

    renewer = threading.Thread(target=renew, name=f"mark-{mark.id}", daemon=True)
    renewer.start()
    try:
        yield mark.id
    finally:
        stop.set()
        renewer.join()  # a renewal in flight lands before the end, never after it
        try:
            graph.mark_ingest(replace(mark, expires_at_ms=now_ms(), ended=True))
        except StoreError as exc:  # it expires by itself
            log.warning("ingest_mark_end_failed", ingest=mark.id, error=str(exc)[:200])


def writing(graph: GraphStore, team: str, since_ms: int) -> set[str]:
    """The live episodes of ``team`` that ingests announced as running at any time since ``since_ms``
    stored: their vectors may still be on the way, so a reconcile that began then leaves them out. (An
    ingest of this host that ended in that very millisecond wrote its vectors before it began.)"""
    now, host = now_ms(), socket.gethostname()
    marks = [
        m
        for m in graph.ingest_marks(since_ms - SKEW_MS)
        if team in m.teams and (m.host != host or m.expires_at_ms > since_ms) and not _gone(m, now)
    ]
    return graph.ingest_episodes(team, [m.id for m in marks]) if marks else set()


def _gone(m: IngestMark, now: int) -> bool:
    """A mark still claiming to run whose holder is a process of this machine that no longer exists."""
    if m.ended or m.expires_at_ms <= now:
        return False
    pid = local_pid(LeaseState(m.holder, m.expires_at_ms, m.host, m.pid_ns, m.pid))
    return pid is not None and not pid_alive(pid)
