"""A team's whole memory as JSONL, and back into any backend pair (export -> import).

One JSON object a line, each with a ``type``: the header first (``format``, ``version``, ``team``,
``exported_at``), then episodes (with the content hash kept at ingest and the entities they mention),
patterns and facts (pinned patterns; with the entities they are ABOUT and the episodes they are
EVIDENCED_BY), links between patterns, contradictions, tombstones, the run ledger, the team's meta
keys (watermarks, the distill journal) and the team's queued chat alerts.

Vectors are not exported: they are derived data. The import embeds every live item again with the
target's embedder (the same embedder gives the same vectors, so recall answers the same).

The run ledger belongs to the deployment, not to one team: every run is exported, and an import adds
the runs it does not have. Import validates the whole file before it writes anything. It refuses a
team that already holds data unless ``replace`` is given, which first deletes that team's memory from
both stores; there is no merge (two histories of one team would double beliefs and their ledgers). A
crash mid-import leaves part of the team: run the import again with ``replace``.

``progress(phase, done, total)`` follows the writes: ``delete`` (with ``replace``), ``graph`` (every
item of the file), ``vectors`` (the live items embedded again).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import IO, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from taskzilla_sleep.errors import Conflict, InputError
from taskzilla_sleep.ingest import episode_metadata
from taskzilla_sleep.models import (
    EPISODE_LIVE,
    PATTERN_LIVE,
    TEAM_RE,
    Contradiction,
    Episode,
    Pattern,
    Run,
    Time,
    Tombstone,
    iso_time,
)
from taskzilla_sleep.steps.distill.read import LAST_DISTILL, LEGACY_WATERMARK
from taskzilla_sleep.steps.distill.write import JOURNAL
from taskzilla_sleep.steps.reflect import DEFERRED, WATERMARK
from taskzilla_sleep.stores.ports import (
    AlertRecord,
    EpisodeRecord,
    EpisodeUpdate,
    GraphStore,
    Mention,
    PatternLink,
    VectorStore,
)

FORMAT = "taskzilla-export"
VERSION = 1
META_KEYS = (WATERMARK, DEFERRED, LAST_DISTILL, LEGACY_WATERMARK, JOURNAL)  # each "...:{team}"
ALL_RUNS = 1_000_000
BATCH = 500


class Header(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["header"]
    format: Literal["taskzilla-export"]
    version: Literal[1]
    team: str = Field(pattern=TEAM_RE)
    exported_at: Time


class MentionLine(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str
    kind: str
    name: str
    role: str


class EpisodeLine(Episode):
    type: Literal["episode"]
    ingest_hash: str | None = None  # the content hash kept at ingest (recognises a re-delivery once the text is gone)
    mentions: list[MentionLine] = Field(default_factory=list)


class PatternLine(Pattern):
    type: Literal["pattern", "fact"]
    about: list[str] = Field(default_factory=list)
    evidence_links: list[str] = Field(default_factory=list)


class LinkLine(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["link"]
    a: str
    relation: Literal["REFINES", "COMPATIBLE_WITH", "UNRELATED_TO", "MERGED_INTO", "SUPERSEDES"]
    b: str
    prompt: str | None = None


class ContradictionLine(Contradiction):
    type: Literal["contradiction"]


class TombstoneLine(Tombstone):
    type: Literal["tombstone"]


class RunLine(Run):
    type: Literal["run"]


class MetaLine(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["meta"]
    key: str
    value: str


class AlertLine(AlertRecord):
    type: Literal["alert"]


LINE_TYPES: dict[str, type[BaseModel]] = {
    "episode": EpisodeLine,
    "pattern": PatternLine,
    "fact": PatternLine,
    "link": LinkLine,
    "contradiction": ContradictionLine,
    "tombstone": TombstoneLine,
    "run": RunLine,
    "meta": MetaLine,
    "alert": AlertLine,
}


class ImportReport(BaseModel):
    team: str
    replaced: bool
    counts: dict[str, int]  # lines by type
    vectors: dict[str, int]  # embedded again, by collection


# -- export -----------------------------------------------------------------------------------------


def _line(kind: str, model: BaseModel, **extra: Any) -> str:
    return json.dumps({"type": kind, **model.model_dump(mode="json"), **extra}, ensure_ascii=False, sort_keys=True)


def export_team(
    graph: GraphStore, vectors: VectorStore, team: str, out: IO[str], now: datetime | None = None
) -> dict[str, int]:
    """Write ``team``'s memory to ``out``; returns how many lines of each type. ``vectors`` is not
    read (vectors are derived data): it is in the signature so every memory function looks alike."""
    del vectors
    header = {"type": "header", "format": FORMAT, "version": VERSION, "team": team}
    out.write(json.dumps(header | {"exported_at": iso_time(now or datetime.now(UTC))}) + "\n")
    counts: dict[str, int] = {}

    def put(kind: str, text: str) -> None:
        out.write(text + "\n")
        counts[kind] = counts.get(kind, 0) + 1

    for r in graph.episode_records(team):
        mentions = [MentionLine(key=m.key, kind=m.kind, name=m.name, role=m.role).model_dump() for m in r.mentions]
        put("episode", _line("episode", r.episode, ingest_hash=r.content_hash, mentions=mentions))
    edges = graph.pattern_edges(team)
    for p in graph.patterns(team):
        e = edges.get(p.id)
        kind = "fact" if p.pinned else "pattern"
        put(kind, _line(kind, p, about=list(e.about if e else ()), evidence_links=list(e.evidence if e else ())))
    for lk in graph.pattern_links(team):
        put("link", json.dumps({"type": "link", "a": lk.a, "relation": lk.relation, "b": lk.b, "prompt": lk.prompt}))
    for c in graph.contradictions(team):
        put("contradiction", _line("contradiction", c))
    for t in graph.tombstones(team):
        put("tombstone", _line("tombstone", t))
    for run in sorted(graph.runs(ALL_RUNS), key=lambda r: (r.started_at, r.id)):
        if run.team in (None, team):  # a whole-memory run, or one of this team's jobs; not another team's
            put("run", _line("run", run))
    for key in (k.format(team=team) for k in META_KEYS):
        value = graph.get_meta(key)
        if value is not None:
            put("meta", json.dumps({"type": "meta", "key": key, "value": value}))
    for a in graph.alerts():
        if a.team == team:
            put("alert", _line("alert", a))
    return counts


# -- import: validate everything, then write --------------------------------------------------------


class Parsed(BaseModel):
    header: Header
    items: dict[str, list[Any]]  # by type ("fact" lines are with the patterns)


def _why(exc: ValidationError) -> str:
    e = exc.errors()[0]
    where = ".".join(str(x) for x in e["loc"]) or "value"
    return f"field {where}: {e['msg']}"


def parse_export(lines: Iterable[str], source: str = "<import>") -> Parsed:
    """Every line checked (JSON, type, fields, team, unique ids, references) before anything is written."""
    header: Header | None = None
    items: dict[str, list[Any]] = {k: [] for k in LINE_TYPES if k != "fact"}
    seen: dict[tuple[str, str], int] = {}
    n = 0
    for n, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        where = f"{source}:{n}"
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: not JSON ({exc.msg} at column {exc.colno}); nothing was imported") from None
        if not isinstance(obj, dict):
            raise InputError(f"{where}: a line must be a JSON object; nothing was imported")
        kind = obj.get("type")
        if header is None:
            if kind != "header":
                raise InputError(f"{where}: field type: the first line must be the header; nothing was imported")
            try:
                header = Header.model_validate(obj)
            except ValidationError as exc:
                raise InputError(f"{where}: header: {_why(exc)}; nothing was imported") from None
            continue
        model = LINE_TYPES.get(kind) if isinstance(kind, str) else None
        if model is None:
            known = ", ".join(sorted(LINE_TYPES))
            raise InputError(f"{where}: field type: {kind!r} is not one of {known}; nothing was imported")
        try:
            item = model.model_validate(obj)
        except ValidationError as exc:
            raise InputError(f"{where}: {kind}: {_why(exc)}; nothing was imported") from None
        team = getattr(item, "team", header.team)
        if team != header.team and not (kind == "run" and team is None):  # a run of every team's night
            raise InputError(f"{where}: field team: {team!r} is not the header's team {header.team!r}")
        ident = getattr(item, "id", None) or getattr(item, "key", None)
        group = "pattern" if kind == "fact" else str(kind)
        if isinstance(ident, str):
            if (group, ident) in seen:
                raise InputError(f"{where}: field id: {ident!r} is already on line {seen[(group, ident)]}")
            seen[(group, ident)] = n
        items[group].append(item)
    if header is None:
        raise InputError(f"{source}: empty: no header line; nothing was imported")
    _check_references(items, seen, source)
    return Parsed(header=header, items=items)


def _check_references(items: dict[str, list[Any]], seen: dict[tuple[str, str], int], source: str) -> None:
    for p in items["pattern"]:
        for eid in p.evidence_links:
            if ("episode", eid) not in seen:
                where = f"{source}:{seen[('pattern', p.id)]}"
                raise InputError(f"{where}: field evidence_links: episode {eid!r} is not in the file")
    for e in items["episode"]:
        if e.status in EPISODE_LIVE and not e.text.strip():
            where = f"{source}:{seen[('episode', e.id)]}"
            raise InputError(f"{where}: field text: a {e.status.value} episode needs its text")


def import_team(
    graph: GraphStore,
    vectors: VectorStore,
    lines: Iterable[str],
    source: str = "<import>",
    replace: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> ImportReport:
    parsed = parse_export(lines, source)
    team = parsed.header.team
    items = parsed.items
    tell = progress or (lambda _phase, _done, _total: None)
    held = team in graph.teams() or team in vectors.teams() or bool(graph.tombstones(team))
    if held and not replace:
        raise Conflict(
            f"team {team!r} already has memory in the target stores; nothing was imported "
            "(import with --replace to delete that team's memory first)"
        )
    if held:
        tell("delete", 0, 1)
        graph.delete_team(team)
        for vkind in ("episodes", "patterns"):
            vectors.delete(team, vkind, sorted(vectors.present(team, vkind)))
        tell("delete", 1, 1)
    total = sum(len(v) for v in items.values())
    written = 0
    tell("graph", 0, total)
    episodes: list[EpisodeLine] = items["episode"]
    records = [
        EpisodeRecord(
            Episode.model_validate(e.model_dump(exclude={"type", "ingest_hash", "mentions"})),
            e.ingest_hash,
            tuple(Mention(m.key, m.kind, m.name, m.role) for m in e.mentions),
        )
        for e in episodes
    ]
    for i in range(0, len(records), BATCH):
        graph.restore_episodes(records[i : i + BATCH])
        written += len(records[i : i + BATCH])
        tell("graph", written, total)
    patterns: list[PatternLine] = items["pattern"]
    for p in patterns:
        plain = Pattern.model_validate(p.model_dump(exclude={"type", "about", "evidence_links"}))
        graph.write_pattern(plain, p.about, [EpisodeUpdate(id=i) for i in p.evidence_links])
        written += 1
        tell("graph", written, total)
    graph.restore_pattern_links([PatternLink(x.a, x.relation, x.b, x.prompt) for x in items["link"]])
    graph.restore_contradictions([Contradiction.model_validate(_plain(c)) for c in items["contradiction"]])
    graph.restore_tombstones([Tombstone.model_validate(_plain(t)) for t in items["tombstone"]])
    for r in items["run"]:
        graph.save_run(Run.model_validate(_plain(r)))
    for m in items["meta"]:
        graph.set_meta(m.key, m.value)
    graph.queue_alerts([AlertRecord.model_validate(_plain(a)) for a in items["alert"]])
    tell("graph", total, total)
    embedded = _embed(vectors, team, [r.episode for r in records], patterns, tell)
    counts = {k: len(v) for k, v in items.items()}
    counts["fact"] = sum(1 for p in patterns if p.pinned)
    counts["pattern"] -= counts["fact"]
    return ImportReport(team=team, replaced=held, counts=counts, vectors=embedded)


def _plain(item: BaseModel) -> dict[str, Any]:
    return item.model_dump(exclude={"type"})


def _embed(
    vectors: VectorStore,
    team: str,
    episodes: Sequence[Episode],
    patterns: Sequence[Pattern],
    tell: Callable[[str, int, int], None],
) -> dict[str, int]:
    """The live items' vectors, embedded again by the target (graph written first, as everywhere)."""
    live = [e for e in episodes if e.status in EPISODE_LIVE]
    beliefs = [p for p in patterns if p.status in PATTERN_LIVE]
    total = len(live) + len(beliefs)
    tell("vectors", 0, total)
    for i in range(0, len(live), BATCH):
        part = live[i : i + BATCH]
        vectors.upsert(
            team, "episodes", [e.id for e in part], [e.text for e in part], [episode_metadata(e) for e in part]
        )
        tell("vectors", i + len(part), total)
    for i in range(0, len(beliefs), BATCH):
        some = beliefs[i : i + BATCH]
        vectors.upsert(
            team,
            "patterns",
            [p.id for p in some],
            [p.statement for p in some],
            [{"kind": p.kind.value, "topic": p.topic} for p in some],
        )
        tell("vectors", len(live) + i + len(some), total)
    return {"episodes": len(live), "patterns": len(beliefs)}
