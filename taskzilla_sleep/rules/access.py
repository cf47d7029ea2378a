"""Who is asking, and what they may do: API and MCP tokens mapped to a name, teams and a role.

A token is configured by its SHA-256 (``api.tokens`` or the YAML file ``api.tokens_file``), never
by itself; ``TASKZILLA_API_TOKEN`` from the environment is one more token, an admin of every team.
With no token at all the deployment is open (a developer's loopback worker): every caller is the
``anonymous`` admin. Roles are ordered: read (recall, lists) < write (ingest, resolve, pin,
forget: a bot passes on a person's "forget what I said") < admin (its teams' status, export:
every raw message of a team). Import is not offered over the API or MCP (an operator's command).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import yaml
from pydantic import ValidationError

from taskzilla_sleep.core.errors import BadRequest, ConfigError, Forbidden, NotFound, Unauthorized
from taskzilla_sleep.core.settings import ApiSettings, TokenGrant

if TYPE_CHECKING:
    from taskzilla_sleep.core.throttle import Throttle

Role = Literal["read", "write", "admin"]
_RANK: dict[str, int] = {"read": 0, "write": 1, "admin": 2}
EVERY_TEAM = "*"
ENV_TOKEN_NAME = "env-token"


@dataclass(frozen=True)
class Access:
    """A caller: its name (what ``by`` records), its teams (None: every team) and its role."""

    name: str
    teams: frozenset[str] | None
    role: Role

    def sees(self, team: str) -> bool:
        return self.teams is None or team in self.teams

    def require(self, role: Role, team: str | None = None) -> None:
        """Raise Forbidden unless this caller has ``role`` (or higher) on ``team``."""
        if _RANK[self.role] < _RANK[role]:
            raise Forbidden(f"token {self.name!r} has role {self.role}; this needs {role}")
        if team is not None and not self.sees(team):
            raise Forbidden(f"token {self.name!r} has no access to team {team!r}")

    def visible(self, team: str, what: str) -> None:
        """A thing of another team does not exist for this caller (its existence is not leaked)."""
        if not self.sees(team):
            raise NotFound(f"no {what}")

    def team_for(self, wanted: str | None, default: str | None) -> str:
        """The team a request is about: the one it names, else the deployment's default."""
        team = wanted or default
        if not team:
            raise BadRequest("name a team (the `team` parameter): this deployment has no api.default_team")
        return team


OPEN = Access(name="anonymous", teams=None, role="admin")


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class Tokens:
    """The configured tokens; ``authenticate`` turns a bearer token into an :class:`Access`. With a
    ``throttle``, a client (its address) that keeps presenting wrong tokens waits (``throttle.py``)."""

    def __init__(self, grants: Mapping[str, TokenGrant], throttle: Throttle | None = None) -> None:
        self._grants = dict(grants)
        self.throttle = throttle

    @classmethod
    def from_settings(cls, api: ApiSettings, env_token: str | None = None, throttle: Throttle | None = None) -> Tokens:
        grants = dict(api.tokens)
        if api.tokens_file is not None:
            grants.update(_load_file(api.tokens_file))
        if env_token:
            grants[token_hash(env_token)] = TokenGrant(name=ENV_TOKEN_NAME, teams=(EVERY_TEAM,), role="admin")
        return cls(grants, throttle)

    @property
    def open(self) -> bool:
        return not self._grants

    def authenticate(self, token: str | None, client: str | None = None, surface: str = "api") -> Access:
        """The caller ``token`` stands for. ``client`` (the peer's address) is throttled: Throttled
        (429) while it waits, before the token is looked at; a wrong token counts against it."""
        if self.open:
            return OPEN
        if self.throttle is not None and client is not None:
            self.throttle.check(client, surface)
        try:
            return self._access(token)
        except Unauthorized:
            if self.throttle is not None and client is not None and token:  # no token at all is no guess
                self.throttle.failed(client, surface)
            raise

    def _access(self, token: str | None) -> Access:
        if not token:
            raise Unauthorized("a bearer token is required (Authorization: Bearer <token>)")
        digest = token_hash(token)
        found: TokenGrant | None = None
        for key, grant in self._grants.items():  # every key compared, in constant time each
            if hmac.compare_digest(key, digest):
                found = grant
        if found is None:
            raise Unauthorized("the bearer token matches no configured token")
        teams = None if EVERY_TEAM in found.teams else frozenset(found.teams)
        return Access(name=found.name, teams=teams, role=found.role)

    def authorization(self, header: str | None, client: str | None = None, surface: str = "api") -> Access:
        """From an ``Authorization`` header: the scheme is case-insensitive (RFC 7235)."""
        scheme, _, token = (header or "").strip().partition(" ")
        if header and scheme.casefold() != "bearer":
            if self.throttle is not None and client is not None and not self.open:
                self.throttle.check(client, surface)
                self.throttle.failed(client, surface)
            raise Unauthorized("use the Bearer scheme: Authorization: Bearer <token>")
        return self.authenticate(token.strip() or None, client, surface)


def _load_file(path: Path) -> dict[str, TokenGrant]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"config error: api.tokens_file {path}: {exc}") from exc
    try:
        return dict(ApiSettings.model_validate({"tokens": data}).tokens)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"][1:])
        raise ConfigError(f"config error: api.tokens_file {path}: {where}: {first['msg']}") from exc
