"""What every request to a node daemon (NodeAgent, San) and to a broker (BrokerAgent), and every
node report a broker receives over MQTT, must satisfy before an agent acts on it (issue 13,
part 5). Pure: each check raises InvalidArgument naming the first field out of range; the
servicers answer INVALID_ARGUMENT with it, the MQTT handlers drop the message and count its
``reason``. The checks that need the agent's state (a VM's ranges on its backend, capacity,
names that must exist) stay with the agents; these are the shape and the ranges that hold
everywhere. The Megha messages are in ``wire_checks_megha``.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

from cellbed.domain import wire
from cellbed.domain.errors import InvalidArgument
from cellbed.domain.validate import (MAX_ATTR_TEXT, MAX_ATTRIBUTES, MAX_CONSTRAINTS, MAX_CORES, MAX_MIB, MAX_NAME,
                                     MIN_CAPACITY, INT64, bounded_list, bounded_str, enum_value, finite_in_range,
                                     timestamp)
from cellbed.domain.vm import CPU_LOAD_RANGE, DIRTY_MIB_S_RANGE, MODEL_LIMITS, PRIORITY_RANGE
from cellbed.v1 import common_pb2 as cpb, masb_pb2 as masbpb, node_pb2 as npb

USE_SLACK = (2.0, 2.0, 2048.0)
"""A VM's measured use is at most 2 × its vCPUs in cores and 2 × its memory + 2 GiB (QEMU's
threads and its own memory, the TCG translation cache, come on top of the guest's)."""
MAX_SYNC_ENTRIES = 1_000_000
"""Node reports in one SyncCache request (a broker's whole cache)."""
MAX_VCPUS = MODEL_LIMITS.vcpus[1]
MAX_MEM_MIB = MODEL_LIMITS.mem_mib[1]


# --- shared types -------------------------------------------------------------------------------------

def resources(field: str, r: cpb.Resources, *, capacity: bool = False) -> None:
    """Finite cores and MiB, ≥ 0; for a *capacity*, > 0 (at least MIN_CAPACITY)."""
    for name, hi, unit in (("cpu_cores", MAX_CORES, "cores"), ("mem_mib", MAX_MIB, "MiB")):
        finite_in_range(f"{field}.{name}", getattr(r, name), MIN_CAPACITY if capacity else 0.0, hi, unit)


def constraints(field: str, cs: Sequence[cpb.Constraint]) -> None:
    bounded_list(field, cs, MAX_CONSTRAINTS)
    for i, c in enumerate(cs):
        bounded_str(f"{field}[{i}].attribute", c.attribute, MAX_ATTR_TEXT)
        bounded_str(f"{field}[{i}].value", c.value, MAX_ATTR_TEXT)
    wire.constraints_from_pb(cs)               # op known, attribute set, integers are integers


def attributes(field: str, attrs: Sequence[cpb.Attribute]) -> None:
    bounded_list(field, attrs, MAX_ATTRIBUTES)
    for i, a in enumerate(attrs):
        bounded_str(f"{field}[{i}].name", a.name, MAX_ATTR_TEXT)
        bounded_str(f"{field}[{i}].value", a.value, MAX_ATTR_TEXT)
    wire.attributes_from_pb(attrs)             # integers are 64-bit integers


def name(field: str, s: str, required: bool = True) -> None:
    bounded_str(field, s, MAX_NAME, required=required)


def workload(field: str, w: npb.Workload) -> None:
    """A guest's workload; the backend checks wss_mib against the VM's memory."""
    finite_in_range(f"{field}.cpu_load", w.cpu_load, *CPU_LOAD_RANGE)
    finite_in_range(f"{field}.wss_mib", w.wss_mib, 0, MAX_MEM_MIB, "MiB")
    finite_in_range(f"{field}.dirty_mib_s", w.dirty_mib_s, *DIRTY_MIB_S_RANGE, "MiB/s")


def vm_spec(field: str, s: npb.VmSpec) -> None:
    """A VM spec's shape; its ranges on a given backend are VmSpec.validate's (the node's)."""
    name(f"{field}.name", s.name)
    name(f"{field}.user", s.user, required=False)
    finite_in_range(f"{field}.mem_mib", s.mem_mib, 0, MAX_MEM_MIB, "MiB")
    finite_in_range(f"{field}.vcpus", s.vcpus, 0, MAX_VCPUS)
    finite_in_range(f"{field}.priority", s.priority, *PRIORITY_RANGE)
    finite_in_range(f"{field}.req_cpu_cores", s.req_cpu_cores, 0.0, MAX_VCPUS, "cores")
    workload(f"{field}.workload", s.workload)
    constraints(f"{field}.constraints", s.constraints)


