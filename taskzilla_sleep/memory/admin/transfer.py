"""A team's whole memory as JSONL, and back into any backend pair (export -> import).

The file (``export_file``) holds that team's memory and figures only, whoever exports it: the runs of
its own jobs (a run over several teams, a run-once without ``--team``, holds every team's sizes and
counts: it stays with the deployment); an import adds the runs it does not have. Vectors are not
exported: they are derived data. The import embeds every live item again with the target's embedder
(the same embedder gives the same vectors, so recall answers the same).

Import reads the whole file before it writes anything, and never changes another team: a file whose
episodes, patterns, contradictions or alerts the target holds under another team (a renamed export)
is refused. It refuses a team that already holds data unless ``replace`` is given, which first
deletes that team's memory from both stores; there is no merge (two histories of one team would
double beliefs and their ledgers). ``as_team`` copies the file under another team name
(``team_copy``): new ids, the source team untouched, in the same stores too. A crash mid-import
leaves part of the team: run the import again with ``replace``.

``progress(phase, done, total)`` follows the writes: ``delete`` (with ``replace``), ``graph`` (every
item of the file), ``vectors`` (the live items embedded again).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import IO, Any

import structlog
from pydantic import BaseModel, Field

from taskzilla_sleep.core.errors import Conflict
from taskzilla_sleep.core.models import (
    EPISODE_LIVE,
    PATTERN_LIVE,
    Contradiction,
    Episode,
    Pattern,
    Run,
    Tombstone,
)
from taskzilla_sleep.memory.admin.export_file import (
    DERIVED,
    META_KEYS,
    EpisodeLine,
    MentionLine,
    Parsed,
    PatternLine,
    Writer,
    line,
    parse_export,
)
from taskzilla_sleep.memory.admin.team_copy import copy_as
from taskzilla_sleep.memory.flags import with_flag
from taskzilla_sleep.memory.vector_meta import episode_metadata
from taskzilla_sleep.stores.ports import (
    AlertRecord,
    ChangeRecord,
    EpisodeRecord,
    EpisodeUpdate,
    GraphStore,
    Mention,
    PatternLink,
    VectorStore,
)

log = structlog.get_logger(__name__)

ALL_RUNS = 1_000_000
BATCH = 500


class ImportReport(BaseModel):
    team: str
    replaced: bool
    counts: dict[str, int]  # lines by type
    vectors: dict[str, int]  # embedded again, by collection
    copied_from: str | None = None  # as_team: the file's team, copied under ``team``
    left_out: dict[str, int] = Field(default_factory=dict)  # a copy's lines not imported, by type (runs, alerts)
    warnings: list[str] = Field(default_factory=list)  # e.g. an old file imported without a trailer


# -- export -----------------------------------------------------------------------------------------


def export_team(
    graph: GraphStore, vectors: VectorStore, team: str, out: IO[str], now: datetime | None = None
) -> dict[str, int]:
    """Write ``team``'s memory to ``out``; returns how many lines of each type. ``vectors`` is not
    read (vectors are derived data): it is in the signature so every memory function looks alike."""
    del vectors
    file = Writer(out, team, now or datetime.now(UTC))
    for r in graph.episode_records(team):
        mentions = [MentionLine(key=m.key, kind=m.kind, name=m.name, role=m.role).model_dump() for m in r.mentions]
        file.put("episode", line("episode", r.episode, ingest_hash=r.content_hash, mentions=mentions))
    edges = graph.pattern_edges(team)
    for p in graph.patterns(team):
        e = edges.get(p.id)
        kind = "fact" if p.pinned else "pattern"
        file.put(kind, line(kind, p, about=list(e.about if e else ()), evidence_links=list(e.evidence if e else ())))
    for lk in graph.pattern_links(team):
        link = {"type": "link", "a": lk.a, "relation": lk.relation, "b": lk.b, "prompt": lk.prompt}
        file.put("link", json.dumps(link))
    for c in graph.contradictions(team):
        file.put("contradiction", line("contradiction", c))
    for t in graph.tombstones(team):
        file.put("tombstone", line("tombstone", t))
    for run in sorted(graph.runs(ALL_RUNS, [team]), key=lambda r: (r.started_at, r.id)):
        file.put("run", line("run", run))  # the team's own jobs: a run over several teams holds their figures
    for key in (k.format(team=team) for k in META_KEYS):
        value = graph.get_meta(key)
        if value is not None:
            file.put("meta", json.dumps({"type": "meta", "key": key, "value": value}))
    for a in graph.alerts():
        if a.team == team:
            file.put("alert", line("alert", a))
    changes, archived = graph.archive_records(team)
    for change in changes:
        file.put("change", line("change", change))
    for item in archived:
        file.put("archived", line("archived", item))
    return file.close()


# -- import: validate everything, then write --------------------------------------------------------


def held_by_other_teams(graph: GraphStore, parsed: Parsed) -> list[str]:
    """The file's items the stores hold under another team (episodes, patterns and the patterns its
    contradictions name, contradictions, alerts): importing them would take them from that team."""
    team, items = parsed.team, parsed.items
    found: list[str] = []
    ep_ids = [e.id for e in items["episode"]]
    for i in range(0, len(ep_ids), BATCH):
        for eid, stored in sorted(graph.stored_episodes(ep_ids[i : i + BATCH]).items()):
            if stored.fields.get("team") != team:
                found.append(f"episode {eid!r} of team {stored.fields.get('team')!r}")
    in_file = {p.id for p in items["pattern"]}
    named = {i for c in items["contradiction"] for i in (c.old_pattern_id, c.new_pattern_id)} - in_file
    pat_ids = [p.id for p in items["pattern"]] + sorted(named)
    for i in range(0, len(pat_ids), BATCH):
        found += [
            f"pattern {p.id!r} of team {p.team!r}"
            for p in graph.patterns_by_id(pat_ids[i : i + BATCH])
            if p.team != team
        ]
    con_ids = {c.id for c in items["contradiction"]}
    if con_ids:
        found += [
            f"contradiction {c.id!r} of team {c.team!r}"
            for c in graph.contradictions()
            if c.id in con_ids and c.team != team
        ]
    keys = {a.key for a in items["alert"]}
    if keys:
        found += [f"alert {a.key!r} of team {a.team!r}" for a in graph.alerts() if a.key in keys and a.team != team]
    return found


def import_team(
    graph: GraphStore,
    vectors: VectorStore,
    lines: Iterable[str],
    source: str = "<import>",
    replace: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
    *,
    as_team: str | None = None,
    trailer: bool = True,
) -> ImportReport:
    parsed = parse_export(lines, source, trailer)
    copied_from = None
    if as_team is not None and as_team != parsed.team:
        copied_from, parsed = parsed.team, copy_as(parsed, as_team, source)
    team = parsed.team
    items = parsed.items
    tell = progress or (lambda _phase, _done, _total: None)
    others = held_by_other_teams(graph, parsed)
    if others:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        raise Conflict(
            f"{source}: the target stores hold {len(others)} of this file's items under another team ({shown}): "
            f"importing them as team {team!r} would take them from it; nothing was imported (a renamed export? "
            "to copy a team under a new name, import its own export with --as-team NEW)"
        )
    held = team in graph.teams() or team in vectors.teams() or bool(graph.tombstones(team))
    if held and not replace:
        raise Conflict(
            f"team {team!r} already has memory in the target stores; nothing was imported "
            "(import with --replace to delete that team's memory first)"
        )
    for warning in parsed.warnings:
        log.warning("import_unchecked", source=source, team=team, warning=warning)
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
    # The injection flag is not exported (derived, as vectors are): computed here, by this version's lint,
    # as an ingest does (a file that holds one anyway, edited by hand, is not trusted with it).
    records = [
        EpisodeRecord(
            _flagged(Episode.model_validate(e.model_dump(exclude={"type", "ingest_hash", "mentions"} | DERIVED))),
            e.ingest_hash,
            tuple(Mention(m.key, m.kind, m.name, m.role) for m in e.mentions),
        )
        for e in episodes
    ]
    for i in range(0, len(records), BATCH):
        graph.restore_episodes(records[i : i + BATCH])
        written += len(records[i : i + BATCH])
        tell("graph", written, total)
    graph.link_replies([r.episode.id for r in records if r.episode.reply_to])  # REPLY_TO, within the team
    patterns: list[PatternLine] = items["pattern"]
    for p in patterns:
        plain = Pattern.model_validate(p.model_dump(exclude={"type", "about", "evidence_links"}))
        graph.write_pattern(plain, p.about, [EpisodeUpdate(id=i) for i in p.evidence_links])
        written += 1
        tell("graph", written, total)
    graph.restore_pattern_links([PatternLink(x.a, x.relation, x.b, x.prompt) for x in items["link"]])
    graph.restore_contradictions([Contradiction.model_validate(_plain(c)) for c in items["contradiction"]])
    graph.restore_tombstones([Tombstone.model_validate(_plain(t)) for t in items["tombstone"]])
    if items["run"]:
        have = {r.id for r in graph.runs(ALL_RUNS)}  # the ledger's runs stay as they are (another team's too)
        for r in items["run"]:
            if r.id not in have:
                graph.save_run(Run.model_validate(_plain(r)))
    for m in items["meta"]:
        graph.set_meta(m.key, m.value)
    graph.queue_alerts([AlertRecord.model_validate(_plain(a)) for a in items["alert"]])
    graph.restore_archive(
        [ChangeRecord.model_validate(_plain(c)) for c in items["change"]], [a.item() for a in items["archived"]]
    )
    tell("graph", total, total)
    embedded = _embed(vectors, team, [r.episode for r in records], patterns, tell)
    counts = {k: len(v) for k, v in items.items()}
    counts["fact"] = sum(1 for p in patterns if p.pinned)
    counts["pattern"] -= counts["fact"]
    return ImportReport(
        team=team,
        replaced=held,
        counts=counts,
        vectors=embedded,
        copied_from=copied_from,
        warnings=parsed.warnings,
        left_out=parsed.left_out,
    )


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


def _flagged(ep: Episode) -> Episode:
    """``ep`` with the injection flag of its text (none once the text is dropped: nothing left to flag)."""
    return with_flag(ep) if ep.text else ep
