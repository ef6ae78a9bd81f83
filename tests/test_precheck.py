"""The pre-step check's program (components/core/goodput/precheck.py and precheck_verdict.py): the local check
on a sysfs tree, the bus bandwidth and its threshold, pair planning, verdicts, the termination message, the
ranks' flow over a fake communicator, and the drivers and wrapper run for real as the cluster runs them (the
package as the ConfigMap ships it, a stand-in for torchrun or mpirun)."""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bootstrap.doctor.rules_goodput import check_verdict
from components.core.goodput import names, precheck
from components.core.goodput import precheck_verdict as pv
from components.core.hardware import nccl
from components.core.placement import prestep
from tests.test_doctor import DATA

GOOD, BAD = "ip-10-0-64-11.ec2.internal", "ip-10-0-64-12.ec2.internal"
PASS, FAIL, PEER = names.VERDICT_PASS, names.VERDICT_FAIL, names.VERDICT_PEER


def sysfs(root: Path, devices: int, driver: str | None = None) -> str:
    """A sysfs tree with `devices` RDMA devices named as the EFA driver names them (rdmapNsM)."""
    for i in range(devices):
        dev = root / "class" / "infiniband" / f"rdmap{i}s{i + 16}"
        (dev / "device").mkdir(parents=True)
        if driver is not None:
            target = root / "bus" / "pci" / "drivers" / driver
            target.mkdir(parents=True, exist_ok=True)
            (dev / "device" / "driver").symlink_to(target)
    (root / "class" / "infiniband").mkdir(parents=True, exist_ok=True)
    return str(root)


# -- the local check ------------------------------------------------------------------------------------------

def test_a_node_with_every_efa_device_passes(tmp_path):
    assert pv.local_check(sysfs(tmp_path, 32, "efa"), 32, GOOD, gpus=8, expected_gpus=8) == {
        "node": GOOD, "verdict": PASS, "reason": "ok", "detail": "32 EFA devices, 8 GPUs"}
    assert pv.local_check(str(tmp_path), 32, GOOD)["detail"] == "32 EFA devices"


def test_a_node_with_efa_disabled_fails_with_the_count(tmp_path):
    root = sysfs(tmp_path, 0)
    assert pv.local_check(root, 32, BAD) == {
        "node": BAD, "verdict": FAIL, "reason": "efa-missing",
        "detail": f"0 of 32 EFA devices under {root}/class/infiniband"}
    # No class/infiniband at all (no EFA driver loaded): the same.
    assert pv.local_check(str(tmp_path / "none"), 32, BAD)["detail"] == (
        f"0 of 32 EFA devices under {tmp_path}/none/class/infiniband")


def test_one_missing_device_or_another_driver_s_device_fails(tmp_path):
    assert pv.local_check(sysfs(tmp_path / "a", 31, "efa"), 32, BAD)["reason"] == "efa-missing"
    root = sysfs(tmp_path / "b", 32, "mlx5_core")  # InfiniBand devices, but not EFA's
    assert pv.efa_devices(root) == []


def test_a_node_showing_fewer_gpus_than_ranks_fails(tmp_path):
    assert pv.local_check(sysfs(tmp_path, 32), 32, BAD, gpus=7, expected_gpus=8) == {
        "node": BAD, "verdict": FAIL, "reason": "gpus-missing", "detail": "7 of 8 GPUs visible to CUDA"}


# -- bandwidth, threshold, iterations, pairs ---------------------------------------------------------------

def test_bus_bandwidth_is_nccl_tests_all_reduce_busbw():
    # awsome-distributed-training nccl-tests README, 2x p5.48xlarge (16 ranks): 16 GiB in 66132 us -> algbw 259.78,
    # busbw 487.09; 1 GiB in 4607.6 us -> 436.95 (nccl-tests doc/PERFORMANCE.md: busbw = algbw x 2(n-1)/n).
    assert round(pv.bus_bandwidth_gbps(16 * 2**30, 66132e-6, 16), 2) == 487.09
    assert abs(pv.bus_bandwidth_gbps(2**30, 4607.6e-6, 16) - 436.95) < 0.02  # the README's time is rounded
    assert pv.bus_bandwidth_gbps(2**30, 1.0, 2) == 2**30 / 1e9  # n=2: factor 1


