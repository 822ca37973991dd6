"""`cellctl cell up --megha` without a cell (issue 15): the controller config it writes, the
partition of the hosts among the LMs, the range errors, the supervisor of the GM/LM processes
(with a stand-in child), `cell down` of a supervisor, and how megha_cmd finds the cell's config."""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tomllib

import pytest

from cellbed.cell import megha, procs
from cellbed.cell.record import Recorder, down
from cellbed.cell.supervise import backoff_s, read_pids
from cellbed.cli.megha_cmd import Targets
from cellbed.controller.megha.config import ControllerConfig
from cellbed.domain import errors
from tests.conftest import wait_until

HOSTS = [f"h{i}" for i in range(1, 6)]


def addrs(hosts):
    return {h: f"10.231.14.{10 + i}:50051" for i, h in enumerate(hosts, start=1)}


def test_partition_is_contiguous_and_as_even_as_possible():
    assert megha.partition(HOSTS, 2) == [["h1", "h2", "h3"], ["h4", "h5"]]
    assert [len(b) for b in megha.partition([f"h{i}" for i in range(7)], 3)] == [3, 2, 2]
    assert megha.partition(HOSTS[:4], 4) == [["h1"], ["h2"], ["h3"], ["h4"]]
    assert megha.partition(HOSTS, 1) == [HOSTS]
    for n in range(1, 33):
        for m in range(1, n + 1):
            hosts = [f"h{i}" for i in range(1, n + 1)]
            blocks = megha.partition(hosts, m)
            assert sum(blocks, []) == hosts and len(blocks) == m
            assert max(map(len, blocks)) - min(map(len, blocks)) <= 1


@pytest.mark.parametrize("gms,lms,standby,n_hosts", [(1, 1, False, 1), (2, 2, False, 5), (2, 2, True, 4),
                                                     (8, 5, True, 5), (3, 1, False, 3)])
def test_config_text_round_trips_through_the_controller_config(gms, lms, standby, n_hosts):
    hosts = HOSTS[:n_hosts]
    p = megha.plan({"gms": gms, "lms": lms, "standby": standby}, hosts)
    text = megha.config_text(p, "mh", "10.231.14.1", addrs(hosts), "/tmp/megha-state", ["host", "ssd"])
    cfg = megha.check_config(text, "controller.toml")
    assert cfg == ControllerConfig.from_dict(tomllib.loads(text))
    assert cfg.cell == "mh" and cfg.mqtt_host == "10.231.14.1" and cfg.state_dir == "/tmp/megha-state"
    assert cfg.gms == tuple(f"gm{i}" for i in range(1, gms + 1))
    assert [lm.name for lm in cfg.lms] == [f"lm{j}" for j in range(1, lms + 1)]
    assert [list(lm.hosts) for lm in cfg.lms] == megha.partition(hosts, lms)
    assert all(len(lm.instances) == (2 if standby else 1) for lm in cfg.lms)
    ports = [int(a.rsplit(":", 1)[1]) for a in cfg.agents.values()]
    assert len(set(ports)) == len(ports) == gms + lms * (2 if standby else 1)
    assert cfg.address("gm1") == "10.231.14.1:50071" and cfg.address("lm1a") == "10.231.14.1:50081"
    assert cfg.gm_of(megha.DEFAULT_USER) == "gm1"
    assert {q.gm for q in cfg.queues} == set(cfg.gms)          # every GM serves a user
    assert sum(q.share for q in cfg.queues) == pytest.approx(1.0)
    assert cfg.hosts == addrs(hosts) and cfg.known_attributes == ("host", "ssd")
    assert cfg.lm_params.max_starting_per_host == 2 and cfg.lm_params.update_period_s == 2.0


def test_every_agent_process_gets_its_own_metrics_port():
    p = megha.plan({"gms": 2, "lms": 2, "standby": True}, HOSTS[:4])
    ports = megha.metrics_ports(p)
    assert list(ports) == ["lm1a", "lm1b", "lm2a", "lm2b", "gm1", "gm2"]
    assert list(ports.values()) == list(range(9470, 9476))
    assert not {9464, 9465} & set(ports.values())            # the node daemons' and the broker's
    shared = megha.check_config(megha.config_text(p, "mh", "10.231.14.1", addrs(HOSTS[:4]), "/s"), "c")
    own = megha.check_config(megha.config_text(p, "mh", "10.231.14.1", addrs(HOSTS[:4]), "/s", (), 9471), "c")
    assert shared.metrics_port == 0 and own.metrics_port == 9471
    assert own == dataclasses.replace(shared, metrics_port=9471)   # otherwise the same config


