"""The HTTP API (FastAPI): ``create_app(ApiDeps)``; the operations themselves live in ``service``."""

from taskzilla_sleep.interfaces.api.app import ApiDeps, IngestQueue, create_app

__all__ = ["ApiDeps", "IngestQueue", "create_app"]
