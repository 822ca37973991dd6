"""A node's sample lists the hypervisor's domains, and a start (or an arrival) completes while the
listing is still being taken (libvirt can take seconds on a loaded host). The listing does not
hold the new VM; the sample must not take that for the VM vanishing. Before the fix the node
dropped it ("vanished from libvirt") and adopted it back at the next sample: for one monitor
period the host neither counted nor watched a running guest. (The converse of the stop race in
tests/component/test_node_servicer.py.) Model host, virtual time."""
import asyncio

from cellbed import assembly
from cellbed.domain.vm import VmSpec
from cellbed.runtime.clock import run_virtual


def test_a_vm_started_during_a_listing_is_not_dropped_as_vanished():
    async def main():
        env = assembly.model_env(0)
        h = await assembly.model_host(env, assembly.model_config("h1", 8.0, 16384), start=False)
        agent = h.agent
        await agent.start_vm(VmSpec(name="vm-a", mem_mib=512, vcpus=1, cpu_load=0.5, wss_mib=256))
        await agent.sample()
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
