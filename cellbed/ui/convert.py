"""The agents' messages as the page's JSON: the fields each view shows, numbers as numbers, enum
values by their short lower-case names."""
from __future__ import annotations

from google.protobuf import json_format

from cellbed.v1 import common_pb2 as cpb, node_pb2 as npb

ASR = {v: k.replace("ASR_CLASS_", "") for k, v in cpb.AsrClass.items()}
VM_STATE = {v: k.replace("VM_STATE_", "").lower().replace("_", " ") for k, v in npb.VmState.items()}
OUTCOME = {v: k.replace("MIGRATION_OUTCOME_", "").lower().replace("_", " ") for k, v in npb.MigrationOutcome.items()}
EVENT = {v: k.replace("EVENT_KIND_", "").lower().replace("_", " ") for k, v in npb.EventKind.items()}
IN_FLIGHT = "in flight"


def message(m) -> dict:
    """Any message, generically (the SAN, broker and Megha panels): proto field names, enums by name,
    every field present; 64-bit integers come as strings, which the page reads with Number()."""
    return json_format.MessageToDict(m, preserving_proto_field_name=True,
                                     always_print_fields_with_no_presence=True)


def host(s: npb.HostState) -> dict:
    return {"host": s.host, "address": s.address, "asr": ASR.get(s.asr_class, "?"), "accel": s.accel,
            "cap_cpu": s.capacity.cpu_cores, "cap_mem": s.capacity.mem_mib,
            "req_cpu": s.cpu_req_cores, "req_mem": s.mem_alloc_mib,
            "used_cpu": s.cpu_used_cores, "used_mem": s.mem_used_mib,
            "vm_count": s.vm_count, "migrations_in": s.migrations_in, "migrations_out": s.migrations_out,
            "leases": len(s.leases), "unresolved": list(s.unresolved), "sampled_unix_s": s.sampled_unix_s}


def vm(v: npb.VmInfo) -> dict:
    w = v.spec.workload
    return {"name": v.spec.name, "state": VM_STATE.get(v.state, "?"), "reason": v.state_reason,
            "mem_mib": v.spec.mem_mib, "vcpus": v.spec.vcpus, "req_cpu": v.spec.req_cpu_cores,
            "cpu_used": v.cpu_used_cores, "rss_mib": v.rss_mib, "cpu_load": w.cpu_load,
            "dirty_mib_s": -1.0 if w.dirty_max else w.dirty_mib_s, "wss_mib": w.wss_mib,
            "heartbeat": int(v.heartbeat), "production": v.spec.production, "priority": v.spec.priority}


def started(ev: npb.Event) -> dict:
    """A MIGRATION_STARTED event, whose detail is "<migration id> -> <destination>"."""
    mid, _, dst = ev.detail.partition(" -> ")
    return {"id": mid.strip(), "vm": ev.vm, "src": ev.host, "dst": dst.strip(), "status": IN_FLIGHT,
            "phase": "starting", "started_unix_s": ev.unix_s, "updated_unix_s": ev.unix_s}


def progress(ev: npb.Event) -> dict:
    p = ev.progress
    return {"id": p.migration_id, "vm": p.vm or ev.vm, "src": ev.host, "status": IN_FLIGHT, "phase": p.phase,
            "iteration": int(p.memory_iteration), "sent": int(p.data_processed_bytes),
            "remaining": int(p.data_remaining_bytes), "total": int(p.data_total_bytes),
            "bps": int(p.memory_bps), "dirty_bps": int(p.memory_dirty_rate), "elapsed_ms": p.elapsed_ms,
            "updated_unix_s": ev.unix_s}


def record(r: npb.MigrationRecord, unix_s: float = 0.0) -> dict:
    """A finished migration (MIGRATION_FINISHED, or ListMigrations)."""
    return {"id": r.id, "vm": r.vm, "src": r.src, "dst": r.dst, "status": OUTCOME.get(r.outcome, "?"),
            "phase": "done", "iteration": int(r.memory_iteration), "sent": int(r.memory_processed_bytes),
            "remaining": 0, "total": int(r.data_total_bytes), "bps": int(r.memory_bps),
            "elapsed_ms": r.time_elapsed_ms, "wall_ms": r.wall_ms, "downtime_ms": r.downtime_ms,
            "detail": r.detail, "forced": r.forced, "tls": r.tls, "started_unix_s": r.start_unix_s,
            "updated_unix_s": unix_s or r.start_unix_s + r.wall_ms / 1000}


def event(ev: npb.Event) -> dict:
    return {"seq": int(ev.seq), "unix_s": ev.unix_s, "host": ev.host, "kind": EVENT.get(ev.kind, "?"),
            "vm": ev.vm, "detail": ev.detail}
