"""The node agent's small public methods a replayed trace needs (issue 14): a capacity update the
host view follows, a request update that keeps the VM's use, and a model host leaving its fabric."""
import pytest

from cellbed import assembly
from cellbed.domain.constraints import Constraint, ConstraintOp
from cellbed.domain.errors import FailedPrecondition, InvalidArgument
from cellbed.domain.vm import VmSpec
from cellbed.runtime.clock import run_virtual

RACK_A = Constraint("rack", ConstraintOp.EQUAL, "a")


def test_capacity_and_request_updates_reach_the_view_and_a_removed_host_drops_its_tasks():
    async def main():
        env = assembly.model_env(0)
        h = await assembly.model_host(env, assembly.model_config("h1", 4.0, 8192))
        v = h.agent.view()
        h.agent.update_capacity(8.0, 16384)
        assert v.capacity == (8.0, 16384) and h.agent.cfg.cpu_cores == 8.0
        with pytest.raises(InvalidArgument, match="cpu_cores"):
            h.agent.update_capacity(0.0, 16384)
        assert v.capacity == (8.0, 16384)                      # a refused update changes nothing
        await h.agent.start_vm(VmSpec(name="a", mem_mib=512, vcpus=1, cpu_load=0.5, wss_mib=256, req_cpu_cores=0.5))
        env.fabric.set_usage("a", 0.3, 200.0)
        e = await h.agent.update_request("a", 1.5, 1024, 9, True, (RACK_A,))
        # 1.5 cores need 2 vCPUs; 1024 MiB; production; the constraint; the use stays as measured
        assert (e.spec.vcpus, e.spec.requested_cpu, e.spec.mem_mib, e.spec.production, e.spec.constraints) == \
            (2, 1.5, 1024, True, (RACK_A,))
        assert v.allocated() == (1.5, 1024)
        task = env.fabric.backends["h1"].tasks["a"]
        assert (task.cpu_cores, task.mem_mib, task.spec.mem_mib) == (0.3, 200.0, 1024)
        e.migrating_out = "m1"
        with pytest.raises(FailedPrecondition, match="migrating"):
            await h.agent.update_request("a", 0.5, 512, 9, True)
        e.migrating_out = ""
        assert env.fabric.remove_host("h1") == ["a"]
        assert "a" not in env.fabric.location and "h1" not in env.fabric.backends
        assert env.fabric.remove_host("h1") == []
        await h.agent.stop()
    run_virtual(main())
