"""Request and response bodies of the HTTP API (the OpenAPI schema is generated from these)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from taskzilla_sleep.core.models import EpisodeIn, StorableStr, TeamName
from taskzilla_sleep.memory.recall import RecallItem


class IngestRequest(BaseModel):
    """A batch of episodes: all are validated first; one invalid item means nothing is written."""

    model_config = ConfigDict(extra="forbid")

    episodes: list[EpisodeIn] = Field(min_length=1)


class IngestResult(BaseModel):
    new: int
    present: int
    skipped: int
    skipped_by_connector: dict[str, int]
    edited: int = 0  # stored messages whose text a newer edit (edited_at) replaced
    edits_ignored: int = 0  # edits of messages whose text is gone (retired, pruned, forgotten)


class ResolveRequest(BaseModel):
    """A person's decision. Who decided is the token's name (recorded as ``resolved_by``)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"keep": "new", "note": "we moved"}]})

    keep: Literal["new", "old", "both"]
    note: StorableStr | None = Field(default=None, max_length=2000)


class UndoRequest(BaseModel):
    """Roll back what one run did. Who asked is the token's name; the reason is kept with the run."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"reason": "it learned status lines", "cascade": False}]}
    )

    reason: StorableStr = Field(min_length=1, max_length=500)
    cascade: bool = False  # also undo the later changes that built on it, newest first
    dry_run: bool = False  # say what would be undone, change nothing


class ReleaseRequest(BaseModel):
    """A belief a person judged wrong: its messages back to raw (texts from the archive), it retires."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"team": "platform", "reason": "a status line, not a rule"}]}
    )

    team: TeamName | None = None
    reason: StorableStr = Field(min_length=1, max_length=500)


class PinRequest(BaseModel):
    """A fact a person declares: immune to every nightly step until unpinned."""

    model_config = ConfigDict(extra="forbid")

    text: StorableStr = Field(min_length=1, max_length=300)
    team: TeamName | None = None
    entity: StorableStr | None = Field(default=None, max_length=200)


class ForgetRequest(BaseModel):
    """What to forget, exactly one of: an episode, every episode of an author, a pattern. Who asked
    is the token's name; the reason is kept in the tombstone."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"team": "platform", "author": "dana", "reason": "left the team, asked"}]},
    )

    team: TeamName | None = None
    episode_id: StorableStr | None = Field(default=None, min_length=1, max_length=200)
    author: StorableStr | None = Field(default=None, min_length=1, max_length=200)
    pattern_id: StorableStr | None = Field(default=None, min_length=1, max_length=200)
    reason: StorableStr = Field(min_length=1, max_length=500)

    @model_validator(mode="after")
    def _one_target(self) -> ForgetRequest:
        named = [x for x in (self.episode_id, self.author, self.pattern_id) if x is not None]
        if len(named) != 1:
            raise ValueError("name exactly one of episode_id, author, pattern_id")
        return self


class RecallResult(BaseModel):
    """What the bot gets back: items best first (and, with format=prompt, a block for a system prompt)."""

    team: str
    items: list[RecallItem]
    prompt: str | None = None


class Health(BaseModel):
    ok: bool


class ModelReadiness(BaseModel):
    """The worker's last model check (``taskzilla-sleep check``), reused for minutes: ok, or what to fix."""

    ok: bool
    model: str | None = None  # None: no model configured, the offline provider judges
    detail: str
    fix: str | None = None  # the setting or environment variable to change (llm.model, OPENAI_API_KEY...)
    checked_at: str | None = None


class Readiness(BaseModel):
    ready: bool
    problems: dict[str, str]
    model: ModelReadiness | None = None  # does not decide ``ready``: the night retries a model
