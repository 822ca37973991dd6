"""A Markdown table, the one piece of text layout the reports share (a run's report.md, a sweep's
sweep.md, a chaos campaign's summary): a base module, so that no room imports another only for it."""
from __future__ import annotations

from collections.abc import Sequence


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    esc = [[str(c).replace("|", "\\|") for c in r] for r in [header, *rows]]
    out = ["| " + " | ".join(esc[0]) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in esc[1:]]
    return "\n".join(out)
