"""The documentation, executed (issues 15 and 26): every `cellctl` line of the ```sh blocks of
README.md and of each page in docs/ runs on a real cell, page by page in reading order, and none
fails.

What is documented where, and the conventions, are in tests/doc_commands.py (pure, and checked
without a cell by tests/unit/test_doc_commands.py): PAGES is the order; a line whose comment says
`readme-test: parse-only`, or a block that starts with such a comment, is only parsed; a line that
is not a cellctl command (./cellbed.sh, ssh, ansible-playbook, cd ...) is skipped. Every page starts
on a box without a cell and must leave none, so no page depends on another: this test checks that
before and after each page. Each page runs in a folder of its own that sees the checkout's
scenarios/, sweeps/ and docs/, so relative paths resolve as they do in a checkout.

For the read-only commands, the test also runs them with --json before and after the verb: both
must parse as JSON, have the same shape, and carry no integer as a string.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import time

import pytest

from cellbed.cell import cell as cellmod
from tests import doc_commands as docs
from tests.integration.conftest import REPO, _can_run_cells

pytestmark = pytest.mark.integration

CELLCTL = os.path.join(REPO, ".venv", "bin", "cellctl")
CHECKOUT_DIRS = ("scenarios", "sweeps", "docs", "examples")


def shape(x):
    if isinstance(x, dict):
        return {k: shape(v) for k, v in sorted(x.items())}
    if isinstance(x, list):
        return [shape(x[0])] if x else []
    return type(x).__name__


def _text_fields() -> set[str]:
    """Names that are string fields in the cell's protos and never numbers: their values are ids such
    as a guest's 16-hex-digit boot_id, which is all decimal digits once in about 1,850 boots (0.625 ** 16)."""
    from google.protobuf.descriptor import FieldDescriptor
    from cellbed.v1 import common_pb2, masb_pb2, megha_pb2, node_pb2
    text, other = set(), set()

    def walk(m):
        for f in m.fields:
            (text if f.type == FieldDescriptor.TYPE_STRING else other).add(f.name)
        for n in m.nested_types:
            walk(n)
    for mod in (common_pb2, masb_pb2, megha_pb2, node_pb2):
        for m in mod.DESCRIPTOR.message_types_by_name.values():
            walk(m)
    return text - other


TEXT_FIELDS = _text_fields()


def digit_strings(x, path="", key="") -> list[str]:
    if isinstance(x, dict):
        return [p for k, v in x.items() for p in digit_strings(v, f"{path}.{k}", k)]
    if isinstance(x, list):
        return [p for i, v in enumerate(x) for p in digit_strings(v, f"{path}[{i}]", key)]
    if key in TEXT_FIELDS:
        return []
    return [path] if isinstance(x, str) and re.fullmatch(r"-?\d+", x) else []


def test_the_json_check_flags_integers_as_strings_but_not_text_ids():
    out = [{"spec": {"name": "7", "mem_mib": "128"}, "boot_id": "0123456789012345", "heartbeat": "12"}]
    assert digit_strings(out) == ["[0].spec.mem_mib", "[0].heartbeat"]


def cells_up(root: str) -> list[str]:
    """The cells that have a state file under *root* (cell down removes it)."""
    if not os.path.isdir(root):
        return []
    return sorted(n for n in os.listdir(root) if cellmod.load_state(n, root) is not None)


def workdir(tmp_path, page: str) -> str:
    d = tmp_path / "pages" / page.replace("/", "_")
    d.mkdir(parents=True)
    for name in CHECKOUT_DIRS:
        (d / name).symlink_to(os.path.join(REPO, name))
    return str(d)


def json_both_ways(argv: tuple[str, ...], cwd: str, env: dict) -> None:
    outs = []
    for av in (["--json", *argv], [*argv, "--json"]):
        rj = subprocess.run([CELLCTL, *av], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
        assert rj.returncode == 0, f"cellctl {' '.join(av)}: {rj.stderr}"
        outs.append(json.loads(rj.stdout))
    assert shape(outs[0]) == shape(outs[1]), f"--json before/after differ for {' '.join(argv)}"
    assert digit_strings(outs[1]) == [], f"integers as strings in {' '.join(argv)}: {digit_strings(outs[1])}"


def test_docs_executed_on_a_real_cell(tmp_path):
    why = _can_run_cells()
    if why:
        pytest.fail(f"integration cell cannot run: {why}")
    root = str(tmp_path / "cells")
    env = {**os.environ, "CELLBED_STATE_ROOT": root}
    env.pop("CELLBED_CELL", None)
    env.pop("CELLBED_CONTROLLER", None)
    ran, json_checked, took = [], [], []
    try:
        for page in docs.PAGES:
            cmds = docs.commands(page, docs.read(page))
            assert cells_up(root) == [], f"{page} starts with cells up: {cells_up(root)}"
            cwd = workdir(tmp_path, page)
            for c in cmds:
                if c.parse_only:
                    continue
                t = time.monotonic()
                r = subprocess.run([CELLCTL, *c.argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
                took.append((time.monotonic() - t, page, " ".join(c.argv)))
                assert r.returncode == 0, f"{c} -> rc {r.returncode}\n{r.stderr}"
                assert "Traceback" not in r.stderr, f"{c}: {r.stderr}"
                ran.append(" ".join(c.argv))
                v = docs.verb(c.argv)
                if v and "--json" not in c.argv:
                    json_both_ways(c.argv, cwd, env)
                    json_checked.append(" ".join(v))
            assert cells_up(root) == [], f"{page} leaves cells up: {cells_up(root)}"
    finally:
        for name in cells_up(root):
            cellmod.down(name, root)
    for dt, page, line in sorted(took, reverse=True)[:12]:
        print(f"{dt:7.1f} s  {page}: cellctl {line}")
    print(f"ran {len(ran)} documented commands; --json checked for {sorted(set(json_checked))}")
    for needed in docs.ESSENTIAL:
        assert any(c.startswith(needed) for c in ran), f"the docs no longer run `cellctl {needed}`"
    assert set(json_checked) >= {" ".join(v) for v in docs.READ_ONLY}
