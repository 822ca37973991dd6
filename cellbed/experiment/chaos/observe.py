"""What a real cell looks like right now, from every source that can disagree, as a checker
Snapshot (cellbed/experiment/chaos/checker.py): each host's libvirtd (through virsh, over the
cell's TLS), each node daemon's listing, the guests' own heartbeats and boot ids, every
migration record and every lease. Fault injection and this observer act on the processes
and links the cell recorded, and on nothing else."""
from __future__ import annotations

import asyncio
import os
import subprocess

from cellbed.cell import cell_pki
from cellbed.domain import errors
from cellbed.runtime.cgroups import HostCgroup
from cellbed.experiment.chaos.checker import Domain, Guest, Record, Reservation, Snapshot
from cellbed.v1 import node_pb2 as npb


def libvirt_uri(state: dict, host: str) -> str:
    """*host*'s libvirtd from the box: TLS with the host's own certificate, or plaintext TCP in an
    insecure cell."""
    address = state["hosts"][host]["address"]
    if state.get("insecure") or "pki" not in state:
        return f"qemu+tcp://{address}/system"
    hdir = os.path.join(os.path.dirname(state["pki"]["dir"]), host)
    return f"qemu+tls://{address}/system?pkipath={hdir}/etc-libvirt/pki"


def domains(state: dict, host: str, timeout_s: float = 20.0) -> list[Domain] | None:
    """The domains *host*'s libvirtd reports (running = executing); None if it does not answer."""
    uri = libvirt_uri(state, host)
    try:
        out = subprocess.run(["virsh", "-c", uri, "list", "--all", "--uuid", "--name"], capture_output=True,
                             text=True, timeout=timeout_s)
        if out.returncode != 0:
            return None
        running = subprocess.run(["virsh", "-c", uri, "list", "--state-running", "--name"], capture_output=True,
                                 text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None
    live = set(running.stdout.split())
    doms = []
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            uuid, name = parts
            doms.append(Domain(name=name, uuid=uuid, running=name in live))
    return doms


async def _node(state: dict, host: str) -> tuple[list, list, npb.HostState | None]:
    try:
        async with cell_pki.node_client(state, host) as c:
            vms = (await c.call("ListVms", npb.ListVmsRequest(), timeout=10)).vms
            recs = (await c.call("ListMigrations", npb.ListMigrationsRequest(), timeout=10)).records
            hs = (await c.call("GetHostState", npb.GetHostStateRequest(), timeout=10)).state
            return list(vms), list(recs), hs
    except errors.CellbedError:
        return [], [], None


def outcome_name(outcome: int) -> str:
    return npb.MigrationOutcome.Name(outcome).removeprefix("MIGRATION_OUTCOME_").lower()


async def snapshot(state: dict, step: str, started: list[str]) -> tuple[Snapshot, list[str], list[str]]:
    """One observation, the hosts whose daemon or libvirtd did not answer (a snapshot taken
    while something is down is not a verdict), and the migrations a daemon has not finished yet."""
    hosts = sorted(state["hosts"])
    nodes = await asyncio.gather(*(_node(state, h) for h in hosts))
    libvirts = await asyncio.gather(*(asyncio.to_thread(domains, state, h) for h in hosts))
    s = Snapshot(step=step, libvirt={}, daemons={}, started=list(started))
    silent, unresolved = [], []
    for h, (vms, recs, hs), doms in zip(hosts, nodes, libvirts):
        unresolved += [f"{h}: {u}" for u in (hs.unresolved if hs is not None else [])]
        if hs is None or doms is None:
            silent.append(h)
        s.libvirt[h] = doms or []
        s.daemons[h] = [v.spec.name for v in vms]
        for v in vms:
            if v.boot_id:
                s.guests[v.spec.name] = Guest(boot_id=v.boot_id, heartbeat=v.heartbeat)
        for r in recs:
            s.records.append(Record(id=r.id, vm=r.vm, src=r.src, dst=r.dst, outcome=outcome_name(r.outcome),
                                    start=r.start_unix_s))
            if r.integrity_bad and r.vm in s.guests:
                g = s.guests[r.vm]
                s.guests[r.vm] = Guest(g.boot_id, g.heartbeat, r.integrity_bad)
        for le in (hs.leases if hs is not None else []):
            s.reservations.append(Reservation(host=h, vm=le.vm, migration_id=le.migration_id))
    for h, doms in zip(hosts, libvirts):
        if doms is not None:      # every QEMU in the host's cgroup must be a domain its libvirtd knows
            s.recorded |= {f"qemu:{h}/{d.name}" for d in doms}
            s.found |= {f"qemu:{h}/{n}" for n in await asyncio.to_thread(qemus, state, h)}
    return s, silent, unresolved


def qemus(state: dict, host: str) -> list[str]:
    """The domain names of the QEMU processes in *host*'s recorded cgroup."""
    names = []
    for pid in sorted(HostCgroup(f"cellbed/{state['name']}/{host}").pids()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and b"qemu-system" in os.path.basename(argv[0]):
            for a in argv:
                if a.startswith(b"guest="):
                    names.append(a[6:].split(b",")[0].decode())
    return names
