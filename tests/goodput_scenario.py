"""A TrainJob of 2 x p5.48xlarge (16 GPUs) with one restart, as the API server shows it at five moments.

Prod's llama-70b rendered by the program (2 nodes here), its Kueue Workload and the pods JobSet v0.12.0 makes
(jobset-name and restart-attempt labels, one Indexed Job per replicated job: completion index = node), in the
shapes the API server sends. Seconds after 2026-12-05T10:00:00Z:

      0  created                      300  quota reserved, admitted
    301  attempt 0's pods             480/540  scheduled on node-a/node-b   600/660  containers started
    780  step 1, one step every 10 s  1071-1091  checkpoint at step 30     1291  step 50
   1296  the controller quarantines node-b (straggler) and deletes its pod; 1300 JobSet deletes the other one
   1320  attempt 1's pods             1335/1500  scheduled on node-a/node-c 1560  containers started
   1680  step 31 (resumed from step 30's checkpoint)  1870  step 50 again   1971-1991  checkpoint at step 60
   2191  step 80     2192-2212  checkpoint at step 80   2214  containers exit 0   2215  TrainJob Complete
   2815  node-a and node-c still there                 2875  both gone

So: queued 300, scaling up 540-300 = 240, pulling 660-540 = 120, initialising 780-660 = 120, checkpointing 3 x 20,
lost to the restart 1291 -> 1870 = 579, idle tail 2215 -> 2815 = 600, training the rest: 511 - 20 before the
failure and 2215 - 1870 - 40 after it = 796; 2815 s in all.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from components.core.goodput import names, steps
from components.core.kube import launcher
from tests.conftest import stack_config

NS, NAME, UID = "training", "llama", "6f1c0d2e-0000-4000-8000-000000000001"
T0 = datetime(2026, 12, 5, 10, tzinfo=UTC).timestamp()
EXPECTED = {"queued": 300, "scaling_up": 240, "pulling_image": 120, "initialising": 120, "training": 796,
            "checkpointing": 60, "lost_to_restarts": 579, "idle_tail": 600}
MOMENTS = (1295, 1325, 2220, 2815, 2875)
GPU_HOUR_USD = 55.04 / 8  # prod's p5.48xlarge price per GPU


def iso(s: float) -> str:
    return datetime.fromtimestamp(T0 + s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def unix(s: float) -> float:
    return T0 + s


def step_times() -> list[tuple[int, float]]:
    first = [(k, 780 + 10 * (k - 1)) for k in range(1, 31)] + [(k, 1101 + 10 * (k - 31)) for k in range(31, 51)]
    again = [(k, 1680 + 10 * (k - 31)) for k in range(31, 61)] + [(k, 2001 + 10 * (k - 61)) for k in range(61, 81)]
    return first + again


def log(attempt: int) -> str:
    """Node 0's torchrun output (rank 0's lines prefixed as torchrun's --tee does), with the noise of a real one."""
    lines = ["[rank0]: NCCL INFO NET/OFI Selected provider is efa", "[rank0]:step 10 loss 4.81 step_time 9.9s"]
    if attempt == 1:
        lines.append("[rank0]:resumed from /fsx/checkpoints/llama/step-30 at step 30")
    for step, s in step_times()[:50] if attempt == 0 else step_times()[50:]:
        lines.append(f"[rank0]:{steps.step_line(step, unix(s) + 0.25)}")
        for at_step, start, end in ((30, 1071, 1091), (60, 1971, 1991), (80, 2192, 2212)):
            if step == at_step and (attempt == 0) == (at_step == 30):
                lines.append(f"[rank0]:{steps.checkpoint_line(step, unix(start), unix(end))}")
    return "\n".join(lines) + "\n"


def trainjob(moment: int) -> dict:
    cfg = stack_config("prod")
    job = next(j for j in cfg.jobs if j.name == "llama-70b").model_copy(update={"name": NAME, "nodes": 2})
    manifest = launcher.job_manifest(job, cfg.pool(job.pool), launcher.JobContext(NS, "fsx", cfg.storage, cfg.prices))
    manifest["metadata"].update(uid=UID, creationTimestamp=iso(0))
    if moment >= 1325:
        manifest["metadata"]["annotations"][names.REMEDIATIONS_ANNOTATION] = json.dumps([{
            "at": iso(1296), "node": "node-b", "reason": names.REASON_STRAGGLER, "action": names.ACTION_QUARANTINED,
            "mode": names.MODE_ON, "evidence": {"gpu_utilization": 0.41, "peers": 0.97}}])
    if moment >= 2215:
        manifest["status"] = {"conditions": [{"type": "Complete", "status": "True", "reason": "JobSetCompleted",
                                              "lastTransitionTime": iso(2215)}]}
    return manifest


