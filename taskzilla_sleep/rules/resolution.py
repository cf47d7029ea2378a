"""How a person resolves a contradiction, as every message that asks them says it.

The choices and the command line are shown by chat alerts (``alerts/message.py``), the night report
and ``contradictions list`` (``memory/contradictions.py``, which applies the choice): one source, in
``rules`` so that ``alerts`` needs nothing of ``memory`` to write them.
"""

from __future__ import annotations

from typing import Literal

Keep = Literal["new", "old", "both"]
KEEP_CHOICES = "new|old|both"


def resolve_command(contradiction_id: str, keep: str = KEEP_CHOICES, note: bool = False) -> str:
    """The command a person runs to resolve a contradiction (alerts, reports and lists show it)."""
    return f"taskzilla-sleep contradictions resolve {contradiction_id} --keep {keep} --by NAME" + (
        " [--note TEXT]" if note else ""
    )
