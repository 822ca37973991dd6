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


@pytest.mark.parametrize("seed", range(6))
def test_totals_sum_the_vms_here_then_those_arriving_to_the_last_bit(seed):
    """totals() (and used()/allocated(), read from it) add the VMs here in their order, then the
    incoming reservations: the order every earlier sample and tick used, so trajectories stay
    byte-identical (random fractions over six seeds make another order show in the last bits)."""
    import random
    rnd = random.Random(seed)
    cfg = NodeConfig(host="h1", cpu_cores=64.0, mem_mib=262144)
    vms, incoming = {}, {}
    v = HostView(cfg, vms, incoming)
    assert v.totals() == (0, 0, 0, 0, 0, 0)
    for i in range(40):
        vms[f"v{i}"] = VmEntry(spec=VmSpec(name=f"v{i}", mem_mib=rnd.randrange(64, 4096), vcpus=rnd.randrange(1, 5),
                                           cpu_load=rnd.random(), req_cpu_cores=rnd.random() * 0.3 + 0.01),
                               cpu_used_cores=rnd.random() * 0.1, rss_mib=rnd.random() * 1e3)
    for i in range(3):
        incoming[f"m{i}"] = Reservation(VmSpec(name=f"i{i}", mem_mib=512 + i, vcpus=1, cpu_load=0.3,
                                               req_cpu_cores=rnd.random()), "h2", 99.0,
                                        cpu_used=rnd.random(), mem_used=rnd.random() * 100)

    def in_order(values):
        total = 0
        for x in values:
            total += x
        return total
    here, arriving = list(vms.values()), list(incoming.values())
    want = (in_order(e.cpu_used_cores for e in here), in_order(e.rss_mib for e in here),
            in_order([e.cpu_used_cores for e in here] + [r.cpu_used for r in arriving]),
            in_order([e.rss_mib for e in here] + [r.mem_used for r in arriving]),
            in_order([e.spec.requested_cpu for e in here] + [r.spec.requested_cpu for r in arriving]),
            in_order([e.spec.mem_mib for e in here] + [r.spec.mem_mib for r in arriving]))
    assert v.totals() == want
    assert v.used() == want[2:4] and v.allocated() == want[4:6]
    assert want[2:4] != want[0:2]                 # the incoming VMs count in used(), not in the VMs' own use
    assert isinstance(v.allocated()[1], int)      # MiB requested stay an integer