def test_the_pass_fraction_is_nccl_report_s_at_the_check_s_size():
    # At 1 GiB a healthy pair reaches 436.95 of the 487.09 peak; nccl-report passes 0.8 of the peak.
    at_size = 436.95 / 487.09
    assert pv.SIZE_BYTES == 2**30
    assert 0.65 <= pv.PASS_FRACTION <= nccl.BUSBW_PASS_FRACTION * at_size
    assert pv.threshold_gbps(487.0) == 340.9
    # A healthy pair passes with margin; NCCL on sockets (a few GB/s) and 512 MiB-class rings do not reach it.
    assert 436.95 > pv.threshold_gbps(487.0) > 12.5


def test_iterations_fit_the_budget():
    assert pv.iterations_for(0.0046) == 50  # p5: 50 x 4.6 ms
    assert pv.iterations_for(0.026) == 50  # p4de: 1.3 s
    assert pv.iterations_for(0.1) == 20
    assert pv.iterations_for(3.0) == 1  # sockets: one more, not fifty
    assert pv.iterations_for(0.0) == 50


def test_pair_rounds_are_ring_neighbours_in_disjoint_rounds():
    assert pv.pair_rounds(1) == []
    assert pv.pair_rounds(2) == [[(0, 1)]]
    assert pv.pair_rounds(3) == [[(0, 1)], [(1, 2)], [(2, 0)]]
    assert pv.pair_rounds(4) == [[(0, 1), (2, 3)], [(1, 2), (3, 0)]]
    assert pv.pair_rounds(5) == [[(0, 1), (2, 3)], [(1, 2), (3, 4)], [(4, 0)]]
    for n in range(3, 20):
        rounds = pv.pair_rounds(n)
        assert len(rounds) == (2 if n % 2 == 0 else 3)
        pairs = [p for r in rounds for p in r]
        assert sorted(pairs) == sorted((i, (i + 1) % n) for i in range(n))
        for r in rounds:
            nodes = [x for p in r for x in p]
            assert len(nodes) == len(set(nodes))


# -- verdicts -------------------------------------------------------------------------------------------------

def ok(detail="32 EFA devices, 8 GPUs"):
    return {"verdict": PASS, "reason": "ok", "detail": detail}


def test_a_local_failure_is_the_verdict_and_the_others_pass():
    bad = {"verdict": FAIL, "reason": "efa-missing", "detail": "0 of 32"}
    assert pv.judge({GOOD: ok(), BAD: bad}, None, 487.0) == {GOOD: ok(), BAD: bad}


def test_a_fast_all_reduce_passes_everyone():
    assert pv.judge({"a": ok(), "b": ok()}, 440.0, 487.0) == {"a": ok(), "b": ok()}


def test_one_slow_node_of_four_is_the_one_blamed():
    pairs = {("a", "b"): 450.0, ("c", "d"): 451.0, ("b", "c"): 3.2, ("d", "a"): 449.0}
    pairs[("c", "d")] = 3.1
    verdicts = pv.judge({n: ok() for n in "abcd"}, 3.0, 487.0, pairs)
    assert verdicts == {
        "a": ok("all_reduce with b 450.0 GB/s, with d 449.0 GB/s"),
        "b": {"verdict": PEER, "reason": "slow-peer",
              "detail": "all_reduce with a 450.0 GB/s, with c 3.2 GB/s; pass at 340.9 GB/s or more"},
        "c": {"verdict": FAIL, "reason": "slow-all-reduce",
              "detail": "all_reduce with d 3.1 GB/s, with b 3.2 GB/s; pass at 340.9 GB/s or more"},
        "d": {"verdict": PEER, "reason": "slow-peer",
              "detail": "all_reduce with c 3.1 GB/s, with a 449.0 GB/s; pass at 340.9 GB/s or more"}}
    assert pv.failed(verdicts) == ["c"]


def test_two_slow_nodes_cannot_be_told_apart_so_neither_is_blamed():
    verdicts = pv.judge({"a": ok(), "b": ok()}, 3.0, 487.0, {("a", "b"): 3.0})
    assert pv.failed(verdicts) == [] and {v["reason"] for v in verdicts.values()} == {"slow-pair"}


def test_a_slow_aggregate_with_every_pair_fast_blames_nobody():
    verdicts = pv.judge({n: ok() for n in "abc"}, 300.0, 487.0,
                              {("a", "b"): 440.0, ("b", "c"): 441.0, ("c", "a"): 442.0})
    assert pv.failed(verdicts) == [] and {v["verdict"] for v in verdicts.values()} == {PASS}


