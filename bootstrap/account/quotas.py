"""What a stack asks of the account's service quotas (pure): vCPUs per EC2 family, VPC, EKS, FSx.

EC2 counts running instances in vCPUs per instance family group (EC2 User
Guide, "Amazon EC2 service quotas": "Running On-Demand P instances" and so
on). Quota codes are Service Quotas' (service code, quota code): the EC2 and
VPC ones below are listed in the EC2 and VPC endpoints-and-quotas pages;
EKS and FSx quotas are looked up by their names (EKS User Guide, "service
quotas": "Clusters", "Managed node groups per cluster", "Nodes per managed
node group"), so no code is guessed.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from components.core.config import StackConfig

# (service code, quota code, quota name) per instance family group and purchase option.
EC2_VCPU_QUOTAS = {
    ("P", "ON_DEMAND"): ("ec2", "L-417A185B", "Running On-Demand P instances"),
    ("G", "ON_DEMAND"): ("ec2", "L-DB2E81BA", "Running On-Demand G and VT instances"),
    ("Standard", "ON_DEMAND"): ("ec2", "L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"),
    ("P", "SPOT"): ("ec2", "L-7212CCBC", "All P Spot Instance Requests"),
    ("G", "SPOT"): ("ec2", "L-3819A6DF", "All G and VT Spot Instance Requests"),
    ("Standard", "SPOT"): ("ec2", "L-34B43A08", "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests"),
}
ELASTIC_IPS = ("ec2", "L-0263D0A3", "EC2-VPC Elastic IPs")
VPCS = ("vpc", "L-F678F1CE", "VPCs per Region")
INTERNET_GATEWAYS = ("vpc", "L-A4707A72", "Internet gateways per Region")
NAT_PER_AZ = ("vpc", "L-FE5A380F", "NAT gateways per Availability Zone")
EKS_CLUSTERS = "Clusters"
EKS_NODE_GROUPS = "Managed node groups per cluster"
EKS_NODES_PER_GROUP = "Nodes per managed node group"


def family_group(instance_type: str) -> str:
    """P, G (G and VT) or Standard, by the type's family letter (every type in the catalog is one of them)."""
    letter = instance_type[0]
    return {"p": "P", "g": "G", "v": "G"}.get(letter, "Standard")


@dataclass(frozen=True)
class VcpuNeed:
    group: str
    purchase: str  # ON_DEMAND | SPOT
    vcpus: int
    parts: tuple[str, ...]  # "h100: 16 x p5.48xlarge (3072 vCPUs)"

    @property
    def quota(self) -> tuple[str, str, str]:
        return EC2_VCPU_QUOTAS[(self.group, self.purchase)]


def vcpu_needs(cfg: StackConfig) -> tuple[list[VcpuNeed], list[str]]:
    """vCPUs the stack runs at maxNodes per quota; and the pools not counted (Capacity Blocks).

    An On-Demand Capacity Reservation's instances are On-Demand instances and
    count; a Capacity Block is capacity bought for a window, left out here.
    """
    totals: dict[tuple[str, str], list[tuple[int, str]]] = defaultdict(list)
    skipped = []
    system = cfg.system_nodes
    vcpus = system.count * _vcpus(system.instance_type)
    totals[("Standard", "ON_DEMAND")].append((vcpus, f"system nodes: {system.count} x {system.instance_type} "
                                                    f"({vcpus} vCPUs)"))
    # CPU pools count like GPU pools: Standard (C, M, R) vCPUs, On-Demand or Spot.
    for pool in (*cfg.gpu_pools, *cfg.cpu_pools):
        if pool.capacity_type == "CAPACITY_BLOCK":
            skipped.append(pool.name)
            continue
        vcpus = pool.max_nodes * pool.instance.vcpus
        totals[(family_group(pool.instance_type), pool.capacity_type)].append(
            (vcpus, f"{pool.name}: {pool.max_nodes} x {pool.instance_type} ({vcpus} vCPUs)"))
    needs = [VcpuNeed(group, purchase, sum(v for v, _ in parts), tuple(p for _, p in parts))
             for (group, purchase), parts in sorted(totals.items())]
    return needs, skipped


def _vcpus(instance_type: str) -> int:
    from components.core.hardware import catalog

    return catalog.get(instance_type).vcpus


def nat_gateways(cfg: StackConfig, zone_count: int) -> int:
    return zone_count if cfg.network.nat_gateways == "perAz" else 1
