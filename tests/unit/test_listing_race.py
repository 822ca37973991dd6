"""A node's sample lists the hypervisor's domains, and a start (or an arrival) completes while the
listing is still being taken (libvirt can take seconds on a loaded host). The listing does not
hold the new VM; the sample must not take that for the VM vanishing. Before the fix the node
dropped it ("vanished from libvirt") and adopted it back at the next sample: for one monitor
period the host neither counted nor watched a running guest. (The converse of the stop race in
tests/component/test_node_servicer.py.) Model host, virtual time.

And a domain listed while libvirtd restarts (below)."""
import asyncio
import threading
import types

import libvirt

from cellbed import assembly
from cellbed.daemon import domxml
from cellbed.daemon.hv_libvirt import LibvirtBackend
from cellbed.domain.vm import DomainSample, DomState, VmSpec
from cellbed.runtime.clock import run_virtual


async def host_with_vm_a():
    """A model host, not started (the test takes its samples), running vm-a, sampled once."""
    env = assembly.model_env(0)
    h = await assembly.model_host(env, assembly.model_config("h1", 8.0, 16384), start=False)
    await h.agent.start_vm(VmSpec(name="vm-a", mem_mib=512, vcpus=1, cpu_load=0.5, wss_mib=256))
    await h.agent.sample()
    return env, h.agent


def test_a_vm_started_during_a_listing_is_not_dropped_as_vanished():
    async def main():
        env, agent = await host_with_vm_a()
        listed, go_on = asyncio.Event(), asyncio.Event()
        plain_list = agent.hv.list

        async def slow_list():
            doms = await plain_list()            # the snapshot: vm-a only
            listed.set()
            await go_on.wait()
            return doms
        agent.hv.list = slow_list
        sample = asyncio.create_task(agent.sample())
        await listed.wait()
        await agent.start_vm(VmSpec(name="vm-b", mem_mib=512, vcpus=1, cpu_load=0.5, wss_mib=256))
        go_on.set()
        await sample
        kept = sorted(agent.vms)
        agent.hv.list = plain_list
        await agent.sample()                     # the next listing holds it
        return kept, sorted(agent.vms), agent.vms["vm-b"].reason
    kept, after, reason = run_virtual(main())
    assert kept == ["vm-a", "vm-b"]
    assert after == ["vm-a", "vm-b"] and reason != "starting"


# --- a domain listed while libvirtd restarts (chaos seed 4, kill_dst_libvirtd) ------------------------
# The arriving VM's metadata could not be read while h1's libvirtd was killed; the backend cached
# that as "not a Cellbed domain", the node dropped the VM as vanished and never adopted it again,
# although libvirt listed it running: its QEMU ran on h1 with no daemon listing it (an orphan).

SPEC = VmSpec(name="cv1", mem_mib=128, vcpus=1, cpu_load=0.05, wss_mib=48)


def libvirt_error(code: int) -> libvirt.libvirtError:
    e = libvirt.libvirtError("planted")
    e.err = (code, 0, f"planted error {code}", 0, "", None, None, 0, 0)
    return e


class Dom:
    """A listed domain whose metadata call fails with *codes* in turn, then answers."""

    def __init__(self, codes) -> None:
        self.codes = list(codes)

    def UUIDString(self):
        return "5202d0d6-935f-4ac1-9bf3-b641347183bc"

    def name(self):
        return "cv1"

    def metadata(self, kind, ns, flags):
        if self.codes:
            raise libvirt_error(self.codes.pop(0))
        return domxml.metadata_xml(SPEC)


class Conn:
    def __init__(self, dom) -> None:
        self.dom = dom

    def getAllDomainStats(self, what, flags):
        return [(self.dom, {"state.state": libvirt.VIR_DOMAIN_RUNNING, "state.reason": 0, "cpu.time": 1})]


def listing(codes) -> list[list[DomainSample]]:
    b = LibvirtBackend("qemu:///system", accel="tcg", image=None, measure_dirty_rate=False)
    b._conn = Conn(Dom(codes))
    return [b._list_blocking() for _ in range(len(codes) + 1)]


def test_a_transient_metadata_error_is_not_cached_as_not_ours():
    first, second = listing([libvirt.VIR_ERR_INTERNAL_ERROR])     # e.g. "client socket is closed"
    (d,) = first
    assert (d.name, d.spec, d.unreadable) == ("cv1", None, True)
    (d,) = second
    assert d.spec == SPEC and not d.unreadable                   # read again, and ours


def test_no_metadata_is_cached_as_not_ours():
    first, second = listing([libvirt.VIR_ERR_NO_DOMAIN_METADATA])
    assert [(d.spec, d.unreadable) for d in first + second] == [(None, False), (None, False)]


def test_a_vm_listed_unreadable_is_neither_dropped_nor_adopted_and_kept_when_readable_again():
    async def main():
        env, agent = await host_with_vm_a()
        plain_list = agent.hv.list

        async def unreadable_list():
            return [DomainSample(name=d.name, state=d.state, reason=d.reason, spec=None, unreadable=True)
                    for d in await plain_list()]
        agent.hv.list = unreadable_list
        await env.clock.sleep(1.0)
        await agent.sample()
        during = sorted(agent.vms)
        agent.hv.list = plain_list
        await env.clock.sleep(1.0)
        await agent.sample()
        return during, sorted(agent.vms), agent.vms["vm-a"].state
    during, after, state = run_virtual(main())
    assert during == ["vm-a"]                                    # before the fix: [] ("vanished")
    assert after == ["vm-a"] and state is DomState.RUNNING


# --- a start cancelled while libvirt creates the domain (the clean-clone run's stray VM) ----------------
# StartVm's caller gave up (a 43-s boot under load) while libvirt still defined and created the
# domain in its thread. The node's undo ran at once, found no domain, and the domain created after
# it survived, adopted later as nobody's VM. The backend's start now returns, cancelled, only once
# libvirt's call has ended, so the undo that follows finds the domain and removes it.



class SlowDefine:
    """A connection whose defineXML blocks (in the backend's thread) until released."""

    def __init__(self) -> None:
        self.entered, self.release, self.order = threading.Event(), threading.Event(), []

    def defineXML(self, xml):
        self.entered.set()
        self.release.wait()
        self.order.append("created")
        return types.SimpleNamespace(create=lambda: 0, UUIDString=lambda: "u-c")


def test_a_cancelled_start_returns_only_after_libvirts_call_ended():
    async def main():
        b = LibvirtBackend("qemu:///system", accel="tcg", image=domxml.GuestImage("/k", "/i"), measure_dirty_rate=False)
        conn = b._conn = SlowDefine()
        loop = asyncio.get_running_loop()
        task = asyncio.create_task(b.start(VmSpec(name="vm-c", mem_mib=128, vcpus=1, cpu_load=0.1)))
        await loop.run_in_executor(None, conn.entered.wait)          # libvirt's call is under way
        task.cancel()                                                # the caller's deadline
        task.add_done_callback(lambda t: conn.order.append("returned"))
        # libvirt's call ends only after the loop has delivered the cancellation (callbacks run in
        # order: the task's step first), so a start that did not wait returns before "created"
        loop.call_soon(loop.call_soon, conn.release.set)
        try:
            await task
        except asyncio.CancelledError:
            pass
        return task.cancelled(), conn.order
    cancelled, order = asyncio.run(main())
    assert cancelled and order == ["created", "returned"]   # before: returned at once, created after
