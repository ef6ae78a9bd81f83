"""KWOK nodes shaped exactly as EKS registers a node of each of the stack's node groups.

Pure: a stack's config and its zones in, Node objects out. A pool's node
carries what the managed node group, kubelet and the AWS cloud controller
put on it, then the labels, taints and extended resources our pool writes
into its Auto Scaling group's node-template tags (the cluster-autoscaler's
view of a node at zero), so the local nodes are the autoscaler's template
made real; capacity and allocatable come from the instance catalog and the
EKS AMI's reservations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.core.config import StackConfig
from components.core.hardware import catalog
from components.core.kube import nodepool
from components.core.system_nodes import MAX_PODS, allocatable

# KWOK manages the nodes that carry this annotation (kwok --manage-nodes-with-annotation-selector).
KWOK_ANNOTATION = {"kwok.x-k8s.io/node": "fake"}

# EC2 instance topology (EC2 User Guide, "Prerequisites for Amazon EC2 topology", instance types):
# DescribeInstanceTopology returns 3 network nodes for g6e, p4d, p4de, p5, p5e, p5en and 4 for
# p6-b200 and p6-b300; EKS labels each node topology.k8s.aws/network-node-layer-1..N from it
# (EKS User Guide, "Place distributed AI/ML workloads with network topology labels").
NETWORK_LAYERS = {"g6e": 3, "p4d": 3, "p4de": 3, "p5": 3, "p5e": 3, "p5en": 3, "p6-b200": 4, "p6-b300": 4}
NETWORK_LAYER_LABEL = "topology.k8s.aws/network-node-layer-{}"
ZONE_ID_LABEL = "topology.k8s.aws/zone-id"
NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"
CAPACITY_TYPE_LABEL = "eks.amazonaws.com/capacityType"


@dataclass(frozen=True)
class NodeGroup:
    """One managed node group as the local cluster runs it."""

    name: str  # the pool's name, or "system"
    instance_type: str
    capacity_type: str
    labels: dict[str, str]
    taints: tuple[nodepool.Taint, ...]
    extended: dict[str, str]  # extended resources (GPUs, EFA, huge pages)
    min_nodes: int
    max_nodes: int


def network_layers(instance_type: str) -> int:
    return NETWORK_LAYERS.get(catalog.get(instance_type).family, 0)


def _template_labels(pool: nodepool.Pool) -> dict[str, str]:
    """The labels the pool's ASG node-template tags name: what the autoscaler assumes a new node has."""
    prefix = f"{nodepool.NODE_TEMPLATE_PREFIX}/label/"
    return {k[len(prefix):]: v for k, v in nodepool.node_template_tags(pool).items() if k.startswith(prefix)}


def _template_resources(pool: nodepool.Pool) -> dict[str, str]:
    prefix = f"{nodepool.NODE_TEMPLATE_PREFIX}/resources/"
    return {k[len(prefix):]: v for k, v in nodepool.node_template_tags(pool).items() if k.startswith(prefix)}


def _template_taints(pool: nodepool.Pool) -> tuple[nodepool.Taint, ...]:
    prefix = f"{nodepool.NODE_TEMPLATE_PREFIX}/taint/"
    taints = []
    for key, value in nodepool.node_template_tags(pool).items():
        if key.startswith(prefix):
            taint_value, effect = value.rsplit(":", 1)
            taints.append(nodepool.Taint(key[len(prefix):], taint_value, effect))
    return tuple(taints)


def node_groups(cfg: StackConfig) -> list[NodeGroup]:
    """The system node group, then every GPU and CPU pool, as their node-template tags describe them."""
    system = cfg.system_nodes
    groups = [NodeGroup("system", system.instance_type, "ON_DEMAND", dict(nodepool.SYSTEM_NODE_LABEL), (), {},
                        system.count, system.count)]
    for pool in (*cfg.gpu_pools, *cfg.cpu_pools):
        groups.append(NodeGroup(pool.name, pool.instance.name, pool.capacity_type, _template_labels(pool),
                                _template_taints(pool), _template_resources(pool), pool.min_nodes, pool.max_nodes))
    return groups


