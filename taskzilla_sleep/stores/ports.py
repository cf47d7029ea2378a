"""The whole interface the domain uses of its stores, by aggregate (the values that cross it are in ``records.py``;
the archive's aggregate is in ``archive_port.py``, the vector store's in ``vector_port.py``, both re-exported here).

The graph is the source of truth for every episode and pattern (the text, the status, the audit
trail); the vector store is a derived index of the *live* items of the graph (``reconcile`` finds
and repairs drift between the two). Nothing outside ``stores/`` knows a concrete store: it gets a
:class:`GraphStore` and a :class:`VectorStore` from ``app.build()``. ``stores/memory.py`` implements
all of it in memory for unit tests; ``tests/contract/test_graph_store.py`` runs the same assertions
on the fake, FalkorDB and Neo4j.

Every method that writes is one atomic write (one transaction on Neo4j, one query on FalkorDB)
unless its docstring says it is batched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol

from taskzilla_sleep.core.models import Contradiction, EntityLink, Episode, Pattern, Run, Tombstone
from taskzilla_sleep.stores.archive_port import ArchiveStore
from taskzilla_sleep.stores.records import (
    OWNED_EDGES,
    AlertKind,
    AlertRecord,
    AlertStatus,
    ArchiveCounts,
    ArchivedItem,
    ArchivedLabel,
    ChangeKind,
    ChangeRecord,
    EpisodeCard,
    EpisodeEdit,
    EpisodeFlag,
    EpisodeRecord,
    EpisodeUpdate,
    Forgetting,
    GraphBackend,
    GraphCounts,
    IngestMark,
    ItemKind,
    ItemRef,
    ItemUpdate,
    LeaseClaim,
    LeaseState,
    LinkRelation,
    Mention,
    MetaValue,
    PatternCard,
    PatternEdges,
    PatternLink,
    PatternUpdate,
    Poisoned,
    PoisonKind,
    Retirement,
    SessionRecord,
    StoredEpisode,
    TeamCounts,
    VectorBackend,
    VectorHealth,
    VectorHit,
    VectorKind,
    VectorRebuild,
)
from taskzilla_sleep.stores.vector_port import Embedder, VectorStore

# -- the graph, by aggregate ---------------------------------------------------------------------


class EpisodeStore(Protocol):
    def stored_episodes(self, ids: Sequence[str]) -> dict[str, StoredEpisode]:
        """Status and content of each of ``ids`` that the graph knows (retired/pruned included)."""
        ...

    def upsert_episodes(
        self, episodes: Sequence[Episode], links: Sequence[EntityLink], ingest: str | None = None
    ) -> int:
        """Create the episodes not stored yet (existing ones are left untouched) and link their entities;
        ``ingest``: the id of the announced ingest (``mark_ingest``) writing them, kept on each.

        All or nothing, whatever the backend raises: no reader sees a part of it. Returns how many
        episodes were created.
        """
        ...

    def edit_episodes(self, edits: Sequence[EpisodeEdit]) -> list[str]:
        """Each edit replaces the text of its live (raw or absorbed) episode of its team, unless the
        stored text is of an edit as new or newer: text, content hash and ``edited_at`` set, the episode
        raw again and undistilled (absorption, distill marks and EVIDENCED_BY links dropped: the new
        text is judged afresh), its MENTIONS replaced by the edit's links, and ``edit_pending`` set (to
        the graph's clock) until the caller's follow-up (re-scoring, re-embedding) clears it; the edit's
        injection flag replaces the old text's. One atomic write; returns the ids it changed."""
        ...

    def unflagged_episodes(self, team: str, lint: str) -> dict[str, str]:
        """Text of each live episode of ``team`` whose injection flag was not computed by ``lint`` (the
        lint's version): none kept (stored before flags were), or an older lint's."""
        ...

    def flag_episodes(self, flags: Sequence[EpisodeFlag]) -> int:
        """Set the injection flag (and the lint version that computed it) of each live episode that
        still holds exactly its flag's ``text`` (an edit or a forget since is left as it is).
        Idempotent; batched. Returns how many it set (one already set to the same value counts)."""
        ...

    def stale_edits(self, older_than_s: float = ...) -> dict[str, list[str]]:
        """Episodes whose edit's follow-up has been pending for ``older_than_s`` (by the graph's clock):
        its writer is gone (reconcile finishes them). Ids by team, sorted."""
        ...

    def link_replies(self, ids: Sequence[str]) -> None:
        """A REPLY_TO link from each stored episode among ``ids`` to the episode of its team it answers
        (``reply_to``), and from each stored reply of its team to it: whichever arrived first, the
        link exists once both are stored (never across teams). Idempotent; batched."""
        ...

    def replies(self, team: str) -> list[tuple[str, str]]:
        """Every REPLY_TO link of ``team`` as (reply id, answered id), sorted."""
        ...

    def drop_stale_stages(self, older_than_s: float = ...) -> int:
        """Remove what an interrupted upsert left staged (invisible); returns how many stages."""
        ...

    def get_episodes(self, ids: Sequence[str]) -> list[Episode]:
        """Episodes by id, in no particular order; unknown and quarantined ids are left out."""
        ...

    def episode_cards(
        self, ids: Sequence[str], drafts: bool, same: Mapping[str, Sequence[str]] | None = None
    ) -> dict[str, EpisodeCard]:
        """What recall shows of each live (raw or absorbed) episode among ``ids`` (drafts only if
        ``drafts``; others left out), and of its ``same`` (repeats: an identical vector) that would
        be cards, in ``repeats`` the owner of each holding its text exactly; ``others`` the rest."""
        ...

    def live_texts(self, team: str, kind: ItemKind, ids: Sequence[str]) -> dict[str, str]:
        """Text of each of ``ids`` that is live (should have a vector), for re-embedding."""
        ...

    def live_ids(self, team: str, kind: ItemKind) -> set[str]:
        """Ids of every live item of ``kind`` (episodes raw/absorbed; patterns tentative/active/contested)."""
        ...

    def episodes_in_window(self, team: str, statuses: Sequence[str], after: datetime, until: datetime) -> list[Episode]:
        """Episodes of ``statuses`` with ``after < ts <= until``, by (ts, id)."""
        ...

    def episodes_by_status(self, team: str, statuses: Sequence[str]) -> list[Episode]:
        """Every episode of ``statuses``, by (ts, id)."""
        ...

    def stale_raw_episodes(self, team: str, cutoff: datetime) -> list[Episode]:
        """Raw, unpinned episodes last touched (ts, ingested, read) at or before ``cutoff``, by (ts, id)."""
        ...

    def pending_raw_episodes(self, team: str, before: datetime, legacy: datetime | None) -> list[Episode]:
        """Raw episodes no nightly distill has taken into account, timestamped at or before ``before``;
        ``legacy``: a store written before ``distilled_at`` existed counts what its last night covered."""
        ...

    def count_episodes(self, team: str, statuses: Sequence[str]) -> int: ...

    def given_up_episodes(self, team: str | None = None) -> dict[str, list[str]]:
        """Raw episodes distill gave up on (taken into account with failed nights): ids by team, sorted."""
        ...

    def count_new_raw(self, team: str, since: datetime) -> int:
        """Raw, learnable-provenance (not ai-draft) episodes ingested after ``since`` (the watchdog's trigger)."""
        ...

    def episode_entities(self, ids: Sequence[str]) -> dict[str, list[Mention]]:
        """The entities each of ``ids`` links (ids without any are left out)."""
        ...

    def evidence_episode_ids(self, team: str) -> set[str]:
        """Episodes some pattern of ``team`` names as evidence (whatever the pattern's status)."""
        ...

    def update_episodes(self, updates: Sequence[EpisodeUpdate]) -> None:
        """Apply each update's fields to its episode (unknown ids are skipped). One write per call."""
        ...

    def retire_episodes(self, retirements: Sequence[Retirement]) -> None:
        """Each episode takes its new status and loses its text; a tombstone is kept (created once)."""
        ...

    def mark_accessed(self, episode_ids: Sequence[str], pattern_ids: Sequence[str], at: datetime) -> None:
        """Recall read these: prune counts an access as a touch."""
        ...

    def episodes_by_author(self, team: str, author: str) -> list[Episode]:
        """Every readable episode of ``team`` whose author is ``author`` (case-insensitive), any status, by (ts, id)."""
        ...

    def forget_episodes(self, rows: Sequence[Forgetting]) -> None:
        """Each episode becomes ``forgotten``: text dropped, its MENTIONS and the EVIDENCED_BY links to it
        removed, a tombstone with who and why (an earlier tombstone without ``by`` takes them). Idempotent."""
        ...

    def episode_records(self, team: str) -> list[EpisodeRecord]:
        """Every readable episode of ``team`` with its hash and mentions (export), by (ts, id)."""
        ...

    def restore_episodes(self, records: Sequence[EpisodeRecord]) -> None:
        """Write episodes exactly as recorded (status, hash, no text once dropped) with their mentions;
        an id already stored is left as it is. Idempotent; batched by the caller (import)."""
        ...


