"""One error root; vendor exceptions are converted where they enter (``raise ... from exc``)."""

from __future__ import annotations


class TaskzillaError(Exception):
    """Root of every error this package raises on purpose."""

    exit_code = 1


class ConfigError(TaskzillaError):
    """A configuration value is missing or not allowed. Exit code 2."""

    exit_code = 2


class UsageError(TaskzillaError):
    """The command line was used wrongly. Exit code 2."""

    exit_code = 2


class InputError(TaskzillaError):
    """Input data (an episode file, a request body) is invalid; nothing was written."""


class StoreError(TaskzillaError):
    """A store (graph or vectors) failed or is unreachable."""


class LLMError(TaskzillaError):
    """The language model failed or answered something unusable."""


class NotFound(InputError):
    """What a request names does not exist (a contradiction id, a fact id). API: 404."""


class UnknownTeam(NotFound):
    """A read names a team that has no data at all and is configured nowhere (a typo, most likely):
    not "nothing known". API: 404 with the code ``unknown_team``."""

    code = "unknown_team"


class Conflict(InputError):
    """The request contradicts the current state (an already resolved contradiction with another
    decision, a pinned fact that cannot be superseded). API: 409."""


class BadRequest(InputError):
    """The request is missing something it must say (a team, when no default is configured). API: 400."""


class Unauthorized(InputError):
    """No credentials, or credentials that match no token. API: 401."""


class Forbidden(InputError):
    """A known caller asked for something its token does not allow (a role or a team). API: 403."""


class Busy(TaskzillaError):
    """Work that must wait: too many ingests queued, or a night holds the memory lease (API: 429
    with Retry-After)."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class DeliveryError(TaskzillaError):
    """One delivery attempt of a chat alert failed. The message is already free of secrets.

    Every kind of failure is retried later (a 4xx may be fixed by fixing the config while the
    alert waits); ``config_problem`` only decides whether it is logged as an error.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retry_after_s: float | None = None,
        config_problem: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s
        self.config_problem = config_problem