def test_slow_everywhere_is_the_setup_s_fault_and_no_node_is_blamed():
    # Every pair below the pass mark (an image's old NCCL, a job env taking NCCL off EFA, a wrong expected value):
    # by pairs alone all four would fail; quarantining them would only bring fresh nodes that fail the same way.
    pairs = {("a", "b"): 250.0, ("c", "d"): 251.0, ("b", "c"): 249.0, ("d", "a"): 250.5}
    verdicts = pv.judge({n: ok() for n in "abcd"}, 240.0, 487.0, pairs)
    assert pv.failed(verdicts) == []
    assert {v["verdict"] for v in verdicts.values()} == {PEER}
    assert {v["reason"] for v in verdicts.values()} == {pv.SYSTEMIC_REASON}
    assert verdicts["a"]["detail"] == ("slow-all-reduce: all_reduce with b 250.0 GB/s, with d 250.5 GB/s; pass at "
                                       "340.9 GB/s or more; 4 of 4 nodes failed: a fault of the job's image or "
                                       "setup, not of a node; no node is blamed")
    text = pv.message(verdicts, 240.0, 487.0, 3.0)
    assert pv.exit_code(text, True) == 0
    assert pv.report_lines(text)[-1] == (
        "gpucluster pre-step check: all_reduce bus bandwidth 240 GB/s, expected 487 (pass at 340.9); failed on most "
        "nodes, so on none: look at the image and the job's NCCL setup in 3 s: the job's command runs")


def test_half_the_nodes_failing_is_still_theirs_and_more_is_not():
    bad = {"verdict": FAIL, "reason": "efa-missing", "detail": "0 of 32"}
    two_of_four = pv.judge({"a": bad, "b": bad, "c": ok(), "d": ok()}, None, 487.0)
    assert pv.failed(two_of_four) == ["a", "b"]
    three_of_four = pv.judge({"a": bad, "b": bad, "c": bad, "d": ok()}, None, 487.0)
    assert pv.failed(three_of_four) == [] and three_of_four["d"] == ok()
    assert {three_of_four[n]["reason"] for n in "abc"} == {pv.SYSTEMIC_REASON}
    # Two adjacent slow nodes of four: each is slow with both neighbours, their other neighbours with one.
    pairs = {("a", "b"): 3.0, ("c", "d"): 450.0, ("b", "c"): 3.1, ("d", "a"): 3.2}
    assert pv.failed(pv.judge({n: ok() for n in "abcd"}, 3.0, 487.0, pairs)) == ["a", "b"]
    # Both of two nodes without EFA: no pod of the job sees it (its spec, the pod's view of sysfs), not the nodes.
    assert pv.failed(pv.judge({"a": bad, "b": bad}, None, 487.0)) == []


# -- the message ----------------------------------------------------------------------------------------------

def test_the_message_is_the_one_doctor_reads():
    # tests/data/doctor/pre-step-check-failed: the lead's bundle of a node with EFA disabled, byte for byte.
    pods = json.loads((DATA / "pre-step-check-failed" / "objects" / "Pod.json").read_text())
    recorded = pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]["message"]
    made = pv.message({GOOD: {"node": GOOD, **ok()},
                             BAD: {"verdict": FAIL, "reason": "efa-missing",
                                   "detail": "0 of 32 EFA devices under /sys/class/infiniband"}}, None, 487.0, 4.2)
    assert made == recorded
    verdict, _ = check_verdict({"state": {"terminated": {"exitCode": 86, "message": made}}})
    assert verdict["nodes"][BAD]["verdict"] == "fail" and "node" not in verdict["nodes"][GOOD]


def test_the_message_fits_4096_bytes_and_keeps_every_failed_node():
    verdicts = {f"ip-10-0-{i // 250}-{i % 250}.ec2.internal": ok("32 EFA devices, 8 GPUs") for i in range(300)}
    for name in list(verdicts)[:5]:
        verdicts[name] = {"verdict": FAIL, "reason": "slow-all-reduce", "detail": "x" * 200}
    text = pv.message(verdicts, 3.0, 487.0, 12.34)
    assert len(text.encode()) <= 4096
    body = json.loads(text)[names.PRE_STEP_MESSAGE_KEY]
    # Every failed node with its detail; as many passing ones as fit, without theirs; the rest counted.
    kept = body["nodes"]
    assert all(kept[name] == verdicts[name] for name in list(verdicts)[:5])
    passing = {n: v for n, v in kept.items() if v["verdict"] == PASS}
    assert passing and {v["detail"] for v in passing.values()} == {""}
    assert body["omitted"] == 300 - len(kept) > 200
    assert (body["busbw_gbps"], body["expected_gbps"], body["seconds"]) == (3.0, 487.0, 12.3)
    small = json.loads(pv.message({"a": ok()}, 440.04, 487.0, 1))[names.PRE_STEP_MESSAGE_KEY]
    assert "omitted" not in small and small["nodes"]["a"]["detail"] == "32 EFA devices, 8 GPUs"


