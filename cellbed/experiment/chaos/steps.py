"""One step of a fault-injection campaign on a real cell (issue 12): run its operation (a live
migration, a SAN round, a Megha launch), inject its fault at its phase with the real mechanism
(cellbed/experiment/chaos/faults.py), undo what can be undone (the link comes back, netem is
removed, a killed agent is restarted by its supervisor or, for the broker and mosquitto, from
the command the cell recorded), and report what was done, with timestamps."""
from __future__ import annotations

import asyncio
import functools
import json
import subprocess
import sys
import time
import zlib

from cellbed.cell import cell_pki
from cellbed.cell import restart as restartmod
from cellbed.cell.supervise import read_pids
from cellbed.cell import procs
from cellbed.domain import errors
from cellbed.experiment.chaos import faults
from cellbed.experiment.chaos.observe import libvirt_uri
from cellbed.experiment.chaos.plan import Step
from cellbed.v1 import masb_pb2 as masbpb, masb_pb2_grpc as masbg, node_pb2 as npb

BANDWIDTH = npb.MigrationOptions(bandwidth_mib_s=16)   # pre-copy long enough to land a fault in it
HOLD_S = 4.0                                          # how long a cut link or netem lasts


class Deadline(Exception):
    pass


async def poll(fn, timeout_s: float, what: str, period_s: float = 0.1):
    """Until *fn()* (a coroutine function, or a blocking one run in a thread) is truthy; Deadline otherwise."""
    end = time.monotonic() + timeout_s
    while True:
        v = await fn() if asyncio.iscoroutinefunction(fn) else await asyncio.to_thread(fn)
        if v:
            return v
        if time.monotonic() > end:
            raise Deadline(f"{what} not reached within {timeout_s:.0f} s")
        await asyncio.sleep(period_s)        # polling interval


def jobinfo(state: dict, host: str, vm: str) -> dict[str, float]:
    out = subprocess.run(["virsh", "-c", libvirt_uri(state, host), "domjobinfo", vm], capture_output=True, text=True,
                         timeout=20).stdout
    units = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
    got: dict[str, float] = {}
    for line in out.splitlines():
        k, _, v = line.partition(":")
        parts = v.split()
        if k in ("Data processed", "Data remaining") and len(parts) == 2:
            got[k] = float(parts[0]) * units.get(parts[1], 1)
    return got


def domstate(state: dict, host: str, vm: str) -> str:
    r = subprocess.run(["virsh", "-c", libvirt_uri(state, host), "domstate", vm], capture_output=True, text=True,
                       timeout=20)
    return r.stdout.strip() if r.returncode == 0 else "absent"


