"""Who may call what: the identities of a cell and the authorisation table of every RPC.

An identity is (cell, role, name), carried in a certificate of the cell's CA as the URI
``cellbed://<cell>/<role>/<name>`` in the subject alternative name, and as the subject's CN (name)
and OU (role). Pure: no TLS here (cellbed/runtime/pki.py makes the certificates,
cellbed/runtime/authz.py enforces this table on every server).

The table follows what each agent does in the papers' protocols:
- only nodes call each other's migration admission (PrepareIncoming/FinishIncoming) and the
  peer-to-peer SAN, and report to brokers;
- only the operator (admin: cellctl, the experiment runner) starts, stops, migrates, reshapes the
  workload of or injects faults into VMs, except that the agents whose job is to place tasks also
  start and stop them: a Local Master on its hosts (Megha), a broker for MASB's initial
  allocation (AllocateTask);
- GMs talk to LMs and forward submissions to each other; LMs report task events to GMs and
  replicate to their standby; brokers sync their caches;
- every identity of the cell may read (lists, states, views, health, reflection).
"""
from __future__ import annotations

import dataclasses
import enum
import re

from cellbed.domain.errors import InvalidArgument


class Role(str, enum.Enum):
    NODE = "node"
    BROKER = "broker"
    GM = "gm"
    LM = "lm"
    ADMIN = "admin"


URI_SCHEME = "cellbed"
_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
_URI = re.compile(rf"{URI_SCHEME}://([a-z0-9]{{1,10}})/([a-z]+)/([a-z0-9][a-z0-9-]{{0,62}})")


@dataclasses.dataclass(frozen=True)
class Identity:
    cell: str
    role: Role
    name: str

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z0-9]{1,10}", self.cell):
            raise InvalidArgument(f"identity cell={self.cell!r}: allowed 1..10 lowercase letters or digits")
        if not _NAME.fullmatch(self.name):
            raise InvalidArgument(f"identity name={self.name!r}: allowed [a-z0-9][a-z0-9-]{{0,62}}")
        object.__setattr__(self, "role", Role(self.role))

    @property
    def uri(self) -> str:
        return f"{URI_SCHEME}://{self.cell}/{self.role.value}/{self.name}"

    @classmethod
    def from_uri(cls, uri: str) -> "Identity":
        m = _URI.fullmatch(uri)
        if not m or m.group(2) not in {r.value for r in Role}:
            raise InvalidArgument(f"identity URI {uri!r}: expected {URI_SCHEME}://CELL/ROLE/NAME with ROLE one of "
                                  f"{', '.join(r.value for r in Role)}")
        return cls(m.group(1), Role(m.group(2)), m.group(3))

    def __str__(self) -> str:
        return f"{self.role.value} {self.name} of cell {self.cell}"


ANY = None   # any identity of the cell
A, N, B, G, L = Role.ADMIN, Role.NODE, Role.BROKER, Role.GM, Role.LM

# Full method name ("/package.Service/Method") -> the roles allowed, or ANY.
POLICY: dict[str, frozenset[Role] | None] = {}


def _service(name: str, methods: dict[str, tuple[Role, ...] | None]) -> None:
    for m, roles in methods.items():
        POLICY[f"/{name}/{m}"] = ANY if roles is None else frozenset(roles)


_service("cellbed.v1.NodeAgent", {
    "StartVm": (A, B, L), "StopVm": (A, B, L), "SetWorkload": (A,), "MigrateVm": (A,), "AbortMigration": (A,),
    "InjectFault": (A,), "PrepareIncoming": (N,), "FinishIncoming": (N,),
    "ListVms": None, "GetHostState": None, "ListMigrations": None, "WatchEvents": None})
_service("cellbed.v1.San", {
    "NegotiateTask": (A,), "RequestTaskMigration": (N,), "ProcessTaskMigration": (N,), "ListNegotiations": None,
    "Explain": None})
_service("cellbed.v1.BrokerAgent", {
    "ReportNodeState": (N,), "GetCandidateNodes": (N,), "AllocateTask": (A, G), "SyncCache": (B,), "ListCache": None})
_service("cellbed.v1.GlobalMaster", {
    "Submit": (A, G), "ReportTaskEvents": (L,), "GetTask": None, "GetView": None, "ListQueues": None})
_service("cellbed.v1.LocalMaster", {
    "Launch": (G,), "Repartition": (G,), "Preempt": (G,), "StopTask": (G,), "Replicate": (L,),
    "GetState": None, "GetHosts": None, "ListPartitions": None, "FindTasks": None, "GetRole": None})
_service("cellbed.v1.SamplingWorker", {"Probe": (A, G)})
_service("cellbed.v1.SamplingScheduler", {"ClaimTask": (A, N), "ReportStart": (A, N)})
_service("cellbed.v1.Policies", {"ListPolicies": None})
_service("grpc.health.v1.Health", {"Check": None, "Watch": None})
_service("grpc.reflection.v1.ServerReflection", {"ServerReflectionInfo": None})
_service("grpc.reflection.v1alpha.ServerReflection", {"ServerReflectionInfo": None})


@dataclasses.dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


def authorize(method: str, who: Identity | None, cell: str) -> Decision:
    """May *who* call *method* on a server of *cell*? A refusal's reason names what is needed."""
    if who is None:
        return Decision(False, f"{method}: the caller presented no certificate of cell {cell}")
    if who.cell != cell:
        return Decision(False, f"{method}: the caller ({who}) belongs to another cell; this is cell {cell}")
    if method not in POLICY:
        return Decision(False, f"{method}: not in the authorisation table (denied by default)")
    roles = POLICY[method]
    if roles is None or who.role in roles:
        return Decision(True)
    need = " or ".join(sorted(r.value for r in roles))
    return Decision(False, f"{method} needs role {need}; the caller is {who}")
