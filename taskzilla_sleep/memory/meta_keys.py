"""The team meta keys the night keeps its place in, as a team's memory carries them.

Written by the steps (``night/steps/``), carried by an export and rewritten by a team copy
(``memory/admin/``): kept here, below both, so that ``memory`` names them without importing the night.
Each is a format with ``{team}``.
"""

from __future__ import annotations

# distill
LAST_DISTILL = "last_distill_at:{team}"  # nightly or watchdog: the watchdog's cooldown counts from it
# What the last full-window distill (a night's, or a watchdog pass that took the night's leftovers)
# did not ask, as ``{"groups": n, "reason": ...}``; "" once a full-window distill asked everything.
DISTILL_DEFERRED = "distill_deferred:{team}"
# Written by versions whose nightly "new" meant "timestamped after the last night": an episode stored
# and timestamped before it was distilled then. Read only, to carry such stores over.
LEGACY_WATERMARK = "distill_watermark:{team}"
DISTILL_JOURNAL = "distill_journal:{team}"  # the plan being applied ("" when none is)

# reflect
REFLECT_WATERMARK = "reflect_watermark:{team}"
# Changed patterns some of whose comparisons the budget or the window left (a JSON list of ids): the
# next reflect takes them first, whatever the watermark says ("": none).
REFLECT_DEFERRED = "reflect_deferred:{team}"
