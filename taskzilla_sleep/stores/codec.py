"""Models as graph properties and back: the one place rows and models meet.

Times are epoch milliseconds in the graph (both Cypher dialects agree on integers, not on
``datetime()``), enums are their values, and ``None`` is simply not set.
"""

from __future__ import annotations

import json
from datetime import datetime
from enum import Enum

from pydantic import ValidationError

from taskzilla_sleep.core.models import (
    EPISODE_LIVE,
    STEP_DONE,
    Contradiction,
    Episode,
    EpisodeStatus,
    Pattern,
    PatternStatus,
    Provenance,
    Run,
    Tombstone,
    from_ms,
    iso_time,
    to_ms,
)
from taskzilla_sleep.stores.executor import Row
from taskzilla_sleep.stores.ports import (
    AlertRecord,
    ArchivedItem,
    ChangeRecord,
    EpisodeCard,
    EpisodeRecord,
    ItemRef,
    ItemUpdate,
    Mention,
    PatternCard,
    Retirement,
)

# What turning stored props into a model raises when a value is out of range, of the wrong type or
# missing (written by an older version or by hand): the item is skipped and quarantined, never fatal.
UNREADABLE = (ValueError, TypeError, KeyError, OverflowError, AttributeError)


def why_unreadable(exc: BaseException) -> str:
    """A short reason for the log and the node (no stored text: values stay out of it)."""
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(str(x) for x in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors()[:3])
    if isinstance(exc, KeyError):
        return f"missing property {exc}"
    return f"{type(exc).__name__}: {exc}"[:300]


def value(v: object) -> object:
    """One value as the graph holds it."""
    if isinstance(v, datetime):
        return to_ms(v)
    if isinstance(v, Enum):
        return v.value
    return v


def _time(p: Row, key: str) -> datetime | None:
    v = p.get(key)
    return from_ms(int(v)) if v is not None else None


# -- episodes --------------------------------------------------------------------------------------


def episode_props(ep: Episode) -> Row:
    """An Episode as graph properties (None values are simply not set)."""
    props: Row = {
        "id": ep.id,
        "team": ep.team,
        "channel": ep.channel,
        "author": ep.author,
        "text": ep.text,
        "ts": to_ms(ep.ts),
        "provenance": ep.provenance.value,
        "connector": ep.connector,
        "thread_id": ep.thread_id,
        "reply_to": ep.reply_to,
        "edited_at": to_ms(ep.edited_at) if ep.edited_at else None,
        "status": ep.status.value,
        "schema_absorbed": ep.schema_absorbed,
        "absorbed_at": to_ms(ep.absorbed_at) if ep.absorbed_at else None,
        "absorbed_by": ep.absorbed_by,
        "ingested_at": to_ms(ep.ingested_at),
        "last_accessed": to_ms(ep.last_accessed) if ep.last_accessed else None,
        "pinned": ep.pinned,
        "distilled_at": to_ms(ep.distilled_at) if ep.distilled_at else None,
        "distill_attempts": ep.distill_attempts or None,
        "distill_night": ep.distill_night,
        "declined_size": ep.declined_size or None,
        "injection": ep.injection,
        "injection_lint": ep.injection_lint,
        "content_hash": ep.content_hash(),
    }
    return {k: v for k, v in props.items() if v is not None}


def episode_from_props(p: Row) -> Episode:
    return Episode(
        id=p["id"],
        team=p["team"],
        channel=p["channel"],
        author=p["author"],
        text=p.get("text") or "",
        ts=_time(p, "ts"),
        provenance=p["provenance"],
        connector=p.get("connector"),
        thread_id=p.get("thread_id"),
        reply_to=p.get("reply_to"),
        edited_at=_time(p, "edited_at"),
        status=p.get("status", "raw"),
        schema_absorbed=int(p.get("schema_absorbed") or 0),
        absorbed_at=_time(p, "absorbed_at"),
        absorbed_by=p.get("absorbed_by"),
        ingested_at=_time(p, "ingested_at"),
        last_accessed=_time(p, "last_accessed"),
        pinned=bool(p.get("pinned", False)),
        distilled_at=_time(p, "distilled_at"),
        distill_attempts=int(p.get("distill_attempts") or 0),
        distill_night=p.get("distill_night"),
        declined_size=int(p.get("declined_size") or 0),
        injection=_flag(p.get("injection")),
        injection_lint=p.get("injection_lint"),
    )


