"""`cellctl ui` (issue 30): a read-only web app over a live cell and over results folders.

* :mod:`~cellbed.ui.auth` — the URL's token (as Jupyter's), checked on every request, loopback too;
* :mod:`~cellbed.ui.listen` — where it listens: loopback in plaintext, any other address only with TLS;
* :mod:`~cellbed.ui.live` — the live cell: each node's WatchEvents stream and its state, pushed to
  the page by :mod:`~cellbed.ui.hub` as server-sent events; :mod:`~cellbed.ui.live_agents` reads the
  SAN negotiations, the broker's cache and Megha's GMs and LMs;
* :mod:`~cellbed.ui.runs` and :mod:`~cellbed.ui.replay` — results folders: aggregates first, hosts
  on demand;
* :mod:`~cellbed.ui.app` — the aiohttp application; :mod:`~cellbed.ui.serve` runs it.

It talks to the agents as the cell's admin over the same mTLS gRPC as cellctl, and calls only
read methods (Get*, List*, WatchEvents): it starts, stops and migrates nothing.
"""