class PatternStore(Protocol):
    def patterns(self, team: str) -> list[Pattern]:
        """Every readable pattern of ``team`` (any status), by (created_at, id)."""
        ...

    def patterns_by_id(self, ids: Sequence[str]) -> list[Pattern]:
        """Patterns by id, by (created_at, id); unknown and quarantined ids are left out."""
        ...

    def pattern_cards(self, ids: Sequence[str]) -> dict[str, PatternCard]:
        """What recall shows of each pattern (unknown ids are left out)."""
        ...

    def write_pattern(self, pattern: Pattern, subject_keys: Sequence[str], evidence: Sequence[EpisodeUpdate]) -> None:
        """The pattern (created or replaced), an ABOUT link to each subject entity (created by key if
        missing), an EVIDENCED_BY link to each evidence episode with its update applied: one atomic write."""
        ...

    def update_patterns(self, updates: Sequence[PatternUpdate]) -> None: ...

    def merge_patterns(self, keep: Pattern, drop: Pattern, moved: Sequence[EpisodeUpdate], at: datetime) -> None:
        """``keep`` and ``drop`` written, drop MERGED_INTO keep, a tombstone for ``drop``, the moved
        episodes linked as keep's evidence with their update: one atomic write."""
        ...

    def link_patterns(self, a: str, b: str, relation: LinkRelation) -> None:
        """``a`` REFINES or is COMPATIBLE_WITH ``b`` (idempotent)."""
        ...

    def link_unrelated(self, pairs: Sequence[tuple[str, str]], prompt_id: str) -> None:
        """Remember that ``prompt_id`` found each (a, b) unrelated (the pair is not asked again under it)."""
        ...

    def pattern_links(self, team: str) -> list[PatternLink]:
        """Every relationship from a pattern of ``team`` to a pattern, sorted."""
        ...

    def entity_neighbours(self, pattern_id: str, live: Sequence[str]) -> list[str]:
        """Patterns of a status in ``live`` about an entity ``pattern_id`` is about, sorted."""
        ...

    def pattern_edges(self, team: str) -> dict[str, PatternEdges]:
        """The ABOUT and EVIDENCED_BY links of every pattern of ``team`` that has one, each sorted."""
        ...

    def forget_pattern(self, pattern_id: str, at: datetime, by: str, reason: str) -> None:
        """The pattern deleted with its links, a tombstone with who and why, and the episodes it had
        absorbed (still ``absorbed``) raw again: one atomic write. Unknown id: nothing happens."""
        ...

    def restore_pattern_links(self, links: Sequence[PatternLink]) -> None:
        """Create each link (any relation ``pattern_links`` reports) between two stored patterns. Idempotent."""
        ...


