"""The archive in the graph: before-images of what a change wrote, undo's restores, release's revival."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from taskzilla_sleep.core.models import from_ms, to_ms
from taskzilla_sleep.stores import queries
from taskzilla_sleep.stores.codec import (
    archived_from_row,
    archived_row,
    change_from_props,
    change_props,
    image_key,
    image_of,
)
from taskzilla_sleep.stores.cypher.base import CypherBase, chunks
from taskzilla_sleep.stores.ports import (
    OWNED_EDGES,
    ArchiveCounts,
    ArchivedItem,
    ArchivedLabel,
    ChangeRecord,
    ItemRef,
)

Q = queries.load("archive")
# The order a change's images are put back in: what links to an entity goes before the entity.
RESTORE_ORDER: tuple[ArchivedLabel, ...] = ("Contradiction", "Pattern", "Tombstone", "Episode", "Meta", "Entity")


class CypherArchive(CypherBase):
    def _states(self, label: ArchivedLabel, keys: Sequence[str]) -> dict[str, tuple[dict[str, Any], str, str | None]]:
        """What each of ``keys`` is now: (properties without an episode's text, owned edges as JSON, text)."""
        rows = self._read(Q[f"read_{label.lower()}"], {"keys": list(keys), "owned": list(OWNED_EDGES.get(label, ()))})
        out: dict[str, tuple[dict[str, Any], str, str | None]] = {}
        for r in rows:
            props = dict(r["p"])
            text = props.pop("text", None) if label == "Episode" else None
            edges = sorted(([e[0], e[1], e[2]] for e in r["edges"] if e[0] is not None), key=repr)
            out[str(r["key"])] = (props, json.dumps(edges), text if isinstance(text, str) and text else None)
        return out

    def archive_before(self, change: ChangeRecord, team: str, items: Sequence[ItemRef]) -> None:
        if not items:
            return
        self._write(
            Q["save_change"], {"id": change.id, "props": change_props(change) | {"teams": [team]}, "team": team}
        )
        for part in chunks(list(dict.fromkeys(items)), self._batch):
            keys = [image_key(change.id, r.label, r.key) for r in part]
            have = {str(r["key"]): bool(r["has_text"]) for r in self._read(Q["archived_keys"], {"keys": keys})}
            states: dict[tuple[str, str], tuple[dict[str, Any], str, str | None]] = {}
            for label in {r.label for r in part}:
                found = self._states(label, [r.key for r in part if r.label == label])
                states.update({(label, k): v for k, v in found.items()})
            new: list[dict[str, Any]] = []
            texts: list[dict[str, Any]] = []
            for ref, key in zip(part, keys, strict=True):
                state = states.get((ref.label, ref.key))
                if key in have:
                    if ref.text and not have[key] and state is not None and state[2] is not None:
                        texts.append({"key": key, "text": state[2], "text_bytes": len(state[2].encode())})
                    continue
                item = image_of(change.id, team, ref, state)
                new.append(archived_row(item, change.at))
                have[key] = item.text is not None
            if new:
                self._write(Q["save_archived"], {"rows": new})
            if texts:
                self._write(Q["add_archived_text"], {"rows": texts})

    def get_change(self, change_id: str) -> ChangeRecord | None:
        rows = self._read(Q["get_change"], {"id": change_id})
        return change_from_props(rows[0]["c"]) if rows else None

    def archived_items(self, change_id: str) -> list[ArchivedItem]:
        found = [archived_from_row(r["a"]) for r in self._read(Q["archived_items"], {"id": change_id})]
        return sorted(found, key=lambda a: (a.label, a.key))

    def later_changes(self, change_id: str) -> list[ChangeRecord]:
        found = [change_from_props(r["c"]) for r in self._read(Q["later_changes"], {"id": change_id})]
        return sorted(found, key=lambda c: (c.seq, c.id))

    def restore_archived(self, items: Sequence[ArchivedItem]) -> None:
        for label in RESTORE_ORDER:
            mine = [a for a in items if a.label == label]
            created = [a.key for a in mine if not a.existed]
            if created and label != "Episode":
                self._write(Q[f"delete_created_{label.lower()}"], {"keys": created})
            rows = [_restore_row(a) for a in mine if a.existed]
            if rows:
                self._write(Q[f"restore_{label.lower()}"], {"rows": rows, "owned": list(OWNED_EDGES.get(label, ()))})

    def mark_undone(self, change_id: str, at: datetime, by: str, reason: str) -> None:
        self._write(Q["mark_undone"], {"id": change_id, "at": to_ms(at), "by": by, "reason": reason})

    def archived_texts(self, episode_ids: Sequence[str]) -> dict[str, str]:
        rows = self._read(Q["archived_texts"], {"ids": list(episode_ids)})
        out: dict[str, str] = {}
        for r in sorted(rows, key=lambda r: (int(r["seq"]), str(r["change"]))):
            out[str(r["id"])] = str(r["text"])  # the newest wins
        return out

    def purge_archive(self, before: datetime, at: datetime) -> list[str]:
        params = {"before": to_ms(before), "at": to_ms(at)}
        purged = sorted(str(r["id"]) for r in self._write(Q["purge_changes"], params))
        while int(self._write(Q["purge_images"], params)[0]["n"]) > 0:
            pass
        return purged

    def forget_archived(self, label: ArchivedLabel, keys: Sequence[str]) -> int:
        n = 0
        for part in chunks(list(keys), self._batch):
            rows = self._write(Q["forget_archived"], {"items": [f"{label}|{k}" for k in part]})
            n += int(rows[0]["n"]) if rows else 0
        return n

    def archive_counts(self, team: str | None = None) -> ArchiveCounts:
        q, params = ("team_archive_counts", {"team": team}) if team is not None else ("archive_counts", {})
        rows = self._read(Q[q], params)
        r = rows[0] if rows else {}
        oldest = r.get("oldest")
        return ArchiveCounts(
            changes=int(r.get("changes") or 0),
            items=int(r.get("items") or 0),
            texts=int(r.get("texts") or 0),
            bytes=int(r.get("bytes") or 0),
            oldest=from_ms(int(oldest)) if oldest is not None else None,
        )

    def archive_records(self, team: str) -> tuple[list[ChangeRecord], list[ArchivedItem]]:
        changes = [change_from_props(r["c"]) for r in self._read(Q["team_changes"], {"team": team})]
        items = [archived_from_row(r["a"]) for r in self._read(Q["team_archived"], {"team": team})]
        mine = sorted((c.model_copy(update={"teams": (team,)}) for c in changes), key=lambda c: (c.seq, c.id))
        return mine, sorted(items, key=lambda a: (a.change, a.label, a.key))

    def restore_archive(self, changes: Sequence[ChangeRecord], items: Sequence[ArchivedItem]) -> None:
        at = {c.id: c.at for c in changes}
        rows = [{"id": c.id, "props": change_props(c)} for c in changes]
        for part in chunks(rows, self._batch):
            self._write(Q["restore_changes"], {"rows": part})
        images = [archived_row(a, at[a.change]) for a in items]
        for chunk in chunks(images, self._batch):
            self._write(Q["save_archived"], {"rows": chunk})

    def revive_episodes(self, texts: Mapping[str, str]) -> None:
        rows = [{"id": i, "text": t} for i, t in texts.items()]
        for part in chunks(rows, self._batch):
            self._write(Q["revive_episodes"], {"rows": part})

    def delete_team_archive(self, team: str) -> None:
        for q in ("delete_team_archive", "delete_team_changes"):
            while int(self._write(Q[q], {"team": team})[0]["n"]) > 0:
                pass


def _restore_row(a: ArchivedItem) -> dict[str, Any]:
    edges = [{"t": t, "b": b, "p": p} for t, b, p in json.loads(a.edges)]
    return {"key": a.key, "props": json.loads(a.props), "edges": edges, "text": a.text}