def _flag(v: object) -> bool | None:
    """A stored injection flag: a boolean, or None when none was kept (anything else is unreadable)."""
    if v is None or isinstance(v, bool):
        return v
    raise TypeError(f"injection flag is {type(v).__name__}, not a boolean")


def episode_card_from_row(r: Row) -> EpisodeCard:
    return EpisodeCard(
        id=str(r["id"]),
        team=str(r["team"]),
        channel=str(r["channel"]),
        author=str(r["author"]),
        text=str(r["text"] or ""),
        ts=from_ms(int(r["ts"])),
        provenance=Provenance(r["provenance"]),
        status=EpisodeStatus(r["status"]),
        absorbed_by=None if r["absorbed_by"] is None else str(r["absorbed_by"]),
        injection=_flag(r.get("injection")),
        injection_lint=None if r.get("injection_lint") is None else str(r["injection_lint"]),
        # A repeat's owner comes in a list of one: a list that collect keeps when the owner is null.
        repeats=tuple(None if o[0] is None else str(o[0]) for o in r.get("repeats") or ()),
        others=tuple((str(i), str(t or ""), None if o is None else str(o)) for i, t, o in r.get("others") or ()),
    )


def record_row(r: EpisodeRecord) -> Row:
    """An exported episode as ``restore_episodes`` writes it: its own hash, no text once dropped."""
    props = episode_props(r.episode)
    if r.episode.status not in EPISODE_LIVE:
        props.pop("text", None)
    if r.content_hash is None:
        props.pop("content_hash", None)
    else:
        props["content_hash"] = r.content_hash
    links = [{"key": m.key, "team": r.episode.team, "kind": m.kind, "name": m.name, "role": m.role} for m in r.mentions]
    return {"id": r.episode.id, "props": props, "links": links}


def record_from_row(p: Row, mentions: list[list[object]]) -> EpisodeRecord:
    found = sorted(
        (Mention(str(k), str(kind), str(name), str(role)) for k, kind, name, role in mentions if k is not None),
        key=lambda m: (m.key, m.role),
    )
    h = p.get("content_hash")
    return EpisodeRecord(episode_from_props(p), h if isinstance(h, str) else None, tuple(found))


def update_row(u: ItemUpdate) -> Row:
    """``{"id", "set"}`` for ``SET n += row.set``: only the fields the update gives (None clears one)."""
    return {"id": u.id, "set": {k: value(v) for k, v in u.changes().items()}}


def update_rows(u: ItemUpdate) -> list[Row]:
    """``update_row`` with each field to clear in a row of its own: FalkorDB 4.16 (FalkorDB#1787)
    removes the wrong properties when one SET clears two or more of a node, but applies the rows of
    one UNWIND one by one, correctly (tests/contract/test_graph_store.py, "releasing")."""
    changes = {k: value(v) for k, v in u.changes().items()}
    kept = {k: v for k, v in changes.items() if v is not None}
    rows: list[Row] = [{"id": u.id, "set": kept}] if kept or not changes else []
    return rows + [{"id": u.id, "set": {k: None}} for k, v in changes.items() if v is None]


def retirement_row(r: Retirement) -> Row:
    return {"id": r.id, "status": r.status.value, "at": to_ms(r.at), "reason": r.reason, "pattern_id": r.pattern_id}


# -- patterns --------------------------------------------------------------------------------------

_PATTERN_TIMES = ("first_seen", "last_seen", "created_at", "updated_at", "valid_from", "valid_to", "archived_at")