class StepRunner:
    def __init__(self, name: str, root: str, state: dict, sdir: str, log) -> None:
        self.name, self.root, self.state, self.sdir, self.log = name, root, state, sdir, log

    # --- faults -----------------------------------------------------------------------------
    def inject(self, fault: str, src: str, dst: str, vm: str) -> tuple[str, callable]:
        """Inject *fault*; returns what was done and the coroutine function that ends it."""
        async def nothing():
            return None
        if fault in ("kill_src_daemon", "kill_dst_daemon", "kill_src_libvirtd", "kill_dst_libvirtd"):
            host = src if "_src_" in fault else dst
            key = "node" if fault.endswith("daemon") else "libvirtd"
            old = faults.host_pids(self.sdir, host)[key]["pid"]
            did = faults.kill_recorded(self.sdir, host, key)

            async def back():
                await asyncio.to_thread(faults.wait_restarted, self.sdir, host, key, old)
            return did, back
        if fault in ("kill_incoming_qemu", "kill_outgoing_qemu"):
            host = dst if fault == "kill_incoming_qemu" else src
            if faults.qemu_pid(self.state, host, vm) is None:
                return f"no QEMU of {vm} on {host} at this phase: nothing killed", nothing
            return faults.kill_qemu(self.state, host, vm), nothing
        if fault == "link_cut":
            did = faults.link(self.state, dst, up=False)

            async def up():
                await asyncio.sleep(HOLD_S)         # the fault's length
                faults.link(self.state, dst, up=True)
            return did, up
        if fault in ("netem_loss", "netem_delay"):
            did = faults.netem(self.state, dst, ["loss", "20%"] if fault == "netem_loss" else ["delay", "80ms", "20ms"])

            async def clear():
                await asyncio.sleep(HOLD_S)
                faults.netem(self.state, dst, None)
            return did, clear
        if fault == "throttle":
            did = faults.throttle(self.state, dst, True)

            async def unthrottle():
                await asyncio.sleep(HOLD_S)
                faults.throttle(self.state, dst, False)
            return did, unthrottle
        if fault in ("kill_broker", "kill_mosquitto"):
            proc = "broker" if fault == "kill_broker" else "mosquitto"
            did = restartmod.kill(self.name, self.root, proc)

            async def again():
                await asyncio.sleep(HOLD_S)
                restartmod.restart(self.name, self.root, proc)
            return did, again
        if fault in ("kill_active_lm", "kill_gm"):
            return self._kill_megha(fault, vm)
        raise errors.InvalidArgument(f"fault {fault!r} is unknown")

    def _kill_megha(self, fault: str, task: str):
        m = self.state["megha"]
        rec = read_pids(m["pids_file"])
        names = sorted(n for n in rec.get("processes", {}) if (n.startswith("lm") if fault == "kill_active_lm"
                                                                 else n.startswith("gm")))
        name = names[zlib.crc32(task.encode()) % len(names)] if names else ""
        if not name:
            raise errors.FailedPrecondition(f"{fault}: the cell runs no such Megha agent")
        old = rec["processes"][name]
        procs.kill(old)

        async def back():
            await poll(lambda: (read_pids(m["pids_file"])["processes"].get(name, {}).get("pid") != old["pid"]
                                and procs.alive(read_pids(m["pids_file"])["processes"][name])), 60,
                       f"{name} restarted by the cell's supervisor")
        return f"SIGKILL {name} (pid {old['pid']})", back

    # --- phases -----------------------------------------------------------------------------
    async def reach(self, phase: str, src: str, dst: str, vm: str) -> None:
        if phase == "precopy":
            await poll(lambda: jobinfo(self.state, src, vm).get("Data processed", 0) > 4 * 2**20, 60, "pre-copy")
        elif phase == "switchover":
            await poll(lambda: 0 < jobinfo(self.state, src, vm).get("Data remaining", 0) < 16 * 2**20
                       or domstate(self.state, dst, vm) == "running", 90, "switch-over")
        elif phase in ("verification", "after_completion"):
            await poll(lambda: domstate(self.state, dst, vm) == "running"
                       and (phase == "verification" or domstate(self.state, src, vm) == "absent"), 120,
                       f"{phase} on {dst}")

    # --- operations ---------------------------------------------------------------------------
    async def migration(self, step: Step, vm: str, src: str, dst: str) -> dict:
        t0 = time.time()
        out: dict = {"op": "migration", "vm": vm, "src": src, "dst": dst}
        end = None
        if step.phase == "before_transfer":
            out["injected"], end = self.inject(step.fault, src, dst, vm)
            out["injected_unix_s"] = time.time()
        call = asyncio.create_task(self._migrate(src, vm, dst))
        if end is None:
            try:
                await self.reach(step.phase, src, dst, vm)
            except Deadline as e:
                out["phase_missed"] = str(e)
            out["injected"], end = self.inject(step.fault, src, dst, vm)
            out["injected_unix_s"] = time.time()
        await end()
        out["recovered_unix_s"] = time.time()
        out["call"] = await call
        out["t0"] = t0
        return out

    async def _migrate(self, src: str, vm: str, dst: str) -> str:
        try:
            async with cell_pki.node_client(self.state, src) as c:
                r = await c.call("MigrateVm", npb.MigrateVmRequest(name=vm, dest_host=dst, options=BANDWIDTH),
                                 timeout=300)
            return npb.MigrationOutcome.Name(r.record.outcome)
        except errors.CellbedError as e:
            return f"{type(e).__name__}: {str(e)[:160]}"

    async def san(self, step: Step, vm: str, src: str) -> dict:
        t0 = time.time()
        out: dict = {"op": "san", "vm": vm, "src": src, "t0": t0}
        call = asyncio.create_task(self._negotiate(src, vm))
        dst = ""
        if step.phase == "precopy" or step.fault == "kill_dst_daemon":
            try:
                dst = await poll(functools.partial(self._lease_host, vm), 60, "a lease for the SAN's migration")
                await self.reach("precopy", src, dst, vm)
            except Deadline as e:
                out["phase_missed"] = str(e)
        if step.fault == "kill_dst_daemon" and not dst:
            out["injected"], end = "no destination chosen: nothing killed", None
        else:
            out["injected"], end = self.inject(step.fault, src, dst, vm)
        out["injected_unix_s"] = time.time()
        if end is not None:
            await end()
        out["recovered_unix_s"] = time.time()
        out["call"] = await call
        return out

    async def _lease_host(self, vm: str) -> str:
        for h in self.state["hosts"]:
            try:
                async with cell_pki.node_client(self.state, h) as c:
                    hs = (await c.call("GetHostState", npb.GetHostStateRequest(), timeout=5)).state
            except errors.CellbedError:
                continue
            if any(le.vm == vm for le in hs.leases):
                return h
        return ""

    async def _negotiate(self, src: str, vm: str) -> str:
        h = self.state["hosts"][src]
        try:
            async with cell_pki.admin(self.state).channel(f"{h['address']}:{h['grpc_port']}") as ch:
                r = await masbg.SanStub(ch).NegotiateTask(masbpb.NegotiateTaskRequest(name=vm), timeout=300)
            return f"{r.negotiation.state}: {r.negotiation.target or '-'}"
        except Exception as e:      # noqa: BLE001 - the fault may break the call in any way; the record says what happened
            return f"{type(e).__name__}: {str(e)[:160]}"

    async def megha(self, step: Step, task: str) -> dict:
        t0 = time.time()
        out: dict = {"op": "megha", "vm": task, "t0": t0}
        call = asyncio.create_task(asyncio.to_thread(self._submit, task))
        await asyncio.sleep(0.3)            # the submit is on its way: the fault lands during the launch
        out["injected"], end = self.inject(step.fault, "", "", task)
        out["injected_unix_s"] = time.time()
        await end()
        out["recovered_unix_s"] = time.time()
        out["call"] = await call
        return out

    def _submit(self, task: str) -> str:
        r = subprocess.run([sys.executable, "-m", "cellbed.cli.main", "--state-root", self.root, "--cell", self.name,
                            "submit", "--cpu", "0.05", "--mem", "128", "--name", task, "--wait-s", "120", "--json"],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            return f"rc {r.returncode}: {r.stderr.strip()[:160]}"
        return json.loads(r.stdout).get("state", "?")
