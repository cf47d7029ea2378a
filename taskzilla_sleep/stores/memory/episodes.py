"""Episodes in memory: the same observable behaviour as ``stores/cypher/episodes.py``."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from taskzilla_sleep.core.models import (
    EPISODE_LIVE,
    PATTERN_LIVE,
    EntityLink,
    Episode,
    EpisodeStatus,
    Provenance,
    to_ms,
)
from taskzilla_sleep.stores.memory.base import MemoryBase
from taskzilla_sleep.stores.ports import (
    EpisodeCard,
    EpisodeEdit,
    EpisodeFlag,
    EpisodeRecord,
    EpisodeUpdate,
    Forgetting,
    ItemKind,
    Mention,
    Retirement,
    StoredEpisode,
)

_TEXT_DROPPED = frozenset({EpisodeStatus.RETIRED, EpisodeStatus.PRUNED, EpisodeStatus.FORGOTTEN})


def _by_time(episodes: list[Episode]) -> list[Episode]:
    return sorted((e.model_copy() for e in episodes), key=lambda e: (e.ts, e.id))


class MemoryEpisodes(MemoryBase):
    def stored_episodes(self, ids: Sequence[str]) -> dict[str, StoredEpisode]:
        out: dict[str, StoredEpisode] = {}
        with self._lock:
            for i in ids:
                e = self.episode_nodes.get(i)
                if e is not None:
                    fields: dict[str, object] = dict(e.content())
                    if e.status in _TEXT_DROPPED or not e.text:
                        # retire_episodes removed the text, as in the graph; quarantine keeps it
                        fields["text"] = None
                    edited = to_ms(e.edited_at) if e.edited_at is not None else None
                    out[i] = StoredEpisode(e.status, self.hashes.get(i), fields, edited, i in self.edit_pending)
        return out

    def upsert_episodes(
        self, episodes: Sequence[Episode], links: Sequence[EntityLink], ingest: str | None = None
    ) -> int:
        with self._lock:
            self._maybe_fail()
            new: dict[str, Episode] = {}
            for ep in episodes:
                if ep.id not in self.episode_nodes:
                    new.setdefault(ep.id, ep)
            for ep in new.values():
                self.episode_nodes[ep.id] = ep.model_copy()
                self.hashes[ep.id] = ep.content_hash()
                if ingest is not None:
                    self.ingest_of[ep.id] = ingest
            self._link_entities([lk for lk in links if lk.episode_id in new])
            return len(new)

    def edit_episodes(self, edits: Sequence[EpisodeEdit]) -> list[str]:
        with self._lock:
            self._maybe_fail()
            done: list[str] = []
            for x in edits:
                e = self.episode_nodes.get(x.id)
                if e is None or e.team != x.team or e.status not in EPISODE_LIVE:
                    continue
                if e.edited_at is not None and e.edited_at >= x.edited_at:
                    continue
                self.episode_nodes[x.id] = e.model_copy(
                    update={
                        "text": x.text,
                        "edited_at": x.edited_at,
                        "status": EpisodeStatus.RAW,
                        "schema_absorbed": 0,
                        "absorbed_by": None,
                        "absorbed_at": None,
                        "distilled_at": None,
                        "distill_night": None,
                        "distill_attempts": 0,
                        "declined_size": 0,
                        "injection": x.injection,
                        "injection_lint": x.injection_lint,
                    }
                )
                self.hashes[x.id] = x.content_hash
                self.edit_pending[x.id] = time.time()
                self.evidence = {v for v in self.evidence if v[1] != x.id}
                self.mentions = {m for m in self.mentions if m[0] != x.id}
                self._link_entities(x.links)
                done.append(x.id)
            return done

    def unflagged_episodes(self, team: str, lint: str) -> dict[str, str]:
        with self._lock:
            return {
                e.id: e.text
                for e in self.episode_nodes.values()
                if e.team == team and e.status in EPISODE_LIVE and e.injection_lint != lint
            }

    def flag_episodes(self, flags: Sequence[EpisodeFlag]) -> int:
        with self._lock:
            self._maybe_fail()
            n = 0
            for f in flags:
                e = self.episode_nodes.get(f.id)
                if e is not None and e.status in EPISODE_LIVE and e.text == f.text:
                    update = {"injection": f.injection, "injection_lint": f.injection_lint}
                    self.episode_nodes[f.id] = e.model_copy(update=update)
                    n += 1
            return n

    def _link_entities(self, links: Sequence[EntityLink]) -> None:
        for lk in links:
            e = lk.entity
            known = self.entities.setdefault(e.key, {"team": None, "kind": None, "name": None})
            for k, v in (("team", e.team), ("kind", e.kind.value), ("name", e.name)):
                known[k] = known[k] or v  # coalesce: what a bare MERGE left out is filled in
            self.mentions.add((lk.episode_id, e.key, lk.role))

    def stale_edits(self, older_than_s: float = 600.0) -> dict[str, list[str]]:
        with self._lock:
            out: dict[str, list[str]] = {}
            for i, began in self.edit_pending.items():
                if began < time.time() - older_than_s and i in self.episode_nodes:
                    out.setdefault(self.episode_nodes[i].team, []).append(i)
            return {t: sorted(ids) for t, ids in sorted(out.items())}

    def link_replies(self, ids: Sequence[str]) -> None:
        with self._lock:
            self._maybe_fail()
            asked = {i: e for i in ids if (e := self.episode_nodes.get(i)) is not None}
            for e in asked.values():
                answered = self.episode_nodes.get(e.reply_to) if e.reply_to is not None else None
                if answered is not None and answered.team == e.team:
                    self.reply_links.add((e.id, answered.id))
            for c in self.episode_nodes.values():  # one pass: the replies that came before
                p = asked.get(c.reply_to) if c.reply_to is not None else None
                if p is not None and p.team == c.team:
                    self.reply_links.add((c.id, p.id))

    def replies(self, team: str) -> list[tuple[str, str]]:
        with self._lock:
            return sorted(x for x in self.reply_links if self.episode_nodes[x[0]].team == team)

    def drop_stale_stages(self, older_than_s: float = 600.0) -> int:
        return 0  # an upsert here is one step: nothing is ever left staged

    def get_episodes(self, ids: Sequence[str]) -> list[Episode]:
        with self._lock:
            found = [self.episode_nodes[i] for i in dict.fromkeys(ids) if i in self.episode_nodes]
            return [e.model_copy() for e in found if e.status is not EpisodeStatus.QUARANTINED]

    def episode_cards(
        self, ids: Sequence[str], drafts: bool, same: Mapping[str, Sequence[str]] | None = None
    ) -> dict[str, EpisodeCard]:
        def card(e: Episode) -> bool:
            return e.status in EPISODE_LIVE and (drafts or e.provenance is not Provenance.AI_DRAFT)

        out: dict[str, EpisodeCard] = {}
        for e in self.get_episodes(ids):
            if not card(e):
                continue
            near = [r for r in self.get_episodes((same or {}).get(e.id, ())) if card(r)]
            repeats = tuple(r.absorbed_by for r in near if r.text == e.text)
            others = tuple((r.id, r.text, r.absorbed_by) for r in near if r.text != e.text)
            fields = (e.id, e.team, e.channel, e.author, e.text, e.ts, e.provenance, e.status, e.absorbed_by)
            out[e.id] = EpisodeCard(*fields, e.injection, e.injection_lint, repeats, others)
        return out

    def live_texts(self, team: str, kind: ItemKind, ids: Sequence[str]) -> dict[str, str]:
        with self._lock:
            if kind == "episode":
                eps = [self.episode_nodes[i] for i in ids if i in self.episode_nodes]
                return {e.id: e.text for e in eps if e.team == team and e.status in EPISODE_LIVE}
            pats = [self.pattern_nodes[i] for i in ids if i in self.pattern_nodes]
            return {p.id: p.statement for p in pats if p.team == team and p.status in PATTERN_LIVE}

    def live_ids(self, team: str, kind: ItemKind) -> set[str]:
        with self._lock:
            if kind == "episode":
                return {i for i, e in self.episode_nodes.items() if e.team == team and e.status in EPISODE_LIVE}
            return {i for i, p in self.pattern_nodes.items() if p.team == team and p.status in PATTERN_LIVE}

    def _select(self, team: str, keep: Callable[[Episode], bool]) -> list[Episode]:
        """Episodes of ``team`` that ``keep`` selects; quarantined ones are never read, as in the graph."""
        with self._lock:
            return _by_time([e for e in self._matching(team, keep) if e.status is not EpisodeStatus.QUARANTINED])

    def _matching(self, team: str, keep: Callable[[Episode], bool]) -> list[Episode]:
        with self._lock:
            return [e for e in self.episode_nodes.values() if e.team == team and keep(e)]

    def episodes_in_window(self, team: str, statuses: Sequence[str], after: datetime, until: datetime) -> list[Episode]:
        return self._select(team, lambda e: e.status.value in statuses and after < e.ts <= until)

    def episodes_by_status(self, team: str, statuses: Sequence[str]) -> list[Episode]:
        return self._select(team, lambda e: e.status.value in statuses)

    def stale_raw_episodes(self, team: str, cutoff: datetime) -> list[Episode]:
        def stale(e: Episode) -> bool:
            touched = e.last_accessed is None or e.last_accessed <= cutoff
            return e.status is EpisodeStatus.RAW and e.ts <= cutoff and e.ingested_at <= cutoff and touched

        return self._select(team, lambda e: stale(e) and not e.pinned)

    def pending_raw_episodes(self, team: str, before: datetime, legacy: datetime | None) -> list[Episode]:
        def pending(e: Episode) -> bool:
            since_legacy = legacy is None or e.ts > legacy or e.ingested_at > legacy
            return e.status is EpisodeStatus.RAW and e.ts <= before and e.distilled_at is None and since_legacy

        return self._select(team, pending)

    def count_episodes(self, team: str, statuses: Sequence[str]) -> int:
        # A count reads no episode: quarantined ones are counted when their status is asked for.
        return len(self._matching(team, lambda e: e.status.value in statuses))

    def given_up_episodes(self, team: str | None = None) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        with self._lock:
            for e in self.episode_nodes.values():
                given_up = e.status is EpisodeStatus.RAW and e.distill_attempts > 0 and e.distilled_at is not None
                if given_up and (team is None or e.team == team):
                    out.setdefault(e.team, []).append(e.id)
        return {t: sorted(ids) for t, ids in sorted(out.items())}

    def count_new_raw(self, team: str, since: datetime) -> int:
        def new(e: Episode) -> bool:
            return e.status is EpisodeStatus.RAW and e.ingested_at > since and e.provenance is not Provenance.AI_DRAFT

        return len(self._select(team, new))

    def episode_entities(self, ids: Sequence[str]) -> dict[str, list[Mention]]:
        wanted = set(ids)
        out: dict[str, list[Mention]] = {}
        with self._lock:
            for eid, key, role in sorted(self.mentions):
                if eid in wanted:
                    ent = self.entities[key]
                    out.setdefault(eid, []).append(Mention(key, str(ent["kind"]), str(ent["name"]), role))
        return out

    def evidence_episode_ids(self, team: str) -> set[str]:
        with self._lock:
            return {
                eid for pid, eid in self.evidence if pid in self.pattern_nodes and self.pattern_nodes[pid].team == team
            } & set(self.episode_nodes)

    def update_episodes(self, updates: Sequence[EpisodeUpdate]) -> None:
        with self._lock:
            self._maybe_fail()
            for u in updates:
                self._apply(u)

    def _apply(self, u: EpisodeUpdate) -> None:
        e = self.episode_nodes.get(u.id)
        if e is None:
            return
        if "edit_pending" in u.model_fields_set:  # a property of the node, not of the model
            self.edit_pending.pop(u.id, None)
            u = EpisodeUpdate.model_validate(u.model_dump(include=u.model_fields_set - {"edit_pending"}) | {"id": u.id})
        self.episode_nodes[u.id] = self._updated(e, u)

    def retire_episodes(self, retirements: Sequence[Retirement]) -> None:
        with self._lock:
            self._maybe_fail()
            for r in retirements:
                e = self.episode_nodes.get(r.id)
                if e is None:
                    continue
                self.episode_nodes[r.id] = e.model_copy(update={"status": r.status, "text": ""})
                self._tombstone(r.id, kind="episode", team=e.team, at=r.at, reason=r.reason, pattern_id=r.pattern_id)

    def mark_accessed(self, episode_ids: Sequence[str], pattern_ids: Sequence[str], at: datetime) -> None:
        with self._lock:
            for i in episode_ids:
                if i in self.episode_nodes:
                    self.episode_nodes[i] = self.episode_nodes[i].model_copy(update={"last_accessed": at})
            for i in pattern_ids:
                if i in self.pattern_nodes:
                    self.pattern_accessed[i] = at

    # -- forgetting, export and import -----------------------------------------------------------
    def episodes_by_author(self, team: str, author: str) -> list[Episode]:
        who = author.lower()
        return self._select(team, lambda e: e.author.lower() == who)

    def forget_episodes(self, rows: Sequence[Forgetting]) -> None:
        with self._lock:
            self._maybe_fail()
            for r in rows:
                e = self.episode_nodes.get(r.id)
                if e is None:
                    continue
                self.episode_nodes[r.id] = e.model_copy(update={"status": EpisodeStatus.FORGOTTEN, "text": ""})
                self._tombstone(r.id, kind="episode", team=e.team, at=r.at, reason=r.reason)
                t = self.tombstone_nodes[r.id]
                if t.get("by") is None:  # a retirement's tombstone takes who asked, when and why
                    t.update(at=r.at, reason=r.reason, by=r.by)
                keys = {m[1] for m in self.mentions if m[0] == r.id}
                self.mentions = {m for m in self.mentions if m[0] != r.id}
                self.evidence = {x for x in self.evidence if x[1] != r.id}
                linked = {m[1] for m in self.mentions} | {a[1] for a in self.about}
                for key in keys - linked:  # an entity nothing links any more goes too
                    del self.entities[key]

    def episode_records(self, team: str) -> list[EpisodeRecord]:
        eps = self._select(team, lambda e: True)
        ents = self.episode_entities([e.id for e in eps])
        with self._lock:
            return [EpisodeRecord(e, self.hashes.get(e.id), tuple(ents.get(e.id, ()))) for e in eps]

    def restore_episodes(self, records: Sequence[EpisodeRecord]) -> None:
        with self._lock:
            self._maybe_fail()
            for r in records:
                e = r.episode
                if e.id in self.episode_nodes:
                    continue
                self.episode_nodes[e.id] = e.model_copy(update={"text": "" if e.status in _TEXT_DROPPED else e.text})
                if r.content_hash is not None:
                    self.hashes[e.id] = r.content_hash
                for m in r.mentions:
                    known = self.entities.setdefault(m.key, {"team": None, "kind": None, "name": None})
                    for k, v in (("team", e.team), ("kind", m.kind), ("name", m.name)):
                        known[k] = known[k] or v
                    self.mentions.add((e.id, m.key, m.role))
