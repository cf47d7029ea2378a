"""What the console's object pages read beyond :class:`MemoryService`'s own operations: one message,
the team's messages, an entity's beliefs and messages, one run, a belief by id alone. Each check is
the service's: the caller must see the team (``Access.visible``: another team's id is "no such …",
never "forbidden", so its existence does not leak), a run needs an admin as ``/v1/runs`` does.

Only existing store reads are used (``get_episodes``, ``episodes_by_status``, ``episode_entities``,
``archived_texts``, ``patterns``, ``get_run``); the message and entity pages scan a team's episodes,
capped at ``MAX_SCAN`` newest (the page says so when the cap cut the list). A message decay retired
(or prune dropped) shows, and is searched by, its text in the archive while the archive keeps it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from taskzilla_sleep.core.errors import InputError, NotFound
from taskzilla_sleep.core.models import Entity, EntityKind, Episode, EpisodeStatus, Pattern, Run, normalize_name
from taskzilla_sleep.memory.admin import PatternDetail
from taskzilla_sleep.rules.access import Access
from taskzilla_sleep.service.memory_service import MemoryService
from taskzilla_sleep.stores.records import Mention

# Every status a person may browse: quarantined episodes cannot be read (their props are broken).
BROWSABLE = tuple(s.value for s in EpisodeStatus if s is not EpisodeStatus.QUARANTINED)
# Archived: taken out of the live store (text kept in the archive while it lasts, or dropped).
ARCHIVED = (EpisodeStatus.RETIRED.value, EpisodeStatus.PRUNED.value, EpisodeStatus.FORGOTTEN.value)
MAX_SCAN = 20_000
CHUNK = 500  # ids a call to episode_entities


@dataclass(frozen=True)
class MessageQuery:
    """The message browser's filters; empty means any."""

    text: str = ""
    channel: str = ""
    author: str = ""
    status: str = ""  # one of BROWSABLE, "live" (raw + absorbed), "archived" (ARCHIVED), or "" (every one)

    def statuses(self) -> tuple[str, ...]:
        if not self.status:
            return BROWSABLE
        if self.status == "live":
            return (EpisodeStatus.RAW.value, EpisodeStatus.ABSORBED.value)
        if self.status == "archived":
            return ARCHIVED
        if self.status in BROWSABLE:
            return (self.status,)
        raise InputError(f"status must be one of live, archived, {', '.join(BROWSABLE)}, not {self.status[:50]!r}")


@dataclass
class Messages:
    found: list[Episode]  # newest first
    channels: list[str]
    authors: list[str]
    capped: bool  # the team holds more than MAX_SCAN messages of these statuses: the oldest are not searched
    archived: dict[str, str]  # id -> the text the archive keeps of a retired or pruned message


@dataclass
class EpisodeView:
    episode: Episode
    mentions: list[Mention]
    absorbed_into: Pattern | None  # the belief that absorbed it (if still stored)
    archived: str | None  # its text in the archive (retired or pruned, while the archive keeps it)


@dataclass
class EntityView:
    entity: Entity
    key: str
    beliefs: list[Pattern]  # naming it as a subject
    backed: list[Pattern]  # others its messages are evidence of (a person's say, a channel's practice)
    messages: list[Episode]  # newest first
    capped: bool
    roles: dict[str, list[str]] = field(default_factory=dict)  # episode id -> roles the entity has in it
    archived: dict[str, str] = field(default_factory=dict)  # as Messages.archived


def messages(service: MemoryService, access: Access, team: str | None, q: MessageQuery) -> Messages:
    scope = service.team(access, team)
    eps, capped = _scan(service, scope, q.statuses())
    channels = sorted({e.channel for e in eps})
    authors = sorted({e.author for e in eps}, key=str.casefold)
    archived = _archived(service, eps)
    text = q.text.casefold()
    found = [
        e
        for e in eps
        if (not q.channel or e.channel == q.channel)
        and (not q.author or e.author.casefold() == q.author.casefold())
        and (not text or text in (e.text or archived.get(e.id, "")).casefold())
    ]
    return Messages(found, channels, authors, capped, archived)


