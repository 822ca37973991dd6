"""The results folders a `cellctl ui` serves: each run's aggregate first (manifest and ticks.csv,
small at any cell size), then on demand its distributions, its hosts at a time t (replay.py), one
host's detail, its migrations in a window, and, where the folder has them, stages.csv (per-stage
timing), decisions.jsonl (the explanations of sampled decisions) and san.csv (a real cell's SAN
rounds). A `cellctl compare` folder (compare.json with real/ and model/) opens as its two runs and
their comparison. Heavy reads run in a worker thread, once per run (cached)."""
from __future__ import annotations

import asyncio
import csv
import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cellbed.domain import errors
from cellbed.experiment import Run, load_run, summarize
from cellbed.ui import replay

STAGES_CSV = "stages.csv"
DECISIONS = "decisions.jsonl"
SAN_CSV = "san.csv"
COMPARE_JSON = "compare.json"
ALLOC_COLS = ("task", "host", "start_s", "outcome", "total_ms", "framework_queue_ms", "processing_ms",
              "worker_queue_ms", "communication_ms")
MIG_COLS = ("t_s", "vm", "src", "dst", "outcome", "forced", "san_id", "time_ms", "downtime_ms", "bytes")
CDF_POINTS = 400
MAX_ROWS = 500


def cdf(x: np.ndarray, points: int = CDF_POINTS) -> list[list[float]]:
    """[[value, fraction], ...] of the finite values of *x*, at most *points* quantiles."""
    x = np.sort(x[np.isfinite(x)])
    if x.size == 0:
        return []
    q = np.linspace(0, 1, min(points, x.size))
    return [[float(v), float(p)] for v, p in zip(np.quantile(x, q), q)]


def columns(table: dict[str, np.ndarray]) -> dict[str, list]:
    return {k: v.tolist() for k, v in table.items()}


def rows_of(table: dict[str, np.ndarray], idx: np.ndarray) -> list[dict]:
    cols = {k: v[idx].tolist() for k, v in table.items()}
    return [dict(zip(cols, vals)) for vals in zip(*cols.values())] if cols else []


