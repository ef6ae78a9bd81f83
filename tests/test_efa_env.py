"""A job env that takes NCCL off EFA draws a plan warning naming the key, the value and the cost (issue 27, item 11)."""

from __future__ import annotations

import pytest

from components.core.planning.efa_env import env_warnings, tcp_cost
from tests.conftest import stack_config

IMAGE = "public.ecr.aws/deep-learning-containers/pytorch:2.13.0-cu133-amzn2023"
H100 = {"name": "h100", "instanceType": "p5.48xlarge", "maxNodes": 2}
JOB = {"name": "train", "pool": "h100", "nodes": 2, "launcher": "torchrun", "image": IMAGE,
       "command": ["python", "train.py"]}
# p5.48xlarge in a cluster placement group: card 0 is 100 Gbps (DescribeInstanceTypes), 32 EFA interfaces.
TCP = ("TCP over the ENA interface on network card 0, at most 100 Gbps a node and 10 Gbps a flow, instead of the "
       "pool's 32 EFA interfaces (3200 Gbps, kernel bypass)")
SOCKETS = f"NCCL's InfiniBand transport finds no EFA device, so NCCL falls back to its sockets: {TCP}"


def warnings(env: dict, pool: dict = H100, secret: bool = False) -> list[str]:
    cfg = stack_config("dev", {"gpucluster:gpuPools": [pool], "gpucluster:jobs": [{**JOB, "pool": pool["name"],
                                                                                  "env": env}]})
    if secret:
        cfg = cfg.model_copy(update={"secret_paths": tuple(f"gpucluster:jobs[0].env.{k}" for k in env)})
    return env_warnings(cfg)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("FI_PROVIDER", "tcp", "'tcp' keeps libfabric off its efa provider on pool 'h100' (p5.48xlarge): aws-ofi-nccl "
                           "then runs over another provider (or fails, leaving NCCL its own sockets): " + TCP),
    ("FI_PROVIDER", "sockets", "'sockets' keeps libfabric off its efa provider on pool 'h100' (p5.48xlarge): "
                               "aws-ofi-nccl then runs over another provider (or fails, leaving NCCL its own "
                               "sockets): " + TCP),
    ("FI_PROVIDER", "^efa", "'^efa' keeps libfabric off its efa provider on pool 'h100' (p5.48xlarge): aws-ofi-nccl "
                            "then runs over another provider (or fails, leaving NCCL its own sockets): " + TCP),
    ("NCCL_NET", "Socket", "'Socket' forces NCCL's TCP socket transport on pool 'h100' (p5.48xlarge): " + TCP),
    ("NCCL_NET", "IB", "'IB' forces NCCL's InfiniBand verbs transport on pool 'h100' (p5.48xlarge): it finds no "
                       "device (EFA is neither an InfiniBand nor an Ethernet port) and, forced, never falls back: "
                       "every communicator fails to initialize and the job fails"),
    ("NCCL_NET", "efa", "'efa' forces a network named 'efa' on pool 'h100' (p5.48xlarge): no plugin of an EFA node "
                        "has that name (aws-ofi-nccl answers to Libfabric, AWS Libfabric or OFI): unless the image "
                        "ships one, every communicator fails to initialize and the job fails"),
    ("NCCL_NET_PLUGIN", "none", "'none' keeps NCCL from loading aws-ofi-nccl on pool 'h100' (p5.48xlarge): "
                                + SOCKETS),
    ("FI_EFA_USE_DEVICE_RDMA", "0", "'0' turns the EFA device's RDMA off on pool 'h100' (p5.48xlarge): libfabric "
                                    "then emulates RDMA writes, which aws-ofi-nccl's RDMA protocol (its default on "
                                    "p5.48xlarge) refuses: the plugin fails to initialize and NCCL falls back to its "
                                    "sockets: " + TCP),
    ("NCCL_NET_GDR_LEVEL", "LOC", "'LOC' turns GPUDirect RDMA off on pool 'h100' (p5.48xlarge): NCCL stages every "
                                  "transfer between the 8 GPUs and the 32 EFA interfaces through host memory, a copy "
                                  "each way"),
    ("OFI_NCCL_DISABLE_GDR_REQUIRED_CHECK", "1",
     "'1' lets aws-ofi-nccl run without GPUDirect RDMA on pool 'h100' (p5.48xlarge): a node whose GPUDirect RDMA "
     "fails to come up then runs on host-copy buffers at significantly reduced performance instead of failing"),
])
def test_each_setting_that_takes_nccl_off_efa_is_named_with_its_cost(key, value, message):
    assert warnings({key: value, "NCCL_DEBUG": "WARN"}) == [f"gpucluster:jobs[0].env.{key}: {message}"]