class ContradictionStore(Protocol):
    def contradictions(self, team: str | None = None, status: str | None = None) -> list[Contradiction]:
        """Readable contradictions (of ``team``, of ``status``), by (opened_at, id)."""
        ...

    def get_contradiction(self, contradiction_id: str) -> Contradiction:
        """One contradiction; NotFound when there is none with that id."""
        ...

    def patterns_in_dispute(self, ids: Sequence[str]) -> tuple[list[Pattern], list[Contradiction]]:
        """The patterns, as ``patterns_by_id``, and every open contradiction naming one of them or a
        pattern one of those contradicts (what recall shows beside them), by (opened_at, id): one read."""
        ...

    def open_contradiction(self, c: Contradiction, counter: int, old_confidence: float) -> None:
        """The contradiction (created once, with the old belief's ledger given ``counter`` more
        counter-evidence and ``old_confidence``), its OLD_BELIEF/NEW_BELIEF links, the old belief
        contested and the new one too unless it is an update; pinned beliefs keep their state."""
        ...

    def resolve_supersede(self, contradiction: Contradiction, winner: Pattern, loser: Pattern) -> None:
        """The contradiction closed, both beliefs written, winner SUPERSEDES loser: one atomic write."""
        ...

    def resolve_keep_both(self, contradiction: Contradiction, a: PatternUpdate, b: PatternUpdate) -> None: ...

    def restore_contradictions(self, contradictions: Sequence[Contradiction]) -> None:
        """Write each contradiction as given (created once) with OLD_BELIEF/NEW_BELIEF links to the
        beliefs that are stored; the beliefs themselves are not changed (import)."""
        ...


