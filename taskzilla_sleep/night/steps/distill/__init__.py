"""03:10 distill: raw episodes -> patterns with a ledger-based confidence.

Read (``read.py``): the raw episodes of the window (``distill.window_days`` by ``ts``) and every
raw episode that arrived since the last nightly distill, whatever its ``ts`` says (a bot's backlog,
an import, a connector catching up); the groups worth asking about, and the model's answers. A
group goes to the model only when it holds something new: for the night, an episode that no nightly
distill has taken into account yet (``distilled_at`` unset); for the watchdog, an episode ingested
since the last distill of any kind.

Decide (``decide.py``, pure): the pattern changes, the absorptions and the marks. Write
(``write.py``): write-ahead through a journal, finished by ``resume`` after a crash.
"""

from __future__ import annotations

from taskzilla_sleep.memory.meta_keys import DISTILL_DEFERRED as DEFERRED
from taskzilla_sleep.memory.meta_keys import DISTILL_JOURNAL as JOURNAL
from taskzilla_sleep.memory.meta_keys import LAST_DISTILL
from taskzilla_sleep.night.steps.distill.decide import decide
from taskzilla_sleep.night.steps.distill.plan import DistillPlan, PatternChange
from taskzilla_sleep.night.steps.distill.read import (
    AskedGroup,
    DistillInputs,
    last_deferral,
    last_distill,
    read,
)
from taskzilla_sleep.night.steps.distill.write import resume, write

__all__ = [
    "DEFERRED",
    "JOURNAL",
    "LAST_DISTILL",
    "AskedGroup",
    "DistillInputs",
    "DistillPlan",
    "PatternChange",
    "decide",
    "last_deferral",
    "last_distill",
    "read",
    "resume",
    "write",
]
