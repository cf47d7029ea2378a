"""`import --as-team NEW`: a team's export read as another team's, into any stores (its own too).

Ids are unique per store, so the copy gets its own, derived from the new team, never random (the same
file copied twice gives the same ids). Where the product derives an id from a team and content, the
copy gets the id the new team's own work would give: an episode's ``ep_`` id from its message (what a
re-delivery to the new team finds), a fact's ``fact_`` id from its statement (what pinning it again
finds), a contradiction's ``con_`` id from its two beliefs (what reflect opens again). Any other id (a
connector's message id, a belief's ``pat_`` id, an id whose content is gone) becomes a hash of (new
team, old id) with the same prefix. Every reference follows: evidence, absorption, supersession,
links, contradictions, tombstones, reflect's deferred list; entity keys and meta keys name the new team.

Not copied: the runs (the copy never ran those nights: the deployment's ledger would count them twice)
and the queued chat alerts (the source's conversations; the copy's open contradictions are alerted by
its next night like any). A distill journal left open (exported while a night applied a distill) is
refused: it holds the source's ids.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from taskzilla_sleep.core.errors import InputError
from taskzilla_sleep.core.models import EPISODE_LIVE, episode_id_for
from taskzilla_sleep.memory.admin.export_file import (
    META_KEYS,
    ContradictionLine,
    EpisodeLine,
    MetaLine,
    Parsed,
    PatternLine,
    TombstoneLine,
)
from taskzilla_sleep.memory.facts import fact_id
from taskzilla_sleep.memory.meta_keys import DISTILL_JOURNAL as JOURNAL
from taskzilla_sleep.memory.meta_keys import REFLECT_DEFERRED as DEFERRED
from taskzilla_sleep.rules.policies import contradiction_id


def hashed(prefix: str, team: str, old: str) -> str:
    """The copy's id of ``old`` in ``team`` when no content derives one: deterministic, prefix kept."""
    return prefix + hashlib.sha256(f"{team}\x1e{old}".encode()).hexdigest()[:24]


class IdMap:
    """The copy's id of every id of the file (and of the ids it names that are not in it)."""

    def __init__(self, parsed: Parsed, team: str) -> None:
        old = parsed.team
        self.team = team
        self.episodes: dict[str, str] = {}
        for e in parsed.items["episode"]:
            derived = e.status in EPISODE_LIVE and e.id == episode_id_for(old, e.channel, e.author, e.ts, e.text)
            self.episodes[e.id] = (
                episode_id_for(team, e.channel, e.author, e.ts, e.text) if derived else hashed("ep_", team, e.id)
            )
        self.patterns: dict[str, str] = {}
        for p in parsed.items["pattern"]:
            if p.id == fact_id(old, p.statement):
                self.patterns[p.id] = fact_id(team, p.statement)
            else:
                self.patterns[p.id] = hashed("fact_" if p.id.startswith("fact_") else "pat_", team, p.id)
        self.contradictions: dict[str, str] = {}
        for c in parsed.items["contradiction"]:
            a, b = self.pattern(c.old_pattern_id), self.pattern(c.new_pattern_id)
            natural = c.id == contradiction_id(old, c.old_pattern_id, c.new_pattern_id)
            self.contradictions[c.id] = contradiction_id(team, a, b) if natural else hashed("con_", team, c.id)
        for what, ids in (
            ("episode", self.episodes),
            ("pattern", self.patterns),
            ("contradiction", self.contradictions),
        ):
            if len(set(ids.values())) != len(ids):  # a sha-256 clash, or two items of one content
                raise InputError(f"--as-team {team}: two {what}s of the file would get one id; nothing was imported")

    def episode(self, old: str) -> str:
        return self.episodes.get(old) or hashed("ep_", self.team, old)

    def pattern(self, old: str) -> str:
        return self.patterns.get(old) or hashed("pat_", self.team, old)