class RunLedger(Protocol):
    def save_run(self, run: Run) -> None: ...

    def runs(self, n: int, teams: Sequence[str] | None = None) -> list[Run]:
        """The newest ``n`` runs, newest first; with ``teams``, of those teams' jobs only (no run over several)."""
        ...

    def get_run(self, run_id: str) -> Run | None: ...

    def night_runs(self, n: int) -> list[Run]:
        """Every run of the newest ``n`` nights, newest first (dry runs left out): a night is every run
        of one slot (its team jobs), or one run with no slot (a run-once, a watchdog distill); nights
        are ordered by their first run's start. What the report and the metrics read."""
        ...

    def slot_done(self, slot: str) -> bool:
        """Has a night for this slot (e.g. the scheduled night of 2026-11-28) finished cleanly?"""
        ...

    def slot_runs(self, slot: str, team: str | None = None) -> list[Run]:
        """Every run recorded for this slot (finished or not), oldest first; with ``team``, only that
        team's runs and the runs over every team (``team`` None). What replicas read to tell which of
        a night's team steps are done."""
        ...

    def abandon_dead_runs(self, by: str, team: str | None = None) -> list[str]:
        """Mark the runs a dead process left unfinished ``abandoned`` (their pending steps ``skipped``):
        every one, or only those of ``team``. Only the holder of the matching lease may call this (the
        consolidation lease with no team running, or the team's lease): every run writes under one."""
        ...

    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...

    def finish_journal(self, key: str, value: str, journal: str) -> None:
        """Set meta ``key`` and empty meta ``journal``, atomically."""
        ...

    def update_patterns_and_meta(self, updates: Sequence[PatternUpdate], key: str, value: str) -> None:
        """``updates`` as update_patterns, and meta ``key``, atomically."""
        ...


