"""The oracle model's gold (issue 28): its file format, the loader, and the builder from a hard-case week.

One team a file::

    {"team": "w01-kiosk",                                     (optional, informative)
     "beliefs": {KEY: {"statement": TEXT, "kind": "norm|process|preference|fact",
                       "evidence": "explicit_rule|…",          (optional; default explicit_rule)
                       "since": "YYYY-MM-DD"}},                (optional; a change's new side)
     "messages": {EPISODE_ID_OR_EXACT_TEXT: KEY},
     "relations": [{"old": KEY, "new": KEY, "relation": "supersedes" | "contradicts"}]}

A message is matched by its id when the request shows ids, else by its text: exactly, then with its
white space folded, then (a text the prompt cut with an ellipsis) by its start. Only what a person
said maps to a key: the builder leaves the bot's reminders, its drafts and injections out, so they
never support anything.

The builder (``build``) reads ``tests/data/hard_cases/wNN.gold.json`` and its jsonl:

- ``habit:K`` → key ``K``; ``change-old:K`` / ``change-new:K`` → ``K.old`` / ``K.new`` with ``K.old``
  superseded by ``K.new``, whose ``since`` is the date of its first message by a person (``human``
  provenance: a bot's scheduled reminder never dates a change); ``disagree-a:K`` / ``disagree-b:K``
  → ``K.a`` / ``K.b``, contradicting each other;
- ``pref:K`` → key ``K``, kind ``preference``, evidence ``single_opinion``: DISTILL v2 names "what
  someone wants from the others" a belief and "one person's view, however often repeated" its
  evidence category; the corpus README says a preference is one person's, not a team rule and not
  a contradiction of the other person's (so no relation);
- every other class (question, reply, anecdote, status, logistics, chatter, draft, bot, injection)
  gets no key: those messages support nothing;
- kinds: the corpus does not say; habits, changes and disagreements are rules the team follows
  (``norm``), preferences ``preference``;
- support: ``human`` and ``import`` messages (the corpus labels a wiki line that states a habit as the
  habit; whether an importer counts is the product's guard to decide, not the model's).

    python -m ops.bench.oracle_gold w01 [-o FILE] [--corpus DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "hard_cases"
ELLIPSIS = "…"
KINDS = ("norm", "process", "preference", "fact")
EVIDENCE = ("explicit_rule", "repeated_practice", "mixed", "single_opinion")
MAX_STATEMENT = 300  # DISTILL's limit on a statement
SUPPORT_PROVENANCE = frozenset({"human", "import"})  # a person said it (an import is a person's wiki line)
PERSON = "human"  # whose first new-value message dates a change


class GoldError(ValueError):
    """A gold file that cannot be used: the message names the file, the place and why."""


class GoldBelief(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    statement: str = Field(min_length=1, max_length=MAX_STATEMENT)
    kind: Literal["norm", "process", "preference", "fact"]
    evidence: Literal["explicit_rule", "repeated_practice", "mixed", "single_opinion"] = "explicit_rule"
    since: date | None = None


class GoldRelation(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    old: str
    new: str
    relation: Literal["supersedes", "contradicts"]


class _File(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    team: str | None = None
    beliefs: dict[str, GoldBelief]
    messages: dict[str, str]
    relations: list[GoldRelation] = []


def fold(text: str) -> str:
    """White space folded to single spaces (what the prompts do to a message before cutting it)."""
    return " ".join(text.split())


@dataclass(frozen=True)
class OracleGold:
    """A loaded gold file; ``match`` finds the key of a message as a request shows it."""

    beliefs: Mapping[str, GoldBelief]
    messages: Mapping[str, str]  # episode id or exact text -> key
    relations: Sequence[GoldRelation] = ()
    team: str | None = None
    _folded: dict[str, tuple[str, str]] = field(default_factory=dict, repr=False, compare=False)
    _statements: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        for text, key in self.messages.items():
            self._folded.setdefault(fold(text).casefold(), (text, key))
        for key, b in self.beliefs.items():
            self._statements.setdefault(fold(b.statement).casefold(), key)

    def match(self, text: str, episode_id: str | None = None) -> tuple[str, str] | None:
        """(the gold's entry, its key) for a message as a request shows it, or None."""
        if episode_id is not None and episode_id in self.messages:
            return episode_id, self.messages[episode_id]
        if text in self.messages:
            return text, self.messages[text]
        flat = fold(text).casefold()
        if flat in self._folded:
            return self._folded[flat]
        if flat.endswith(ELLIPSIS):  # cut by the prompt: its start must be one message's start, and only one
            start = flat[: -len(ELLIPSIS)]
            found = {hit for t, hit in self._folded.items() if start and t.startswith(start)}
            return found.pop() if len(found) == 1 else None
        return None

    def key_of_statement(self, statement: str) -> str | None:
        flat = fold(statement).casefold()
        if flat in self._statements:
            return self._statements[flat]
        if flat.endswith(ELLIPSIS):
            start = flat[: -len(ELLIPSIS)]
            found = {k for t, k in self._statements.items() if start and t.startswith(start)}
            return found.pop() if len(found) == 1 else None
        return None

    def relation(self, new: str | None, old: str | None) -> str:
        """The REFLECT relation of a NEW belief with key ``new`` to an OLD one with key ``old``."""
        if new is None or old is None:
            return "unrelated"
        if new == old:
            return "same"
        for r in self.relations:
            if (r.old, r.new) == (old, new):
                return r.relation
            if (r.old, r.new) == (new, old):
                # The old value shown as the newer belief: it does not replace the new one; the two
                # still cannot both hold (a contradiction's kind is the dates' and people's, not ours).
                return "contradicts"
        return "unrelated"

    def replaced_by(self, key: str) -> str | None:
        """The key ``key`` supersedes, if any."""
        return next((r.old for r in self.relations if r.new == key and r.relation == "supersedes"), None)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"team": self.team} if self.team else {}
        out["beliefs"] = {k: b.model_dump(mode="json", exclude_defaults=True) for k, b in self.beliefs.items()}
        out["messages"] = dict(self.messages)
        out["relations"] = [r.model_dump(mode="json") for r in self.relations]
        return out


