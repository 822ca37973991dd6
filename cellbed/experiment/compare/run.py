"""``cellctl compare SCENARIO``: the same scenario on a real cell and on its model twin, side by
side (issue 14 part 2).

1. The real run: ``cellctl run`` of the scenario (``cell.kind = "real"``) into ``OUT/real``, or an
   existing real run's folder (``--real-from``), whose scenario must be the same.
2. The real cell's environment, fitted (:mod:`cellbed.experiment.twin.fit`) from the real run, or
   from another real run (``--fit-from``: then the comparison is out of sample): the guest overhead
   from its per-VM samples (``vms.csv``), the migration link's rate from its migration records.
   ``--no-fit``: neither (the twin's guests cost exactly their workload and boot at once; the link
   is the calibration's).
3. The model twin: the same scenario as ``cell.kind = "twin"`` (:mod:`cellbed.experiment.twin.driver`)
   into ``OUT/model``.
4. ``OUT/compare.md`` (the table, per-window table, SAN timing, the fitted overhead),
   ``compare.json``, ``compare.csv`` and the overlay plots ``compare-*.png``.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from cellbed.domain import errors
from cellbed.domain.overhead import GuestOverhead
from cellbed.experiment.compare import plots as compare_plots, table as ct
from cellbed.experiment.twin import fit as twin_fit
from cellbed.experiment.results.files import SANS, VMS
from cellbed.experiment.results.reader import Run, load_run
from cellbed.experiment.runner import driver_for, run_scenario
from cellbed.experiment.scenario.file import Scenario


@dataclasses.dataclass
class Comparison:
    out: Path
    real: Run
    model: Run
    guest: GuestOverhead
    fit_info: dict
    rows: list[ct.Row]
    windows: list
    san: dict

    @property
    def over(self) -> list[ct.Row]:
        return [r for r in self.rows if r.over]


def twin_of(sc: Scenario) -> Scenario:
    return dataclasses.replace(sc, cell=dataclasses.replace(sc.cell, kind="twin"))


def _same_scenario(sc: Scenario, run: Run) -> None:
    want = dict(sc.as_manifest())
    want.pop("stages", None)
    want = json.loads(json.dumps(want, default=str))
    got = dict(run.manifest.get("scenario") or {})
    for d in (want, got):        # the migration cost model is the twin's; a real cell's migrations are real
        d.pop("migration", None)
    if run.completed.get("driver") != "real":
        raise errors.FailedPrecondition(f"--real-from {run.path}: driver={run.completed.get('driver')!r}, "
                                        "not a real-cell run")
    if got != want:
        diff = sorted(k for k in set(want) | set(got) if got.get(k) != want.get(k))
        raise errors.FailedPrecondition(f"--real-from {run.path}: its scenario differs from this one in "
                                        f"{', '.join(diff) or 'its values'}; compare the same scenario")


def fit_guest(real: Run, sc: Scenario) -> tuple[GuestOverhead, dict]:
    path = real.path / VMS
    if not path.is_file():
        raise errors.FailedPrecondition(f"{real.path}: no {VMS} (a real run before per-VM samples); rerun it, "
                                        "or give --no-fit")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    try:
        return twin_fit.fit(rows, sc.policy.san.monitor_period_s / sc.workload.time_compression)
    except (ValueError, KeyError, TypeError) as e:     # too few samples, or not a vms.csv
        raise errors.FailedPrecondition(f"{path}: cannot fit the guest overhead: {type(e).__name__}: {e}; "
                                        "give --no-fit") from None


def migration_records(run: Run) -> list[dict]:
    """The node daemons' migration records the real run kept (cell-logs/<host>/node/migrations.jsonl)."""
    out = []
    for f in sorted((run.path / "cell-logs").glob("*/node/migrations.jsonl")):
        for line in f.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue                 # a torn last line
            if isinstance(rec, dict):
                out.append(rec)
    return out


def san_timing(run: Run) -> dict[str, Any]:
    """Overload detected → migration started (the SAN's process step), over the real run's rounds."""
    path = run.path / SANS
    if not path.is_file():
        return {"rounds": 0}
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    try:
        return _san_timing(rows)
    except (ValueError, KeyError, TypeError) as e:
        raise errors.FailedPrecondition(f"{path}: not a san.csv: {type(e).__name__}: {e}") from None


def _san_timing(rows: list[dict]) -> dict[str, Any]:
    started = np.array([float(r["process_s"]) for r in rows if r["process_s"] not in ("", "nan")])
    out: dict[str, Any] = {"rounds": len(rows), "rounds_started_migration": int(started.size),
                           "states": {s: sum(1 for r in rows if r["state"] == s) for s in sorted({r["state"] for r in rows})}}
    for name, col in (("overload_to_migration_ms", started),
                      ("overload_to_candidates_ms", np.array([float(r["candidates_s"]) for r in rows
                                                              if r["candidates_s"] not in ("", "nan")]))):
        if col.size:
            out[name] = {"p50": round(float(np.quantile(col, 0.5)) * 1000, 1),
                         "p99": round(float(np.quantile(col, 0.99)) * 1000, 1), "n": int(col.size)}
    return out


