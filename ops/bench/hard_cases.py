"""The honest quality harness: the hard-case corpus replayed on real stores, scored per class and provider.

    python -m ops.bench.hard_cases [--weeks w01,w04|all] [--providers offline,lazy,oracle] [--work DIR]
                                   [--json FILE] [--md FILE] [--failures N]

Each week of ``tests/data/hard_cases`` (written by an author who never read the product code) runs
on fresh stores (embedded FalkorDB + Chroma, the default configuration), with the week's own UTC
offset: for each of its seven days, the day's messages are ingested (the ingest clock at the day's
last message), then the full night runs at 03:05 the next morning; one more night 73 h after the
last one lets decay retire what was absorbed. Then the stores are read back (patterns with their
evidence, contradictions, episode statuses, recall's answers to the gold questions, the memory
files) and scored by ``hard_score.py``. A store-everything baseline (every message of the week, the
bot's drafts included, embedded with the same embedder in its own Chroma collection) answers the
same questions with its nearest message.

Providers:

- ``offline``: the default offline provider;
- ``lazy``: a careless model over real HTTP through litellm (``lazy_model.py`` behind
  ``tests/llm_stub.py``): every group a pattern of its longest message, every pair "compatible".
  Its figures measure the product's guards against a careless model, not a model's judgement.
- ``oracle``: the oracle model over real HTTP through litellm (``oracle.py`` behind the same stub),
  each week answered from its own gold (``oracle_gold.build``): a perfect model, so its figures are
  the pipeline's ceiling. Beside the scores, what the oracle could not express, per gold key (the
  first stage each key stopped at): ``too few`` (people state it fewer than ``distill.min_episodes``
  times: the one-person preferences), ``filtered`` (fewer than that many of its
  messages left after the ingest's write discipline and the prefilter, ``beliefs.prefilter`` (the
  belief gate ``policies.is_learnable`` for a package from before issue 28) and ``distinct_texts``
  applied to each day's stored messages), ``never shown`` (no group held that
  many of them), ``dropped`` (shown, but over the prompt's belief limit in every such group),
  ``answered``; and ``written``: keys some pattern (before or after the decay night) is mostly about.

Weeks: the default is w01–w08 (the figures in BENCHMARKS.md); any week of the corpus is accepted
(w09–w12, the translations w01-de, w01-nl, …), and ``--weeks all`` takes them all.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ops.bench import compat
from ops.bench.e5 import E5

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # tests/ (the stub) lives beside the package
    sys.path.append(str(ROOT))

from ops.bench import hard_score as hs  # noqa: E402
from ops.bench import oracle_gold  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "hard_cases"
WEEKS = tuple(f"w{n:02d}" for n in range(1, 9))
PROVIDERS = {
    "offline": "offline provider (the default, no model)",
    "lazy": "lazy model over HTTP via litellm (tests/llm_stub.py + ops/bench/lazy_model.py)",
    "oracle": "oracle model over HTTP via litellm: the gold's answers (tests/llm_stub.py + ops/bench/oracle.py)",
}
NIGHT_AT = (3, 5)
DECAY_NIGHT_AFTER = timedelta(hours=73)
RECALL_AFTER = timedelta(hours=6)  # the bot asks the morning after the last night
TARGETS = {
    "habit_recall": ">= 0.9",
    "belief_precision": ">= 0.95",
    "changes_flagged": ">= 0.9",
    "disagreements_flagged": "–",
    "changes_typed": "1.0",
    "disagreements_typed": "1.0",
    "silent_merges": "0",
    "changes_lost_after_decay": "0",
    "false_contradictions": "0",
    "drafts_in_recall": "0",
    "injection_effects": "0",
    "episodes_lost": "0",
    "nonbelief_absorbed_or_retired": "0",
    "recall_first_right": "> baseline",
    "baseline_first_right": "–",
}


@dataclass
class Week:
    name: str
    gold: hs.Gold
    episodes: list[dict[str, Any]]
    start: date
    tz: timezone

    def days(self) -> list[tuple[date, list[dict[str, Any]]]]:
        """The seven days of the week, each with its messages (local time of the week's offset)."""
        out: list[tuple[date, list[dict[str, Any]]]] = [(self.start + timedelta(days=k), []) for k in range(7)]
        for e in self.episodes:
            k = (datetime.fromisoformat(e["ts"]).astimezone(self.tz).date() - self.start).days
            out[min(6, max(0, k))][1].append(e)
        return out

    def night_after(self, day: date) -> datetime:
        nxt = day + timedelta(days=1)
        return datetime(nxt.year, nxt.month, nxt.day, *NIGHT_AT, tzinfo=self.tz)


def load_week(name: str, corpus: Path = CORPUS) -> Week:
    episodes = [json.loads(line) for line in (corpus / f"{name}.jsonl").read_text().splitlines() if line.strip()]
    g = json.loads((corpus / f"{name}.gold.json").read_text())
    offset = datetime.fromisoformat(episodes[0]["ts"]).utcoffset() or timedelta(0)
    gold = hs.Gold(
        week=name,
        team=g["team"],
        labels=g["labels"],
        beliefs=g["beliefs"],
        texts={e["id"]: e["text"] for e in episodes},
        provenance={e["id"]: e["provenance"] for e in episodes},
    )
    return Week(name, gold, episodes, date.fromisoformat(g["week_start"]), timezone(offset))


# -- one week on fresh stores -------------------------------------------------------------------------


def replay(week: Week, work: Path, embedder: Any, llm_overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Replay ``week`` on fresh stores under ``work``; returns the observation and the run's facts."""
    from taskzilla_sleep.stores.embeddings import MULTILINGUAL_NAME

    provider = "multilingual" if getattr(embedder, "name", "") == MULTILINGUAL_NAME else "offline"
    return _replay(week, work, embedder, {"embeddings.provider": provider, **(llm_overrides or {})})


def _replay(week: Week, work: Path, embedder: Any, llm_overrides: dict[str, Any]) -> dict[str, Any]:
    """The replay, with the settings overrides of the embedder and the provider."""
    from ops.bench.compat import run_night
    from taskzilla_sleep.app import Services, build_graph, build_llm, build_vectors
    from taskzilla_sleep.core.settings import Secrets, load_settings

    shutil.rmtree(work, ignore_errors=True)
    settings = load_settings(
        env={"TASKZILLA_DATA_DIR": str(work / "data")},
        overrides={"graph.backend": "falkordb", "vector.backend": "chroma-embedded", **(llm_overrides or {})},
    )
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    graph = build_graph(settings, Secrets())
    try:
        vectors = build_vectors(settings, embedder)
    except BaseException:
        graph.close()
        raise
    t0 = time.perf_counter()
    with Services(settings, graph, vectors, embedder) as s:
        s.graph.ensure_schema()
        llm = build_llm(settings, embedder)
        team = week.gold.team
        stored: set[str] = set()
        people = frozenset(str(e["author"]).casefold() for e in week.episodes)
        learnable: list[Any] | None = []
        nights: list[dict[str, Any]] = []

        def night(now: datetime) -> None:
            res = run_night(settings=settings, graph=s.graph, vectors=s.vectors, embedder=embedder, llm=llm, now=now)
            nights.append(
                {
                    "now": now.isoformat(),
                    "ok": res.ok,
                    "steps": {r.step: {"status": r.status, **r.counts} for r in res.run.steps},
                    "errors": [r.error for r in res.run.steps if r.error],
                }
            )

        last = None
        for day, eps in week.days():
            if eps:
                at = datetime.fromisoformat(eps[-1]["ts"])
                lines = [json.dumps(e, ensure_ascii=False) for e in eps]
                new = s.ingestor(clock=lambda at=at: at).ingest_lines(lines, f"{week.name}.jsonl").new_ids
                stored |= set(new)
                learnable = None if learnable is None else gate(s.graph, new, people, learnable)
            last = week.night_after(day)
            night(last)
        assert last is not None
        before = read_state(s.graph, team)
        night(last + DECAY_NIGHT_AFTER)
        final = read_state(s.graph, team)
        asked = last + DECAY_NIGHT_AFTER + RECALL_AFTER
        obs = hs.Observed(final=final, before_decay=before, stored=frozenset(stored))
        floor = settings.recall.min_similarity
        obs.recall = {q: ask(s.graph, s.vectors, q, asked, team, floor) for q in questions(week.gold)}
        obs.probes = {
            str(b["statement"]): ask(s.graph, s.vectors, str(b["statement"]), asked, team, floor)
            for b in week.gold.beliefs.values()
            if b["class"] == "injection"
        }
        obs.memory = memory_files(settings.memory_dir / team)
        usage = llm.usage.as_dict()
    obs.baseline = store_everything(week, work / "baseline", embedder, questions(week.gold))
    return {
        "observed": obs,
        "passed_gate": passed(learnable),
        "min_support": settings.distill.min_episodes,
        "nights": nights,
        "llm": usage,
        "seconds": round(time.perf_counter() - t0, 1),
        "patterns": [
            {"statement": p.statement, "status": p.status, "confidence": p.confidence, "support": p.support}
            for p in obs.final.patterns
        ],
    }


def gate(graph: Any, ids: Sequence[str], people: frozenset[str], learnable: list[Any]) -> list[Any] | None:
    """``learnable`` and the stored episodes of ``ids`` that reach the model, as a distill reads them
    (raw): past the prefilter (provenance, chatter, only questions, injection markers) where the
    package has one, else past its belief gate (``policies.is_learnable``, before issue 28); None
    when the package measured has neither."""
    try:
        from taskzilla_sleep.core.models import EpisodeStatus

        raw = [e.model_copy(update={"status": EpisodeStatus.RAW}) for e in graph.get_episodes(sorted(ids))]
    except (ImportError, TypeError, AttributeError):
        return None
    try:
        from taskzilla_sleep.rules.beliefs.prefilter import withheld

        return learnable + [e for e in raw if withheld(e) is None]
    except ImportError:
        pass
    try:
        from taskzilla_sleep.rules.policies import is_learnable

        return learnable + [e for e in raw if is_learnable(e, people)]
    except (ImportError, TypeError, AttributeError):
        return None


def passed(learnable: list[Any] | None) -> list[str] | None:
    """The ids of ``learnable`` left once identical texts count once (the first kept), as distill does."""
    if learnable is None:
        return None
    try:
        from taskzilla_sleep.rules.policies import distinct_texts
    except ImportError:
        return [e.id for e in learnable]
    return sorted(e.id for e in distinct_texts(learnable))


def questions(gold: hs.Gold) -> list[str]:
    return [str(gold.beliefs[k]["question"]) for k in gold.keys("habit") + gold.keys("change")]


Q_EPISODES = "MATCH (e:Episode) WHERE e.team = $team RETURN e.id AS id, e.status AS status"
Q_TOMBSTONES = "MATCH (t:Tombstone) WHERE t.team = $team AND t.kind = 'episode' RETURN t.id AS id"


def read_state(graph: Any, team: str) -> hs.StoreState:
    return hs.StoreState(
        patterns=[
            hs.PatternRow(
                id=p.id,
                statement=p.statement,
                status=p.status.value,
                confidence=p.confidence,
                support=p.support_count,
                evidence=tuple(p.evidence_ids),
                pinned=p.pinned,
            )
            for p in graph.patterns(team)
        ],
        contradictions=[
            hs.ContradictionRow(c.id, c.old_pattern_id, c.new_pattern_id, c.status.value, c.kind.value)
            for c in graph.contradictions(team)
        ],
        episodes={r["id"]: str(r["status"]) for r in compat.read(graph, Q_EPISODES, {"team": team})},
        tombstones=frozenset(r["id"] for r in compat.read(graph, Q_TOMBSTONES, {"team": team})),
    )


def ask(graph: Any, vectors: Any, query: str, now: datetime, team: str, floor: float) -> list[hs.Item]:
    from taskzilla_sleep.memory.recall import recall

    items = recall(graph, vectors, query, now, teams=[team], min_similarity=floor)
    return [hs.Item(i.kind, i.id, i.text) for i in items]


def memory_files(base: Path) -> dict[str, str]:
    if not base.is_dir():
        return {}
    return {str(p.relative_to(base)): p.read_text(encoding="utf-8") for p in sorted(base.rglob("*.md"))}


def store_everything(week: Week, where: Path, embedder: Any, qs: Sequence[str]) -> dict[str, str | None]:
    """The naive store: every message in its own Chroma collection; each question's nearest message."""
    from taskzilla_sleep.stores.chroma import ChromaVectorStore

    shutil.rmtree(where, ignore_errors=True)
    store = ChromaVectorStore.embedded(where, embedder)
    try:
        eps = week.episodes
        store.upsert(week.gold.team, "episodes", [e["id"] for e in eps], [e["text"] for e in eps], [{}] * len(eps))
        out: dict[str, str | None] = {}
        for q in qs:
            hits = store.query(week.gold.team, "episodes", q, n=1)
            out[q] = hits[0].id if hits else None
        return out
    finally:
        store.close()


# -- the whole corpus ---------------------------------------------------------------------------------


@dataclass
class Serving:
    """A provider's settings, and the stub serving its model (None: no model over HTTP)."""

    overrides: dict[str, Any]
    stub: Any = None


@contextlib.contextmanager
def provider_overrides(name: str) -> Iterator[Serving]:
    if name == "offline":
        yield Serving({})
        return
    if name not in PROVIDERS:
        raise ValueError(f"unknown provider {name!r}; choose from {', '.join(PROVIDERS)}")
    from ops.bench import lazy_model
    from tests.llm_stub import LLMStub

    # Today's client sends a placeholder key to a loopback server by itself; an older package
    # measured with --package-root may not.
    os.environ.setdefault("OPENAI_API_KEY", "sk-harness-not-a-real-key")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # The oracle's answerer is set per week (each week answered from its own gold).
    with LLMStub(default=lazy_model.answer if name == "lazy" else None) as stub:
        model = "openai/lazy-model" if name == "lazy" else "openai/oracle"
        yield Serving({"llm.model": model, "llm.api_base": stub.url, "llm.timeout_s": 60}, stub)


def run(
    weeks: Sequence[str], providers: Sequence[str], work: Path, corpus: Path = CORPUS, embedder: Any = None
) -> dict[str, Any]:
    """Every week on fresh stores for every provider, scored; JSON-ready apart from nothing (plain data)."""
    from taskzilla_sleep.stores.embeddings import OfflineMiniLM

    embedder = embedder or OfflineMiniLM()
    loaded = [load_week(w, corpus) for w in weeks]
    import taskzilla_sleep

    package = str(Path(taskzilla_sleep.__file__).resolve().parent)
    out: dict[str, Any] = {"weeks": list(weeks), "providers": {}, "corpus": str(corpus), "package": package}
    for prov in providers:
        t0 = time.perf_counter()
        per_week: dict[str, Any] = {}
        scores: list[hs.WeekScore] = []
        expressed: list[dict[str, Any]] = []
        with provider_overrides(prov) as serving:
            for week in loaded:
                oracle = None
                if prov == "oracle":
                    from ops.bench.oracle import Oracle

                    built = oracle_gold.build(week.name, corpus)
                    oracle = Oracle(built.gold)
                    serving.stub.default = oracle.answer
                r = replay(week, work / prov / week.name, embedder, serving.overrides)
                sc = hs.score(week.gold, r["observed"])
                scores.append(sc)
                extra: dict[str, Any] = {}
                if oracle is not None:
                    extra["oracle"] = oracle_funnel(built, week, r, oracle)
                    expressed.append(extra["oracle"])
                per_week[week.name] = {
                    **extra,
                    **sc.as_dict(),
                    "headline": hs.headline(sc.counts),
                    "nights_ok": all(n["ok"] for n in r["nights"]),
                    "night_errors": [e for n in r["nights"] for e in n["errors"]],
                    "llm": r["llm"],
                    "seconds": r["seconds"],
                    "patterns": r["patterns"],
                }
                print(f"[hard-cases/{prov}] {week.name}: {r['seconds']:.0f}s", file=sys.stderr, flush=True)
        all_ = hs.total(scores)
        llm_use = {k: sum(int(w["llm"].get(k) or 0) for w in per_week.values()) for k in ("calls", "invalid_answers")}
        out["providers"][prov] = {
            "model": PROVIDERS[prov],
            "llm": llm_use,
            "headline": hs.headline(all_.counts),
            "counts": dict(all_.counts),
            "by_class": {k: dict(v) for k, v in all_.by_class.items()},
            "by_slot": {k: dict(v) for k, v in all_.by_slot.items()},
            "failures": all_.failures,
            "weeks": per_week,
            "seconds": round(time.perf_counter() - t0, 1),
        }
        if expressed:
            out["providers"][prov]["oracle"] = sum_funnels(expressed)
    return out


def oracle_funnel(built: oracle_gold.Built, week: Week, r: dict[str, Any], oracle: Any) -> dict[str, Any]:
    from ops.bench.oracle import funnel

    obs: hs.Observed = r["observed"]
    patterns = obs.before_decay.patterns + obs.final.patterns
    written = {
        k
        for k in built.ids
        if any(
            hs.mostly(p.evidence, week.gold.labels, oracle_gold.corpus_labels(k, built.corpus_class[k]))
            for p in patterns
        )
    }
    texts = {e["id"]: e["text"] for e in week.episodes}
    # What the product's guards refused of the oracle's answers, night by night (distill's counts).
    refused = {k: sum(int(n["steps"].get("distill", {}).get(k) or 0) for n in r["nights"]) for k in GUARDS}
    return funnel(built.ids, texts, obs.stored, r["passed_gate"], oracle.stats, r["min_support"], written) | {
        "classes": dict(built.corpus_class),
        "refused": refused,
    }


GUARDS = ("non_beliefs", "injections_blocked", "too_little_support", "support_dropped")


FUNNEL = ("keys", "answered", "written", "never_shown", "filtered", "too_few", "dropped", "limit_drops")
MESSAGES = ("supportable", "stored", "passed_gate", "shown")
CEILING_KEYS = ("keys", "answered", "written", "never_shown", "filtered", "too_few", "limit_drops")


def sum_funnels(fs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {k: sum(int(f[k]) for f in fs) for k in FUNNEL}
    out["refused"] = {k: sum(int(f["refused"].get(k, 0)) for f in fs) for k in GUARDS}
    gate_known = all(f["messages"].get("passed_gate") is not None for f in fs)
    out["messages"] = {
        k: (sum(int(f["messages"].get(k) or 0) for f in fs) if k != "passed_gate" or gate_known else None)
        for k in MESSAGES
    }
    by_class: dict[str, dict[str, int]] = {}
    for f in fs:
        for key, stage in f["stage"].items():
            c = by_class.setdefault(f["classes"][key], {})
            c[stage] = c.get(stage, 0) + 1
            c["keys"] = c.get("keys", 0) + 1
            c["written"] = c.get("written", 0) + (key in f["written_keys"])
    out["by_class"] = by_class
    return out


# -- tables -------------------------------------------------------------------------------------------


def _fmt(name: str, v: Any, c: dict[str, int]) -> str:
    if v is None:
        return "–"
    den = {
        "habit_recall": ("habits_learned", "habits"),
        "belief_precision": ("belief_patterns", "learned_patterns"),
        "changes_flagged": ("changes_flagged", "changes"),
        "disagreements_flagged": ("disagreements_flagged", "disagreements"),
        "changes_typed": ("changes_typed", "changes_flagged"),
        "disagreements_typed": ("disagreements_typed", "disagreements_flagged"),
        "recall_first_right": ("recall_first_right", "recall_questions"),
        "baseline_first_right": ("recall_baseline_right", "recall_questions"),
    }.get(name)
    if den:
        return f"{v:.2f} ({c.get(den[0], 0)}/{c.get(den[1], 0)})"
    return str(v)


LABELS = {
    "habit_recall": "habit recall",
    "belief_precision": "belief precision",
    "changes_flagged": "changes flagged",
    "disagreements_flagged": "disagreements flagged",
    "changes_typed": "flagged changes opened as updates",
    "disagreements_typed": "flagged disagreements opened as disagreements",
    "silent_merges": "silent merges (patterns)",
    "changes_lost_after_decay": "changes lost after decay",
    "false_contradictions": "false contradictions",
    "drafts_in_recall": "drafts in recall",
    "injection_effects": "injection effects",
    "episodes_lost": "episodes lost",
    "nonbelief_absorbed_or_retired": "non-belief messages absorbed or retired",
    "recall_first_right": "recall first-result accuracy (ours)",
    "baseline_first_right": "recall first-result accuracy (store-everything baseline)",
}


def render(result: dict[str, Any], failures: int = 40) -> str:
    provs = list(result["providers"])
    out = [
        f"Hard-case corpus: weeks {', '.join(result['weeks'])}; package {result.get('package')}; figures per provider:"
    ]
    out += [f"- **{p}**: {result['providers'][p]['model']}" for p in provs]
    out += ["", "| figure | target | " + " | ".join(provs) + " |", "|---|---|" + "---|" * len(provs)]
    for name, label in LABELS.items():
        cells = [_fmt(name, result["providers"][p]["headline"][name], result["providers"][p]["counts"]) for p in provs]
        out.append(f"| {label} | {TARGETS[name]} | " + " | ".join(cells) + " |")
    for p in provs:
        r = result["providers"][p]
        out += [
            "",
            f"**{p}** — messages by gold class, what the stores hold after the last night (evidence: in a "
            "live pattern's evidence; skipped: by the write discipline at ingestion; lost: stored, then gone "
            f"without a tombstone). LLM calls {r['llm']['calls']}, invalid answers {r['llm']['invalid_answers']}.",
            "",
        ]
        cols = ("messages", "skipped", "evidence", "absorbed", "retired", "pruned", "lost")
        out += ["| class | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
        for cls in hs.CLASSES:
            c = r["by_class"].get(cls, {})
            out.append(f"| {cls} | " + " | ".join(str(c.get(k, 0)) for k in cols) + " |")
        out += ["", f"**{p}** — changes and disagreements by slot:", ""]
        out += ["| slot | keys | flagged | silent merges | lost after decay |", "|---|---|---|---|---|"]
        for sl in sorted(r["by_slot"]):
            c = r["by_slot"][sl]
            lost = str(c.get("lost", 0)) if sl.startswith("change") else "–"
            out.append(f"| {sl} | {c.get('keys', 0)} | {c.get('flagged', 0)} | {c.get('merged', 0)} | {lost} |")
        c = r["counts"]
        out += ["", f"**{p}** — recall first result by question class (ours / baseline):", ""]
        out += ["| questions | n | ours | baseline |", "|---|---|---|---|"]
        for cls in ("habit", "change"):
            n, ours, base = (c.get(f"recall_{cls}_{k}", 0) for k in ("questions", "first_right", "baseline_right"))
            out.append(f"| {cls} | {n} | {ours} | {base} |")
        out += ["", f"**{p}** — per week:", ""]
        keys = ("habit_recall", "belief_precision", "changes_flagged", "silent_merges", "false_contradictions")
        out += ["| week | " + " | ".join(LABELS[k] for k in keys) + " | nights ok | s |", "|---|" + "---|" * 7]
        for w, wr in r["weeks"].items():
            cells = [_fmt(k, wr["headline"][k], wr["counts"]) for k in keys]
            out.append(f"| {w} | " + " | ".join(cells) + f" | {wr['nights_ok']} | {wr['seconds']:.0f} |")
    for p in provs:
        if "oracle" in result["providers"][p]:
            out += render_ceiling(p, result["providers"][p])
    if failures:
        for p in provs:
            fs = result["providers"][p]["failures"]
            by: dict[str, int] = {}
            for f in fs:
                by[f["class"]] = by.get(f["class"], 0) + 1
            out += ["", f"**{p}** — failing cases ({len(fs)}: " + ", ".join(f"{k} {n}" for k, n in by.items()) + ")"]
            out += [f"- {f['week']} {f['class']} `{f['key']}`: {f['why']}" for f in fs[:failures]]
            if len(fs) > failures:
                out.append(f"- … {len(fs) - failures} more in the JSON")
    return "\n".join(out)


def render_ceiling(p: str, r: dict[str, Any]) -> list[str]:
    """The oracle's tables: the pipeline's ceiling per week, and what the oracle could not express."""
    out = [
        "",
        f"**{p}** — the pipeline's ceiling per week (a perfect model's answers; keys: the gold's beliefs, each "
        "side of a change or disagreement one key; too few: people state it fewer times than a belief needs; "
        "never shown: no group held enough of its messages; filtered: "
        "too few of its messages left after the ingest and the prefilter; limit drops: keys left out by the "
        "prompt's beliefs-per-group limit; refused: answers the guards after the model did not write, "
        "as statements that are no belief / injections / with too little support):",
        "",
        "| week | habit recall | changes flagged | disagreements flagged | belief precision | keys | answered "
        "| written | never shown | filtered | too few | limit drops | refused | messages: supportable / stored / "
        "passed prefilter / shown |",
        "|---|" + "---|" * 13,
    ]
    rows = [(w, wr["headline"], wr["counts"], wr["oracle"]) for w, wr in r["weeks"].items()]
    rows.append(("all", r["headline"], r["counts"], r["oracle"]))
    keys = ("habit_recall", "changes_flagged", "disagreements_flagged", "belief_precision")
    for w, head, counts, f in rows:
        m = f["messages"]
        msgs = " / ".join("–" if m.get(k) is None else str(m[k]) for k in MESSAGES)
        cells = [_fmt(k, head[k], counts) for k in keys]
        cells += [str(f[k]) for k in CEILING_KEYS]
        cells.append(" / ".join(str(f["refused"][k]) for k in GUARDS[:3]))
        out.append(f"| {w} | " + " | ".join(cells) + f" | {msgs} |")
    out += ["", f"**{p}** — gold keys by class and the first stage they stopped at:", ""]
    stages = ("keys", "too_few", "filtered", "never_shown", "dropped", "answered", "written")
    out += ["| class | " + " | ".join(s.replace("_", " ") for s in stages) + " |", "|---|" + "---|" * len(stages)]
    for cls, c in sorted(r["oracle"]["by_class"].items()):
        out.append(f"| {cls} | " + " | ".join(str(c.get(s, 0)) for s in stages) + " |")
    return out


def _jsonable(result: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(result, default=str))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="the hard-case judgement harness")
    ap.add_argument("--weeks", default=",".join(WEEKS), help="comma-separated, or all (default: w01-w08)")
    ap.add_argument("--providers", default="offline,lazy", help=f"comma-separated of {', '.join(PROVIDERS)}")
    ap.add_argument("--work", type=Path, default=ROOT / ".tmp" / "hard-cases")
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--json", type=Path, help="write the full result here")
    ap.add_argument("--md", type=Path, help="write the tables here")
    ap.add_argument("--failures", type=int, default=40, help="failing cases listed per provider")
    ap.add_argument("--package-root", type=Path, help="import taskzilla_sleep from this tree (a baseline)")
    ap.add_argument(
        "--embedder",
        choices=["minilm", "multilingual", "e5"],
        default="minilm",
        help="multilingual: embeddings.provider multilingual (thresholds on its scale); e5: raw e5, uncentred",
    )
    a = ap.parse_args(argv)
    if a.package_root is not None:  # before anything imports the package
        sys.path.insert(0, str(a.package_root.resolve()))
    known = oracle_gold.week_names(a.corpus)
    weeks = known if a.weeks == "all" else [w for w in a.weeks.split(",") if w]
    provs = [p for p in a.providers.split(",") if p]
    bad = [w for w in weeks if w not in known] + [p for p in provs if p not in PROVIDERS]
    if bad:
        ap.error(f"unknown week or provider: {', '.join(bad)}")
    from taskzilla_sleep.core.logs import configure_logging

    configure_logging(os.environ.get("HARD_CASES_LOG_LEVEL", "warning"), json=True)
    from taskzilla_sleep.stores.embeddings import OfflineMultilingual

    embedder = {"e5": E5, "multilingual": OfflineMultilingual}.get(a.embedder, lambda: None)()
    result = _jsonable(run(weeks, provs, a.work, a.corpus, embedder))
    text = render(result, a.failures)
    print(text)
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    if a.md:
        a.md.parent.mkdir(parents=True, exist_ok=True)
        a.md.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