class OutboxStore(Protocol):
    def queue_alerts(self, alerts: Sequence[AlertRecord]) -> None:
        """Store each alert unless one with its key exists (a contradiction alert is linked to its
        contradiction, and not stored when that is gone)."""
        ...

    def alerted_open_contradictions(self) -> list[tuple[Contradiction, frozenset[str]]]:
        """Every open contradiction with the channels that already have an alert for it."""
        ...

    def claim_alert(self, channel: str, now: datetime, until: datetime) -> AlertRecord | None:
        """The next due pending alert of ``channel``, not due again before ``until`` (so no other
        replica sends it meanwhile); None when nothing is due."""
        ...

    def mark_alert_delivered(self, key: str, now: datetime, message_ref: str | None = None) -> bool:
        """Only a pending alert becomes delivered (with the channel's id of the posted message, when it
        gives one); False otherwise (already delivered by another replica or before a crash, failed,
        dropped, or no such alert)."""
        ...

    def mark_alert_dropped(self, key: str, reason: str) -> bool:
        """A pending alert becomes ``dropped`` (never sent) with ``reason``; False for any other."""
        ...

    def mark_alert_failed(self, key: str, now: datetime, error: str, next_at: datetime, give_up: bool) -> bool:
        """Count a failed attempt of a pending alert; ``give_up`` makes it ``failed``."""
        ...

    def defer_alerts(self, channel: str, until: datetime) -> int:
        """Push every pending alert of ``channel`` due before ``until`` to ``until``."""
        ...

    def requeue_failed_alerts(self, now: datetime, keys: Sequence[str] | None = None) -> int:
        """Failed alerts (all, or those ``keys``) pending again, due ``now``, with a fresh attempt budget
        (attempts 0, no last error); nothing else changes. Returns how many were failed."""
        ...

    def withdraw_alerts(self, keys: Sequence[str], suffix: str, reason: str) -> None:
        """Each alert's key gets ``suffix`` (its item may be alerted again under the old key); a
        pending one becomes ``dropped`` with ``reason``. An undo takes their contradictions back."""
        ...

    def alerts(self, status: AlertStatus | None = None) -> list[AlertRecord]:
        """Every alert (of ``status``), oldest first."""
        ...

    def count_alerts(self, status: AlertStatus) -> int: ...

    def oldest_alert_at(self, status: AlertStatus) -> datetime | None:
        """When the oldest alert with ``status`` was queued (``created_at``); None when there is none."""
        ...


class LeaseStore(Protocol):
    def try_lease(self, name: str, claim: LeaseClaim, now_ms: int, ttl_ms: int, dead_holder: str | None) -> bool:
        """Take or renew lease ``name`` when it is free, ours, expired, or held by ``dead_holder``."""
        ...

    def release_lease(self, name: str, holder: str) -> None:
        """Free the lease if ``holder`` holds it."""
        ...

    def lease_state(self, name: str) -> LeaseState | None: ...

    def mark_ingest(self, mark: IngestMark) -> None:
        """Create or replace an ingest's mark; once it has ``ended``, the marks that ended or expired
        over an hour before are dropped (a second write)."""
        ...

    def ingest_marks(self, since_ms: int) -> list[IngestMark]:
        """The marks of the ingests running at ``since_ms`` or later (expiring or ended then or after)."""
        ...

    def ingest_episodes(self, team: str, ingests: Sequence[str]) -> set[str]:
        """The live episodes of ``team`` that the ingests ``ingests`` stored (``upsert_episodes``)."""
        ...


class SessionStore(Protocol):
    """Console sessions and the chat requests already taken: in the graph, so every replica sees them."""

    def start_session(self, session: SessionRecord, idle_before_ms: int, keep: int) -> None:
        """Store ``session``; first remove the sessions last seen before ``idle_before_ms`` and the least
        recently seen beyond ``keep`` (two writes: the purge, then the new session)."""
        ...

    def touch_session(self, key: str, now_ms: int, idle_before_ms: int, take_notices: bool) -> SessionRecord | None:
        """Session ``key``, now last seen at ``now_ms``, with the notices it held (emptied in the store when
        ``take_notices``); None when there is none or it was last seen before ``idle_before_ms``."""
        ...

    def add_session_notice(self, key: str, notice: str, keep: int) -> None:
        """Append ``notice`` to the session's notices, keeping the last ``keep``; no session: nothing."""
        ...

    def end_session(self, key: str) -> None: ...

    def remember_request(self, key: str, now_ms: int, until_ms: int) -> bool:
        """True the first time ``key`` is seen (or when it was remembered only until before ``now_ms``):
        it is remembered until ``until_ms``. False for a replay. Atomic across replicas; what is no longer
        remembered is removed as it goes (a second write)."""
        ...


