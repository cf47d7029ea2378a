"""Text shaping shared by every place that shows chat text on one line (plans, alerts, prompts)."""

from __future__ import annotations

ELLIPSIS = "…"


def one_line(text: str, width: int = 90) -> str:
    """``text`` with its white space folded to single spaces, cut to ``width`` characters (an
    ellipsis marks the cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(0, width - 1)] + ELLIPSIS
