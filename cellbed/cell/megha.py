"""Megha in one command (issue 15): `cellctl cell up --megha [--gms N] [--lms M] [--standby]`.

After the node daemons serve, `up` writes the cell's controller config
(`<state>/<cell>/controller.toml`, the format of controller/megha/config.py) and starts
one `cellbed-controller --only NAME` process per GM and per LM instance on the bridge address,
under a supervisor (cellbed/cell/supervise.py) that restarts any of them that exits. The
supervisor is recorded in the cell's state before it starts, with its pids file, in which it
records every process it starts; `cell down` stops it and then anything the file still names.

- GM i listens on 50070+i, LM instance k (in config order) on 50080+k;
- the hosts are split among the LMs in contiguous blocks as even as possible (5 over 2: 3 + 2);
  with standby every LM has two instances, lmJa (active at start) and lmJb (standby);
- one queue per GM: user `default` on gm1 (what `cellctl submit` uses without --user), userI on
  gmI, equal shares;
- each agent runs from `megha/<agent>.toml`: the cell's controller.toml plus its own Prometheus
  `metrics_port` (9470, 9471, ... in start order, on the bridge address), recorded in the cell's
  `metrics_targets` with job gm or lm and label agent=<name> (cellbed/cell/prom_sd.py).
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
import tomllib
from typing import Callable

import grpc

from cellbed.cell import procs, prom_sd
from cellbed.cell.record import Recorder
from cellbed.cell.supervise import read_pids
from cellbed.controller.megha.config import ControllerConfig
from cellbed.daemon.config import toml_value
from cellbed.domain import errors
from cellbed.runtime.authz import Security
from cellbed.v1 import megha_pb2 as meghapb, megha_pb2_grpc as meghapbg

DEFAULT_USER = "default"
GM_PORT0 = 50070        # gm1 = 50071, ...
LM_PORT0 = 50080        # the first LM instance = 50081, ...
METRICS_PORT0 = 9470    # the agents' /metrics, in start order
MAX_GMS = 8
GM_SERVICE = "cellbed.v1.GlobalMaster"
LM_SERVICE = "cellbed.v1.LocalMaster"
# Timings for a TCG box: boots take seconds of CPU, so each LM boots at most 2 VMs per host at a
# time and waits longer for a boot; the LMs update the GMs every 2 s (the paper's 10 s is for
# clusters where a launch takes less than that).
GM_PARAMS = {"request_timeout_s": 20.0, "retry_period_s": 5.0}
LM_PARAMS = {"update_period_s": 2.0, "start_timeout_s": 240.0, "max_starting_per_host": 2}


@dataclasses.dataclass(frozen=True)
class LmPlan:
    name: str
    instances: tuple[str, ...]
    hosts: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class MeghaPlan:
    """Names, ports and partitions of a cell's Megha agents (no side effects)."""

    gms: tuple[str, ...]
    lms: tuple[LmPlan, ...]
    users: tuple[tuple[str, str], ...]        # (user, gm)
    update_period_s: float = LM_PARAMS["update_period_s"]    # LM -> GM state updates, wall s

    def ports(self) -> dict[str, int]:
        """Every agent and its port, LM instances first (the order they are started in)."""
        out = {inst: LM_PORT0 + k for k, inst in enumerate((i for lm in self.lms for i in lm.instances), start=1)}
        out.update({g: GM_PORT0 + i for i, g in enumerate(self.gms, start=1)})
        return out


def partition(hosts: list[str], n: int) -> list[list[str]]:
    """*hosts* in *n* contiguous blocks as even as possible, the larger blocks first."""
    q, r = divmod(len(hosts), n)
    out, i = [], 0
    for j in range(n):
        size = q + (1 if j < r else 0)
        out.append(list(hosts[i:i + size]))
        i += size
    return out


