"""The few package calls the bench makes whose shape changed, for both shapes.

``--baseline DIR`` runs today's bench over an older package: where the interface the bench uses
changed (``run_night`` took keyword arguments before it took a request; the graph's raw reads were
``query()`` before the executor; recall ran its episode queries on a module's pool before the
Services owned one), these helpers call whichever the imported package has.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any


def run_night(
    *,
    settings: Any,
    graph: Any,
    vectors: Any,
    embedder: Any,
    llm: Any,
    now: datetime,
    trigger: str = "manual",
    steps: Sequence[str] | None = None,
    teams: Sequence[str] | None = None,
    lookback: timedelta | None = None,
    clock: Callable[[], datetime] | None = None,
    before_step: Callable[[str], bool] | None = None,
) -> Any:
    from taskzilla_sleep.night import pipeline

    if not hasattr(pipeline, "NightRequest"):  # a package from before the request/hooks interface
        kwargs = {"clock": clock, "before_step": before_step, "teams": teams, "lookback": lookback, "steps": steps}
        return pipeline.run_night(
            settings=settings,
            graph=graph,
            vectors=vectors,
            embedder=embedder,
            llm=llm,
            now=now,
            trigger=trigger,
            **{k: v for k, v in kwargs.items() if v is not None},
        )
    services = SimpleNamespace(settings=settings, graph=graph, vectors=vectors, embedder=embedder, llm=llm)
    request = pipeline.NightRequest(now=now, steps=steps, trigger=trigger, teams=teams, lookback=lookback)  # type: ignore[arg-type]
    return pipeline.run_night(services, request, pipeline.NightHooks(clock=clock, before_step=before_step))


def read(graph: Any, query: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """A raw read of the graph (the bench inspects states no step needs)."""
    executor = getattr(graph, "executor", None)
    rows: list[dict[str, Any]] = executor.read(query, params) if executor is not None else graph.query(query, params)
    return rows


def recall(services: Any, query: str, now: datetime, team: str) -> Any:
    """A team's recall as the API asks it: on the Services' episode-query pool where the package has one."""
    from taskzilla_sleep.memory.recall import recall as ask

    pool = getattr(services, "recall_pool", None)
    extra = {} if pool is None else {"pool": pool}
    return ask(services.graph, services.vectors, query, now, teams=[team], **extra)
