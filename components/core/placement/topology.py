"""Kueue topology-aware scheduling over the EC2 network layers EKS labels (pure).

One Topology per layer count, its levels the EKS network-node layers from the broadest to the closest and then
the node itself (kueue.x-k8s.io/v1beta2 Topology: spec.levels[].nodeLabel, broadest first; tests/upstream/crds/
kueue.x-k8s.io_topologies.yaml at v0.19.2). A pool's flavor names it (ResourceFlavor spec.topologyName), and a
job's worker pod set asks for a domain through Kueue's pod-set annotations (apis/kueue/v1beta2/topology_types.go:
kueue.x-k8s.io/podset-required-topology and podset-preferred-topology, valued with a level's node label).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from components.core.hardware import topology as hw

API_VERSION = "kueue.x-k8s.io/v1beta2"
REQUIRED_ANNOTATION = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_ANNOTATION = "kueue.x-k8s.io/podset-preferred-topology"


@dataclass(frozen=True)
class Placement:
    """A job's resolved placement: `policy` preferred or required, within one domain of network layer `layer`."""

    policy: str
    layer: int

    @property
    def label(self) -> str:
        return hw.layer_label(self.layer)

    @property
    def annotation(self) -> dict[str, str]:
        key = REQUIRED_ANNOTATION if self.policy == "required" else PREFERRED_ANNOTATION
        return {key: self.label}


def pool_layers(pool: Any) -> int:
    """Network layers the pool's topology has: 0 when it is off or EKS labels none on its type (CPU pools too).
    A pool that scales with a topology admits atomically (a stack rule: hardware.topology)."""
    if getattr(pool, "is_cpu", False) or pool.topology != "auto":
        return 0
    return hw.network_layers(pool.instance_type)


def topology_name(layers: int) -> str:
    return f"gpucluster-network-{layers}"


def pool_topology(pool: Any) -> str | None:
    """The Topology the pool's ResourceFlavor names, or None."""
    layers = pool_layers(pool)
    return topology_name(layers) if layers else None


def topology(layers: int) -> dict[str, Any]:
    levels = [hw.layer_label(layer) for layer in range(1, layers + 1)] + [hw.HOSTNAME_LABEL]
    return {"apiVersion": API_VERSION, "kind": "Topology", "metadata": {"name": topology_name(layers)},
            "spec": {"levels": [{"nodeLabel": label} for label in levels]}}


def topologies(pools: Sequence[Any]) -> list[dict[str, Any]]:
    """One Topology per distinct layer count among the pools (none when no pool has one)."""
    return [topology(layers) for layers in sorted({pool_layers(p) for p in pools} - {0})]


def job_placement(job: Any, pool: Any) -> Placement | None:
    """The job's placement with its defaults: preferred at the pool's closest layer for 2 or more nodes on a pool
    with a topology; None (no annotation) for policy none, a single node, or a pool without one."""
    layers = pool_layers(pool)
    asked = getattr(job, "placement", None)
    policy = asked.policy if asked is not None else None
    if layers == 0 or policy == "none":
        return None
    if policy is None:
        if job.nodes < 2:
            return None
        policy = "preferred"
    layer = asked.layer if asked is not None and asked.layer is not None else layers
    return Placement(policy, layer)


def fabric_test_placement(pool: Any) -> Placement | None:
    """The fabric test: preferred within the closest domain. Never required: two fresh nodes the autoscaler put
    in two domains would leave a required test waiting for ever, and a test across domains still measures."""
    layers = pool_layers(pool)
    return Placement("preferred", layers) if layers else None
