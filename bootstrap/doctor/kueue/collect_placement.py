"""What `doctor --collect` reads for a job that waits on atomic scale-up or on its network placement, and only then:
a cluster whose jobs wait on neither is read as before (no request, no note).

- A Workload with the check gpucluster-atomic-scale-up: the ProvisioningRequests Kueue made for it, in its
  namespace (autoscaling.x-k8s.io/v1 provisioningrequests, cluster-autoscaler-1.35.2 apis/config/crd/
  autoscaling.x-k8s.io_provisioningrequests.yaml), those owned by the job's Workloads (Kueue v0.19.2
  pkg/controller/admissionchecks/provisioning/controller.go L350 sets the Workload as their controller).
- A Workload Kueue cannot place on the topology (rules_placement.tas_wait): the Topologies (kueue.x-k8s.io/v1beta2
  topologies, cluster-scoped: apis/kueue/v1beta2/topology_types.go L141) and what runs on the pool's nodes, as
  bundle.json gpusInUse {read, nodes: {node: GPUs its running and pending pods request}}: a count, not the other
  jobs' pods, which stay out of the bundle.
A kind the cluster does not serve is noted, as collect.py notes any missing CRD.
"""

from __future__ import annotations

from typing import Any

from bootstrap.cluster import kinds
from bootstrap.cluster.kinds import PROVISIONING_REQUEST, Kind
from bootstrap.doctor.bundle import Bundle, name
from bootstrap.doctor.kueue import rules_placement, rules_provisioning
from bootstrap.doctor.kueue.cohort import GPU, quantity

TOPOLOGY = Kind("Topology", "kueue.x-k8s.io", "v1beta2", "topologies", namespaced=False)
ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"  # pods that hold their node's resources


def _pod_gpus(pod: dict[str, Any]) -> float:
    """GPUs the pod requests (limits stand for missing requests), at least its largest init container's."""
    def gpus(container: Any) -> float:
        resources = container.get("resources") or {} if isinstance(container, dict) else {}
        return quantity((resources.get("requests") or {}).get(GPU, (resources.get("limits") or {}).get(GPU))) or 0.0
    spec = pod.get("spec") or {}
    return max(sum(gpus(c) for c in spec.get("containers") or []),
               max((gpus(c) for c in spec.get("initContainers") or []), default=0.0))


def gpus_in_use(pods: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> dict[str, float]:
    """GPUs the pods request on each of the nodes (0 for a node none of them asks GPUs of)."""
    use = {name(n): 0.0 for n in nodes}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node in use:
            use[node] += _pod_gpus(pod)
    return use


def read(reader: Any, namespace: str, workloads: list[dict[str, Any]], events: list[dict[str, Any]],
         nodes: list[dict[str, Any]]) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """(objects by kind, bundle.json keys) to add to the bundle; `reader` is collect.py's (notes what it cannot
    read). Nothing when no Workload waits on a ProvisioningRequest or on the topology."""
    objects: dict[str, list[dict[str, Any]]] = {}
    extra: dict[str, Any] = {}
    if any(rules_provisioning.check_state(wl) for wl in workloads):
        uids = {(wl.get("metadata") or {}).get("uid") for wl in workloads} - {None}
        requests = reader.list(PROVISIONING_REQUEST, namespace, optional=True)
        if requests is not None:
            objects["ProvisioningRequest"] = [
                pr for pr in requests if any(ref.get("uid") in uids for ref in
                                             (pr.get("metadata") or {}).get("ownerReferences") or [])]
    seen = Bundle(namespace=namespace, objects={"Workload": workloads, "Event": events})
    if any(rules_placement.tas_wait(seen, wl) for wl in workloads):
        topologies = reader.list(TOPOLOGY, optional=True)
        if topologies is not None:
            objects["Topology"] = topologies
        notes = len(reader.notes)
        pods = reader.list(kinds.POD, field_selector=ACTIVE_PODS, optional=True) or []
        if len(reader.notes) == notes:  # read (an error would have been noted)
            extra["gpusInUse"] = {"read": f"GPU requests of the {len(pods)} running or pending pods of the cluster",
                                  "nodes": gpus_in_use(pods, nodes)}
    return objects, extra
