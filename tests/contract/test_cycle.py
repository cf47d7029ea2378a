"""The nightly cycle on both backend pairs: FalkorDB + Chroma embedded, Neo4j + Chroma server."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from taskzilla_sleep.core.errors import InputError
from taskzilla_sleep.core.models import ContradictionKind, EpisodeStatus, PatternStatus, Provenance, RunTrigger
from taskzilla_sleep.core.settings import Settings
from taskzilla_sleep.interfaces.demo import sample_lines
from taskzilla_sleep.llm.base import (
    DistillRequest,
    LLMProvider,
    LLMUsage,
    PatternDraft,
    ReflectRequest,
    Unanswered,
    Verdict,
)
from taskzilla_sleep.llm.offline import OfflineProvider
from taskzilla_sleep.memory import contradictions, facts
from taskzilla_sleep.memory.index import changes_of, write_memory
from taskzilla_sleep.memory.ingest import Ingestor, IngestReport, Limits, WriteDiscipline
from taskzilla_sleep.memory.recall import recall
from taskzilla_sleep.memory.recall.select import MIN_SIMILARITY
from taskzilla_sleep.memory.reconcile import reconcile
from taskzilla_sleep.night.pipeline import NightRequest, NightResult, run_night
from taskzilla_sleep.rules.entities import EntityExtractor
from taskzilla_sleep.stores.cypher import CypherGraphStore
from taskzilla_sleep.stores.ports import Embedder, VectorStore

NIGHT = datetime.fromisoformat("2026-11-28T03:05:00+01:00")
TEAM = "platform"


@dataclass
class Stack:
    settings: Settings
    graph: CypherGraphStore
    vectors: VectorStore
    embedder: Embedder
    llm: OfflineProvider

    def night(
        self,
        now: datetime,
        dry_run: bool = False,
        steps: Any = None,
        *,
        llm: LLMProvider | None = None,
        trigger: RunTrigger = "manual",
        lookback: timedelta | None = None,
    ) -> NightResult:
        services = replace(self, llm=llm) if llm is not None else self
        request = NightRequest(now=now, dry_run=dry_run, steps=steps, trigger=trigger, lookback=lookback)
        return run_night(services, request)

    def ingestor(self, at: datetime) -> Ingestor:
        s = self.settings.ingest
        return Ingestor(
            self.graph,
            self.vectors,
            EntityExtractor(s.projects, s.tools),
            WriteDiscipline(s.write_discipline),
            Limits.of(s),
            lambda: at,
        )

    def ingest_sample(self, at: datetime = NIGHT) -> IngestReport:
        return self.ingestor(at).ingest_lines(sample_lines(), "sample")

    def snapshot(self) -> dict[str, Any]:
        vecs = {
            f"{t}/{k}": sorted(self.vectors.present(t, k))
            for t in self.vectors.teams()
            for k in ("episodes", "patterns")
        }  # type: ignore[attr-defined]
        # The archive records each run's writes under the run's id (undo): the state is the rest.
        return {"graph": self.graph.snapshot(skip_labels=frozenset({"Run", "Change", "Archived"})), "vectors": vecs}


def test_a_night_over_the_sample_week(stack: Stack) -> None:
    stack.ingest_sample()
    fact = facts.pin(
        stack.graph, stack.vectors, TEAM, "Martin Vos is the engineering manager.", "martin", NIGHT, "martin"
    )
    result = stack.night(NIGHT)
    assert result.ok, [s.error for s in result.run.steps]
    assert [s.step for s in result.run.steps] == ["prune", "distill", "reflect", "decay"]

    pats = stack.graph.patterns(TEAM)
    learned = [p for p in pats if not p.pinned]
    assert len([p for p in learned if p.status in (PatternStatus.ACTIVE, PatternStatus.CONTESTED)]) >= 3
    statements = " | ".join(p.statement.casefold() for p in learned)
    for habit in ("pr", "friday", "handoff"):
        assert habit in statements, statements

    # Paraphrases by different people became one pattern each, with ≥ 3 distinct authors' evidence.
    friday = [p for p in learned if "friday" in p.statement.casefold()]
    assert len(friday) == 1 and friday[0].support_count >= 3 and friday[0].distinct_authors >= 3

    # ai-drafts never feed a pattern; noise never forms one.
    drafts = {e.id for e in stack.graph.episodes_by_status(TEAM, ["raw"]) if e.provenance is Provenance.AI_DRAFT}
    assert len(drafts) == 3
    assert not any(set(p.evidence_ids) & drafts for p in pats)
    assert not any(p.statement.casefold() in ("looks good", "+1", "lgtm") for p in pats)

    # The standup change (martin stated the old rule, then the new one, after the old was last said)
    # opened one update: both beliefs kept, the old contested, the new one still in use, unconfirmed.
    (con,) = stack.graph.contradictions(TEAM, "open")
    old, new = stack.graph.patterns_by_id([con.old_pattern_id]), stack.graph.patterns_by_id([con.new_pattern_id])
    assert con.kind is ContradictionKind.UPDATE and con.prompt_id == "offline-reflect-v1"
    assert old[0].status is PatternStatus.CONTESTED and new[0].status is PatternStatus.ACTIVE
    assert "async" in old[0].statement.casefold() and "voice" in new[0].statement.casefold()
    assert all(p.prompt_id == "offline-distill-v1" for p in pats if not p.pinned)

    # Absorbed episodes: schema_absorbed=1 and absorbed_at = the night; nothing retired yet.
    absorbed = stack.graph.episodes_by_status(TEAM, [EpisodeStatus.ABSORBED.value])
    assert absorbed and all(e.schema_absorbed == 1 and e.absorbed_at == NIGHT for e in absorbed)
    assert stack.graph.episodes_by_status(TEAM, [EpisodeStatus.RETIRED.value]) == []

    # The pinned fact is untouched.
    (after,) = stack.graph.patterns_by_id([fact.id])
    assert after == fact
    assert reconcile(stack.graph, stack.vectors, repair=False).drift == 0


def test_decay_respects_the_grace_period_and_contested_beliefs(stack: Stack) -> None:
    stack.ingest_sample()
    stack.night(NIGHT)
    absorbed = {e.id: e for e in stack.graph.episodes_by_status(TEAM, [EpisodeStatus.ABSORBED.value])}
    # Both sides of the open update wait: the old one is contested, the new one unconfirmed.
    held = {i for c in stack.graph.contradictions(TEAM, "open") for i in (c.old_pattern_id, c.new_pattern_id)}
    assert any(p.id in held and p.status is PatternStatus.ACTIVE for p in stack.graph.patterns(TEAM))
    eligible = {i for i, e in absorbed.items() if e.absorbed_by not in held}
    assert eligible and len(eligible) < len(absorbed)

    early = stack.night(NIGHT + timedelta(hours=71))
    assert early.run.steps[-1].counts.get("retired", 0) == 0
    assert len(stack.graph.episodes_by_status(TEAM, [EpisodeStatus.ABSORBED.value])) == len(absorbed)

    late = stack.night(NIGHT + timedelta(hours=73))
    assert late.run.steps[-1].counts["retired"] == len(eligible)
    retired = {e.id: e for e in stack.graph.get_episodes(sorted(eligible))}
    assert all(e.status is EpisodeStatus.RETIRED and e.text == "" for e in retired.values())
    assert stack.vectors.present(TEAM, "episodes", sorted(eligible)) == set()
    tombs = [n["props"] for n in stack.graph.snapshot()["nodes"] if n["labels"] == ["Tombstone"]]
    assert {t["id"] for t in tombs} == eligible
    assert all(t["pattern_id"] == absorbed[t["id"]].absorbed_by and t["reason"] == "absorbed" for t in tombs)
    # Episodes of contested or unconfirmed beliefs wait for a person's decision.
    still = {e.id for e in stack.graph.episodes_by_status(TEAM, [EpisodeStatus.ABSORBED.value])}
    assert still == set(absorbed) - eligible


def test_a_second_run_with_the_same_now_changes_nothing(stack: Stack) -> None:
    stack.ingest_sample()
    stack.night(NIGHT)
    before = stack.snapshot()
    again = stack.night(NIGHT)
    changed = {
        k: v
        for s in again.run.steps
        for k, v in s.counts.items()
        if v and k not in ("examined", "episodes_read", "waiting", "compared", "withheld", "shown", "unread")
    }
    assert changed == {}
    assert stack.snapshot() == before


def test_dry_run_writes_nothing_and_prints_the_plan(stack: Stack) -> None:
    stack.ingest_sample()
    before = stack.snapshot()
    result = stack.night(NIGHT, dry_run=True)
    assert stack.snapshot() == before
    lines = [ln for plans in result.plans.values() for p in plans for ln in p.lines()]
    assert any(ln.startswith("+ pattern ") for ln in lines)
    assert any(ln.startswith("! update ") for ln in lines)
    assert result.run.steps[1].counts["patterns_added"] >= 3


def test_resolution_is_the_only_supersede(stack: Stack) -> None:
    stack.ingest_sample()
    stack.night(NIGHT)
    (con,) = stack.graph.contradictions(TEAM, "open")
    floor = stack.settings.distill.confidence_floor
    done = contradictions.resolve(stack.graph, stack.vectors, con.id, "new", "sara", "we moved to voice", NIGHT, floor)
    assert done.resolution == "new" and done.resolved_by == "sara"
    (old,) = stack.graph.patterns_by_id([con.old_pattern_id])
    (new,) = stack.graph.patterns_by_id([con.new_pattern_id])
    assert old.status is PatternStatus.SUPERSEDED and old.superseded_by == new.id and old.archived_by == "sara"
    assert old.archived_reason == "we moved to voice" and old.evidence_ids  # evidence kept for the audit
    assert new.status in (PatternStatus.ACTIVE, PatternStatus.TENTATIVE)
    assert stack.vectors.present(TEAM, "patterns", [old.id]) == set()
    rels = stack.graph.snapshot()["relationships"]
    assert any(r["type"] == "SUPERSEDES" and r["from"][1] == new.id and r["to"][1] == old.id for r in rels)
    with pytest.raises(InputError, match="already resolved"):
        contradictions.resolve(stack.graph, stack.vectors, con.id, "old", "lena", None, NIGHT, floor)
    later = NIGHT + timedelta(hours=1)
    assert contradictions.resolve(stack.graph, stack.vectors, con.id, "new", "lena", None, later, floor) == done


def test_recall_patterns_first_then_episodes_and_marks_access(stack: Stack) -> None:
    stack.ingest_sample()
    fact = facts.pin(
        stack.graph, stack.vectors, TEAM, "Martin Vos is the engineering manager.", "martin", NIGHT, "martin"
    )
    stack.night(NIGHT)
    later = NIGHT + timedelta(days=1)
    items = recall(stack.graph, stack.vectors, "can we deploy to production on friday?", later, k=3)
    assert items[0].kind == "pattern" and "friday" in items[0].text.casefold()
    assert items[0].confidence is not None and items[0].evidence_count and items[0].evidence_count >= 3
    who = recall(stack.graph, stack.vectors, "who is the engineering manager", later, k=3)
    assert who[0].kind == "fact" and who[0].id == fact.id
    odd = recall(stack.graph, stack.vectors, "the coffee machine is broken", later, k=2)
    assert any(i.kind == "episode" for i in odd)
    touched = stack.graph.get_episodes([i.id for i in odd if i.kind == "episode"])
    assert all(e.last_accessed == later for e in touched)
    # The standup changed: the bot is told the new way, marked unconfirmed, with the old one beside it.
    (con,) = stack.graph.contradictions(TEAM, "open")
    standup = recall(stack.graph, stack.vectors, "how does standup work?", later, k=3)
    new = next(i for i in standup if i.id == con.new_pattern_id)
    assert new.changed_on is not None and new.changed_on.date().isoformat() == "2026-11-26"
    assert new.contradiction is not None and new.contradiction.id == con.id
    assert new.was is not None and "async" in new.was.casefold()
    assert f"CHANGED on 2026-11-26, awaiting confirmation (was: {new.was}), see {con.id}" in new.render()
    assert any(i.id == con.old_pattern_id and i.status == "contested" and i.contradiction for i in standup)


def test_prune_drops_stale_unmatched_episodes_and_keeps_tombstones(stack: Stack) -> None:
    stack.ingest_sample()
    stack.night(NIGHT)
    month = NIGHT + timedelta(days=stack.settings.prune.stale_after_days + 1)
    result = stack.night(month, steps=["prune"])
    pruned = result.run.steps[0].counts["pruned"]
    assert pruned > 0
    gone = stack.graph.episodes_by_status(TEAM, [EpisodeStatus.PRUNED.value])
    assert len(gone) == pruned and all(e.text == "" for e in gone)
    assert stack.vectors.present(TEAM, "episodes", [e.id for e in gone]) == set()
    evidence = stack.graph.evidence_episode_ids(TEAM)
    assert not evidence & {e.id for e in gone}
    assert reconcile(stack.graph, stack.vectors, repair=False).drift == 0


def test_memory_index_and_topic_files(stack: Stack, tmp_path: Path) -> None:
    stack.ingest_sample()
    facts.pin(stack.graph, stack.vectors, TEAM, "Martin Vos is the engineering manager.", "martin", NIGHT, "martin")
    stack.night(NIGHT)
    s = stack.settings.memory_index.model_copy(update={"min_topic_patterns": 1})
    patterns = stack.graph.patterns(TEAM)
    write_memory(tmp_path / "mem", TEAM, patterns, s, changes_of(stack.graph.contradictions(TEAM, "open"), patterns))
    index = (tmp_path / "mem" / TEAM / "MEMORY.md").read_text().splitlines()[4:]  # title, preamble
    assert 3 <= len(index) <= 50 and all(len(line) <= 150 and "[-> " in line for line in index)
    assert index[0].startswith('- fact (pinned): "Martin Vos')
    # The bot still knows how standups work after the change: the new way, marked unconfirmed.
    (standup,) = [line for line in index if "standup" in line.casefold()]
    assert "voice" in standup and "changed on 2026-11-26, awaiting confirmation" in standup
    topics = {p.stem for p in (tmp_path / "mem" / TEAM / "topics").glob("*.md")}
    assert all(line.rsplit("[-> ", 1)[1].rstrip("]") in topics for line in index)


def test_a_pattern_falling_below_the_floor_gives_its_episodes_back(stack: Stack) -> None:
    stack.ingest_sample()
    stack.night(NIGHT)
    active = [p for p in stack.graph.patterns(TEAM) if p.status is PatternStatus.ACTIVE and not p.pinned]
    assert active
    absorbed = {
        e.id
        for e in stack.graph.episodes_by_status(TEAM, [EpisodeStatus.ABSORBED.value])
        if e.absorbed_by in {p.id for p in active}
    }
    assert absorbed
    # Tomorrow ops raise the floor above every ledger: the beliefs become tentative again.
    stack.settings = stack.settings.model_copy(
        update={"distill": stack.settings.distill.model_copy(update={"confidence_floor": 0.99})}
    )
    result = stack.night(NIGHT + timedelta(days=1))
    assert result.run.steps[1].counts["unabsorbed"] == len(absorbed)
    back = stack.graph.get_episodes(sorted(absorbed))
    assert all(e.status is EpisodeStatus.RAW and e.schema_absorbed == 0 and e.absorbed_at is None for e in back)
    assert all(p.status is PatternStatus.TENTATIVE for p in stack.graph.patterns_by_id([p.id for p in active]))
    # ... and nothing of theirs decays, however long the grace has passed.
    later = stack.night(NIGHT + timedelta(days=5))
    assert later.run.steps[-1].counts.get("retired", 0) == 0


def test_a_fact_pinned_before_its_person_ever_spoke(stack: Stack) -> None:
    # Pinning with --entity creates the person's entity node before ingestion links anyone to it:
    # ingestion must still give it its name and kind, or every group with that person breaks.
    facts.pin(stack.graph, stack.vectors, TEAM, "Martin Vos is the engineering manager.", "martin", NIGHT, "martin")
    stack.ingest_sample()
    result = stack.night(NIGHT)
    assert result.ok, [s.error for s in result.run.steps]
    mine = [e.id for e in stack.graph.episodes_by_status(TEAM, ["raw", "absorbed"]) if e.author == "martin"]
    rows = [m for ms in stack.graph.episode_entities(mine).values() for m in ms if m.role == "author"]
    assert rows and all(m.name == "martin" and m.kind == "person" for m in rows)


class DecliningModel:
    """A model that never finds a pattern, and remembers what it was asked."""

    name = "declining"
    prompt_ids = {"distill": "declining-v1", "reflect": "declining-v1"}

    def __init__(self) -> None:
        self.usage = LLMUsage()
        self.asked: list[set[str]] = []

    def distill_many(self, requests: Sequence[DistillRequest]) -> list[tuple[PatternDraft, ...] | Unanswered]:
        self.asked += [{e.id for e in r.episodes} for r in requests]
        return [() for _ in requests]

    def classify_many(self, requests: Sequence[ReflectRequest]) -> list[Verdict | Unanswered]:
        return [Verdict(relation="unrelated") for _ in requests]


def ingest_ops(stack: Stack, at: datetime, texts: list[str], first: int = 0) -> set[str]:
    """``texts`` said in #ops at ``at``, one author each (p{first}, p{first+1}, …); their ids."""
    base = {"team": TEAM, "channel": "ops", "ts": at.isoformat(), "provenance": "human"}
    lines = [json.dumps({**base, "author": f"p{first + i}", "text": t}) for i, t in enumerate(texts)]
    stack.ingestor(at).ingest_lines(lines, "day")
    return {e.id for e in stack.graph.episodes_in_window(TEAM, ["raw"], at - timedelta(seconds=1), at)}


