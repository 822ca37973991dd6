"""What every request to a Megha master (GlobalMaster, LocalMaster) or to the sampling baseline
(SamplingWorker, SamplingScheduler), and every LM state a GM receives (over MQTT or piggy-backed
on a reply), must satisfy before an agent acts on it (issue 13, part 5). Pure, like
``wire_checks`` (whose helpers these use): InvalidArgument naming the first field out of range.

Timestamps are checked against the receiver's clock *now* with its ``max_clock_skew_s``. What
needs the agent's state stays with the agent: a GM checks a task against its users and its view
(the largest host, the attributes), an LM against its partitions and hosts.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from cellbed.domain import wire_checks as wc
from cellbed.domain.errors import InvalidArgument
from cellbed.domain.validate import (MAX_CORES, MAX_DURATION_S, MAX_MIB, MAX_MS, MAX_TEXT, bounded_list,
                                     bounded_str, enum_value, finite_in_range, positive, same_length, shown,
                                     timestamp)
from cellbed.domain.vm import NAME_RE, PRIORITY_RANGE
from cellbed.v1 import megha_pb2 as meghapb

MAX_EVENTS = 1_000_000
"""Task events in one request (an LM's whole outbox after a long GM outage)."""
MAX_TASKS = 1_000_000
"""Tasks named or replicated in one request (FindTasks after a GM restart, a full Replicate)."""
MAX_HOSTS = 1_000_000
"""Hosts of one LM (an LmState lists each)."""
MAX_GMS = 1024
"""GMs (an LM's partitions)."""
MAX_USERS = 100_000
"""Users with use on one LM."""
MAX_EPOCH = 2 ** 31 - 1
"""An LM's epoch: its state version is epoch << 32 plus its changes since, a 63-bit number."""


def _ms(field: str, v: float) -> None:
    """A measured interval, ms: finite and ≥ 0 (an allocation record's parts are)."""
    finite_in_range(field, v, 0.0, MAX_MS, "ms")


def _names(field: str, xs: Sequence[str], limit: int) -> None:
    bounded_list(field, xs, limit)
    for i, x in enumerate(xs):
        wc.name(f"{field}[{i}]", x)


def task(field: str, t: meghapb.MeghaTask, now: float, skew: float, *, named: bool = True,
         request: str = "positive") -> None:
    """A task: a VM name (required when *named*), a request of finite cores and MiB (*request*:
    "positive" for what a GM places, "any" (≥ 0) for a task an LM adopted from its node, "" when
    the caller checks it: a GM, against the largest host of its view), finite times, a known
    priority, at most 64 constraints."""
    wc.name(f"{field}.name", t.name, required=named)
    if t.name and not NAME_RE.fullmatch(t.name):
        raise InvalidArgument(f"{field}.name={shown(t.name)} is invalid: allowed [a-z0-9][a-z0-9-]{{0,30}}",
                              reason="malformed")
    wc.name(f"{field}.user", t.user, required=False)
    for name, hi, unit in (("cpu_cores", MAX_CORES, "cores"), ("mem_mib", MAX_MIB, "MiB")):
        v = getattr(t.request, name)
        if request == "positive":
            positive(f"{field}.request.{name}", v, hi, unit)
        elif request:
            finite_in_range(f"{field}.request.{name}", v, 0.0, hi, unit)
    wc.constraints(f"{field}.constraints", t.constraints)
    finite_in_range(f"{field}.priority", t.priority, *PRIORITY_RANGE)
    finite_in_range(f"{field}.duration_s", t.duration_s, 0.0, MAX_DURATION_S, "s")
    finite_in_range(f"{field}.vcpus", t.vcpus, 0, wc.MAX_VCPUS)
    wc.workload(f"{field}.workload", t.workload)
    timestamp(f"{field}.arrival_unix_s", t.arrival_unix_s, now, skew)


def placement(field: str, p: meghapb.Placement) -> None:
    for name in ("lm", "lm_instance", "host", "partition"):
        wc.name(f"{field}.{name}", getattr(p, name), required=False)
    _names(f"{field}.preempted", p.preempted, MAX_TASKS)


def timing(field: str, tm: meghapb.LmTiming, now: float, skew: float) -> None:
    for name in ("comm_in_ms", "queue_ms", "processing_ms", "comm_node_ms", "worker_queue_ms", "boot_ms"):
        _ms(f"{field}.{name}", getattr(tm, name))
    timestamp(f"{field}.start_unix_s", tm.start_unix_s, now, skew)


def task_event(field: str, ev: meghapb.TaskEvent, now: float, skew: float) -> None:
    wc.name(f"{field}.name", ev.name)
    enum_value(f"{field}.kind", ev.kind, meghapb.TaskEventKind.DESCRIPTOR, unspecified=False)
    placement(f"{field}.placement", ev.placement)
    if ev.kind == meghapb.TASK_EVENT_KIND_STARTED:       # a start makes an allocation record: on a host
        wc.name(f"{field}.placement.host", ev.placement.host)
    timing(f"{field}.timing", ev.timing, now, skew)
    bounded_str(f"{field}.detail", ev.detail, MAX_TEXT)
    timestamp(f"{field}.unix_s", ev.unix_s, now, skew)
    if ev.HasField("task"):
        task(f"{field}.task", ev.task, now, skew, named=False, request="any")


def lm_state(st: meghapb.LmState, now: float, skew: float) -> None:
    """An LM's state (full or delta): names, an epoch and version in range, parallel per-host
    arrays of equal length with finite numbers, owners that index gms."""
    wc.name("lm", st.lm)
    wc.name("instance", st.instance, required=False)
    finite_in_range("epoch", st.epoch, 0, MAX_EPOCH)
    lo, hi = st.epoch << 32, ((st.epoch + 1) << 32) - 1
    if not lo <= st.version <= hi:      # an LM counts its changes from epoch << 32 (LocalMaster.start, takeover)
        raise InvalidArgument(f"version={st.version} is out of range for epoch {st.epoch}: allowed {lo}..{hi} "
                              "(epoch << 32 plus the changes since)", reason="out_of_range")
    timestamp("sent_unix_s", st.sent_unix_s, now, skew)
    wc.name("hosts_digest", st.hosts_digest, required=False)
    _names("gms", st.gms, MAX_GMS)
    n = len(bounded_list("owner", st.owner, MAX_HOSTS))
    same_length("free_cpu_cores", len(st.free_cpu_cores), "owner", n)
    same_length("free_mem_mib", len(st.free_mem_mib), "owner", n)
    if not st.full:
        same_length("host_index", len(bounded_list("host_index", st.host_index, MAX_HOSTS)), "owner", n)
        if st.host_index and max(st.host_index) >= MAX_HOSTS:
            raise InvalidArgument(f"host_index has {max(st.host_index)}: allowed < {MAX_HOSTS}", reason="out_of_range")
    if st.owner and max(st.owner) >= len(st.gms):
        raise InvalidArgument(f"owner has {max(st.owner)}: allowed an index into gms (< {len(st.gms)})",
                              reason="out_of_range")
    for field, hi in (("free_cpu_cores", MAX_CORES), ("free_mem_mib", MAX_MIB)):
        a = np.asarray(getattr(st, field), dtype=float)
        bad = np.flatnonzero(~np.isfinite(a) | (np.abs(a) > hi))
        if bad.size:
            i = int(bad[0])
            finite_in_range(f"{field}[{i}]", float(a[i]), -hi, hi)
    bounded_list("usage", st.usage, MAX_USERS)
    for i, u in enumerate(st.usage):
        wc.name(f"usage[{i}].user", u.user, required=False)
        wc.resources(f"usage[{i}].used", u.used)
    bounded_list("logical_nodes", st.logical_nodes, MAX_GMS)
    wc.resources("capacity", st.capacity)


# --- GlobalMaster ------------------------------------------------------------------------------------

def wait_s(v: float) -> None:
    finite_in_range("wait_s", v, 0.0, 3600.0, "s")


def submit(req: meghapb.SubmitRequest, now: float, skew: float) -> None:
    """The task's shape; the GM also checks it against its users and its view (the largest host,
    the attributes)."""
    task("task", req.task, now, skew, named=False, request="")
    wait_s(req.wait_s)


def get_task(req: meghapb.GetTaskRequest) -> None:
    wc.name("name", req.name)
    wait_s(req.wait_s)


def report_task_events(req: meghapb.ReportTaskEventsRequest, now: float, skew: float) -> None:
    """Every event is checked before any is applied: a batch is taken whole or refused."""
    wc.name("lm", req.lm, required=False)
    wc.name("instance", req.instance, required=False)
    bounded_list("events", req.events, MAX_EVENTS)
    for i, ev in enumerate(req.events):
        task_event(f"events[{i}]", ev, now, skew)


# --- LocalMaster --------------------------------------------------------------------------------------

def placement_request(req, now: float, skew: float) -> None:
    """LaunchRequest and RepartitionRequest (a host), PreemptRequest (a victim user)."""
    task("task", req.task, now, skew)
    wc.name("gm", req.gm)
    if isinstance(req, meghapb.PreemptRequest):
        wc.name("victim_user", req.victim_user)
    else:
        wc.name("host", req.host)
    timestamp("sent_unix_s", req.sent_unix_s, now, skew)


def find_tasks(req: meghapb.FindTasksRequest) -> None:
    _names("names", req.names, MAX_TASKS)


def stop_task(req: meghapb.StopTaskRequest) -> None:
    wc.name("name", req.name)


def task_record(field: str, r: meghapb.LmTaskRecord, now: float, skew: float) -> None:
    task(f"{field}.task", r.task, now, skew, request="any")
    wc.name(f"{field}.host", r.host)
    wc.name(f"{field}.partition", r.partition, required=False)
    wc.name(f"{field}.submit_gm", r.submit_gm, required=False)
    enum_value(f"{field}.state", r.state, meghapb.TaskState.DESCRIPTOR)
    timestamp(f"{field}.start_unix_s", r.start_unix_s, now, skew)


def replicate(req: meghapb.ReplicateRequest, peer: str, now: float, skew: float) -> None:
    """Only the LM's peer replicates to it."""
    wc.name("instance", req.instance)
    if req.instance != peer:
        raise InvalidArgument(f"instance={shown(req.instance)} is not this LM's peer: allowed {peer!r}"
                              if peer else f"instance={shown(req.instance)}: this LM has no peer to replicate from",
                              reason="unknown_sender")
    finite_in_range("epoch", req.epoch, 0, MAX_EPOCH)
    bounded_list("upserts", req.upserts, MAX_TASKS)
    for i, r in enumerate(req.upserts):
        task_record(f"upserts[{i}]", r, now, skew)
    _names("removed", req.removed, MAX_TASKS)
    bounded_list("outbox", req.outbox, MAX_EVENTS)
    same_length("outbox_gm", len(req.outbox_gm), "outbox", len(req.outbox))
    for i, (gm, ev) in enumerate(zip(req.outbox_gm, req.outbox)):
        wc.name(f"outbox_gm[{i}]", gm)
        task_event(f"outbox[{i}]", ev, now, skew)


# --- the sampling baseline -----------------------------------------------------------------------------

def probe(req: meghapb.ProbeRequest, now: float, skew: float) -> None:
    wc.name("scheduler", req.scheduler, required=False)
    wc.name("task", req.task)
    wc.resources("request", req.request)
    timestamp("sent_unix_s", req.sent_unix_s, now, skew)


def claim_task(req: meghapb.ClaimTaskRequest, now: float, skew: float) -> None:
    wc.name("worker", req.worker)
    wc.name("task", req.task)
    timestamp("sent_unix_s", req.sent_unix_s, now, skew)
    _ms("worker_queue_ms", req.worker_queue_ms)
    _ms("probe_comm_ms", req.probe_comm_ms)


def report_start(req: meghapb.ReportStartRequest, now: float, skew: float) -> None:
    task_event("event", req.event, now, skew)