def workload(moment: int) -> dict:
    conditions = [{"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": iso(300)}
                  for t in ("QuotaReserved", "Admitted")]
    if moment >= 2215:
        conditions.append({"type": "Finished", "status": "True", "reason": "Succeeded", "message": "",
                           "lastTransitionTime": iso(2216)})
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": f"trainjob-{NAME}-5d7e1", "namespace": NS, "creationTimestamp": iso(0),
                         "ownerReferences": [{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                                              "name": NAME, "uid": UID, "controller": True}]},
            "spec": {"queueName": "gpu", "priority": 100, "active": True},
            "status": {"conditions": conditions}}


def pod(index: int, attempt: int, node: str, moment: int, created: int, scheduled: int, started: int,
        deleted: int | None = None, exited: int | None = None) -> dict:
    """A node pod of the TrainJob's JobSet (Trainer v2.3.0 names its replicated job `node`)."""
    conditions = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": iso(scheduled)}] \
        if moment >= scheduled else []
    state: dict = {"waiting": {"reason": "ContainerCreating"}}
    if moment >= started:
        conditions += [{"type": t, "status": "True", "lastTransitionTime": iso(started)}
                       for t in ("Initialized", "ContainersReady", "Ready")]
        state = {"running": {"startedAt": iso(started)}}
    if exited is not None and moment >= exited:
        state = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": iso(started),
                                "finishedAt": iso(exited)}}
    meta = {"name": f"{NAME}-node-0-{index}-{'abcde' if attempt == 0 else 'fghij'}", "namespace": NS,
            "uid": f"pod-{attempt}-{index}", "creationTimestamp": iso(created),
            "labels": {"jobset.sigs.k8s.io/jobset-name": NAME, "jobset.sigs.k8s.io/replicatedjob-name": "node",
                       "jobset.sigs.k8s.io/restart-attempt": str(attempt), "gpucluster.io/job": NAME,
                       "batch.kubernetes.io/job-completion-index": str(index)}}
    if deleted is not None and moment >= deleted:
        meta.update(deletionTimestamp=iso(deleted + 30), deletionGracePeriodSeconds=30)
    resources = {"limits": {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"},
                 "requests": {"nvidia.com/gpu": "8", "cpu": "180", "vpc.amazonaws.com/efa": "32"}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {**({"nodeName": node} if moment >= scheduled else {}), "containers": [{"name": "node", "image": "pytorch", "resources": resources}]},
            "status": {"phase": "Succeeded" if "terminated" in state else "Running", "conditions": conditions,
                       "containerStatuses": [{"name": "node", "restartCount": 0, "state": state}]}}


def pods(moment: int) -> list[dict]:
    if moment < 1325:
        return [pod(0, 0, "node-a", moment, 301, 480, 600), pod(1, 0, "node-b", moment, 301, 540, 660)]
    first = [pod(0, 0, "node-a", moment, 301, 480, 600, deleted=1300),
             pod(1, 0, "node-b", moment, 301, 540, 660, deleted=1296)] if moment < 1400 else []
    second = [pod(0, 1, "node-a", moment, 1320, 1335, 1560, exited=2214),
              pod(1, 1, "node-c", moment, 1320, 1500, 1560, exited=2214)] if moment < 2815 else []
    return first + second


def node(name: str, created: int) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "creationTimestamp": iso(created), "labels": {"gpucluster.io/pool": "h100"}}}


def nodes(moment: int) -> list[dict]:
    present = [node("system-1", -86400)]
    if moment < 2875:
        present.append(node("node-a", 420))
    if moment < 2000:
        present.append(node("node-b", 430))
    if 1450 <= moment < 2875:
        present.append(node("node-c", 1440))
    return present


def logs(moment: int) -> dict[str, str]:
    """Node 0's log of each live pod that has started, up to the moment."""
    out = {}
    for p in pods(moment):
        meta, status = p["metadata"], p["status"]["containerStatuses"][0]["state"]
        if meta["labels"]["batch.kubernetes.io/job-completion-index"] == "0" and "waiting" not in status:
            lines = log(int(meta["labels"]["jobset.sigs.k8s.io/restart-attempt"])).splitlines()
            out[meta["name"]] = "\n".join(line for line in lines if all(
                max(e.get("at", 0), e.get("end", 0)) <= unix(moment) for e in steps.parse([line]))) + "\n"
    return out


def observed(moment: int):
    """observe()'s arguments at a moment."""
    return unix(moment), trainjob(moment), workload(moment), pods(moment), nodes(moment), logs(moment)