def watchdog_asks(stack: Stack, model: DecliningModel, at: datetime) -> list[set[str]]:
    """The groups a watchdog distill at ``at`` asked ``model`` about."""
    before = len(model.asked)
    result = stack.night(at, steps=["distill"], llm=model, trigger="watchdog", lookback=timedelta(hours=2))
    assert result.ok
    return model.asked[before:]


def test_a_watchdog_distill_asks_only_about_groups_with_something_new(stack: Stack) -> None:
    t0 = datetime.fromisoformat("2026-11-30T10:00:00+01:00")
    model = DecliningModel()
    # A window of at most distill.topic_max_messages is one topic: capped at 4 here, the deploys and
    # the backups (6 messages) are two topics, as a busier channel's subjects are.
    distill = stack.settings.distill.model_copy(update={"topic_max_messages": 4})
    stack.settings = stack.settings.model_copy(update={"distill": distill})

    def ingest(at: datetime, texts: list[str]) -> set[str]:
        return ingest_ops(stack, at, texts)

    def watchdog(at: datetime) -> list[set[str]]:
        return watchdog_asks(stack, model, at)

    deploys = ["billing-api deploys to staging always go through the release checklist",
               "we run the release checklist for every billing-api deploy to staging",
               "every billing-api staging deploy goes through the release checklist"]  # fmt: skip
    backups = ["we keep the nightly database backups for thirty days", "nightly database backups are kept thirty days",
               "the team keeps every nightly database backup for thirty days"]  # fmt: skip
    a = ingest(t0, deploys)
    assert watchdog(t0 + timedelta(minutes=1)) == [a]  # the first watchdog run: everything is new
    b = ingest(t0 + timedelta(minutes=40), backups)
    # The deploy group is still in the 2 h lookback but nothing joined it: only the backups are asked.
    assert watchdog(t0 + timedelta(minutes=41)) == [b]
    a2 = ingest(t0 + timedelta(minutes=80), ["the release checklist applies to every billing-api staging deploy"])
    asked = watchdog(t0 + timedelta(minutes=81))
    assert asked == [a | a2]  # the deploy group gained a message: asked again, with all of it


