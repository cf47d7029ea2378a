"""The archive in memory: the same observable behaviour as ``stores/cypher/archive.py``.

An image holds what the Cypher store's would hold of the same item, in the same JSON (the codec's
properties of the model), so the contract suite compares the two and an export moves between them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from taskzilla_sleep.core.models import EpisodeStatus
from taskzilla_sleep.stores.codec import (
    contradiction_from_props,
    contradiction_props,
    episode_from_props,
    episode_props,
    image_key,
    image_of,
    pattern_from_props,
    pattern_props,
)
from taskzilla_sleep.stores.memory.ops import MemoryOps
from taskzilla_sleep.stores.ports import (
    OWNED_EDGES,
    ArchiveCounts,
    ArchivedItem,
    ArchivedLabel,
    ChangeRecord,
    ItemRef,
)

Edge = tuple[str, str, str | None]  # (type, target id or key, prompt)


class MemoryArchive(MemoryOps):
    # -- what an item is now ------------------------------------------------------------------------
    def _state(self, label: ArchivedLabel, key: str) -> tuple[dict[str, Any], str, str | None] | None:
        found = self._current(label, key)
        if found is None:
            return None
        props, edges, text = found
        return props, json.dumps(sorted([list(e) for e in edges], key=repr)), text

    def _current(self, label: ArchivedLabel, key: str) -> tuple[dict[str, Any], list[Edge], str | None] | None:
        """(properties without an episode's text, owned relationships, the episode's text) or None."""
        if label == "Episode":
            e = self.episode_nodes.get(key)
            if e is None:
                return None
            props = episode_props(e)
            text = props.pop("text", None)
            return props, [], text or None  # retired and pruned episodes hold no text
        if label == "Pattern":
            p = self.pattern_nodes.get(key)
            if p is None:
                return None
            edges: list[Edge] = [("ABOUT", k, None) for pid, k in self.about if pid == key]
            edges += [("EVIDENCED_BY", eid, None) for pid, eid in self.evidence if pid == key]
            edges += [(rel, b, prompt) for (a, rel, b), prompt in self.pattern_rels.items() if a == key]
            return pattern_props(p), edges, None
        if label == "Contradiction":
            c = self.contradiction_nodes.get(key)
            if c is None:
                return None
            return (
                contradiction_props(c),
                [("OLD_BELIEF", c.old_pattern_id, None), ("NEW_BELIEF", c.new_pattern_id, None)],
                None,
            )
        if label == "Tombstone":
            t = self.tombstone_nodes.get(key)
            return None if t is None else (dict(t), [], None)
        if label == "Entity":
            n = self.entities.get(key)
            return None if n is None else ({"key": key, **{k: v for k, v in n.items() if v is not None}}, [], None)
        value = self.meta.get(key)
        return None if value is None else ({"key": key, "value": value}, [], None)

    # -- the archive -----------------------------------------------------------------------------------
    def archive_before(self, change: ChangeRecord, team: str, items: Sequence[ItemRef]) -> None:
        with self._lock:
            self._maybe_fail()
            known = self.change_nodes.get(change.id, change)
            if team not in known.teams:
                known = known.model_copy(update={"teams": (*known.teams, team)})
            self.change_nodes[change.id] = known
            for ref in items:
                key = image_key(change.id, ref.label, ref.key)
                have = self.archived.get(key)
                state = self._state(ref.label, ref.key)
                if have is not None:
                    if ref.text and have.text is None and state is not None and state[2] is not None:
                        self.archived[key] = have.model_copy(update={"text": state[2]})
                    continue
                self.archived[key] = image_of(change.id, team, ref, state)

    def get_change(self, change_id: str) -> ChangeRecord | None:
        with self._lock:
            return self.change_nodes.get(change_id)

    def archived_items(self, change_id: str) -> list[ArchivedItem]:
        with self._lock:
            found = [a for a in self.archived.values() if a.change == change_id]
        return sorted(found, key=lambda a: (a.label, a.key))

    def later_changes(self, change_id: str) -> list[ChangeRecord]:
        with self._lock:
            me = self.change_nodes.get(change_id)
            if me is None:
                return []
            mine = {(a.label, a.key) for a in self.archived.values() if a.change == change_id}
            others = {a.change for a in self.archived.values() if a.change != change_id and (a.label, a.key) in mine}
            found = [
                c
                for c in (self.change_nodes[i] for i in others if i in self.change_nodes)
                if c.undone_at is None and (c.seq, c.id) > (me.seq, me.id)
            ]
        return sorted(found, key=lambda c: (c.seq, c.id))

    def restore_archived(self, items: Sequence[ArchivedItem]) -> None:
        with self._lock:
            self._maybe_fail()
            for a in items:
                if a.existed:
                    self._put_back(a)
                else:
                    self._delete_created(a.label, a.key)
            for a in items:  # entities last: only once nothing links them
                if a.label == "Entity" and not a.existed:
                    linked = any(k == a.key for _, k in self.about) or any(m[1] == a.key for m in self.mentions)
                    if not linked:
                        self.entities.pop(a.key, None)

    def _put_back(self, a: ArchivedItem) -> None:
        props: dict[str, Any] = json.loads(a.props)
        edges: list[Edge] = [(str(t), str(b), p) for t, b, p in json.loads(a.edges)]
        if a.label == "Episode":
            e = self.episode_nodes.get(a.key)
            if e is None or e.status is EpisodeStatus.FORGOTTEN:
                return
            self.episode_nodes[a.key] = episode_from_props({**props, "text": a.text if a.text is not None else e.text})
        elif a.label == "Pattern":
            if a.key not in self.pattern_nodes:
                return  # deleted since: a person made the store forget it
            self.pattern_nodes[a.key] = pattern_from_props(props)
            self.about = {x for x in self.about if x[0] != a.key}
            self.evidence = {x for x in self.evidence if x[0] != a.key}
            self.pattern_rels = {k: v for k, v in self.pattern_rels.items() if k[0] != a.key}
            for kind, target, prompt in edges:
                if kind == "ABOUT" and target in self.entities:
                    self.about.add((a.key, target))
                elif kind == "EVIDENCED_BY":
                    e = self.episode_nodes.get(target)
                    if e is not None and e.status is not EpisodeStatus.FORGOTTEN:
                        self.evidence.add((a.key, target))
                elif kind in OWNED_EDGES["Pattern"] and target in self.pattern_nodes:
                    self.pattern_rels[(a.key, kind, target)] = prompt
        elif a.label == "Contradiction":
            if a.key in self.contradiction_nodes:
                self.contradiction_nodes[a.key] = contradiction_from_props(props)
        elif a.label == "Tombstone":
            self.tombstone_nodes[a.key] = props
        elif a.label == "Entity":
            self.entities[a.key] = {k: props.get(k) for k in ("team", "kind", "name")}
        else:
            self.meta[a.key] = str(props["value"])

    def _delete_created(self, label: ArchivedLabel, key: str) -> None:
        if label == "Pattern":
            self.pattern_nodes.pop(key, None)
            self.pattern_accessed.pop(key, None)
            self.about = {x for x in self.about if x[0] != key}
            self.evidence = {x for x in self.evidence if x[0] != key}
            self.pattern_rels = {k: v for k, v in self.pattern_rels.items() if key not in (k[0], k[2])}
        elif label == "Contradiction":
            self.contradiction_nodes.pop(key, None)
            self.alert_for = {x for x in self.alert_for if x[1] != key}
        elif label == "Tombstone":
            self.tombstone_nodes.pop(key, None)
        elif label == "Meta":
            self.meta.pop(key, None)
        # Episodes are never created by a change; entities go last (restore_archived).

    def mark_undone(self, change_id: str, at: datetime, by: str, reason: str) -> None:
        with self._lock:
            self._maybe_fail()
            c = self.change_nodes.get(change_id)
            if c is not None and c.undone_at is None:
                self.change_nodes[change_id] = c.model_copy(
                    update={"undone_at": at, "undone_by": by, "undo_reason": reason}
                )

    def archived_texts(self, episode_ids: Sequence[str]) -> dict[str, str]:
        wanted = set(episode_ids)
        with self._lock:
            found = [
                (self.change_nodes[a.change].seq, a.change, a.key, a.text)
                for a in self.archived.values()
                if a.label == "Episode" and a.key in wanted and a.text is not None and a.change in self.change_nodes
            ]
        out: dict[str, str] = {}
        for _, _, key, text in sorted(found, key=lambda x: (x[0], x[1])):
            if text is not None:
                out[key] = text  # the newest wins
        return out

    def purge_archive(self, before: datetime, at: datetime) -> list[str]:
        with self._lock:
            self._maybe_fail()
            old = sorted(i for i, c in self.change_nodes.items() if c.at < before and c.purged_at is None)
            for i in old:
                self.change_nodes[i] = self.change_nodes[i].model_copy(update={"purged_at": at})
            gone = {i for i, c in self.change_nodes.items() if c.purged_at is not None}
            self.archived = {k: a for k, a in self.archived.items() if a.change not in gone}
            return old

    def forget_archived(self, label: ArchivedLabel, keys: Sequence[str]) -> int:
        wanted = set(keys)
        with self._lock:
            self._maybe_fail()
            drop = [k for k, a in self.archived.items() if a.label == label and a.key in wanted]
            for k in drop:
                del self.archived[k]
            return len(drop)

    def archive_counts(self, team: str | None = None) -> ArchiveCounts:
        with self._lock:
            items = [a for a in self.archived.values() if team is None or a.team == team]
            changes = {a.change for a in items}
            oldest = min((self.change_nodes[c].at for c in changes if c in self.change_nodes), default=None)
        return ArchiveCounts(
            changes=len(changes),
            items=len(items),
            texts=sum(1 for a in items if a.text is not None),
            bytes=sum(a.size for a in items),
            oldest=oldest,
        )

    def archive_records(self, team: str) -> tuple[list[ChangeRecord], list[ArchivedItem]]:
        with self._lock:
            changes = [c.model_copy(update={"teams": (team,)}) for c in self.change_nodes.values() if team in c.teams]
            items = [a for a in self.archived.values() if a.team == team]
        return sorted(changes, key=lambda c: (c.seq, c.id)), sorted(items, key=lambda a: (a.change, a.label, a.key))

    def restore_archive(self, changes: Sequence[ChangeRecord], items: Sequence[ArchivedItem]) -> None:
        with self._lock:
            self._maybe_fail()
            for c in changes:
                self.change_nodes.setdefault(c.id, c)
            for a in items:
                self.archived.setdefault(image_key(a.change, a.label, a.key), a)

    # -- release: retired messages back ----------------------------------------------------------------
    def revive_episodes(self, texts: Mapping[str, str]) -> None:
        with self._lock:
            self._maybe_fail()
            for eid, text in texts.items():
                e = self.episode_nodes.get(eid)
                if e is None or e.status not in (EpisodeStatus.RETIRED, EpisodeStatus.PRUNED):
                    continue
                self.episode_nodes[eid] = e.model_copy(
                    update={
                        "status": EpisodeStatus.RAW,
                        "text": text,
                        "schema_absorbed": 0,
                        "absorbed_at": None,
                        "absorbed_by": None,
                    }
                )
                self.tombstone_nodes.pop(eid, None)
