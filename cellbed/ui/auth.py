"""The token in the UI's URL, as Jupyter's: every request must carry it, on loopback too, because
every local user of a shared lab server can reach loopback.

A request proves it knows the token by ``?token=...`` (the printed URL), an ``Authorization:
token ...`` header (scripts), or the cookie that the first ``?token=`` request sets (so that the
page's own requests, EventSource included, need not repeat it). Without any of them: 401; with a
wrong one: 403.
"""
from __future__ import annotations

import hmac
import secrets
from typing import Awaitable, Callable

from aiohttp import web

TOKEN_PARAM = "token"
TOKEN_BYTES = 32

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def cookie_name(port: int) -> str:
    """One cookie per port: two UIs on one box (cookies ignore ports) keep their own tokens."""
    return f"cellbed-ui-{port}"


def presented(request: web.Request, port: int) -> tuple[str, str]:
    """(token, where) that *request* presents; ("", "") when it presents none."""
    q = request.query.get(TOKEN_PARAM)
    if q:
        return q, "query"
    h = request.headers.get("Authorization", "")
    if h.lower().startswith("token "):
        return h[6:].strip(), "header"
    c = request.cookies.get(cookie_name(port))
    if c:
        return c, "cookie"
    return "", ""


def middleware(token: str, port_of: Callable[[], int], secure: bool) -> Callable:
    """The aiohttp middleware that refuses a request without *token*. *port_of* gives the port the
    server listens on (known after it binds); *secure*: the cookie is sent over TLS only."""
    want = token.encode()

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        port = port_of()
        got, where = presented(request, port)
        if not got:
            return web.Response(status=401, text="cellctl ui: this page needs the token that `cellctl ui` printed "
                                                 "(open the URL it printed, with ?token=...)\n",
                                headers={"WWW-Authenticate": "Token"})
        if not hmac.compare_digest(got.encode(), want):
            return web.Response(status=403, text="cellctl ui: wrong token\n")
        if where == "query" and request.method == "GET" and not request.path.startswith("/api/"):
            # the printed URL: keep the token in a cookie and take it out of the address bar
            rest = request.rel_url.with_query([(k, v) for k, v in request.query.items() if k != TOKEN_PARAM])
            resp = web.Response(status=303, headers={"Location": str(rest)})
            resp.set_cookie(cookie_name(port), token, httponly=True, samesite="Strict", secure=secure, path="/")
            return resp
        return await handler(request)
    return check
