"""The nodes under the job: devices the type should have, GPU XIDs, the EKS node monitoring agent's verdicts.

Sources:
- the instance catalog (components/core/hardware/catalog.py) and the EFA layout (efa.py): how
  many GPUs and EFA devices a node of the type exposes (nvidia.com/gpu, vpc.amazonaws.com/efa);
  kube-scheduler's FailedScheduling "0/<n> nodes are available: <k> Insufficient
  vpc.amazonaws.com/efa" (pkg/scheduler/framework/plugins/noderesources/fit.go).
- aws/eks-node-monitoring-agent (main): monitors/nvidia/dcgm/dcgm_policies.go handleXidFinding:
  a well-known XID sets the node condition AcceleratedHardwareReady=False with reason
  "NvidiaXID<code>Error" and message "detected XID-<code> on the instance, review kernel logs for
  additional information." (pkg/manager/node_exporter.go Fatal; messages of one condition are
  joined with "; "); another XID is a Warning event with reason "AcceleratedHardwareReady" and
  message "NvidiaXID<code>Warning: detected unknown XID-<code> ..." (node_exporter.go Warning).
  pkg/conditions/conditions.go: AcceleratedHardwareReady, ContainerRuntimeReady, KernelReady,
  NetworkingReady, StorageReady (docs/node-health-issues.adoc lists each issue).
- the NVIDIA driver's kernel line (NVIDIA XID Errors, "Understanding Xid Messages"):
  "NVRM: Xid (PCI:0000:53:00): 79, pid=..., GPU has fallen off the bus."; which XIDs mean a
  reset or a new node: components/core/observability/metrics.XIDS_REPLACE_NODE (NVIDIA's
  Xid-Catalog resolution column).
- kube-controller-manager's node lifecycle controller: Ready=Unknown, reason
  "NodeStatusUnknown", "Kubelet stopped posting node status.".
"""

from __future__ import annotations

import re
from typing import Any

from bootstrap.doctor.bundle import Bundle, labels, name
from bootstrap.doctor.findings import Evidence, Finding, condition, condition_evidence, event_evidence, log_evidence
from components.core.hardware import catalog, efa
from components.core.observability.metrics import NODE_HEALTH_CONDITIONS, XIDS_REPLACE_NODE

POOL_LABEL = "gpucluster.io/pool"
TYPE_LABEL = "node.kubernetes.io/instance-type"
GPU, EFA = "nvidia.com/gpu", "vpc.amazonaws.com/efa"
XID_REASON = re.compile(r"NvidiaXID(\d+)(?:Error|Warning)")
XID_MESSAGE = re.compile(r"XID-(\d+)")
XID_KERNEL = re.compile(r"NVRM: Xid \((?:PCI:)?[0-9a-fA-F:.]+\): (\d+),")


def _requests(pod: dict[str, Any], resource: str) -> bool:
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        if any(resource in (resources.get(k) or {}) for k in ("requests", "limits")):
            return True
    return False


def _pod_pool(pod: dict[str, Any]) -> str | None:
    return ((pod.get("spec") or {}).get("nodeSelector") or {}).get(POOL_LABEL)


def relevant_nodes(bundle: Bundle) -> list[dict[str, Any]]:
    """The nodes the bundle's pods run on or select (by pool); every node when there are no pods."""
    pods = bundle.of("Pod")
    if not pods:
        return bundle.of("Node")
    names = {(p.get("spec") or {}).get("nodeName") for p in pods}
    pools = {_pod_pool(p) for p in pods} - {None}
    return [n for n in bundle.of("Node") if name(n) in names or labels(n).get(POOL_LABEL) in pools]


def _efa_wanted(bundle: Bundle, node: dict[str, Any]) -> bool:
    pool = labels(node).get(POOL_LABEL)
    facts = bundle.pools.get(pool or "")
    if facts and "efa" in facts:
        return bool(facts["efa"])
    return any(_requests(p, EFA) and ((p.get("spec") or {}).get("nodeName") == name(node) or _pod_pool(p) == pool)
               for p in bundle.of("Pod"))


def _count(value: Any) -> int:
    try:
        return int(str(value or "0"))
    except ValueError:
        return 0