# --- NodeAgent ----------------------------------------------------------------------------------------

def start_vm(req: npb.StartVmRequest) -> None:
    if not req.HasField("spec"):
        raise InvalidArgument("spec is required", reason="missing")
    vm_spec("spec", req.spec)


def set_workload(req: npb.SetWorkloadRequest) -> None:
    """Only the fields set change (the others keep their value)."""
    name("name", req.name)
    w = req.workload
    present = {f.name for f, _ in w.ListFields()}
    if "cpu_load" in present:
        finite_in_range("workload.cpu_load", w.cpu_load, *CPU_LOAD_RANGE)
    if "wss_mib" in present:
        finite_in_range("workload.wss_mib", w.wss_mib, 0, MAX_MEM_MIB, "MiB")
    if "dirty_mib_s" in present:
        finite_in_range("workload.dirty_mib_s", w.dirty_mib_s, *DIRTY_MIB_S_RANGE, "MiB/s")


def migrate_vm(req: npb.MigrateVmRequest) -> None:
    """Names and the timeout policy; the servicer checks the options' ranges as it converts
    them (MigrationOptions.validate)."""
    name("name", req.name)
    name("dest_host", req.dest_host)
    enum_value("options.timeout_policy", req.options.timeout_policy, npb.TimeoutPolicy.DESCRIPTOR)


def vm_use(cpu_field: str, cpu_cores: float, mem_field: str, mem_mib: float, s: npb.VmSpec) -> None:
    """What a VM on its way in uses (counted on its destination while it moves): at most what
    its spec can use, with room for QEMU's own threads and memory (USE_SLACK)."""
    vcpus, mem = s.vcpus or 1, s.mem_mib or 128        # spec_from_pb's defaults
    finite_in_range(cpu_field, cpu_cores, 0.0, USE_SLACK[0] * vcpus, "cores")
    finite_in_range(mem_field, mem_mib, 0.0, USE_SLACK[1] * mem + USE_SLACK[2], "MiB")


def prepare_incoming(req: npb.PrepareIncomingRequest) -> None:
    if not req.HasField("spec"):
        raise InvalidArgument("spec is required", reason="missing")
    vm_spec("spec", req.spec)
    name("src_host", req.src_host)
    name("migration_id", req.migration_id)
    vm_use("cpu_used_cores", req.cpu_used_cores, "mem_used_mib", req.mem_used_mib, req.spec)


def finish_incoming(req: npb.FinishIncomingRequest) -> None:
    name("migration_id", req.migration_id)
    name("name", req.name)
    name("boot_id", req.boot_id, required=False)


# --- MASB: tasks, reports, the San and the broker --------------------------------------------------------

def task_info(field: str, t: masbpb.TaskInfo) -> None:
    name(f"{field}.name", t.name)
    resources(f"{field}.used", t.used)
    resources(f"{field}.requested", t.requested)
    constraints(f"{field}.constraints", t.constraints)
    finite_in_range(f"{field}.priority", t.priority, *PRIORITY_RANGE)
    finite_in_range(f"{field}.mem_mib", t.mem_mib, 0.0, MAX_MIB, "MiB")
    finite_in_range(f"{field}.dirty_mib_s", t.dirty_mib_s, -1.0, DIRTY_MIB_S_RANGE[1], "MiB/s")   # -1: unknown
    finite_in_range(f"{field}.wss_mib", t.wss_mib, 0.0, MAX_MIB, "MiB")
    finite_in_range(f"{field}.cpu_mean", t.cpu_mean, 0.0, MAX_CORES, "cores")
    finite_in_range(f"{field}.cpu_var", t.cpu_var, 0.0, MAX_CORES ** 2, "cores²")


_ASR_CODES = frozenset(cpb.AsrClass.DESCRIPTOR.values_by_number)


def _in(r: cpb.Resources, lo: float) -> bool:
    return lo <= r.cpu_cores <= MAX_CORES and lo <= r.mem_mib <= MAX_MIB