def test_a_declined_group_is_asked_again_only_when_enough_of_it_is_new(stack: Stack) -> None:
    """Remembered in the graph (``declined_size`` on its episodes): a busy group the model found no
    belief in is not re-asked for every new line, by the watchdog or the night."""
    t0 = datetime.fromisoformat("2026-11-30T10:00:00+01:00")
    model = DecliningModel()
    assert stack.settings.distill.reask_growth == 0.25  # the default

    def ingest(at: datetime, texts: list[str], first: int = 0) -> set[str]:
        return ingest_ops(stack, at, texts, first)

    def watchdog(at: datetime) -> list[set[str]]:
        return watchdog_asks(stack, model, at)

    rule = "billing-api deploys to staging always go through the {} release checklist"
    words = ["full", "written", "shared", "standard", "agreed", "usual", "team", "printed", "new", "old"]
    a = ingest(t0, [rule.format(w) for w in words[:8]])
    assert watchdog(t0 + timedelta(minutes=1)) == [a]
    sizes = {e.declined_size for e in stack.graph.get_episodes(sorted(a))}
    assert sizes == {8}
    # One new message is an eighth of what the model already declined: not asked (needs 2 = 25 %).
    b = ingest(t0 + timedelta(minutes=40), [rule.format(words[8])], first=8)
    assert watchdog(t0 + timedelta(minutes=41)) == []
    # The night reads the same group with the same one new message: not asked either.
    night = stack.night(t0 + timedelta(hours=17), llm=model)
    assert night.ok and night.run.steps[1].counts["declines_remembered"] == 1
    assert not any(b <= asked for asked in model.asked[2:])
    # A second unseen message: enough has joined to change the answer; the next night asks, with all of it.
    c = ingest(t0 + timedelta(hours=18), [rule.format(words[9])], first=9)
    before = len(model.asked)
    assert stack.night(t0 + timedelta(hours=41), llm=model).ok
    assert model.asked[before:] == [a | b | c]
    assert {e.declined_size for e in stack.graph.get_episodes(sorted(a | b | c))} == {10}


