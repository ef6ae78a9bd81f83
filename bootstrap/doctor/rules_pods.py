"""Pods and containers: images that do not pull, containers the kernel killed, and a failure nothing else explains.

Message formats (kubernetes/kubernetes, the kubelet):
- pkg/kubelet/images/image_manager.go: container waiting reasons "ErrImagePull" and
  "ImagePullBackOff" (also "InvalidImageName", "ErrImageNeverPull"); Warning event "Failed"
  'Failed to pull image "<image>": <runtime error>' and Normal "BackOff" 'Back-off pulling
  image "<image>"' on the pod.
- pkg/kubelet/kuberuntime (from the runtime's exit status): a container the kernel's OOM killer
  ended has state (or lastState) terminated with reason "OOMKilled", exit code 137.
- the operators' Failed conditions: MPIJob (mpi-operator v0.8.2, the launcher Job's reason, e.g.
  "BackoffLimitExceeded/..."), TrainJob (trainer v2.3.0), JobSet (jobset v0.12.0
  pkg/constants: "ReachedMaxRestarts" "jobset failed due to reaching max number of restarts",
  "FailedJobs" "jobset failed due to one or more job failures").
"""

from __future__ import annotations

import re
from typing import Any

from bootstrap.doctor.bundle import JOB_KINDS, Bundle, name
from bootstrap.doctor.findings import Evidence, Finding, condition, condition_evidence, event_evidence, log_evidence
from bootstrap.doctor.rules_scaling import pod_events

PULL_REASONS = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
ERROR_LINE = re.compile(r"Error|Exception|Traceback|FAILED|Fatal|fatal|Aborted|Killed|error:")
# A Python exception line ("FileNotFoundError: ..."), not torchrun's summary that follows the rank's own.
EXCEPTION = re.compile(r"\b(?!ChildFailedError)\w+(?:Error|Exception): ")


def container_statuses(pod: dict[str, Any]) -> list[dict[str, Any]]:
    status = pod.get("status") or {}
    return list(status.get("initContainerStatuses") or []) + list(status.get("containerStatuses") or [])


def image_pull(bundle: Bundle) -> list[Finding]:
    evidence: list[Evidence] = []
    messages, pods = [], 0
    for pod in bundle.pods:
        for status in container_statuses(pod):
            waiting = (status.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") not in PULL_REASONS:
                continue
            pods += 1
            failed = [e for e in pod_events(bundle, pod, "Failed")
                      if (e.get("message") or "").startswith("Failed to pull image")]
            messages += [e.get("message") or "" for e in failed[-1:]]
            if pods == 1:  # the first pod's state and the kubelet's error; the others are alike
                evidence.append(Evidence("status", f"Pod/{name(pod)} container {status.get('name')}",
                                         f"waiting: {waiting['reason']}: {waiting.get('message', '')}".rstrip(": ")))
                evidence += [event_evidence(e) for e in failed[-1:]]
            break
    if not evidence:
        return []
    text = " ".join(messages).lower()
    if "not found" in text or "manifest unknown" in text:
        hint = "the image or tag does not exist: check jobs[].image (repository and tag)"
    elif any(word in text for word in ("unauthorized", "denied", "403", "forbidden")):
        hint = ("the node may not pull it: ECR needs AmazonEC2ContainerRegistryPullOnly on the node role (and a "
                "repository policy for another account); a private registry needs an imagePullSecret")
    elif "toomanyrequests" in text or "rate limit" in text:
        hint = "the registry rate-limits the nodes (Docker Hub): mirror the image to ECR"
    else:
        hint = "check jobs[].image exists and the nodes may pull it (ECR permissions, private registries)"
    return [Finding("image-pull", f"a container image does not pull ({pods} pod{'s' if pods != 1 else ''})",
                    tuple(evidence), hint + "; then `pulumi up` with the fixed image (the job is replaced)",
                    {"pods": pods})]


def _memory_limit(pod: dict[str, Any], container: str) -> str | None:
    for spec in (pod.get("spec") or {}).get("containers") or []:
        if spec.get("name") == container:
            return ((spec.get("resources") or {}).get("limits") or {}).get("memory")
    return None


def oom_killed(bundle: Bundle) -> list[Finding]:
    evidence = []
    for pod in bundle.pods:
        for status in container_statuses(pod):
            for key in ("state", "lastState"):
                terminated = (status.get(key) or {}).get("terminated") or {}
                if terminated.get("reason") == "OOMKilled":
                    limit = _memory_limit(pod, status.get("name", ""))
                    text = (f"{'terminated' if key == 'state' else 'last terminated'}: reason OOMKilled, exit code "
                            f"{terminated.get('exitCode')}" + (f" (memory limit {limit})" if limit else ""))
                    evidence.append(Evidence("status", f"Pod/{name(pod)} container {status.get('name')}", text,
                                             terminated.get("finishedAt")))
                    break
    if not evidence:
        return []
    return [Finding("oom-killed", "a container ran out of host memory (OOMKilled)", tuple(evidence[:3]),
                    "the container went over its memory limit (host RAM, not GPU memory; workers get 80 % of the "
                    "node's): fewer data-loader workers or smaller prefetch, less pinned or CPU-offloaded state; "
                    "/dev/shm use counts against the limit too", {"containers": len(evidence)})]


def _last_error_line(bundle: Bundle, pod: str) -> Evidence | None:
    for logs, previous in ((bundle.logs, False), (bundle.previous_logs, True)):
        for (log_pod, container), text in logs.items():
            if log_pod == pod:
                lines = text.splitlines()
                first = next((ln for ln in lines if EXCEPTION.search(ln)), None)
                last = next((ln for ln in reversed(lines) if ERROR_LINE.search(ln)), None)
                if first or last:
                    return log_evidence(pod, container, first or last, previous)
    return None


def job_failed(bundle: Bundle) -> list[Finding]:
    """The fallback when no known cause matched: what failed, and the last error line of each failed container."""
    evidence: list[Evidence] = []
    for kind in JOB_KINDS:
        for job in bundle.of(kind):
            failed = condition(job, "Failed")
            if failed and failed.get("status") == "True":
                evidence.append(condition_evidence(job, failed))
    for pod in bundle.pods:
        for status in container_statuses(pod):
            terminated = ((status.get("state") or {}).get("terminated")
                          or (status.get("lastState") or {}).get("terminated") or {})
            if terminated and terminated.get("exitCode") not in (0, None):
                evidence.append(Evidence("status", f"Pod/{name(pod)} container {status.get('name')}",
                                         f"terminated: reason {terminated.get('reason')}, exit code "
                                         f"{terminated.get('exitCode')}", terminated.get("finishedAt")))
                if line := _last_error_line(bundle, name(pod)):
                    evidence.append(line)
                break
    if not evidence:
        return []
    return [Finding("job-failed", "the job failed, and no cause doctor knows matched", tuple(evidence[:6]),
                    "read the last error lines above (the rank that failed first is the cause; others often "
                    "fail after it); `kubectl logs -n NS POD --previous` has the whole log of a restarted "
                    "container")]
