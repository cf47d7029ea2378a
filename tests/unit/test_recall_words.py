"""The words a question shares with a belief's statement (``recall.words``) and how they rank beliefs.

The unit tier's embedder is a bag of whole words: "terugbetalingen" and "terugbetaling" are two
different words to it, as a German or Dutch text is mostly unknown words to the English MiniLM. The
words signal is what ranks the belief that holds the question's rare word first.
"""

from __future__ import annotations

import pytest

from taskzilla_sleep.memory.recall import recall, words
from taskzilla_sleep.memory.recall.select import WORDS_WEIGHT
from taskzilla_sleep.stores.memory import MemoryGraphStore, MemoryVectorStore
from tests.unit.steps.conftest import DAY, TEAM, episode, pattern


def test_a_word_is_four_letters_or_more_of_any_alphabet_and_no_bare_number() -> None:
    assert words.words("Mag ik een klant 2 keer bellen, 2024?") == {"klant", "keer", "bellen"}
    assert words.words("Änderungen an Produktion") == {"änderungen", "produktion"}
    assert words.words("Изменения в продакшене") == {"изменения", "продакшене"}


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("prod", "productie", True),  # one begins the other
        ("brauche", "braucht", True),  # a long common beginning
        ("ändere", "änderung", True),
        ("change", "changes", True),
        ("make", "making", False),  # three letters in common
        ("klant", "klok", False),
        ("urlaub", "urlaubsanträge", True),  # a compound's first word
    ],
)
def test_two_words_are_the_same_when_they_share_a_long_beginning(a: str, b: str, same: bool) -> None:
    assert words.same_word(a, b) is same
    assert words.same_word(b, a) is same


def test_a_rare_word_weighs_more_than_one_every_statement_holds() -> None:
    statements = {
        "tag": "Een ticket krijgt een producttag voordat het gesloten wordt.",
        "reply": "Elk nieuw ticket krijgt binnen 2 werkuren een eerste antwoord.",
        "refund": "Agents beloven nooit een terugbetaling voordat billing die heeft bevestigd.",
    }
    got = words.shared("krijgt iemand een terugbetaling?", statements)
    # "krijgt" (in two of three statements) weighs less than "terugbetaling" (in one).
    assert got["refund"] > got["tag"] == got["reply"] > 0
    assert all(0 <= v <= 1 for v in got.values())
    assert words.shared("ticket", {"x": "Ticket tickets TICKET"}) == {"x": 1.0}


def test_no_signal_without_words_a_language_without_spaces_ranks_by_the_embedder_alone() -> None:
    assert words.shared("ok?", {"a": "Deploys stop on Friday."}) == {}
    assert words.shared("金曜日にデプロイしてもいいですか", {"a": "金曜日はデプロイしない"}) == {"a": 0.0}
    assert words.shared("deploy friday", {}) == {}


def test_the_belief_holding_the_questions_rare_word_ranks_first() -> None:
    graph, vectors = MemoryGraphStore(), MemoryVectorStore()
    statements = {
        # Holds "klant" and "een" and "de" twice: the bag-of-words cosine prefers it.
        "pat-ticket": "de klant krijgt een ticket en de klant krijgt een nummer",
        "pat-reply": "elke klant hoort binnen twee uur iets van een mens",
        # Holds "terugbetalingen" (not the question's "terugbetaling" to a bag of words) and "beloven".
        "pat-refund": "wij beloven de klant terugbetalingen pas na akkoord",
    }
    for pid, text in statements.items():
        ev = [episode(f"{pid}-{i}", f"{text} ({i})") for i in range(3)]
        graph.upsert_episodes(ev, [])
        p = pattern(pid, text, ev)
        graph.write_pattern(p, [], [])
        vectors.upsert(TEAM, "patterns", [pid], [text], [{"kind": p.kind.value}])
    question = "mag ik de klant een terugbetaling beloven"
    items = recall(graph, vectors, question, DAY, [TEAM], k=3)
    by_id = {i.id: i for i in items}
    assert by_id["pat-ticket"].similarity is not None and by_id["pat-refund"].similarity is not None
    assert by_id["pat-ticket"].similarity > by_id["pat-refund"].similarity  # the embedder alone: the wrong one
    assert by_id["pat-refund"].shared_words is not None and by_id["pat-ticket"].shared_words is not None
    assert by_id["pat-refund"].shared_words > by_id["pat-ticket"].shared_words
    assert items[0].id == "pat-refund"  # the words put the belief that answers first
    lead = by_id["pat-refund"].similarity + WORDS_WEIGHT * by_id["pat-refund"].shared_words
    assert lead > by_id["pat-ticket"].similarity + WORDS_WEIGHT * by_id["pat-ticket"].shared_words
