"""Nodes that do not come: cluster-autoscaler's answer for each pending pod, EC2 capacity, Spot reclaims.

Message formats:
- kubernetes/autoscaler cluster-autoscaler-1.35.2,
  processors/status/eventing_scale_up_processor.go: Normal events on the pod,
  "TriggeredScaleUp" "pod triggered scale-up: [{<group> <cur>-><new> (max: <max>)}]"
  (ScaleUpInfo.String in processors/nodegroupset/nodegroup_set_processor.go) and
  "NotTriggerScaleUp" "pod didn't trigger scale-up: <n> <reason>, ..." where the reasons
  include "max node group size reached" and "in backoff after failed scale-up"
  (core/scaleup/orchestrator/skippedreasons.go) and the scheduler's predicate messages
  ("Insufficient vpc.amazonaws.com/efa", "node(s) didn't match Pod's node affinity/selector").
  core/scaleup/orchestrator/executor.go: Warning "FailedToScaleUpGroup" "Scale-up failed for
  group <id>: <err>" on the kube-system/cluster-autoscaler-status ConfigMap (the LogRecorder).
- EC2 Auto Scaling DescribeScalingActivities (API Reference, Activity: StatusCode "Failed",
  StatusMessage, Description, Cause); the EC2 API error codes page: InsufficientInstanceCapacity
  "We currently do not have sufficient <type> capacity in the Availability Zone you requested
  (<az>)...", VcpuLimitExceeded "You have requested more vCPU capacity than your current vCPU
  limit of <n> allows...", and for Spot "There is no Spot capacity available that matches your
  request." Capacity Rebalancing activities name "an EC2 instance rebalance recommendation"
  (EC2 Auto Scaling User Guide, "Use Capacity Rebalancing to handle Amazon EC2 Spot interruptions").
- kubelet pkg/kubelet/nodeshutdown (graceful node shutdown, as EC2 stops a reclaimed Spot
  instance): pod status reason "Terminated", message "Pod was terminated in response to
  imminent node shutdown."; EKS managed node groups label nodes eks.amazonaws.com/capacityType.
"""

from __future__ import annotations

import re
from typing import Any

from bootstrap.doctor.bundle import Bundle, labels, name
from bootstrap.doctor.findings import Evidence, Finding, event_evidence

POOL_LABEL = "gpucluster.io/pool"
CAPACITY_TYPE_LABEL = "eks.amazonaws.com/capacityType"
CAPACITY = re.compile(r"InsufficientInstanceCapacity|do not have sufficient .* capacity|no Spot capacity available",
                      re.I)
VCPU_LIMIT = re.compile(r"VcpuLimitExceeded|vCPU limit|MaxSpotInstanceCountExceeded")
SPOT_ACTIVITY = re.compile(r"spot instance interruption|interruption notice|rebalance recommendation", re.I)
SHUTDOWN = "in response to imminent node shutdown"


