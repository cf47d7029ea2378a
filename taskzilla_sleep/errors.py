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
