"""An LM's true state of its cluster (seed 001 §IV-A, IV-B4, IV-B6): hosts, partitions, logical
nodes and tasks, and the validation of the GMs' requests against it. Pure: no I/O, no clock.

Partitions. Every host's node N = (K, M) belongs to exactly one GM's partition (its owner).
A *repartition* for task T = (R, PC) cuts a logical node N' = (R, M) out of N for the
requesting GM, leaving N = (K − R, M) in the owner's partition (resource granularity, not
whole nodes). [Our choice; the paper leaves it open (digest D.14):] N' lives as long as its
task: when the task ends, R returns to N.

Units: CPU in cores, memory in MiB.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from cellbed.policy.megha.match import EPS, HostBits
from cellbed.domain.constraints import AttrValue, Constraint

INTERNAL, EXTERNAL, PREEMPTION = "internal", "external", "preemption"


class Refusal(Exception):
    """A request that the true state cannot satisfy (a state inconsistency of the GM's view)."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


@dataclasses.dataclass
class LmTask:
    name: str
    user: str
    cpu: float                 # requested, cores
    mem: float                 # requested, MiB
    host: int                  # index into ClusterState.hosts
    partition: int             # index into ClusterState.gms
    logical: bool              # on a logical node N' (a repartition)
    submit_gm: str = ""        # where its events go
    state: str = "starting"    # starting | running
    start_unix_s: float = 0.0
    payload: object = None     # the task as submitted (the agent keeps its protobuf here)
    start_sent: bool = False   # StartVm has gone to the node


def blocks(n_hosts: int, n_gms: int) -> list[int]:
    """Default partitioning: contiguous, equal blocks of hosts, one per GM."""
    return [i * n_gms // n_hosts for i in range(n_hosts)] if n_hosts else []


def hosts_digest(hosts: Sequence[str], cpu: Sequence[float], mem: Sequence[float],
                 attributes: Sequence[Mapping[str, AttrValue]]) -> str:
    blob = json.dumps([list(hosts), [round(float(c), 6) for c in cpu], [round(float(m), 3) for m in mem],
                       [sorted(a.items()) for a in attributes]], default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class ClusterState:
    def __init__(self, hosts: Sequence[str], cap_cpu: Sequence[float], cap_mem: Sequence[float],
                 attributes: Sequence[Mapping[str, AttrValue]], gms: Sequence[str],
                 owner: Sequence[int] | None = None) -> None:
        if not gms:
            raise ValueError("an LM needs at least one GM to partition for")
        self.hosts = list(hosts)
        self.index = {h: i for i, h in enumerate(self.hosts)}
        self.gms = list(gms)
        self.gm_index = {g: i for i, g in enumerate(self.gms)}
        n = len(self.hosts)
        self.total_cpu = np.asarray(cap_cpu, dtype=float).copy()
        self.total_mem = np.asarray(cap_mem, dtype=float).copy()
        self.cap_cpu = self.total_cpu.copy()      # capacity of N now: K minus loans to N'
        self.cap_mem = self.total_mem.copy()
        self.used_cpu = np.zeros(n)               # requests of the tasks on N
        self.used_mem = np.zeros(n)
        self.owner = np.asarray(owner if owner is not None else blocks(n, len(self.gms)), dtype=np.int64)
        if self.owner.size != n or (n and (self.owner.min() < 0 or self.owner.max() >= len(self.gms))):
            raise ValueError(f"owner must give a GM index in 0..{len(self.gms) - 1} for each of {n} hosts")
        self.attributes = [dict(a) for a in attributes]
        self.bits = HostBits(self.attributes)
        self.digest = hosts_digest(self.hosts, self.total_cpu, self.total_mem, self.attributes)
        self.tasks: dict[str, LmTask] = {}
        self.on_host: list[dict[str, LmTask]] = [{} for _ in range(n)]
        self.usage: dict[str, list[float]] = {}   # user -> [cores, MiB, tasks]
        self.logical = np.zeros(len(self.gms), dtype=np.int64)
        self.version = 0

    # --- reads ---------------------------------------------------------------------------
    def free(self, h: int) -> tuple[float, float]:
        return float(self.cap_cpu[h] - self.used_cpu[h]), float(self.cap_mem[h] - self.used_mem[h])

    def free_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return self.cap_cpu - self.used_cpu, self.cap_mem - self.used_mem

    def satisfies(self, h: int, constraints: Iterable[Constraint]) -> bool:
        return all(bool(self.bits.vector(c)[h]) for c in constraints)

    def host(self, name: str) -> int:
        h = self.index.get(name)
        if h is None:
            raise KeyError(name)
        return h

    # --- validation (seed 001 §IV-B6) -----------------------------------------------------
    # A launch or repartition passes two stages: the partition rule of its kind, then the fit.
    def check_partition(self, kind: str, h: int, g: int) -> None:
        """GM g's request of *kind* may take host h's node N: a launch (INTERNAL) only in g's own
        partition, a repartition (EXTERNAL) only from another GM's (else a Refusal of *kind*)."""
        if kind == INTERNAL and self.owner[h] != g:
            raise Refusal(INTERNAL, f"{self.hosts[h]} is in {self.gms[self.owner[h]]}'s partition, "
                                    f"not {self.gms[g]}'s")
        if kind == EXTERNAL and self.owner[h] == g:
            raise Refusal(EXTERNAL, f"{self.hosts[h]} is already in {self.gms[g]}'s own partition")

    def check_fit(self, kind: str, h: int, cpu: float, mem: float, constraints: Sequence[Constraint],
                  validate: Callable | None = None) -> None:
        """Host h satisfies the constraints and its node N (of its owner's partition) still has
        room for the request (else a Refusal of *kind*). The room is the ``validation`` stage's
        call (*validate*, R4 on the true state; Megha's free-covers-request when none is given)."""
        if not self.satisfies(h, constraints):
            bad = [c for c in constraints if not self.bits.vector(c)[h]]
            raise Refusal(kind, f"{self.hosts[h]} does not satisfy " + ", ".join(
                f"{c.attribute} {c.op.name} {c.value!r}" for c in bad))
        fc, fm = self.free(h)
        what = f"{self.gms[self.owner[h]]}'s node on "
        if validate is not None:
            ans = validate(self.hosts[h], (fc, fm), (float(self.total_cpu[h]), float(self.total_mem[h])), (cpu, mem))
            if not ans.accepted:
                raise Refusal(kind, what + (ans.detail or f"{self.hosts[h]}: {ans.reason}"))
        elif fc + EPS < cpu or fm + EPS < mem:
            raise Refusal(kind, f"{what}{self.hosts[h]} has {fc:.3f} cores / "
                                f"{fm:.0f} MiB free, the task needs {cpu:.3f} cores / {mem:.0f} MiB")

    def check_launch(self, h: int, g: int, cpu: float, mem: float, constraints: Sequence[Constraint]) -> None:
        """Launch in GM g's own partition: N must be g's and still have room (else INTERNAL)."""
        self.check_partition(INTERNAL, h, g)
        self.check_fit(INTERNAL, h, cpu, mem, constraints)

    def check_repartition(self, h: int, g: int, cpu: float, mem: float, constraints: Sequence[Constraint]) -> None:
        """Repartition for GM g from another GM's node N (else EXTERNAL)."""
        self.check_partition(EXTERNAL, h, g)
        self.check_fit(EXTERNAL, h, cpu, mem, constraints)

    def find_preemption(self, g: int, victim_user: str, cpu: float, mem: float,
                        constraints: Sequence[Constraint]) -> tuple[int, list[LmTask]]:
        """The first host (in host order) satisfying the constraints where preempting the fewest,
        newest running tasks of *victim_user* frees room for the task. Freed resources return
        to N whether the victims were on N or on logical nodes. Raises PREEMPTION if none."""
        hosts = sorted({t.host for t in self.tasks.values() if t.user == victim_user and t.state == "running"})
        if not hosts:
            raise Refusal(PREEMPTION, f"{victim_user} has no running task on this LM")
        mask = self.bits.mask(constraints)
        checked = 0
        for h in hosts:
            if not mask[h]:
                continue
            checked += 1
            fc, fm = self.free(h)
            victims: list[LmTask] = []
            for t in sorted((t for t in self.on_host[h].values() if t.user == victim_user and t.state == "running"),
                            key=lambda t: (-t.start_unix_s, t.name)):
                if fc + EPS >= cpu and fm + EPS >= mem:
                    break
                victims.append(t)
                fc += t.cpu
                fm += t.mem
            if fc + EPS >= cpu and fm + EPS >= mem:
                return h, victims
        raise Refusal(PREEMPTION, f"preempting {victim_user}'s tasks frees no room for {cpu:.3f} cores / "
                                  f"{mem:.0f} MiB on any of the {checked} host(s) that satisfy the constraints "
                                  f"(of {len(hosts)} where {victim_user} runs)")

    # --- changes ---------------------------------------------------------------------------
    def allocate(self, t: LmTask) -> None:
        """Take the task's resources: on N (its owner's partition), or as a loan N' = (R, M)."""
        if t.name in self.tasks:
            raise ValueError(f"task {t.name} is already allocated on {self.hosts[self.tasks[t.name].host]}")
        h = t.host
        if t.logical:
            self.cap_cpu[h] -= t.cpu
            self.cap_mem[h] -= t.mem
            self.logical[t.partition] += 1
        else:
            self.used_cpu[h] += t.cpu
            self.used_mem[h] += t.mem
        self.tasks[t.name] = t
        self.on_host[h][t.name] = t
        u = self.usage.setdefault(t.user, [0.0, 0.0, 0])
        u[0] += t.cpu
        u[1] += t.mem
        u[2] += 1
        self.version += 1

    def release(self, name: str) -> LmTask:
        t = self.tasks.pop(name)
        h = t.host
        del self.on_host[h][name]
        if t.logical:
            self.cap_cpu[h] += t.cpu
            self.cap_mem[h] += t.mem
            self.logical[t.partition] -= 1
        else:
            self.used_cpu[h] -= t.cpu
            self.used_mem[h] -= t.mem
        u = self.usage[t.user]
        u[0] -= t.cpu
        u[1] -= t.mem
        u[2] -= 1
        if u[2] == 0:
            del self.usage[t.user]
        self.version += 1
        return t

    def touch(self) -> None:
        self.version += 1

    def set_host(self, h: int, cpu: float | None = None, mem: float | None = None,
                 attributes: Mapping[str, AttrValue] | None = None) -> list[str]:
        """Host *h*'s capacity (K, M) or attributes changed (a machine UPDATE, REMOVE as (0, 0),
        or ADD back). Loans out of it stay; the hosts digest changes, so GMs fetch the hosts
        again. Returns the tasks on *h* that no longer fit, newest first, in the order to stop
        them until the rest fits (they stay allocated: the caller stops them)."""
        if cpu is not None:
            self.cap_cpu[h] += float(cpu) - self.total_cpu[h]
            self.total_cpu[h] = float(cpu)
        if mem is not None:
            self.cap_mem[h] += float(mem) - self.total_mem[h]
            self.total_mem[h] = float(mem)
        if attributes is not None:
            self.attributes[h] = dict(attributes)
            self.bits = HostBits(self.attributes)
        self.digest = hosts_digest(self.hosts, self.total_cpu, self.total_mem, self.attributes)
        self.version += 1
        over = []
        c = sum(t.cpu for t in self.on_host[h].values())
        m = sum(t.mem for t in self.on_host[h].values())
        for t in sorted(self.on_host[h].values(), key=lambda t: (-t.start_unix_s, t.name)):
            if c <= self.total_cpu[h] + EPS and m <= self.total_mem[h] + EPS:
                break
            over.append(t.name)
            c, m = c - t.cpu, m - t.mem
        return over

    def resize(self, name: str, cpu: float, mem: float) -> bool:
        """Task *name*'s request becomes (cpu, mem) where it is (in place), if its host's node N
        has the room for the difference (a loan N' grows out of N too); False, and nothing
        changes, if not."""
        t = self.tasks[name]
        h = t.host
        dc, dm = float(cpu) - t.cpu, float(mem) - t.mem
        fc, fm = self.free(h)
        if fc + EPS < dc or fm + EPS < dm:
            return False
        if t.logical:
            self.cap_cpu[h] -= dc
            self.cap_mem[h] -= dm
        else:
            self.used_cpu[h] += dc
            self.used_mem[h] += dm
        u = self.usage[t.user]
        u[0] += dc
        u[1] += dm
        t.cpu, t.mem = float(cpu), float(mem)
        self.version += 1
        return True

    # --- invariants (tests and the LM's own checks) -------------------------------------------
    def check_invariants(self) -> None:
        """No double allocation: every host's tasks fit its total capacity, N's use fits N."""
        cpu = np.zeros(len(self.hosts))
        mem = np.zeros(len(self.hosts))
        loan_c = np.zeros(len(self.hosts))
        loan_m = np.zeros(len(self.hosts))
        for t in self.tasks.values():
            cpu[t.host] += t.cpu
            mem[t.host] += t.mem
            if t.logical:
                loan_c[t.host] += t.cpu
                loan_m[t.host] += t.mem
        assert np.all(cpu <= self.total_cpu + 1e-6), "a host's tasks exceed its CPU"
        assert np.all(mem <= self.total_mem + 1e-6), "a host's tasks exceed its memory"
        assert np.allclose(self.cap_cpu, self.total_cpu - loan_c) and np.allclose(self.cap_mem, self.total_mem - loan_m)
        assert np.allclose(self.used_cpu, cpu - loan_c) and np.allclose(self.used_mem, mem - loan_m)
        assert np.all(self.used_cpu <= self.cap_cpu + 1e-6) and np.all(self.used_mem <= self.cap_mem + 1e-6)
