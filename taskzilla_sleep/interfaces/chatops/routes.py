"""The chat endpoints on the worker's HTTP server: Slack interactivity and the Telegram webhook.

``POST /chat/slack/interactions`` (the Slack app's Interactivity Request URL) and ``POST
/chat/telegram/webhook`` (the bot's setWebhook URL). Both answer at once (Slack wants 200 within
3 s) and update the chat after the answer: Slack's ``response_url`` replaces the alert with its
resolution, Telegram gets answerCallbackQuery and the alert rewritten as decided. Not part of the bot's
``/v1`` API (nor its OpenAPI schema): the callers authenticate by signature or secret, not token.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import anyio
from fastapi import APIRouter, BackgroundTasks, Request
from fastapi.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from taskzilla_sleep.core.errors import BadRequest
from taskzilla_sleep.interfaces.chatops.ops import Callback, ChatOps

SLACK_PATH = "/chat/slack/interactions"
TELEGRAM_PATH = "/chat/telegram/webhook"

Mount = tuple[BaseRoute, Callable[[], AbstractAsyncContextManager[None]]]


def chat_router(ops: ChatOps) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.post(SLACK_PATH)
    async def slack_interactions(request: Request, background: BackgroundTasks) -> Response:
        body = await request.body()
        ts, sig = request.headers.get("x-slack-request-timestamp"), request.headers.get("x-slack-signature")
        act, done, refused = await anyio.to_thread.run_sync(ops.slack_click, body, ts, sig)
        if done is not None or refused is not None:
            background.add_task(ops.answer_slack, act, done, refused)
        return Response(status_code=200)

    @router.post(TELEGRAM_PATH)
    async def telegram_webhook(request: Request, background: BackgroundTasks) -> Response:
        channels = ops.telegram_channels(request.headers.get("x-telegram-bot-api-secret-token"))
        try:
            update = json.loads(await request.body())
        except (ValueError, RecursionError):
            raise BadRequest("the body is not a Telegram Update (JSON)") from None
        cb: Callback | None = await anyio.to_thread.run_sync(ops.telegram_click, channels, update)
        if cb is not None:
            background.add_task(ops.answer_telegram, cb)
        # 200 even for a refused click (told to the person in the callback answer): any other
        # status makes Telegram send the same update again and again.
        return JSONResponse({"ok": True, "resolved": bool(cb and cb.resolved)})

    return router


def chat_mounts(ops: ChatOps | None) -> list[Mount]:
    """The chat routes to serve beside /v1 (none when no channel is set up for resolving); the
    first one's lifespan closes the chat clients when the server stops."""
    if ops is None:
        return []

    @asynccontextmanager
    async def owning() -> AsyncIterator[None]:
        try:
            yield
        finally:
            ops.close()

    @asynccontextmanager
    async def nothing() -> AsyncIterator[None]:
        yield

    routes = chat_router(ops).routes
    return [(route, owning if i == 0 else nothing) for i, route in enumerate(routes)]
