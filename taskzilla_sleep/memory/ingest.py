"""Ingestion: validate a whole file first, then write the graph, then the vectors.

Bad input is reported with file, line, field and reason, and nothing from that file is written:
the schema, the characters the stores can hold, timestamps in a sane range, and ids — an id
already stored (or used earlier in the file) with other content is an error, with the same content
a no-op (ids are unique per store: the error quotes nothing of another team's message). The graph
write itself is all or nothing (see ``GraphStore.upsert_episodes``). Write discipline skips content
a connected tool can re-derive: counted and logged, not stored.

Edits and threads: see ``edits.py``.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import structlog
from pydantic import ValidationError

from taskzilla_sleep.core.errors import InputError
from taskzilla_sleep.core.faults import crashpoint, pausepoint
from taskzilla_sleep.core.instruments import Instruments
from taskzilla_sleep.core.models import (
    CONTENT_FIELDS,
    EPISODE_LIVE,
    Episode,
    EpisodeIn,
    EpisodeStatus,
    from_ms,
)
from taskzilla_sleep.core.settings import ConnectorRule, IngestSettings
from taskzilla_sleep.memory.admin.forget import DEFAULT_FLOOR
from taskzilla_sleep.memory.edits import edit_verdict, finish_edits, version_of
from taskzilla_sleep.memory.flags import with_flag
from taskzilla_sleep.memory.inflight import announced
from taskzilla_sleep.memory.vector_meta import episode_metadata
from taskzilla_sleep.rules.beliefs import LINT_VERSION, flagged
from taskzilla_sleep.rules.entities import EntityExtractor
from taskzilla_sleep.stores.ports import EpisodeEdit, GraphStore, StoredEpisode, VectorStore

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
        self.total = total
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
    edited: int = 0  # stored messages whose text a later edit replaced (by this run or a crashed one)
    edits_ignored: int = 0  # edits of a message whose text is gone (retired, pruned, forgotten)
    edited_ids: list[str] = field(default_factory=list)

    def summary(self) -> str:
        edits = f", {self.edited} edited" if self.edited else ""
        ignored = f", {self.edits_ignored} edits of messages no longer held ignored" if self.edits_ignored else ""
        return (
            f"{self.new} new{edits}, {self.present} already present, {self.skipped} skipped by write discipline"
            f"{ignored}"
        )


EMBED_BATCH = 256  # episodes embedded per vector write: the unit of progress and of what Ctrl-C loses


@dataclass
class IngestProgress:
    """How far an ingest got, for progress lines and for saying what an interrupted one left stored.

    ``stored`` is set once the graph write committed (it is all or nothing: before that, nothing is
    stored); ``embedded`` counts the vectors written since, of ``to_embed``.
    """

    episodes: int = 0
    skipped: int = 0
    present: int = 0
    stored: int | None = None
    to_embed: int = 0
    embedded: int = 0
    on_change: Callable[[IngestProgress], None] | None = None

    def changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self)


def field_of(err: Mapping[str, object]) -> str:
    loc = err.get("loc") or ()
    return ".".join(str(p) for p in loc) if isinstance(loc, tuple | list) else str(loc)


def reason_of(err: Mapping[str, object]) -> str:
    kind = str(err.get("type", ""))
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return f"unknown field (allowed: {', '.join(EpisodeIn.model_fields)})"
    if kind == "enum":
        return f"must be one of human, bot, ai-draft, import (got {err.get('input')!r})"
    if kind == "string_pattern_mismatch":
        return f"{err.get('input')!r} has characters that are not allowed (letters, digits, '-', '_' only)"
    msg = str(err.get("msg", "invalid value"))
    msg = msg.removeprefix("Value error, ")
    return f"{msg} (got {err.get('input')!r})" if "input" in err and kind.startswith("datetime") else msg


@dataclass(frozen=True)
class Limits:
    """What an episode must satisfy beyond its schema (the ``ingest.*`` settings)."""

    max_text_chars: int = 8000
    earliest_ts: datetime = datetime(2000, 1, 1, tzinfo=UTC)
    max_future: timedelta = timedelta(hours=24)

    @classmethod
    def of(cls, s: IngestSettings) -> Limits:
        return cls(s.max_text_chars, s.earliest_ts, timedelta(hours=s.max_future_hours))

    def problem(self, item: EpisodeIn, now: datetime) -> tuple[str, str] | None:
        """(field, reason) of the first limit ``item`` breaks at ingest clock ``now``, or None."""
        if len(item.text) > self.max_text_chars:
            return "text", f"{len(item.text)} characters; the limit is {self.max_text_chars} (ingest.max_text_chars)"
        latest = now + self.max_future
        if item.ts < self.earliest_ts:
            return "ts", f"{item.ts.isoformat()} is before {self.earliest_ts.isoformat()} (ingest.earliest_ts)"
        if item.ts > latest:
            return "ts", (
                f"{item.ts.isoformat()} is more than {_hours(self.max_future)} after the ingest clock "
                f"{now.isoformat()} (ingest.max_future_hours)"
            )
        if item.edited_at is not None:
            if item.edited_at < item.ts:
                return "edited_at", f"{item.edited_at.isoformat()} is before the message's ts {item.ts.isoformat()}"
            if item.edited_at > latest:
                return "edited_at", (
                    f"{item.edited_at.isoformat()} is more than {_hours(self.max_future)} after the ingest clock "
                    f"{now.isoformat()} (ingest.max_future_hours)"
                )
        if item.reply_to is not None and item.reply_to == item.id:
            return "reply_to", "a message cannot answer itself"
        return None


def _hours(d: timedelta) -> str:
    h = d.total_seconds() / 3600
    return f"{h:g} h"


def validate_item(obj: object, limits: Limits, now: datetime) -> EpisodeIn | tuple[str, str]:
    """One decoded JSON value as an episode, or (field, reason) of what is wrong with it."""
    if not isinstance(obj, dict):
        return "", f"expected a JSON object, got {type(obj).__name__}"
    try:
        item = EpisodeIn.model_validate(obj)
    except ValidationError as exc:
        first = exc.errors()[0]
        return field_of(first), reason_of(first)
    return limits.problem(item, now) or item


def episode_lines(text: str) -> list[str]:
    """JSON Lines end at \\n only: U+2028, U+2029, U+0085 (legal raw inside a JSON string) and a
    lone \\r are not line breaks there, as str.splitlines() would make them (a CRLF's \\r is JSON
    whitespace)."""
    return text.split("\n")


def parse_episode_lines(
    lines: Iterable[str], source: str, limits: Limits, now: datetime
) -> list[tuple[int, EpisodeIn]]:
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
        got = validate_item(obj, limits, now)
        if isinstance(got, tuple):
            bad(lineno, *got)
            continue
        items.append((lineno, got))
    if total_bad:
        raise EpisodeFileError(errors, total_bad)
    return items


def _short(v: object, width: int = 40) -> str:
    if not isinstance(v, str):
        return repr(v)
    return repr(v if len(v) <= width else v[: width - 1] + "…")


def _show(fld: str, v: object) -> str:
    if fld == "ts" and isinstance(v, int):
        try:
            return from_ms(v).isoformat()
        except ValueError:
            return f"{v} ms"
    return _short(v)


def content_differences(ep: Episode, stored: StoredEpisode) -> str | None:
    """What differs between ``ep`` and what the graph holds under its id; None when it is the same message.

    The content hash kept at ingest decides, even after retirement dropped the text; an episode stored
    before hashes were kept is compared on the fields still on the node.
    """
    if stored.content_hash is not None and stored.content_hash == ep.content_hash():
        return None
    mine = ep.content()
    diffs = [
        f"{f} {_show(f, mine[f])} (stored: {_show(f, stored.fields[f])})"
        for f in CONTENT_FIELDS
        if stored.fields.get(f) is not None and stored.fields[f] != mine[f]
    ]
    if not diffs and stored.content_hash is not None:
        # The hash differs, every field still stored agrees: the text, dropped since, was another one.
        diffs = [f"text {_short(ep.text)} (the stored text was dropped when the episode was {stored.status.value})"]
    return ", ".join(diffs) or None


def id_clash(ep: Episode, stored: StoredEpisode) -> str | None:
    """Why ``ep`` cannot be stored under its id, held by ``stored``; None when it is a re-delivery.

    Ids are unique per store, not per team. A message of the same team is the sender's own data: the
    fields that differ are named. Of another team, nothing of it is (its team, channel, author, text,
    time or hash): only that the id is taken, which any refusal says anyway.
    """
    if stored.fields.get("team") != ep.team:
        return f"id {ep.id!r} is already used by another message ({OWN_IDS})"
    diff = content_differences(ep, stored)
    return None if diff is None else f"id {ep.id!r} is already stored with other content: {diff}"


OWN_IDS = "ids are unique per store: prefix a connector's ids, e.g. tg-<chat>-<message>, or leave id out"


def _same_message(a: Episode, b: Episode, where: str) -> str | None:
    """What makes two items of one file with the same id two messages (None: one message, maybe in
    two versions): the fields that differ, the text only when neither says it was edited."""
    if a.edited_at is None and b.edited_at is None:
        return _same_content(a, b, where)
    if a.edited_at == b.edited_at and a.text != b.text:
        return f"two versions edited at {a.edited_at.isoformat() if a.edited_at else ''} with other texts"
    mine, theirs = a.content(), b.content()
    diffs = [
        f"{f} {_show(f, mine[f])} ({where}: {_show(f, theirs[f])})"
        for f in CONTENT_FIELDS
        if f != "text" and mine[f] != theirs[f]
    ]
    return ", ".join(diffs) or None


def _same_content(a: Episode, b: Episode, where: str) -> str | None:
    """What differs between two items of one file with the same id (``where``: the other's line/item)."""
    mine, theirs = a.content(), b.content()
    diffs = [
        f"{f} {_show(f, mine[f])} ({where}: {_show(f, theirs[f])})" for f in CONTENT_FIELDS if mine[f] != theirs[f]
    ]
    return ", ".join(diffs) or None


class WriteDiscipline:
    """Skips what a connected tool can re-derive: never store what can be fetched live from its source."""

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


class Ingestor:
    def __init__(
        self,
        graph: GraphStore,
        vectors: VectorStore,
        extractor: EntityExtractor,
        discipline: WriteDiscipline,
        limits: Limits,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        instruments: Instruments | None = None,
        mark_ttl_s: float = 120.0,
        floor: float = DEFAULT_FLOOR,
    ) -> None:
        self._graph = graph
        self._floor = floor  # distill.confidence_floor: a pattern re-scored after an edit uses the nightly rule
        self._mark_ttl_s = mark_ttl_s  # how long an announced ingest's mark lasts unless renewed
        self._instruments = instruments
        self._vectors = vectors
        self._extractor = extractor
        self._discipline = discipline
        self._limits = limits
        self._clock = clock

    @property
    def limits(self) -> Limits:
        return self._limits

    def ingest_lines(self, lines: Iterable[str], source: str, progress: IngestProgress | None = None) -> IngestReport:
        items = parse_episode_lines(lines, source, self._limits, self._clock())
        return self.ingest_items([it for _, it in items], source, [n for n, _ in items], progress)

    def ingest_items(
        self,
        items: Sequence[EpisodeIn],
        source: str = "api",
        line_numbers: Sequence[int] | None = None,
        progress: IngestProgress | None = None,
    ) -> IngestReport:
        """Store ``items`` (all or nothing). Without ``line_numbers`` they are API items, numbered from 0."""
        now = self._clock()
        progress = progress or IngestProgress()
        progress.episodes = len(items)
        numbers = list(line_numbers) if line_numbers is not None else list(range(len(items)))
        unit = "line" if line_numbers is not None else "item"
        report = IngestReport()
        errors: list[LineError] = []
        by_id: dict[str, tuple[int, Episode]] = {}
        for n, item in zip(numbers, items, strict=True):
            problem = self._limits.problem(item, now)
            if problem is not None:
                errors.append(LineError(source, n, *problem))
                continue
            ep = Episode.from_input(item, now)
            seen = by_id.get(ep.id)
            if seen is None:
                by_id[ep.id] = (n, ep)
            elif (diff := _same_message(ep, seen[1], f"{unit} {seen[0]}")) is not None:
                errors.append(LineError(source, n, "id", f"id {ep.id!r} is already used by {unit} {seen[0]}: {diff}"))
            elif version_of(ep) > version_of(seen[1]):  # two versions of one message: the newest counts
                by_id[ep.id] = (n, ep)
        self._raise_if(errors)

        kept: list[tuple[int, Episode]] = []
        for n, ep in by_id.values():
            connector = self._discipline.connector_for(ep)
            if connector is None:
                kept.append((n, ep))
                continue
            report.skipped += 1
            report.skipped_by_connector[connector] = report.skipped_by_connector.get(connector, 0) + 1
            log.info("episode_skipped", reason="write_discipline", connector=connector, episode_id=ep.id)

        # The same id with the same content is a re-delivery (a no-op); with other content it is an
        # error: storing nothing under it while answering "already present" would lose the message.
        stored = self._graph.stored_episodes([e.id for _, e in kept])
        edits: list[Episode] = []
        for n, ep in kept:
            if ep.id not in stored:
                continue
            if (clash := id_clash(ep, stored[ep.id])) is None:
                continue
            verdict = edit_verdict(ep, stored[ep.id])
            if verdict == "apply":
                edits.append(ep)
            elif verdict == "ignore":
                report.edits_ignored += 1
                log.info("episode_edit_ignored", episode_id=ep.id, status=stored[ep.id].status.value)
            elif verdict is None:
                errors.append(LineError(source, n, "id", clash))
        self._raise_if(errors)
        existing = {i: s.status for i, s in stored.items()}
        # The injection flag is computed here, once, for what this ingest writes (new texts and edits):
        # readers use it and never run the lint again (rules/beliefs/lint.py, ``flagged``).
        new = [with_flag(e) for _, e in kept if e.id not in existing]
        report.present = len(kept) - len(new)
        report.new_ids = [e.id for e in new]
        progress.skipped, progress.present = report.skipped, report.present
        progress.changed()

        # Cross-store order: the graph first (source of truth: text, status, entities), then Chroma.
        # A crash between the two leaves episodes that have no vector yet; running the same ingest
        # again finds them "already present" in the graph and embeds the missing vectors below
        # (reconcile repairs the same drift).
        # Announced in the graph (inflight.py) while its new episodes wait for their vectors: no
        # reconcile, in this process or another, takes them for drift.
        links = [lk for e in new for lk in self._extractor.links(e)]
        teams = sorted({e.team for e in new})
        with announced(self._graph, teams, self._mark_ttl_s) if new else contextlib.nullcontext(None) as mark:
            report.new = self._graph.upsert_episodes(new, links, ingest=mark)
            progress.stored = report.new
            if self._instruments is not None:  # counted once the graph (the source of truth) committed
                self._instruments.ingested(report.new, report.skipped_by_connector)
            crashpoint("ingest.after_graph")

            ids = [e.id for _, e in kept]
            self._graph.link_replies(ids)
            changed = self._graph.edit_episodes([self._edit(e) for e in edits])
            crashpoint("ingest.after_edit")
            # This run's edits, and those a crashed run of it left pending: their follow-up, by team.
            pending = set(changed) | {i for i in ids if i in stored and stored[i].edit_pending}
            report.edited_ids = sorted(pending)
            report.edited = len(pending)
            report.present -= len(changed)  # a message whose text this run replaced is counted as edited
            by_team: dict[str, list[str]] = {}
            for _, e in kept:
                if e.id in pending:
                    by_team.setdefault(e.team, []).append(e.id)
            for team, mine in sorted(by_team.items()):
                finish_edits(self._graph, self._vectors, team, mine, source, now, self._floor)

            live = [e for _, e in kept if existing.get(e.id, EpisodeStatus.RAW) in EPISODE_LIVE]
            report.vectors_repaired = self._embed_missing(live, set(existing), progress)
        log.info(
            "episodes_ingested",
            source=source,
            new=report.new,
            present=report.present,
            edited=report.edited,
            edits_ignored=report.edits_ignored,
            skipped=report.skipped,
            vectors_repaired=report.vectors_repaired,
        )
        return report

    def _edit(self, ep: Episode) -> EpisodeEdit:
        assert ep.edited_at is not None  # edit_verdict applies only versions with an edit time
        links = tuple(self._extractor.links(ep))
        return EpisodeEdit(
            ep.id, ep.team, ep.text, ep.edited_at, ep.content_hash(), links, flagged(ep.text), LINT_VERSION
        )

    @staticmethod
    def _raise_if(errors: Sequence[LineError]) -> None:
        if errors:
            raise EpisodeFileError(errors[:MAX_REPORTED_ERRORS], len(errors))

    def _embed_missing(
        self, episodes: Sequence[Episode], previously_present: set[str], progress: IngestProgress
    ) -> int:
        """Embed the live episodes that have no vector, in batches: an interrupted ingest keeps the
        batches written, and running it again (or reconcile, or the next night) embeds the rest."""
        repaired = 0
        by_team: dict[str, list[Episode]] = {}
        for e in episodes:
            by_team.setdefault(e.team, []).append(e)
        todo_by_team: list[tuple[str, list[Episode], dict[str, str]]] = []
        for team, eps in sorted(by_team.items()):
            have = self._vectors.present(team, "episodes", [e.id for e in eps])
            todo = [e for e in eps if e.id not in have]
            if not todo:
                continue
            # Embed what the graph holds: the source of truth, whatever the input said.
            texts = self._graph.live_texts(team, "episode", [e.id for e in todo])
            todo_by_team.append((team, [e for e in todo if e.id in texts], texts))
        progress.to_embed = sum(len(todo) for _, todo, _ in todo_by_team)
        progress.changed()
        for team, todo, texts in todo_by_team:
            for start in range(0, len(todo), EMBED_BATCH):
                batch = todo[start : start + EMBED_BATCH]
                self._vectors.upsert(
                    team,
                    "episodes",
                    [e.id for e in batch],
                    [texts[e.id] for e in batch],
                    [episode_metadata(e) for e in batch],
                )
                progress.embedded += len(batch)
                progress.changed()
                pausepoint("ingest.after_vector_batch")
            repaired += sum(1 for e in todo if e.id in previously_present)
        return repaired
