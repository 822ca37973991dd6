"""Running the UI: bind, print the URL with its token, serve until interrupted.

:class:`UiServer` is what `cellctl ui` runs and what the tests and benchmarks start in-process."""
from __future__ import annotations

import asyncio
import os
import ssl
from dataclasses import dataclass, field

from aiohttp import web

from cellbed.cell import cell_pki
from cellbed.cell.record import load_state
from cellbed.domain import errors
from cellbed.ui import app as appmod, assets, auth
from cellbed.ui.listen import Listen, ca_file, parse_listen, tls_for
from cellbed.ui.live import LiveCell
from cellbed.ui.runs import RunSet

TOKEN_ENV = "CELLBED_UI_TOKEN"


@dataclass
class Options:
    results: list[str] = field(default_factory=list)
    listen: str = "127.0.0.1"
    tls_cert: str = ""
    tls_key: str = ""
    cell: str = ""
    state_root: str = ""
    live: bool = True
    refresh_s: float = 2.0
    token: str = ""


class UiServer:
    def __init__(self, opts: Options, *, live: LiveCell | None = None, cell_state: dict | None = None) -> None:
        """*live*: a LiveCell to serve instead of the one built from the cell's state (tests)."""
        self.opts = opts
        self.where: Listen = parse_listen(opts.listen)
        self.state = cell_state if cell_state is not None else (
            load_state(opts.cell, opts.state_root) if opts.cell and opts.live else None)
        self.tls: ssl.SSLContext | None = tls_for(self.where, opts.tls_cert, opts.tls_key, self.state)
        self.runs = RunSet.open(opts.results)
        self.live = live
        if self.live is None and self.state is not None:
            self.live = LiveCell.from_state(self.state, cell_pki.admin(self.state), refresh_s=opts.refresh_s)
        if self.live is None and not self.runs.runs:
            raise errors.NotFound(f"nothing to show: no cell {opts.cell!r} under {opts.state_root} and no RESULTS "
                                  "folder given (bring a cell up, or name results folders)")
        self.token = opts.token or os.environ.get(TOKEN_ENV) or auth.new_token()
        self.port = self.where.port
        self._runner: web.AppRunner | None = None
        self._warm: asyncio.Task | None = None

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{self.where.url_host}:{self.port}/?{auth.TOKEN_PARAM}={self.token}"

    async def start(self) -> str:
        app = appmod.build(self.token, lambda: self.port, live=self.live, runs=self.runs, secure=self.tls is not None,
                           cell=self.live.name if self.live else "")
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.where.host, self.where.port, ssl_context=self.tls)
        try:
            await site.start()
        except OSError as e:
            await self._runner.cleanup()
            raise errors.FailedPrecondition(f"--listen {self.where.host}:{self.where.port}: {e.strerror or e}") from None
        self.port = self._runner.addresses[0][1]
        if self.live is not None:
            await self.live.start()
        self._warm = asyncio.create_task(self.runs.warm(), name="ui-warm-runs")
        return self.url

    async def ready(self) -> None:
        """Until every results folder has been read (the background reading that start() began)."""
        if self._warm is not None:
            await asyncio.shield(self._warm)

    async def stop(self) -> None:
        if self._warm is not None:
            self._warm.cancel()
            await asyncio.gather(self._warm, return_exceptions=True)
        if self.live is not None:
            await self.live.stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def banner(self) -> str:
        lines = [f"cellctl ui: serving {'cell ' + self.live.name if self.live else 'no live cell'}"
                 + (f" and {len(self.runs.runs)} results folder(s)" if self.runs.runs else "")
                 + " (read-only; Ctrl-C stops it)"]
        if self.tls and ca_file(self.state):
            lines.append(f"  TLS with a certificate of the cell's CA: trust {ca_file(self.state)} in the browser")
        for m in assets.missing():
            lines.append(f"  warning: {m} is missing (run ./cellbed.sh setup): charts will not draw")
        lines.append(f"  open {self.url}")
        return "\n".join(lines)


async def serve(opts: Options) -> None:
    srv = UiServer(opts)
    await srv.start()
    print(srv.banner(), flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await srv.stop()


__all__ = ["Options", "UiServer", "serve"]
