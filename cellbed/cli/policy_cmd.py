"""``cellctl policy list`` (every stage and the policies installed for it) and ``cellctl policy
check REF`` (fuzz a policy against its stage's contract; exit 1 on a violation)."""
from __future__ import annotations

import argparse
import tomllib

from cellbed.cli.common import emit, table
from cellbed.domain import errors
from cellbed.policy.api import STAGES, info_of
from cellbed.runtime.plugins import kit, refs
from cellbed.runtime.plugins.catalogue import catalogue
from cellbed.runtime.plugins.guard import PolicyEnv
from cellbed.runtime.plugins.resolve import SLOTS, Choice, resolve


def cmd_list(args: argparse.Namespace) -> None:
    cat = catalogue()
    lines = []
    for s in cat:
        lines.append(f"{s['stage']}  ({', '.join(s['keys'])}; {s['refarch']}; default {s['default']})")
        lines.append(f"  {s['contract']}")
        rows = [{"policy": p["name"], "origin": p["origin"], "version": f"{p['dist']} {p['version']}".strip(),
                 "params": ", ".join(f"{k}={v['default']}" for k, v in p["params"].items()),
                 "what": p["error"] or p["doc"]} for p in s["policies"]]
        lines += ["    " + ln for ln in table(rows, ["policy", "origin", "version", "params", "what"]).split("\n")]
        lines.append("")
    emit(args, cat, "\n".join(lines).rstrip())


def parse_params(items: list[str]) -> dict:
    out = {}
    for it in items or []:
        k, sep, v = it.partition("=")
        if not sep or not k:
            raise errors.InvalidArgument(f"--param {it!r}: allowed NAME=VALUE")
        try:
            out[k] = tomllib.loads(f"v = {v}")["v"]
        except tomllib.TOMLDecodeError:
            out[k] = v
    return out


def stage_of(text: str, stage: str) -> str:
    """The slot to check *text* in: --stage, else the stage the policy declares, else the one
    entry-point group that has that name."""
    if stage:
        if stage not in SLOTS:
            raise errors.InvalidArgument(f"--stage {stage!r}: allowed {', '.join(sorted(SLOTS))}")
        return stage
    if ":" not in text:
        groups = [s for s in STAGES if any(e.name == text for e in refs.entry_points(s))]
        if len(groups) == 1:
            return STAGES[groups[0]].keys[0].split(".", 1)[1]
        if not groups:
            raise errors.InvalidArgument(f"{text!r} is no installed policy of any stage (cellctl policy list shows them)")
        raise errors.InvalidArgument(f"{text!r} is a policy of the stages {', '.join(groups)}: give --stage")
    r = refs.parse("overload", text)            # the form only; the stage comes from the policy itself
    declared = info_of(refs.load("overload", r).obj).stage
    if not declared:
        raise errors.InvalidArgument(f"{text!r} does not declare its stage (@api.policy(stage=...)): give --stage")
    return STAGES[declared].keys[0].split(".", 1)[1]


def cmd_check(args: argparse.Namespace) -> None:
    slot = stage_of(args.ref, args.stage)
    sp = resolve(slot, Choice(args.ref, parse_params(args.param)), PolicyEnv())
    found = kit.check(sp.stage, sp.fn, sp.kw, examples=args.examples, seed=args.seed, budget_s=args.budget_ms / 1e3)
    data = {"stage": sp.stage, "policy": sp.ident.to_dict(), "examples": args.examples, "seed": args.seed,
            "violations": [v.__dict__ for v in found]}
    head = f"policy {sp.stage} {args.ref!r} ({sp.ident.origin}): {args.examples} inputs per kind, seed {args.seed}"
    text = "\n".join([head] + ([f"  {v.kind}: {v.what}\n      minimal input: {v.example}" for v in found]
                              or ["  no violation of the contract, no exception, no change to its inputs, "
                                  "same answer for the same input and seed, within the budget"]))
    emit(args, data, text)
    if found:
        raise SystemExit(1)
