"""Where the page's third-party assets are: the chart library (Apache ECharts), installed from npm
by `./cellbed.sh setup` into a git-ignored folder (build/ui-assets) at the version that
cellbed/ui/assets/package-lock.json pins. Nothing is fetched at run time: the page works offline."""
from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DIR = REPO / "build" / "ui-assets"
ENV = "CELLBED_UI_ASSETS"
FILES = {"echarts.js": Path("node_modules/echarts/dist/echarts.common.min.js")}
"""URL name under /assets/ -> path under the assets folder."""
STATIC = Path(__file__).resolve().parent / "static"


def folder() -> Path:
    return Path(os.environ.get(ENV) or DEFAULT_DIR)


def path(name: str) -> Path | None:
    rel = FILES.get(name)
    return folder() / rel if rel is not None else None


def missing() -> list[str]:
    return [str(folder() / rel) for rel in FILES.values() if not (folder() / rel).is_file()]