def copy_as(parsed: Parsed, team: str, source: str) -> Parsed:
    """``parsed`` (checked: every line of its header's team) as team ``team``'s memory."""
    old = parsed.team
    ids = IdMap(parsed, team)
    items = parsed.items

    def key(k: str) -> str:  # entity keys are "{team}/{kind}/{name}" (checked when parsed)
        return f"{team}/{k.removeprefix(f'{old}/')}"

    episodes = [_episode(e, ids, key) for e in items["episode"]]
    patterns = [_pattern(p, ids, key) for p in items["pattern"]]
    links = [x.model_copy(update={"a": ids.pattern(x.a), "b": ids.pattern(x.b)}) for x in items["link"]]
    contradictions = [_contradiction(c, ids) for c in items["contradiction"]]
    tombstones = [_tombstone(t, ids) for t in items["tombstone"]]
    meta = [_meta(m, old, ids, source) for m in items["meta"]]
    copied: dict[str, list[Any]] = {
        "episode": episodes,
        "pattern": patterns,
        "link": links,
        "contradiction": contradictions,
        "tombstone": tombstones,
        "run": [],
        "meta": meta,
        "alert": [],
        "change": [],
        "archived": [],
    }
    # The archive's images hold the source team's ids inside their JSON: a copy starts without one.
    left_out = {k: len(items[k]) for k in ("run", "alert", "change", "archived") if items[k]}
    header = parsed.header.model_copy(update={"team": team})
    return Parsed(header=header, items=copied, warnings=list(parsed.warnings), left_out=left_out)


def _episode(e: EpisodeLine, ids: IdMap, key: Callable[[str], str]) -> EpisodeLine:
    copy = e.model_copy(
        update={
            "id": ids.episode(e.id),
            "team": ids.team,
            "absorbed_by": ids.pattern(e.absorbed_by) if e.absorbed_by else None,
            # A thread's ids follow the messages of the file; one the file does not hold stays as sent.
            "reply_to": ids.episodes.get(e.reply_to, e.reply_to) if e.reply_to else None,
            "thread_id": ids.episodes.get(e.thread_id, e.thread_id) if e.thread_id else None,
            "mentions": [m.model_copy(update={"key": key(m.key)}) for m in e.mentions],
        }
    )
    # The hash kept at ingest covers the team: the new team's, while the text is there to hash.
    live = e.status in EPISODE_LIVE and bool(e.text)
    return copy.model_copy(update={"ingest_hash": copy.content_hash() if live else None})


def _pattern(p: PatternLine, ids: IdMap, key: Callable[[str], str]) -> PatternLine:
    update: dict[str, Any] = {
        "id": ids.pattern(p.id),
        "team": ids.team,
        "evidence_ids": [ids.episode(i) for i in p.evidence_ids],
        "evidence_links": [ids.episode(i) for i in p.evidence_links],
        "about": [key(k) for k in p.about],
    }
    if p.superseded_by:
        update["superseded_by"] = ids.pattern(p.superseded_by)
        if p.archived_reason:  # "merged into pat_... (same belief)"
            update["archived_reason"] = p.archived_reason.replace(p.superseded_by, update["superseded_by"])
    return p.model_copy(update=update)


def _contradiction(c: ContradictionLine, ids: IdMap) -> ContradictionLine:
    return c.model_copy(
        update={
            "id": ids.contradictions[c.id],
            "team": ids.team,
            "old_pattern_id": ids.pattern(c.old_pattern_id),
            "new_pattern_id": ids.pattern(c.new_pattern_id),
        }
    )


def _tombstone(t: TombstoneLine, ids: IdMap) -> TombstoneLine:
    return t.model_copy(
        update={
            "id": ids.episode(t.id) if t.kind == "episode" else ids.pattern(t.id),
            "team": ids.team,
            "pattern_id": ids.pattern(t.pattern_id) if t.pattern_id else None,
        }
    )


def _meta(m: MetaLine, old: str, ids: IdMap, source: str) -> MetaLine:
    name = next(k for k in META_KEYS if k.format(team=old) == m.key)  # checked when parsed
    value = m.value
    if name == JOURNAL and value:
        raise InputError(
            f"{source}: team {old!r}'s distill journal is open (the export was taken while a night applied a "
            "distill) and names its ids; export the team again once the night is over; nothing was imported"
        )
    if name == DEFERRED and value:
        try:
            held = json.loads(value)
        except ValueError:
            held = []
        value = json.dumps([ids.pattern(i) for i in held if isinstance(i, str)]) if isinstance(held, list) else ""
    return m.model_copy(update={"key": name.format(team=ids.team), "value": value})
