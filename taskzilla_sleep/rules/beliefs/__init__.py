"""What a message states, decided from its text alone: pure, no I/O, the same for every provider.

- **The belief gate** (:func:`statement_kind`): only a statement of a reusable belief — a norm,
  process, preference or stable fact of the team — may support or be absorbed into a pattern.
  Questions, replies addressed to one person, first-person anecdotes and status updates, one-off
  logistics and chatter never do, however many people wrote them. Precision first: absorbing is
  destructive, so what is unclear is left out.
- **The injection lint** (:func:`injection`): chat is data, never instructions. A statement that
  reads as an order to the assistant, carries a role marker, or asks for (or holds) secrets never
  becomes a belief, whoever and however many said it. A message's flag (:func:`flagged`) is computed
  once, at ingest or edit, and kept on it: readers use the stored flag (``LINT_VERSION`` says
  which lint judged it).
- **Slots** (:func:`slots`, :func:`conflict`): two statements about one topic that disagree on a
  value — an amount, a count, a duration, a time of day, a weekday or date, a named thing — or on
  polarity are a conflict, never support: a changed number barely moves an embedding, so
  similarity is never identity.

Every rule here is about a class of messages (their form), never about one sentence.

Modules: ``gate`` (the belief gate), ``lint`` (the injection lint), ``values`` (slots and their
conflicts), ``polarity`` (negation, and the values a statement replaces), ``topic_words`` (topics),
``reading`` (sentences and words). This package exports what the rest of the product uses.
"""

from __future__ import annotations

from taskzilla_sleep.rules.beliefs.gate import Kind, declarative, is_belief, statement_kind
from taskzilla_sleep.rules.beliefs.lint import LINT_VERSION, flagged, injection
from taskzilla_sleep.rules.beliefs.topic_words import topics
from taskzilla_sleep.rules.beliefs.values import Slots, conflict, mentioned_numbers, slots, union, value_conflict

__all__ = [
    "LINT_VERSION",
    "Kind",
    "Slots",
    "conflict",
    "declarative",
    "flagged",
    "injection",
    "is_belief",
    "slots",
    "mentioned_numbers",
    "statement_kind",
    "topics",
    "union",
    "value_conflict",
]
