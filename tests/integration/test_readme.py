"""The README, executed (issue 15): every `cellctl` line of README.md's ```sh blocks runs, in the
README's order, on a real cell in the default cell name, and none fails.

One convention keeps it maintainable: a line whose comment says `readme-test: parse-only` (a
minutes-long sweep, a second cell over SSH, a model run that has its own tests, ...) is parsed with
cellctl's real parser, so a usage error still fails this test, but it is not executed.

For the read-only commands, the test also runs them with --json before and after the verb: both
must parse as JSON, have the same shape, and carry no integer as a string.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess

import pytest

from cellbed.cell import cell as cellmod
from cellbed.cli import main as climain
from tests.integration.conftest import REPO, _can_run_cells

pytestmark = pytest.mark.integration

CELLCTL = os.path.join(REPO, ".venv", "bin", "cellctl")
MARK = "readme-test: parse-only"
READ_ONLY = {("cell", "status"), ("vm", "list"), ("nodes",), ("migrations",), ("broker", "cache"), ("san",),
             ("gm", "view"), ("lm", "partitions"), ("queues",)}


def readme_commands(text: str) -> list[tuple[list[str], bool, int]]:
    """(argv after `cellctl`, parse_only, README line) for every cellctl line of the sh blocks."""
    out = []
    for m in re.finditer(r"```sh\n(.*?)```", text, re.S):
        first = text[:m.start()].count("\n") + 2
        lines = m.group(1).split("\n")
        i = 0
        while i < len(lines):
            ln, start = lines[i], i
            while ln.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                ln = ln.rstrip()[:-1] + " " + lines[i].strip()
            i += 1
            words = shlex.split(ln, comments=True)
            if words[:1] == ["sudo"]:
                words = words[1:]
            if words[:1] != ["cellctl"]:
                continue
            out.append((words[1:], MARK in ln, first + start))
    return out


def verb(argv: list[str]) -> tuple[str, ...]:
    words = [a for a in argv if not a.startswith("-")]
    for n in (2, 1):
        if tuple(words[:n]) in READ_ONLY:
            return tuple(words[:n])
    return ()


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


def test_readme_commands_parse():
    cmds = readme_commands(open(os.path.join(REPO, "README.md")).read())
    assert len(cmds) >= 25
    parser = climain.build_parser()
    for argv, _, line in cmds:
        try:
            parser.parse_args(argv)
        except SystemExit as e:
            pytest.fail(f"README.md:{line}: cellctl {' '.join(argv)}: usage error (rc {e.code})")


def test_readme_executed_on_a_real_cell(tmp_path):
    why = _can_run_cells()
    if why:
        pytest.fail(f"integration cell cannot run: {why}")
    root = str(tmp_path / "cells")
    env = {**os.environ, "CELLBED_STATE_ROOT": root}
    env.pop("CELLBED_CELL", None)
    env.pop("CELLBED_CONTROLLER", None)
    cmds = readme_commands(open(os.path.join(REPO, "README.md")).read())
    ran, json_checked = [], []
    try:
        for argv, parse_only, line in cmds:
            if parse_only:
                continue
            r = subprocess.run([CELLCTL, *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
            assert r.returncode == 0, f"README.md:{line}: cellctl {' '.join(argv)} -> rc {r.returncode}\n{r.stderr}"
            assert "Traceback" not in r.stderr
            ran.append(" ".join(argv))
            v = verb(argv)
            if v and "--json" not in argv:
                outs = []
                for av in (["--json", *argv], [*argv, "--json"]):
                    rj = subprocess.run([CELLCTL, *av], cwd=tmp_path, env=env, capture_output=True, text=True,
                                        timeout=120)
                    assert rj.returncode == 0, f"cellctl {' '.join(av)}: {rj.stderr}"
                    outs.append(json.loads(rj.stdout))
                assert shape(outs[0]) == shape(outs[1]), f"--json before/after differ for {' '.join(argv)}"
                assert digit_strings(outs[1]) == [], f"integers as strings in {' '.join(argv)}: {digit_strings(outs[1])}"
                json_checked.append(" ".join(v))
    finally:
        cellmod.down("default", root)
    print(f"ran {len(ran)} README commands; --json checked for {sorted(set(json_checked))}")
    for needed in ("cell up", "vm start", "vm migrate", "migrations", "broker cache", "san", "submit", "gm view",
                   "lm partitions", "queues", "cell down"):
        assert any(c.startswith(needed) for c in ran), f"the README no longer runs `cellctl {needed}`"
    assert set(json_checked) >= {" ".join(v) for v in READ_ONLY}
    assert cellmod.load_state("default", root) is None