@dataclass
class RunEntry:
    id: int
    path: Path
    run: Run
    label: str
    _cache: dict[str, Any] = field(default_factory=dict)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def has(self, name: str) -> bool:
        return (self.path / name).is_file()

    async def cached(self, key: str, fn) -> Any:
        async with self._lock:
            if key not in self._cache:
                self._cache[key] = await asyncio.to_thread(fn)
            return self._cache[key]

    # --- aggregate first --------------------------------------------------------------------
    def summary(self) -> dict:
        m = self.run.manifest
        sc = m.get("scenario", {})
        return {"id": self.id, "label": self.label, "name": self.run.name, "path": str(self.path),
                "seed": m.get("seed"), "created_unix_s": m.get("created_unix_s"), "git_revision": m.get("git_revision"),
                "scenario": {k: sc.get(k) for k in ("cell", "policy", "run", "workload")}, "stages": m.get("stages", {}),
                "completed": self.run.completed, "ticks": columns(self.run.ticks),
                "files": {"vms": self.has(replay.VMS_CSV), "san": self.has(SAN_CSV), "stages": self.has(STAGES_CSV),
                          "decisions": self.has(DECISIONS)}}

    # --- on demand --------------------------------------------------------------------------
    def _tables(self) -> tuple[dict, dict]:
        return self.run.allocations(ALLOC_COLS), self.run.migrations(MIG_COLS)

    async def tables(self) -> tuple[dict, dict]:
        return await self.cached("tables", self._tables)

    async def distributions(self) -> dict:
        a, m = await self.tables()

        def compute() -> dict:
            placed = a["outcome"] == "placed"
            s = summarize(self.run, allocations=a, migrations=m)
            ok = m["outcome"] == "succeeded"
            return {"summary": dataclasses.asdict(s),
                    "alloc_cdf": {k: cdf(a[k][placed]) for k in ("total_ms", "framework_queue_ms", "processing_ms",
                                                                   "worker_queue_ms", "communication_ms")},
                    "migration_time_cdf": cdf(m["time_ms"][ok]), "downtime_cdf": cdf(m["downtime_ms"][ok]),
                    "outcomes": {str(k): int(v) for k, v in zip(*np.unique(m["outcome"], return_counts=True))}}
        return await self.cached("distributions", compute)

    async def replay(self) -> replay.Replay:
        if self.has(replay.VMS_CSV):
            return await self.cached("replay", lambda: replay.from_vms_csv(self.path / replay.VMS_CSV))
        a, m = await self.tables()
        nodes = int(self.run.ticks["nodes"].max()) if len(self.run.ticks["nodes"]) else 0
        return await self.cached("replay", lambda: replay.from_model(a, m, nodes))

    async def hosts_at(self, t: float, names: bool) -> dict:
        r = await self.replay()
        counts = await asyncio.to_thread(r.counts_at, t)
        out = {"t": t, "counts": counts.tolist(), "exact": r.exact, "note": r.note, "n": len(r.hosts),
               "max": int(counts.max()) if counts.size else 0}
        if names:
            out["hosts"] = r.hosts
        return out

    async def host(self, name: str, t: float) -> dict:
        r = await self.replay()
        if name not in r.index:
            raise errors.NotFound(f"host {name!r} is not in run {self.run.name}")
        _, m = await self.tables()
        vms = await asyncio.to_thread(r.vms_on, name, t)
        mine = np.nonzero((m["src"] == name) | (m["dst"] == name))[0]
        return {"host": name, "t": t, "vms": vms[:MAX_ROWS], "vm_count": len(vms), "exact": r.exact,
                "migrations": rows_of(m, mine[:MAX_ROWS]), "migration_count": int(mine.size)}

    async def migrations(self, t0: float, t1: float, limit: int) -> dict:
        _, m = await self.tables()
        end = m["t_s"] + np.nan_to_num(m["time_ms"], nan=0.0) / 1000.0
        sel = np.nonzero((end >= t0) & (m["t_s"] <= t1))[0]
        sel = sel[np.argsort(m["t_s"][sel], kind="stable")]
        return {"t0": t0, "t1": t1, "count": int(sel.size), "rows": rows_of(m, sel[:limit])}

    def stages(self) -> list[dict]:
        return _csv_rows(self.path / STAGES_CSV)

    def san(self) -> list[dict]:
        return _csv_rows(self.path / SAN_CSV)

    def decisions(self) -> dict[str, dict]:
        """decisions.jsonl (the explanations issue): one JSON object per sampled decision, by ``id``."""
        out: dict[str, dict] = {}
        with open(self.path / DECISIONS, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    try:
                        d = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    out[str(d.get("id", n))] = d
        return out


def _csv_rows(path: Path) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as f:
        return [{k: _num(v) for k, v in r.items()} for r in csv.DictReader(f)]


def _num(v: str) -> Any:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return v
    return x if math.isfinite(x) else None


class RunSet:
    """The folders named on the command line: runs, and comparisons (a compare folder's two runs)."""

    def __init__(self) -> None:
        self.runs: list[RunEntry] = []
        self.comparisons: list[dict] = []

    @classmethod
    def open(cls, paths: list[str]) -> "RunSet":
        rs = cls()
        for p in paths:
            rs.add(Path(p))
        return rs

    def add(self, p: Path) -> None:
        cj = p / COMPARE_JSON
        if cj.is_file() and (p / "real").is_dir() and (p / "model").is_dir():
            real, model = self._add_run(p / "real", f"{p.name}: real"), self._add_run(p / "model", f"{p.name}: model")
            try:
                body = json.loads(cj.read_text(encoding="utf-8"))
            except json.JSONDecodeError as e:
                raise errors.FailedPrecondition(f"{cj}: not valid JSON: {e}") from None
            self.comparisons.append({"id": len(self.comparisons), "name": p.name, "path": str(p),
                                     "runs": [real.id, model.id], "metrics": body.get("metrics", []),
                                     "tolerance": body.get("tolerance")})
        else:
            self._add_run(p, p.name)

    def _add_run(self, p: Path, label: str) -> RunEntry:
        e = RunEntry(len(self.runs), p, load_run(p), label)
        self.runs.append(e)
        return e

    async def warm(self) -> None:
        """Read each run's tables and build its replay now, one run at a time, so that the first
        page to ask for a run's hosts does not wait for them (a 12,500-node run's take seconds)."""
        for r in self.runs:
            try:
                await r.replay()
            except errors.CellbedError:
                continue                   # the page's request will say what is wrong with the folder

    def get(self, i: int) -> RunEntry:
        if not 0 <= i < len(self.runs):
            raise errors.NotFound(f"run {i}: this UI serves runs 0..{len(self.runs) - 1}")
        return self.runs[i]

    def index(self) -> dict:
        return {"runs": [{"id": r.id, "label": r.label, "name": r.run.name, "path": str(r.path),
                          "nodes": int(r.run.ticks["nodes"].max()) if len(r.run.ticks["nodes"]) else 0}
                         for r in self.runs], "comparisons": self.comparisons}
