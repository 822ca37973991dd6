"""The model hypervisor backend: the node agent's Hypervisor interface with no VMs.

A task's usage is what its (simulated) guest was last told through SetWorkload, exactly as a
real guest's workload program is: CPU = vcpus × cpu_load cores, memory = the working set
(or all of its memory when no working set is set). CPU time accumulates in virtual time,
so the agent's cpu-time-delta measurement works unchanged. Migration takes the time and
moves the bytes of the pre-copy cost model (DESIGN §11), then hands the task to the
destination's backend through the shared :class:`ModelFabric`.
"""
from __future__ import annotations

import asyncio
import dataclasses
import math
import random

from cellbed.domain import errors
from cellbed.domain.overhead import GuestOverhead
from cellbed.daemon.guest_channel import FaultReport, GuestStatus, IntegrityReport
from cellbed.domain.vm import (MODEL_LIMITS, DomainSample, DomState, MigrationOptions, MigrationStats,
                                       VmSpec)
from cellbed.policy.migration.cost import MIB, PrecopyParams, estimate, link_bandwidth
from cellbed.daemon.guest_channel import GuestTimeout


IDENTITY = GuestOverhead()


@dataclasses.dataclass(slots=True)
class ModelTask:
    spec: VmSpec
    boot_id: str
    started: float                 # virtual monotonic time of boot
    cpu_cores: float = 0.0         # current use
    mem_mib: float = 0.0
    cpu_time_ns: float = 0.0
    last_t: float = 0.0
    state: DomState = DomState.RUNNING
    reason: str = "booted"
    incoming: bool = False         # arrived by migration, not yet adopted by the destination agent
    generation: int = 0
    ready_at: float = 0.0          # booting until then (GuestOverhead.boot_s): the guest does not answer yet
    boot_cpu: float = 0.0          # CPU while booting
    moved: bool = False            # has migrated at least once (GuestOverhead.moved_mem_base_mib)
    listed_at: float = -1.0        # the last list(): when, and the cpu time then (the host's CPU cap)
    listed_ns: float = 0.0

    def usage_from_spec(self, guest: GuestOverhead = IDENTITY) -> None:
        s = self.spec
        self.cpu_cores = s.vcpus * s.cpu_load
        self.mem_mib = float(s.wss_mib) if s.wss_mib > 0 else float(s.mem_mib)
        if not guest.identity:
            self.cpu_cores, self.mem_mib = guest.cpu(self.cpu_cores), guest.mem(s.mem_mib, self.moved)

    def advance(self, now: float) -> None:
        if self.state is DomState.RUNNING and now > self.last_t:
            booting = min(now, self.ready_at) - self.last_t
            if booting > 0:
                self.cpu_time_ns += self.boot_cpu * booting * 1e9
                self.last_t += booting
            self.cpu_time_ns += self.cpu_cores * (now - self.last_t) * 1e9
        self.last_t = now


class ModelFabric:
    """What the backends of one model cell share: where every task is, the cost model and
    failure injection (a seeded share of migrations fails mid-way)."""

    def __init__(self, clock, cost: PrecopyParams = PrecopyParams(), migration_failure_prob: float = 0.0,
                 seed: int = 0, guest: GuestOverhead = IDENTITY) -> None:
        self.clock = clock
        self.cost = cost
        self.guest = guest.validate()
        self.migration_failure_prob = migration_failure_prob
        self.rng = random.Random(seed)
        self.backends: dict[str, "ModelHypervisor"] = {}
        self.location: dict[str, str] = {}     # task -> host whose backend holds it
        self.migrations = 0
        self.bytes_moved = 0

    def backend(self, host: str, cpu_cores: float | None = None) -> "ModelHypervisor":
        """Host *host*'s backend; with GuestOverhead.host_cpu_cap, its guests share *cpu_cores*."""
        hv = self.backends.get(host)
        if hv is None:
            hv = self.backends[host] = ModelHypervisor(host, self)
        if self.guest.host_cpu_cap and cpu_cores is not None:
            hv.cpu_cap = cpu_cores
        return hv

    def set_usage(self, name: str, cpu_cores: float, mem_mib: float) -> bool:
        """Drive a task's usage wherever it is (workload replay). False if no such task."""
        host = self.location.get(name)
        if host is None:
            return False
        self.backends[host].set_usage(name, cpu_cores, mem_mib)
        return True

    def set_workload(self, name: str, cpu_cores: float, wss_mib: float, dirty_mib_s: float) -> bool:
        """A guest's workload changes as SetWorkload changes a real one's (the real-cell twin):
        its use through the guest overhead, and the dirty rate its next migration meets."""
        host = self.location.get(name)
        if host is None:
            return False
        self.backends[host].set_workload(name, cpu_cores, wss_mib, dirty_mib_s)
        return True

    def remove_host(self, host: str) -> list[str]:
        """Host *host* left the cell (a machine REMOVE): its backend goes, with every task it held
        and every migration from it (cancelled); migrations to it then fail. Returns the tasks
        it held."""
        hv = self.backends.pop(host, None)
        if hv is None:
            return []
        names = hv.crash()
        for n in names:
            if self.location.get(n) == host:
                del self.location[n]
        return names

    def where(self, name: str) -> list[str]:
        """Hosts holding a task called *name* (tests: never more than one)."""
        return [h for h, b in self.backends.items() if name in b.tasks]


