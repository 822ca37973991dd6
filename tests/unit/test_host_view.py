"""The SAN's read-only view of its host (issue 11): live, (cpu, mem) order, and not writable."""
import pytest

from cellbed.daemon.config import NodeConfig
from cellbed.daemon.host_view import HostView
from cellbed.daemon.inventory import Reservation, VmEntry
from cellbed.domain.vm import VmSpec


def test_the_view_sums_in_cpu_mem_order_follows_changes_and_refuses_writes():
    cfg = NodeConfig(host="h1", cpu_cores=4.0, mem_mib=8192, attributes={"rack": "a"})
    vms, incoming = {}, {}
    v = HostView(cfg, vms, incoming)
    assert v.allocated() == (0, 0) and v.used() == (0, 0) and v.vm_count == 0
    # VM: 1 vCPU at 0.5 load requests 0.5 cores; 512 MiB. Incoming: 2 cores requested, production.
    vms["a"] = VmEntry(spec=VmSpec(name="a", mem_mib=512, vcpus=1, cpu_load=0.5), cpu_used_cores=0.4, rss_mib=300.0)
    incoming["m1"] = Reservation(VmSpec(name="b", mem_mib=1024, vcpus=2, cpu_load=0.25, req_cpu_cores=2.0,
                                        production=True), "h2", 99.0, cpu_used=0.3, mem_used=700.0)
    assert v.allocated() == (pytest.approx(2.5), 1536)          # 0.5 + 2.0 cores, 512 + 1024 MiB
    assert v.used() == (pytest.approx(0.7), pytest.approx(1000.0))
    assert v.prod_requested() == (pytest.approx(2.0), pytest.approx(1024.0))
    assert v.capacity == (4.0, 8192) and v.vm_names == {"a"} and v.incoming_names == {"b"}
    with pytest.raises(TypeError):
        v.vms["x"] = vms["a"]
    with pytest.raises(TypeError):
        v.attributes["rack"] = "b"
