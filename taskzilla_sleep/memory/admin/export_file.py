"""The export file, written and read here: a team's memory as JSON Lines (``transfer`` fills and drains it).

One JSON object a line, each with a ``type``: the header first (``format``, ``version``, ``team``,
``exported_at``), then episodes (with the content hash kept at ingest and the entities they mention),
patterns and facts (pinned patterns; with the entities they are ABOUT and the episodes they are
EVIDENCED_BY), links between patterns, contradictions, tombstones, the runs of the team's jobs, the
team's meta keys (watermarks, the distill journal), the team's queued chat alerts, and the team's
archive (the changes it holds images of and the images: what ``undo`` and ``patterns release`` need);
last the trailer: how many lines precede it, how many of each type, and the SHA-256 of their bytes.

Reading checks every line before anything is written: JSON, type, fields, unique ids, references,
every line of the header's team (entity keys and meta keys included: a file never names another
team), and the trailer. A file without one (cut short) is refused; ``trailer=False`` (``--no-trailer``,
for an export written before trailers, format version 1) reads it with a warning. A trailer that is
there is always checked: counts first (which type lost lines), then the checksum (changed since).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from taskzilla_sleep.core.errors import InputError
from taskzilla_sleep.core.models import (
    EPISODE_LIVE,
    TEAM_RE,
    Contradiction,
    Episode,
    Pattern,
    Run,
    Time,
    Tombstone,
    iso_time,
)
from taskzilla_sleep.memory.meta_keys import DISTILL_JOURNAL as JOURNAL
from taskzilla_sleep.memory.meta_keys import LAST_DISTILL, LEGACY_WATERMARK
from taskzilla_sleep.memory.meta_keys import REFLECT_DEFERRED as DEFERRED
from taskzilla_sleep.memory.meta_keys import REFLECT_WATERMARK as WATERMARK
from taskzilla_sleep.stores.ports import AlertRecord, ArchivedItem, ChangeRecord

FORMAT = "taskzilla-export"
VERSION = 2  # 2: ends with a trailer; 1: written before trailers
META_KEYS = (WATERMARK, DEFERRED, LAST_DISTILL, LEGACY_WATERMARK, JOURNAL)  # each "...:{team}"


class Header(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["header"]
    format: Literal["taskzilla-export"]
    version: Literal[1, 2]
    team: str = Field(pattern=TEAM_RE)
    exported_at: Time


class Trailer(BaseModel):
    """The last line: what precedes it, so a file cut short (or changed) is never taken for a whole one."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["trailer"]
    lines: int = Field(ge=1)  # the lines before it, the header's included
    counts: dict[str, int]  # lines by type, the header's left out
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")  # of the UTF-8 bytes of those lines, each with its \n