def episode(service: MemoryService, access: Access, episode_id: str) -> EpisodeView:
    found = service.graph.get_episodes([episode_id])
    if not found:
        raise NotFound(f"no episode {episode_id!r}")
    e = found[0]
    access.visible(e.team, f"episode {episode_id!r}")
    mentions = service.graph.episode_entities([e.id]).get(e.id, [])
    into = service.graph.patterns_by_id([e.absorbed_by]) if e.absorbed_by else []
    kept = _archived(service, [e]).get(e.id)
    return EpisodeView(e, sorted(mentions, key=lambda m: (m.role, m.key)), into[0] if into else None, kept)


def pattern(service: MemoryService, access: Access, pattern_id: str) -> PatternDetail:
    """A belief by its id alone (a link that names no team): its team is the belief's own."""
    found = service.graph.patterns_by_id([pattern_id])
    if not found:
        raise NotFound(f"no pattern {pattern_id!r}")
    access.visible(found[0].team, f"pattern {pattern_id!r}")
    return service.pattern(access, found[0].team, pattern_id)


def run(service: MemoryService, access: Access, run_id: str) -> Run:
    """One run of the ledger (admin, as ``/v1/runs``); a token of some teams sees its teams' runs only
    (a run over several teams is none of them, as on the nights report)."""
    access.require("admin")
    r = service.graph.get_run(run_id)
    if r is None or (access.teams is not None and (r.team is None or r.team not in access.teams)):
        raise NotFound(f"no run {run_id!r}")
    return r


def entity(service: MemoryService, access: Access, team: str | None, kind: str, name: str) -> EntityView:
    scope = service.team(access, team)
    try:
        what = Entity(team=scope, kind=EntityKind(kind), name=name)
    except ValueError as exc:
        kinds = ", ".join(k.value for k in EntityKind)
        raise InputError(f"entity kind must be one of {kinds}, not {kind[:50]!r}") from exc
    if not normalize_name(name):
        raise InputError("entity name is empty")
    key = what.key
    patterns = service.graph.patterns(scope)
    beliefs = [p for p in patterns if any(_names(s, what) for s in p.subjects)]
    eps, capped = _scan(service, scope, BROWSABLE)
    roles: dict[str, list[str]] = {}
    for i in range(0, len(eps), CHUNK):
        linked = service.graph.episode_entities([e.id for e in eps[i : i + CHUNK]])
        for eid, ms in linked.items():
            mine = sorted({m.role for m in ms if m.key == key})
            if mine:
                roles[eid] = mine
    found = [e for e in eps if e.id in roles]
    named = {p.id for p in beliefs}
    backed = [p for p in patterns if p.id not in named and not roles.keys().isdisjoint(p.evidence_ids)]
    beliefs.sort(key=lambda p: -p.confidence)
    backed.sort(key=lambda p: -p.confidence)
    return EntityView(what, key, beliefs, backed, found, capped, roles, _archived(service, found))


def _names(subject: str, what: Entity) -> bool:
    """A belief's subject names the entity: its key, or its name (``@`` and ``#`` aside)."""
    return subject == what.key or normalize_name(subject) == normalize_name(what.name)


def _archived(service: MemoryService, eps: list[Episode]) -> dict[str, str]:
    """The archive's text of each retired or pruned message among ``eps`` that it still keeps."""
    gone = [e.id for e in eps if not e.text and e.status in (EpisodeStatus.RETIRED, EpisodeStatus.PRUNED)]
    out: dict[str, str] = {}
    for i in range(0, len(gone), CHUNK):
        out.update(service.graph.archived_texts(gone[i : i + CHUNK]))
    return out


def _scan(service: MemoryService, team: str, statuses: tuple[str, ...]) -> tuple[list[Episode], bool]:
    eps = service.graph.episodes_by_status(team, list(statuses))  # by (ts, id)
    capped = len(eps) > MAX_SCAN
    return list(reversed(eps[-MAX_SCAN:])), capped