def test_an_unrelated_verdict_is_not_asked_again_under_the_same_prompt(stack: Stack) -> None:
    stack.ingest_sample()
    stack.night(NIGHT)  # the offline provider learns the week's patterns
    links = stack.graph.pattern_links(TEAM)
    unrelated = [(x.a, x.b, x.prompt) for x in links if x.relation == "UNRELATED_TO"]
    assert unrelated and all(by == "offline-reflect-v1" for _, _, by in unrelated)
    asked: list[tuple[str, str]] = []

    class Watching(DecliningModel):
        prompt_ids = {"distill": "offline-distill-v1", "reflect": "offline-reflect-v1"}

        def classify_many(self, requests: Sequence[ReflectRequest]) -> list[Verdict | Unanswered]:
            asked.extend((r.new.id, r.old.id) for r in requests)
            return [Verdict(relation="unrelated") for _ in requests]

    # Every pattern changes (re-reflected): the pairs already called unrelated are not asked again...
    stack.graph.update_patterns_and_meta([], "reflect_watermark:platform", "0")
    stack.night(NIGHT + timedelta(days=1), steps=["reflect"], llm=Watching())
    assert not {(a, b) for a, b, _ in unrelated} & set(asked)
    # ...but a new prompt may see what the old one missed: asked again under it.
    stack.graph.update_patterns_and_meta([], "reflect_watermark:platform", "0")
    asked.clear()

    class NewPrompt(Watching):
        prompt_ids = {"distill": "declining-v1", "reflect": "reflect-v9"}

    stack.night(NIGHT + timedelta(days=2), steps=["reflect"], llm=NewPrompt())
    assert {(a, b) for a, b, _ in unrelated} <= set(asked)