def devices_missing(bundle: Bundle) -> list[Finding]:
    out = []
    insufficient = [e for e in bundle.events if e.get("reason") == "FailedScheduling"
                    and f"Insufficient {EFA}" in (e.get("message") or "")]
    for node in relevant_nodes(bundle):
        itype = catalog.CATALOG.get(labels(node).get(TYPE_LABEL, ""))
        if itype is None or not itype.is_gpu:
            continue
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        where, pool = f"Node/{name(node)}", labels(node).get(POOL_LABEL, "?")
        expected_efa = efa.efa_interface_count(itype) if _efa_wanted(bundle, node) else 0
        have_efa = _count(allocatable.get(EFA))
        if have_efa < expected_efa:
            evidence = [Evidence("status", where, f"allocatable {EFA}: {allocatable.get(EFA, 'absent')} "
                                 f"(a {itype.name} of pool {pool} has {expected_efa})")]
            out.append(Finding(
                "efa-not-allocatable", f"node {name(node)} offers {have_efa} of its {expected_efa} EFA devices",
                tuple(evidence + [event_evidence(e) for e in insufficient[:2]]),
                "the EFA device plugin found no devices, or is not running on the node: `kubectl -n kube-system "
                "get pods -o wide | grep efa` on that node; the launch template must attach every EFA interface "
                "(efa-only). A node without its devices will not recover: cordon it and delete it "
                "(`kubectl delete node NODE`); the node group launches another"))
        have_gpu = _count(allocatable.get(GPU))
        if have_gpu < itype.gpu_count:
            out.append(Finding(
                "gpu-not-allocatable", f"node {name(node)} offers {have_gpu} of its {itype.gpu_count} GPUs",
                (Evidence("status", where, f"allocatable {GPU}: {allocatable.get(GPU, 'absent')} "
                          f"(a {itype.name} has {itype.gpu_count})"),),
                "the NVIDIA device plugin is not running on the node or a GPU is lost (look for XID and "
                "AcceleratedHardwareReady findings). A node that joined a minute ago may still be starting the "
                "plugin; otherwise cordon and replace the node"))
    return out


def _xids_by_node(bundle: Bundle) -> dict[str, tuple[set[int], list[Evidence]]]:
    found: dict[str, tuple[set[int], list[Evidence]]] = {}

    def add(node: str, codes: list[int], evidence: Evidence) -> None:
        entry = found.setdefault(node, (set(), []))
        entry[0].update(codes)
        entry[1].append(evidence)

    for node in relevant_nodes(bundle):
        for cond in (node.get("status") or {}).get("conditions") or []:
            if cond.get("status") == "False" and XID_REASON.search(cond.get("reason") or ""):
                codes = [int(c) for c in XID_MESSAGE.findall(cond.get("message") or "")]
                add(name(node), codes or [int(XID_REASON.search(cond["reason"]).group(1))],
                    condition_evidence(node, cond))
    for event in bundle.events:
        obj, text = event.get("involvedObject") or {}, f"{event.get('message') or ''}"
        codes = [int(c) for c in XID_REASON.findall(text) + XID_KERNEL.findall(text)]
        if obj.get("kind") == "Node" and codes:
            add(obj.get("name", "?"), codes, event_evidence(event))
    nodes_of = {name(p): (p.get("spec") or {}).get("nodeName") or "?" for p in bundle.of("Pod")}
    for (pod, container), text in bundle.logs.items():
        for line in text.splitlines():
            if match := XID_KERNEL.search(line):
                add(nodes_of.get(pod, "?"), [int(match.group(1))], log_evidence(pod, container, line))
                break
    return found


def gpu_xid(bundle: Bundle) -> list[Finding]:
    out = []
    for node, (codes, evidence) in sorted(_xids_by_node(bundle).items()):
        replace = sorted(c for c in codes if c in XIDS_REPLACE_NODE)
        listed = ", ".join(str(c) for c in sorted(codes))
        if replace:
            fix = (f"XID {', '.join(map(str, replace))} needs a GPU reset or a new node (NVIDIA's XID catalog): "
                   f"cordon and drain {node} (`kubectl cordon {node}; kubectl delete node {node}`; the node group "
                   "replaces the instance, or EKS node auto repair does), then let the job restart on a healthy node")
        else:
            fix = ("these XIDs usually come from the application (13 graphics engine exception, 31 memory page "
                   "fault, 43 GPU stopped processing: a bad kernel or memory access): restart the job; if the same "
                   f"node reports them again, cordon and replace {node}")
        out.append(Finding("gpu-xid", f"GPU XID {listed} on node {node}"
                           + (" (replace the node)" if replace else ""), tuple(evidence[:3]), fix,
                           {"node": node, "xids": sorted(codes), "replaceNode": bool(replace)}))
    return out


def node_unhealthy(bundle: Bundle) -> list[Finding]:
    out = []
    for node in relevant_nodes(bundle):
        bad = [c for c in (node.get("status") or {}).get("conditions") or []
               if c.get("type") in NODE_HEALTH_CONDITIONS and c.get("status") == "False"
               and not XID_REASON.search(c.get("reason") or "")]
        if bad:
            out.append(Finding(
                "node-hardware-unhealthy", f"the EKS node monitoring agent marks node {name(node)} unhealthy "
                f"({', '.join(c['type'] for c in bad)})", tuple(condition_evidence(node, c) for c in bad[:3]),
                f"replace the node: `kubectl cordon {name(node)}; kubectl delete node {name(node)}` (the node group "
                "launches another), or turn on EKS node auto repair for the node group; jobs on it restart"))
        ready = condition(node, "Ready")
        if ready and ready.get("status") != "True":
            out.append(Finding("node-not-ready", f"node {name(node)} is not Ready", (condition_evidence(node, ready),),
                               "the kubelet stopped reporting (instance stopped, reclaimed or hung): pods on it "
                               "are lost; if it does not come back in minutes, delete the node so the group "
                               "replaces it"))
    return out