def _int(field: str, v, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise errors.InvalidArgument(f"{field}={v!r}: allowed an integer {lo}..{hi}")
    errors.check_range(field, v, lo, hi)
    return v


def plan(megha: dict, hosts: list[str], *, bare: bool = False) -> MeghaPlan:
    """Check the --megha options ({"gms", "lms", "standby", "update_period_s"}) against the cell's
    *hosts*. update_period_s: how often each LM sends the GMs its state (the GMs' view's age; the
    real runner sets the scenario's policy.megha.update_period_s in wall seconds)."""
    unknown = sorted(set(megha) - {"gms", "lms", "standby", "update_period_s"})
    if unknown:
        raise errors.InvalidArgument(f"megha option {unknown[0]!r}: allowed gms, lms, standby, update_period_s")
    if bare:
        raise errors.InvalidArgument("megha needs node daemons: bare hosts have none (drop --bare or --megha)")
    gms = _int("gms", megha.get("gms", 1), 1, MAX_GMS)
    lms = _int("lms", megha.get("lms", 1), 1, len(hosts))
    standby = megha.get("standby", False)
    if not isinstance(standby, bool):
        raise errors.InvalidArgument(f"standby={standby!r}: allowed true or false")
    gm_names = tuple(f"gm{i}" for i in range(1, gms + 1))
    lm_plans = tuple(LmPlan(f"lm{j}", (f"lm{j}a", f"lm{j}b") if standby else (f"lm{j}a",), tuple(block))
                     for j, block in enumerate(partition(hosts, lms), start=1))
    users = tuple((DEFAULT_USER if i == 1 else f"user{i}", g) for i, g in enumerate(gm_names, start=1))
    period = megha.get("update_period_s", LM_PARAMS["update_period_s"])
    if isinstance(period, bool) or not isinstance(period, (int, float)):
        raise errors.InvalidArgument(f"update_period_s={period!r}: allowed a number of seconds 0.1..3600")
    errors.check_range("update_period_s", float(period), 0.1, 3600, "s")
    return MeghaPlan(gm_names, lm_plans, users, float(period))


def _q(s: str) -> str:
    return json.dumps(s)      # a JSON string is a TOML basic string


def security_lines(cell_state: dict) -> list[str]:
    """The transport-security keys of the cell's controller config: the cell CA and each
    process's own certificate ({role}-{agent}, as cellbed/runtime/pki.py names them) and the TLS
    MQTT port, or plaintext in an insecure cell."""
    if cell_state.get("insecure") or "pki" not in cell_state:
        return ["insecure = true", "mqtt_port = 1883"]
    d = cell_state["pki"]["dir"]
    return [f"tls_ca = {_q(cell_state['pki']['ca'])}", f"tls_cert = {_q(os.path.join(d, '{role}-{agent}.crt'))}",
            f"tls_key = {_q(os.path.join(d, '{role}-{agent}.key'))}", "mqtt_port = 8883"]


def config_text(p: MeghaPlan, cell: str, bridge_address: str, hosts: dict[str, str], state_dir: str,
                known_attributes: list[str] = (), metrics_port: int = 0,
                security: list[str] = ("insecure = true", "mqtt_port = 1883"), policy: dict | None = None,
                explain: float = 0.01) -> str:
    """The controller config of the cell: *hosts* maps host name to "address:port"; a
    *metrics_port* (one process's) is written only if given; *security*: security_lines()."""
    lines = [f"# Written by cellctl cell up --megha for cell {cell}", f"cell = {_q(cell)}",
             f"mqtt_host = {_q(bridge_address)}", *security, f"state_dir = {_q(state_dir)}",
             f"known_attributes = [{', '.join(_q(a) for a in known_attributes)}]", f"explain = {explain!r}"]
    lines += [f"metrics_port = {metrics_port}"] if metrics_port else []
    lines += ["", "[agents]"]
    lines += [f"{n} = {_q(f'{bridge_address}:{port}')}" for n, port in p.ports().items()]
    lines += ["", "[hosts]"] + [f"{h} = {_q(a)}" for h, a in hosts.items()]
    for g in p.gms:
        lines += ["", "[[gm]]", f"name = {_q(g)}"]
    for lm in p.lms:
        lines += ["", "[[lm]]", f"name = {_q(lm.name)}", f"instances = [{', '.join(_q(i) for i in lm.instances)}]",
                  f"hosts = [{', '.join(_q(h) for h in lm.hosts)}]"]
    for user, gm in p.users:
        lines += ["", "[[queue]]", f"user = {_q(user)}", f"share = {1.0 / len(p.users)!r}", f"gm = {_q(gm)}"]
    lines += ["", "[gm_params]"] + [f"{k} = {v!r}" for k, v in GM_PARAMS.items()]
    lm_params = {**LM_PARAMS, "update_period_s": p.update_period_s}
    lines += ["", "[lm_params]"] + [f"{k} = {v!r}" for k, v in lm_params.items()]
    if policy:                    # the cell's [policy] table (cell up --policy): the masters' stages
        lines += ["", "[policy]"] + [f"{k} = {toml_value(v)}" for k, v in sorted(policy.items())]
    return "\n".join(lines) + "\n"


def check_config(text: str, where: str) -> ControllerConfig:
    """Parse the written config as cellbed-controller will (a mistake here fails before any start)."""
    return ControllerConfig.from_dict(tomllib.loads(text), where)


def metrics_ports(p: MeghaPlan) -> dict[str, int]:
    return {n: METRICS_PORT0 + k for k, n in enumerate(p.ports())}


def _spec(p: MeghaPlan, mdir: str) -> dict:
    return {"pids_file": os.path.join(mdir, "pids.json"),
            "processes": [{"name": n, "log": os.path.join(mdir, f"{n}.log"),
                           "argv": [sys.executable, "-m", "cellbed.controller.main", "--config",
                                    os.path.join(mdir, f"{n}.toml"), "--only", n]}
                          for n in p.ports()]}


def start(rec: Recorder, sdir: str, p: MeghaPlan, cell: str, bridge_address: str, hosts: dict,
          known_attributes: list[str] = (), policy: dict | None = None, explain: float = 0.01) -> dict:
    """Write the controller config and start the supervisor of the GM and LM processes, recorded
    before it starts. *hosts* is the cell state's {"h1": {"address", "grpc_port"}, ...}.
    Returns the cell state's "megha" entry."""
    mdir = os.path.join(sdir, "megha")
    os.makedirs(mdir, exist_ok=True)
    config = os.path.join(sdir, "controller.toml")
    addrs = {h: f"{d['address']}:{d['grpc_port']}" for h, d in hosts.items()}
    sec = security_lines(rec.state)
    files = {config: config_text(p, cell, bridge_address, addrs, os.path.join(mdir, "state"), known_attributes,
                                 security=sec, policy=policy, explain=explain)}
    for n, port in metrics_ports(p).items():      # one /metrics per process: its own config
        files[os.path.join(mdir, f"{n}.toml")] = config_text(p, cell, bridge_address, addrs,
                                                             os.path.join(mdir, "state"), known_attributes, port,
                                                             security=sec, policy=policy, explain=explain)
        prom_sd.add_target(rec.state, "gm" if service_of(n) == GM_SERVICE else "lm", bridge_address, port,
                           agent=n, cell=cell)
    for path, text in files.items():
        check_config(text, path)
        with open(path, "w") as f:
            f.write(text)
    spec = _spec(p, mdir)
    spec_file = os.path.join(mdir, "supervise.json")
    with open(spec_file, "w") as f:
        json.dump(spec, f, indent=1)
    res = rec.add(kind="process", name="megha-supervisor", pids_file=spec["pids_file"])
    with open(os.path.join(mdir, "supervise.log"), "ab") as log:
        sp = subprocess.Popen([sys.executable, "-m", "cellbed.cell.supervise", spec_file], stdout=log,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    res.update(procs.proc_identity(sp.pid))
    ports = p.ports()
    rec.state["megha"] = {
        "controller": config, "pids_file": spec["pids_file"], "logs": mdir,
        "gms": {g: f"{bridge_address}:{ports[g]}" for g in p.gms},
        "lms": {i: f"{bridge_address}:{ports[i]}" for lm in p.lms for i in lm.instances},
        "partitions": {lm.name: list(lm.hosts) for lm in p.lms},
        "instances": {lm.name: list(lm.instances) for lm in p.lms},
        "users": {u: g for u, g in p.users}}
    rec.flush()
    return rec.state["megha"]


def service_of(agent: str) -> str:
    return GM_SERVICE if agent.startswith("gm") else LM_SERVICE


def targets(megha_state: dict) -> dict[str, str]:
    """Every agent of a cell's "megha" state entry and its "address:port", LMs first."""
    return {**megha_state["lms"], **megha_state["gms"]}


def gm_has_every_lm(target: str, n_lms: int, timeout_s: float = 2.0, security: Security | None = None) -> bool:
    """True once the GM at *target* has a full state (with its hosts) from each of its *n_lms* LMs:
    before that it refuses Submit ("no LM state yet"). *security*: the caller's identity."""
    try:
        with (security or Security.insecure("")).sync_channel(target) as ch:
            v = meghapbg.GlobalMasterStub(ch).GetView(meghapb.GetViewRequest(), timeout=timeout_s)
    except grpc.RpcError:
        return False
    return len(v.lms) == n_lms and all(x.full_staleness_s >= 0 and x.hosts > 0 for x in v.lms)


def wait_serving(megha_state: dict, timeout_s: float, health: Callable[..., bool],
                 security: Security | None = None) -> None:
    """Until every GM and LM instance answers its health check as SERVING and every GM has the
    state of every LM (so that a submit right after `cell up` is placed). *health(target,
    service=...)* is the cell's check (cellbed.cell.cell.health_ok)."""
    deadline = time.monotonic() + timeout_s
    pending = targets(megha_state)
    n_lms = len(megha_state["partitions"])
    while pending:
        for n, target in list(pending.items()):
            gm = service_of(n) == GM_SERVICE
            if health(target, service=service_of(n)) and (not gm or gm_has_every_lm(target, n_lms,
                                                                                     security=security)):
                del pending[n]
        if not pending:
            return
        if time.monotonic() > deadline:
            restarts = read_pids(megha_state["pids_file"]).get("restarts", {})
            names = ", ".join(n + (f" (restarted {restarts[n]} times)" if restarts.get(n) else "") for n in pending)
            raise errors.DeadlineExceeded(f"Megha agents not SERVING (or GMs without every LM's state) after "
                                          f"{timeout_s:.0f} s: {names} "
                                          f"(logs in {megha_state['logs']}/<agent>.log)")
        time.sleep(0.2)


def status_rows(megha_state: dict, health: Callable[..., bool]) -> list[dict]:
    """One row per GM and LM instance: address, health, recorded pid and restarts."""
    rec = read_pids(megha_state["pids_file"])
    part = {i: lm for lm, insts in megha_state["instances"].items() for i in insts}
    rows = []
    for n, target in targets(megha_state).items():
        ident = rec.get("processes", {}).get(n)
        rows.append({"agent": n, "address": target,
                     "health": "SERVING" if health(target, service=service_of(n)) else "NOT SERVING",
                     "pid": ident["pid"] if ident and procs.alive(ident) else "-",
                     "restarts": rec.get("restarts", {}).get(n, 0),
                     "hosts": ",".join(megha_state["partitions"][part[n]]) if n in part else ""})
    return rows
