"""`bootstrap doctor`: causes named from bundles built of upstream message formats (tests/data/doctor/*/README.md
cites each), bundles that cannot be read, and --collect against the fake API server read back by --from."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path
from types import SimpleNamespace

import pytest

from bootstrap.doctor import causes, collect, logparse
from bootstrap.doctor.bundle import KINDS, Bundle, read_bundle
from bootstrap.doctor.findings import line_time
from bootstrap.verbs.jobs import doctor
from tests.kube_fake import FakeKube

DATA = Path(__file__).parent / "data" / "doctor"
DOCTOR = Path(__file__).resolve().parents[1] / "bootstrap" / "doctor"
WL_LLAMA = "mpijob-llama-d97bf"  # the fixtures' Workload names (deterministic)
ICE = ("We currently do not have sufficient p5.48xlarge capacity in the Availability Zone you requested (us-east-1a). "
       "Our system will be working on provisioning additional capacity. You can currently get p5.48xlarge capacity "
       "by not specifying an Availability Zone in your request or choosing us-east-1b, us-east-1c. Launching EC2 "
       "instance failed.")
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:v1.4"

# case -> (the causes doctor names, in order; one evidence text exactly as doctor reports it)
EXPECTED = {
    "waiting-for-quota": (["waiting-for-quota"],
                          "QuotaReserved=False reason Pending: couldn't assign flavors to pod set worker: insufficient "
                          "unused quota for nvidia.com/gpu in flavor pool-p5, 8 more needed"),
    "queue-held": (["queue-inactive"], "QuotaReserved=False reason Inadmissible: ClusterQueue gpucluster is inactive"),
    "waiting-for-nodes": (["waiting-for-nodes"],
                          "Normal TriggeredScaleUp: pod triggered scale-up: [{eks-gpucluster-prod-p5-20261205093011-"
                          "a2c9e7d1-0c3b-4f4e-9b0a-5d1f0e6c1a2b 0->2 (max: 4)}]"),
    "node-group-at-max-size": (["node-group-at-max-size"],
                               "Normal NotTriggerScaleUp: pod didn't trigger scale-up: 1 max node group size reached, "
                               "1 node(s) didn't match Pod's node affinity/selector"),
    "insufficient-capacity": (["insufficient-capacity"], ICE),
    "ec2-vcpu-quota": (["ec2-vcpu-quota"],
                       "You have requested more vCPU capacity than your current vCPU limit of 0 allows for the instance "
                       "bucket that the specified instance type belongs to. Please visit "
                       "http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit. Launching "
                       "EC2 instance failed."),
    "pods-ready-timeout": (["pods-ready-timeout"],
                           f"Evicted=True reason PodsReadyTimeout: Exceeded the PodsReady timeout training/{WL_LLAMA}"),
    "image-pull": (["image-pull"],
                   f'Warning Failed: Failed to pull image "{IMAGE}": rpc error: code = NotFound desc = failed to pull '
                   f'and unpack image "{IMAGE}": failed to resolve reference "{IMAGE}": {IMAGE}: not found'),
    "oom-killed": (["oom-killed"], "terminated: reason OOMKilled, exit code 137 (memory limit 1638Gi)"),
    "cuda-oom": (["cuda-oom"],
                 "[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 5 has a total "
                 "capacity of 79.19 GiB of which 1.21 GiB is free. Including non-PyTorch memory, this process has "
                 "77.96 GiB memory in use. Of the allocated memory 74.21 GiB is allocated by PyTorch, and 2.04 GiB is "
                 "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
                 "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
                 "Memory Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-"
                 "with-pytorch-cuda-alloc-conf)"),
    "nccl-watchdog-timeout": (["nccl-watchdog-timeout"],
                              "[rank8]:[E1205 10:42:17.201856419 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID "
                              "0(default_pg) Rank 8] Watchdog caught collective operation timeout: "
                              "WorkNCCL(SeqNum=48213, OpType=ALLREDUCE, NumelIn=262144000, NumelOut=262144000, "
                              "Timeout(ms)=600000) ran for 600021 milliseconds before timing out."),
    "nccl-socket-fallback": (["nccl-socket-fallback"], "llama-worker-0:41:50 [0] NCCL INFO Using network Socket"),
    "efa-not-allocatable": (["efa-not-allocatable"],
                            "allocatable vpc.amazonaws.com/efa: 0 (a p5.48xlarge of pool p5 has 32)"),
    "gpu-not-allocatable": (["gpu-not-allocatable"], "allocatable nvidia.com/gpu: 7 (a p5.48xlarge has 8)"),
    "node-not-ready": (["node-not-ready"], "Ready=Unknown reason NodeStatusUnknown: Kubelet stopped posting node status."),
    "no-node-group-fits": (["no-node-group-fits"],
                           "Normal NotTriggerScaleUp: pod didn't trigger scale-up: 1 Insufficient vpc.amazonaws.com/efa, "
                           "1 node(s) didn't match Pod's node affinity/selector"),
    "gpu-xid": (["gpu-xid"], "AcceleratedHardwareReady=False reason NvidiaXID79Error: detected XID-79 on the "
                             "instance, review kernel logs for additional information."),
    "node-hardware-unhealthy": (["node-hardware-unhealthy"], "AcceleratedHardwareReady=False reason "
                                                             "NvidiaNVLinkError: detected 14 NVLink errors on fieldId 449"),
    "loss-nan": (["loss-nan"],
                 " [2026-12-05 10:11:18] iteration      190/   50000 | consumed samples:        48640 | elapsed time "
                 "per iteration (ms): 2104.2 | throughput per GPU (TFLOP/s/GPU): 412.3 | learning rate: 1.500000E-04 | "
                 "global batch size:   256 | lm loss: 3.500000E+00 | loss scale: 1.0 | grad norm: 0.412 | number of "
                 "skipped iterations:   0 | number of nan iterations:   2 |"),
    "loss-spike": (["loss-spike"],
                   "[rank0]:[titan] 2026-12-05 10:09:33,412 - root - INFO - step:  140  loss: 9.8731  grad_norm:  "
                   "0.4123  memory: 61.83GiB(78.16%)  tps: 3,412  tflops: 412.31  mfu: 41.69%"),
    "checkpoint-dominates": (["checkpoint-dominates"],
                             "    save-checkpoint ................................: (58230.11, 61234.56)"),
    "deadline-exceeded": (["deadline-exceeded"],
                          "Failed=True reason DeadlineExceeded: Job was active longer than specified deadline"),
    "max-execution-time": (["max-execution-time"],
                           "Evicted=True reason DeactivatedDueToMaximumExecutionTimeExceeded: The workload is "
                           "deactivated due to exceeding the maximum execution time"),
    "spot-interruption": (["spot-interruption"],
                          "status Failed reason Terminated: Pod was terminated in response to imminent node shutdown."),
    "job-failed": (["job-failed"],
                   "[rank0]: FileNotFoundError: [Errno 2] No such file or directory: '/fsx/datasets/c4/train-00000.bin'"),
    # Teams (tests/test_doctor_teams.py has their variations):
    "team-over-share": (["team-over-share"], "pool-h100 nvidia.com/gpu: reserved 48, borrowed 16; nominalQuota 32"),
    "team-preempted": (["team-preempted"],
                       "Preempted=True reason InCohortReclamation: Preempted to accommodate a workload (UID: "
                       "e81f6c2d-4a9b-4e07-93d5-1c6b8a2f0d79, JobUID: 6c3a9e1f-0b7d-4258-a4e6-2d9f8c1b5e03) due to "
                       "reclamation within the cohort; preemptor path: /gpucluster/gpucluster-team-language; "
                       "preemptee path: /gpucluster/gpucluster-team-vision"),
    # Placement (tests/test_doctor_placement.py has their variations):
    "waiting-for-all-nodes": (["waiting-for-all-nodes"],
                              "Provisioned=False reason CapacityIsNotFound: Capacity is not found, CA will try to find "
                              "it later."),
    "network-domain": (["network-domain"],
                       'Warning SecondPassFailed: couldn\'t assign flavors to pod set node: topology '
                       '"gpucluster-network-3" allows to fit only 3 out of 4 pod(s). Total nodes: 16; excluded: '
                       'resource "cpu": 12'),
    # A job queued before its pool got a network topology (tests/test_doctor_topology_upgrade.py has its variations):
    "created-before-topology": (["created-before-topology"],
                                "pod set node: 4 pods on pool h100, no topology request (no kueue.x-k8s.io/podset-"
                                "required-topology, -preferred-topology or -unconstrained-topology annotation)"),
    # Goodput (tests/test_doctor_goodput.py has their variations):
    "pre-step-check-failed": (["pre-step-check-failed"],
                              'terminated with exit code 86: {"busbw_gbps": null, "expected_gbps": 487.0, "nodes": '
                              '{"ip-10-0-64-11.ec2.internal": {"detail": "32 EFA devices, 8 GPUs", "reason": "ok", '
                              '"verdict": "pass"}, "ip-10-0-64-12.ec2.internal": {"detail": "0 of 32 EFA devices under '
                              '/sys/class/infiniband", "reason": "efa-missing", "verdict": "fail"}}, "seconds": 4.2}'),
    "node-quarantined": (["node-quarantined"], "quarantined ip-10-0-64-12.ec2.internal (straggler, mode on)"),
    "team-budget-reached": (["team-budget-reached"],
                            "month-to-date spend 151,872.40 USD of its monthlyBudgetUsd 150,000.00 (101 %), 2026-12 "
                            "(UTC)"),
}
HEALTHY = ("healthy", "healthy-torchrun")
# Bundles `doctor --collect` wrote on the local control plane (their READMEs say how): the real
# Kueue's words, which the hand-made bundles above only imitate.
CAPTURED = {
    "local-waiting-for-quota": ("waiting-for-quota", "other admitted jobs hold the pool's quota"),
    "local-queue-held": ("queue-inactive", "QuotaReserved=False reason Inadmissible: ClusterQueue gpucluster is "
                                           "inactive"),
    # Kueue set the job aside unevaluated: no QuotaReserved, the cause read from its pod set and the queues.
    "local-team-over-share-set-aside": ("team-over-share", "not admitted, no QuotaReserved condition 12 s after its "
                                                           "creation; pod set node: 1 x 8 nvidia.com/gpu, nodeSelector "
                                                           "gpucluster.io/pool=h100 (flavor pool-h100)"),
}


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = doctor.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv: str) -> tuple[int, dict]:
    code, out, err = run(capsys, *argv, "--json")
    assert "Traceback" not in err
    return code, json.loads(out)


# -- causes named from the fixture bundles -------------------------------------------------------


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_doctor_names_the_cause_of_each_failure_with_its_evidence(capsys, case):
    expected_causes, evidence = EXPECTED[case]
    code, report = run_json(capsys, "--from", str(DATA / case))
    assert code == 1
    assert report["healthy"] is False
    assert [f["cause"] for f in report["findings"]] == expected_causes
    texts = [e["text"] for f in report["findings"] for e in f["evidence"]]
    assert evidence in texts
    first = report["findings"][0]
    assert first["title"] and first["fix"] and all(e["where"] for e in first["evidence"])


@pytest.mark.parametrize("case", sorted(CAPTURED))
def test_doctor_names_the_cause_from_the_real_kueue_s_words(capsys, case):
    cause, text = CAPTURED[case]
    code, report = run_json(capsys, "--from", str(DATA / case))
    assert code == 1 and [f["cause"] for f in report["findings"]] == [cause]
    finding = report["findings"][0]
    assert text in finding["fix"] or text in [e["text"] for e in finding["evidence"]]
    assert "captured from the local control plane" in (DATA / case / "README.md").read_text()


def test_every_cause_has_its_own_bundle_citing_its_sources():
    # README, "When a job fails": tests/data/doctor/ holds one bundle per cause.
    distinct = {cause for causes_, _ in EXPECTED.values() for cause in causes_}
    assert len(distinct) == len(EXPECTED)
    assert sorted(distinct) == sorted(causes.CAUSES), "a cause without a bundle, or a bundle of no known cause"
    for case in [*EXPECTED, *HEALTHY]:
        readme = (DATA / case / "README.md").read_text()
        assert "## Sources of every message format" in readme and readme.count("\n- ") >= 2, case
    assert sorted(p.name for p in DATA.iterdir() if p.is_dir()) == sorted([*EXPECTED, *HEALTHY, *CAPTURED])


@pytest.mark.parametrize("case", HEALTHY)
def test_a_healthy_job_exits_0(capsys, case):
    code, report = run_json(capsys, "--from", str(DATA / case))
    assert code == 0
    assert report["healthy"] is True and report["findings"] == []
    assert report["read"]["source"] == "bundle" and report["read"]["logs"] == 1


def test_text_report_puts_causes_first_then_what_was_read(capsys):
    code, out, err = run(capsys, "--from", str(DATA / "nccl-watchdog-timeout"))
    assert code == 1 and err == ""
    lines = out.splitlines()
    assert lines[0] == "doctor: job gpt in namespace training: 1 cause found"
    assert lines[2] == "1. [nccl-watchdog-timeout] NCCL ALLREDUCE timed out after 10 min (the watchdog aborted the job)"
    assert lines[3] == "   log: Pod/gpt-node-0-1-4bf77 container node, 12-05 10:42:17.201856"
    assert lines[4] == "     " + EXPECTED["nccl-watchdog-timeout"][1]
    assert lines[5].startswith("   fix: a collective waited for a rank that never joined")
    assert out.index("fix:") < out.index("Read from the bundle in ")
    assert "2 Pods, 3 Nodes, 1 TrainJob, 1 JobSet, 1 Workload, 1 ClusterQueue; 1 container log;" in " ".join(lines)


def test_healthy_text_report(capsys):
    code, out, _ = run(capsys, "--from", str(DATA / "healthy"))
    assert code == 0
    assert out.splitlines()[0] == "doctor: job llama in namespace training: no known cause of trouble found"
    assert "Auto Scaling activities skipped: no AWS credentials." in " ".join(out.split())


def test_json_details_carry_the_numbers(capsys):
    _, report = run_json(capsys, "--from", str(DATA / "checkpoint-dominates"))
    details = report["findings"][0]["details"]
    assert details["stepsBetweenSaves"] == 50 and details["saveSeconds"] == pytest.approx(61.23456)
    assert details["stepSeconds"] == pytest.approx(2.104) and details["share"] == pytest.approx(0.366, abs=0.002)
    _, report = run_json(capsys, "--from", str(DATA / "gpu-xid"))
    assert report["findings"][0]["details"] == {"node": "ip-10-0-64-12.ec2.internal", "xids": [79], "replaceNode": True}
    assert report["findings"][0]["title"] == "GPU XID 79 on node ip-10-0-64-12.ec2.internal (replace the node)"


def _node(bundle: Bundle, name: str = "ip-10-0-64-11.ec2.internal") -> dict:
    return bundle.node(name)


def _set_condition(node: dict, ctype: str, **values) -> None:
    next(c for c in node["status"]["conditions"] if c["type"] == ctype).update(values)


def _gpu_7(b: Bundle) -> None:
    _node(b)["status"]["allocatable"]["nvidia.com/gpu"] = "7"


def _not_ready(b: Bundle) -> None:
    _set_condition(_node(b), "Ready", status="Unknown", reason="NodeStatusUnknown",
                   message="Kubelet stopped posting node status.")


def _no_group_fits(b: Bundle) -> None:
    for event in b.of("Event"):
        if event["reason"] == "TriggeredScaleUp":
            event.update(reason="NotTriggerScaleUp",
                         message="pod didn't trigger scale-up: 1 Insufficient vpc.amazonaws.com/efa, 1 node(s) didn't "
                                 "match Pod's node affinity/selector")


def _kernel_xid_13(b: Bundle) -> None:
    _set_condition(_node(b, "ip-10-0-64-12.ec2.internal"), "AcceleratedHardwareReady", status="True",
                   reason="NvidiaGPUIsReady", message="Monitoring for the Nvidia GPU system is active")
    key = next(iter(b.logs))
    b.logs[key] += ("[  812.331207] NVRM: Xid (PCI:0000:53:00): 13, pid=2231, name=python3, Graphics SM Warp Exception "
                    "on (GPC 0, TPC 1, SM 0): Out Of Range Address\n")


def _xid_warning_event(b: Bundle) -> None:
    _kernel_xid_13(b)
    b.logs = {}
    b.objects["Event"].append({
        "kind": "Event", "apiVersion": "v1", "metadata": {"name": "n.1", "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": "ip-10-0-64-12.ec2.internal"}, "type": "Warning",
        "reason": "AcceleratedHardwareReady", "source": {"component": "eks-node-monitoring-agent"},
        "message": "NvidiaXID31Warning: detected unknown XID-31 on the instance, review kernel logs for additional "
                   "information.", "lastTimestamp": "2026-12-05T10:30:00Z"})


@pytest.mark.parametrize("case, change, cause, title", [
    ("healthy", _gpu_7, "gpu-not-allocatable", "node ip-10-0-64-11.ec2.internal offers 7 of its 8 GPUs"),
    ("healthy", _not_ready, "node-not-ready", "node ip-10-0-64-11.ec2.internal is not Ready"),
    ("waiting-for-nodes", _no_group_fits, "no-node-group-fits", "2 pod(s) wait and no node group could run them"),
    ("gpu-xid", _kernel_xid_13, "gpu-xid", "GPU XID 13 on node ip-10-0-64-12.ec2.internal"),
    ("gpu-xid", _xid_warning_event, "gpu-xid", "GPU XID 31 on node ip-10-0-64-12.ec2.internal"),
])
def test_variations_of_the_fixtures_name_the_other_causes(case, change, cause, title):
    bundle = read_bundle(DATA / case)
    change(bundle)
    findings = causes.diagnose(bundle)
    assert [(f.cause, f.title) for f in findings] == [(cause, title)]
    if cause == "gpu-xid":
        assert findings[0].details["replaceNode"] is False and "usually come from the application" in findings[0].fix


def test_a_watchdog_timeout_after_a_cuda_oom_lists_the_oom_first(tmp_path):
    bundle = read_bundle(DATA / "nccl-watchdog-timeout")
    oom = read_bundle(DATA / "cuda-oom")
    bundle.logs.update(oom.logs)
    assert [f.cause for f in causes.diagnose(bundle)] == ["cuda-oom", "nccl-watchdog-timeout"]


# -- bundles that cannot be read: one line, exit 2, never a traceback ------------------------------


def _copy(tmp_path: Path, case: str = "cuda-oom") -> Path:
    target = tmp_path / "bundle"
    shutil.copytree(DATA / case, target)
    return target


def _write(path: Path, content: str | bytes) -> None:
    path.write_bytes(content if isinstance(content, bytes) else content.encode())


BROKEN = {
    "no such directory": (lambda b: shutil.rmtree(b), "no such directory"),
    "a file": (lambda b: (shutil.rmtree(b), _write(b, "{}")), "not a directory"),
    "empty directory": (lambda b: (shutil.rmtree(b), b.mkdir()), "bundle.json: missing; not a doctor bundle (the "
                                                                 "directory is empty)"),
    "no bundle.json": (lambda b: (b / "bundle.json").unlink(), "bundle.json: missing; not a doctor bundle (it holds "),
    "bundle.json empty": (lambda b: _write(b / "bundle.json", ""), "bundle.json: empty file"),
    "bundle.json not JSON": (lambda b: _write(b / "bundle.json", '{"version": 1,'),
                             "bundle.json: not valid JSON: Expecting property name enclosed in double quotes: line 1 column 15"),
    "bundle.json a list": (lambda b: _write(b / "bundle.json", "[]"), "bundle.json: must be a JSON object, got list"),
    "bundle.json version": (lambda b: _write(b / "bundle.json", '{"version": 2, "namespace": "training"}'),
                            "bundle.json: version 2 is not one this doctor reads (1)"),
    "no namespace": (lambda b: _write(b / "bundle.json", '{"version": 1}'),
                     "bundle.json: `namespace` must be a non-empty string, got None"),
    "no objects/": (lambda b: shutil.rmtree(b / "objects"), "objects/: missing (a partial bundle: collect it again)"),
    "no Pod.json": (lambda b: (b / "objects" / "Pod.json").unlink(), "objects/Pod.json: missing"),
    "Pod.json truncated": (lambda b: _write(b / "objects" / "Pod.json", '[{"kind": "Pod", "metadata": {"na'),
                           "objects/Pod.json: not valid JSON: Unterminated string starting at: line 1 column 31"),
    "Node.json an object": (lambda b: _write(b / "objects" / "Node.json", "{}"),
                            "objects/Node.json: must be a JSON list of Node objects, got dict"),
    "an item not an object": (lambda b: _write(b / "objects" / "Event.json", "[1]"),
                              "objects/Event.json: item 0 is a int, not an object"),
    "an item without a name": (lambda b: _write(b / "objects" / "Pod.json", '[{"kind": "Pod", "metadata": {}}]'),
                               "objects/Pod.json: item 0 has no metadata.name"),
    "a wrong kind": (lambda b: _write(b / "objects" / "Pod.json", '[{"kind": "Node", "metadata": {"name": "x"}}]'),
                     "objects/Pod.json: item 0 is a Node, not a Pod"),
    "not UTF-8": (lambda b: _write(b / "objects" / "Workload.json", b"[\xff]"),
                  "objects/Workload.json: not UTF-8 text (invalid start byte at byte 1)"),
    "a Secret": (lambda b: _write(b / "objects" / "Secret.json", "[]"),
                 "objects/Secret.json: bundles never hold Secrets; delete it before sharing the bundle"),
    "an unknown kind": (lambda b: _write(b / "objects" / "ConfigMap.json", "[]"),
                        "objects/ConfigMap.json: not a kind doctor reads"),
    "activities not a list": (lambda b: (b.joinpath("aws").mkdir(), _write(b / "aws" / "scaling-activities.json", "{}")),
                              "aws/scaling-activities.json: must be a JSON list of scaling activities"),
}


@pytest.mark.parametrize("what", sorted(BROKEN))
def test_a_partial_empty_or_malformed_bundle_is_one_clear_line_and_exit_2(capsys, tmp_path, what):
    breaker, message = BROKEN[what]
    bundle = _copy(tmp_path)
    breaker(bundle)
    code, out, err = run(capsys, "--from", str(bundle))
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"doctor: error: bundle {bundle}: ")
    assert message in err


def test_optional_kinds_may_be_absent_but_required_ones_may_not(tmp_path):
    bundle = _copy(tmp_path)
    for kind in ("MPIJob", "TrainJob", "JobSet", "Workload", "ClusterQueue"):
        (bundle / "objects" / f"{kind}.json").unlink()
    read = read_bundle(bundle)
    assert set(read.objects) == {"Pod", "Event", "Node"}
    assert [f.cause for f in causes.diagnose(read)] == ["cuda-oom"]


# -- --collect against the fake API server, read back by --from ------------------------------------


def _serve(case: str) -> tuple[FakeKube, Bundle]:
    source = read_bundle(DATA / case)
    fake = FakeKube(json.loads(json.dumps(o)) for items in source.objects.values() for o in items)
    for (pod, container), text in source.logs.items():
        fake.logs[(source.namespace, pod, container)] = text
    return fake.start(), source


ROUND_TRIP = ("cuda-oom", "waiting-for-quota", "efa-not-allocatable", "gpu-xid", "nccl-socket-fallback", "image-pull",
              "queue-held", "spot-interruption", "healthy")


@pytest.mark.parametrize("case", ROUND_TRIP)
def test_collect_writes_a_bundle_that_from_reads_back_to_the_same_findings(capsys, tmp_path, case):
    fake, source = _serve(case)
    try:
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        code, live = run_json(capsys, source.job, "--kubeconfig", kubeconfig, "--collect", str(tmp_path / "b"))
    finally:
        fake.stop()
    back_code, back = run_json(capsys, "--from", str(tmp_path / "b"))
    expected = [f.as_json() for f in causes.diagnose(source)]
    assert live["findings"] == back["findings"]
    assert code == back_code == (1 if expected else 0)
    if case != "spot-interruption":  # the bundle had scaling activities; a collect without --stack has none
        assert back["findings"] == expected
    assert live["read"]["source"] == "cluster" and back["read"]["source"] == "bundle"
    assert back["read"]["job"] == source.job and back["read"]["namespace"] == "training"
    assert back["read"]["aws"].startswith("skipped: no --stack")
    assert not [r for r in fake.requests if "/secrets" in r.path]


def test_collect_reads_launcher_and_rank_0_first_with_the_tail_and_the_restarted_container(capsys, tmp_path):
    fake, source = _serve("nccl-socket-fallback")
    worker1 = next(p for p in fake.objects("Pod") if p["metadata"]["name"] == "llama-worker-1")
    worker1["status"]["containerStatuses"][0].update(
        restartCount=1, lastState={"terminated": {"exitCode": 255, "reason": "Error", "finishedAt": "2026-12-05T10:20:00Z"}})
    try:
        code, _ = run_json(capsys, "llama", "--kubeconfig", fake.write_kubeconfig(tmp_path / "kc"), "--tail", "50",
                           "--collect", str(tmp_path / "b"))
    finally:
        fake.stop()
    logs = [(r.path.split("/")[6], r.query.get("previous")) for r in fake.requests if r.path.endswith("/log")]
    assert logs == [("llama-launcher-ad4ba", None), ("llama-worker-0", None), ("llama-worker-1", None),
                    ("llama-worker-1", "true")]
    assert {r.query["tailLines"] for r in fake.requests if r.path.endswith("/log")} == {"50"}
    assert (tmp_path / "b" / "logs" / "llama-worker-1" / "worker.previous.log").exists()
    assert code == 1


def test_collect_never_keeps_credentials(capsys, tmp_path):
    fake, _ = _serve("cuda-oom")
    pod = fake.objects("Pod")[0]
    pod["metadata"]["managedFields"] = [{"manager": "kubelet", "operation": "Update"}]
    pod["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = '{"token": "s3cr3t-applied"}'
    pod["spec"]["containers"][0]["env"] = [
        {"name": "HF_TOKEN", "value": "hf_s3cr3tvalue"}, {"name": "NCCL_DEBUG", "value": "INFO"},
        {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]
    try:
        run_json(capsys, "gpt", "--kubeconfig", fake.write_kubeconfig(tmp_path / "kc"), "--collect", str(tmp_path / "b"))
    finally:
        fake.stop()
    written = "".join(p.read_text() for p in (tmp_path / "b").rglob("*.json"))
    assert "s3cr3t" not in written and "managedFields" not in written
    env = read_bundle(tmp_path / "b").of("Pod")[0]["spec"]["containers"][0]["env"]
    assert env == [{"name": "HF_TOKEN", "value": "[redacted]"}, {"name": "NCCL_DEBUG", "value": "INFO"},
                   {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]
    assert not [r for r in fake.requests if "secrets" in r.path]


def test_collect_without_a_job_reads_every_job_and_notes_missing_crds(capsys, tmp_path):
    fake, _ = _serve("waiting-for-quota")
    fake.fail[("GET", "/apis/trainer.kubeflow.org/v1alpha1/namespaces/training/trainjobs")] = (404, "the server "
                                                                                              "could not find it")
    try:
        code, report = run_json(capsys, "--kubeconfig", fake.write_kubeconfig(tmp_path / "kc"),
                                "--collect", str(tmp_path / "b"))
    finally:
        fake.stop()
    assert code == 1 and [f["cause"] for f in report["findings"]] == ["waiting-for-quota"]
    assert report["read"]["job"] is None and report["read"]["objects"]["TrainJob"] is None
    assert "TrainJob: not served by the cluster (its CRD is not installed)" in report["read"]["notes"]
    assert not (tmp_path / "b" / "objects" / "TrainJob.json").exists()
    assert read_bundle(tmp_path / "b").job is None


def test_a_job_that_is_not_there_exits_2(capsys, tmp_path):
    fake, _ = _serve("cuda-oom")
    try:
        code, out, err = run(capsys, "nope", "--kubeconfig", fake.write_kubeconfig(tmp_path / "kc"))
    finally:
        fake.stop()
    assert (code, out) == (2, "")
    assert err == ("doctor: error: cannot read the cluster: no MPIJob, TrainJob or JobSet named nope in namespace "
                   "training\n")


def test_an_api_that_refuses_exits_2(capsys, tmp_path):
    fake, _ = _serve("cuda-oom")
    fake.fail[("GET", "/api/v1/namespaces/training/pods")] = (403, 'pods is forbidden: User "dev" cannot list pods')
    try:
        code, out, err = run(capsys, "gpt", "--kubeconfig", fake.write_kubeconfig(tmp_path / "kc"))
    finally:
        fake.stop()
    assert (code, out) == (2, "")
    assert err.startswith("doctor: error: cannot read the cluster: cannot list Pod in training: 403 Forbidden: pods is "
                          "forbidden") and err.count("\n") == 1


def test_an_unreachable_cluster_exits_2(capsys, tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    fake = FakeKube()
    fake._server = SimpleNamespace(server_address=("127.0.0.1", port))  # a port nothing listens on
    code, out, err = run(capsys, "gpt", "--kubeconfig", fake.write_kubeconfig(tmp_path / "kc"))
    assert (code, out) == (2, "")
    assert err.startswith(f"doctor: error: cannot read the cluster: http://127.0.0.1:{port}: ")
    code, _, err = run(capsys, "gpt", "--kubeconfig", str(tmp_path / "missing"))
    assert code == 2 and err == f"doctor: error: cannot read the cluster: kubeconfig {tmp_path / 'missing'}: no such file\n"


def test_the_stack_gives_the_namespace_pools_and_scaling_activities(capsys, tmp_path, monkeypatch):
    from bootstrap import stackfile

    pool = SimpleNamespace(name="p5", instance_type="p5.48xlarge", efa_enabled=True, capacity_type="SPOT")
    cfg = SimpleNamespace(training_namespace="ml", cluster_name="gpucluster-test", region="us-east-1",
                          aws_profile=None, gpu_pools=(pool,))
    monkeypatch.setattr(stackfile, "load_stack", lambda stack, **_: (cfg, {}, []))
    monkeypatch.setattr(collect, "aws_scaling_activities",
                        lambda session, cluster: ([{"AutoScalingGroupName": "g", "StatusCode": "Failed",
                                                    "StatusMessage": ICE}], f"read 1 activities for {cluster}"))
    fake = FakeKube().start()
    try:
        code, report = run_json(capsys, "--stack", "test", "--kubeconfig", fake.write_kubeconfig(tmp_path / "kc"),
                                "--collect", str(tmp_path / "b"))
    finally:
        fake.stop()
    assert {r.path for r in fake.requests if "/namespaces/" in r.path} >= {"/api/v1/namespaces/ml/pods"}
    assert not [r for r in fake.requests if "/namespaces/training/" in r.path]
    assert code == 1 and [f["cause"] for f in report["findings"]] == ["insufficient-capacity"]
    meta = json.loads((tmp_path / "b" / "bundle.json").read_text())
    assert meta["namespace"] == "ml" and meta["cluster"] == "gpucluster-test"
    assert meta["pools"] == {"p5": {"instanceType": "p5.48xlarge", "efa": True, "capacityType": "SPOT"}}
    assert meta["aws"] == {"scalingActivities": "read 1 activities for gpucluster-test"}
    assert read_bundle(tmp_path / "b").scaling_activities[0]["StatusMessage"] == ICE


def test_the_shipped_dev_stack_is_read_for_real(capsys, tmp_path, monkeypatch):
    asked = []
    monkeypatch.setattr(collect, "aws_scaling_activities",
                        lambda session, cluster: asked.append((session.region_name, cluster)) or (None, "skipped: test"))
    fake, _ = _serve("healthy")
    try:
        code, report = run_json(capsys, "llama", "--stack", "dev", "--kubeconfig",
                                fake.write_kubeconfig(tmp_path / "kc"), "--collect", str(tmp_path / "b"))
    finally:
        fake.stop()
    assert code == 0 and report["read"]["cluster"] == "gpucluster-dev" and report["read"]["namespace"] == "training"
    assert asked == [("us-east-1", "gpucluster-dev")] and report["read"]["aws"] == "skipped: test"
    assert read_bundle(tmp_path / "b").pools == {"dev": {"instanceType": "g6e.xlarge", "efa": False,
                                                         "capacityType": "ON_DEMAND"}}


def test_a_stack_that_cannot_be_read_exits_2(capsys):
    code, out, err = run(capsys, "--stack", "no-such-stack")
    assert (code, out) == (2, "")
    assert err.startswith("gpucluster: no stack 'no-such-stack'")


class _Client:
    def __init__(self, fail: Exception | None = None):
        self.fail, self.asked = fail, []

    def get_paginator(self, name):
        assert name == "describe_auto_scaling_groups"
        return SimpleNamespace(paginate=lambda **kw: self.asked.append(kw) or [
            {"AutoScalingGroups": [{"AutoScalingGroupName": "eks-p5"}]}])

    def describe_scaling_activities(self, **kw):
        if self.fail:
            raise self.fail
        return {"Activities": [{"AutoScalingGroupName": kw["AutoScalingGroupName"], "StatusCode": "Failed"}]}


def test_scaling_activities_come_from_the_clusters_tagged_groups_or_are_skipped():
    from botocore.exceptions import ClientError

    client = _Client()
    session = SimpleNamespace(get_credentials=lambda: object(), client=lambda name: client)
    activities, note = collect.aws_scaling_activities(session, "gpucluster-prod")
    assert activities == [{"AutoScalingGroupName": "eks-p5", "StatusCode": "Failed"}]
    assert client.asked == [{"Filters": [{"Name": "tag-key", "Values": ["k8s.io/cluster-autoscaler/gpucluster-prod"]}]}]
    assert note == "read 1 activities of 1 Auto Scaling groups tagged k8s.io/cluster-autoscaler/gpucluster-prod"
    assert collect.aws_scaling_activities(SimpleNamespace(get_credentials=lambda: None), "c") == (
        None, "skipped: no AWS credentials")
    denied = _Client(ClientError({"Error": {"Code": "AccessDenied", "Message": "not allowed"}},
                                 "DescribeScalingActivities"))
    activities, note = collect.aws_scaling_activities(
        SimpleNamespace(get_credentials=lambda: object(), client=lambda name: denied), "c")
    assert activities is None and note.startswith("skipped: An error occurred (AccessDenied)")


# -- arguments ------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv, message", [
    (["--from", "x", "llama"], "--from reads a bundle; JOB apply only to a live cluster"),
    (["--from", "x", "--namespace", "ml", "--collect", "y"], "--from reads a bundle; --namespace, --collect apply"),
    (["--tail", "0", "--from", "x"], "--tail: must be at least 1, got 0"),
])
def test_bad_arguments_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "") and message in err


def test_collect_refuses_a_directory_that_is_not_empty(capsys, tmp_path):
    fake, _ = _serve("cuda-oom")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "notes.txt").write_text("mine")
    try:
        code, out, err = run(capsys, "gpt", "--kubeconfig", fake.write_kubeconfig(tmp_path / "kc"),
                             "--collect", str(tmp_path / "b"))
    finally:
        fake.stop()
    assert (code, out) == (2, "")
    assert err == f"doctor: error: --collect: {tmp_path / 'b'}: exists and is not an empty directory; choose a new one\n"
    assert (tmp_path / "b" / "notes.txt").read_text() == "mine"


def test_help_lists_the_causes(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "--collect DIR" in out and "--from DIR" in out
    assert "nccl-watchdog-timeout" in out and "spot-interruption" in out


# -- the parsers under the rules ----------------------------------------------------------------


def test_log_lines_give_their_time():
    assert line_time("2026-12-05T10:00:01.123Z NCCL INFO x") == "2026-12-05T10:00:01.123Z"
    assert line_time("[rank0]:[titan] 2026-12-05 10:09:33,412 - root - INFO - step: 1") == "2026-12-05 10:09:33,412"
    assert line_time(" [2026-12-05 10:11:18] iteration 190/ 50000 |") == "2026-12-05 10:11:18"
    assert line_time("[rank8]:[E1205 10:42:17.201856419 ProcessGroupNCCL.cpp:632] x") == "12-05 10:42:17.201856"
    assert line_time("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB at 2026-12-05 10:00:00") is None


def test_loss_lines_of_each_framework():
    text = "\n".join([
        " iteration       10/   50000 | lm loss: 9.800000E+00 | loss scale: 1.0 | number of nan iterations:   0 |",
        "[rank0]:[titan] 2026-12-05 10:05:00,412 - root - INFO - step:   20  loss:  7.9000  grad_norm:  0.41",
        "{'loss': 2.3456, 'grad_norm': 0.51, 'learning_rate': 1e-05, 'epoch': 0.1}",
        "step 40 loss=nan",
        "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
        "validation loss at iteration 50 | lm loss value: 2.1 | lm loss PPL: 8.1 |",
    ])
    training = logparse.parse(text)
    assert [(p.step, p.value) for p in training.losses[:3]] == [(10, 9.8), (20, 7.9), (20, 2.3456)]
    assert len(training.losses) == 4 and training.nan_lines == ["step 40 loss=nan"]


def test_a_spike_is_against_the_recent_median_not_the_start():
    points = [logparse.Point(i, v, str(v)) for i, v in enumerate([10, 8, 6, 5, 4.5, 4.4, 4.3, 4.2, 9.0])]
    assert logparse.loss_spike(points)[0].value == 9.0
    assert logparse.loss_spike(points[:-1]) is None
    tiny = [logparse.Point(i, v, str(v)) for i, v in enumerate([0.2, 0.2, 0.2, 0.2, 0.2, 0.45])]
    assert logparse.loss_spike(tiny) is None  # doubled, but less than 0.5 above


def test_checkpoint_share_from_timestamps_when_no_step_time_is_printed():
    lines = [f"[titan] 2026-12-05 10:{m:02d}:00,000 - root - INFO - step: {s}  loss: 3.0" for m, s in
             ((0, 100), (2, 200), (4, 300))]
    lines.insert(2, "[titan] 2026-12-05 10:02:01,000 - root - INFO - Finished saving the checkpoint (or staging if "
                    "async is enabled)in 100.00 seconds.")
    share = logparse.checkpoint_share(logparse.parse("\n".join(lines)))
    # 1.2 s per step from the save-free interval; one save at step 200: 200 steps between saves
    assert share[2] == pytest.approx(1.2) and share[3] == 200 and share[0] == pytest.approx(100 / 340)


def test_every_module_of_doctor_stays_small_and_every_kind_is_known():
    for path in DOCTOR.glob("*.py"):
        assert len(path.read_text().splitlines()) < 300, path.name
    assert KINDS == ("Pod", "Event", "Node", "MPIJob", "TrainJob", "JobSet", "Workload", "ClusterQueue")
