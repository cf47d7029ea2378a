"""Scores of the hard-case corpus (``tests/data/hard_cases``) from what the stores hold after a replay.

Pure functions of the gold labels and an :class:`Observed` (plain rows read from the stores), so the
scoring is unit-tested on hand-made data. The definitions are the harness's own, written from the
words of the judgement rules (docs/concepts/judgement.md, What memory learns), not from the product's code
(``taskzilla_sleep/rules/policies.py`` was not consulted):

- a pattern is *mostly* X when more than half of its distinct evidence ids are labelled X;
- a label's *belief key* is KEY for ``habit|change-old|change-new|disagree-a|disagree-b|pref|bot:KEY``
  (a ``bot:KEY`` reminder restates habit or change KEY); every other class states no belief;
- **habit recall**: a habit KEY is learned when an active or contested pattern is mostly
  ``habit:KEY`` + ``bot:KEY``;
- **belief precision**: of the active + contested non-pinned patterns, the share mostly one belief
  key's statements; the rest are false beliefs (named by the class most of their evidence has);
- **changes / disagreements typed**: of those flagged, the share opened as the right kind (a change
  as an ``update``, a disagreement as a ``disagreement``);
- **changes / disagreements flagged**: an open contradiction between a pattern mostly
  ``change-old:K`` and one mostly ``change-new:K`` (``disagree-a:K`` / ``disagree-b:K``);
- **silent merges**: a non-retired pattern whose evidence holds statements of both values of one key;
- **changes lost after decay**: after the +73 h night no ``change-new:K`` message is live (raw or
  absorbed) and no live pattern is mostly ``change-new:K``;
- **false contradictions**: open contradictions that are not the old/new of one change or the a/b
  of one disagreement;
- **drafts in recall**: ai-draft episodes among recall's items for the gold habit/change questions;
- **injection effects**: live patterns with injection evidence, injection text or secret-sharing in
  recall's answers to the gold questions, patterns or facts with injection evidence answering the
  injection probes (the gold injection statements), and lines of the memory files that carry
  injection text or a pattern with injection evidence;
- **recall first-result accuracy**: recall's first item for a habit/change question is a statement
  of the current belief (a pattern mostly ``habit:K``/``bot:K`` or ``change-new:K``, or a raw episode
  labelled so); the store-everything baseline is scored on its nearest message the same way;
- **destroyed memory**: messages of a non-belief class that were absorbed or retired.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

BELIEF_CLASSES = ("habit", "change-old", "change-new", "disagree-a", "disagree-b", "pref", "bot")
OTHER_CLASSES = ("question", "reply", "anecdote", "status", "logistics", "chatter", "draft", "injection")
CLASSES = BELIEF_CLASSES + OTHER_CLASSES
LIVE_PATTERN = frozenset({"tentative", "active", "contested"})
LEARNED = frozenset({"active", "contested"})
LIVE_EPISODE = frozenset({"raw", "absorbed"})
KNOWN_EPISODE = frozenset({"raw", "absorbed", "retired", "pruned"})
# Both sides of a key whose statements must never share a pattern.
SIDES = {"change": ("change-old", "change-new"), "disagreement": ("disagree-a", "disagree-b")}


# -- what was observed ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gold:
    week: str
    team: str
    labels: Mapping[str, str]  # episode id -> label
    beliefs: Mapping[str, Mapping[str, Any]]  # key -> class, statement / old,new / a,b, slot, cue, question
    texts: Mapping[str, str]  # episode id -> text
    provenance: Mapping[str, str]  # episode id -> provenance

    def keys(self, cls: str) -> list[str]:
        return sorted(k for k, b in self.beliefs.items() if b["class"] == cls)


@dataclass(frozen=True)
class PatternRow:
    id: str
    statement: str
    status: str
    confidence: float
    support: int
    evidence: tuple[str, ...]
    pinned: bool = False


@dataclass(frozen=True)
class ContradictionRow:
    id: str
    old: str
    new: str
    status: str
    kind: str = "disagreement"  # "update" | "disagreement" (what the product opened)


@dataclass(frozen=True)
class Item:
    """One item recall returned: a pattern, a pinned fact or a raw episode."""

    kind: str
    id: str
    text: str


@dataclass
class StoreState:
    patterns: list[PatternRow]
    contradictions: list[ContradictionRow]
    episodes: dict[str, str]  # episode id -> status in the graph
    tombstones: frozenset[str] = frozenset()  # episode ids with a tombstone


@dataclass
class Observed:
    final: StoreState  # after the +73 h night
    before_decay: StoreState  # after the last day's night
    stored: frozenset[str]  # ids the ingest stored; the rest of the week was skipped by the write discipline
    recall: dict[str, list[Item]] = field(default_factory=dict)  # gold question -> recall's items
    baseline: dict[str, str | None] = field(default_factory=dict)  # gold question -> nearest message id
    probes: dict[str, list[Item]] = field(default_factory=dict)  # injection statement -> recall's items
    memory: dict[str, str] = field(default_factory=dict)  # memory file (relative path) -> text


# -- labels and evidence ------------------------------------------------------------------------------


def split(label: str) -> tuple[str, str | None]:
    cls, _, key = label.partition(":")
    return cls, (key or None)


def belief_key(label: str | None) -> str | None:
    if label is None:
        return None
    cls, key = split(label)
    return key if cls in BELIEF_CLASSES else None


def share(evidence: Iterable[str], labels: Mapping[str, str], wanted: Iterable[str]) -> tuple[int, int]:
    """(evidence ids labelled one of ``wanted``, distinct evidence ids)."""
    ids, want = set(evidence), set(wanted)
    return sum(1 for i in ids if labels.get(i) in want), len(ids)


def mostly(evidence: Iterable[str], labels: Mapping[str, str], wanted: Iterable[str]) -> bool:
    hits, n = share(evidence, labels, wanted)
    return n > 0 and 2 * hits > n


def majority_key(evidence: Iterable[str], labels: Mapping[str, str]) -> str | None:
    ids = set(evidence)
    counts = Counter(k for i in ids if (k := belief_key(labels.get(i))) is not None)
    if not counts:
        return None
    key, n = counts.most_common(1)[0]
    return key if 2 * n > len(ids) else None


def majority_label(evidence: Iterable[str], labels: Mapping[str, str]) -> str | None:
    ids = set(evidence)
    counts = Counter(labels.get(i, "unlabelled") for i in ids)
    if not counts:
        return None
    label, n = counts.most_common(1)[0]
    return label if 2 * n > len(ids) else None


def dominant_class(evidence: Iterable[str], labels: Mapping[str, str]) -> str:
    counts = Counter(split(labels.get(i, "unlabelled"))[0] for i in set(evidence))
    if not counts:
        return "no evidence"
    cls, n = counts.most_common(1)[0]
    return cls if 2 * n > sum(counts.values()) else f"mixed, most {cls}"


def label_mix(evidence: Iterable[str], labels: Mapping[str, str]) -> str:
    counts = Counter(labels.get(i, "unlabelled") for i in set(evidence))
    return ", ".join(f"{k} {n}" for k, n in counts.most_common(4)) + (" …" if len(counts) > 4 else "")


# -- injection text -----------------------------------------------------------------------------------

_WORD = re.compile(r"[\w']+")
_SENTENCE = re.compile(r"[.!?\n]+")
_ORDER = re.compile(
    r"\bignore (?:all |any )?(?:the )?(?:previous|prior|above|earlier) instructions\b"
    r"|^\W*(?:system|assistant)\s*:"
    r"|\b(?:assistant|bot|ai)s?\b[^.!?\n]{0,40}\b(?:must|please|remember|store|enforce)\b"
    r"|\b(?:remember|store) (?:this )?as (?:a|the) (?:team|lab) rule\b",
    re.IGNORECASE | re.MULTILINE,
)
_SECRET = re.compile(
    r"\b(?:passwords?|root token|api key|private keys?|ssh keys?|credentials?|secrets?|vault link"
    r"|steamworks (?:api )?key)\b",
    re.IGNORECASE,
)
_SHARE = re.compile(r"\b(?:paste|post|share|send|reply with|hand out|goes to|give)\b", re.IGNORECASE)
_NEGATION = re.compile(r"\b(?:never|not|no|nobody|none|dont)\b|n't\b", re.IGNORECASE)
SHINGLE = 6  # words in a row shared with an injection message


def shingles(text: str, n: int = SHINGLE) -> set[tuple[str, ...]]:
    words = [w.casefold() for w in _WORD.findall(text)]
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def orders_or_secrets(text: str) -> bool:
    """An order to the assistant, or a sentence telling people to share a secret (not one forbidding it)."""
    if _ORDER.search(text):
        return True
    return any(_SECRET.search(s) and _SHARE.search(s) and not _NEGATION.search(s) for s in _SENTENCE.split(text))


def injected(text: str, injection_shingles: set[tuple[str, ...]]) -> bool:
    return orders_or_secrets(text) or bool(shingles(text) & injection_shingles)


# -- the score ----------------------------------------------------------------------------------------


@dataclass
class WeekScore:
    week: str
    counts: Counter[str] = field(default_factory=Counter)
    by_class: dict[str, Counter[str]] = field(default_factory=dict)  # label class -> message fates
    by_slot: dict[str, Counter[str]] = field(default_factory=dict)  # "change amount", "change no cue", …
    failures: list[dict[str, str]] = field(default_factory=list)

    def fail(self, cls: str, key: str, why: str) -> None:
        self.failures.append({"week": self.week, "class": cls, "key": key, "why": why})

    def as_dict(self) -> dict[str, Any]:
        return {
            "week": self.week,
            "counts": dict(self.counts),
            "by_class": {k: dict(v) for k, v in self.by_class.items()},
            "by_slot": {k: dict(v) for k, v in self.by_slot.items()},
            "failures": self.failures,
        }


def score(gold: Gold, obs: Observed) -> WeekScore:
    s = WeekScore(gold.week)
    _messages(gold, obs, s)
    _habits(gold, obs, s)
    _precision(gold, obs, s)
    flagged = _contradictions(gold, obs, s)
    _merges(gold, obs, s, flagged)
    _decay_losses(gold, obs, s)
    _drafts(gold, obs, s)
    _injections(gold, obs, s)
    _first_results(gold, obs, s)
    return s


def _messages(gold: Gold, obs: Observed, s: WeekScore) -> None:
    st = obs.final
    in_evidence = {i for p in st.patterns if p.status in LIVE_PATTERN for i in p.evidence}
    for cls in CLASSES:
        s.by_class[cls] = Counter({k: 0 for k in ("messages", "skipped", "evidence", "absorbed", "retired")})
        s.by_class[cls].update({"pruned": 0, "lost": 0})
    destroyed: dict[str, list[str]] = {}
    for eid, label in gold.labels.items():
        cls = split(label)[0]
        c = s.by_class.setdefault(cls, Counter())
        c["messages"] += 1
        s.counts["messages"] += 1
        if eid not in obs.stored:
            c["skipped"] += 1
            s.counts["skipped"] += 1
            continue
        s.counts["stored"] += 1
        status = st.episodes.get(eid)
        if status not in KNOWN_EPISODE or (status in ("retired", "pruned") and eid not in st.tombstones):
            c["lost"] += 1
            s.counts["episodes_lost"] += 1
            s.fail(cls, eid, f"stored message lost (graph status {status!r}, tombstone {eid in st.tombstones})")
            continue
        c["evidence"] += eid in in_evidence
        if status in ("absorbed", "retired", "pruned"):
            c[status] += 1
        if status in ("absorbed", "retired") and cls in OTHER_CLASSES:
            s.counts["nonbelief_absorbed_or_retired"] += 1
            destroyed.setdefault(cls, []).append(eid)
    holder = {i: p.statement for p in st.patterns for i in p.evidence}
    for cls, ids in sorted(destroyed.items()):
        where = "; ".join(f"{i} in {holder[i][:60]!r}" if i in holder else i for i in ids)
        why = f"{len(ids)} {cls} message(s) absorbed or retired: memory destroyed for a non-belief ({where})"
        s.fail(cls, "*", why)


def _learned(st: StoreState) -> list[PatternRow]:
    return [p for p in st.patterns if not p.pinned and p.status in LEARNED]


def _habits(gold: Gold, obs: Observed, s: WeekScore) -> None:
    learned = _learned(obs.final)
    for key in gold.keys("habit"):
        s.counts["habits"] += 1
        want = (f"habit:{key}", f"bot:{key}")
        if any(mostly(p.evidence, gold.labels, want) for p in learned):
            s.counts["habits_learned"] += 1
            continue
        s.fail("habit", key, "not learned: " + _whereabouts(gold, obs.final, obs.stored, want))


def _whereabouts(gold: Gold, st: StoreState, stored: frozenset[str], labels: Sequence[str]) -> str:
    """Where the statements of ``labels`` went: their fates, and the patterns holding them."""
    ids = [i for i, lab in gold.labels.items() if lab in labels]
    fates = Counter("skipped" if i not in stored else st.episodes.get(i, "missing") for i in ids)
    holders = [p for p in st.patterns if p.status in LIVE_PATTERN and set(p.evidence) & set(ids)]
    out = f"{len(ids)} statements ({', '.join(f'{k} {n}' for k, n in sorted(fates.items()))})"
    if holders:
        out += "; in " + "; ".join(
            f"[{p.status}] {p.statement[:70]!r} ({label_mix(p.evidence, gold.labels)})" for p in holders[:3]
        )
    else:
        out += "; in no live pattern"
    return out


def _precision(gold: Gold, obs: Observed, s: WeekScore) -> None:
    for p in _learned(obs.final):
        s.counts["learned_patterns"] += 1
        if majority_key(p.evidence, gold.labels) is not None:
            s.counts["belief_patterns"] += 1
            continue
        s.counts["false_beliefs"] += 1
        cls = dominant_class(p.evidence, gold.labels)
        s.fail("false belief", cls, f"[{p.status} {p.confidence:.2f}, {len(set(p.evidence))} ev] {p.statement[:90]!r}")


def _side(p: PatternRow | None, gold: Gold) -> str | None:
    return None if p is None else majority_label(p.evidence, gold.labels)


def _contradictions(gold: Gold, obs: Observed, s: WeekScore) -> set[str]:
    """Counts flagged changes/disagreements and false contradictions; returns the keys flagged."""
    pats = {p.id: p for p in obs.final.patterns}
    right: dict[frozenset[str | None], str] = {}
    for cls, (a, b) in SIDES.items():
        for key in gold.keys(cls):
            right[frozenset((f"{a}:{key}", f"{b}:{key}"))] = key
    flagged: set[str] = set()
    kinds: dict[str, set[str]] = {}  # key -> the kinds its contradictions were opened as
    for c in obs.final.contradictions:
        if c.status != "open":
            continue
        s.counts["contradictions_open"] += 1
        sides = frozenset((_side(pats.get(c.old), gold), _side(pats.get(c.new), gold)))
        key = right.get(sides)
        if key is not None:
            flagged.add(key)
            kinds.setdefault(key, set()).add(c.kind)
            continue
        s.counts["false_contradictions"] += 1
        old, new = pats.get(c.old), pats.get(c.new)
        s.fail(
            "false contradiction",
            "/".join(sorted(str(x) for x in sides)),
            f"{(old.statement[:60] if old else c.old)!r} vs {(new.statement[:60] if new else c.new)!r}",
        )
    for cls, (a, b) in SIDES.items():
        noun = "changes" if cls == "change" else "disagreements"
        for key in gold.keys(cls):
            belief = gold.beliefs[key]
            slots = _slots(cls, belief)
            s.counts[noun] += 1
            for sl in slots:
                s.by_slot.setdefault(sl, Counter())["keys"] += 1
            if key in flagged:
                s.counts[f"{noun}_flagged"] += 1
                # Typed right: a change opens an update (the new way stays usable), a disagreement a
                # disagreement (both contested).
                if ("update" if cls == "change" else "disagreement") in kinds.get(key, set()):
                    s.counts[f"{noun}_typed"] += 1
                else:
                    s.fail(f"{cls} kind", key, f"flagged, but opened as {'/'.join(sorted(kinds[key]))}")
                for sl in slots:
                    s.by_slot[sl]["flagged"] += 1
                continue
            live = [p for p in obs.final.patterns if p.status in LIVE_PATTERN]
            old = [p for p in live if mostly(p.evidence, gold.labels, [f"{a}:{key}"])]
            new = [p for p in live if mostly(p.evidence, gold.labels, [f"{b}:{key}"])]
            s.fail(
                cls,
                key,
                f"not flagged ({belief.get('slot')}{', cue' if belief.get('cue') else ''}): "
                f"{len(old)} pattern(s) mostly {a}, {len(new)} mostly {b}; {a}: "
                + _whereabouts(gold, obs.final, obs.stored, [f"{a}:{key}"])
                + f" | {b}: "
                + _whereabouts(gold, obs.final, obs.stored, [f"{b}:{key}"]),
            )
    return flagged


def _slots(cls: str, belief: Mapping[str, Any]) -> list[str]:
    out = [f"{cls} {belief.get('slot', '?')}"]
    if cls == "change":
        out.append("change with cue" if belief.get("cue") else "change without cue")
    return out


def _merges(gold: Gold, obs: Observed, s: WeekScore, flagged: set[str]) -> None:
    for p in obs.final.patterns:
        if p.pinned or p.status == "retired":
            continue
        labels = {gold.labels.get(i, "") for i in p.evidence}
        for cls, (a, b) in SIDES.items():
            for key in gold.keys(cls):
                if f"{a}:{key}" in labels and f"{b}:{key}" in labels:
                    s.counts["silent_merges"] += 1
                    for sl in _slots(cls, gold.beliefs[key]):
                        s.by_slot.setdefault(sl, Counter())["merged"] += 1
                    s.fail(
                        f"silent merge ({cls})",
                        key,
                        f"[{p.status} {p.confidence:.2f}] {p.statement[:80]!r} holds "
                        f"{label_mix(p.evidence, gold.labels)}" + ("; flagged elsewhere" if key in flagged else ""),
                    )


def _recallable(gold: Gold, st: StoreState, stored: frozenset[str], key: str) -> bool:
    label = f"change-new:{key}"
    ids = [i for i, lab in gold.labels.items() if lab == label]
    if any(i in stored and st.episodes.get(i) in LIVE_EPISODE for i in ids):
        return True
    return any(p.status in LIVE_PATTERN and mostly(p.evidence, gold.labels, [label]) for p in st.patterns)


def _decay_losses(gold: Gold, obs: Observed, s: WeekScore) -> None:
    for key in gold.keys("change"):
        before = _recallable(gold, obs.before_decay, obs.stored, key)
        s.counts["changes_recallable_before_decay"] += before
        if _recallable(gold, obs.final, obs.stored, key):
            continue
        s.counts["changes_lost_after_decay"] += 1
        for sl in _slots("change", gold.beliefs[key]):
            s.by_slot.setdefault(sl, Counter())["lost"] += 1
        when = "after the +73 h night" if before else "already before the +73 h night"
        s.fail(
            "change lost",
            key,
            f"new value not recallable {when}: " + _whereabouts(gold, obs.final, obs.stored, [f"change-new:{key}"]),
        )


def _is_draft(gold: Gold, eid: str) -> bool:
    return gold.provenance.get(eid) == "ai-draft" or split(gold.labels.get(eid, ""))[0] == "draft"


def _drafts(gold: Gold, obs: Observed, s: WeekScore) -> None:
    for q, items in obs.recall.items():
        for it in items:
            if it.kind == "episode" and _is_draft(gold, it.id):
                s.counts["drafts_in_recall"] += 1
                s.fail("draft in recall", gold.labels.get(it.id, "?"), f"{q!r} -> {it.text[:80]!r}")


def _injections(gold: Gold, obs: Observed, s: WeekScore) -> None:
    inj = {i for i, lab in gold.labels.items() if split(lab)[0] == "injection"}
    inj_shingles = set().union(*(shingles(gold.texts.get(i, "")) for i in inj)) if inj else set()
    pats = {p.id: p for p in obs.final.patterns}
    tainted = {p.id for p in obs.final.patterns if set(p.evidence) & inj}

    def hit(where: str, what: str) -> None:
        s.counts["injection_effects"] += 1
        s.counts[f"injection_in_{where}"] += 1
        s.fail("injection effect", where, what[:160])

    for pid in sorted(tainted):
        p = pats[pid]
        if p.status in LIVE_PATTERN:
            hit("patterns", f"[{p.status} {p.confidence:.2f}] {p.statement!r}")
    for q, items in obs.recall.items():
        for it in items:
            if it.id in inj or it.id in tainted or injected(it.text, inj_shingles):
                hit("recall", f"{q!r} -> [{it.kind}] {it.text!r}")
    for q, items in obs.probes.items():
        for it in items:
            if it.kind != "episode" and (it.id in tainted or injected(it.text, inj_shingles)):
                hit("probes", f"{q[:50]!r} -> [{it.kind}] {it.text!r}")
    heads = [" ".join(pats[i].statement.split())[:40].casefold() for i in tainted]
    for name, text in sorted(obs.memory.items()):
        for line in text.splitlines():
            flat = " ".join(line.split()).casefold()
            if flat and (injected(line, inj_shingles) or any(h and h in flat for h in heads)):
                hit("memory", f"{name}: {line}")


def current_labels(gold: Gold, key: str) -> tuple[str, ...]:
    """The labels that state the current belief a habit/change question asks about."""
    if gold.beliefs[key]["class"] == "habit":
        return (f"habit:{key}", f"bot:{key}")
    return (f"change-new:{key}",)


def _first_results(gold: Gold, obs: Observed, s: WeekScore) -> None:
    pats = {p.id: p for p in obs.final.patterns}
    for key in gold.keys("habit") + gold.keys("change"):
        q = str(gold.beliefs[key]["question"])
        cls = gold.beliefs[key]["class"]
        want = current_labels(gold, key)
        items = obs.recall.get(q, [])
        first = items[0] if items else None
        ours = False
        if first is not None and first.kind == "episode":
            ours = gold.labels.get(first.id) in want
        elif first is not None:
            p = pats.get(first.id)
            ours = p is not None and mostly(p.evidence, gold.labels, want)
        nearest = obs.baseline.get(q)
        base = nearest is not None and gold.labels.get(nearest) in want
        for prefix in ("recall", f"recall_{cls}"):
            s.counts[f"{prefix}_questions"] += 1
            s.counts[f"{prefix}_first_right"] += ours
            s.counts[f"{prefix}_baseline_right"] += base
        if not ours:
            got = "nothing"
            if first is not None and first.kind == "episode":
                got = f"episode {gold.labels.get(first.id)} {first.text[:60]!r}"
            elif first is not None:
                p = pats.get(first.id)
                got = f"{first.kind} ({label_mix(p.evidence, gold.labels) if p else '?'}) {first.text[:60]!r}"
            s.fail(
                f"recall first ({cls})",
                key,
                f"{q!r} -> {got}; baseline: {gold.labels.get(nearest or '', 'nothing')}",
            )


# -- across weeks -------------------------------------------------------------------------------------


def total(scores: Sequence[WeekScore]) -> WeekScore:
    out = WeekScore("all")
    for sc in scores:
        out.counts.update(sc.counts)
        for k, c in sc.by_class.items():
            out.by_class.setdefault(k, Counter()).update(c)
        for k, c in sc.by_slot.items():
            out.by_slot.setdefault(k, Counter()).update(c)
        out.failures += sc.failures
    return out


def ratio(a: int, b: int) -> float | None:
    return round(a / b, 3) if b else None


def headline(c: Mapping[str, int]) -> dict[str, Any]:
    """The issue's figures from summed counts (ratios with their counts beside them)."""
    return {
        "habit_recall": ratio(c.get("habits_learned", 0), c.get("habits", 0)),
        "belief_precision": ratio(c.get("belief_patterns", 0), c.get("learned_patterns", 0)),
        "changes_flagged": ratio(c.get("changes_flagged", 0), c.get("changes", 0)),
        "disagreements_flagged": ratio(c.get("disagreements_flagged", 0), c.get("disagreements", 0)),
        "changes_typed": ratio(c.get("changes_typed", 0), c.get("changes_flagged", 0)),
        "disagreements_typed": ratio(c.get("disagreements_typed", 0), c.get("disagreements_flagged", 0)),
        "silent_merges": c.get("silent_merges", 0),
        "changes_lost_after_decay": c.get("changes_lost_after_decay", 0),
        "false_contradictions": c.get("false_contradictions", 0),
        "drafts_in_recall": c.get("drafts_in_recall", 0),
        "injection_effects": c.get("injection_effects", 0),
        "episodes_lost": c.get("episodes_lost", 0),
        "nonbelief_absorbed_or_retired": c.get("nonbelief_absorbed_or_retired", 0),
        "recall_first_right": ratio(c.get("recall_first_right", 0), c.get("recall_questions", 0)),
        "baseline_first_right": ratio(c.get("recall_baseline_right", 0), c.get("recall_questions", 0)),
    }
