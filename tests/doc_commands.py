"""The documented commands, as data: the `cellctl` lines of README.md's and docs/*.md's ```sh blocks.

Pure (no cell, no subprocess): tests/unit/test_doc_commands.py checks everything here that needs
no cell, and tests/integration/test_readme.py executes the commands on a real one.

The conventions:
- PAGES is the reading order, and the order the integration test executes the pages in. Every
  docs/*.md is in it (a unit test checks), so a new page cannot be forgotten. Each page runs on a
  box without a cell and must leave none: a page whose example needs a cell brings it up and takes
  it down again, so no page depends on another (`dry_run` checks this without a cell).
- RECORD_DIRS hold records of runs (docs/results/, docs/bench/): their cellctl lines are only
  parsed, so that a flag they used cannot disappear unnoticed.
- A line whose comment says `readme-test: parse-only`, or every line of a block whose first line is
  a comment saying so, is parsed with cellctl's real parser but not executed.
- Only a line that *is* a cellctl command (optionally after `sudo`) is run; anything else
  (./cellbed.sh, ssh, ansible-playbook, cd, ...) is skipped. A line that runs cellctl in another
  way (`cd x && cellctl ...`, `VAR=1 cellctl ...`), or a cellctl command outside an ```sh block, is
  reported by `strays`, so no documented cellctl line escapes the tests.
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
from dataclasses import dataclass, field

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARK = "readme-test: parse-only"
PAGES = ("README.md", "docs/cell.md", "docs/cellctl.md", "docs/migration.md", "docs/experiments.md",
         "docs/sweeps.md", "docs/policies.md", "docs/masb.md", "docs/megha.md", "docs/security.md", "docs/metrics.md", "docs/ui.md",
         "docs/chaos.md", "docs/ansible.md", "docs/results.md", "docs/architecture.md")
RECORD_DIRS = ("docs/results", "docs/bench")
# Read-only verbs: the integration test also runs each with --json before and after the verb.
READ_ONLY = {("cell", "status"), ("vm", "list"), ("nodes",), ("migrations",), ("broker", "cache"), ("san",),
             ("gm", "view"), ("lm", "partitions"), ("queues",)}
# What the executed pages must run between them, so that the tour of a real cell stays whole.
ESSENTIAL = ("cell up", "vm start", "vm migrate", "migrations", "broker cache", "san", "submit", "gm view",
             "lm partitions", "queues", "cell down", "run")

_FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.S | re.M)
_CELLCTL_START = re.compile(r"^\s*(?:sudo\s+)?(?:\S*/)?cellctl(?:\s|$)")


@dataclass(frozen=True)
class Block:
    info: str                    # the fence's info string: "sh", "toml", "" ...
    first: int                   # the file's line number of the block's first line
    lines: tuple[str, ...]


@dataclass(frozen=True)
class Command:
    page: str
    line: int
    argv: tuple[str, ...]        # the words after `cellctl`
    parse_only: bool

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def __str__(self) -> str:
        return f"{self.where}: cellctl {' '.join(self.argv)}"


def blocks(text: str) -> list[Block]:
    """Every fenced block of a Markdown text, with its info string and its first line's number."""
    return [Block(m.group(1).strip(), text[:m.start(2)].count("\n") + 1, tuple(m.group(2).split("\n")[:-1]))
            for m in _FENCE.finditer(text)]


def logical_lines(block: Block) -> list[tuple[int, str]]:
    """(file line, text) per shell line of *block*, with backslash-continued lines joined."""
    out, lines, i = [], block.lines, 0
    while i < len(lines):
        ln, start = lines[i], i
        while ln.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            ln = ln.rstrip()[:-1] + " " + lines[i].strip()
        i += 1
        out.append((block.first + start, ln))
    return out


def cellctl_argv(line: str) -> list[str] | None:
    """The words after `cellctl` if *line* is a cellctl command (optionally after sudo), else None."""
    words = shlex.split(line, comments=True)
    if words[:1] == ["sudo"]:
        words = words[1:]
    if words and os.path.basename(words[0]) == "cellctl":
        return words[1:]
    return None


def _block_parse_only(block: Block) -> bool:
    first = next((ln.strip() for ln in block.lines if ln.strip()), "")
    return first.startswith("#") and MARK in first


def commands(page: str, text: str) -> list[Command]:
    """The cellctl commands of *text*'s ```sh blocks, in order."""
    out = []
    for b in blocks(text):
        if b.info != "sh":
            continue
        whole = _block_parse_only(b)
        for line, ln in logical_lines(b):
            argv = cellctl_argv(ln)
            if argv is not None:
                out.append(Command(page, line, tuple(argv), whole or MARK in ln))
    return out


def strays(page: str, text: str) -> list[str]:
    """Lines that run cellctl but that `commands` would not find: a cellctl command outside an ```sh
    block, or an ```sh line that calls cellctl other than as its command."""
    out = []
    for b in blocks(text):
        if b.info != "sh":
            out += [f"{page}:{b.first + i}: a cellctl command in a ```{b.info} block (write it in ```sh)"
                    for i, ln in enumerate(b.lines) if _CELLCTL_START.match(ln)]
            continue
        for line, ln in logical_lines(b):
            words = shlex.split(ln, comments=True)
            if cellctl_argv(ln) is None and any(os.path.basename(w) == "cellctl" for w in words):
                out.append(f"{page}:{line}: calls cellctl, but not as the line's command: {ln.strip()}")
    return out


