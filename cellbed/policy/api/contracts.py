"""The invariants every stage's answer must keep, checked by the framework on every call of a
plugin (and by ``cellctl policy check`` on generated inputs). Each check returns '' when the
answer keeps the contract, else one line saying how it breaks it. Public: plugin authors may
call them in their own tests."""
from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

import numpy as np

from cellbed.policy.api.records import Answer, Hosts, Pick, Selection, Verdict


def _short(x: Any, n: int = 80) -> str:
    s = repr(x)
    return s if len(s) <= n else s[: n - 3] + "..."


def finite_number(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(float(x))


def verdict(out: Any) -> str:
    if not isinstance(out, Verdict):
        return f"returned {_short(out)}, not a Verdict"
    if not isinstance(out.overloaded, (bool, np.bool_)):
        return f"Verdict.overloaded is {_short(out.overloaded)}, not a bool"
    if not isinstance(out.reasons, tuple) or not all(isinstance(r, str) for r in out.reasons):
        return f"Verdict.reasons is {_short(out.reasons)}, not a tuple of strings"
    if len(out.excess) != 2 or not all(finite_number(e) and e >= 0 for e in out.excess):
        return f"Verdict.excess is {_short(out.excess)}, not two finite numbers >= 0"
    return ""


def selection(out: Any, tasks: Sequence[Any]) -> str:
    if not isinstance(out, Selection):
        return f"returned {_short(out)}, not a Selection"
    offered = {t.name for t in tasks}
    for field in ("names", "compulsory"):
        names = getattr(out, field)
        if not isinstance(names, tuple):
            return f"Selection.{field} is {_short(names)}, not a tuple"
        stray = [n for n in names if n not in offered]
        if stray:
            return f"Selection.{field} names {_short(stray)}, which were not offered"
        if len(set(names)) != len(names):
            return f"Selection.{field} names a task twice: {_short(names)}"
    return ""


def scores(out: Any, n: int) -> str:
    try:
        a = np.asarray(out, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        return f"returned {_short(out)}, not numbers"
    if a.size != n:
        return f"returned {a.size} scores for {n} hosts"
    bad = np.flatnonzero(~np.isfinite(a))
    if bad.size:
        return f"score {a[bad[0]]} for host {int(bad[0])} is not finite ({bad.size} of {n})"
    return ""


def picks(out: Any, n: int) -> str:
    if isinstance(out, (str, bytes)) or not isinstance(out, Sequence):
        return f"returned {_short(out)}, not a sequence of Pick"
    seen = set()
    for p in out:
        if not isinstance(p, Pick):
            return f"returned an element {_short(p)}, not a Pick"
        if not isinstance(p.index, numbers.Integral) or isinstance(p.index, bool) or not 0 <= p.index < n:
            return f"picked host {_short(p.index)}, which was not offered (0..{n - 1})"
        if p.index in seen:
            return f"picked host {p.index} twice"
        if not finite_number(p.score):
            return f"Pick.score {_short(p.score)} for host {p.index} is not finite"
        seen.add(p.index)
    return ""


def answer(out: Any) -> str:
    if not isinstance(out, Answer):
        return f"returned {_short(out)}, not an Answer"
    if not isinstance(out.accepted, (bool, np.bool_)):
        return f"Answer.accepted is {_short(out.accepted)}, not a bool"
    if not isinstance(out.reason, str) or not isinstance(out.detail, str):
        return "Answer.reason and Answer.detail must be strings"
    if not out.accepted and not out.reason:
        return "a refusal must say why (Answer.reason is empty)"
    return ""


def permutation(out: Any, n: int) -> str:
    if isinstance(out, (str, bytes)) or not isinstance(out, (Sequence, np.ndarray)):
        return f"returned {_short(out)}, not a sequence of positions"
    idx = list(out)
    if not all(isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in idx):
        return f"returned {_short(idx)}, not integer positions"
    if sorted(int(i) for i in idx) != list(range(n)):
        return f"returned {_short([int(i) for i in idx])}, not a permutation of 0..{n - 1}"
    return ""


def allocation(out: Any, hosts: Hosts) -> str:
    if not isinstance(out, numbers.Integral) or isinstance(out, bool):
        return f"returned {_short(out)}, not a host position (an integer, or -1 for none)"
    i = int(out)
    if i == -1:
        return ""
    if not 0 <= i < len(hosts):
        return f"chose host {i}, outside 0..{len(hosts) - 1}"
    if not bool(hosts.offered[i]):
        return f"chose host {i}, which was not offered"
    return ""


def key(out: Any) -> str:
    return "" if finite_number(out) else f"returned {_short(out)}, not a finite number"


def users(out: Any, offered: Sequence[str], requester: str) -> str:
    if isinstance(out, (str, bytes)) or not isinstance(out, Sequence):
        return f"returned {_short(out)}, not a sequence of users"
    known = set(offered)
    stray = [u for u in out if u not in known]
    if stray:
        return f"named {_short(stray)}, which are not users with a share"
    if requester in out:
        return f"named the requester {requester!r} itself"
    if len(set(out)) != len(out):
        return f"named a user twice: {_short(list(out))}"
    return ""


def positions(out: Any, n: int, at_most: int) -> str:
    if isinstance(out, (str, bytes)) or not isinstance(out, (Sequence, np.ndarray)):
        return f"returned {_short(out)}, not a sequence of positions"
    idx = list(out)
    if not all(isinstance(i, numbers.Integral) and not isinstance(i, bool) and 0 <= i < n for i in idx):
        return f"returned {_short(idx)}, not positions in 0..{n - 1}"
    if len(set(int(i) for i in idx)) != len(idx):
        return f"returned a position twice: {_short(idx)}"
    if len(idx) > at_most:
        return f"returned {len(idx)} positions, more than the {at_most} asked for"
    return ""
