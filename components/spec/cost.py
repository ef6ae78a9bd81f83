"""Estimated on-demand cost per hour at minimum and maximum scale (pure).

Instance prices come from the catalog (overridable per stack with
`gpucluster:prices`); the fixed parts are list prices for us-east-1,
cited next to each constant. Data transfer, EBS and S3 storage are not
included: the estimate is what keeps billing while the cluster exists.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.spec.config import StackConfig, support_type

# https://aws.amazon.com/eks/pricing/ (2026-12): per cluster-hour.
EKS_STANDARD_PER_HOUR = 0.10
EKS_EXTENDED_PER_HOUR = 0.60
# https://aws.amazon.com/vpc/pricing/ (2026-12), us-east-1, per NAT gateway-hour.
NAT_GATEWAY_PER_HOUR = 0.045
# https://aws.amazon.com/fsx/lustre/pricing/ (2026-12), us-east-1, USD per GB-month
# of SSD storage, throughput included; 730 hours a month.
FSX_GB_MONTH = {("SCRATCH_2", None): 0.140, ("PERSISTENT_2", 125): 0.145, ("PERSISTENT_2", 250): 0.210,
                ("PERSISTENT_2", 500): 0.340, ("PERSISTENT_2", 1000): 0.600}
HOURS_PER_MONTH = 730


@dataclass(frozen=True)
class CostLine:
    item: str
    min_per_hour: float
    max_per_hour: float


@dataclass(frozen=True)
class CostEstimate:
    lines: tuple[CostLine, ...]

    @property
    def min_per_hour(self) -> float:
        return round(sum(line.min_per_hour for line in self.lines), 4)

    @property
    def max_per_hour(self) -> float:
        return round(sum(line.max_per_hour for line in self.lines), 4)


def fsx_per_hour(cfg: StackConfig) -> float:
    fsx = cfg.storage.fsx
    per_gb_month = FSX_GB_MONTH[(fsx.deployment_type, fsx.throughput_per_tib)]
    # FSx bills the provisioned capacity as quoted: a 1,200 GiB file system is 1,200 GB-month.
    return fsx.storage_capacity_gib * per_gb_month / HOURS_PER_MONTH


def estimate(cfg: StackConfig) -> CostEstimate:
    control_plane = (EKS_STANDARD_PER_HOUR if support_type(cfg.kubernetes_version) == "STANDARD"
                     else EKS_EXTENDED_PER_HOUR)
    nats = cfg.network.az_count if cfg.network.nat_gateways == "perAz" else 1
    system = cfg.system_nodes.count * cfg.price(cfg.system_nodes.instance_type)
    lines = [
        CostLine(f"EKS control plane ({support_type(cfg.kubernetes_version).lower()} support)",
                 control_plane, control_plane),
        CostLine(f"NAT gateways x{nats}", nats * NAT_GATEWAY_PER_HOUR, nats * NAT_GATEWAY_PER_HOUR),
        CostLine(f"system nodes {cfg.system_nodes.count} x {cfg.system_nodes.instance_type}", system, system),
    ]
    for pool in cfg.gpu_pools:
        price = cfg.price(pool.instance_type)
        lines.append(CostLine(f"GPU pool {pool.name} {pool.min_nodes}-{pool.max_nodes} x {pool.instance_type}",
                              pool.min_nodes * price, pool.max_nodes * price))
    fsx = fsx_per_hour(cfg)
    lines.append(CostLine(f"FSx {cfg.storage.fsx.deployment_type} {cfg.storage.fsx.storage_capacity_gib} GiB", fsx, fsx))
    return CostEstimate(tuple(CostLine(line.item, round(line.min_per_hour, 4), round(line.max_per_hour, 4))
                              for line in lines))
