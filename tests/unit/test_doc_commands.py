"""The documentation's commands and links, checked without a cell (issue 26).

tests/integration/test_readme.py executes the cellctl lines of README.md and docs/*.md on a real
cell; this file checks, on any machine, what can be known before that: every documented cellctl
line (parse-only ones and the records' in docs/results/ and docs/bench/ too) parses with cellctl's
real parser, no cellctl line hides where the runner would not find it, every docs page is in the
reading order, each page's executed commands make sense in that order on a box without a cell,
and every page is linked and every relative link resolves.
"""
from __future__ import annotations

import os
import re

import pytest

from cellbed.cli import main as climain
from tests import doc_commands as docs

PARSER = climain.build_parser()
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def parse_error(c: docs.Command) -> str:
    try:
        PARSER.parse_args(list(c.argv))
    except SystemExit as e:
        return f"{c}: usage error (rc {e.code})"
    return ""


def all_markdown() -> list[str]:
    return ["README.md", *docs.docs_pages(), *docs.record_pages()]


def written_pages() -> list[str]:
    """The pages people write: not the report a command wrote into a results folder under
    docs/results/ (it links plots that are not committed)."""
    return [p for p in all_markdown() if os.path.dirname(p) in ("", "docs", *docs.RECORD_DIRS)]


# --- the conventions, on made-up pages --------------------------------------------------------
PAGE = """intro
```sh
cellctl cell up --hosts 3
cellctl vm migrate web1 \\
    --to h2   # readme-test: parse-only (a comment)
ssh h1 uptime
```
```sh
# readme-test: parse-only (the whole block)
sudo cellctl chaos -n 3
.venv/bin/cellctl nodes
```
```toml
command = "cellctl nodes"   # not a command line
```
"""


def test_commands_are_found_with_lines_continuations_and_markers():
    got = [(c.line, c.argv, c.parse_only) for c in docs.commands("x.md", PAGE)]
    assert got == [(3, ("cell", "up", "--hosts", "3"), False),
                   (4, ("vm", "migrate", "web1", "--to", "h2"), True),
                   (10, ("chaos", "-n", "3"), True),
                   (11, ("nodes",), True)]
    assert docs.strays("x.md", PAGE) == []


def test_a_cellctl_line_the_runner_would_miss_is_reported():
    text = ("```sh\ncd x && cellctl nodes\nX=1 cellctl nodes\n```\n"
            "```bash\ncellctl nodes\n```\n```\nsudo cellctl vm list\n```\n")
    assert [s.split(": ")[0] for s in docs.strays("y.md", text)] == ["y.md:2", "y.md:3", "y.md:6", "y.md:9"]


def cmd(line: int, *argv: str, parse_only: bool = False) -> docs.Command:
    return docs.Command("z.md", line, argv, parse_only)


def test_dry_run_says_what_would_fail_on_a_real_cell():
    good = [cmd(1, "cell", "up", "--san"), cmd(2, "vm", "start", "--host", "h1", "--name", "a"),
            cmd(3, "vm", "migrate", "a", "--to", "h2"), cmd(4, "broker", "cache"), cmd(5, "vm", "stop", "a"),
            cmd(6, "vm", "stop", "gone", parse_only=True), cmd(7, "cell", "down")]
    assert docs.dry_run(good, PARSER) == []
    default = PARSER.parse_args(["nodes"]).cell          # `default`, or $CELLBED_CELL
    bad = [cmd(1, "nodes"), cmd(2, "bench", "migration"), cmd(3, "bench", "migration", "--fit-from", "s.csv"),
           cmd(4, "cell", "up"), cmd(5, "cell", "up"), cmd(6, "vm", "stop", "b"), cmd(7, "san"), cmd(8, "task", "t1"),
           cmd(9, "--cell", "x", "cell", "up"), cmd(10, "--cell", "y", "cell", "up", "--subnet", "10.231.1.0/24"),
           cmd(11, "--cell", "y", "cell", "down")]
    problems = docs.dry_run(bad, PARSER)
    assert [p.split(": cellctl")[0] for p in problems[:-1]] == [f"z.md:{n}" for n in (1, 2, 5, 6, 7, 8, 8, 9)]
    assert "is not up" in problems[0] and "is not up" in problems[1] and "already up" in problems[2]
    assert "no VM 'b'" in problems[3] and "without --san" in problems[4]
    assert "without --megha" in problems[5] and "no task 't1'" in problems[6]
    assert f"subnet 10.231.0.0/24 is already cell {default!r}'s" in problems[7]
    assert problems[-1] == f"z.md: leaves cell {default!r} up (end the example with `cellctl cell down`)"


# --- the real pages --------------------------------------------------------------------------
def test_every_docs_page_is_in_the_reading_order():
    assert docs.PAGES[0] == "README.md" and len(set(docs.PAGES)) == len(docs.PAGES)
    assert set(docs.docs_pages()) == set(docs.PAGES[1:]), "add the new page to PAGES in tests/doc_commands.py"


def test_every_documented_cellctl_line_parses():
    cmds = docs.page_commands()
    assert len(cmds) >= 50 and any(c.page.startswith(docs.RECORD_DIRS) for c in cmds)
    assert [e for e in map(parse_error, cmds) if e] == []


def test_no_documented_cellctl_line_escapes_the_tests():
    assert [s for p in all_markdown() for s in docs.strays(p, docs.read(p))] == []


@pytest.mark.parametrize("page", docs.PAGES)
def test_each_page_runs_on_a_box_without_a_cell_and_leaves_none(page):
    cmds = docs.commands(page, docs.read(page))
    assert [e for e in map(parse_error, cmds) if e] == []
    assert docs.dry_run(cmds, PARSER) == []


def test_the_executed_pages_still_tour_a_real_cell():
    ran = [c.argv for p in docs.PAGES for c in docs.commands(p, docs.read(p)) if not c.parse_only]
    for needed in docs.ESSENTIAL:
        assert any(" ".join(a).startswith(needed) for a in ran), f"no page executes `cellctl {needed}`"
    assert {docs.verb(a) for a in ran if "--json" not in a} >= docs.READ_ONLY


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: str) -> set[str]:
    text = re.sub(r"^```.*?^```", "", docs.read(page), flags=re.S | re.M)
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}


def test_every_relative_link_resolves():
    broken = []
    for page in written_pages():
        for target in LINK.findall(docs.read(page)):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(os.path.join(docs.REPO, dest)):
                broken.append(f"{page}: {target} (no {dest})")
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                broken.append(f"{page}: {target} (no heading #{anchor} in {dest})")
    assert broken == []


def test_the_readme_links_every_docs_page_and_the_results_page_every_record():
    readme = {os.path.normpath(t.partition("#")[0]) for t in LINK.findall(docs.read("README.md"))}
    assert set(docs.docs_pages()) <= readme
    results = {os.path.normpath(os.path.join("docs", t.partition("#")[0]))
               for t in LINK.findall(docs.read("docs/results.md"))}
    assert set(written_pages()) - {"README.md", *docs.PAGES} <= results


def test_the_readme_keeps_the_two_commands_that_ci_runs():
    lines = [ln.split("#")[0].strip() for b in docs.blocks(docs.read("README.md")) if b.info == "sh" for ln in b.lines]
    assert {"./cellbed.sh demo", "./cellbed.sh test"} <= set(lines)
    assert "./cellbed.sh test" in docs.read(".ci/run")
