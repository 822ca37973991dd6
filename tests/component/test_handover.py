"""A VM is listed by exactly one host at every step of a live migration's hand-over (real
NodeAgent code on the model backend, in-process transport, virtual time): the source lists it
as migrating out until the guest has left, the destination as migrating in while it verifies
it, then as running. A call about it meanwhile is told where to ask again, never that the VM
is nowhere: a runner that stops a VM and finds it on no host marks it stopped, and the VM then
runs on, orphaned."""
from cellbed import assembly
from cellbed.domain import errors
from cellbed.domain.vm import VmSpec
from cellbed.domain.wire import spec_pb
from cellbed.runtime import run_virtual
from cellbed.v1 import node_pb2 as npb

HOSTS = ("h1", "h2")


def test_a_migrating_vm_is_listed_by_one_host_at_every_step_and_calls_meanwhile_say_where_to_ask():
    async def main():
        env = assembly.model_env(1, 0.001)
        hosts = {n: await assembly.model_host(env, assembly.model_config(n, 4.0, 8192, monitor_period_s=10.0))
                 for n in HOSTS}
        cli = env.net.transport("cli")
        spec = VmSpec(name="v", mem_mib=512, vcpus=1, cpu_load=0.2, wss_mib=128)
        await cli.request("h1", "NodeAgent/StartVm", npb.StartVmRequest(spec=spec_pb(spec)))

        async def listing():
            return [(h, npb.VmState.Name(v.state)) for h in HOSTS
                    for v in (await cli.request(h, "NodeAgent/ListVms", npb.ListVmsRequest())).vms if v.spec.name == "v"]

        async def stop_refused(h):
            try:
                await cli.request(h, "NodeAgent/StopVm", npb.StopVmRequest(name="v"))
            except errors.CellbedError as e:
                return type(e).__name__, str(e)
            return "stopped", h

        dest = hosts["h2"].agent
        plain = dest.hv.domain_state
        steps = []

        async def watched(name):        # every look the destination takes at the domain
            verifying = bool(dest.arriving())
            steps.append((verifying, await listing(),
                          (await stop_refused("h1"), await stop_refused("h2")) if verifying else None))
            return await plain(name)
        dest.hv.domain_state = watched
        src_hv, transfer = hosts["h1"].agent.hv, []
        plain_migrate = src_hv.migrate

        async def migrate(*a, **kw):    # the transfer: h2 holds the lease, h1 still has the VM
            transfer.append((await listing(), await stop_refused("h2")))
            return await plain_migrate(*a, **kw)
        src_hv.migrate = migrate
        rec = (await cli.request("h1", "NodeAgent/MigrateVm", npb.MigrateVmRequest(name="v", dest_host="h2"))).record
        dest.hv.domain_state, src_hv.migrate = plain, plain_migrate
        after = await listing()
        gone = await stop_refused("h1")
        for h in hosts.values():
            await h.agent.stop()
        return rec, transfer, steps, after, gone

    rec, transfer, steps, after, gone = run_virtual(main())
    assert rec.outcome == npb.MIGRATION_OUTCOME_SUCCEEDED, rec
    [(listed, (kind, says))] = transfer
    assert listed == [("h1", "VM_STATE_MIGRATING_OUT")], transfer
    assert kind == "FailedPrecondition" and f"is migrating to host h2 from h1 (migration {rec.id})" in says, says
    verifying = [s for s in steps if s[0]]
    assert verifying, steps              # the destination looked at the domain while verifying it
    for _, listed, refused in verifying:
        assert listed == [("h2", "VM_STATE_MIGRATING_IN")], steps
        (kind1, says1), (kind2, says2) = refused
        assert kind1 == kind2 == "FailedPrecondition", refused
        assert f"has left host h1 for h2 (migration {rec.id} is being verified there)" in says1
        assert f"is arriving on host h2 (migration {rec.id} is being verified)" in says2
    assert all(len(listed) == 1 for _, listed, _ in steps), steps      # never on none, never on both
    assert after == [("h2", "VM_STATE_RUNNING")]
    assert gone[0] == "NotFound" and "not on host h1" in gone[1]


async def _refusal(cli, host, method, req):
    try:
        await cli.request(host, method, req)
    except errors.CellbedError as e:
        return type(e).__name__, str(e)
    return "done", host


def test_a_name_that_is_handing_over_cannot_start_again_on_the_source():
    """While h2 verifies v, h1 no longer lists v. A StartVm of v on h1 would make a second v: in
    a real cell h1's libvirtd defines it; here the model's fabric refuses it only because it sees
    every host. h1 refuses it first, saying where v is."""
    async def main():
        env = assembly.model_env(1, 0.001)
        hosts = {n: await assembly.model_host(env, assembly.model_config(n, 4.0, 8192, monitor_period_s=10.0))
                 for n in HOSTS}
        cli = env.net.transport("cli")
        spec = spec_pb(VmSpec(name="v", mem_mib=512, vcpus=1, cpu_load=0.2, wss_mib=128))
        await cli.request("h1", "NodeAgent/StartVm", npb.StartVmRequest(spec=spec))
        dest = hosts["h2"].agent
        plain, tries = dest.hv.domain_state, []

        async def watched(name):
            if dest.arriving():
                tries.append(await _refusal(cli, "h1", "NodeAgent/StartVm", npb.StartVmRequest(spec=spec)))
            return await plain(name)
        dest.hv.domain_state = watched
        await cli.request("h1", "NodeAgent/MigrateVm", npb.MigrateVmRequest(name="v", dest_host="h2"))
        dest.hv.domain_state = plain
        names = {h: [v.spec.name for v in (await cli.request(h, "NodeAgent/ListVms", npb.ListVmsRequest())).vms]
                 for h in HOSTS}
        for h in hosts.values():
            await h.agent.stop()
        return tries, names

    tries, names = run_virtual(main())
    assert tries, "the destination never looked at the domain while verifying it"
    for kind, says in tries:
        assert kind == "FailedPrecondition", tries
        assert "has left host h1 for h2" in says and "cannot start here until then" in says, says
    assert names == {"h1": [], "h2": ["v"]}        # the refused starts left nothing behind

