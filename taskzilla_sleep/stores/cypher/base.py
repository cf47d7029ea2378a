"""What every part of the Cypher graph store shares: the executor, the batch size, unreadable items."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

from taskzilla_sleep.stores.codec import UNREADABLE, why_unreadable
from taskzilla_sleep.stores.executor import QueryExecutor, Row
from taskzilla_sleep.stores.ports import Poisoned, PoisonKind

T = TypeVar("T")
QUARANTINED = "quarantined"
# Rows per UNWIND write (not a setting: no operator sizes it; tests pass a small one to cover the loops).
WRITE_BATCH = 500


class PoisonLog:
    """What the reads skipped as unreadable, until the caller quarantines it (shared by threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._found: dict[tuple[str, str], Poisoned] = {}

    def add(self, item: Poisoned) -> None:
        with self._lock:
            self._found.setdefault((item.kind, item.id), item)

    def take(self) -> list[Poisoned]:
        with self._lock:
            found, self._found = self._found, {}
        return sorted(found.values(), key=lambda p: (p.kind, p.id))


def chunks(seq: Sequence[T], size: int) -> Iterator[list[T]]:
    for i in range(0, len(seq), size):
        yield list(seq[i : i + size])


class CypherBase:
    """The state the aggregates share; ``CypherGraphStore`` combines them."""

    def __init__(self, executor: QueryExecutor, batch_size: int = WRITE_BATCH) -> None:
        self._ex = executor
        self._batch = batch_size
        self._poison = PoisonLog()

    @property
    def executor(self) -> QueryExecutor:
        """The connection itself, for tests and tools that inspect the raw graph (the domain never does)."""
        return self._ex

    def _read(self, query: str, params: Row | None = None) -> list[Row]:
        return self._ex.read(query, params)

    def _write(self, query: str, params: Row | None = None) -> list[Row]:
        return self._ex.write(query, params)

    def _models(self, kind: PoisonKind, props: Iterable[Row], convert: Callable[[Row], T]) -> list[T]:
        """Each stored item as its model; one that cannot be is skipped and logged for quarantine."""
        out: list[T] = []
        for p in props:
            if p.get("status") == QUARANTINED:
                continue
            try:
                out.append(convert(p))
            except UNREADABLE as exc:
                self._poisoned(kind, p, why_unreadable(exc))
        return out

    def _poisoned(self, kind: PoisonKind, p: Row, reason: str) -> None:
        team = p.get("team")
        self._poison.add(Poisoned(kind, str(p.get("id")), team if isinstance(team, str) else None, reason))
