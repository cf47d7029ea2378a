"""Episodes in the graph: the all-or-nothing ingest, the steps' reads, absorption and retirement.

An upsert is all or nothing. Its batches create the episodes *staged* under one token: status
``staged``, no id (kept in ``staged_id``, the status in ``staged_status``) — every reader filters on
status or finds episodes by id, so none sees them, and a leftover never blocks the same id (Neo4j's
uniqueness constraint). ONE final query then gives them their id and status, unless an id got
stored by another writer meanwhile or a batch is missing. A failure drops the stage; a stage left
by a killed process is dropped once stale (reconcile: no batch of it for ``STAGE_STALE_AFTER_S``).
Entities a stage created carry its token until then. There is no node for the stage itself:
FalkorDB 4.16, after a few thousand commits that deleted such a node inside the commit query,
answered "Attempted to access undefined attribute" to every later scan of that label.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime

import structlog

from taskzilla_sleep.core.errors import StoreError
from taskzilla_sleep.core.models import (
    CONTENT_FIELDS,
    EPISODE_LIVE,
    PATTERN_LIVE,
    EntityLink,
    Episode,
    EpisodeStatus,
    to_ms,
)
from taskzilla_sleep.stores import queries
from taskzilla_sleep.stores.codec import (
    UNREADABLE,
    episode_card_from_row,
    episode_from_props,
    episode_props,
    record_from_row,
    record_row,
    retirement_row,
    update_rows,
    why_unreadable,
)
from taskzilla_sleep.stores.cypher.base import CypherBase, chunks
from taskzilla_sleep.stores.executor import Row
from taskzilla_sleep.stores.ports import (
    EpisodeCard,
    EpisodeEdit,
    EpisodeFlag,
    EpisodeRecord,
    EpisodeUpdate,
    Forgetting,
    ItemKind,
    Mention,
    Poisoned,
    Retirement,
    StoredEpisode,
)

log = structlog.get_logger(__name__)

Q = queries.load("episodes")
QP = queries.load("patterns")
STAGED = "staged"
# A stage no batch touched for this long has lost its writer (a batch takes seconds; every backend
# call is bounded by the graph timeouts): reconcile drops it.
STAGE_STALE_AFTER_S = 600.0


def link_row(lk: EntityLink) -> Row:
    """An episode's link to an entity as the queries MERGE it."""
    e = lk.entity
    return {"key": e.key, "team": e.team, "kind": e.kind.value, "name": e.name, "role": lk.role}


def live_statuses(kind: ItemKind) -> list[str]:
    return sorted(s.value for s in (EPISODE_LIVE if kind == "episode" else PATTERN_LIVE))


def _staged(props: Row) -> Row:
    """An episode's props as staged: no id and no status a reader would match until the commit."""
    out = dict(props)
    out["staged_id"], out["staged_status"], out["status"] = out.pop("id"), out["status"], STAGED
    return out