def _private_ip(group_index: int, node_index: int) -> str:
    return f"10.0.{64 + group_index}.{10 + node_index}"


def node(cfg: StackConfig, group: NodeGroup, group_index: int, index: int, zone: str, zone_id: str,
         cluster_name: str, kubelet_port: int = 10250) -> dict[str, Any]:
    """One Node object as kubelet on an EKS AL2023 node registers it, with the status KWOK keeps."""
    ip = _private_ip(group_index, index)
    region = cfg.region
    # EC2's private DNS name: ip-10-0-64-10.ec2.internal in us-east-1, .<region>.compute.internal elsewhere.
    domain = "ec2.internal" if region == "us-east-1" else f"{region}.compute.internal"
    name = f"ip-{ip.replace('.', '-')}.{domain}"
    instance = catalog.get(group.instance_type)
    labels = {
        "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "kubernetes.io/hostname": name,
        "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": group.instance_type, "beta.kubernetes.io/instance-type": group.instance_type,
        "topology.kubernetes.io/region": region, "topology.kubernetes.io/zone": zone,
        "failure-domain.beta.kubernetes.io/region": region, "failure-domain.beta.kubernetes.io/zone": zone,
        ZONE_ID_LABEL: zone_id,
        NODEGROUP_LABEL: f"{cluster_name}-{group.name}", CAPACITY_TYPE_LABEL: group.capacity_type,
        "eks.amazonaws.com/nodegroup-image": "ami-0local0000000000",
        **group.labels,
    }
    for layer in range(1, network_layers(group.instance_type) + 1):
        # Nodes of one pool sit in one cluster placement group: one spine, one block per 4 nodes.
        labels[NETWORK_LAYER_LABEL.format(layer)] = f"nn-{group.name}-{layer}-{index // 4 if layer == 3 else 0}"
    cpu_m, memory_mi = allocatable(group.instance_type)
    capacity = {"cpu": str(instance.vcpus), "memory": f"{instance.memory_gib}Gi",
                "pods": str(MAX_PODS.get(group.instance_type, 110)),
                "ephemeral-storage": "100Gi", **group.extended}
    allocatable_ = {**capacity, "cpu": f"{cpu_m}m", "memory": f"{memory_mi}Mi", "ephemeral-storage": "95Gi"}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": dict(KWOK_ANNOTATION)},
        "spec": {"providerID": f"aws:///{zone}/i-0{group_index:02d}{index:014d}",
                 "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in group.taints]},
        "status": {"capacity": capacity, "allocatable": allocatable_,
                   "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name},
                                 {"type": "InternalDNS", "address": name},
                                 # Not EKS's: where the API server reaches this node's "kubelet" (KWOK).
                                 {"type": "ExternalDNS", "address": "127.0.0.1"}],
                   "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},
                   "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux",
                                "kubeletVersion": "v1.35.8-eks", "containerRuntimeVersion": "containerd://2.1.4",
                                "osImage": "Amazon Linux 2023", "kernelVersion": "6.12.0",
                                "machineID": "", "systemUUID": "", "bootID": "", "kubeProxyVersion": ""}},
    }


def nodes(cfg: StackConfig, zone: str, zone_id: str, cluster_name: str, counts: dict[str, int] | None = None,
          kubelet_port: int = 10250) -> list[dict[str, Any]]:
    """Every node the local cluster starts with: each group's count (default: system nodes and maxNodes)."""
    out = []
    for group_index, group in enumerate(node_groups(cfg)):
        count = (counts or {}).get(group.name, group.max_nodes)
        out += [node(cfg, group, group_index, i, zone, zone_id, cluster_name, kubelet_port) for i in range(count)]
    return out