@pytest.mark.parametrize("opts,hosts,message", [
    ({"gms": 0}, 4, "gms=0 is out of range: allowed 1..8"),
    ({"gms": 9}, 4, "gms=9 is out of range: allowed 1..8"),
    ({"lms": 0}, 4, "lms=0 is out of range: allowed 1..4"),
    ({"lms": 5}, 4, "lms=5 is out of range: allowed 1..4"),
    ({"gms": "2"}, 4, "gms='2': allowed an integer 1..8"),
    ({"lms": True}, 4, "lms=True: allowed an integer 1..4"),
    ({"standby": "yes"}, 4, "standby='yes': allowed true or false"),
    ({"gm": 2}, 4, "megha option 'gm': allowed gms, lms, standby, update_period_s"),
    ({"update_period_s": 0.05}, 4, "update_period_s=0.05 s is out of range: allowed 0.1..3600 s"),
    ({"update_period_s": "2"}, 4, "update_period_s='2': allowed a number of seconds 0.1..3600"),
])
def test_bad_options_are_one_line_naming_the_field_and_the_range(opts, hosts, message):
    with pytest.raises(errors.InvalidArgument) as e:
        megha.plan(opts, HOSTS[:hosts])
    assert str(e.value) == message and "\n" not in str(e.value)


def test_the_lms_update_period_reaches_the_controller_config():
    """The real runner gives the scenario's policy.megha.update_period_s (wall s); the default is
    the real cell's 2 s."""
    cfg = lambda p: tomllib.loads(megha.config_text(p, "c", "10.0.0.1", {"h1": "10.0.0.11:1"}, "/s"))  # noqa: E731
    assert cfg(megha.plan({"update_period_s": 4}, HOSTS[:1]))["lm_params"]["update_period_s"] == 4.0
    assert cfg(megha.plan({}, HOSTS[:1]))["lm_params"]["update_period_s"] == megha.LM_PARAMS["update_period_s"] == 2.0


def test_bare_hosts_have_no_node_daemons_for_megha():
    with pytest.raises(errors.InvalidArgument, match="bare"):
        megha.plan({}, HOSTS, bare=True)


def test_defaults_are_one_gm_and_one_lm_over_every_host():
    p = megha.plan({}, HOSTS[:3])
    assert p.gms == ("gm1",) and [(lm.name, lm.instances, lm.hosts) for lm in p.lms] == [
        ("lm1", ("lm1a",), ("h1", "h2", "h3"))]
    assert p.users == (("default", "gm1"),)
    assert list(p.ports()) == ["lm1a", "gm1"]      # LMs are started first


# --- the supervisor, with a stand-in for cellbed-controller ------------------------------------
SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def spec_file(tmp_path, names=("lm1a", "gm1")) -> str:
    spec = {"pids_file": str(tmp_path / "pids.json"),
            "processes": [{"name": n, "argv": SLEEPER, "log": str(tmp_path / f"{n}.log")} for n in names]}
    path = tmp_path / "supervise.json"
    path.write_text(json.dumps(spec))
    return str(path)


def start_supervisor(rec: Recorder, spec: str, pids_file: str) -> dict:
    res = rec.add(kind="process", name="megha-supervisor", pids_file=pids_file)
    p = subprocess.Popen([sys.executable, "-m", "cellbed.cell.supervise", spec], start_new_session=True,
                         stdout=open(os.path.join(os.path.dirname(spec), "supervise.log"), "ab"),
                         stderr=subprocess.STDOUT)
    res.update(procs.proc_identity(p.pid))
    rec.flush()
    return res


def running(pids_file: str, names) -> dict:
    rec = read_pids(pids_file).get("processes", {})
    return {n: rec[n] for n in names if n in rec and procs.alive(rec[n])}