def _times_to_ms(d: Row, keys: tuple[str, ...]) -> Row:
    for k in keys:
        d[k] = to_ms(d[k]) if d.get(k) is not None else None
    return d


def _times_from_ms(d: Row, keys: tuple[str, ...]) -> Row:
    d = dict(d)
    for k in keys:
        if d.get(k) is not None:
            d[k] = from_ms(int(d[k]))
    return d


def pattern_props(p: Pattern) -> Row:
    d = _times_to_ms(p.model_dump(mode="python"), _PATTERN_TIMES)
    d["kind"] = p.kind.value
    d["status"] = p.status.value
    d["evidence"] = p.evidence.value if p.evidence is not None else None
    d["evidence_ids"] = list(p.evidence_ids)
    d["subjects"] = list(p.subjects)
    return d


def pattern_from_props(d: Row) -> Pattern:
    d = _times_from_ms(d, _PATTERN_TIMES)
    d.pop("last_accessed", None)
    d["evidence_ids"] = list(d.get("evidence_ids") or [])
    d["subjects"] = list(d.get("subjects") or [])
    return Pattern.model_validate(d)


def card_from_row(r: Row) -> PatternCard:
    return PatternCard(
        id=r["id"],
        statement=str(r["statement"]),
        status=PatternStatus(r["status"]),
        pinned=bool(r["pinned"]),
        subjects=tuple(r["subjects"] or ()),
        confidence=float(r["confidence"]),
        support_count=int(r["support_count"] or 0),
    )


# -- contradictions --------------------------------------------------------------------------------

_CONTRADICTION_TIMES = ("opened_at", "resolved_at")


def contradiction_props(c: Contradiction) -> Row:
    d = _times_to_ms(c.model_dump(mode="python"), _CONTRADICTION_TIMES)
    d["status"] = c.status.value
    d["kind"] = c.kind.value
    return d


def contradiction_from_props(d: Row) -> Contradiction:
    return Contradiction.model_validate(_times_from_ms(d, _CONTRADICTION_TIMES))


# -- tombstones -----------------------------------------------------------------------------------


def tombstone_props(t: Tombstone) -> Row:
    d = t.model_dump(mode="python")
    d["at"] = to_ms(t.at)
    return {k: v for k, v in d.items() if v is not None}


def tombstone_from_props(d: Row) -> Tombstone:
    return Tombstone.model_validate({**d, "at": from_ms(int(d["at"]))})


# -- the run ledger --------------------------------------------------------------------------------


def run_props(run: Run) -> Row:
    return {
        "trigger": run.trigger,
        "started_at": to_ms(run.started_at),
        "finished_at": to_ms(run.finished_at) if run.finished_at else None,
        "now": to_ms(run.now),
        "dry_run": run.dry_run,
        "slot": run.slot,
        "team": run.team,
        "ok": all(s.status in STEP_DONE for s in run.steps) and run.finished_at is not None,
        "steps_json": json.dumps([s.model_dump(mode="json") for s in run.steps]),
        "extra_json": json.dumps(
            {
                "sizes_before": run.sizes_before,
                "sizes_after": run.sizes_after,
                "pattern_lags_s": run.pattern_lags_s,
                "memory_index_entries": run.memory_index_entries,
            }
            | (
                {"undone_at": iso_time(run.undone_at), "undone_by": run.undone_by, "undo_reason": run.undo_reason}
                if run.undone_at is not None
                else {}
            )
        ),
    }


def run_from_props(d: Row) -> Run:
    return Run.model_validate(
        {
            "id": d["id"],
            "trigger": d["trigger"],
            "started_at": from_ms(int(d["started_at"])),
            "finished_at": from_ms(int(d["finished_at"])) if d.get("finished_at") else None,
            "now": from_ms(int(d["now"])),
            "dry_run": bool(d.get("dry_run", False)),
            "steps": json.loads(d.get("steps_json") or "[]"),
            "slot": d.get("slot"),
            "team": d.get("team"),
            **json.loads(d.get("extra_json") or "{}"),
        }
    )


