"""The oracle model through the real model path: two hard-case weeks replayed night by night on
embedded stores (FalkorDB + Chroma), each answered over real HTTP, through litellm, from its own gold."""

from __future__ import annotations

from pathlib import Path

import pytest

from ops.bench import hard_cases, oracle_gold
from taskzilla_sleep.stores.ports import Embedder

WEEKS = ("w01", "w11")


def test_the_oracle_is_asked_and_what_it_answers_is_written(
    tmp_path: Path, offline_embedder: Embedder, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # the harness may set one for older packages; undone after
    result = hard_cases.run(WEEKS, ["oracle"], tmp_path, embedder=offline_embedder)
    text = hard_cases.render(result, failures=0)
    with capsys.disabled():
        print("\n" + text)
    r = result["providers"]["oracle"]

    assert "the pipeline's ceiling per week" in text
    assert r["llm"]["calls"] > 0 and r["llm"]["invalid_answers"] == 0  # a perfect model's answers are all valid
    for w in WEEKS:
        wr, built = r["weeks"][w], oracle_gold.build(w)
        f = wr["oracle"]
        assert wr["nights_ok"], wr["night_errors"]
        assert f["calls"]["distill"] > 0 and not f["unknown_prompts"], f
        # Each week answered from its own gold: every key it reached is that week's.
        assert set(f["stage"]) == set(built.gold.beliefs)
        assert f["keys"] == f["too_few"] + f["filtered"] + f["never_shown"] + f["dropped"] + f["answered"]
        assert f["answered"] >= 1 and 1 <= f["written"] <= f["answered"] + f["dropped"], f
        assert set(f["written_keys"]) <= {k for k, stage in f["stage"].items() if stage in ("answered", "dropped")}
        m = f["messages"]
        assert m["supportable"] >= m["stored"] >= m["passed_gate"] >= m["shown"] > 0, m
        # The pipeline writes the model's statements as given: every learned pattern is a gold belief.
        statements = {b.statement for b in built.gold.beliefs.values()}
        assert wr["patterns"] and all(p["statement"] in statements for p in wr["patterns"]), wr["patterns"]
        assert wr["headline"]["belief_precision"] == 1.0
        assert wr["counts"].get("false_contradictions", 0) == 0
        assert wr["counts"].get("injection_effects", 0) == 0 and wr["counts"].get("drafts_in_recall", 0) == 0
    # w01's refund limit reaches the model on both sides on different nights: flagged as an update.
    assert r["weeks"]["w01"]["counts"]["changes_flagged"] >= 1 and r["headline"]["changes_typed"] == 1.0
    total = r["oracle"]
    assert total["keys"] == sum(len(oracle_gold.build(w).gold.beliefs) for w in WEEKS)
    assert set(total["by_class"]) <= {"habit", "change", "disagreement", "preference"}