def unscheduled(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Pending" and not (pod.get("spec") or {}).get("nodeName")


def pod_events(bundle: Bundle, pod: dict[str, Any], *reasons: str) -> list[dict[str, Any]]:
    return [e for e in bundle.events if (e.get("involvedObject") or {}).get("kind") == "Pod"
            and e["involvedObject"].get("name") == name(pod) and (not reasons or e.get("reason") in reasons)]


def _autoscaler_answers(bundle: Bundle) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(pending pod, cluster-autoscaler's latest event about it)."""
    out = []
    for pod in bundle.pods:
        if unscheduled(pod):
            events = pod_events(bundle, pod, "TriggeredScaleUp", "NotTriggerScaleUp")
            if events:
                out.append((pod, events[-1]))
    return out


def scale_up(bundle: Bundle) -> list[Finding]:
    groups: dict[str, list[dict[str, Any]]] = {"waiting-for-nodes": [], "node-group-at-max-size": [],
                                               "no-node-group-fits": []}
    for _, event in _autoscaler_answers(bundle):
        message = event.get("message") or ""
        if event.get("reason") == "TriggeredScaleUp":
            groups["waiting-for-nodes"].append(event)
        elif "max node group size reached" in message:
            groups["node-group-at-max-size"].append(event)
        elif "in backoff after failed scale-up" not in message:  # backoff: insufficient_capacity's evidence
            groups["no-node-group-fits"].append(event)
    texts = {
        "waiting-for-nodes": ("{n} pod(s) wait for the nodes cluster-autoscaler is adding",
                              "nothing to fix yet: GPU nodes take minutes to join (EFA types up to 25 min; Kueue "
                              "evicts after 40). If it lasts, EC2 may lack capacity: run doctor with --stack and AWS "
                              "credentials to read the group's scaling activities"),
        "node-group-at-max-size": ("{n} pod(s) wait, but their node group is at its maximum size",
                                   "the pool's group already has gpuPools[].maxNodes nodes: held by other pods, or "
                                   "idle ones not yet removed (idleMinutes). Raise maxNodes, or find what holds the "
                                   "nodes: `kubectl get pods -A -o wide --field-selector spec.nodeName=NODE`"),
        "no-node-group-fits": ("{n} pod(s) wait and no node group could run them",
                               "no group's node template offers what the pod asks (the reasons above: resources, "
                               "node selector, taints). Compare the pod's requests and nodeSelector with the pool: "
                               "a pod asking more GPUs or EFA devices than the type has never fits"),
    }
    out = []
    for cause, events in groups.items():
        if events:
            title, fix = texts[cause]
            out.append(Finding(cause, title.format(n=len(events)), tuple(event_evidence(e) for e in events[:3]),
                               fix, {"pods": len(events)}))
    return out


def _activity_evidence(activity: dict[str, Any], field: str = "StatusMessage") -> Evidence:
    """One scaling activity: `field` verbatim (StatusMessage of a failure, Cause of a replacement)."""
    text = activity.get(field) or activity.get("Description") or ""
    where = f"AutoScalingGroup/{activity.get('AutoScalingGroupName', '?')}"
    if field != "Description" and activity.get("Description"):
        where += f" ({activity['Description'].split('.  ')[0].rstrip('.')})"
    return Evidence("activity", where, text, str(activity.get("StartTime") or "") or None)


def _failed(activity: dict[str, Any], pattern: re.Pattern[str]) -> bool:
    text = " ".join(str(activity.get(k) or "") for k in ("StatusMessage", "Description", "Cause"))
    return activity.get("StatusCode") == "Failed" and bool(pattern.search(text))


def insufficient_capacity(bundle: Bundle) -> list[Finding]:
    activities = bundle.scaling_activities or []
    evidence = [_activity_evidence(a) for a in activities if _failed(a, CAPACITY)]
    evidence += [event_evidence(e) for e in bundle.events
                 if e.get("reason") == "FailedToScaleUpGroup" and CAPACITY.search(e.get("message") or "")]
    quota = [_activity_evidence(a) for a in activities if _failed(a, VCPU_LIMIT)]
    backoff = [event_evidence(e) for _, e in _autoscaler_answers(bundle)
               if "in backoff after failed scale-up" in (e.get("message") or "")]
    out = []
    if evidence or (backoff and not quota):
        out.append(Finding(
            "insufficient-capacity",
            "EC2 has no capacity for the pool's instance type" if evidence else
            "a scale-up failed and the node group is in backoff (likely no EC2 capacity)",
            tuple((evidence + backoff)[:3]),
            "EC2 could not launch the type in the pool's zone. Use a capacity reservation or Capacity Block "
            "(gpuPools[].capacityReservationId, capacityType CAPACITY_BLOCK), another zone "
            "(gpucluster:gpuAvailabilityZone), or wait: cluster-autoscaler retries after its backoff"
            + ("" if evidence else "; doctor with --stack and AWS credentials reads the scaling activities")))
    if quota:
        out.append(Finding("ec2-vcpu-quota", "the account's EC2 vCPU quota stops the node group from growing",
                           tuple((quota + ([] if evidence else backoff))[:3]),
                           "raise the EC2 quota of the family (On-Demand P or G instances, or Spot): "
                           "`python -m bootstrap preflight --stack S` prints the exact request command"))
    return out


def _spot_nodes(bundle: Bundle) -> tuple[set[str], set[str]]:
    """(names of Spot nodes, pools that are Spot) from node labels and the stack's pools."""
    nodes = {name(n) for n in bundle.of("Node") if labels(n).get(CAPACITY_TYPE_LABEL) == "SPOT"}
    pools = {labels(n).get(POOL_LABEL) for n in bundle.of("Node") if name(n) in nodes} - {None}
    pools |= {p for p, facts in bundle.pools.items() if facts.get("capacityType") == "SPOT"}
    return nodes, pools


def spot_interruption(bundle: Bundle) -> list[Finding]:
    spot_nodes, spot_pools = _spot_nodes(bundle)
    evidence = [_activity_evidence(a, "Cause" if SPOT_ACTIVITY.search(str(a.get("Cause") or "")) else "Description")
                for a in bundle.scaling_activities or []
                if SPOT_ACTIVITY.search(" ".join(str(a.get(k) or "") for k in ("Description", "Cause")))]
    evidence += [event_evidence(e) for e in bundle.events if (e.get("involvedObject") or {}).get("kind") == "Node"
                 and re.search(r"spot|rebalance", f"{e.get('reason')} {e.get('message')}", re.I)]
    for pod in bundle.pods:
        status, spec = pod.get("status") or {}, pod.get("spec") or {}
        pool = (spec.get("nodeSelector") or {}).get(POOL_LABEL)
        on_spot = spec.get("nodeName") in spot_nodes or pool in spot_pools
        if on_spot and SHUTDOWN in (status.get("message") or ""):
            text = f"status {status.get('phase')} reason {status.get('reason')}: {status.get('message')}"
            evidence.append(Evidence("status", f"Pod/{name(pod)} on node {spec.get('nodeName')}", text,
                                     _finished_at(pod)))
    if not evidence:
        return []
    return [Finding("spot-interruption", "a Spot node was reclaimed under the job", tuple(evidence[:4]),
                    "EC2 took the Spot instance back (2 minutes' notice). The job restarts from its last checkpoint "
                    "when Kueue readmits it: checkpoint often and finish a checkpoint on SIGTERM within "
                    "jobs[].terminationGracePeriodSeconds (120 matches Spot's notice); for long multi-node runs "
                    "use capacityType ON_DEMAND or CAPACITY_BLOCK")]


def _finished_at(pod: dict[str, Any]) -> str | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated") or {}
        if terminated.get("finishedAt"):
            return terminated["finishedAt"]
    return (pod.get("metadata") or {}).get("deletionTimestamp") or None
