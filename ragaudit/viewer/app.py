"""The viewer's ASGI app: its pages, the labelling router, the static files and the guards.

On loopback with no token, the app answers only requests addressed to a loopback name (a web
page elsewhere cannot reach it by rebinding a DNS name to 127.0.0.1). With a token (``serve``
makes one for any other host), every request must carry it, as ``?token=`` once (the answer
sets a cookie and sends the browser to the address without it) or as that cookie. A state-
changing request from another origin is refused either way, so a page elsewhere cannot post
labels through the annotator's browser.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from fastapi import FastAPI, Request, Response
from fastapi.responses import PlainTextResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.middleware.trustedhost import TrustedHostMiddleware

from ragaudit.errors import RagauditError
from ragaudit.viewer import _audit_labels, labelling
from ragaudit.viewer._pages import router

TOKEN_COOKIE = "ragaudit_view_token"
# As a Host header names them (an IPv6 address in brackets).
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
MAX_BODY = 64 * 1024
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def create_app(
    runs_root: Path, *, token: str | None = None, hosts: Sequence[str] = LOOPBACK_NAMES
) -> FastAPI:
    """The viewer over ``runs_root``; with ``token``, every request must carry it.

    Args:
        runs_root: The folder whose sub-folders are the runs shown (kept in
            ``app.state.runs_root``).
        token: The secret a request must present (None: loopback only, no token).
        hosts: Without a token, the host names a request may be addressed to.
    """
    app = FastAPI(title="ragaudit view", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.runs_root = Path(runs_root)
    app.include_router(router)
    app.include_router(labelling.router)
    app.include_router(_audit_labels.router)
    app.mount(
        "/static",
        StaticFiles(directory=Path(__file__).with_name("static")),
        name="static",
    )

    async def refused(request: Request, exc: Exception) -> Response:
        # A damaged or foreign file in a run folder (the labels store, the sample): its one-line
        # message, named relative to the runs root so no server path reaches the browser.
        root = str(Path(runs_root).resolve())
        return PlainTextResponse(str(exc).replace(root + "/", "").replace(root, "."), 409)

    app.add_exception_handler(RagauditError, refused)
    if token is None:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(hosts))

    @app.middleware("http")
    async def guard(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        if request.method not in _SAFE_METHODS:
            origin = request.headers.get("origin")
            if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
                return PlainTextResponse("refused: a request from another origin", 403)
            # A label is a few hundred bytes: a body of megabytes (or one of unknown length)
            # would be read whole into memory before any check of its fields.
            length = request.headers.get("content-length", "0")
            if "transfer-encoding" in request.headers or not length.isdigit():
                return PlainTextResponse("refused: a body must state its length", 411)
            if int(length) > MAX_BODY:
                return PlainTextResponse(f"refused: a body over {MAX_BODY // 1024} KiB", 413)
        if token is None:
            return await call_next(request)
        given = request.query_params.get("token")
        presented = given or request.cookies.get(TOKEN_COOKIE) or ""
        if not secrets.compare_digest(presented.encode(), token.encode()):
            return PlainTextResponse(
                "a token is required: open the address `ragaudit view` printed when it started",
                401,
            )
        if given and request.method in ("GET", "HEAD"):
            # The token moves into the cookie and out of the address at once: an address that
            # holds it would stay in the history, be shared with a copied link, or be sent on
            # as a Referer.
            rest = urlencode(
                [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            )
            response: Response = RedirectResponse(
                request.url.path + (f"?{rest}" if rest else ""), status_code=303
            )
        else:
            response = await call_next(request)
        if given:
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        return response

    return app


__all__ = ["LOOPBACK_NAMES", "TOKEN_COOKIE", "create_app"]