def verb(argv: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The read-only verb that *argv* runs, or ()."""
    words = [a for a in argv if not a.startswith("-")]
    for n in (2, 1):
        if tuple(words[:n]) in READ_ONLY:
            return tuple(words[:n])
    return ()


def read(page: str, repo: str = REPO) -> str:
    with open(os.path.join(repo, page), encoding="utf-8") as f:
        return f.read()


def docs_pages(repo: str = REPO) -> list[str]:
    """docs/*.md as they are on disk (each must be in PAGES)."""
    return sorted(f"docs/{n}" for n in os.listdir(os.path.join(repo, "docs")) if n.endswith(".md"))


def record_pages(repo: str = REPO) -> list[str]:
    """Every .md under RECORD_DIRS, however deep."""
    out = []
    for d in RECORD_DIRS:
        for top, _, names in os.walk(os.path.join(repo, d)):
            out += [os.path.relpath(os.path.join(top, n), repo) for n in names if n.endswith(".md")]
    return sorted(out)


def page_commands(repo: str = REPO) -> list[Command]:
    """Every documented command: PAGES' in reading order, then the records' (all parse-only)."""
    out = [c for p in PAGES for c in commands(p, read(p, repo))]
    for p in record_pages(repo):
        out += [Command(c.page, c.line, c.argv, True) for c in commands(p, read(p, repo))]
    return out


# --- what executing a page does to the cell, without a cell --------------------------------------
NEEDS_CELL = {"cmd_cell_status", "cmd_cell_inventory", "cmd_vm_list", "cmd_nodes", "cmd_migrations", "cmd_chaos"}
NEEDS_SAN = {"cmd_broker_cache", "cmd_san"}
NEEDS_MEGHA = {"cmd_gm_view", "cmd_lm_partitions", "cmd_queues"}
ON_A_VM = {"cmd_vm_stop", "cmd_vm_set_workload", "cmd_vm_migrate", "cmd_vm_abort"}


@dataclass
class _Cell:
    subnet: str
    san: bool
    megha: bool
    vms: set[str] = field(default_factory=set)
    tasks: set[str] = field(default_factory=set)


def dry_run(cmds: list[Command], parser: argparse.ArgumentParser) -> list[str]:
    """Follow the executed (not parse-only) commands of one page in order, from a box without a
    cell, and say what would go wrong on a real one: a command on a cell that is not up (or up
    without the agents it needs), a second `cell up` of a name or a subnet, a VM or task that no
    earlier line of the page made, a cell left up at the end."""
    cells: dict[str, _Cell] = {}
    problems = []
    for c in cmds:
        if c.parse_only:
            continue
        a = parser.parse_args(list(c.argv))
        fn, cell = a.fn.__name__, cells.get(a.cell)
        needs_cell = fn in NEEDS_CELL or (fn == "cmd_bench_migration" and not a.fit_from)

        def need(ok: bool, what: str) -> bool:
            if not ok:
                problems.append(f"{c}: {what}")
            return ok

        if fn == "cmd_cell_up":
            taken = [n for n, x in cells.items() if x.subnet == a.subnet]
            if need(cell is None, f"cell {a.cell!r} is already up") and \
                    need(not taken, f"subnet {a.subnet} is already cell {taken[0]!r}'s" if taken else ""):
                cells[a.cell] = _Cell(a.subnet, a.san, a.megha)
        elif fn == "cmd_cell_down":
            cells.pop(a.cell, None)
        elif needs_cell or fn in NEEDS_SAN | NEEDS_MEGHA | ON_A_VM | {"cmd_vm_start", "cmd_submit", "cmd_task"}:
            if fn in {"cmd_submit", "cmd_task"} | NEEDS_MEGHA and (a.controller or getattr(a, "gm", "")
                                                                   or getattr(a, "lm", "")):
                continue                               # names its agents itself
            if not need(cell is not None, f"cell {a.cell!r} is not up on this page"):
                continue
            need(fn not in NEEDS_SAN or cell.san, f"cell {a.cell!r} was brought up without --san")
            need(fn not in NEEDS_MEGHA | {"cmd_submit", "cmd_task"} or cell.megha,
                 f"cell {a.cell!r} was brought up without --megha")
            if fn == "cmd_vm_start" and a.name:
                cell.vms.add(a.name)
            elif fn in ON_A_VM and need(a.name in cell.vms, f"no VM {a.name!r} started earlier on this page"):
                if fn == "cmd_vm_stop":
                    cell.vms.discard(a.name)
            elif fn == "cmd_submit" and a.name:
                cell.tasks.add(a.name)
            elif fn == "cmd_task":
                need(a.name in cell.tasks, f"no task {a.name!r} submitted earlier on this page")
    problems += [f"{cmds[-1].page}: leaves cell {n!r} up (end the example with `cellctl cell down`)" for n in cells]
    return problems
