"""cellctl ui: the read-only web app (cellbed/ui/)."""
from __future__ import annotations

from cellbed.ui.serve import Options, serve


async def cmd_ui(args) -> None:
    await serve(Options(results=list(args.results), listen=args.listen, tls_cert=args.tls_cert, tls_key=args.tls_key,
                        cell=args.cell, state_root=args.state_root, live=not args.no_live, refresh_s=args.refresh_s))
