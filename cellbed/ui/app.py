"""The aiohttp application: the page, its static files and chart library, the live cell's
server-sent events, and the results folders' JSON. Every route is behind the token (auth.py) and
every response carries headers that keep the page to its own origin (no CDN, no inline script)."""
from __future__ import annotations

import math
from typing import Callable

from aiohttp import web

from cellbed.domain import errors
from cellbed.ui import assets, auth
from cellbed.ui.hub import dumps
from cellbed.ui.live import LiveCell
from cellbed.ui.runs import MAX_ROWS, RunSet

CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'")
DECISION_FIELDS = ("kind", "vm", "san_id", "migration", "t_s")
"""What the decisions list shows of each decision (the page links a migration to a decision by these)."""
STATUS = {errors.NotFound: 404, errors.InvalidArgument: 400, errors.FailedPrecondition: 409}


@web.middleware
async def headers(request: web.Request, handler) -> web.StreamResponse:
    try:
        resp = await handler(request)
    except errors.CellbedError as e:
        code = next((c for k, c in STATUS.items() if isinstance(e, k)), 500)
        resp = web.json_response({"error": str(e)}, status=code, dumps=dumps)
    resp.headers.setdefault("Content-Security-Policy", CSP)
    resp.headers["X-Content-Type-Options"] = "nosniff"
    resp.headers["Referrer-Policy"] = "no-referrer"
    resp.headers.setdefault("Cache-Control", "no-store")
    return resp


def json(data) -> web.Response:
    return web.json_response(data, dumps=dumps)


def number(request: web.Request, name: str, default: float | None = None) -> float:
    v = request.query.get(name)
    if v is None:
        if default is None:
            raise errors.InvalidArgument(f"{name} is required")
        return default
    try:
        x = float(v)
    except ValueError:
        x = math.nan
    if not math.isfinite(x):
        raise errors.InvalidArgument(f"{name}={v!r}: must be a finite number")
    return x


def run_id(request: web.Request) -> int:
    try:
        return int(request.match_info["run"])
    except ValueError:
        raise errors.InvalidArgument(f"run {request.match_info['run']!r}: must be an integer") from None


def build(token: str, port_of: Callable[[], int], *, live: LiveCell | None, runs: RunSet, secure: bool,
          cell: str = "") -> web.Application:
    app = web.Application(middlewares=[headers, auth.middleware(token, port_of, secure)])

    async def index(request):
        return web.FileResponse(assets.STATIC / "index.html")

    async def lib(request):
        p = assets.path(request.match_info["name"])
        if p is None or not p.is_file():
            raise web.HTTPNotFound(text=f"{request.match_info['name']}: not installed (run ./cellbed.sh setup)\n")
        return web.FileResponse(p, headers={"Cache-Control": "private, max-age=86400"})

    async def config(request):
        return json({"cell": cell if live is not None else None, "live": live is not None,
                     "assets_missing": assets.missing(), **runs.index()})

    async def live_events(request):
        if live is None:
            raise errors.NotFound("no live cell: start `cellctl ui` with --cell NAME of a cell that is up")
        return await live.hub.stream(request)

    async def live_snapshot(request):
        if live is None:
            raise errors.NotFound("no live cell")
        return json(live.snapshot())

    async def summary(request):
        return json(runs.get(run_id(request)).summary())

    async def distributions(request):
        return json(await runs.get(run_id(request)).distributions())

    async def hosts(request):
        return json(await runs.get(run_id(request)).hosts_at(number(request, "t"), request.query.get("names") == "1"))

    async def host(request):
        name = request.query.get("name", "")
        return json(await runs.get(run_id(request)).host(name, number(request, "t")))

    async def migrations(request):
        limit = int(number(request, "limit", 100))
        if not 1 <= limit <= MAX_ROWS:
            raise errors.InvalidArgument(f"limit={limit}: allowed 1..{MAX_ROWS}")
        return json(await runs.get(run_id(request)).migrations(number(request, "t0"), number(request, "t1"), limit))

    def optional(name: str, fn):
        async def handler(request):
            r = runs.get(run_id(request))
            if not r.has(name):
                raise errors.NotFound(f"run {r.run.name} has no {name}")
            return json(fn(r, request))
        return handler

    def decision(r, request):
        d = r.decisions()
        key = request.query.get("id")
        if key is None:
            return {"count": len(d), "decisions": [{"id": k, **{f: v[f] for f in DECISION_FIELDS if f in v}}
                                                   for k, v in list(d.items())[:MAX_ROWS]]}
        if key not in d:
            raise errors.NotFound(f"decision {key!r} is not in {r.run.name}'s decisions.jsonl")
        return d[key]

    app.router.add_get("/", index)
    app.router.add_static("/static/", assets.STATIC, append_version=False)
    app.router.add_get("/assets/{name}", lib)
    app.router.add_get("/api/config", config)
    app.router.add_get("/api/live/events", live_events)
    app.router.add_get("/api/live/snapshot", live_snapshot)
    app.router.add_get("/api/runs/{run}/summary", summary)
    app.router.add_get("/api/runs/{run}/distributions", distributions)
    app.router.add_get("/api/runs/{run}/hosts", hosts)
    app.router.add_get("/api/runs/{run}/host", host)
    app.router.add_get("/api/runs/{run}/migrations", migrations)
    app.router.add_get("/api/runs/{run}/stages", optional("stages.csv", lambda r, q: r.stages()))
    app.router.add_get("/api/runs/{run}/san", optional("san.csv", lambda r, q: r.san()))
    app.router.add_get("/api/runs/{run}/decisions", optional("decisions.jsonl", decision))
    return app
