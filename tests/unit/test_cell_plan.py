"""CellPlan.build (pure: names, addresses, capacities of a single-box cell, DESIGN §4) and
the cell's state-file Recorder."""

from __future__ import annotations

import ipaddress
import json

import pytest

from cellbed.cell.cell import CellPlan, Recorder
from cellbed.domain.errors import InvalidArgument

IFNAMSIZ = 16  # Linux interface names: at most 15 bytes plus the NUL


def test_three_host_plan():
    p = CellPlan.build("demo", 3, "10.231.0.0/24", [0.5], [1024])
    assert p.name == "demo" and p.subnet == "10.231.0.0/24"
    assert [h.name for h in p.hosts] == ["h1", "h2", "h3"]
    assert [h.index for h in p.hosts] == [1, 2, 3]
    # host i gets subnet[10 + i]
    assert [h.address for h in p.hosts] == ["10.231.0.11", "10.231.0.12", "10.231.0.13"]
    assert [h.netns for h in p.hosts] == ["cb-demo-h1", "cb-demo-h2", "cb-demo-h3"]
    assert [h.veth for h in p.hosts] == ["cbdemoh1", "cbdemoh2", "cbdemoh3"]
    assert p.bridge == "cbdemobr"
    assert p.bridge_address == "10.231.0.1"
    assert p.prefixlen == 24


ADDRESSES = [
    # subnet, hosts, expected first and last host address (subnet[10 + 1], subnet[10 + n])
    ("10.231.0.0/24", 1, "10.231.0.11", "10.231.0.11"),
    ("10.231.0.0/24", 32, "10.231.0.11", "10.231.0.42"),       # 10 + 32 = 42
    ("192.168.7.0/27", 16, "192.168.7.11", "192.168.7.26"),    # 32 addresses ≥ 16 + 16
    ("172.16.0.0/16", 5, "172.16.0.11", "172.16.0.15"),
    ("10.0.1.0/25", 3, "10.0.1.11", "10.0.1.13"),
]


@pytest.mark.parametrize(("subnet", "n", "first", "last"), ADDRESSES)
def test_addresses(subnet, n, first, last):
    p = CellPlan.build("c1", n, subnet, [1.0], [1024])
    assert len(p.hosts) == n
    assert (p.hosts[0].address, p.hosts[-1].address) == (first, last)
    net = ipaddress.ip_network(subnet)
    addrs = [ipaddress.ip_address(h.address) for h in p.hosts]
    assert len(set(addrs)) == n
    for a in addrs:
        assert a in net and a not in (net.network_address, net.broadcast_address)
        assert str(a) != p.bridge_address


@pytest.mark.parametrize("name", ["a", "abcdef", "default", "x9y8z7w6v5"])
def test_interface_names_fit_ifnamsiz(name):
    p = CellPlan.build(name, 32, "10.231.0.0/24", [1.0], [1024])  # longest name, most hosts (h32)
    for ifname in [p.bridge, *(h.veth for h in p.hosts)]:
        assert len(ifname.encode()) <= IFNAMSIZ - 1, ifname
    assert len({h.veth for h in p.hosts}) == 32
    assert p.bridge not in {h.veth for h in p.hosts}


CAPACITY = [
    # name, hosts, cpu list, mem list, expected per-host cpu, expected per-host mem
    ("one value broadcast", 3, [0.5], [1024], [0.5, 0.5, 0.5], [1024, 1024, 1024]),
    ("one per host", 3, [0.5, 1.0, 2.0], [512, 1024, 2048], [0.5, 1.0, 2.0], [512, 1024, 2048]),
    ("cpu broadcast, mem per host", 2, [1.5], [256, 768], [1.5, 1.5], [256, 768]),
    ("single host, single value", 1, [4.0], [4096], [4.0], [4096]),
    ("lower bounds", 2, [0.05], [128], [0.05, 0.05], [128, 128]),
    ("upper bounds", 1, [64], [1 << 20], [64], [1 << 20]),
]


@pytest.mark.parametrize(("n", "cpus", "mems", "want_cpu", "want_mem"), [c[1:] for c in CAPACITY],
                         ids=[c[0] for c in CAPACITY])
def test_capacity_lists(n, cpus, mems, want_cpu, want_mem):
    p = CellPlan.build("c1", n, "10.231.0.0/24", cpus, mems)
    assert [h.cpu_cores for h in p.hosts] == want_cpu
    assert [h.mem_mib for h in p.hosts] == want_mem