@pytest.mark.parametrize(("key", "value"), [
    ("NCCL_NET", "socket"), ("NCCL_NET", "ib"), ("NCCL_NET_PLUGIN", "NONE"), ("FI_EFA_USE_DEVICE_RDMA", "off"),
    ("FI_EFA_USE_DEVICE_RDMA", "False"), ("FI_PROVIDER", "TCP,shm"), ("NCCL_NET_GDR_LEVEL", "0"),
    ("OFI_NCCL_DISABLE_GDR_REQUIRED_CHECK", "true"),
])
def test_the_spellings_the_libraries_accept_are_caught(key, value):
    (found,) = warnings({key: value})
    assert found.startswith(f"gpucluster:jobs[0].env.{key}: {value!r} ")


def test_a_benign_env_warns_of_nothing():
    assert warnings({
        "NCCL_DEBUG": "INFO", "FI_PROVIDER": "efa", "NCCL_NET": "AWS Libfabric", "NCCL_NET_PLUGIN": "ofi",
        # NCCL_IB_DISABLE disables NCCL's own IB transport only, which never drives EFA.
        "NCCL_IB_DISABLE": "1", "FI_EFA_USE_DEVICE_RDMA": "1", "NCCL_NET_GDR_LEVEL": "SYS",
        "OFI_NCCL_DISABLE_GDR_REQUIRED_CHECK": "0", "NCCL_SOCKET_IFNAME": "^lo",
    }) == []
    assert warnings({"NCCL_NET": "Libfabric", "FI_PROVIDER": "^tcp,sockets"}) == []
    assert warnings({"NCCL_NET": "ofi", "FI_PROVIDER": "efa;ofi_rxm"}) == []
    assert warnings({"FI_PROVIDER": "", "NCCL_NET": ""}) == []  # "" removes a preset variable: nothing forced


def test_only_pools_with_efa_warn():
    dev = {"name": "dev", "instanceType": "g6e.xlarge", "maxNodes": 2}  # no EFA: NCCL is on sockets by design
    assert warnings({"NCCL_NET": "Socket", "FI_PROVIDER": "tcp"}, pool=dev) == []
    off = {**H100, "efa": "disabled", "placementGroup": "none"}
    assert warnings({"NCCL_NET": "Socket"}, pool=off) == []


def test_what_device_rdma_off_costs_depends_on_the_type():
    p4d = {"name": "a100", "instanceType": "p4d.24xlarge", "maxNodes": 2}
    assert warnings({"FI_EFA_USE_DEVICE_RDMA": "0"}, pool=p4d) == [
        "gpucluster:jobs[0].env.FI_EFA_USE_DEVICE_RDMA: '0' turns the EFA device's RDMA off on pool 'a100' "
        "(p4d.24xlarge): libfabric then emulates RDMA and stops using device RDMA for sends and receives, so large "
        "messages no longer reach GPU memory by RDMA read but through bounce buffers (the preset sets it to 1 on "
        "this type)"]
    # g5.48xlarge: aws-ofi-nccl neither requires GPUDirect RDMA there nor uses RDMA writes.
    g5 = {"name": "a10g", "instanceType": "g5.48xlarge", "maxNodes": 2}
    assert warnings({"FI_EFA_USE_DEVICE_RDMA": "0", "NCCL_NET_GDR_LEVEL": "LOC"}, pool=g5) == []
    assert warnings({"NCCL_NET": "Socket"}, pool=g5) == [
        "gpucluster:jobs[0].env.NCCL_NET: 'Socket' forces NCCL's TCP socket transport on pool 'a10g' (g5.48xlarge): "
        "TCP over the ENA interface on network card 0, at most 100 Gbps a node and 10 Gbps a flow, instead of the "
        "pool's 1 EFA interface (100 Gbps, kernel bypass)"]


def test_the_cost_uses_the_pools_card_and_placement():
    cfg = stack_config("dev", {"gpucluster:gpuPools": [
        {"name": "b300", "instanceType": "p6-b300.48xlarge", "maxNodes": 2, "placementGroup": "none"}],
        "gpucluster:jobs": []})
    assert tcp_cost(cfg.pool("b300")) == (
        "TCP over the ENA interface on network card 0, at most 350 Gbps a node and 5 Gbps a flow, instead of the "
        "pool's 16 EFA interfaces (6400 Gbps, kernel bypass)")


def test_a_secret_value_is_not_printed():
    (found,) = warnings({"NCCL_NET": "Socket"}, secret=True)
    assert found.startswith("gpucluster:jobs[0].env.NCCL_NET: (a secret value) forces NCCL's TCP socket transport")


def test_the_warning_is_in_the_plan_output(tmp_path):
    from tests.test_plan import plan, write_stack

    stack = tmp_path / "Pulumi.efa.yaml"
    write_stack(stack, {"gpucluster:gpuPools": [H100], "gpucluster:jobs": [{**JOB, "env": {"NCCL_NET": "Socket"}}]})
    result = plan("--stack", "efa", "--stack-file", str(stack))
    assert result.returncode == 0, result.stderr
    warnings_section = result.stdout.split("\nWarnings\n", 1)[1]
    assert (f"  gpucluster:jobs[0].env.NCCL_NET: 'Socket' forces NCCL's TCP socket transport on pool 'h100' "
            f"(p5.48xlarge): {TCP}") in warnings_section.splitlines()
