"""`validate`'s run: submit a stage's MPIJob, show what it waits for, judge what it printed, remove it.

The stages' jobs are components.core.kube.validation's. A stage passes
when its job succeeded and everything it checked held: the node's GPUs and
EFA devices allocatable as the catalog says, the file system mounted and
read, all_reduce_perf without wrong values (and, on two nodes, over EFA at
the bus bandwidth nccl-report expects), each worker reaching the other.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bootstrap.cluster import kinds
from bootstrap.cluster.api import Kube
from bootstrap.jobs import ops, state
from bootstrap.offline.nccl_log import judge, parse_log
from components.core.config import GpuPoolConfig
from components.core.kube import nodepool, validation

POLL_SECONDS = 10
PROGRESS_EVERY_SECONDS = 60
DD_RATE = re.compile(r"copied, [0-9.]+ s, ([0-9.]+ [kMGT]?B/s)")


@dataclass
class StageResult:
    stage: str
    verdict: str  # PASS, FAIL, TIMEOUT
    details: list[str] = field(default_factory=list)


def _mmss(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes:02d}:{secs:02d}"


def _checks_waiting(workload: dict[str, Any] | None) -> list[tuple[str, str]]:
    """The Workload's admission checks not Ready, with what their controller says (an atomic pool's
    ProvisioningRequest: cluster-autoscaler's words), as Kueue records them in status.admissionChecks."""
    checks = ((workload or {}).get("status") or {}).get("admissionChecks") or []
    return [(c.get("name", ""), c.get("message", "")) for c in checks
            if c.get("state") != "Ready" and c.get("message")]


def _progress(kube: Kube, job: dict[str, Any], namespace: str) -> str:
    """What the stage waits for, in words: queued, nodes coming, pods starting, running."""
    current = kube.get(kinds.MPIJOB, job["metadata"]["name"], namespace) or job
    workloads = kube.list(kinds.WORKLOAD, namespace)
    workload = state.workload_of(current, workloads)
    phase = state.phase(current, workload)
    if phase == state.QUEUED:
        position = state.queue_position(workload, workloads) if workload else None
        return ("queued" + (f" (position {position.position} of {position.pending})" if position else "")
                + "".join(f"; admission check {name}: {message}" for name, message in _checks_waiting(workload)))
    pods = kube.list(kinds.POD, namespace, f"{state.JOB_LABEL}={job['metadata']['name']}")
    workers = [p for p in pods if (p["metadata"].get("labels") or {}).get("training.kubeflow.org/job-role") == "worker"]
    running = sum(1 for p in workers if (p.get("status") or {}).get("phase") == "Running")
    if phase in (state.ADMITTED, state.RUNNING) and running < state.nodes(current):
        why = unschedulable(workers)
        return (f"waiting for nodes ({running}/{state.nodes(current)} workers running)"
                + (f"; the scheduler: {why}" if why else ""))
    return phase.lower()


def unschedulable(pods: list[dict[str, Any]]) -> str | None:
    """The scheduler's word on a worker it cannot place (PodScheduled False, reason Unschedulable), e.g.
    "0/19 nodes are available: 16 Insufficient vpc.amazonaws.com/efa, ..." when the nodes lack EFA devices."""
    for pod in pods:
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if (cond.get("type"), cond.get("status"), cond.get("reason")) == ("PodScheduled", "False",
                                                                               "Unschedulable") and cond.get("message"):
                return cond["message"]
    return None


def _finished(job: dict[str, Any] | None) -> str | None:
    if job is None:
        return "FAILED (the job is gone)"
    if state.condition(job, "Succeeded"):
        return "Succeeded"
    if state.condition(job, "Failed"):
        return "Failed"
    return None


def worker_nodes(kube: Kube, job_name: str, namespace: str) -> set[str]:
    pods = kube.list(kinds.POD, namespace, f"{state.JOB_LABEL}={job_name}")
    return {(p.get("spec") or {}).get("nodeName") for p in pods
            if (p["metadata"].get("labels") or {}).get("training.kubeflow.org/job-role") == "worker"} - {None, ""}


def allocatable_details(kube: Kube, pool: GpuPoolConfig, nodes: set[str]) -> tuple[bool, list[str]]:
    """The worker nodes offer the GPUs and EFA devices the catalog says their type has."""
    want_gpu, want_efa = pool.instance.gpu_count, nodepool.efa_interfaces(pool)
    if not nodes:
        return False, ["no worker was seen on a node: GPUs and EFA devices not checked"]
    ok, out = True, []
    for name in sorted(nodes):
        node = kube.get(kinds.NODE, name) or {}
        have = (node.get("status") or {}).get("allocatable") or {}
        gpu, efa = int(have.get(nodepool.GPU_RESOURCE, 0)), int(have.get(nodepool.EFA_RESOURCE, 0))
        good = gpu == want_gpu and efa == want_efa
        ok = ok and good
        out.append(f"{name}: {gpu}/{want_gpu} GPUs and {efa}/{want_efa} EFA devices allocatable"
                   + ("" if good else " (short: device plugins, or a bad device)"))
    return ok, out


