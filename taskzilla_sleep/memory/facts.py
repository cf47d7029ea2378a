"""Pinned facts: declared by a person (name, role, employer …), immune to every step, shown first by recall.

A pinned fact is a Pattern of kind ``fact`` with ``pinned`` set and confidence locked at 1.0:
prune, distill, reflect and decay never prune, bump, merge, contest away, rewrite or decay it.
Unpinning archives it (status retired) with who and when; it is never deleted.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime

from taskzilla_sleep.core.errors import Conflict, InputError, NotFound
from taskzilla_sleep.core.models import TEAM_RE, Pattern, PatternKind, PatternStatus, unstorable
from taskzilla_sleep.rules.policies import slug
from taskzilla_sleep.stores.ports import GraphStore, PatternUpdate, VectorStore


def fact_id(team: str, text: str) -> str:
    return "fact_" + hashlib.sha256(f"{team}\x1e{' '.join(text.split()).casefold()}".encode()).hexdigest()[:16]


def pin(
    graph: GraphStore, vectors: VectorStore, team: str, text: str, by: str, now: datetime, entity: str | None
) -> Pattern:
    statement = " ".join(text.split())
    if not re.fullmatch(TEAM_RE, team):
        # Checked before the graph write: the vector store would refuse the name after it.
        raise InputError(f"facts pin: invalid team name {team!r} (letters, digits, '_' and '-')")
    if not statement:
        raise InputError("facts pin: the fact text is empty")
    if len(statement) > 300:
        raise InputError(f"facts pin: the fact is {len(statement)} characters; the limit is 300")
    if not by.strip():
        raise InputError("facts pin: --by NAME is required (who declared this fact)")
    for what, value in (("the fact text", statement), ("--by", by), ("--entity", entity or "")):
        if (why := unstorable(value)) is not None:
            raise InputError(f"facts pin: {what}: {why}")
    fid = fact_id(team, statement)
    existing = graph.patterns_by_id([fid])
    if existing and existing[0].status is PatternStatus.ACTIVE:
        return existing[0]
    fact = Pattern(
        id=fid,
        team=team,
        statement=statement,
        kind=PatternKind.FACT,
        status=PatternStatus.ACTIVE,
        confidence=1.0,
        llm_confidence=None,
        evidence_ids=[],
        first_seen=now,
        last_seen=now,
        created_at=now,
        updated_at=now,
        valid_from=now,
        subjects=[entity] if entity else [],
        topic=slug(entity) if entity else "facts",
        pinned=True,
        pinned_by=by.strip(),
    )
    keys = [f"{team}/person/{entity.strip().lstrip('@').casefold()}"] if entity else []
    # Graph first, then the vector (a crash in between is repaired by reconcile or a rerun).
    graph.write_pattern(fact, keys, [])
    vectors.upsert(team, "patterns", [fid], [statement], [{"kind": "fact", "topic": fact.topic}])
    return fact


def list_facts(graph: GraphStore, team: str | None) -> list[Pattern]:
    teams = [team] if team else graph.teams()
    return [p for t in teams for p in graph.patterns(t) if p.pinned]


def unpin(graph: GraphStore, vectors: VectorStore, fid: str, by: str, now: datetime) -> Pattern:
    if (why := unstorable(by)) is not None:
        raise InputError(f"facts unpin: --by: {why}")
    found = graph.patterns_by_id([fid])
    if not found or not found[0].pinned:
        raise NotFound(f"facts unpin: no pinned fact with id {fid!r} (see `taskzilla-sleep facts list`)")
    fact = found[0]
    if fact.status is not PatternStatus.ACTIVE:
        raise Conflict(f"facts unpin: {fid} was already unpinned by {fact.archived_by} at {fact.archived_at}")
    graph.update_patterns(
        [
            PatternUpdate(
                id=fid,
                status=PatternStatus.RETIRED,
                archived_by=by,
                archived_at=now,
                archived_reason="unpinned",
                valid_to=now,
            )
        ]
    )
    vectors.delete(fact.team, "patterns", [fid])
    return graph.patterns_by_id([fid])[0]