def parse(data: Any, where: str) -> OracleGold:
    """An :class:`OracleGold` from decoded JSON; GoldError naming ``where``, the field and why."""
    try:
        f = _File.model_validate(data)
    except ValidationError as exc:
        e = exc.errors()[0]
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise GoldError(f"{where}: {loc}: {e['msg']}{more}") from exc
    for text, key in f.messages.items():
        if key not in f.beliefs:
            raise GoldError(f"{where}: messages[{text[:60]!r}]: {key!r} is not a key of beliefs")
    for n, r in enumerate(f.relations):
        for side in ("old", "new"):
            if getattr(r, side) not in f.beliefs:
                raise GoldError(f"{where}: relations.{n}.{side}: {getattr(r, side)!r} is not a key of beliefs")
        if r.old == r.new:
            raise GoldError(f"{where}: relations.{n}: old and new are the same key {r.old!r}")
    seen: dict[str, str] = {}
    for key, b in f.beliefs.items():
        other = seen.setdefault(fold(b.statement).casefold(), key)
        if other != key:  # REFLECT maps a statement back to its key: two keys cannot share one
            raise GoldError(f"{where}: beliefs.{key}.statement: the same statement as beliefs.{other}")
    return OracleGold(f.beliefs, f.messages, tuple(f.relations), f.team)


def load(path: Path) -> OracleGold:
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise GoldError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise GoldError(f"{path}: line {exc.lineno} column {exc.colno}: not JSON ({exc.msg})") from exc
    return parse(data, str(path))


# -- from a hard-case week -----------------------------------------------------------------------------


SIDES = {"change-old": "old", "change-new": "new", "disagree-a": "a", "disagree-b": "b"}


def oracle_key(label: str) -> str | None:
    """The oracle key a corpus label states, or None (not a belief a person states)."""
    cls, _, key = label.partition(":")
    if cls in ("habit", "pref"):
        return key
    if cls in SIDES:
        return f"{key}.{SIDES[cls]}"
    return None


def corpus_labels(key: str, corpus_class: str) -> tuple[str, ...]:
    """The corpus labels whose messages state oracle key ``key`` (a reminder of a habit included)."""
    if corpus_class == "habit":
        return (f"habit:{key}", f"bot:{key}")
    if corpus_class == "preference":
        return (f"pref:{key}",)
    base, _, side = key.rpartition(".")
    cls = {v: k for k, v in SIDES.items()}[side]
    return (f"{cls}:{base}",)


