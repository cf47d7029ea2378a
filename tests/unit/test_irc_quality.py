"""The IRC judgement figures' own definitions (questions, addressed replies, shares, the sample)."""

from __future__ import annotations

import pytest

from ops.bench.irc_quality import addressee, figures, is_question

AUTHORS = {"bob2", "randabis-laptop", "kai"}


@pytest.mark.parametrize(
    ("statement", "question", "to"),
    [
        ("bob2, ummm... i need help now", False, "bob2"),
        ("randabis-laptop and that is where?", True, None),
        ("kai: what is the kernel version", True, "kai"),
        ("I tried to install transcode, but couldn't", False, None),
        ("how to install java", True, None),
        ("does anyone know a good media player", True, None),
        ("is there a way to mount ntfs", True, None),
        ("When a kiosk printer jams, power-cycle the printer first.", False, None),
        ("Do not deploy on Fridays.", False, None),
        ("do you know the root password", True, None),
        ("note: apt-get update first", False, None),  # "note" is not an author
        ("Bob2: sure", False, "Bob2"),  # nicks compare case-insensitively
    ],
)
def test_questions_and_addressed_replies(statement: str, question: bool, to: str | None) -> None:
    assert is_question(statement, AUTHORS) is question
    assert addressee(statement, AUTHORS) == to


def test_figures_count_live_patterns_and_destroyed_messages() -> None:
    def p(i: int, statement: str, status: str = "active") -> dict[str, object]:
        return {"id": f"p{i:02d}", "statement": statement, "status": status, "confidence": 0.9, "support": 3}

    patterns = [
        p(1, "bob2, try the live cd"),
        p(2, "how do I become root"),
        p(3, "Use sudo, never log in as root.", "tentative"),
        p(4, "what is this?", "retired"),  # not live: left out
        *(p(10 + n, f"Statement number {n} about apt.") for n in range(40)),
    ]
    statuses = ["raw"] * 900 + ["absorbed"] * 60 + ["retired"] * 30 + ["pruned"] * 10
    f = figures(patterns, statuses, stored=1000, authors=AUTHORS, seed=3)
    assert f["patterns"] == 43 and f["patterns_per_1000"] == 43.0
    assert (f["questions"], f["addressed"], f["questions_or_addressed"]) == (1, 1, 2)
    assert f["absorbed_or_retired"] == 90 and f["absorbed_or_retired_share"] == 0.09
    assert len(f["sample"]) == 30 and len({s["statement"] for s in f["sample"]}) == 30
    assert f["sample"] == figures(patterns, statuses, 1000, AUTHORS, seed=3)["sample"]  # seeded
    assert f["sample"] != figures(patterns, statuses, 1000, AUTHORS, seed=4)["sample"]
