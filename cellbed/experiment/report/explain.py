"""One explained decision (decisions.jsonl, DESIGN §17) as text: what ``cellctl explain`` and
``cellctl san explain`` print."""
from __future__ import annotations

import json
from pathlib import Path

from cellbed.domain.errors import InvalidArgument, NotFound
from cellbed.experiment.markdown import md_table
from cellbed.experiment.results.files import DECISIONS


def _num(x, fmt: str = ".3f") -> str:
    return "—" if x is None else format(x, fmt)


def _pair(v) -> str:
    return "—" if not v else f"{v[0]:.3f} cores / {v[1]:.0f} MiB"


def find(results: str | Path, decision_id: str) -> dict:
    """The decision *decision_id* of a results folder; NotFound (one line) if it has none."""
    p = Path(results)
    f = p / DECISIONS if p.is_dir() else p
    if not f.exists():
        raise InvalidArgument(f"{results}: no {DECISIONS} (not a results folder, or a run from before explanations)")
    n, first = 0, []
    with open(f, encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                d = json.loads(line)
            except json.JSONDecodeError:
                continue                      # a torn last line
            n += 1
            if d.get("id") == decision_id:
                return d
            if len(first) < 3:
                first.append(str(d.get("id")))
    raise NotFound(f"no decision {decision_id!r} in {f} ({n} explained; e.g. {', '.join(first) or 'none'})")


def text(d: dict) -> str:
    head = (f"decision {d['id']} ({d['kind']}) at {d.get('agent', '?')}: "
            f"view age {_num(d.get('view_age_s'), '.1f')} s (oldest {_num(d.get('view_oldest_s'), '.1f')} s), "
            f"{d.get('messages', 0)} messages; outcome {d.get('outcome', '?')}"
            + (f", chosen {d['chosen']}" if d.get("chosen") else ""))
    if d["kind"] == "san":
        lines = [head, f"task {d['vm']} (used {_pair(d['task']['used'])}): {d.get('trigger', '')}", "",
                 f"broker {d.get('broker', '?')}: {d.get('matched', 0)} matching of {d.get('scanned', 0)} scanned", "",
                 md_table(["candidate", "score", "forced", "report age (s)", "available"],
                          [(c["host"], _num(c["score"]), c["forced"], _num(c["report_age_s"], ".1f"),
                            _pair(c.get("available"))) for c in d["candidates"]]), "",
                 md_table(["target", "answer", "numbers / why"],
                          [(a["host"], "accepts" if a["accepted"] else f"refuses ({a.get('reason', '')})",
                            f"used {_pair(a['used'])} of {_pair(a['capacity'])}" if a["accepted"] else a.get("detail", ""))
                           for a in d["answers"]]), "",
                 "order (step 4): " + (", ".join(f"{o['host']} ({_num(o['score'])}{', forced' if o['forced'] else ''})"
                                                 for o in d["order"]) or "—"),
                 "tried (step 5): " + (", ".join(f"{t['host']} {t['result']}" for t in d["tried"]) or "—")]
        return "\n".join(lines)
    lines = [head, f"task {d['task']} of {d.get('user', '')}: requests {_pair(d.get('request'))}", ""]
    for m in d.get("matches", []):
        lines += [f"LM {m['lm']} (view age {_num(m.get('view_age_s'), '.1f')} s): {m['offered']} host(s) offered, "
                  f"chosen {m.get('chosen') or '—'}",
                  md_table(["host", "free on the view"], [(h["host"], _pair(h["free"])) for h in m["hosts"]]), ""]
    lines.append(md_table(["LM", "host", "request", "verdict", "detail"],
                          [(v["lm"], v["host"], v["kind"], v["result"], v.get("detail", "")) for v in d["verdicts"]]))
    return "\n".join(lines)
