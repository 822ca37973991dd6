"""The guest overhead of a real cell, fitted from its per-VM samples (``vms.csv``): what the
model twin needs to see the hosts the real cell's daemons see (pure).

A real TCG guest costs its host more than its workload program asks for: QEMU's own resident
memory (firmware, the kernel and initramfs, device state, the TCG translation cache) and CPU (the
emulator's timer and I/O threads, translation). The daemon measures both per VM (``rss_mib``,
the domain's ``balloon.rss``; ``cpu_used_cores``, from cpu-time deltas), and the host's use in
every tick row is their sum. The fit:

* **CPU**: least squares of ``cpu_used_cores = base + gain × target`` over samples of booted,
  running VMs (``target = vcpus × cpu_load``, what SetWorkload asked); when the targets hardly
  vary (sd < ``MIN_SPREAD_CORES``) the gain is not identifiable: gain 1, base the median excess;
* **memory**: the same for ``rss_mib = base + gain × mem_mib`` over guests that never moved (the
  guest's memory: under TCG its QEMU soon holds all of it, whatever the working set); the base of
  guests that did move, the median of ``rss − gain × mem`` over their samples after the move (a
  migration sends only non-zero pages: the destination's QEMU holds ~50 MiB less);
* **CPU noise**: the sd of the CPU residuals (TCG's jitter in the cpu-time deltas: it is what
  crosses a host's overload threshold between usage records);
* **boot**: the median of the VMs' ``boot_to_workload_s``; the CPU while booting, the median of the
  first cpu-time delta after the boot (a sample younger than boot + one period: it covers mostly
  boot time); none such: the boot costs no more than the workload.

A sample is *booted* once the VM is older than its boot plus one sample period (its first
cpu-time delta after boot covers only booted time); a guest that migrated in has no age on its new
host (the destination does not know when it was created), and counts as booted.
"""
from __future__ import annotations

import math
import statistics
from typing import Iterable, Mapping

from cellbed.domain.overhead import GuestOverhead

MIN_SPREAD_CORES = 0.02
MIN_SPREAD_MIB = 4.0
MIN_SAMPLES = 3


def _linear(xs: list[float], ys: list[float], min_spread: float) -> tuple[float, float]:
    """(base, gain) of y = base + gain·x, both ≥ 0; gain 1 when x hardly varies."""
    if len(xs) < MIN_SAMPLES:
        raise ValueError(f"{len(xs)} samples: at least {MIN_SAMPLES} are needed")
    if statistics.pstdev(xs) < min_spread:
        return max(0.0, statistics.median(y - x for x, y in zip(xs, ys))), 1.0
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    gain = max(0.0, sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx)
    base = my - gain * mx
    if base < 0:                       # through the origin instead
        gain = max(0.0, sum(x * y for x, y in zip(xs, ys)) / max(1e-12, sum(x * x for x in xs)))
        base = 0.0
    return base, gain


def boot_times(rows: Iterable[Mapping[str, str]]) -> dict[str, float]:
    """Each VM's boot-to-workload time, from the rows of the host it booted on (a destination does
    not boot the guests it receives: its rows say 0)."""
    out: dict[str, float] = {}
    for r in rows:
        b = float(r["boot_s"] or "nan")
        if math.isfinite(b) and b > 0:
            out[r["vm"]] = b
    return out


def booted(rows: Iterable[Mapping[str, str]], period_s: float) -> list[Mapping[str, str]]:
    """The samples of running VMs older than their boot plus one sample period."""
    rows = list(rows)
    boots = boot_times(rows)
    return [r for r in rows if r["state"] == "running" and r["vm"] in boots
            and not float(r["age_s"]) < boots[r["vm"]] + period_s]     # NaN: it migrated in, booted long ago


def moved_flags(rows: list[Mapping[str, str]]) -> list[bool]:
    """Per row: has its VM changed hosts by then (in the rows' time order)?"""
    order = sorted(range(len(rows)), key=lambda i: float(rows[i]["t_s"]))
    host: dict[str, str] = {}
    moved: set[str] = set()
    out = [False] * len(rows)
    for i in order:
        r = rows[i]
        if host.get(r["vm"], r["host"]) != r["host"]:
            moved.add(r["vm"])
        host[r["vm"]] = r["host"]
        out[i] = r["vm"] in moved
    return out


