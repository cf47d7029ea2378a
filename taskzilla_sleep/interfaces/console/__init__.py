"""The memory console: server-rendered pages at ``/ui`` for people (the contradiction queue, patterns,
recall, messages, entities, pinned facts, nights, the alert outbox, status; a page at a stable URL for
each contradiction, pattern, message and run), logged in with an API token and served by the
worker beside ``/v1``. Every read and write goes through :class:`~taskzilla_sleep.service.memory_service.MemoryService`.
"""

from taskzilla_sleep.interfaces.console.routes import console_router
from taskzilla_sleep.interfaces.console.sessions import Sessions
from taskzilla_sleep.interfaces.console.web import Console

__all__ = ["Console", "Sessions", "console_router"]