@dataclass(frozen=True)
class Built:
    """A week's gold, with what the harness needs beside it."""

    week: str
    gold: OracleGold
    ids: Mapping[str, tuple[str, ...]]  # key -> the ids of the messages that may support it
    corpus_class: Mapping[str, str]  # key -> habit | change | disagreement | preference


def week_names(corpus: Path = CORPUS) -> list[str]:
    return sorted(p.name[: -len(".gold.json")] for p in corpus.glob("*.gold.json"))


def build(week: str, corpus: Path = CORPUS) -> Built:
    gold_path, lines_path = corpus / f"{week}.gold.json", corpus / f"{week}.jsonl"
    if not gold_path.is_file() or not lines_path.is_file():
        known = ", ".join(week_names(corpus)) or "none"
        raise GoldError(f"{corpus}: no week {week!r} (need {gold_path.name} and {lines_path.name}; known: {known})")
    g = json.loads(gold_path.read_text(encoding="utf-8"))
    episodes = [json.loads(x) for x in lines_path.read_text(encoding="utf-8").splitlines() if x.strip()]
    beliefs: dict[str, GoldBelief] = {}
    relations: list[GoldRelation] = []
    classes: dict[str, str] = {}
    for k, b in g["beliefs"].items():
        cls = b["class"]
        if cls == "habit":
            beliefs[k] = GoldBelief(statement=b["statement"], kind="norm")
        elif cls == "preference":
            beliefs[k] = GoldBelief(statement=b["statement"], kind="preference", evidence="single_opinion")
        elif cls == "change":
            beliefs[f"{k}.old"] = GoldBelief(statement=b["old"], kind="norm")
            beliefs[f"{k}.new"] = GoldBelief(statement=b["new"], kind="norm", since=_first_said(episodes, g, k))
            relations.append(GoldRelation(old=f"{k}.old", new=f"{k}.new", relation="supersedes"))
        elif cls == "disagreement":
            beliefs[f"{k}.a"] = GoldBelief(statement=b["a"], kind="norm")
            beliefs[f"{k}.b"] = GoldBelief(statement=b["b"], kind="norm")
            relations.append(GoldRelation(old=f"{k}.a", new=f"{k}.b", relation="contradicts"))
        # an injection is never a belief: no key
        classes.update({key: cls for key in beliefs if key not in classes})
    messages: dict[str, str] = {}
    ids: dict[str, list[str]] = {k: [] for k in beliefs}
    for e in episodes:
        key = oracle_key(g["labels"][e["id"]])
        if key is None or e["provenance"] not in SUPPORT_PROVENANCE:
            continue
        if key not in beliefs:
            raise GoldError(f"{gold_path}: labels.{e['id']}: key {key!r} is not described in beliefs")
        other = messages.setdefault(e["text"], key)
        if other != key:
            raise GoldError(f"{lines_path}: {e['id']}: the same text as a message of {other!r}, labelled {key!r}")
        ids[key].append(e["id"])
    gold = parse(
        OracleGold(beliefs, messages, tuple(relations), g.get("team")).as_json(),
        f"{gold_path} (as built)",
    )
    return Built(week, gold, {k: tuple(v) for k, v in ids.items()}, classes)


def _first_said(episodes: Sequence[Mapping[str, Any]], g: Mapping[str, Any], key: str) -> date | None:
    label = f"change-new:{key}"
    said = [e["ts"] for e in episodes if g["labels"][e["id"]] == label and e["provenance"] == PERSON]
    return min(datetime.fromisoformat(ts) for ts in said).date() if said else None  # the day as its writer saw it


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="write the oracle's gold file for a hard-case week")
    ap.add_argument("week", help="a week of the corpus, e.g. w01 or w04-de")
    ap.add_argument("-o", "--out", type=Path, help="write here (default: stdout)")
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    a = ap.parse_args(argv)
    try:
        built = build(a.week, a.corpus)
    except GoldError as exc:
        print(f"oracle_gold: {exc}", file=sys.stderr)
        return 1
    text = json.dumps(built.gold.as_json(), indent=1, ensure_ascii=False) + "\n"
    if a.out is None:
        sys.stdout.write(text)
    else:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text, encoding="utf-8")
        print(f"{a.out}: {len(built.gold.beliefs)} beliefs, {len(built.gold.messages)} messages", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
