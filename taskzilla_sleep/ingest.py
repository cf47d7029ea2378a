"""Ingestion: validate a whole file first, then write the graph, then the vectors.

Bad input is reported with file, line, field and reason, and nothing from that file is written.
Write discipline (SPEC §4) skips content a connected tool can re-derive: counted and logged, not
stored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import structlog
from pydantic import ValidationError

from taskzilla_sleep.entities import EntityExtractor
from taskzilla_sleep.errors import InputError
from taskzilla_sleep.faults import crashpoint
from taskzilla_sleep.models import EPISODE_LIVE, Episode, EpisodeIn, to_ms
from taskzilla_sleep.settings import ConnectorRule
from taskzilla_sleep.stores.graph import GraphStore
from taskzilla_sleep.stores.vector import MetaValue, VectorStore

log = structlog.get_logger(__name__)

MAX_REPORTED_ERRORS = 20


@dataclass(frozen=True)
class LineError:
    source: str
    line: int
    field: str
    reason: str

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}"
        return f"{where}: field '{self.field}': {self.reason}" if self.field else f"{where}: {self.reason}"


class EpisodeFileError(InputError):
    """One or more lines of an episode file are invalid. Nothing was written."""

    def __init__(self, errors: Sequence[LineError], total: int) -> None:
        self.errors = list(errors)
        more = f"\n... and {total - len(errors)} more bad lines" if total > len(errors) else ""
        head = f"{total} bad line(s); nothing was written:\n" if total > 1 else ""
        super().__init__(head + "\n".join(str(e) for e in errors) + more)


@dataclass
class IngestReport:
    new: int = 0
    present: int = 0
    skipped: int = 0
    vectors_repaired: int = 0
    skipped_by_connector: dict[str, int] = field(default_factory=dict)
    new_ids: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return f"{self.new} new, {self.present} already present, {self.skipped} skipped by write discipline"


def _field_of(err: Mapping[str, object]) -> str:
    loc = err.get("loc") or ()
    return ".".join(str(p) for p in loc) if isinstance(loc, tuple | list) else str(loc)


def _reason_of(err: Mapping[str, object]) -> str:
    kind = str(err.get("type", ""))
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return "unknown field (allowed: id, team, channel, author, text, ts, provenance, connector)"
    if kind == "enum":
        return f"must be one of human, bot, ai-draft, import (got {err.get('input')!r})"
    if kind == "string_pattern_mismatch":
        return f"{err.get('input')!r} has characters that are not allowed (letters, digits, '-', '_' only)"
    msg = str(err.get("msg", "invalid value"))
    msg = msg.removeprefix("Value error, ")
    return f"{msg} (got {err.get('input')!r})" if "input" in err and kind.startswith("datetime") else msg


def parse_episode_lines(lines: Iterable[str], source: str, max_text_chars: int) -> list[tuple[int, EpisodeIn]]:
    """Validate every line; raise EpisodeFileError listing the bad ones (first 20) or return them all."""
    items: list[tuple[int, EpisodeIn]] = []
    errors: list[LineError] = []
    total_bad = 0

    def bad(line: int, fld: str, reason: str) -> None:
        nonlocal total_bad
        total_bad += 1
        if len(errors) < MAX_REPORTED_ERRORS:
            errors.append(LineError(source, line, fld, reason))

    for lineno, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            bad(lineno, "", f"not valid JSON: {exc.msg} at column {exc.colno}")
            continue
        except RecursionError:
            bad(lineno, "", "JSON nested too deeply (an episode is one flat object)")
            continue
        if not isinstance(obj, dict):
            bad(lineno, "", f"expected a JSON object, got {type(obj).__name__}")
            continue
        try:
            item = EpisodeIn.model_validate(obj)
        except ValidationError as exc:
            first = exc.errors()[0]
            bad(lineno, _field_of(first), _reason_of(first))
            continue
        if len(item.text) > max_text_chars:
            bad(
                lineno,
                "text",
                f"{len(item.text)} characters; the limit is {max_text_chars} (ingest.max_text_chars)",
            )
            continue
        items.append((lineno, item))
    if total_bad:
        raise EpisodeFileError(errors, total_bad)
    return items


class WriteDiscipline:
    """Skips what a connected tool can re-derive (Kent's derivability principle)."""

    def __init__(self, rules: Mapping[str, ConnectorRule]) -> None:
        self._rules = [
            (name, [re.compile(p, re.IGNORECASE) for p in rule.patterns])
            for name, rule in sorted(rules.items())
            if rule.connected
        ]

    def connector_for(self, ep: Episode) -> str | None:
        for name, patterns in self._rules:
            if any(p.search(ep.text) for p in patterns):
                return name
        return None


def episode_metadata(ep: Episode) -> dict[str, MetaValue]:
    return {
        "channel": ep.channel,
        "author": ep.author,
        "ts": to_ms(ep.ts),
        "provenance": ep.provenance.value,
    }


class Ingestor:
    def __init__(
        self,
        graph: GraphStore,
        vectors: VectorStore,
        extractor: EntityExtractor,
        discipline: WriteDiscipline,
        max_text_chars: int,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._graph = graph
        self._vectors = vectors
        self._extractor = extractor
        self._discipline = discipline
        self._max_text = max_text_chars
        self._clock = clock

    def ingest_lines(self, lines: Iterable[str], source: str) -> IngestReport:
        items = parse_episode_lines(lines, source, self._max_text)
        return self.ingest_items([it for _, it in items], source, line_numbers=[n for n, _ in items])

    def ingest_items(
        self, items: Sequence[EpisodeIn], source: str = "api", line_numbers: Sequence[int] | None = None
    ) -> IngestReport:
        now = self._clock()
        numbers = list(line_numbers) if line_numbers is not None else list(range(1, len(items) + 1))
        report = IngestReport()
        by_id: dict[str, tuple[int, Episode]] = {}
        for n, item in zip(numbers, items, strict=True):
            ep = Episode.from_input(item, now)
            seen = by_id.get(ep.id)
            if seen is not None and (seen[1].text, seen[1].ts) != (ep.text, ep.ts):
                raise EpisodeFileError(
                    [LineError(source, n, "id", f"id {ep.id!r} is already used by line {seen[0]}")], 1
                )
            by_id.setdefault(ep.id, (n, ep))

        kept: list[Episode] = []
        for _, ep in by_id.values():
            connector = self._discipline.connector_for(ep)
            if connector is None:
                kept.append(ep)
                continue
            report.skipped += 1
            report.skipped_by_connector[connector] = report.skipped_by_connector.get(connector, 0) + 1
            log.info("episode_skipped", reason="write_discipline", connector=connector, episode_id=ep.id)

        existing = self._graph.existing_episodes([e.id for e in kept])
        new = [e for e in kept if e.id not in existing]
        report.present = len(kept) - len(new)
        report.new_ids = [e.id for e in new]

        # Cross-store order: the graph first (source of truth: text, status, entities), then Chroma.
        # A crash between the two leaves episodes that have no vector yet; running the same ingest
        # again finds them "already present" in the graph and embeds the missing vectors below
        # (reconcile repairs the same drift).
        links = [lk for e in new for lk in self._extractor.links(e)]
        report.new = self._graph.upsert_episodes(new, links)
        crashpoint("ingest.after_graph")

        live = [e for e in kept if existing.get(e.id, e.status) in EPISODE_LIVE]
        report.vectors_repaired = self._embed_missing(live, set(existing))
        log.info(
            "episodes_ingested",
            source=source,
            new=report.new,
            present=report.present,
            skipped=report.skipped,
            vectors_repaired=report.vectors_repaired,
        )
        return report

    def _embed_missing(self, episodes: Sequence[Episode], previously_present: set[str]) -> int:
        repaired = 0
        by_team: dict[str, list[Episode]] = {}
        for e in episodes:
            by_team.setdefault(e.team, []).append(e)
        for team, eps in sorted(by_team.items()):
            have = self._vectors.present(team, "episodes", [e.id for e in eps])
            todo = [e for e in eps if e.id not in have]
            if not todo:
                continue
            # Embed what the graph holds (an explicit id may have been reused with other text).
            texts = self._graph.live_texts(team, "episode", [e.id for e in todo])
            todo = [e for e in todo if e.id in texts]
            self._vectors.upsert(
                team,
                "episodes",
                [e.id for e in todo],
                [texts[e.id] for e in todo],
                [episode_metadata(e) for e in todo],
            )
            repaired += sum(1 for e in todo if e.id in previously_present)
        return repaired
