"""What a vector carries besides its text: every writer of episode and pattern vectors uses these."""

from __future__ import annotations

from taskzilla_sleep.core.models import Episode, Pattern, to_ms
from taskzilla_sleep.stores.ports import MetaValue


def pattern_metadata(p: Pattern) -> dict[str, MetaValue]:
    """What a pattern's vector carries besides its statement (every writer of pattern vectors uses it)."""
    return {"kind": p.kind.value, "topic": p.topic}


def episode_metadata(ep: Episode) -> dict[str, MetaValue]:
    return {
        "channel": ep.channel,
        "author": ep.author,
        "ts": to_ms(ep.ts),
        "provenance": ep.provenance.value,
    }