ERRORS = [
    # name, (cell, hosts, subnet, cpus, mems), words in the message
    ("upper-case name", ("Demo", 3, "10.231.0.0/24", [1.0], [1024]), "cell name"),
    ("11-char name", ("abcdefghijk", 3, "10.231.0.0/24", [1.0], [1024]), "1..10"),
    ("empty name", ("", 3, "10.231.0.0/24", [1.0], [1024]), "cell name"),
    ("dash in name", ("a-b", 3, "10.231.0.0/24", [1.0], [1024]), "cell name"),
    ("space in name", ("a b", 3, "10.231.0.0/24", [1.0], [1024]), "cell name"),
    ("0 hosts", ("c1", 0, "10.231.0.0/24", [1.0], [1024]), "hosts=0"),
    ("33 hosts", ("c1", 33, "10.231.0.0/24", [1.0], [1024]), "allowed 1..32"),
    ("public subnet", ("c1", 3, "8.8.8.0/24", [1.0], [1024]), "private IPv4"),
    ("IPv6 ULA subnet", ("c1", 3, "fd00:cb::/64", [1.0], [1024]), "private IPv4"),
    ("host bits set", ("c1", 3, "10.231.0.1/24", [1.0], [1024]), "subnet"),
    ("not a subnet", ("c1", 3, "banana", [1.0], [1024]), "subnet"),
    # /27 = 32 addresses; 17 hosts need 17 + 16 = 33
    ("subnet too small", ("c1", 17, "192.168.7.0/27", [1.0], [1024]), "room for 17 hosts"),
    ("2 cpus for 3 hosts", ("c1", 3, "10.231.0.0/24", [1.0, 2.0], [1024]), "give 1 or 3 values"),
    ("4 mems for 3 hosts", ("c1", 3, "10.231.0.0/24", [1.0], [1, 2, 3, 4]), "give 1 or 3 values"),
    ("no cpus", ("c1", 3, "10.231.0.0/24", [], [1024]), "give 1 or 3 values"),
    ("cpu 0.04 < 0.05", ("c1", 2, "10.231.0.0/24", [0.04], [1024]), "host-cpus"),
    ("cpu 65 > 64", ("c1", 2, "10.231.0.0/24", [1.0, 65.0], [1024]), "host-cpus"),
    ("mem 127 < 128", ("c1", 2, "10.231.0.0/24", [1.0], [127]), "host-mem-mib"),
]


@pytest.mark.parametrize(("args", "words"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_build_errors(args, words):
    with pytest.raises(InvalidArgument) as ei:
        CellPlan.build(*args)
    assert words in str(ei.value), str(ei.value)


def test_all_digit_cell_name_is_allowed():
    p = CellPlan.build("42", 1, "10.231.0.0/24", [1.0], [1024])
    assert p.bridge == "cb42br"


def test_non_ascii_cell_name_is_refused():
    with pytest.raises(InvalidArgument, match="cell name"):
        CellPlan.build("éééééé", 1, "10.231.0.0/24", [1.0], [1024])


def test_recorder_writes_resources_in_order(tmp_path):
    path = tmp_path / "cell.json"
    rec = Recorder(str(path), {"name": "c1", "resources": [{"kind": "dir", "path": str(tmp_path)}]})
    # written at construction, before any resource is created
    assert json.loads(path.read_text())["resources"] == [{"kind": "dir", "path": str(tmp_path)}]
    rec.add(kind="link", name="cbc1br")
    rec.add(kind="netns", name="cb-c1-h1")
    # each add is on disk immediately (a crash right after must leave the record)
    assert [r["kind"] for r in json.loads(path.read_text())["resources"]] == ["dir", "link", "netns"]
    proc = rec.add(kind="process", name="mosquitto")
    proc.update(pid=1234, start_time=5678)   # as up() does once the process exists
    rec.flush()
    data = json.loads(path.read_text())
    assert data["name"] == "c1"
    assert data["resources"] == [
        {"kind": "dir", "path": str(tmp_path)},
        {"kind": "link", "name": "cbc1br"},
        {"kind": "netns", "name": "cb-c1-h1"},
        {"kind": "process", "name": "mosquitto", "pid": 1234, "start_time": 5678},
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cell.json"]  # no temp file left behind
