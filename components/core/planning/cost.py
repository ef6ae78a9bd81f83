"""Estimated on-demand cost per hour at minimum and maximum scale (pure).

Instance prices come from the catalog (overridable per stack with
`gpucluster:prices`); the fixed parts are list prices for us-east-1,
cited next to each constant. The estimate is what bills by the hour while
the cluster exists; NOT_INCLUDED says what it leaves out.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.core.config import CpuPoolConfig, GpuPoolConfig, StackConfig, support_type
from components.core.hardware import catalog
from components.core.planning.metrics_footprint import footprint

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
# https://aws.amazon.com/vpc/pricing/ (2026-12): every public IPv4 address, $0.005 per hour (the NAT
# gateways' Elastic IPs; nodes are in private subnets and have none).
PUBLIC_IPV4_PER_HOUR = 0.005
# https://aws.amazon.com/ebs/pricing/ (2026-12), us-east-1: gp3 $0.08 per GB-month (3,000 IOPS and
# 125 MB/s included), for the nodes' root volumes.
GP3_GB_MONTH = 0.08
GIB = 1.073741824  # GB per GiB: EBS bills GB-months, volumes are sized in GiB
# What the estimate does not count: usage-priced, or billed outside the stack.
NOT_INCLUDED = (
    "data transfer: NAT gateway processing ($0.045/GB), cross-zone and internet egress",
    "S3: the bucket's storage and requests (it outlives the stack)",
    "CloudWatch Logs: the EKS control-plane logs' ingestion and storage",
    "ECR storage and image pulls through NAT",
    "a Capacity Block's upfront price (set when it is bought)",
)


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

    def to_dict(self) -> dict:
        return {"min": self.min_per_hour, "max": self.max_per_hour,
                "minPerMonth": round(self.min_per_hour * HOURS_PER_MONTH, 2),
                "maxPerMonth": round(self.max_per_hour * HOURS_PER_MONTH, 2),
                "lines": [{"item": x.item, "minPerHour": x.min_per_hour, "maxPerHour": x.max_per_hour}
                          for x in self.lines],
                "notIncluded": list(NOT_INCLUDED)}


def fsx_per_hour(cfg: StackConfig) -> float:
    fsx = cfg.storage.fsx
    per_gb_month = FSX_GB_MONTH[(fsx.deployment_type, fsx.throughput_per_tib)]
    # FSx bills the provisioned capacity as quoted: a 1,200 GiB file system is 1,200 GB-month.
    return fsx.storage_capacity_gib * per_gb_month / HOURS_PER_MONTH


def pool_line(pool: GpuPoolConfig | CpuPoolConfig, cfg: StackConfig, reserved_nodes: int | None, paused: bool = False) -> CostLine:
    """A pool's cost at min and max scale, saying what the number assumes.

    A reservation (On-Demand Capacity Reservation or Capacity Block) bills
    every instance it holds whether a node runs or not, so at minimum scale
    the pool costs at least the reservation: `reserved_nodes` from the
    Capacity Block lookup, else (an ODCR, which has no invoke) maxNodes.
    Paused, a pool's floor is 0 (nodepool.scaling_config), reservations still bill.
    """
    # A Spot pool that may launch other types: the dearest of them bounds it.
    price = max(cfg.price(t) for t in pool.instance_types)
    notes = []
    low = 0 if paused else pool.min_nodes
    if pool.capacity_reservation_id is not None:
        held = reserved_nodes if reserved_nodes is not None else pool.max_nodes
        low = max(low, held)
        notes.append(f"reservation of {held} billed whether used or not"
                     + ("" if reserved_nodes is not None else " (assumed maxNodes)"))
        if pool.capacity_type == "CAPACITY_BLOCK" and pool.instance_type not in cfg.prices:
            notes.append("Capacity Block price is set at purchase: on-demand rate shown")
    if pool.capacity_type == "SPOT" and not all(t in cfg.prices for t in pool.instance_types):
        dearest = max(pool.instance_types, key=cfg.price)
        notes.append(f"SPOT: on-demand rate{f' of {dearest}' if len(pool.instance_types) > 1 else ''} shown, "
                     "an upper bound")
    notes += price_region_note(pool.instance_type, cfg)
    note = f" ({'; '.join(notes)})" if notes else ""
    kind = "CPU" if pool.is_cpu else "GPU"
    return CostLine(f"{kind} pool {pool.name} {pool.min_nodes}-{pool.max_nodes} x {pool.instance_type}{note}",
                    low * price, pool.max_nodes * price)


def root_volumes_line(cfg: StackConfig, paused: bool = False) -> CostLine:
    """The nodes' gp3 root volumes: the system nodes' always, each pool node's while it runs."""
    def per_hour(gib: int) -> float:
        return gib * GIB * GP3_GB_MONTH / HOURS_PER_MONTH

    system = cfg.system_nodes.count * per_hour(cfg.system_nodes.disk_size_gib)
    low = system + sum((0 if paused else p.min_nodes) * per_hour(p.root_volume_gib) for p in cfg.all_pools)
    high = system + sum(p.max_nodes * per_hour(p.root_volume_gib) for p in cfg.all_pools)
    return CostLine("node root volumes (gp3)", low, high)


