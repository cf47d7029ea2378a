"""The console's pages to look around memory (``/ui``): recall as the bot gets it, the message browser,
a message's, an entity's and a run's page. Reads only, through :class:`MemoryService` with the same
access checks as ``/v1``."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, Request
from fastapi.responses import Response

from taskzilla_sleep.core.errors import InputError
from taskzilla_sleep.interfaces.console import browse
from taskzilla_sleep.interfaces.console.sessions import Session
from taskzilla_sleep.interfaces.console.web import PREFIX, Console, int_param, page
from taskzilla_sleep.memory.recall import RecallItem, render_prompt
from taskzilla_sleep.service.memory_service import MemoryService

PAGE = 50  # messages a page
RECALL_K = (1, 50)  # the bounds /v1/recall takes for k
RECALL_BUDGET = (20, 20_000)  # and for a prompt block's token budget
TeamOf = Callable[[Session, Request], tuple[str | None, list[str]]]


def add_routes(router: APIRouter, service: MemoryService, con: Console, team_of: TeamOf) -> None:
    """The pages, on the console's router (``team_of``: the team a page is about, and the choices)."""

    @router.get("/recall")
    def recall_page(request: Request) -> Response:
        """What the bot would get for a question: the very call GET /v1/recall makes, each item with
        its rank and why it is there."""

        def render(s: Session) -> Response:
            q = request.query_params
            question = (q.get("q") or "").strip()
            entity = (q.get("entity") or "").strip() or None
            include = q.getlist("include")
            team, teams = team_of(s, request)
            k = int_param(q.get("k"), "k", 5, low=RECALL_K[0], high=RECALL_K[1])
            budget = int_param(q.get("budget"), "budget", 600, low=RECALL_BUDGET[0], high=RECALL_BUDGET[1])
            if bad := [x for x in include if x not in ("drafts", "superseded")]:
                raise InputError(f"include must be drafts or superseded, not {bad[0][:50]!r}")
            if len(question) > 2000 or (entity and len(entity) > 200):
                raise InputError("q is at most 2000 characters and entity at most 200")
            items: list[RecallItem] = []
            if question and team:
                items = service.recall(
                    s.access,
                    team,
                    question,
                    entity=entity,
                    k=k,
                    include_drafts="drafts" in include,
                    include_superseded="superseded" in include,
                )
            ranked = [(i + 1, item, why(item)) for i, item in enumerate(items)]
            prompt = render_prompt(items, budget) if items else None
            return page(
                request,
                s,
                "recall.html",
                team=team,
                teams=teams,
                q=question,
                entity=entity or "",
                k=k,
                budget=budget,
                include=include,
                ranked=ranked,
                prompt=prompt,
                asked=bool(question),
            )

        return con.show(request, render, f"{PREFIX}/recall")

    @router.get("/messages")
    def messages_page(request: Request) -> Response:
        def render(s: Session) -> Response:
            q = request.query_params
            query = browse.MessageQuery(
                text=(q.get("q") or "").strip()[:500],
                channel=(q.get("channel") or "").strip()[:200],
                author=(q.get("author") or "").strip()[:200],
                status=(q.get("status") or "").strip(),
            )
            team, teams = team_of(s, request)
            number = int_param(q.get("page"), "page", 1)
            query.statuses()  # an unknown status is refused before any read
            found = browse.messages(service, s.access, team, query) if team else None
            hits = found.found if found else []
            return page(
                request,
                s,
                "messages.html",
                team=team,
                teams=teams,
                f=query,
                messages=hits[(number - 1) * PAGE : number * PAGE],
                total=len(hits),
                number=number,
                pages=max(1, -(-len(hits) // PAGE)),
                channels=found.channels if found else [],
                authors=found.authors if found else [],
                statuses=["live", "archived", *browse.BROWSABLE],
                capped=found.capped if found else False,
                archived=found.archived if found else {},
                cap=browse.MAX_SCAN,
            )

        return con.show(request, render, f"{PREFIX}/messages")

    @router.get("/episodes/{eid}")
    def episode_page(request: Request, eid: str) -> Response:
        def render(s: Session) -> Response:
            view = browse.episode(service, s.access, eid)
            return page(request, s, "episode.html", v=view, team=view.episode.team)

        return con.show(request, render, f"{PREFIX}/messages")

    @router.get("/entities/{kind}/{name:path}")
    def entity_page(request: Request, kind: str, name: str) -> Response:
        def render(s: Session) -> Response:
            team, teams = team_of(s, request)
            view = browse.entity(service, s.access, team, kind, name)
            shown = view.messages[: PAGE * 4]
            return page(request, s, "entity.html", v=view, team=view.entity.team, teams=teams, shown=shown)

        return con.show(request, render, f"{PREFIX}/messages")

    @router.get("/runs/{run_id}")
    def run_page(request: Request, run_id: str) -> Response:
        def render(s: Session) -> Response:
            r = browse.run(service, s.access, run_id)
            return page(request, s, "run.html", r=r)

        return con.show(request, render, f"{PREFIX}/nights")


def why(item: RecallItem) -> list[str]:
    """Why recall handed this item back, in the words of its own fields (recall ranks; this only reads)."""
    out: list[str] = []
    if item.kind == "fact":
        out.append("a pinned fact: facts come first" + (f" (pinned by {item.pinned_by})" if item.pinned_by else ""))
    if item.similarity is None:
        out.append(
            "no match of the question itself: shown beside a hit (the other side of its contradiction, or "
            "the belief it replaced)"
        )
    elif item.matched_evidence is not None:
        out.append(f"similarity {item.similarity:.2f} to the question, through a supporting message")
    else:
        out.append(f"similarity {item.similarity:.2f} to the question")
    if item.kind == "pattern":
        if item.confidence is not None:
            out.append(f"a belief of confidence {item.confidence:.2f}")
        if item.evidence_count is not None:
            out.append(f"{item.evidence_count} supporting message{'' if item.evidence_count == 1 else 's'}")
    if item.changed_on is not None:
        out.append(f"the team's practice since {item.changed_on:%Y-%m-%d}, awaiting confirmation (was: {item.was})")
    elif item.contradiction is not None:
        out.append(f"contested: contradiction {item.contradiction.id} is open")
    if item.superseded:
        out.append("superseded: asked for with include=superseded")
    if item.draft:
        out.append("the bot's own draft: asked for with include=drafts")
    if item.duplicates > 1:
        out.append(f"said {item.duplicates} times (collapsed into one)")
    return out
