"""A German team with the multilingual embedder (``embeddings.provider: multilingual``): a hard-case
week replayed night by night on embedded stores (FalkorDB + Chroma), the oracle model answering over
real HTTP through litellm, every similarity threshold on the embedder's scale.

With the bundled English MiniLM the same week's "was muss ich tun, bevor ich ein ticket schließe?"
gets another belief of the ticket topic first (BENCHMARKS.md, *The model judges, the rules guard*)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ops.bench import hard_cases
from taskzilla_sleep.stores.embeddings import OfflineMultilingual

WEEK = "w04-de"


def test_a_german_week_is_learned_and_every_habit_question_answered_by_its_belief(
    tmp_path: Path, multilingual_embedder: OfflineMultilingual, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = hard_cases.run([WEEK], ["oracle"], tmp_path, embedder=multilingual_embedder)
    w = result["providers"]["oracle"]["weeks"][WEEK]
    c = w["counts"]
    assert w["nights_ok"], w["night_errors"]
    assert c["habits"] >= 3 and c["habits_learned"] == c["habits"], c
    assert c["changes_flagged"] == c["changes"] >= 1, c
    assert w["headline"]["belief_precision"] == 1.0
    assert c.get("false_contradictions", 0) == 0 and c.get("silent_merges", 0) == 0, c
    assert c.get("injection_effects", 0) == 0 and c.get("drafts_in_recall", 0) == 0, c
    # Recall: the first item of every habit question is its belief.
    assert c["recall_habit_questions"] >= 3 and c["recall_habit_first_right"] == c["recall_habit_questions"], c
    # This embedder reads German, so absorbing is checked by its similarity: no non-belief is absorbed.
    assert c.get("nonbelief_absorbed_or_retired", 0) == 0, c