def compare(sc: Scenario, out: str | Path, *, real_from: str | Path | None = None, fit: bool = True,
            fit_from: str | Path | None = None,
            progress: TextIO | None = sys.stderr, overwrite: bool = False) -> Comparison:
    if sc.cell.kind != "real":
        raise errors.InvalidArgument(f"cell.kind={sc.cell.kind!r}: cellctl compare takes a real-cell scenario "
                                     "(cell.kind = 'real'); its model twin is made from it")
    twin_sc = twin_of(sc)
    twin_probe = driver_for(twin_sc)            # refuses what the twin cannot run before the real run starts
    out = Path(out)
    if real_from is not None:
        real = load_run(real_from)
        _same_scenario(sc, real)
    else:
        real = load_run(run_scenario(sc, out / "real", progress=progress, overwrite=overwrite).path)
    src = load_run(fit_from) if fit_from is not None else real
    if fit:
        guest, info = fit_guest(src, sc)
        try:
            link, info["link"] = twin_fit.fit_link(migration_records(src), twin_probe.params.cost.setup_ms)
        except (ValueError, TypeError) as e:
            raise errors.FailedPrecondition(f"{src.path}/cell-logs: a migration record that is not one: "
                                            f"{type(e).__name__}: {e}; give --no-fit") from None
        info["from"] = str(src.path)
        drv = twin_probe.fit(guest, link)
    else:
        guest, info, drv = GuestOverhead(), {"fitted": False}, twin_probe
    model = load_run(run_scenario(twin_sc, out / "model", progress=progress, overwrite=True, driver=drv).path)
    c = Comparison(out, real, model, guest, info, ct.rows(ct.run_metrics(real), ct.run_metrics(model)),
                   ct.window_rows(real, model), san_timing(real))
    write(c)
    return c


def write(c: Comparison) -> None:
    body = {"real": str(c.real.path), "model": str(c.model.path), "tolerance": ct.TOLERANCE,
            "guest_overhead": dataclasses.asdict(c.guest), "fit": c.fit_info, "san_timing": c.san,
            "metrics": [r.as_dict() for r in c.rows],
            "windows": [{"window": w, "metrics": [r.as_dict() for r in rs]} for w, rs in c.windows]}
    (c.out / "compare.json").write_text(json.dumps(body, indent=1, default=_num) + "\n")
    with open(c.out / "compare.csv", "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(("metric", "unit", "real", "model", "diff", "rel"))
        for r in c.rows:
            w.writerow((r.metric, r.unit, _num(r.real), _num(r.model), _num(r.diff), _num(r.rel)))
    compare_plots.plot_all(c.real, c.model, c.out)
    (c.out / "compare.md").write_text(markdown(c))


def _num(x: Any) -> Any:
    if isinstance(x, float):
        return None if not math.isfinite(x) else round(x, 6)
    return x


def markdown(c: Comparison) -> str:
    sc = c.real.manifest.get("scenario", {})
    cell = sc.get("cell", {})
    g = c.guest
    jobs = c.real.manifest.get("extra", {}).get("real_cell", {}).get("jobs")
    hosts = (", ".join(f"{h[0]:g} cores / {h[1]} MiB" for h in jobs["hosts"]) if jobs else
             f"{cell.get('host_cpu_cores')} cores / {cell.get('host_mem_mib')} MiB each")
    lines = [f"# Real cell vs model twin: {c.real.name}", "",
             f"{cell.get('hosts')} hosts ({hosts}), "
             f"{c.real.completed.get('simulated_s', 0) / 60:.0f} simulated min at time compression "
             f"{sc.get('workload', {}).get('time_compression')}, seed {sc.get('run', {}).get('seed')}. "
             f"Real: `{c.real.path}`; model twin: `{c.model.path}`.", "",
             f"The twin's guests (fitted from `{c.fit_info.get('from', '—')}`): CPU {g.cpu_base_cores:g} + "
             f"{g.cpu_gain:g} × load cores, memory {g.mem_base_mib:g} + {g.mem_gain:g} × guest memory MiB, boot "
             f"{g.boot_s:g} s at {g.boot_cpu_cores:g} cores; migration link {c.model.manifest['extra']['twin']['link_mib_s']} "
             f"MiB/s (None: the calibration's). Fit: `{json.dumps(c.fit_info)}`.", "",
             f"| metric | unit | real | model | model − real | relative |", "|---|---|---|---|---|---|"]
    for r in c.rows:
        lines.append(f"| {r.metric} | {r.unit} | {ct.fmt(r.real)} | {ct.fmt(r.model)} | {ct.fmt(r.diff)} | "
                     f"{ct.fmt_rel(r)} |")
    lines += ["", f"⚠: beyond ±{ct.TOLERANCE * 100:.0f} %.", "", "## Over time", "",
              "| window | " + " | ".join(f"{m} (real / model)" for m in ct.WINDOW_METRICS) + " |",
              "|---" * (len(ct.WINDOW_METRICS) + 1) + "|"]
    for label, rs in c.windows:
        lines.append(f"| {label} | " + " | ".join(f"{ct.fmt(r.real)} / {ct.fmt(r.model)}" for r in rs) + " |")
    lines += ["", "## SAN: overload detected → migration started (real cell)", "", f"`{json.dumps(c.san)}`", "",
              "Plots: " + ", ".join(f"[{p}]({p})" for p in compare_plots.PLOTS), ""]
    return "\n".join(lines)