class MentionLine(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str
    kind: str
    name: str
    role: str


class EpisodeLine(Episode):
    type: Literal["episode"]
    ingest_hash: str | None = None  # the content hash kept at ingest (recognises a re-delivery once the text is gone)
    mentions: list[MentionLine] = Field(default_factory=list)


class PatternLine(Pattern):
    type: Literal["pattern", "fact"]
    about: list[str] = Field(default_factory=list)
    evidence_links: list[str] = Field(default_factory=list)


class LinkLine(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["link"]
    a: str
    relation: Literal["REFINES", "COMPATIBLE_WITH", "UNRELATED_TO", "MERGED_INTO", "SUPERSEDES"]
    b: str
    prompt: str | None = None


class ContradictionLine(Contradiction):
    type: Literal["contradiction"]


class TombstoneLine(Tombstone):
    type: Literal["tombstone"]


class RunLine(Run):
    type: Literal["run"]


class MetaLine(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["meta"]
    key: str
    value: str


class AlertLine(AlertRecord):
    type: Literal["alert"]


class ChangeLine(ChangeRecord):
    """A change the team's archive holds images of (a run, a person's resolve or release)."""

    type: Literal["change"]


class ArchivedLine(ArchivedItem):
    """One before-image of the archive: what ``undo`` needs after an import."""

    type: Literal["archived"]

    @property
    def id(self) -> str:  # unique per change and item (the parser's duplicate check)
        return f"{self.change}|{self.label}|{self.key}"

    def item(self) -> ArchivedItem:
        return ArchivedItem.model_validate(self.model_dump(exclude={"type"}))


LINE_TYPES: dict[str, type[BaseModel]] = {
    "episode": EpisodeLine,
    "pattern": PatternLine,
    "fact": PatternLine,
    "link": LinkLine,
    "contradiction": ContradictionLine,
    "tombstone": TombstoneLine,
    "run": RunLine,
    "meta": MetaLine,
    "alert": AlertLine,
    "change": ChangeLine,
    "archived": ArchivedLine,
}


# -- writing ---------------------------------------------------------------------------------------


# An episode's fields derived from its text, not exported (as vectors are not): an import computes
# them again. The injection flag and the lint version that computed it (rules.beliefs.flagged).
DERIVED = frozenset({"injection", "injection_lint"})


def line(kind: str, model: BaseModel, **extra: Any) -> str:
    fields = model.model_dump(mode="json", exclude=set(DERIVED) if kind == "episode" else None)
    return json.dumps({"type": kind, **fields, **extra}, ensure_ascii=False, sort_keys=True)


class Writer:
    """An export being written: the header first, each line counted by type and hashed, the trailer last."""

    def __init__(self, out: IO[str], team: str, now: datetime) -> None:
        self._out = out
        self._digest = hashlib.sha256()
        self._lines = 0
        self.counts: dict[str, int] = {}
        header = {"type": "header", "format": FORMAT, "version": VERSION, "team": team}
        self._write(json.dumps(header | {"exported_at": iso_time(now)}))

    def put(self, kind: str, text: str) -> None:
        self._write(text)
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def close(self) -> dict[str, int]:
        """Write the trailer; how many lines of each type the file has."""
        trailer = {"type": "trailer", "lines": self._lines, "counts": self.counts, "sha256": self._digest.hexdigest()}
        self._out.write(json.dumps(trailer, sort_keys=True) + "\n")
        return self.counts

    def _write(self, text: str) -> None:
        data = text + "\n"
        self._out.write(data)
        self._digest.update(data.encode("utf-8"))
        self._lines += 1


# -- reading ---------------------------------------------------------------------------------------


@dataclass
class Parsed:
    header: Header
    items: dict[str, list[Any]]  # by type ("fact" lines are with the patterns)
    warnings: list[str] = field(default_factory=list)  # what was read but not checked (no trailer)
    left_out: dict[str, int] = field(default_factory=dict)  # lines a copy does not import, by type

    @property
    def team(self) -> str:
        return self.header.team


def _why(exc: ValidationError) -> str:
    e = exc.errors()[0]
    where = ".".join(str(x) for x in e["loc"]) or "value"
    return f"field {where}: {e['msg']}"


def parse_export(lines: Iterable[str], source: str = "<import>", trailer: bool = True) -> Parsed:
    """Every line checked (JSON, type, fields, team, unique ids, references, the trailer) before anything
    is written. ``trailer`` False reads a file without one (an export written before trailers) with a
    warning; a trailer that is there is checked all the same."""
    header: Header | None = None
    items: dict[str, list[Any]] = {k: [] for k in LINE_TYPES if k != "fact"}
    seen: dict[tuple[str, str], int] = {}
    kinds: dict[str, int] = {}
    digest = hashlib.sha256()
    end = 0  # the trailer's line (0: none yet)
    last = 0  # the last line that is not blank
    for n, raw in enumerate(lines, start=1):
        if not raw.strip():
            if not end:
                digest.update((raw + "\n").encode("utf-8"))
            continue
        where = f"{source}:{n}"
        if end:
            raise InputError(
                f"{where}: a line after the trailer (line {end}), which must be the last; nothing was imported"
            )
        last = n
        obj = _object(raw, where)
        kind = obj.get("type")
        if header is None:
            header = _header(obj, where)
        elif kind == "trailer":
            _check_trailer(obj, where, n - 1, kinds, digest.hexdigest())
            end = n
            continue
        else:
            item = _item(obj, where, header)
            ident = getattr(item, "id", None) or getattr(item, "key", None)
            group = "pattern" if kind == "fact" else str(kind)
            if isinstance(ident, str):
                if (group, ident) in seen:
                    raise InputError(f"{where}: field id: {ident!r} is already on line {seen[(group, ident)]}")
                seen[(group, ident)] = n
            items[group].append(item)
            kinds[str(kind)] = kinds.get(str(kind), 0) + 1
        digest.update((raw + "\n").encode("utf-8"))
    if header is None:
        raise InputError(f"{source}: empty: no header line; nothing was imported")
    warnings: list[str] = []
    if not end:
        what, advice = _no_trailer(header, source, last, kinds)
        if trailer:
            raise InputError(f"{what}; nothing was imported ({advice})")
        warnings.append(f"{what}; imported without that check (--no-trailer)")
    _check_references(items, seen, source)
    return Parsed(header=header, items=items, warnings=warnings)


def _object(raw: str, where: str) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: not JSON ({exc.msg} at column {exc.colno}); nothing was imported") from None
    except RecursionError:
        raise InputError(f"{where}: JSON nested too deeply; nothing was imported") from None
    if not isinstance(obj, dict):
        raise InputError(f"{where}: a line must be a JSON object; nothing was imported")
    return obj


def _header(obj: dict[str, Any], where: str) -> Header:
    if obj.get("type") != "header":
        raise InputError(f"{where}: field type: the first line must be the header; nothing was imported")
    try:
        return Header.model_validate(obj)
    except ValidationError as exc:
        raise InputError(f"{where}: header: {_why(exc)}; nothing was imported") from None


def _item(obj: dict[str, Any], where: str, header: Header) -> BaseModel:
    """One line after the header as its model; of the header's team in every field that names one."""
    kind = obj.get("type")
    model = LINE_TYPES.get(kind) if isinstance(kind, str) else None
    if model is None:
        known = ", ".join(sorted([*LINE_TYPES, "trailer"]))
        raise InputError(f"{where}: field type: {kind!r} is not one of {known}; nothing was imported")
    try:
        item = model.model_validate(obj)
    except ValidationError as exc:
        raise InputError(f"{where}: {kind}: {_why(exc)}; nothing was imported") from None
    team = header.team
    named = getattr(item, "team", team)
    if named != team and not (kind == "run" and named is None):  # a run of every team's night (older files)
        raise InputError(
            f"{where}: field team: {named!r} is not the header's team {team!r}; nothing was imported (a file "
            "is imported as the team it was exported from; to copy a team under another name: --as-team NEW)"
        )
    keys = [m.key for m in item.mentions] if isinstance(item, EpisodeLine) else []
    keys += item.about if isinstance(item, PatternLine) else []
    for key in keys:
        if not key.startswith(f"{team}/"):
            raise InputError(f"{where}: entity {key!r} is not an entity of team {team!r}; nothing was imported")
    if isinstance(item, MetaLine) and item.key not in {k.format(team=team) for k in META_KEYS}:
        raise InputError(f"{where}: field key: {item.key!r} is not a meta key of team {team!r}; nothing was imported")
    return item


def _check_trailer(obj: dict[str, Any], where: str, before: int, kinds: dict[str, int], sha256: str) -> None:
    try:
        t = Trailer.model_validate(obj)
    except ValidationError as exc:
        raise InputError(f"{where}: trailer: {_why(exc)}; nothing was imported") from None
    problems = [f"it counts {t.lines} lines before it, the file has {before}"] if t.lines != before else []
    for kind in sorted(set(t.counts) | set(kinds)):
        have, want = kinds.get(kind, 0), t.counts.get(kind, 0)
        if have != want:
            problems.append(f"it counts {want} {kind} lines, the file has {have}")
    if not problems and t.sha256 != sha256:
        problems.append("the checksum of the lines before it differs: the file changed since the export")
    if problems:
        raise InputError(f"{where}: trailer: " + "; ".join(problems) + "; nothing was imported")


def _no_trailer(header: Header, source: str, last: int, kinds: dict[str, int]) -> tuple[str, str]:
    """What a file without a trailer is, and what to do about it."""
    held = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) or "no line after the header"
    if header.version == 1:
        what = f"{source}: no trailer: an export written before trailers (format version 1), so whether it is whole"
        return f"{what} cannot be checked (it has {held})", "if it is whole: --no-trailer"
    what = f"{source}: the file ends after line {last} without its trailer: cut short? (it has {held})"
    return what, "export the team again; --no-trailer imports what is there"


def _check_references(items: dict[str, list[Any]], seen: dict[tuple[str, str], int], source: str) -> None:
    for p in items["pattern"]:
        for eid in p.evidence_links:
            if ("episode", eid) not in seen:
                where = f"{source}:{seen[('pattern', p.id)]}"
                raise InputError(f"{where}: field evidence_links: episode {eid!r} is not in the file")
    for lk in items["link"]:
        for pid in (lk.a, lk.b):
            if ("pattern", pid) not in seen:
                raise InputError(f"{source}: link {lk.a!r} {lk.relation} {lk.b!r}: pattern {pid!r} is not in the file")
    for a in items["archived"]:
        if ("change", a.change) not in seen:
            raise InputError(
                f"{source}:{seen[('archived', a.id)]}: field change: change {a.change!r} is not in the file"
            )
    for e in items["episode"]:
        if e.status in EPISODE_LIVE and not e.text.strip():
            where = f"{source}:{seen[('episode', e.id)]}"
            raise InputError(f"{where}: field text: a {e.status.value} episode needs its text")
