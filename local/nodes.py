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

import hashlib
from dataclasses import dataclass
from typing import Any

from components.core.config import StackConfig
from components.core.hardware import catalog, topology
from components.core.hardware.topology import network_layers
from components.core.kube import nodepool
from components.core.system_nodes import MAX_PODS, allocatable

# KWOK manages the nodes that carry this annotation (kwok --manage-nodes-with-annotation-selector).
KWOK_ANNOTATION = {"kwok.x-k8s.io/node": "fake"}

# EKS labels nodes of the types components/core/hardware/topology.py lists (network_layers: how many layers, with
# the EC2 and EKS guides it comes from) with these, one per layer.
NETWORK_LAYER_LABEL = topology.LAYER_LABEL
# The local network's shape (ours, not EC2's: EC2 says nothing of how many instances share a
# network node): the bottom layer's node (a "block") holds 4 instances, the layer above it (a
# "spine") 2 blocks, and every layer higher still is one network node for the whole pool. So
# prod's 16 p5 nodes are 2 spines x 2 blocks x 4 nodes; dev's 2 g6e nodes one block.
NODES_PER_BLOCK = 4
BLOCKS_PER_SPINE = 2
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


def network_domain(layer: int, layers: int, index: int) -> int:
    """Which network node of `layer` (1 = top) the pool's index-th node hangs off."""
    if layer == layers:
        return index // NODES_PER_BLOCK
    if layer == layers - 1:
        return index // (NODES_PER_BLOCK * BLOCKS_PER_SPINE)
    return 0


def network_node_id(pool: str, layer: int, domain: int) -> str:
    """An id shaped as EC2's (nn- and 17 hex digits), the same for a pool, layer and domain every time."""
    return "nn-" + hashlib.sha256(f"{pool}/{layer}/{domain}".encode()).hexdigest()[:17]


def network_labels(pool: str, instance_type: str, index: int) -> dict[str, str]:
    """The topology.k8s.aws/network-node-layer-N labels EKS puts on the pool's index-th node ({} if none)."""
    layers = network_layers(instance_type)
    return {NETWORK_LAYER_LABEL.format(layer): network_node_id(pool, layer, network_domain(layer, layers, index))
            for layer in range(1, layers + 1)}


def _private_ip(group_index: int, node_index: int) -> str:
    # 10.0.<64 + group>.<10 + index>, carrying into a third octet 32 higher past .255 (maxNodes is up to 450).
    offset = 10 + node_index
    return f"10.0.{64 + group_index + 32 * (offset // 256)}.{offset % 256}"


def node_index(node: dict[str, Any]) -> tuple[int, int]:
    """(group index, node index) of a node `node` made, read back from its providerID."""
    instance = node["spec"]["providerID"].rsplit("/", 1)[1]  # i-0GGNNNNNNNNNNNNNN
    return int(instance[3:5]), int(instance[5:])


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
    labels.update(network_labels(group.name, group.instance_type, index))
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