class ModelGuest:
    """The guest control channel of a model task (same methods as GuestChannel)."""

    def __init__(self, hv: "ModelHypervisor", name: str) -> None:
        self.hv, self.name = hv, name

    def _task(self) -> ModelTask:
        t = self.hv.tasks.get(self.name)
        if t is None or t.state is not DomState.RUNNING:
            raise GuestTimeout(f"model guest {self.name} is not running on {self.hv.host}")
        if self.hv.clock.monotonic() < t.ready_at:
            raise GuestTimeout(f"model guest {self.name} is booting on {self.hv.host}")
        return t

    async def status(self, *, timeout_s: float | None = None) -> GuestStatus:
        t = self._task()
        now = self.hv.clock.monotonic()
        s = t.spec
        return GuestStatus(boot_id=t.boot_id, heartbeat=int((now - t.started) * 10) + 1,
                           uptime_ms=int((now - t.started) * 1000), cpu_target=s.cpu_load, cpu_actual=s.cpu_load,
                           wss_mib=s.wss_mib, dirty_target_mib_s=s.dirty_mib_s,
                           dirty_actual_mib_s=s.dirty_mib_s, generation=t.generation,
                           mem_total_kib=s.mem_mib * 1024, mem_avail_kib=int((s.mem_mib - t.mem_mib) * 1024))

    async def set_workload(self, *, cpu: float | None = None, wss_mib: int | None = None,
                           dirty_mib_s: float | None = None, timeout_s: float | None = None) -> GuestStatus:
        t = self._task()
        t.advance(self.hv.clock.monotonic())
        ch = {k: v for k, v in (("cpu_load", cpu), ("wss_mib", wss_mib), ("dirty_mib_s", dirty_mib_s))
              if v is not None}
        t.spec = dataclasses.replace(t.spec, **ch)
        t.usage_from_spec()
        self.hv.touch()
        return await self.status()

    async def check(self, *, timeout_s: float | None = None) -> IntegrityReport:
        t = self._task()
        pages = int(t.spec.wss_mib * 256)
        return IntegrityReport(pages=pages, bad=0, first_bad=None)

    async def fault(self, kind: str, *, timeout_s: float | None = None) -> FaultReport:
        t = self._task()
        if kind == "panic":
            t.state, t.reason = DomState.CRASHED, "panicked"
            self.hv.touch()
        return FaultReport(kind=kind, page=None)

    async def close(self) -> None:
        return None


