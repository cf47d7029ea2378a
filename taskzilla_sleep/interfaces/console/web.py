"""What every console page shares: the templates (autoescaped), the session cookie, the CSRF check,
the security headers and the error page.

No script at all: pages are plain HTML forms (POST, then a redirect to a GET), so there is nothing
to vendor and nothing fetched at run time; ``script-src 'none'`` says so to the browser.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

import structlog
from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, StrictUndefined
from pydantic import ValidationError

from taskzilla_sleep.core.errors import InputError, TaskzillaError
from taskzilla_sleep.interfaces.api.errors import status_of
from taskzilla_sleep.interfaces.console.sessions import COOKIE, IDLE_S, LOGIN_COOKIE, Session, Sessions
from taskzilla_sleep.rules.access import Access

log = structlog.get_logger(__name__)

PREFIX = "/ui"
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'none'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
# The pages of the nav: (path, title, role needed to use it).
NAV: list[tuple[str, str, str]] = [
    ("/ui/contradictions", "Contradictions", "read"),
    ("/ui/patterns", "Patterns", "read"),
    ("/ui/recall", "Recall", "read"),
    ("/ui/messages", "Messages", "read"),
    ("/ui/facts", "Pinned facts", "read"),
    ("/ui/nights", "Nights", "admin"),
    ("/ui/alerts", "Alerts", "admin"),
    ("/ui/audit", "Audit", "admin"),
    ("/ui/status", "Status", "admin"),
]
_RANK = {"read": 0, "write": 1, "admin": 2}

TEMPLATES = Environment(
    loader=PackageLoader("taskzilla_sleep.interfaces.console", "templates"),
    autoescape=True,  # every value is escaped unless a template says |safe (only the report's own HTML)
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def can(access: Access, role: str) -> bool:
    return _RANK[access.role] >= _RANK[role]


def local(t: datetime | str | None, zone: str) -> tuple[str, str] | None:
    """A time as the console shows it: in the schedule's zone, with the zone's marker ("2026-11-28
    03:05 CET"), and its ISO form for ``<time datetime>``; None for no time. Takes the status's ISO text too."""
    if t is None or t == "":
        return None
    when = datetime.fromisoformat(t) if isinstance(t, str) else t
    if when.tzinfo is None:  # the stores keep aware times; a naive one is UTC
        when = when.replace(tzinfo=ZoneInfo("UTC"))
    there = when.astimezone(ZoneInfo(zone))
    return there.isoformat(), there.strftime("%Y-%m-%d %H:%M %Z")


def segment(value: str) -> str:
    """One path segment of a console URL (an id, an entity name): every reserved character escaped."""
    return quote(value, safe="")


TEMPLATES.globals["can"] = can
TEMPLATES.globals["local"] = local
TEMPLATES.filters["seg"] = segment


def secure(request: Request) -> bool:
    return request.url.scheme == "https"


def html(template: str, status: int = 200, headers: Mapping[str, str] | None = None, **ctx: Any) -> HTMLResponse:
    body = TEMPLATES.get_template(template).render(nav=NAV, **ctx)
    return HTMLResponse(body, status_code=status, headers={**HEADERS, **(headers or {})})


def zone_of(request: Request) -> str:
    """The zone the console shows times in (the schedule's, set by the console's router)."""
    return str(getattr(request.state, "zone", "UTC"))


def page(request: Request, s: Session, template: str, status: int = 200, **ctx: Any) -> HTMLResponse:
    """A page of a logged-in person: the nav, their name and role, the CSRF token, notices."""
    return html(
        template,
        status,
        who=s.access,
        csrf=s.csrf,
        notices=s.take_notices(),
        path=request.url.path,
        zone=zone_of(request),
        **ctx,
    )


def error_page(request: Request, s: Session | None, status: int, message: str, back: str | None = None) -> HTMLResponse:
    ctx: dict[str, Any] = {"code": status, "message": message, "back": back}
    if s is None:
        return html(
            "error.html", status, who=None, csrf="", notices=[], path=request.url.path, zone=zone_of(request), **ctx
        )
    return page(request, s, "error.html", status, **ctx)


def failure(request: Request, s: Session | None, exc: TaskzillaError, back: str | None = None) -> HTMLResponse:
    """A service error as a page with the status /v1 would answer (403 role, 404 unknown id, 409 …)."""
    status = status_of(exc)
    if status >= 500:
        log.warning("console_error", error=str(exc)[:300], kind=type(exc).__name__)
    return error_page(request, s, status, str(exc)[:2000], back)


def invalid(request: Request, s: Session, exc: ValidationError, back: str | None = None) -> HTMLResponse:
    """A form field that /v1 would refuse, refused the same way (422, the field and why; nothing written)."""
    first = exc.errors(include_url=False)[0]
    where = ".".join(str(x) for x in first["loc"]) or "form"
    return error_page(request, s, 422, f"{where}: {first['msg']}; nothing was written", back)


def redirect(to: str) -> RedirectResponse:
    return RedirectResponse(to, status_code=303, headers=HEADERS)


def to_login(request: Request) -> RedirectResponse:
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return redirect(f"{PREFIX}/login?next={quote(here, safe='')}")


def safe_next(value: str | None) -> str:
    """Only a console path: a login link cannot send a person to another site after login."""
    if value and value.startswith(PREFIX + "/") and not value.startswith("//") and "\\" not in value:
        return value
    return f"{PREFIX}/contradictions"


def set_session_cookie(response: Response, request: Request, s: Session) -> None:
    response.set_cookie(
        COOKIE,
        s.id,
        max_age=IDLE_S,
        path=PREFIX,
        httponly=True,
        samesite="strict",
        secure=secure(request),
    )


def login_nonce(request: Request) -> tuple[str, bool]:
    """The login form's CSRF value: the browser's cookie if it has one, else a new one (and True)."""
    have = request.cookies.get(LOGIN_COOKIE)
    if have and 20 <= len(have) <= 100:
        return have, False
    return secrets.token_urlsafe(32), True


def set_login_cookie(response: Response, request: Request, nonce: str) -> None:
    response.set_cookie(
        LOGIN_COOKIE, nonce, max_age=3600, path=PREFIX, httponly=True, samesite="strict", secure=secure(request)
    )


class Console:
    """The console's state: the sessions (in the graph store) and how a request finds its own. The
    store is read and written on every request: call these off the event loop."""

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions

    def session(self, request: Request) -> Session | None:
        """The session of a page request, with the notices it is to show."""
        return self.sessions.get(request.cookies.get(COOKIE))

    def show(self, request: Request, render: Callable[[Session], Response], back: str | None = None) -> Response:
        """A page for a signed-in person: ``render`` with their session. Without a session, the login
        form (and back here after it); a service error ``render`` raises, the error page with the
        status /v1 would answer (403 a role or a team the caller lacks, 404 an unknown id or another
        team's, 409, 422 …), linking to ``back``."""
        s = self.session(request)
        if s is None:
            return to_login(request)
        try:
            return render(s)
        except TaskzillaError as exc:
            return failure(request, s, exc, back)

    def posted(self, request: Request, form: Mapping[str, Any]) -> tuple[Session | None, Response | None]:
        """The session of a POST with its CSRF token checked: (session, None), or (None, the answer).
        Its notices stay for the page the POST redirects to."""
        s = self.sessions.get(request.cookies.get(COOKIE), take_notices=False)
        if s is None:
            return None, to_login(request)
        sent = form.get("csrf")
        if not s.csrf_ok(sent if isinstance(sent, str) else None):
            log.warning("console_csrf_refused", who=s.access.name, path=request.url.path)
            return None, error_page(request, s, 403, "the form's CSRF token is missing or wrong: reload the page")
        return s, None


def int_param(value: str | None, what: str, default: int, high: int = 10_000, low: int = 1) -> int:
    """A whole-number query parameter ``what`` in [low, high], ``default`` when absent; InputError else."""
    if not value:
        return default
    if not value.isdigit() or not low <= int(value) <= high:
        raise InputError(f"{what} must be a whole number from {low} to {high}, not {value[:50]!r}")
    return int(value)
