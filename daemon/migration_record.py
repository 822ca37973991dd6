"""A migration record's wire parts: the options as sent, and libvirt's completed-job statistics copied into the record."""
from __future__ import annotations

from cellbed.domain.vm import MigrationOptions
from cellbed.v1 import node_pb2 as npb


def options_pb(o: MigrationOptions) -> npb.MigrationOptions:
    pol = {"abort": npb.TIMEOUT_POLICY_ABORT, "auto-converge": npb.TIMEOUT_POLICY_AUTO_CONVERGE,
           "postcopy": npb.TIMEOUT_POLICY_POSTCOPY}[o.timeout_policy.value]
    return npb.MigrationOptions(bandwidth_mib_s=o.bandwidth_mib_s, max_downtime_ms=o.max_downtime_ms,
                               auto_converge=o.auto_converge, postcopy=o.postcopy, compression=o.compression,
                               parallel_connections=o.parallel_connections,
                               completion_timeout_s=o.completion_timeout_s, timeout_policy=pol, tls=o.tls)


def fill_stats(rec: npb.MigrationRecord, st) -> None:
    rec.wall_ms, rec.time_elapsed_ms, rec.downtime_ms = st.wall_ms, st.time_elapsed_ms, st.downtime_ms
    rec.setup_time_ms, rec.data_total_bytes = st.setup_time_ms, st.data_total_bytes
    rec.memory_processed_bytes, rec.memory_iteration = st.memory_processed_bytes, st.memory_iteration
    rec.memory_dirty_rate, rec.memory_bps = st.memory_dirty_rate, st.memory_bps
    rec.postcopy_switched, rec.timeout_action = st.postcopy_switched, st.timeout_action
