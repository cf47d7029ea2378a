"""What the bot gets back for a query: pinned facts first, then beliefs and raw messages by closeness.

A belief is found through its statement or through any message it holds as evidence, and scores
the best of them (``select``); a live belief comes before the raw messages it is about as close as,
and hides the messages it was distilled from. Nothing under ``min_similarity`` is returned.
The bot's own drafts (``ai-draft`` episodes) are never memory: left out unless asked for, and then
labelled. Nor is a text the injection lint flags (an order to the assistant, a role marker, a
secret), a message's (the flag its ingest kept on it) or a belief's (its statement, linted here): it
stays in the store, but the bot never gets it back. A
contested belief is never shown alone: the belief it contradicts comes right after it, both naming
the contradiction, so the bot can say that the team has not settled it (an update's new belief
first). A belief a person's resolution replaced (superseded), and the messages it absorbed, come
back only when asked for, and then marked superseded; the bot's messages and those stating a
replaced value rank after the rest.
Every recall marks what it returned as accessed (prune reads that: a recalled episode is not stale).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime

from taskzilla_sleep.core.models import (
    PATTERN_LIVE,
    Contradiction,
    ContradictionKind,
    Pattern,
    PatternStatus,
    Provenance,
    normalize_name,
)
from taskzilla_sleep.memory.quarantine import settle
from taskzilla_sleep.memory.recall import words
from taskzilla_sleep.memory.recall.item import MAX_EVIDENCE_IDS, ContradictionRef, RecallItem
from taskzilla_sleep.memory.recall.select import (
    MIN_SIMILARITY,
    Cover,
    EpisodeCandidate,
    Shade,
    belief_key,
    collapse_beliefs,
    pick,
    same_text,
)
from taskzilla_sleep.rules.beliefs import flagged, injection
from taskzilla_sleep.stores.ports import EpisodeCard, GraphStore, VectorHit, VectorStore

# Episode hits read from the graph up to each bound in turn (in k), until enough are found; the last
# is how far the query reaches (as far as the two widenings of a 3k-hit query it replaces).
_PARTS = (3, 9, 27)
# Beliefs no longer held: replaced by a person's resolution (superseded) or merged or unpinned (retired).
_GONE = frozenset({PatternStatus.SUPERSEDED, PatternStatus.RETIRED})


def query_pool(workers: int = 8) -> ThreadPoolExecutor:
    """A pool for the episode queries recalls run beside their belief reads. A process's ``Services``
    owns one (its threads are started by the first recall and stopped when the Services close); a
    caller without Services passes none and ``recall`` uses one of its own for the call."""
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="recall-query")


def recall(
    graph: GraphStore,
    vectors: VectorStore,
    query: str,
    now: datetime,
    teams: Sequence[str] | None = None,
    entity: str | None = None,
    k: int = 5,
    include_drafts: bool = False,
    include_superseded: bool = False,
    min_similarity: float = MIN_SIMILARITY,
    pool: Executor | None = None,
) -> list[RecallItem]:
    """``pool`` runs the episode queries (``Services.recall_pool``); None: a pool made for this call and
    shut down before it returns (a test's or a bench tool's recall, outside a process's Services)."""
    if pool is None:
        with query_pool() as own:
            return recall(
                graph,
                vectors,
                query,
                now,
                teams,
                entity=entity,
                k=k,
                include_drafts=include_drafts,
                include_superseded=include_superseded,
                min_similarity=min_similarity,
                pool=own,
            )
    ent = normalize_name(entity) if entity else None
    team_list = list(teams) if teams is not None else graph.teams()
    # Every pattern status this recall has read: the episodes' owners are mostly among them, and a
    # mature memory (where most recalls find beliefs) should not pay a round trip to read them again.
    known: dict[str, PatternStatus] = {}
    found = {team: vectors.query(team, "patterns", query, n=k * 4, payload=False) for team in team_list}
    # The episode queries need only the query's vector, embedded above: they run while the graph
    # reads the beliefs (a month-old team's recall finds beliefs almost every time).
    hits = {team: pool.submit(vectors.query, team, "episodes", query, k * _PARTS[-1], False) for team in team_list}
    read = _read_beliefs(graph, found, min_similarity, known)
    # A belief scores the best of its statement and its evidence among the episode hits (ids and
    # distances: the beliefs' evidence lists are read with them, nothing more is read for this).
    near = {h.id: round(h.similarity, 4) for f in hits.values() for h in f.result()}
    score = _Scores(read.statement, near, words.shared(query, {i: p.statement for i, p in read.full.items()}))
    choose = _Choice(score, ent, k, include_superseded, min_similarity)
    beliefs = choose(read.full, read.statement)
    related = _related(graph, beliefs, read, include_superseded)
    covers, lead = related.covers(beliefs), related.lead(beliefs)
    shade = Shade.of(beliefs, covers, lead)
    reader = _Reader(shade, ent, include_drafts, include_superseded, known, min_similarity, related.old_evidence())
    eps = _episodes(graph, hits, k, reader) if shade.good < k else []
    picked = pick(beliefs, eps, k, covers, lead)
    # A message of the answer absorbed by a live belief not read (its statement is far from the
    # question): the belief is found through it and takes its place (one read more, only then).
    shown = {i.id for i in picked}
    owners = {c.absorbed_by for c in eps if c.item.id in shown and c.absorbed_by is not None}
    late = sorted(o for o in owners if o not in read.full and known.get(o) in PATTERN_LIVE)
    if late:
        read.add(*graph.patterns_in_dispute(late))
        score = _Scores(read.statement, near, words.shared(query, {i: p.statement for i, p in read.full.items()}))
        choose = replace(choose, score=score)
        beliefs = choose(read.full, [*read.statement, *late])
        related = _related(graph, beliefs, read, include_superseded)
        picked = pick(beliefs, eps, k, related.covers(beliefs), related.lead(beliefs))
    items = related.beside(picked, score)
    graph.mark_accessed([i.id for i in items if i.kind == "episode"], [i.id for i in items if i.kind != "episode"], now)
    settle(graph, vectors, now)  # what could not be read was left out above; set it aside for good
    return items


def belief_item(
    p: Pattern, similarity: float | None, duplicates: int = 1, via: str | None = None, shared_words: float | None = None
) -> RecallItem:
    superseded = p.status is PatternStatus.SUPERSEDED or p.superseded_by is not None
    return RecallItem(
        kind="fact" if p.pinned else "pattern",
        id=p.id,
        team=p.team,
        text=p.statement,
        similarity=similarity,
        matched_evidence=via,
        shared_words=shared_words,
        confidence=p.confidence,
        status=p.status.value,
        time=p.first_seen if p.pinned else p.last_seen,
        provenance="pinned" if p.pinned else "distilled",
        pinned_by=p.pinned_by,
        evidence_count=p.support_count,
        evidence_ids=p.evidence_ids[:MAX_EVIDENCE_IDS],
        duplicates=duplicates,
        superseded=superseded,
    )


def episode_item(e: EpisodeCard, similarity: float, superseded: bool) -> RecallItem:
    return RecallItem(
        kind="episode",
        id=e.id,
        team=e.team,
        text=e.text,
        similarity=similarity,
        status=e.status.value,
        author=e.author,
        channel=e.channel,
        time=e.ts,
        provenance=e.provenance.value,
        superseded=superseded,
        draft=e.provenance is Provenance.AI_DRAFT,
    )


def _about(p: Pattern, ent: str) -> bool:
    return any(normalize_name(s) == ent for s in p.subjects) or ent in p.statement.casefold()


@dataclass
class _Read:
    """The beliefs read: the patterns (in full, with their evidence lists) and the open
    contradictions naming them; ``statement``: the cosine of each pattern hit to the query."""

    statement: dict[str, float] = field(default_factory=dict)
    full: dict[str, Pattern] = field(default_factory=dict)
    disputes: dict[str, Contradiction] = field(default_factory=dict)

    def add(self, patterns: Iterable[Pattern], contradictions: Iterable[Contradiction]) -> None:
        self.full.update((p.id, p) for p in patterns)
        self.disputes.update((c.id, c) for c in contradictions)


def _read_beliefs(
    graph: GraphStore, found: Mapping[str, Sequence[VectorHit]], floor: float, known: dict[str, PatternStatus]
) -> _Read:
    """Every pattern hit over the floor, read in full with its disputes, in one read per team (at
    most 4k patterns; a second read of only those chosen cost a round trip more than it saved:
    BENCHMARKS.md). A pattern whose statement is under the floor is found through its evidence only
    if it absorbed a message of the answer (``recall``'s late read)."""
    read = _Read()
    for hits in found.values():
        read.statement.update((h.id, round(h.similarity, 4)) for h in hits)
        over = [h.id for h in hits if h.similarity >= floor]
        if over:
            read.add(*graph.patterns_in_dispute(over))
    known.update((i, p.status) for i, p in read.full.items())
    return read


@dataclass(frozen=True)
class _Scores:
    """A belief's closeness to the query: the best of its statement's and its evidence's."""

    statement: Mapping[str, float]  # pattern hits
    near: Mapping[str, float]  # episode hits
    shared: Mapping[str, float] = field(default_factory=dict)  # the question's words each statement holds

    def __call__(self, p: Pattern) -> tuple[float | None, str | None]:
        """The score and, when a supporting message gave it, that message's id."""
        best = self.statement.get(p.id)
        via = None
        for e in p.evidence_ids:
            s = self.near.get(e)
            if s is not None and (best is None or s > best or (s == best and via is not None and e < via)):
                best, via = s, e
        return best, via

    def item(self, p: Pattern) -> RecallItem:
        similarity, via = self(p)
        return belief_item(p, similarity, via=via, shared_words=self.shared.get(p.id))


@dataclass(frozen=True)
class _Choice:
    """The best k distinct beliefs over the floor among the patterns read."""

    score: _Scores
    ent: str | None
    k: int
    include_superseded: bool
    floor: float

    def __call__(self, full: Mapping[str, Pattern], candidates: Iterable[str]) -> list[RecallItem]:
        ranked: list[RecallItem] = []
        for pid in candidates:
            p = full.get(pid)
            if p is None or not (p.status in PATTERN_LIVE or (self.include_superseded and p.status in _GONE)):
                continue
            if self.ent and not _about(p, self.ent):
                continue
            if injection(p.statement) is not None:
                continue  # learned before the lint knew its wording, or pinned by hand: never handed to the bot
            item = self.score.item(p)
            if item.similarity is None or item.similarity < self.floor:
                continue
            if item.superseded and not self.include_superseded:
                continue  # merged or replaced, whatever its status still says
            if not item.superseded and p.status not in PATTERN_LIVE:
                continue  # retired without a successor (an unpinned fact): gone
            ranked.append(item)
        ranked.sort(key=belief_key)
        return collapse_beliefs(ranked, self.k)


@dataclass
class _Related:
    """The beliefs shown beside the chosen ones: the other side of each open contradiction and, when
    asked for, the beliefs a chosen one replaced."""

    other: dict[str, tuple[str, Contradiction]] = field(default_factory=dict)  # belief -> (the other one, c)
    replaced: dict[str, list[str]] = field(default_factory=dict)  # winner -> the beliefs it superseded
    updates: dict[str, Contradiction] = field(default_factory=dict)  # new belief of an open update -> c
    patterns: dict[str, Pattern] = field(default_factory=dict)

    def companions(self, belief_id: str) -> list[str]:
        mate = self.other.get(belief_id)
        return ([mate[0]] if mate else []) + self.replaced.get(belief_id, [])

    def covers(self, beliefs: Sequence[RecallItem]) -> dict[str, Cover]:
        """What each belief (with those shown beside it) makes redundant among the raw episodes."""
        out: dict[str, Cover] = {}
        for b in beliefs:
            ids = [b.id, *self.companions(b.id)]
            evidence = (e for i in ids if i in self.patterns for e in self.patterns[i].evidence_ids)
            out[b.id] = Cover(frozenset(ids), frozenset(evidence))
        return out

    def _old(self) -> set[str]:
        """The beliefs being replaced: the old side of an open update, and those no longer held."""
        olds = {c.old_pattern_id for c in self.updates.values()}
        return olds | {i for i, p in self.patterns.items() if p.status in _GONE or p.superseded_by is not None}

    def lead(self, beliefs: Sequence[RecallItem]) -> frozenset[str]:
        """The live beliefs among ``beliefs``: active (not the old side of an open update), or the
        new side of one; they rank with the margin (``select``)."""
        olds = self._old()
        return frozenset(
            b.id
            for b in beliefs
            if b.kind == "pattern"
            and not b.superseded
            and b.id not in olds
            and (b.status == PatternStatus.ACTIVE.value or b.id in self.updates)
        )

    def old_evidence(self) -> frozenset[str]:
        """The messages that state a replaced value, as far as the beliefs read tell: evidence of a
        belief being replaced and of no other live one."""
        olds = self._old()
        held = {
            e for i, p in self.patterns.items() if i not in olds and p.status in PATTERN_LIVE for e in p.evidence_ids
        }
        return frozenset(e for i in olds if i in self.patterns for e in self.patterns[i].evidence_ids) - held

    def beside(self, items: Sequence[RecallItem], score: _Scores) -> list[RecallItem]:
        """Each belief followed by its companions (moved up if the result holds them, fetched if
        not), an update's new belief before its old one; both sides of an open contradiction name
        it; an update's new belief says since when and what it replaces."""
        out: list[RecallItem] = []
        shown: set[str] = set()
        for item in items:
            if item.id in shown:
                continue  # already shown beside an earlier one
            group = [item]
            for cid in self.companions(item.id) if item.kind != "episode" else []:
                if cid in shown or any(g.id == cid for g in group):
                    continue
                mate = next((i for i in items if i.id == cid), None)
                if mate is None and cid in self.patterns and injection(self.patterns[cid].statement) is None:
                    mate = score.item(self.patterns[cid])
                if mate is not None:
                    group.append(mate)
            group.sort(key=lambda g: 0 if g.id in self.updates else 1)  # the new belief of an update first
            for g in group:
                shown.add(g.id)
                out.append(self._marked(g))
        return out

    def _marked(self, i: RecallItem) -> RecallItem:
        pair = self.other.get(i.id)
        if pair is None or i.kind == "episode":
            return i
        update: dict[str, object] = {"contradiction": ContradictionRef(id=pair[1].id, kind=pair[1].kind)}
        c = self.updates.get(i.id)
        new, old = (self.patterns.get(c.new_pattern_id), self.patterns.get(c.old_pattern_id)) if c else (None, None)
        if new is not None and old is not None:
            update |= {"changed_on": new.first_seen, "was": old.statement}
        return i.model_copy(update=update)


def _related(graph: GraphStore, beliefs: Sequence[RecallItem], read: _Read, include_superseded: bool) -> _Related:
    """``read.disputes``: the open contradictions read with the beliefs. A belief a resolution
    replaced (shown only when asked for) may have others: then every open one of the teams is read.
    The patterns fetched here join ``read.full`` (a second call reads none of them again)."""
    r = _Related(patterns=read.full)
    teams = sorted({b.team for b in beliefs})
    disputes = sorted(read.disputes.values(), key=lambda c: (c.opened_at, c.id))
    open_ = [c for t in teams for c in graph.contradictions(t, "open")] if include_superseded and teams else disputes
    for c in open_:
        r.other.setdefault(c.old_pattern_id, (c.new_pattern_id, c))
        r.other.setdefault(c.new_pattern_id, (c.old_pattern_id, c))
    r.updates = {c.new_pattern_id: c for c in open_ if c.kind is ContradictionKind.UPDATE}
    if not beliefs:
        return r
    chosen = {b.id for b in beliefs}
    if include_superseded:
        for c in (c for t in teams for c in graph.contradictions(t, "resolved")):
            if c.resolution in ("new", "old"):
                winner, loser = c.pattern_ids[::-1] if c.resolution == "new" else c.pattern_ids
                if winner in chosen:
                    r.replaced.setdefault(winner, []).append(loser)
    wanted = {m for b in chosen for m in r.companions(b)}
    wanted |= {r.updates[i].old_pattern_id for i in chosen | wanted if i in r.updates}
    missing = sorted(wanted - set(r.patterns))
    if missing:
        r.patterns.update((p.id, p) for p in graph.patterns_by_id(missing))
    return r


def _episodes(
    graph: GraphStore, queries: Mapping[str, Future[list[VectorHit]]], k: int, reader: _Reader
) -> list[EpisodeCandidate]:
    """Raw episodes close to the query that may be shown, best first: read from the graph a part at
    a time, until as many distinct messages as the beliefs leave slots, none of them a shown belief
    hides or repeats, are found (``pick`` then chooses what it would from every hit). On a month-old
    team most of the nearest messages are a shown belief's evidence, the bot's drafts or repeats:
    one query reaches far (ids and distances only, as cheap at 135 hits as at 15 on Chroma:
    BENCHMARKS.md); a hit a shown belief hides whatever it holds is not read at all, and the hits
    with the vector of one read (its repeats: "deploy done" on thirty days) are only looked at in
    the same read, to count them (``Reader.part``)."""
    out: list[EpisodeCandidate] = []
    shade = reader.shade
    for running in queries.values():
        near = (h for h in running.result() if h.similarity >= reader.floor)  # under the floor: never read
        left = sorted((h for h in near if not shade.hides_unread(h.id, h.similarity)), key=_rank)
        for start, end in itertools.pairwise((0, *_PARTS)):
            part = reader.part(left, k * (end - start))
            if not part:
                break
            settled = reader.read(graph, part)
            left = [h for h in left if h.id not in settled]
            if (
                len({same_text(c.item.text) for c in reader.found if not shade.hides(c)} - shade.texts)
                >= k - shade.good
            ):
                break
        out += reader.found
        reader.found = []
    out.sort(key=lambda c: (-(c.item.similarity or 0.0), c.item.id))
    return out


def _rank(h: VectorHit) -> tuple[float, str]:
    return (-h.similarity, h.id)  # the order ``pick`` shows episodes in (final_key)


@dataclass
class _Reader:
    """Reads episode hits from the graph as candidates: what may be shown of what was asked."""

    shade: Shade
    ent: str | None
    drafts: bool
    superseded: bool
    known: dict[str, PatternStatus]  # pattern statuses read so far (the owners of absorbed messages)
    floor: float = MIN_SIMILARITY
    old: frozenset[str] = frozenset()  # messages stating a replaced value (``_Related.old_evidence``)
    found: list[EpisodeCandidate] = field(default_factory=list)

    def part(self, left: Sequence[VectorHit], size: int) -> list[tuple[VectorHit, list[str]]]:
        """Up to ``size`` hits to read next, best first, each with the hits left of its vector (an
        equal distance: an identical vector, so nearly always the same text). Asked about by an
        entity, a message's author and channel count: every hit is read on its own."""
        if self.ent is not None:
            return [(h, []) for h in left[:size]]
        part: dict[float, tuple[VectorHit, list[str]]] = {}
        for h in left:
            if h.similarity in part:
                part[h.similarity][1].append(h.id)
            elif len(part) < size:
                part[h.similarity] = (h, [])
        return list(part.values())

    def read(self, graph: GraphStore, part: Sequence[tuple[VectorHit, Sequence[str]]]) -> set[str]:
        """Read ``part``: each hit that may be shown becomes a candidate, counting in ``duplicates``
        its repeats that could stand in its place. Returns the hits settled: those read, and the
        repeats of a message that stands (that no shown belief hides), save those holding another
        text; the repeats of one that does not stand are read next, in case one of them does."""
        cards = graph.episode_cards([h.id for h, _ in part], self.drafts, {h.id: same for h, same in part})
        owners = {o for e in cards.values() for o in (e.absorbed_by, *e.repeats, *(r[2] for r in e.others)) if o}
        unknown = sorted(owners - self.known.keys())
        if unknown:
            self.known.update((i, c.status) for i, c in graph.pattern_cards(unknown).items())
        # A message absorbed by a belief no longer held is that belief's evidence: gone with it.
        gone = {i for i in owners if self.known.get(i) in _GONE}
        settled = {h.id for h, _ in part}
        for h, same in part:
            e = cards.get(h.id)
            c = self._candidate(e, h.similarity, gone) if e is not None else None
            if e is None or c is None:
                continue
            if not self.shade.hides(c):
                # The same text but for spacing and case (an uncased model's vector is the same).
                key = same_text(e.text)
                alike = [r for r in e.others if same_text(r[1]) == key]
                n = sum(1 for o in (*e.repeats, *(r[2] for r in alike)) if self._counts(c, o, gone))
                c = replace(c, item=c.item.model_copy(update={"duplicates": 1 + n})) if n else c
                settled.update(set(same) - {r[0] for r in e.others if same_text(r[1]) != key})
            self.found.append(c)
        return settled

    def _candidate(self, e: EpisodeCard, similarity: float, gone: set[str]) -> EpisodeCandidate | None:
        if flagged(e.text, e.injection, e.injection_lint):
            return None  # chat is data: an order to the assistant, or a secret, is never handed to the bot
        ent = self.ent
        if ent and ent not in (normalize_name(e.author), normalize_name(e.channel)) and ent not in e.text.casefold():
            return None
        superseded = e.absorbed_by in gone
        if superseded and not self.superseded:
            return None
        # The bot's reminders lag a change, and a replaced value's messages state the old one: after the rest.
        after = superseded or e.provenance is Provenance.BOT or e.id in self.old
        return EpisodeCandidate(episode_item(e, round(similarity, 4), superseded), e.absorbed_by, after)

    def _counts(self, c: EpisodeCandidate, owner: str | None, gone: set[str]) -> bool:
        """Whether a repeat of ``c``'s text absorbed by ``owner`` would be a candidate beside it."""
        if owner in gone and not self.superseded:
            return False
        return not self.shade.hides(replace(c, absorbed_by=owner))