class AdminStore(Protocol):
    backend: GraphBackend

    def describe(self) -> str:
        """Where it is, for status lines and errors (never a password)."""
        ...

    def ping(self) -> None:
        """Raise StoreError if the server cannot answer a trivial query."""
        ...

    def ensure_schema(self) -> None:
        """Create indexes/constraints. Idempotent; never called from constructors."""
        ...

    def teams(self) -> list[str]:
        """Teams with an episode or a pattern, sorted."""
        ...

    def has_team(self, team: str) -> bool:
        """Whether ``team`` has an episode or a pattern (``team in teams()``, without listing them all)."""
        ...

    def counts(self, team: str | None = None) -> GraphCounts:
        """The graph's sizes by label and status; of ``team`` only when given (one indexed query per
        label: what a team job records in the ledger, linear in that team, not in the store)."""
        ...

    def team_counts(self) -> dict[str, TeamCounts]:
        """Per team, its live patterns and open contradictions: one grouped query per label (rows:
        one a team), what a /metrics scrape reads for the per-team series. Teams with neither are left out."""
        ...

    def take_poisoned(self) -> list[Poisoned]:
        """The unreadable items the reads since the last call skipped (each once)."""
        ...

    def quarantine(self, items: Sequence[Poisoned], at: datetime) -> None:
        """Mark them ``quarantined`` (status kept in ``quarantined_from``): every step skips them."""
        ...

    def delete_all(self) -> None:
        """Remove every node of this product (tests and a fresh demo only)."""
        ...

    def tombstones(self, team: str) -> list[Tombstone]:
        """Every tombstone of ``team``, by (at, id)."""
        ...

    def restore_tombstones(self, tombstones: Sequence[Tombstone]) -> None:
        """Write each tombstone unless one with its id exists (import)."""
        ...

    def delete_team(self, team: str) -> None:
        """Remove everything of one team: episodes, patterns, contradictions, tombstones, its entities,
        its alerts and its meta keys (``...:{team}``). The run ledger is the deployment's and stays.
        Batched: a crash leaves part of the team, and a rerun removes the rest (import --replace)."""
        ...

    def close(self) -> None: ...


class GraphStore(
    EpisodeStore,
    PatternStore,
    ContradictionStore,
    RunLedger,
    OutboxStore,
    LeaseStore,
    ArchiveStore,
    SessionStore,
    AdminStore,
    Protocol,
):
    """Everything the domain asks of the entity graph."""


__all__ = [
    "AdminStore",
    "AlertKind",
    "AlertRecord",
    "AlertStatus",
    "ArchiveCounts",
    "ArchiveStore",
    "ArchivedItem",
    "ArchivedLabel",
    "ChangeKind",
    "ChangeRecord",
    "ContradictionStore",
    "Embedder",
    "EpisodeRecord",
    "EpisodeStore",
    "EpisodeCard",
    "EpisodeEdit",
    "EpisodeFlag",
    "EpisodeUpdate",
    "Forgetting",
    "GraphBackend",
    "GraphCounts",
    "GraphStore",
    "IngestMark",
    "ItemKind",
    "ItemRef",
    "ItemUpdate",
    "LeaseClaim",
    "LeaseState",
    "LeaseStore",
    "LinkRelation",
    "Mention",
    "MetaValue",
    "OWNED_EDGES",
    "OutboxStore",
    "PatternCard",
    "PatternEdges",
    "PatternLink",
    "PatternStore",
    "PatternUpdate",
    "PoisonKind",
    "Poisoned",
    "Retirement",
    "SessionRecord",
    "SessionStore",
    "RunLedger",
    "StoredEpisode",
    "TeamCounts",
    "VectorBackend",
    "VectorHealth",
    "VectorHit",
    "VectorKind",
    "VectorRebuild",
    "VectorStore",
]