def price_region_note(instance_type: str, cfg: StackConfig) -> list[str]:
    """Catalog prices are one region's list price: say so for a stack elsewhere."""
    if instance_type in cfg.prices:
        return []
    region = catalog.get(instance_type).price_region
    return [] if region == cfg.region else [f"{region} list price; {cfg.region} may differ, set gpucluster:prices"]


def estimate(cfg: StackConfig, reserved_nodes: dict[str, int] | None = None,
             zone_count: int | None = None, paused: bool | None = None) -> CostEstimate:
    """`reserved_nodes`: the instance count of each pool's Capacity Block; `zone_count`: zones with
    subnets (one more than azCount when EKS refuses the GPU zone); `paused`: as if the stack were
    paused (default: as it is)."""
    paused = cfg.paused if paused is None else paused
    control_plane = (EKS_STANDARD_PER_HOUR if support_type(cfg.kubernetes_version) == "STANDARD"
                     else EKS_EXTENDED_PER_HOUR)
    zones = zone_count or cfg.network.az_count
    nats = zones if cfg.network.nat_gateways == "perAz" else 1
    system = cfg.system_nodes.count * cfg.price(cfg.system_nodes.instance_type)
    lines = [
        CostLine(f"EKS control plane ({support_type(cfg.kubernetes_version).lower()} support)",
                 control_plane, control_plane),
        CostLine(f"NAT gateways x{nats}", nats * NAT_GATEWAY_PER_HOUR, nats * NAT_GATEWAY_PER_HOUR),
        CostLine(f"public IPv4 addresses x{nats} (the NAT gateways')", nats * PUBLIC_IPV4_PER_HOUR,
                 nats * PUBLIC_IPV4_PER_HOUR),
        CostLine(f"system nodes {cfg.system_nodes.count} x {cfg.system_nodes.instance_type}", system, system),
    ]
    lines += [pool_line(pool, cfg, (reserved_nodes or {}).get(pool.name), paused) for pool in cfg.all_pools]
    lines.append(root_volumes_line(cfg, paused))
    fsx = fsx_per_hour(cfg)
    lines.append(CostLine(f"FSx {cfg.storage.fsx.deployment_type} {cfg.storage.fsx.storage_capacity_gib} GiB", fsx, fsx))
    if cfg.observability.enabled:
        fp = footprint(cfg)
        lines.append(CostLine(f"Prometheus gp3 volume {fp.volume_gib} GiB", fp.ebs_usd_per_hour, fp.ebs_usd_per_hour))
        if cfg.observability.remote_write == "amp":
            lines.append(CostLine(f"Amazon Managed Prometheus (~{fp.series:,} series, every pool at maxNodes)",
                                  fp.amp_usd_per_hour, fp.amp_usd_per_hour))
    return CostEstimate(tuple(CostLine(line.item, round(line.min_per_hour, 4), round(line.max_per_hour, 4))
                              for line in lines))


def paused_per_hour(cfg: StackConfig, reserved_nodes: dict[str, int] | None = None,
                    zone_count: int | None = None) -> float:
    """What bills per hour once a pause has let every GPU node go: the control plane, NAT, system
    nodes, FSx, and reservations (billed whether used or not)."""
    return estimate(cfg, reserved_nodes, zone_count, paused=True).min_per_hour
