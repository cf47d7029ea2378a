"""Entity extraction at ingestion: author, channel, @mentions, #tags, configured projects and tools."""

from __future__ import annotations

import re
from collections.abc import Sequence

from taskzilla_sleep.core.models import Entity, EntityKind, EntityLink, EntityRole, Episode, normalize_name

_MENTION = re.compile(r"(?<![\w@])@([A-Za-z0-9][\w.-]{0,63})")
_TAG = re.compile(r"(?<![\w#&])#([A-Za-z][\w-]{0,63})")


class EntityExtractor:
    """Deterministic and cheap: regexes plus the project/tool names from the config."""

    def __init__(self, projects: Sequence[str] = (), tools: Sequence[str] = ()) -> None:
        self._named: list[tuple[re.Pattern[str], EntityKind, str]] = []
        for kind, names in ((EntityKind.PROJECT, projects), (EntityKind.TOOL, tools)):
            for name in names:
                rx = re.compile(r"(?<![\w-])" + re.escape(name) + r"(?![\w-])", re.IGNORECASE)
                self._named.append((rx, kind, name))

    def links(self, ep: Episode) -> list[EntityLink]:
        seen: set[tuple[str, str, EntityRole]] = set()
        out: list[EntityLink] = []

        def add(kind: EntityKind, name: str, role: EntityRole) -> None:
            key = (kind.value, normalize_name(name), role)
            if key[1] and key not in seen:
                seen.add(key)
                out.append(EntityLink(episode_id=ep.id, entity=Entity(team=ep.team, kind=kind, name=name), role=role))

        add(EntityKind.PERSON, ep.author, "author")
        add(EntityKind.CHANNEL, ep.channel, "channel")
        for m in _MENTION.finditer(ep.text):
            add(EntityKind.PERSON, m.group(1), "mention")
        for m in _TAG.finditer(ep.text):
            add(EntityKind.TOPIC, m.group(1), "tag")
        for rx, kind, name in self._named:
            if rx.search(ep.text):
                add(kind, name, "project" if kind is EntityKind.PROJECT else "tool")
        return out