def test_two_groups_of_people_holding_different_values_at_once_open_a_disagreement(stack: Stack) -> None:
    """Not a change: both values are stated over the same days by different people, so both
    beliefs are contested and the alert says people disagree (the update path is the sample week's)."""
    t0 = datetime.fromisoformat("2026-11-23T10:00:00+01:00")
    short = ["the gateway timeout for the billing api is 30 seconds, keep it that way",
             "billing api gateway timeout stays at 30 seconds, we agreed on that",
             "remember: 30 seconds is the gateway timeout on the billing api"]  # fmt: skip
    long = ["the gateway timeout for the billing api is 60 seconds, keep it that way",
            "billing api gateway timeout stays at 60 seconds, we agreed on that",
            "remember: 60 seconds is the gateway timeout on the billing api"]  # fmt: skip
    for day in range(3):
        at = t0 + timedelta(days=day)
        ingest_ops(stack, at, [short[day]], first=day)  # p0, p1, p2 say 30 s
        ingest_ops(stack, at + timedelta(minutes=5), [long[day]], first=10 + day)  # p10, p11, p12 say 60 s
    night = stack.night(datetime.fromisoformat("2026-11-26T03:05:00+01:00"))
    assert night.ok
    cons = stack.graph.contradictions(TEAM, "open")
    assert len(cons) == 1, ([s.counts for s in night.run.steps], [p.statement for p in stack.graph.patterns(TEAM)])
    (con,) = cons
    assert con.kind is ContradictionKind.DISAGREEMENT
    sides = stack.graph.patterns_by_id([con.old_pattern_id, con.new_pattern_id])
    assert {p.status for p in sides} == {PatternStatus.CONTESTED}
    assert {"30" in p.statement for p in sides} == {True, False}