def test_one_line_per_node_and_the_exit_code():
    text = pv.message({GOOD: ok(), BAD: {"verdict": FAIL, "reason": "efa-missing", "detail": "0 of 32"}},
                            None, 487.0, 4.2)
    assert pv.report_lines(text) == [
        f"gpucluster pre-step check: node {GOOD}: pass (ok: 32 EFA devices, 8 GPUs)",
        f"gpucluster pre-step check: node {BAD}: FAIL (efa-missing: 0 of 32)",
        f"gpucluster pre-step check: no all_reduce; failed on {BAD} in 4.2 s: exit 86, the job's command does not run"]
    assert pv.exit_code(text, enforced=True) == 86
    # Not enforced (the pool's remediation is not on): the same verdict, and the job runs.
    assert pv.exit_code(text, enforced=False) == 0
    assert pv.report_lines(text, enforced=False)[-1] == (
        f"gpucluster pre-step check: no all_reduce; failed on {BAD} in 4.2 s: the job's command runs anyway (the "
        "pool's remediation is not on: nothing would keep it off the node)")
    passed = pv.message({GOOD: ok(), BAD: ok()}, 441.26, 487.0, 9.0)
    assert pv.report_lines(passed)[-1] == ("gpucluster pre-step check: all_reduce bus bandwidth 441.3 GB/s, "
                                                 "expected 487 (pass at 340.9); passed in 9 s: the job's command runs")
    assert pv.exit_code(passed, enforced=True) == 0
    # A check that cannot finish never stops a job, enforced or not.
    unfinished = pv.message({}, None, 487.0, 900.0, error="torchrun exited 1 without a verdict")
    assert pv.exit_code(unfinished, enforced=True) == 0
    assert pv.report_lines(unfinished)[-1].endswith("did not finish: torchrun exited 1 without a verdict in "
                                                    "900 s: the job's command runs anyway (a check that cannot "
                                                    "finish never stops a job)")


# -- where the ranks are ------------------------------------------------------------------------------------

def test_the_node_name_from_env_then_pid_1_then_the_host_name(tmp_path):
    environ = tmp_path / "environ"
    environ.write_bytes(b"PATH=/usr/bin\0GPUCLUSTER_NODE_NAME=ip-10-0-64-13.ec2.internal\0HOME=/root\0")
    assert precheck.node_name({"GPUCLUSTER_NODE_NAME": GOOD}, str(environ)) == GOOD
    assert precheck.node_name({}, str(environ)) == "ip-10-0-64-13.ec2.internal"
    environ.write_bytes(b"PATH=/usr/bin\0")
    import socket
    assert precheck.node_name({}, str(environ)) == socket.gethostname()
    assert precheck.node_name({}, str(tmp_path / "missing")) == socket.gethostname()


def test_ranks_under_torchrun_and_open_mpi():
    assert precheck.ranks_from_env({"RANK": "9", "WORLD_SIZE": "16", "LOCAL_RANK": "1",
                                    "LOCAL_WORLD_SIZE": "8"}) == (9, 16, 1, 8)
    assert precheck.ranks_from_env({"OMPI_COMM_WORLD_RANK": "9", "OMPI_COMM_WORLD_SIZE": "16",
                                    "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "8",
                                    "RANK": "0"}) == (9, 16, 1, 8)


# -- the ranks' flow --------------------------------------------------------------------------------------------