async def test_supervisor_restarts_an_agent_that_dies_and_down_stops_everything(tmp_path):
    sdir = tmp_path / "cell"
    sdir.mkdir()
    rec = Recorder(str(sdir / "cell.json"), {"resources": [{"kind": "dir", "path": str(sdir)}]})
    pids = str(sdir / "pids.json")
    sup = start_supervisor(rec, spec_file(sdir), pids)

    async def both():
        return len(running(pids, ["lm1a", "gm1"])) == 2 and running(pids, ["lm1a", "gm1"])
    first = await wait_until(both, 30, "the supervisor to start lm1a and gm1")
    os.kill(first["lm1a"]["pid"], signal.SIGKILL)

    async def restarted():
        now = running(pids, ["lm1a"])
        return now.get("lm1a") not in (None, first["lm1a"]) and now["lm1a"]
    again = await wait_until(restarted, 30, "lm1a to be restarted")
    rec_now = read_pids(pids)
    assert rec_now["restarts"] == {"lm1a": 1, "gm1": 0}
    assert rec_now["processes"]["gm1"] == first["gm1"]          # the other agent was left alone
    removed = down("cell", str(tmp_path))
    assert removed[0] == f"process megha-supervisor {sup['pid']}"
    assert not procs.alive(sup) and not procs.alive(again) and not procs.alive(first["gm1"])
    assert not sdir.exists()


async def test_down_after_the_supervisor_crashed_stops_its_orphans_by_identity(tmp_path):
    sdir = tmp_path / "cell"
    sdir.mkdir()
    rec = Recorder(str(sdir / "cell.json"), {"resources": [{"kind": "dir", "path": str(sdir)}]})
    pids = str(sdir / "pids.json")
    sup = start_supervisor(rec, spec_file(sdir, ["gm1"]), pids)

    async def started():
        return running(pids, ["gm1"]).get("gm1")
    child = await wait_until(started, 30, "gm1 to start")
    assert procs.kill(sup)                                       # the supervisor dies; gm1 lives on
    assert procs.alive(child)
    removed = down("cell", str(tmp_path))
    assert f"process gm1 {child['pid']}" in removed
    assert not procs.alive(child) and not sdir.exists()


def test_restart_backoff_grows_and_is_capped():
    assert [backoff_s(n) for n in (0, 1, 2, 4, 10, 100)] == [0.0, 0.5, 1.0, 2.0, 5.0, 5.0]


# --- cellctl's Megha commands find the cell's config --------------------------------------------
def _args(root, cell="mh", gm="") -> argparse.Namespace:
    return argparse.Namespace(cell=cell, state_root=str(root), controller="", gm=gm)


def _cell_with_config(tmp_path) -> str:
    p = megha.plan({"gms": 2, "lms": 2}, HOSTS[:4])
    cfg = tmp_path / "controller.toml"
    cfg.write_text(megha.config_text(p, "mh", "10.231.14.1", addrs(HOSTS[:4]), str(tmp_path / "state")))
    (tmp_path / "cells" / "mh").mkdir(parents=True)
    (tmp_path / "cells" / "mh" / "cell.json").write_text(json.dumps({"megha": {"controller": str(cfg)}}))
    return str(cfg)


async def test_targets_fall_back_to_the_config_recorded_by_cell_up(tmp_path, monkeypatch):
    monkeypatch.delenv("CELLBED_CONTROLLER", raising=False)
    cfg = _cell_with_config(tmp_path)
    os.makedirs(tmp_path / "cwd")
    monkeypatch.chdir(tmp_path / "cwd")                            # no ./controller.toml here
    tg = Targets(_args(tmp_path / "cells"))
    try:
        assert tg.path == cfg and tg.cfg is not None
        assert tg.gms() == [("gm1", "10.231.14.1:50071"), ("gm2", "10.231.14.1:50072")]
        assert tg.default_user() == "default" and tg.gm_for(tg.default_user()) == "10.231.14.1:50071"
        assert [lm for lm, _ in tg.lms()] == ["lm1", "lm2"]
    finally:
        await tg.close()
    tg = Targets(_args(tmp_path / "cells", gm="10.0.0.1:50071"))   # --gm wins: no config is read
    try:
        assert tg.cfg is None and tg.gms() == [("10.0.0.1:50071", "10.0.0.1:50071")] and tg.default_user() == ""
    finally:
        await tg.close()
    tg = Targets(_args(tmp_path / "cells", cell="other"))           # a cell without Megha: the usual error
    try:
        with pytest.raises(errors.NotFound, match="cell up --megha"):
            tg.gms()
    finally:
        await tg.close()
