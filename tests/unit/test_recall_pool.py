"""Recall's episode-query pool belongs to a process's Services: nothing is started when the module
is imported, the service's recalls run their episode queries on the Services' pool, closing the
Services stops its threads, and a recall made outside Services (a test, a bench tool) uses a pool of
its own that is gone when the call returns."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

from taskzilla_sleep.app import Services
from taskzilla_sleep.core.settings import load_settings
from taskzilla_sleep.memory.recall import recall
from taskzilla_sleep.rules.access import OPEN
from taskzilla_sleep.service.memory_service import MemoryService
from taskzilla_sleep.stores.memory import HashEmbedder, MemoryGraphStore, MemoryVectorStore
from taskzilla_sleep.stores.ports import VectorHit, VectorKind
from tests.unit.steps.conftest import NIGHT, TEAM, episode

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def test_importing_recall_and_the_app_starts_no_thread_and_builds_no_pool() -> None:
    code = (
        "import threading\n"
        "from concurrent.futures import Executor\n"
        "import taskzilla_sleep.app, taskzilla_sleep.memory.recall.query as q\n"
        "pools = [n for n, v in vars(q).items() if isinstance(v, Executor)]\n"
        "print(sorted(t.name for t in threading.enumerate() if t.name.startswith('recall-query')), pools)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[] []"


def stores() -> tuple[MemoryGraphStore, MemoryVectorStore, list[threading.Thread]]:
    """Stores holding one message, and the threads the episode queries ran on (filled as recalls run)."""
    embedder = HashEmbedder()
    graph, vectors = MemoryGraphStore(), MemoryVectorStore(embedder)
    e = episode(1, "lunch is at noon")
    graph.upsert_episodes([e], [])
    vectors.upsert(TEAM, "episodes", [e.id], [e.text], [{}])
    ran: list[threading.Thread] = []
    query = vectors.query

    def noted(team: str, kind: VectorKind, text: str, n: int, payload: bool = True) -> list[VectorHit]:
        if kind == "episodes":
            ran.append(threading.current_thread())
        return query(team, kind, text, n, payload)

    vectors.query = noted  # type: ignore[method-assign]
    return graph, vectors, ran


def test_the_services_pool_runs_the_services_recalls_and_closing_the_services_stops_its_threads() -> None:
    graph, vectors, ran = stores()
    settings = load_settings(env={})
    services = Services(settings, graph, vectors, HashEmbedder())
    at = NIGHT + timedelta(days=1)
    memory = MemoryService(settings, graph, vectors, services.ingestor(), lambda: at, recall_pool=services.recall_pool)
    assert [i.id for i in memory.recall(OPEN, TEAM, "lunch noon")] == ["ep-1"]
    assert [i.id for i in memory.recall(OPEN, TEAM, "lunch at noon")] == ["ep-1"]
    assert len(ran) == 2 and all(t.name.startswith("recall-query") and t.is_alive() for t in ran)
    services.close()
    assert not any(t.is_alive() for t in ran)  # stopped, not left to the interpreter's exit
    with pytest.raises(RuntimeError, match="shutdown"):  # a closed Services' pool runs no more queries
        services.recall_pool.submit(print)


def test_a_recall_outside_services_runs_on_a_pool_of_its_own_gone_when_it_returns() -> None:
    graph, vectors, ran = stores()
    assert [i.id for i in recall(graph, vectors, "lunch noon", NIGHT + timedelta(days=1))] == ["ep-1"]
    assert len(ran) == 1 and ran[0].name.startswith("recall-query") and not ran[0].is_alive()


class Inline(Executor):
    """An executor that runs each query in the calling thread (a caller's own choice of pool)."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        f: Future[T] = Future()
        f.set_result(fn(*args, **kwargs))
        return f


def test_a_caller_may_pass_any_executor() -> None:
    graph, vectors, ran = stores()
    got = recall(graph, vectors, "lunch noon", NIGHT + timedelta(days=1), pool=Inline())
    assert [i.id for i in got] == ["ep-1"] and ran == [threading.current_thread()]


def test_the_workers_api_recalls_run_on_the_services_pool(tmp_path: Path) -> None:
    from zoneinfo import ZoneInfo

    from taskzilla_sleep.core.settings import Settings, WatchdogSettings
    from taskzilla_sleep.interfaces.worker import Worker
    from taskzilla_sleep.night.schedule import RealClock

    graph, vectors, ran = stores()
    settings = Settings(data_dir=tmp_path, watchdog=WatchdogSettings(enabled=False))
    services = Services(settings, graph, vectors, HashEmbedder())
    try:
        worker = Worker(services, RealClock(ZoneInfo(settings.schedule.timezone)), serve_api=False)
        assert [i.id for i in worker.memory.recall(OPEN, TEAM, "lunch noon")] == ["ep-1"]
        assert worker.memory.recall_pool is services.recall_pool
        assert ran and all(t.name.startswith("recall-query") for t in ran)
    finally:
        services.close()