def test_recall_answers_a_habit_question_with_the_belief_and_a_change_with_the_new_one(stack: Stack) -> None:
    """Through a real night over the sample week: each habit question's first item is its belief;
    after the standup change, the new belief comes first, its old one beside it, and the old async
    messages and the bot's lagging reminder ("standup updates are due in 10 minutes") after them;
    chatter ("who took the last stroopwafel", "lunch?") is under the floor."""
    stack.ingest_sample()
    stack.night(NIGHT)
    later = NIGHT + timedelta(days=1)
    answers = {
        q: recall(stack.graph, stack.vectors, q, later, k=5)
        for q in (
            "can we deploy to production on friday?",
            "how big should a pull request be?",
            "when is the on-call handoff?",
            "how does standup work?",
        )
    }
    for q, word in (("friday", "friday"), ("pull request", "pr"), ("on-call", "handoff")):
        first = next(items[0] for asked, items in answers.items() if q in asked)
        assert first.kind == "pattern" and word in first.text.casefold(), (q, first)
    (con,) = stack.graph.contradictions(TEAM, "open")
    standup = answers["how does standup work?"]
    assert [i.id for i in standup[:2]] == [con.new_pattern_id, con.old_pattern_id], [i.render() for i in standup]
    assert standup[0].changed_on is not None and standup[1].contradiction is not None
    (old,) = stack.graph.patterns_by_id([con.old_pattern_id])
    after = [n for n, i in enumerate(standup) if i.provenance == "bot" or i.id in old.evidence_ids]
    assert all(n > 1 for n in after)  # the reminder (when shown) and the old messages below the beliefs
    for items in answers.values():
        assert all(i.similarity is None or i.similarity >= MIN_SIMILARITY for i in items)
        assert not {"lunch?", "coffee anyone?", "who took the last stroopwafel"} & {i.text for i in items}
    # Without the floor, chatter fills the slots the beliefs leave ("who took the last stroopwafel": 0.10).
    loose = recall(stack.graph, stack.vectors, "how does standup work?", later, k=5, min_similarity=-1.0)
    assert any(i.similarity is not None and i.similarity < MIN_SIMILARITY for i in loose)