def fit(rows: Iterable[Mapping[str, str]], period_s: float) -> tuple[GuestOverhead, dict]:
    """The GuestOverhead of the samples *rows* (``vms.csv`` rows as strings), and what the fit
    used (counts, spreads, residual medians) for the report. ValueError if too few samples."""
    rows = list(rows)
    flags = dict(zip(map(id, rows), moved_flags(rows)))
    good = booted(rows, period_s)
    tx = [float(r["vcpus"]) * float(r["cpu_load"]) for r in good]
    ty = [float(r["cpu_used_cores"]) for r in good]
    stay = [r for r in good if not flags[id(r)]] or good
    mx = [float(r["mem_mib"]) for r in stay]
    my = [float(r["rss_mib"]) for r in stay]
    cb, cg = _linear(tx, ty, MIN_SPREAD_CORES)
    mb, mg = _linear(mx, my, MIN_SPREAD_MIB)
    gone = [float(r["rss_mib"]) - mg * float(r["mem_mib"]) for r in good if flags[id(r)]]
    moved_base = round(statistics.median(gone), 2) if gone else None
    noise = statistics.pstdev([y - (cb + cg * x) for x, y in zip(tx, ty)])
    boots = boot_times(rows)
    boot = statistics.median(boots.values()) if boots else 0.0
    first = [float(r["cpu_used_cores"]) for r in rows if r["state"] == "running" and r["vm"] in boots
             and not flags[id(r)] and boots[r["vm"]] <= float(r["age_s"]) < boots[r["vm"]] + period_s]
    boot_cpu = statistics.median(first) if first else 0.0
    g = GuestOverhead(cpu_base_cores=round(cb, 4), cpu_gain=round(cg, 4), mem_base_mib=round(mb, 2),
                      mem_gain=round(mg, 4), boot_s=round(boot, 2), boot_cpu_cores=round(boot_cpu, 4),
                      moved_mem_base_mib=moved_base, cpu_noise_sd=round(noise, 4),
                      host_cpu_cap=True).validate()
    info = {"samples": len(rows), "booted_samples": len(good), "vms": len({r["vm"] for r in rows}),
            "boots": len(boots), "boot_cpu_samples": len(first), "cpu_target_sd": round(statistics.pstdev(tx), 4) if tx else None,
            "mem_sd_mib": round(statistics.pstdev(mx), 2) if mx else None,
            "moved_samples": len(gone),
            "cpu_residual_median": round(statistics.median(abs(y - g.cpu(x)) for x, y in zip(tx, ty)), 4),
            "mem_residual_median_mib": round(statistics.median(abs(y - g.mem(x)) for x, y in zip(mx, my)), 2)}
    return g, info


def fit_link(records: Iterable[Mapping], setup_ms: float = 0.0) -> tuple[float | None, dict]:
    """The migration link's effective rate on the real cell (MiB/s): the median over its successful
    migrations (the node daemons' migrations.jsonl records) of the bytes sent over the time the cost
    model has to send them in, libvirt's time less the model's fixed *setup_ms* (the calibration's
    ramp-up term), so that the model's time of a median migration is the real one. On a single-box
    cell QEMU's migration thread runs inside the source host's CPU quota, beside its guests, so the
    rate depends on the hosts' size and load, not only on the link: a calibration fitted on other
    hosts cannot know it. (libvirt's ``memoryBps`` is the last iteration's rate, not the
    transfer's.) None without such records."""
    rates = []
    for r in records:
        if r.get("outcome") != "MIGRATION_OUTCOME_SUCCEEDED":
            continue
        sent = float(r.get("memoryProcessedBytes") or 0) / 2**20
        ms = float(r.get("timeElapsedMs") or 0) - max(float(r.get("setupTimeMs") or 0), setup_ms)
        if sent > 0 and ms > 0:
            rates.append(sent / (ms / 1000.0))
    if not rates:
        return None, {"migrations": 0}
    return round(statistics.median(rates), 3), {"migrations": len(rates), "min_mib_s": round(min(rates), 2),
                                                 "max_mib_s": round(max(rates), 2), "setup_ms": setup_ms}
