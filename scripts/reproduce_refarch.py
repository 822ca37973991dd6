#!/usr/bin/env python3
"""The reference architecture's §V-B table (seed 002) from a finished `cellctl sweep
sweeps/refarch.toml` folder: for each of the 3 x 3 configurations (T2 task sorting x R5
allocation), the mean over seeds and the spread (min-max) of TRT, JMS, NJSL and JWT, and of the
time per call of the two stages; then each of the paper's findings, checked against those
numbers (held, or not, with the figures).

    .venv/bin/python scripts/reproduce_refarch.py results/refarch --md docs/results/refarch-table.md
"""
from __future__ import annotations

import argparse
import math
import statistics
from pathlib import Path

from cellbed.experiment.report.summary import summarize
from cellbed.experiment.results.writer import load_run
from cellbed.experiment.sweep.report import load_sweep

ORDERS = ("RANDOM", "FIFO", "SRTF")
ALLOCS = ("FIRSTFIT", "BESTFIT", "WORSTFIT")
METRICS = (("trt_mean_s", "TRT mean (s)"), ("trt_p95_s", "TRT p95 (s)"), ("jms_mean_s", "JMS mean (s)"),
           ("njsl_mean", "NJSL mean"), ("jwt_mean_s", "JWT mean (s)"))
STAGES = (("task_order", "T2 µs/call"), ("allocation", "R5 µs/call"))


def _name(v: str) -> str:
    """refarch.srtf -> SRTF, .../allocation.py:best_fit -> BESTFIT."""
    tail = v.rsplit(":", 1)[-1].rsplit(".", 1)[-1]
    return tail.replace("_", "").replace("order", "").upper()


def collect(root: Path) -> dict[tuple[str, str], dict[str, list[float]]]:
    data = load_sweep(root)
    out: dict[tuple[str, str], dict[str, list[float]]] = {}
    for r in data["runs"]:
        g = r["grid"]
        key = (_name(g["policy.task_order"]), _name(g["policy.allocation"]))
        try:
            s = summarize(load_run(root / r["key"]))
        except Exception as e:          # an incomplete run: say which, and go on
            print(f"skipping {r['key']}: {e}")
            continue
        per = out.setdefault(key, {})
        for m, _ in METRICS:
            per.setdefault(m, []).append(s.jobs.get(m, math.nan))
        for st, _ in STAGES:
            per.setdefault(st, []).append(s.stage_us.get(st, math.nan))
        per.setdefault("seeds", []).append(r["seed"])
    return out


def cell(xs: list[float], fmt: str = ".1f") -> str:
    xs = [x for x in xs if not math.isnan(x)]
    if not xs:
        return "n/a"
    m = statistics.mean(xs)
    return f"{m:{fmt}} ({min(xs):{fmt}}–{max(xs):{fmt}})" if len(xs) > 1 else f"{m:{fmt}}"


def mean(res, key, m) -> float:
    xs = [x for x in res[key][m] if not math.isnan(x)]
    return statistics.mean(xs) if xs else math.nan


def findings(res) -> list[tuple[str, str, bool, str]]:
    """(the paper's finding, what we measured, held?, the numbers)."""
    keys = [(o, a) for o in ORDERS for a in ALLOCS if (o, a) in res]
    out = []
    trt = {k: mean(res, k, "trt_mean_s") for k in keys}
    best = min(trt, key=trt.get)
    out.append(("SRTF gives the best mean TRT", f"best mean TRT: {best[0]}-{best[1]}", best[0] == "SRTF",
                ", ".join(f"{o}-{a} {trt[(o, a)]:.1f} s" for o, a in keys)))
    by_order = {o: statistics.mean([trt[(o, a)] for a in ALLOCS if (o, a) in trt]) for o in ORDERS}
    by_alloc = {a: statistics.mean([trt[(o, a)] for o in ORDERS if (o, a) in trt]) for a in ALLOCS}
    so, sa = max(by_order.values()) - min(by_order.values()), max(by_alloc.values()) - min(by_alloc.values())
    out.append(("allocation matters less than sorting", f"spread of mean TRT over T2 {so:.1f} s, over R5 {sa:.1f} s",
                sa < so, "by T2: " + ", ".join(f"{k} {v:.1f}" for k, v in by_order.items())
                + "; by R5: " + ", ".join(f"{k} {v:.1f}" for k, v in by_alloc.items())))
    for metric, label in (("jms_mean_s", "JMS"), ("njsl_mean", "NJSL")):
        v = {k: mean(res, k, metric) for k in keys}
        b = min(v, key=v.get)
        out.append((f"SRTF-BESTFIT gives the best {label}", f"best {label}: {b[0]}-{b[1]}", b == ("SRTF", "BESTFIT"),
                    ", ".join(f"{o}-{a} {v[(o, a)]:.2f}" for o, a in keys)))
    jms = {o: statistics.mean([mean(res, (o, a), "jms_mean_s") for a in ALLOCS if (o, a) in res]) for o in ORDERS}
    out.append(("FIFO gives a better JMS than RANDOM", f"mean JMS: FIFO {jms['FIFO']:.1f} s, RANDOM {jms['RANDOM']:.1f} s",
                jms["FIFO"] < jms["RANDOM"], ""))
    jwt = {k: mean(res, k, "jwt_mean_s") for k in keys}
    b = min(jwt, key=jwt.get)
    out.append(("FIFO-BESTFIT gives the best JWT", f"best JWT: {b[0]}-{b[1]}", b == ("FIFO", "BESTFIT"),
                ", ".join(f"{o}-{a} {jwt[(o, a)]:.1f} s" for o, a in keys)))
    return out


def markdown(res) -> str:
    keys = [(o, a) for o in ORDERS for a in ALLOCS if (o, a) in res]
    seeds = sorted({s for k in keys for s in res[k]["seeds"]})
    head = ["configuration", *(lbl for _, lbl in METRICS), *(lbl for _, lbl in STAGES)]
    lines = [f"Mean over {len(seeds)} seeds ({', '.join(map(str, seeds))}), min–max in brackets.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for k in keys:
        cells = [cell(res[k][m], ".2f" if m == "njsl_mean" else ".1f") for m, _ in METRICS]
        cells += [cell(res[k][st], ".1f") for st, _ in STAGES]
        lines.append(f"| {k[0]}-{k[1]} | " + " | ".join(cells) + " |")
    lines += ["", "| the paper's finding | ours | held | numbers |", "|---|---|---|---|"]
    for f, ours, held, nums in findings(res):
        lines.append(f"| {f} | {ours} | {'yes' if held else '**no**'} | {nums} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweep", type=Path)
    ap.add_argument("--md", type=Path, help="write the table here too")
    args = ap.parse_args()
    text = markdown(collect(args.sweep))
    print(text)
    if args.md:
        args.md.write_text(text)


if __name__ == "__main__":
    main()