class FakeComm:
    """Rank `rank` of a world of `nodes` x `per_node` ranks: every other rank's part is scripted."""

    def __init__(self, nodes, per_node, rank, locals_, busbw, pair_busbw):
        self.nodes, self.per_node, self.rank = nodes, per_node, rank
        self.world = len(nodes) * per_node
        self.locals, self.busbw, self.pair_busbw = locals_, busbw, pair_busbw
        self.calls, self.groups_made, self.gathers = [], [], 0

    def gather(self, obj):
        self.gathers += 1
        if self.gathers == 1:  # the local checks: local rank 0 of each node carries one
            return [{"node": self.nodes[r // self.per_node], "rank": r,
                     "local": self.locals[self.nodes[r // self.per_node]] if r % self.per_node == 0 else None}
                    for r in range(self.world)]
        return [obj, {p: bw for p, bw in self.pair_busbw.items()}]  # the pairs' results

    def broadcast(self, obj):
        return obj

    def groups(self, rank_lists):
        self.groups_made.append(rank_lists)
        return [tuple(r) for r in rank_lists]

    def measure(self, handle, ranks):
        self.calls.append((handle, ranks))
        if len(handle) == self.world:
            return self.busbw
        a, b = self.nodes[handle[0] // self.per_node], self.nodes[handle[-1] // self.per_node]
        return self.pair_busbw.get((a, b), self.pair_busbw.get((b, a)))

    def barrier(self):
        self.calls.append("barrier")


def test_the_flow_with_a_slow_node_measures_the_pairs_and_blames_it():
    nodes = ["a", "b", "c", "d"]
    comm = FakeComm(nodes, 2, 2, {n: ok() for n in nodes}, 5.0,
                    {("a", "b"): 450.0, ("c", "d"): 3.1, ("b", "c"): 3.2, ("d", "a"): 449.0})
    text = precheck.rank_flow(comm, "b", ok(), 487.0, time.time())
    assert comm.groups_made == [[list(range(8))], [[0, 1, 2, 3], [4, 5, 6, 7], [2, 3, 4, 5], [0, 1, 6, 7]]]
    # Rank 2 is on b: the aggregate, then b's pair in each round, a barrier after each round.
    assert comm.calls == [(tuple(range(8)), 8), ((0, 1, 2, 3), 4), "barrier", ((2, 3, 4, 5), 4), "barrier"]
    body = json.loads(text)[names.PRE_STEP_MESSAGE_KEY]
    assert pv.failed(body["nodes"]) == ["c"] and body["busbw_gbps"] == 5.0


def test_the_flow_with_a_node_without_efa_never_starts_nccl():
    bad = {"verdict": FAIL, "reason": "efa-missing", "detail": "0 of 32"}
    comm = FakeComm([GOOD, BAD], 8, 0, {GOOD: ok(), BAD: bad}, None, {})
    text = precheck.rank_flow(comm, GOOD, ok(), 487.0, time.time())
    assert comm.calls == [] and comm.groups_made == []
    body = json.loads(text)[names.PRE_STEP_MESSAGE_KEY]
    assert body["nodes"] == {GOOD: ok(), BAD: bad} and body["busbw_gbps"] is None


def test_the_flow_with_a_fast_all_reduce_measures_once():
    comm = FakeComm(["a", "b"], 8, 0, {"a": ok(), "b": ok()}, 440.0, {})
    text = precheck.rank_flow(comm, "a", ok(), 487.0, time.time())
    assert comm.calls == [(tuple(range(16)), 16)]
    assert pv.exit_code(text, enforced=True) == 0


def test_the_torch_communicator_calls_as_a_one_rank_world(monkeypatch, tmp_path):
    """TorchComm against a stand-in torch of one rank: what it asks of torch.distributed, in order (real NCCL
    needs GPUs; the flow above is tested with FakeComm)."""
    from types import SimpleNamespace

    calls = []

    class Tensor:
        def __init__(self, values):
            self.values = values

        def item(self):
            return self.values[0]

    cuda = SimpleNamespace(device_count=lambda: 1, set_device=lambda d: calls.append(("set_device", d)),
                           synchronize=lambda d: None)
    dist = SimpleNamespace(
        init_process_group=lambda backend, **kw: calls.append(("init", backend, kw["init_method"], kw["rank"],
                                                               kw["world_size"], kw["timeout"].total_seconds())),
        all_gather_object=lambda out, obj: out.__setitem__(0, obj),
        broadcast_object_list=lambda box, src: calls.append(("broadcast", src)),
        new_group=lambda ranks, timeout, backend: calls.append(("new_group", ranks, backend)) or ("group", *ranks),
        barrier=lambda: calls.append("barrier"),
        all_reduce=lambda t, op=None, group=None: calls.append(("all_reduce", op, group)),
        ReduceOp=SimpleNamespace(MAX="max"), destroy_process_group=lambda: calls.append("destroy"))
    torch = SimpleNamespace(float32="f32", float64="f64", cuda=cuda, distributed=dist,
                            device=lambda kind, index: f"{kind}:{index}",
                            zeros=lambda n, dtype, device: calls.append(("zeros", n, dtype, device)) or Tensor([0]),
                            tensor=lambda values, dtype, device: Tensor(values))
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch.distributed", dist)
    result = tmp_path / "result.json"
    assert precheck.run_rank({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                              "GPUCLUSTER_PRE_STEP_EXPECTED_GBPS": "487", "GPUCLUSTER_PRE_STEP_EFA_DEVICES": "0",
                              "GPUCLUSTER_NODE_NAME": GOOD, "GPUCLUSTER_PRE_STEP_RESULT": str(result)}) == 0
    reduces = [c for c in calls if isinstance(c, tuple) and c[0] == "all_reduce"]
    group = ("group", 0)
    assert calls[:4] == [("set_device", "cuda:0"), ("init", "gloo", "env://", 0, 1, 180.0),
                         ("new_group", [0], "nccl"), ("zeros", 2**28, "f32", "cuda:0")]
    # 2 warm-up, 1 probe, its MAX over the group, 50 timed (the probe took no time), their SUM over the group.
    assert reduces == [("all_reduce", None, group)] * 3 + [("all_reduce", "max", group)] + [
        ("all_reduce", None, group)] * 51
    assert calls[-3:] == [("broadcast", 0), "barrier", "destroy"]
    body = json.loads(result.read_text())[names.PRE_STEP_MESSAGE_KEY]
    assert list(body["nodes"]) == [GOOD] and body["busbw_gbps"] == 0.0  # one rank: no bus to measure


# -- the drivers and the wrapper, run ---------------------------------------------------------------------------

FAKE_TORCHRUN = '''\
"""Stands in for torch.distributed.run: records its argv, writes the verdict local rank 0 would."""
import os, sys
with open(os.environ["FAKE_ARGV"], "w") as f:
    f.write(" ".join(sys.argv[1:]))
with open(os.environ["FAKE_ARGV"] + ".pid", "w") as f:
    f.write(str(os.getpid()))
if os.environ.get("FAKE_SLEEP"):
    import time; time.sleep(float(os.environ["FAKE_SLEEP"]))
if os.environ.get("FAKE_RESULT"):
    with open(os.environ["GPUCLUSTER_PRE_STEP_RESULT"], "w") as f:
        f.write(os.environ["FAKE_RESULT"])
print("torchrun: workers done")
sys.exit(int(os.environ.get("FAKE_EXIT", "0")))
'''


@pytest.fixture
def shipped(tmp_path):
    """The package as the ConfigMap ships it (its files, no more), and a stand-in torch with torchrun's module."""
    package = tmp_path / "code" / prestep.PACKAGE
    package.mkdir(parents=True)
    for name, text in prestep.code_config_map("training", ["h100"])["data"].items():
        (package / name).write_text(text)
    fake = tmp_path / "fake"
    (fake / "torch" / "distributed").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text("")
    (fake / "torch" / "distributed" / "__init__.py").write_text("")
    (fake / "torch" / "distributed" / "run.py").write_text(FAKE_TORCHRUN)
    return tmp_path


def _env(root: Path, with_torch: bool = True, **extra: str) -> dict[str, str]:
    path = [str(root / "code")] + ([str(root / "fake")] if with_torch else [])
    return {"PATH": os.environ["PATH"], "PYTHONPATH": os.pathsep.join(path),
            "GPUCLUSTER_PRE_STEP_TERMINATION_LOG": str(root / "termination-log"),
            "GPUCLUSTER_PRE_STEP_EFA_DEVICES": "32", "GPUCLUSTER_PRE_STEP_EXPECTED_GBPS": "487",
            "GPUCLUSTER_NODE_NAME": GOOD, "PET_MASTER_PORT": "29400", "FAKE_ARGV": str(root / "argv"),
            "GPUCLUSTER_PRE_STEP_POOL": "h100", **extra}


def _driver(root: Path, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", precheck.MODULE, *args], env=env, capture_output=True, text=True,
                          timeout=60, cwd=root)


def test_the_torchrun_driver_relays_a_failed_verdict(shipped):
    verdict = pv.message({GOOD: ok(), BAD: {"verdict": FAIL, "reason": "efa-missing", "detail": "0 of 32"}},
                               None, 487.0, 4.2)
    done = _driver(shipped, ["torchrun"], _env(shipped, FAKE_RESULT=verdict))
    assert done.returncode == 86, done.stderr
    assert (shipped / "argv").read_text() == "--master-port=29401 --module gpucluster_goodput.precheck rank"
    assert (shipped / "termination-log").read_text() == verdict
    assert done.stdout.splitlines() == ["torchrun: workers done", *pv.report_lines(verdict)]


def test_on_a_pool_that_does_not_enforce_a_failed_verdict_lets_the_job_run(shipped):
    verdict = pv.message({GOOD: ok(), BAD: {"verdict": FAIL, "reason": "efa-missing", "detail": "0 of 32"}},
                         None, 487.0, 4.2)
    done = _driver(shipped, ["torchrun"], _env(shipped, FAKE_RESULT=verdict, GPUCLUSTER_PRE_STEP_POOL="dev"))
    assert done.returncode == 0, done.stderr
    assert not (shipped / "termination-log").exists()
    assert done.stdout.splitlines()[-1].endswith("the job's command runs anyway (the pool's remediation is not on: "
                                                 "nothing would keep it off the node)")


def test_the_torchrun_driver_without_a_verdict_fails_open_naming_its_own_node_only(shipped):
    done = _driver(shipped, ["torchrun"], _env(shipped, FAKE_EXIT="1", GPUCLUSTER_PRE_STEP_EFA_DEVICES="0"))
    assert done.returncode == 0 and not (shipped / "termination-log").exists()
    lines = done.stdout.splitlines()
    # Its own check (this machine's /sys, asked for none) passed: nobody is blamed, and the job starts.
    assert lines[-2].startswith(f"gpucluster pre-step check: node {GOOD}: peer-failed (check-incomplete: its own "
                                "check passed (")
    assert lines[-1].endswith("did not finish: torchrun exited 1 without a verdict (its output above says why) in "
                              f"{lines[-1].split(' in ')[-1].split(' s:')[0]} s: the job's command runs anyway (a "
                              "check that cannot finish never stops a job)")


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="this Python has PyTorch")
def test_an_image_without_torch_skips_the_check(shipped):
    done = _driver(shipped, ["torchrun"], _env(shipped, with_torch=False))
    assert (done.returncode, done.stdout) == (0, "gpucluster pre-step check: skipped: the image has no PyTorch\n")
    assert not (shipped / "termination-log").exists()


def test_rank_0_s_verdict_survives_mpirun_s_tags_and_split_reads():
    verdict = pv.message({f"ip-10-0-64-{i}.ec2.internal": ok() for i in range(10)}, 441.0, 487.0, 9.0)
    lines = pv.result_lines(verdict)
    assert len(lines) > 3 and all(len(line) <= 240 for line in lines)
    assert lines[0].startswith("gpucluster-pre-step-result 0/")
    payloads = [line.split(pv.RESULT_MARKER, 1)[1] for line in lines]
    assert pv.assemble(payloads) == verdict
    # --tag-output's prefix inside a line split across two reads of rank 0's pipe.
    split = [*payloads[:2], payloads[2][:50] + "[1,0]<stdout>:" + payloads[2][50:], *payloads[3:]]
    assert pv.assemble(split) == verdict
    assert pv.assemble(payloads[:-1]) == ""  # a chunk lost: no verdict, not half of one
    assert pv.assemble([*payloads, *payloads]) == verdict  # printed twice (a restarted rank): the last


def test_the_mpirun_driver_reads_rank_0_s_verdict_from_the_tagged_output(shipped):
    verdict = pv.message({GOOD: ok(), BAD: ok()}, 441.0, 487.0, 9.0)
    fake = shipped / "mpirun.py"
    fake.write_text(textwrap.dedent(f'''\
        import sys
        print("[1,3]<stdout>:NCCL INFO NET/OFI Selected provider is efa")
        for line in {pv.result_lines(verdict)!r}:
            print("[1,0]<stdout>:" + line)
        sys.exit(0)
        '''))
    done = _driver(shipped, ["mpirun", sys.executable, str(fake)], _env(shipped))
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (shipped / "termination-log").exists()  # a pass leaves the job's own termination message
    assert done.stdout.splitlines()[-1].endswith("passed in 9 s: the job's command runs")
    fake.write_text("import sys; print('ssh: connect to host mpi-worker-1: refused'); sys.exit(1)\n")
    done = _driver(shipped, ["mpirun", sys.executable, str(fake)], _env(shipped))
    assert done.returncode == 0  # no verdict: the check's own fault, the job runs
    assert f"did not finish: mpirun ({sys.executable}) exited 1 without a verdict" in done.stdout.splitlines()[-1]


def test_a_hung_child_is_killed_at_the_deadline():
    started = time.monotonic()
    assert precheck.run_child([sys.executable, "-c", "import time; time.sleep(30)"], dict(os.environ), 1) == (None, [])
    assert time.monotonic() - started < 10


def test_a_grandchild_holding_the_output_does_not_hold_the_driver(tmp_path):
    # A torchrun worker in a session of its own keeps the pipe open: the driver waits for torchrun alone.
    pid_file = tmp_path / "pid"
    script = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'], "
              f"start_new_session=True); open({str(pid_file)!r}, 'w').write(str(p.pid)); print('done')")
    started = time.monotonic()
    try:
        assert precheck.run_child([sys.executable, "-c", script], dict(os.environ), 20) == (0, [])
        assert time.monotonic() - started < 15
    finally:
        with contextlib.suppress(ProcessLookupError, FileNotFoundError, ValueError):
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)


def test_usage():
    assert precheck.main([]) == 2 and precheck.main(["mpirun"]) == 2


needs_sh = pytest.mark.skipif(shutil.which("sh") is None, reason="no /bin/sh")


def _wrapped(root: Path, env: dict[str, str], job: list[str]) -> subprocess.Popen:
    return subprocess.Popen(prestep.wrap(job, ["torchrun"], "h100"), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=root)


@needs_sh
def test_the_wrapper_execs_the_job_s_argv_intact_after_a_pass(shipped):
    verdict = pv.message({GOOD: ok(), BAD: ok()}, 441.0, 487.0, 9.0)
    job = ["/bin/sh", "-c", 'echo "job ran as $$: $1|$2"; exit 7', "train", "a b", "--x='y'"]
    child = _wrapped(shipped, _env(shipped, FAKE_RESULT=verdict), job)
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 7
    assert out.splitlines()[-1] == f"job ran as {child.pid}: a b|--x='y'"  # exec: the wrapper's own process


@needs_sh
def test_the_wrapper_stops_with_the_check_s_exit_code(shipped):
    verdict = pv.message({BAD: {"verdict": FAIL, "reason": "efa-missing", "detail": "0 of 32"}}, None, 487.0, 1)
    child = _wrapped(shipped, _env(shipped, FAKE_RESULT=verdict), ["/bin/echo", "job ran"])
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 86 and "job ran" not in out


@needs_sh
def test_the_wrapper_runs_the_job_when_the_check_itself_breaks(shipped):
    child = _wrapped(shipped, _env(shipped, with_torch=False, PYTHONPATH=str(shipped / "nowhere")),
                     ["/bin/echo", "job ran"])
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 0 and out.splitlines()[-1] == "job ran"
    assert "gpucluster pre-step check: ended with 1 (its own fault): the job runs anyway" in out


@needs_sh
def test_the_wrapper_ends_at_once_on_sigterm(shipped):
    out = shipped / "out"
    with out.open("w") as sink:
        child = subprocess.Popen(prestep.wrap(["/bin/echo", "job ran"], ["torchrun"], "h100"),
                                 env=_env(shipped, FAKE_SLEEP="30"), stdout=sink, stderr=subprocess.STDOUT,
                                 cwd=shipped, start_new_session=True)
    pid_file = shipped / "argv.pid"
    try:
        deadline = time.monotonic() + 20
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=10) == 143
        assert "job ran" not in out.read_text()
    finally:
        # In a pod the kernel ends the rest with PID 1; here: the driver (the wrapper's group), then torchrun's.
        for group in (child.pid, int(pid_file.read_text()) if pid_file.exists() else None):
            if group is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group, signal.SIGKILL)
        child.wait()


@needs_sh
def test_the_wrapper_without_python3_runs_the_job(tmp_path):
    child = subprocess.run(prestep.wrap(["/bin/echo", "job ran"], ["torchrun"], "h100"), env={"PATH": str(tmp_path)},
                           capture_output=True, text=True, timeout=30)
    assert (child.returncode, child.stdout) == (0, "job ran\n")
    assert child.stderr == "gpucluster pre-step check: skipped: no python3 in the image\n"


# -- what ships ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("module", "lazy"), [(precheck, {"torch", "torch.distributed"}), (pv, set())])
def test_the_program_imports_the_standard_library_and_torch_only_lazily(module, lazy):
    tree = ast.parse(Path(module.__file__).read_text())
    top = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            top.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):  # the package's own: relative only
            assert node.level == 1 or node.module.split(".")[0] in sys.stdlib_module_names, node.module
    assert top <= set(sys.stdlib_module_names)
    inner = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) and n not in tree.body for a in n.names}
    assert inner == lazy


def test_the_e2e_s_entry_points_are_on_the_program():
    # tests/e2e calls precheck.local_check on a fake sysfs tree and precheck.message (issue 32's design).
    assert precheck.local_check is pv.local_check and precheck.message is pv.message
