"""What the real-cell driver reads back every tick: host states (the tick row, through the one
tick-row function), migration records and SAN refusals (migrations.csv), and, at the end, where
every VM is (lost, duplicated, stray, in flight: census.py) and the run summary."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from typing import Any

from cellbed.domain import errors
from cellbed.experiment.real.census import Census, Reading, census, settled
from cellbed.experiment.progress import peak_rss_mib
from cellbed.metrics.rows import MigrationRow
from cellbed.metrics.san_timing import san_row
from cellbed.metrics.ticks import HostState
from cellbed.v1 import masb_pb2 as masbpb, node_pb2 as npb

log = logging.getLogger(__name__)
CHECK_BUDGET_S = 120.0      # the end check waits this long at most for migrations under way to end


class PollMixin:
    """The reading half of RealRun (which owns the state these methods use)."""

    # -- ticks ------------------------------------------------------------------------------------------
    async def _ticker(self) -> None:
        k = 0
        while True:
            k += 1
            await self.sleep_until_sim(k * self.sc.run.tick_s)
            try:
                await self._tick(t_s=k * self.sc.run.tick_s)
            except errors.CellbedError as e:
                self.counters["tick_errors"] += 1
                log.warning("tick %d: %s", k, e)
            for name, vm in list(self.pending.items())[:8]:
                del self.pending[name]
                self.spawn(self._place(vm))

    async def _tick(self, t_s: float | None = None, final: bool = False) -> None:
        if t_s is None:
            t_s = self.end_s
            if t_s <= self.last_tick_s:
                return
        hosts = list(self.hosts)
        states = await asyncio.gather(*(self.node(h, "GetHostState", npb.GetHostStateRequest()) for h in hosts))
        for h, r in zip(hosts, states):
            self.host_state[h] = r.state
        for h in hosts:
            await self._read_migrations(h)
        await self._sample_vms(hosts, t_s)
        st = [self.host_state[h] for h in hosts]
        row = self.acc.row(t_s, [HostState(s.capacity.cpu_cores, s.capacity.mem_mib, s.cpu_used_cores, s.mem_used_mib,
                                           s.cpu_req_cores, s.mem_alloc_mib, s.vm_count) for s in st],
                           pending=len(self.pending))
        self.last_tick_s = t_s
        self.w.tick(row)
        over = row.overloaded / len(hosts)
        self.last.update(tasks=row.tasks_running, over=over)
        self.progress.update(t_s, row.tasks_running, over,
                             f"{self.counters['vms_placed']} VMs placed, {len(self.seen_migrations)} migrations",
                             force=final)

    async def _sample_vms(self, hosts: list[str], t_s: float) -> None:
        """One vms.csv row per VM: what its host measures of it (the model twin's guest overhead)."""
        now = time.time()
        for h in hosts:
            try:
                vms = (await self.node(h, "ListVms", npb.ListVmsRequest())).vms
            except errors.CellbedError as e:
                log.debug("ListVms %s: %s", h, e)
                continue
            for v in vms:
                self.vm_rows({"t_s": t_s, "host": h, "vm": v.spec.name,
                              "state": npb.VmState.Name(v.state).removeprefix("VM_STATE_").lower(),
                              "age_s": round(now - v.created_unix_s, 3) if v.created_unix_s else math.nan,
                              "vcpus": v.spec.vcpus, "cpu_load": float(v.spec.workload.cpu_load),
                              "cpu_used_cores": float(v.cpu_used_cores), "mem_mib": v.spec.mem_mib,
                              "wss_mib": v.spec.workload.wss_mib, "rss_mib": float(v.rss_mib),
                              "boot_s": float(v.boot_to_workload_s)})

    async def _read_migrations(self, h: str) -> None:
        """New migration records of host *h*, and (with SAN) the step-5 refusals of its negotiations."""
        for rec in (await self.node(h, "ListMigrations", npb.ListMigrationsRequest())).records:
            if rec.id in self.seen_migrations:
                continue
            self.seen_migrations.add(rec.id)
            self._migration(rec)
        if not self.d.use_san:
            return
        with contextlib.suppress(errors.CellbedError):
            r = await self.grpc(self.hosts[h], "San/ListNegotiations", masbpb.ListNegotiationsRequest(), timeout=10)
            for n in r.negotiations:
                if n.state != "active" and n.san_id not in self.seen_sans:
                    self.seen_sans.add(n.san_id)
                    self.san_rows(san_row(n))
                for i, s in enumerate(n.steps):
                    if s.kind == "refused" and (n.san_id, i) not in self.seen_refusals:
                        self.seen_refusals.add((n.san_id, i))
                        self.acc.migration("refused")
                        self.w.migration(MigrationRow(
                            t_s=self._sim_of_unix(s.unix_s), vm=n.vm, src=n.src_host, dst=s.host,
                            outcome="refused", forced=s.forced, san_id=n.san_id))

    def _sim_of_unix(self, unix_s: float) -> float:
        return max(0.0, (unix_s - self.unix0) * self.comp) if unix_s else self.sim_now()

    def _migration(self, rec) -> None:
        ok = rec.outcome == npb.MIGRATION_OUTCOME_SUCCEEDED
        refused = rec.outcome == npb.MIGRATION_OUTCOME_REFUSED
        outcome = "succeeded" if ok else ("refused" if refused else "failed")
        sent = rec.memory_processed_bytes or rec.data_total_bytes    # data_total is libvirt's job size (the RAM)
        self.acc.migration(outcome, sent if ok else 0)
        if ok:
            vm = self.vms.get(rec.vm)
            if vm is not None:
                vm.host = rec.dst
        self.w.migration(MigrationRow(
            t_s=self._sim_of_unix(rec.start_unix_s), vm=rec.vm, src=rec.src, dst=rec.dst, outcome=outcome,
            time_ms=rec.time_elapsed_ms if rec.time_elapsed_ms > 0 or ok else math.nan,
            downtime_ms=rec.downtime_ms if ok else math.nan, bytes=int(sent)))

    # -- end ------------------------------------------------------------------------------------------
    async def _reading(self) -> Reading:
        listed, leased, quiet = {}, {}, True
        for h in self.hosts:        # the leases before the listing: an adoption between is seen once
            st = (await self.node(h, "GetHostState", npb.GetHostStateRequest())).state
            vms = (await self.node(h, "ListVms", npb.ListVmsRequest())).vms
            listed[h] = tuple(v.spec.name for v in vms)
            leased[h] = tuple(x.vm for x in st.leases)
            quiet = quiet and not (st.migrations_in or st.migrations_out)
        return Reading(listed, leased, quiet)

    async def _live(self) -> set[str]:
        """The VMs the run believes are on some host now."""
        return {n for n, v in self.vms.items() if v.state in ("running", "stopping")}

    async def _check(self) -> Census:
        """Where every VM is (census.py): read until two quiet readings agree or one is clean,
        for at most CHECK_BUDGET_S (then the last reading, with any VM in flight named)."""
        deadline, prev = time.monotonic() + CHECK_BUDGET_S, None
        while True:
            live = await self._live()
            r = await self._reading()
            now = census(r, live)
            if settled(prev, now, r.quiet) or time.monotonic() > deadline:
                return now
            prev = now if r.quiet else None
            await asyncio.sleep(0.5)   # polling interval while a migration ends

    def _summary(self, wall: float, where: Census) -> dict[str, Any]:
        c = self.counters
        lost, dup, stray = where.lost, where.duplicated, where.stray
        pend = sum(1 for v in self.vms.values() if v.state == "pending")
        st = list(self.host_state.values())
        return {
            "ok": not lost and not dup, "driver": "real", "simulated_s": self.end_s,
            "wall_s": round(wall, 3), "sim_min_per_wall_min": self.comp, "peak_rss_mib": round(peak_rss_mib(), 1),
            "daemon_rss_mib_max": round(max((s.daemon_rss_mib for s in st), default=0.0), 1),
            "nodes": len(self.hosts), "accel": self.st.get("accel"),
            "tasks": {"added": c["tasks_added"], "vms_created": c["vms_created"], "vms_placed": c["vms_placed"],
                      "vms_stopped": c["vms_stopped"],
                      "live": sum(1 for v in self.vms.values() if v.state in ("running", "stopping")),
                      "pending": pend, "not_vm_short": c["not_vm_short"], "not_vm_fraction": c["not_vm_fraction"],
                      "not_vm_box_full": c["not_vm_box_full"], "lost": len(lost), "duplicated": len(dup),
                      "stray": len(stray), "lost_sample": lost[:20], "duplicated_sample": dup[:20],
                      "stray_sample": stray[:20],
                      "in_flight": len(where.in_flight), "in_flight_sample": where.in_flight[:20]},
            "migrations": len(self.seen_migrations), "refusals": len(self.seen_refusals),
            "runner": dict(sorted(c.items())),
        }
