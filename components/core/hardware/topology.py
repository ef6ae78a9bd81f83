"""Where EKS says a node sits in the EC2 network: the instance types it labels, and how many layers (pure).

EKS labels a node of these types topology.k8s.aws/network-node-layer-1 .. -N from EC2's instance topology (EKS
User Guide, "Place distributed AI/ML workloads with network topology labels"): layer 1 is the top of the hierarchy,
the broadest grouping; the last layer is the bottom, whose nodes are physically closest to each other; a fourth
layer exists only on types whose topology has four. Which types, and how many layers: EC2 User Guide,
"Prerequisites for Amazon EC2 topology" (DescribeInstanceTopology returns 3 network nodes for g6e, p4d, p4de, p5,
p5e and p5en; 4 for p6-b200 and p6-b300). A type not listed has no such labels, so a Kueue topology over them
would match none of its nodes.
"""

from __future__ import annotations

from components.core.hardware import catalog

NETWORK_LAYERS = {"g6e": 3, "p4d": 3, "p4de": 3, "p5": 3, "p5e": 3, "p5en": 3, "p6-b200": 4, "p6-b300": 4}
# The same page's "AWS Regions": EC2 describes (and EKS labels) instance topology only there; elsewhere (Milan,
# Cape Town's neighbours, the China Regions, GovCloud US-East...) a node gets no layer label and a Kueue topology
# would match none of them. eusc-de-east-1: the AWS European Sovereign Cloud (Germany).
TOPOLOGY_REGIONS = frozenset({
    "us-east-1", "us-east-2", "us-west-1", "us-west-2", "af-south-1", "ap-southeast-3", "ap-east-1", "ap-south-2",
    "ap-southeast-4", "ap-south-1", "ap-northeast-3", "ap-northeast-2", "ap-southeast-1", "ap-southeast-2",
    "ap-northeast-1", "ca-central-1", "eu-central-1", "eu-west-1", "eu-west-2", "eu-west-3", "eu-south-2",
    "eu-north-1", "eu-central-2", "il-central-1", "me-south-1", "me-central-1", "sa-east-1", "us-gov-west-1",
    "eusc-de-east-1"})
LAYER_LABEL = "topology.k8s.aws/network-node-layer-{}"
HOSTNAME_LABEL = "kubernetes.io/hostname"
MAX_LAYERS = max(NETWORK_LAYERS.values())


def network_layers(instance_type: str) -> int:
    """How many network-node layers EKS labels a node of this type with; 0: none."""
    return NETWORK_LAYERS.get(catalog.get(instance_type).family, 0)


def region_problem(region: str, instance_type: str, topology_mode: str) -> str | None:
    """Why a pool's `topology: auto` cannot work in `region` (EC2 gives no topology there); None when it can.
    Refused, not switched off: a flavor's topologyName cannot be removed once set, so the choice is the file's."""
    if topology_mode != "auto" or network_layers(instance_type) == 0 or region in TOPOLOGY_REGIONS:
        return None
    return (f"got 'auto' for {instance_type} in {region}, where EC2 describes no instance topology (EC2 User Guide, "
            "'Prerequisites for Amazon EC2 topology', AWS Regions), so EKS labels no node with a network layer and "
            "a Kueue topology would match none; set `topology: off`")


def layer_label(layer: int) -> str:
    return LAYER_LABEL.format(layer)


def placement_problem(policy: str | None, layer: int | None, instance_type: str,
                      topology_mode: str) -> tuple[str, str] | None:
    """Why a pool of `instance_type` (its `topology` `topology_mode`) cannot place a job as asked, as (the
    placement key at fault, the message); None when it can. `policy` None with no `layer` asks for nothing."""
    asks = policy in ("preferred", "required") or layer is not None
    layers = network_layers(instance_type) if topology_mode == "auto" else 0
    if asks and layers == 0:
        why = ("its `topology` is off" if topology_mode == "off" else
               f"EKS labels no network layers on {instance_type} (types: {', '.join(NETWORK_LAYERS)})")
        return "", f"asks for {policy or 'preferred'} placement, but the pool has no network topology: {why}; use policy none"
    if layer is not None and layer > layers:
        return ".layer", f"got {layer}; {instance_type} nodes have {layers} network layers (1 to {layers})"
    return None


def topology_without_atomic_problem(instance_type: str, topology_mode: str, atomic_scale_up: bool,
                                    fixed_size: bool) -> str | None:
    """A pool with a Kueue topology that scales must admit atomically: Kueue's topology-aware scheduling counts
    only nodes that exist, and waits for nodes still to come only behind a ProvisioningRequest check (a delayed
    topology request, Kueue v0.19.2 pkg/scheduler/flavorassigner/tas_flavorassigner.go), so without it no job of
    a pool at zero would ever be admitted. `fixed_size`: minNodes = maxNodes, whose nodes always exist.
    Refused rather than switched off for the user: a ResourceFlavor's topologyName cannot be removed once set
    (the Kueue CRD's rule), so whether a pool has a topology is the stack file's explicit choice."""
    if atomic_scale_up or fixed_size or topology_mode != "auto" or network_layers(instance_type) == 0:
        return None
    return ("is false on a pool that scales (minNodes < maxNodes) with a network topology: Kueue places jobs by "
            "topology only onto nodes that exist and waits for new ones only behind atomic admission, so no job "
            "would start from zero; set `topology: off` as well, or keep atomicScaleUp")