def judge_stage(stage: str, pool: GpuPoolConfig, log: str) -> tuple[bool, list[str]]:
    """What the launcher's log says of a stage's checks."""
    ok, out = True, []
    marks = [line.split(validation.MARK, 1)[1].strip() for line in log.splitlines() if validation.MARK in line]
    if stage == "one-node":
        if "fsx mounted" not in marks:
            ok = False
            out.append(f"FSx is not mounted at {validation.MOUNT} (the claim, the CSI driver, security groups)")
        else:
            rates = {kind: m.group(1) for line in marks for kind in ("write", "read")
                     if line.startswith(f"fsx {kind}:") and (m := DD_RATE.search(line))}
            out.append(f"FSx mounted; direct 1 GiB write {rates.get('write', '?')}, read {rates.get('read', '?')}")
    else:
        tcp = [m for m in marks if m.startswith("tcp ")]
        closed = [m for m in tcp if m.endswith("closed")]
        if len(tcp) < 2 or closed:
            ok = False
        out += [m.removeprefix("tcp ") for m in tcp] or ["no TCP check ran"]
    report = judge(parse_log(log), pool.instance_type if stage == "two-node" else None)
    ok = ok and report["verdict"] == "PASS"
    peak = report["peak_busbw_gbps"]
    out.append(f"all_reduce_perf {report['verdict']}: peak bus bandwidth "
               f"{'-' if peak is None else f'{peak:.1f} GB/s'} at {report['peak_size'] or '-'}, "
               f"transport {report['transport']}, #wrong {report['wrong']}"
               + (f", expected >= {report['pass_threshold_gbps']} GB/s" if report["pass_threshold_gbps"] else ""))
    out += report["reasons"]
    return ok, out


def run_stage(kube: Kube, pool: GpuPoolConfig, stage: str, namespace: str, claim: str, timeout_seconds: int,
              say: Callable[[str], None], sleep: Callable[[float], None] = time.sleep,
              clock: Callable[[], float] = time.monotonic) -> StageResult:
    """Submit, wait with progress, judge; the job is deleted however this ends (Ctrl-C included)."""
    manifest = validation.mpijob(stage, pool, namespace, claim, ops.image_cache(kube, namespace))
    name = manifest["metadata"]["name"]
    if kube.get(kinds.MPIJOB, name, namespace) is not None:
        kube.delete(kinds.MPIJOB, name, namespace)  # a run that was cut off before its clean-up
    job = kube.create(kinds.MPIJOB, manifest)
    started, last, shown = clock(), "", 0.0
    nodes: set[str] = set()  # where the workers ran: read while they run (they go when the job ends)
    try:
        while True:
            current = kube.get(kinds.MPIJOB, name, namespace)
            nodes |= worker_nodes(kube, name, namespace)
            if (done := _finished(current)) is not None:
                break
            elapsed = clock() - started
            if elapsed > timeout_seconds:
                return StageResult(stage, "TIMEOUT", [f"not done after {_mmss(elapsed)}: {last}"])
            now = _progress(kube, current or job, namespace)
            if now != last or elapsed - shown >= PROGRESS_EVERY_SECONDS:
                say(f"[{_mmss(elapsed)}] {stage}: {now}")
                last, shown = now, elapsed
            sleep(POLL_SECONDS)
        pods = kube.list(kinds.POD, namespace, f"{state.JOB_LABEL}={name}")
        launcher = next((p for p in pods if (p["metadata"].get("labels") or {}).get(
            "training.kubeflow.org/job-role") == "launcher"), None)
        log = kube.pod_log(launcher["metadata"]["name"], namespace, "launcher") if launcher else ""
        ok, details = judge_stage(stage, pool, log)
        if stage == "one-node":
            devices_ok, device_lines = allocatable_details(kube, pool, nodes)
            ok, details = ok and devices_ok, device_lines + details
        if done != "Succeeded":
            ok = False
            details.insert(0, f"the job {done.lower()}")
        return StageResult(stage, "PASS" if ok else "FAIL", details)
    finally:
        kube.delete(kinds.MPIJOB, name, namespace)
