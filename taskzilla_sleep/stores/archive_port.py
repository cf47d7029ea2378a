"""The archive's part of the graph store's interface (``ports.GraphStore`` includes it): what a change
(a night's run, a person's resolve or release) found before it wrote, and what undo and release do
with it. The domain side is ``taskzilla_sleep/memory/archive/``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol

from taskzilla_sleep.stores.records import ArchiveCounts, ArchivedItem, ArchivedLabel, ChangeRecord, ItemRef


class ArchiveStore(Protocol):
    """What a change (a night's run, a person's resolve or release) found before it wrote: the
    before-images that ``undo`` restores, and the retired messages' texts (``archive/``)."""

    def archive_before(self, change: ChangeRecord, team: str, items: Sequence[ItemRef]) -> None:
        """Keep each of ``items`` as it is now (one that does not exist is kept as created by the
        change), unless the change already holds it: then only an episode's text is added, when
        asked and not kept yet. The change is recorded on first use, ``team`` added to its teams.
        Called before the write it protects: a crash in between keeps an image of an unchanged item."""
        ...

    def get_change(self, change_id: str) -> ChangeRecord | None: ...

    def archived_items(self, change_id: str) -> list[ArchivedItem]:
        """Every before-image of the change, by (label, key)."""
        ...

    def later_changes(self, change_id: str) -> list[ChangeRecord]:
        """Changes not undone, recorded after ``change_id``, holding an image of an item it holds too
        (they built on it), oldest first."""
        ...

    def restore_archived(self, items: Sequence[ArchivedItem]) -> None:
        """Put each item back as its image says: an existing one gets its properties (an episode its
        kept text, or the text it has) and owned relationships back; one the change created is deleted
        with its relationships (an entity only when nothing links it any more). A forgotten episode,
        and an item deleted since (forgotten), stay as they are. Idempotent; the caller batches."""
        ...

    def mark_undone(self, change_id: str, at: datetime, by: str, reason: str) -> None: ...

    def archived_texts(self, episode_ids: Sequence[str]) -> dict[str, str]:
        """The newest kept text of each of ``episode_ids`` that has one."""
        ...

    def purge_archive(self, before: datetime, at: datetime) -> list[str]:
        """Changes made before ``before`` are marked purged at ``at`` and their images dropped (in
        that order: a crash in between leaves images no undo uses, dropped by the next purge).
        Returns the ids of the changes newly purged."""
        ...

    def forget_archived(self, label: ArchivedLabel, keys: Sequence[str]) -> int:
        """Drop every image of these items, in every change (a person asked to forget them)."""
        ...

    def archive_counts(self, team: str | None = None) -> ArchiveCounts: ...

    def revive_episodes(self, texts: Mapping[str, str]) -> None:
        """Each retired or pruned episode of ``texts`` raw again with that text (its text from the
        archive): no absorption, no retirement time, its tombstone removed. Others are left as they are."""
        ...

    def archive_records(self, team: str) -> tuple[list[ChangeRecord], list[ArchivedItem]]:
        """The changes holding images of ``team`` (their ``teams`` as ``(team,)``) and those images,
        sorted (export)."""
        ...

    def restore_archive(self, changes: Sequence[ChangeRecord], items: Sequence[ArchivedItem]) -> None:
        """Write each change and image unless one with its id or key exists (import). Batched."""
        ...