def _report_ok(r: masbpb.NodeReport, now: float, skew: float) -> bool:
    """True only if :func:`node_report` would pass *r*: the same tests, without building a field
    name or message per test (a broker checks every report it receives and every entry of every
    sync: a model cell's brokers check ~10 per node per simulated minute)."""
    if not 0 < len(r.host) <= MAX_NAME or len(r.via_broker) > MAX_NAME:
        return False
    if not (_in(r.capacity, MIN_CAPACITY) and _in(r.used, 0.0) and _in(r.requested, 0.0)
            and _in(r.prod_requested, 0.0)):
        return False
    t = r.sampled_unix_s
    if r.asr_class not in _ASR_CODES or not (math.isfinite(t) and 0 <= t <= now + skew):
        return False
    attrs = r.attributes
    if len(attrs) > MAX_ATTRIBUTES:
        return False
    for a in attrs:
        if len(a.name) > MAX_ATTR_TEXT or len(a.value) > MAX_ATTR_TEXT:
            return False
    for a in attrs:
        if a.integer:
            try:
                v = int(a.value)
            except ValueError:
                return False
            if not INT64[0] <= v <= INT64[1]:
                return False
    return True


def node_report(field: str, r: masbpb.NodeReport, now: float, skew: float) -> None:
    """A node's report (MQTT, ReportNodeState, SyncCache): its capacity > 0, its use ≥ 0, its
    measurement time not beyond *skew* seconds in the receiver's future."""
    if _report_ok(r, now, skew):
        return
    _node_report(field, r, now, skew)


def _node_report(field: str, r: masbpb.NodeReport, now: float, skew: float) -> None:
    """node_report's tests one by one: the first that fails raises, naming its field."""
    name(f"{field}.host", r.host)
    resources(f"{field}.capacity", r.capacity, capacity=True)
    resources(f"{field}.used", r.used)
    resources(f"{field}.requested", r.requested)
    resources(f"{field}.prod_requested", r.prod_requested)
    attributes(f"{field}.attributes", r.attributes)
    enum_value(f"{field}.asr_class", r.asr_class, cpb.AsrClass.DESCRIPTOR)
    timestamp(f"{field}.sampled_unix_s", r.sampled_unix_s, now, skew)
    name(f"{field}.via_broker", r.via_broker, required=False)


def task_migration(req: masbpb.TaskMigrationRequest) -> None:
    name("san_id", req.san_id)
    name("src_host", req.src_host)
    task_info("task", req.task)


def task_migration_process(req: masbpb.TaskMigrationProcessRequest) -> None:
    name("san_id", req.san_id)
    name("src_host", req.src_host)
    name("migration_id", req.migration_id)
    task_info("task", req.task)
    if not req.HasField("spec"):
        raise InvalidArgument("spec is required", reason="missing")
    vm_spec("spec", req.spec)
    u = req.task.used                                   # reserved on this host while the task moves
    vm_use("task.used.cpu_cores", u.cpu_cores, "task.used.mem_mib", u.mem_mib, req.spec)


def get_candidate_nodes(req: masbpb.GetCandidateNodesRequest) -> None:
    task_info("task", req.task)
    name("src_host", req.src_host, required=False)
    name("san_id", req.san_id, required=False)


def allocate_task(req: masbpb.AllocateTaskRequest) -> None:
    task_info("task", req.task)
    if req.launch or req.HasField("spec"):
        vm_spec("spec", req.spec)


def sync_cache_header(req: masbpb.SyncCacheRequest) -> None:
    """The sender's name and the number of entries (what an in-sync reply still checks)."""
    name("broker", req.broker)
    bounded_list("entries", req.entries, MAX_SYNC_ENTRIES)


def sync_cache(req: masbpb.SyncCacheRequest, now: float, skew: float,
               checked: Callable[[masbpb.NodeReport], bool] | None = None) -> None:
    """Every entry a node report (:func:`node_report`). *checked(r)*, if given, says that this very
    report (equal in every field) has passed node_report here already: then only its time is
    tested again (the receiver's clock moved). A broker's cache holds only reports it checked, and
    a peer's sync sends mostly those same reports back."""
    sync_cache_header(req)
    for i, r in enumerate(req.entries):
        if checked is not None and checked(r) and r.sampled_unix_s <= now + skew:
            continue
        if not _report_ok(r, now, skew):
            _node_report(f"entries[{i}]", r, now, skew)