class CypherEpisodes(CypherBase):
    # -- ingestion -------------------------------------------------------------------------------
    def existing_episodes(self, ids: Sequence[str]) -> dict[str, EpisodeStatus]:
        return {i: s.status for i, s in self._stored("existing_episodes", ids).items()}

    def stored_episodes(self, ids: Sequence[str]) -> dict[str, StoredEpisode]:
        return self._stored("stored_episodes", ids)

    def _stored(self, name: str, ids: Sequence[str]) -> dict[str, StoredEpisode]:
        out: dict[str, StoredEpisode] = {}
        for part in chunks(list(ids), self._batch * 4):
            for r in self._read(Q[name], {"ids": part}):
                try:
                    status = EpisodeStatus(r["status"])
                except ValueError as exc:  # present all the same: never stored over, never embedded
                    status = EpisodeStatus.QUARANTINED
                    team = r.get("team")
                    reason = why_unreadable(exc)
                    self._poison.add(Poisoned("episode", r["id"], team if isinstance(team, str) else None, reason))
                fields = {f: r[f] for f in CONTENT_FIELDS if f in r}
                edited = r.get("edited_at")
                out[r["id"]] = StoredEpisode(
                    status,
                    r.get("content_hash"),
                    fields,
                    edited if isinstance(edited, int) else None,
                    r.get("edit_pending") is not None,
                )
        return out

    def upsert_episodes(
        self, episodes: Sequence[Episode], links: Sequence[EntityLink], ingest: str | None = None
    ) -> int:
        before = self.existing_episodes([e.id for e in episodes])
        new: dict[str, Episode] = {}
        for e in episodes:
            if e.id not in before:
                new.setdefault(e.id, e)
        if not new:
            return 0
        links_of: dict[str, list[Row]] = {}
        for lk in links:
            if lk.episode_id in new:
                links_of.setdefault(lk.episode_id, []).append(link_row(lk))
        tag = {"ingest": ingest} if ingest is not None else {}
        rows = [{"props": _staged(episode_props(e) | tag), "links": links_of.get(i, [])} for i, e in new.items()]
        stage = uuid.uuid4().hex
        try:
            for part in chunks(rows, self._batch):
                self._write(Q["stage_episodes"], {"stage": stage, "rows": part})
            if not self._write(Q["commit_stage"], {"stage": stage, "expected": len(rows)}):
                raise StoreError(self._not_committed(stage, len(rows)))
        except BaseException:
            self._drop_stage_quietly(stage)
            raise
        return len(rows)

    def edit_episodes(self, edits: Sequence[EpisodeEdit]) -> list[str]:
        if not edits:
            return []
        rows = [
            {
                "id": x.id,
                "team": x.team,
                "text": x.text,
                "edited_at": to_ms(x.edited_at),
                "content_hash": x.content_hash,
                "injection": x.injection,
                "injection_lint": x.injection_lint,
                "links": [link_row(lk) for lk in x.links],
            }
            for x in edits
        ]
        return [str(r["id"]) for r in self._write(Q["edit_episodes"], {"rows": rows, "live": live_statuses("episode")})]

    def unflagged_episodes(self, team: str, lint: str) -> dict[str, str]:
        rows = self._read(Q["unflagged_episodes"], {"team": team, "lint": lint, "live": live_statuses("episode")})
        return {str(r["id"]): str(r["text"] or "") for r in rows}

    def flag_episodes(self, flags: Sequence[EpisodeFlag]) -> int:
        n = 0
        rows = [
            {"id": f.id, "text": f.text, "injection": f.injection, "injection_lint": f.injection_lint} for f in flags
        ]
        for part in chunks(rows, self._batch):
            for r in self._write(Q["flag_episodes"], {"rows": part, "live": live_statuses("episode")}):
                n += int(r["n"])
        return n

    def stale_edits(self, older_than_s: float = STAGE_STALE_AFTER_S) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for r in self._read(Q["stale_edits"], {"age_ms": int(older_than_s * 1000)}):
            out.setdefault(str(r["team"]), []).append(str(r["id"]))
        return {t: sorted(ids) for t, ids in sorted(out.items())}

    def link_replies(self, ids: Sequence[str]) -> None:
        for part in chunks(list(ids), self._batch):
            self._write(Q["link_reply_parents"], {"ids": part})
            self._write(Q["link_reply_children"], {"ids": part})

    def replies(self, team: str) -> list[tuple[str, str]]:
        return sorted((str(r["reply"]), str(r["answered"])) for r in self._read(Q["replies"], {"team": team}))

    def _not_committed(self, stage: str, expected: int) -> str:
        (state,) = self._read(Q["stage_state"], {"stage": stage})
        if int(state["clashes"]):
            why = f"{state['clashes']} of its episode ids were stored by another writer meanwhile"
        elif not int(state["staged"]):
            why = "its staged episodes were removed as stale before the commit"
        else:
            why = f"only {state['staged']} of {expected} staged episodes were found at the commit"
        return f"{self._ex.backend}: nothing of this ingest was written: {why}; run it again"

    def _drop_stage_quietly(self, stage: str) -> None:
        try:
            self._drop_stage(stage)
        except Exception as exc:  # the stage stays invisible; reconcile drops it once stale
            log.warning("ingest_stage_left", stage=stage, error=str(exc)[:300])

    def _drop_stage(self, stage: str) -> None:
        """Remove one stage: its episodes, then the entities only they used."""
        while int(self._write(Q["drop_staged"], {"stage": stage})[0]["n"]) > 0:
            pass
        self._write(Q["drop_stage_entities"], {"stage": stage})
        self._write(Q["unmark_stage_entities"], {"stage": stage})

    def drop_stale_stages(self, older_than_s: float = STAGE_STALE_AFTER_S) -> int:
        """Stages no batch touched for ``older_than_s`` (by the graph's clock): their writer is gone."""
        tokens = [r["token"] for r in self._read(Q["stale_stages"], {"age_ms": int(older_than_s * 1000)})]
        for token in tokens:
            self._drop_stage(token)
            log.warning("ingest_stage_dropped", stage=token, reason="stale")
        return len(tokens)

    # -- reads -----------------------------------------------------------------------------------
    def get_episodes(self, ids: Sequence[str]) -> list[Episode]:
        out: list[Episode] = []
        for part in chunks(list(ids), self._batch * 4):
            rows = self._read(Q["get_episodes"], {"ids": part})
            out.extend(self._models("episode", (r["p"] for r in rows), episode_from_props))
        return out

    def episode_cards(
        self, ids: Sequence[str], drafts: bool, same: Mapping[str, Sequence[str]] | None = None
    ) -> dict[str, EpisodeCard]:
        out: dict[str, EpisodeCard] = {}
        asked = [{"id": i, "same": list((same or {}).get(i, ()))} for i in dict.fromkeys(ids)]
        for part in chunks(asked, self._batch * 4):
            params = {"rows": part, "live": live_statuses("episode"), "drafts": drafts}
            out.update(
                (c.id, c)
                for c in self._models("episode", self._read(Q["episode_cards"], params), episode_card_from_row)
            )
        return out

    def live_texts(self, team: str, kind: ItemKind, ids: Sequence[str]) -> dict[str, str]:
        query = Q["live_episode_texts"] if kind == "episode" else QP["live_pattern_texts"]
        out: dict[str, str] = {}
        for part in chunks(list(ids), self._batch * 4):
            for r in self._read(query, {"ids": part, "team": team, "live": live_statuses(kind)}):
                if isinstance(r["text"], str) and r["text"].strip():
                    out[r["id"]] = r["text"]
                else:  # nothing to embed: a live item without text is unreadable
                    self._poison.add(Poisoned(kind, r["id"], team, "a live item without text"))
        return out

    def live_ids(self, team: str, kind: ItemKind) -> set[str]:
        query = Q["live_episode_ids"] if kind == "episode" else QP["live_pattern_ids"]
        # One row holding a list: for tens of thousands of ids, far cheaper than a row each.
        rows = self._read(query, {"team": team, "live": live_statuses(kind)})
        return {i for r in rows for i in r["ids"] or []}

    def _episodes(self, name: str, params: Row) -> list[Episode]:
        rows = self._read(Q[name], params)
        return sorted(self._models("episode", (r["p"] for r in rows), episode_from_props), key=lambda e: (e.ts, e.id))

    def episodes_in_window(self, team: str, statuses: Sequence[str], after: datetime, until: datetime) -> list[Episode]:
        params = {"team": team, "statuses": list(statuses), "from": to_ms(after), "to": to_ms(until)}
        return self._episodes("episodes_in_window", params)

    def episodes_by_status(self, team: str, statuses: Sequence[str]) -> list[Episode]:
        return self._episodes("episodes_by_status", {"team": team, "statuses": list(statuses)})

    def stale_raw_episodes(self, team: str, cutoff: datetime) -> list[Episode]:
        # Prune reads only the stale candidates (reading every raw episode grew with the months).
        return self._episodes("stale_raw", {"team": team, "cutoff": to_ms(cutoff)})

    def pending_raw_episodes(self, team: str, before: datetime, legacy: datetime | None) -> list[Episode]:
        params = {"team": team, "before": to_ms(before), "legacy": to_ms(legacy) if legacy else -1}
        return self._episodes("pending_raw_before", params)

    def count_episodes(self, team: str, statuses: Sequence[str]) -> int:
        return int(self._read(Q["count_episodes"], {"team": team, "statuses": list(statuses)})[0]["n"])

    def given_up_episodes(self, team: str | None = None) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for r in self._read(Q["given_up_episodes"], {"team": team}):
            out.setdefault(str(r["team"]), []).append(str(r["id"]))
        return {t: sorted(ids) for t, ids in sorted(out.items())}

    def count_new_raw(self, team: str, since: datetime) -> int:
        return int(self._read(Q["count_new_raw"], {"team": team, "since": to_ms(since)})[0]["n"])

    def episode_entities(self, ids: Sequence[str]) -> dict[str, list[Mention]]:
        out: dict[str, list[Mention]] = {}
        for r in self._read(Q["episode_entities"], {"ids": list(ids)}):
            out.setdefault(r["id"], []).append(Mention(r["key"], r["kind"], r["name"], r["role"]))
        return out

    def evidence_episode_ids(self, team: str) -> set[str]:
        return {r["id"] for r in self._read(Q["evidence_ids"], {"team": team})}

    # -- writes ----------------------------------------------------------------------------------
    def update_episodes(self, updates: Sequence[EpisodeUpdate]) -> None:
        if updates:
            self._write(Q["update_episodes"], {"rows": [r for u in updates for r in update_rows(u)]})

    def retire_episodes(self, retirements: Sequence[Retirement]) -> None:
        if retirements:
            self._write(Q["retire_episodes"], {"rows": [retirement_row(r) for r in retirements]})

    def mark_accessed(self, episode_ids: Sequence[str], pattern_ids: Sequence[str], at: datetime) -> None:
        if episode_ids:
            self._write(Q["mark_episodes_accessed"], {"ids": list(episode_ids), "at": to_ms(at)})
        if pattern_ids:
            self._write(QP["mark_patterns_accessed"], {"ids": list(pattern_ids), "at": to_ms(at)})

    # -- forgetting, export and import -----------------------------------------------------------
    def episodes_by_author(self, team: str, author: str) -> list[Episode]:
        return self._episodes("episodes_by_author", {"team": team, "author": author})

    def forget_episodes(self, rows: Sequence[Forgetting]) -> None:
        for part in chunks(list(rows), self._batch):
            params = [{"id": r.id, "at": to_ms(r.at), "by": r.by, "reason": r.reason} for r in part]
            self._write(Q["forget_episodes"], {"rows": params})

    def episode_records(self, team: str) -> list[EpisodeRecord]:
        out: list[EpisodeRecord] = []
        for r in self._read(Q["episode_records"], {"team": team}):
            if r["p"].get("status") == "quarantined":
                continue
            try:
                out.append(record_from_row(r["p"], r["mentions"] or []))
            except UNREADABLE as exc:
                self._poisoned("episode", r["p"], why_unreadable(exc))
        return sorted(out, key=lambda x: (x.episode.ts, x.episode.id))

    def restore_episodes(self, records: Sequence[EpisodeRecord]) -> None:
        for part in chunks(list(records), self._batch):
            self._write(Q["restore_episodes"], {"rows": [record_row(r) for r in part]})