class ModelHypervisor:
    accel = "model"
    limits = MODEL_LIMITS

    def __init__(self, host: str, fabric: ModelFabric) -> None:
        self.host = host
        self.fabric = fabric
        self.clock = fabric.clock
        self.tasks: dict[str, ModelTask] = {}
        self._migrations: dict[str, asyncio.Task] = {}
        self.cpu_cap: float | None = None
        self._changes = 0              # bumped whenever a task here starts, stops, moves or changes its use
        self._booting_until = -math.inf
        self._boot_seen = -math.inf

    def touch(self) -> None:
        """A task here changed (its use, state or spec), or one came or went."""
        self._changes += 1

    def changes(self, now: float) -> int | None:
        """A counter that moves whenever what a sample would measure here may change; None while a
        guest is booting (its use changes at the end of its boot, with no call). Equal counts at two
        times: every task's use was constant in between (the node agent's event-driven sampling)."""
        if now < self._booting_until:
            return None
        if self._booting_until > self._boot_seen:     # a boot ended since the last look
            self._boot_seen = self._booting_until
            self._changes += 1
        return self._changes

    async def open(self) -> None:
        return None

    def crash(self) -> list[str]:
        """The machine is gone: cancel the migrations from it and drop its tasks (their names)."""
        for job in self._migrations.values():
            job.cancel()
        names = list(self.tasks)
        self.tasks.clear()
        self.touch()
        return names

    async def close(self) -> None:
        return None

    def versions(self) -> tuple[str, str]:
        return ("model", "model")

    def channel_path(self, name: str) -> str:
        return f"model://{self.host}/{name}"

    def guest_channel(self, name: str) -> ModelGuest:
        return ModelGuest(self, name)

    async def list(self) -> list[DomainSample]:
        now = self.clock.monotonic()
        out = []
        sd = self.fabric.guest.cpu_noise_sd
        for name, t in self.tasks.items():
            dt = now - t.last_t
            t.advance(now)
            if sd > 0 and dt > 0 and t.state is DomState.RUNNING:   # TCG's jitter in the cpu-time deltas
                t.cpu_time_ns = max(t.cpu_time_ns - t.cpu_cores * dt * 1e9,
                                    t.cpu_time_ns + self.fabric.rng.gauss(0.0, sd) * dt * 1e9)
        if self.cpu_cap is not None:
            self._cap(now)
        for name, t in self.tasks.items():
            out.append(DomainSample(name=name, state=t.state, reason=t.reason, spec=t.spec,
                                    cpu_time_ns=int(t.cpu_time_ns), rss_bytes=int(t.mem_mib * MIB),
                                    dirty_rate_mib_s=0.0 if math.isinf(t.spec.dirty_mib_s) else t.spec.dirty_mib_s,
                                    incoming=t.incoming))
        return out

    def _cap(self, now: float) -> None:
        """A real host cannot use more CPU than its cgroup quota: when its guests' demand since the
        last look exceeds it, each guest gets its share of the quota (GuestOverhead.host_cpu_cap)."""
        rates = {}
        for name, t in self.tasks.items():
            if 0 <= t.listed_at < now:
                rates[name] = (t.cpu_time_ns - t.listed_ns) / 1e9 / (now - t.listed_at)
        demand = sum(rates.values())
        if demand > self.cpu_cap > 0:
            f = self.cpu_cap / demand
            for name, r in rates.items():
                t = self.tasks[name]
                t.cpu_time_ns = t.listed_ns + (t.cpu_time_ns - t.listed_ns) * f
        for t in self.tasks.values():
            t.listed_at, t.listed_ns = now, t.cpu_time_ns

    def _get(self, name: str) -> ModelTask:
        t = self.tasks.get(name)
        if t is None:
            raise errors.NotFound(f"model task {name!r} is not on {self.host}")
        return t

    async def start(self, spec: VmSpec) -> None:
        if self.fabric.backends.get(self.host) is not self:
            raise errors.Unavailable(f"model host {self.host} has left the cell")
        if (taken := self.fabric.location.get(spec.name)) is not None:   # O(1): where() scans every host
            raise errors.AlreadyExists(f"model task {spec.name!r} already exists on {taken}")
        now = self.clock.monotonic()
        g = self.fabric.guest
        # with a boot time, the guest answers (and the node agent's StartVm returns) only after it,
        # using boot_cpu_cores meanwhile, as a TCG boot does
        t = ModelTask(spec=spec, boot_id=f"{self.fabric.rng.getrandbits(64):016x}", started=now, last_t=now,
                      ready_at=now + g.boot_s, boot_cpu=g.boot_cpu_cores)
        t.usage_from_spec(g)
        self.tasks[spec.name] = t
        self.fabric.location[spec.name] = self.host
        self._booting_until = max(self._booting_until, t.ready_at)
        self.touch()

    async def stop(self, name: str) -> None:
        self._get(name)
        if name in self._migrations:
            raise errors.FailedPrecondition(f"model task {name} is migrating; abort it first")
        del self.tasks[name]
        self.fabric.location.pop(name, None)
        self.touch()

    async def domain_state(self, name: str) -> tuple[DomState, str]:
        t = self._get(name)
        return t.state, t.reason

    async def update_spec(self, spec: VmSpec) -> None:
        """The task's spec changes; its use follows the spec only when the workload does
        (SetWorkload): a request update keeps the use last measured (set_usage)."""
        t = self._get(spec.name)
        t.advance(self.clock.monotonic())
        old = t.spec
        t.spec = spec
        self.touch()
        if (spec.vcpus * spec.cpu_load, spec.wss_mib, spec.dirty_mib_s) != \
                (old.vcpus * old.cpu_load, old.wss_mib, old.dirty_mib_s):
            t.usage_from_spec(self.fabric.guest)
        else:   # a VM cannot use more than its vCPUs and memory
            t.cpu_cores, t.mem_mib = min(t.cpu_cores, float(spec.vcpus)), min(t.mem_mib, float(spec.mem_mib))

    async def pause(self, name: str) -> None:
        t = self._get(name)
        t.advance(self.clock.monotonic())
        t.state, t.reason = DomState.PAUSED, "paused"
        self.touch()

    async def resume(self, name: str) -> None:
        t = self._get(name)
        t.advance(self.clock.monotonic())
        t.state, t.reason = DomState.RUNNING, "unpaused"
        self.touch()

    def set_usage(self, name: str, cpu_cores: float, mem_mib: float) -> None:
        """Drive a task's usage directly (model workload replay), capped at its vCPUs and memory;
        SetWorkload is the agent's path."""
        t = self._get(name)
        t.advance(self.clock.monotonic())
        # a VM cannot use more CPU than its vCPUs, nor more memory than it has
        use = min(cpu_cores, float(t.spec.vcpus)), min(mem_mib, float(t.spec.mem_mib))
        if use != (t.cpu_cores, t.mem_mib):
            t.cpu_cores, t.mem_mib = use
            self.touch()

    def set_workload(self, name: str, cpu_cores: float, wss_mib: float, dirty_mib_s: float) -> None:
        t = self._get(name)
        t.advance(self.clock.monotonic())
        t.spec = dataclasses.replace(t.spec, cpu_load=min(1.0, cpu_cores / max(1, t.spec.vcpus)),
                                     wss_mib=int(wss_mib), dirty_mib_s=dirty_mib_s)
        t.usage_from_spec(self.fabric.guest)
        self.touch()

    async def migrate(self, name: str, dest_uri: str, opts: MigrationOptions, on_progress=None) -> MigrationStats:
        t = self._get(name)
        dest = dest_uri.rsplit("/", 1)[-1]
        if dest not in self.fabric.backends or dest == self.host:
            raise errors.MigrationFailed(f"model migration of {name}: no model host {dest!r}")
        p = self.fabric.cost
        dirty = t.spec.dirty_mib_s
        cost = estimate(t.spec.mem_mib, t.spec.wss_mib, math.inf if math.isinf(dirty) else dirty, p,
                        bandwidth_limit_mib_s=opts.bandwidth_mib_s, max_downtime_ms=opts.max_downtime_ms,
                        auto_converge=opts.auto_converge, postcopy=opts.postcopy)
        fail = self.fabric.rng.random() < self.fabric.migration_failure_prob
        # the migrate call lasts wall_ms: a calibrated model adds the destination's start to libvirt's time
        job = asyncio.ensure_future(self.clock.sleep(cost.wall_ms / 1000.0 * (0.5 if fail else 1.0)))
        self._migrations[name] = job
        try:
            await job
        except asyncio.CancelledError:
            if job.cancelled() and not asyncio.current_task().cancelling():
                raise errors.MigrationFailed(f"model migration of {name} aborted", aborted=True) from None
            raise
        finally:
            self._migrations.pop(name, None)
        if fail:
            raise errors.MigrationFailed(f"model migration of {name} to {dest} failed (injected)")
        target = self.fabric.backends.get(dest)
        if target is None:
            raise errors.MigrationFailed(f"model host {dest} vanished during the migration of {name}")
        del self.tasks[name]
        t.advance(self.clock.monotonic())
        if not self.fabric.guest.identity and not t.moved:   # only the pages sent: less resident memory
            t.moved = True
            t.mem_mib = self.fabric.guest.mem(t.spec.mem_mib, moved=True)
        target.tasks[name] = t
        self.touch()
        target.touch()
        self.fabric.location[name] = dest
        self.fabric.migrations += 1
        self.fabric.bytes_moved += cost.bytes
        return MigrationStats(time_elapsed_ms=cost.total_ms, downtime_ms=cost.downtime_ms,
                              setup_time_ms=p.setup_ms, data_total_bytes=cost.bytes,
                              memory_processed_bytes=cost.bytes, memory_iteration=cost.iterations,
                              memory_dirty_rate=int(0 if math.isinf(dirty) else dirty * MIB),
                              memory_bps=int(link_bandwidth(p, opts.bandwidth_mib_s) * MIB), wall_ms=cost.wall_ms,
                              postcopy_switched=cost.postcopy_switched, source="model")

    async def abort_migration(self, name: str) -> None:
        job = self._migrations.get(name)
        if job is None:
            raise errors.FailedPrecondition(f"model task {name} has no migration to abort")
        job.cancel()