# -- the alert outbox ------------------------------------------------------------------------------

_ALERT_TIMES = ("next_attempt_at", "created_at", "last_attempt_at", "delivered_at")


def alert_props(a: AlertRecord) -> Row:
    d = _times_to_ms(a.model_dump(mode="python", exclude={"key"}), _ALERT_TIMES)
    return {k: v for k, v in d.items() if v is not None}


def alert_from_props(p: Row) -> AlertRecord:
    return AlertRecord(
        key=p["key"],
        channel=p["channel"],
        channel_kind=p.get("channel_kind", "?"),
        kind=p["kind"],
        team=p.get("team"),
        contradiction_id=p.get("contradiction_id"),
        payload_json=p["payload_json"],
        status=p["status"],
        attempts=int(p.get("attempts") or 0),
        next_attempt_at=from_ms(int(p["next_attempt_at"])),
        last_error=p.get("last_error"),
        created_at=from_ms(int(p["created_at"])),
        last_attempt_at=_time(p, "last_attempt_at"),
        delivered_at=_time(p, "delivered_at"),
        dropped_reason=p.get("dropped_reason"),
        message_ref=p.get("message_ref"),
    )


# -- the archive ------------------------------------------------------------------------------------

_CHANGE_TIMES = ("at", "recorded_at", "undone_at", "purged_at")


def image_key(change: str, label: str, key: str) -> str:
    """An image's unique key: one per change and item."""
    return f"{change}|{label}|{key}"


def props_json(props: Row) -> str:
    """An item's properties as its image keeps them: JSON with sorted keys, so equal props are equal bytes."""
    return json.dumps(props, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def change_props(c: ChangeRecord) -> Row:
    d = _times_to_ms(c.model_dump(mode="python"), _CHANGE_TIMES)
    d["teams"] = list(c.teams)
    return {k: v for k, v in d.items() if v is not None}


def change_from_props(d: Row) -> ChangeRecord:
    d = _times_from_ms(d, _CHANGE_TIMES)
    d["teams"] = tuple(d.get("teams") or ())
    return ChangeRecord.model_validate(d)


def image_of(change: str, team: str, ref: ItemRef, state: tuple[Row, str, str | None] | None) -> ArchivedItem:
    """The before-image of ``ref`` from its current ``state`` (properties without an episode's text,
    owned edges as JSON, the text), or of an item the change is about to create (``state`` None)."""
    if state is None:
        return ArchivedItem(change=change, team=team, label=ref.label, key=ref.key, existed=False)
    props, edges, text = state
    return ArchivedItem(
        change=change,
        team=team,
        label=ref.label,
        key=ref.key,
        existed=True,
        props=props_json(props),
        edges=edges,
        text=text if ref.text else None,
    )


def archived_row(a: ArchivedItem, at: datetime) -> Row:
    """An image as the graph holds it (``at``: its change's time, which the purge counts from)."""
    row: Row = {
        "key": image_key(a.change, a.label, a.key),
        "change": a.change,
        "team": a.team,
        "label": a.label,
        "item": f"{a.label}|{a.key}",
        "ref": a.key,
        "existed": a.existed,
        "props": a.props,
        "edges": a.edges,
        "at": to_ms(at),
        "bytes": len(a.props.encode()) + len(a.edges.encode()),
    }
    if a.text is not None:
        row["text"] = a.text
        row["text_bytes"] = len(a.text.encode())
    return row


def archived_from_row(p: Row) -> ArchivedItem:
    return ArchivedItem(
        change=str(p["change"]),
        team=str(p["team"]),
        label=p["label"],
        key=str(p["ref"]),
        existed=bool(p["existed"]),
        props=str(p["props"]),
        edges=str(p.get("edges") or "[]"),
        text=p.get("text"),
    )
