"""Pure ASGI middleware: refuses bodies over ``limit`` bytes, by Content-Length or while streaming."""

from __future__ import annotations

import json
from typing import Any

from taskzilla_sleep.interfaces.api.errors import CODES


class BodyLimit:
    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(send)
            return
        seen = 0
        refused = False

        async def limited() -> Any:
            # Over the limit while streaming: answer 413 now and tell the app the client left (its
            # body parser then stops); whatever the app answers after that is dropped.
            nonlocal seen, refused
            message = await receive()
            if message["type"] == "http.request" and not refused:
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    refused = True
                    await self._refuse(send)
                    return {"type": "http.disconnect"}
            return message

        async def guarded(message: Any) -> None:
            if not refused:
                await send(message)

        await self.app(scope, limited, guarded)

    async def _refuse(self, send: Any) -> None:
        message = f"the request body is larger than {self.limit} bytes (api.max_body_bytes)"
        body = json.dumps({"error": {"code": CODES[413], "message": message, "details": None}}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})
