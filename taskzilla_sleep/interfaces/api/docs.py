"""The API's pages for people: Swagger UI at ``/docs`` and ReDoc at ``/redoc``, drawn from
``/openapi.json`` with every script, style sheet and icon served by the worker itself under
``/docs-assets`` (the files of the ``fastapi-offline`` wheel). FastAPI's own pages load them from a
CDN: blank on a host without the internet, and a request to a third party from every reader.

Like ``/openapi.json`` they need no token: they show the schema, and an operation tried from them
still sends the bearer token the reader gives to Swagger UI's Authorize dialog.
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs-assets"
# swagger-ui-bundle.js, swagger-ui.css, redoc.standalone.js, favicon.png: checked when the app is built
# (StaticFiles refuses a missing directory), not when a person first opens the page.
STATIC = Path(fastapi_offline.__file__).parent / "static"
# The pages may load and call nothing but the worker: an asset of a later wheel that points at a CDN is
# refused by the browser instead of fetched. Both UIs set inline styles; ReDoc runs its search in a
# worker from a blob: URL; Swagger UI starts from an inline script (FastAPI's page).
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self' 'unsafe-inline'; "
    "style-src 'self' 'unsafe-inline'; img-src 'self' data:; worker-src 'self' blob:; "
    "frame-ancestors 'none'; form-action 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
# ReDoc's menu shows Redocly's logo from their CDN, with no option to turn it off: that one address is
# replaced by an empty picture in the script we serve (the CSP above would refuse it, with an error).
REDOC_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"
NO_LOGO = b"data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' width='0' height='0'/%3E"


def install(app: FastAPI) -> None:
    """Serve ``/docs``, ``/redoc`` and their assets (none of them in the schema)."""
    redoc_js = (STATIC / "redoc.standalone.js").read_bytes().replace(REDOC_LOGO, NO_LOGO)

    @app.get(f"{ASSETS}/redoc.standalone.js", include_in_schema=False)  # before the mount: it answers first
    def redoc_script() -> Response:
        return Response(redoc_js, media_type="text/javascript; charset=utf-8")

    app.mount(ASSETS, StaticFiles(directory=STATIC), name="docs-assets")
    schema = app.openapi_url or "/openapi.json"

    def prefix(request: Request) -> str:  # behind a proxy that strips a path prefix (uvicorn --root-path)
        return str(request.scope.get("root_path", "")).rstrip("/")

    @app.get("/docs", include_in_schema=False)
    def swagger_ui(request: Request) -> HTMLResponse:
        root = prefix(request)
        page = get_swagger_ui_html(
            openapi_url=root + schema,
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS}/favicon.png",
            # No badge from the public validator (validator.swagger.io): it would send it our schema.
            swagger_ui_parameters={"validatorUrl": None},
        )
        page.headers.update(HEADERS)
        return page

    @app.get("/redoc", include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        root = prefix(request)
        page = get_redoc_html(
            openapi_url=root + schema,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS}/favicon.png",
            with_google_fonts=False,
        )
        page.headers.update(HEADERS)
        return page
