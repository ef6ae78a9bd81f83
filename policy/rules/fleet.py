"""Stack rules on the GPU fleet: EFA pools in cluster placement groups, FSx and GPU pools in one zone,
and a bound on the GPUs and the cost per hour at maximum scale.

GPU counts and instance prices come from the program's catalog
(components/core/hardware/catalog.py); the control plane, NAT gateway and
FSx rates from components/core/planning/cost.py, the same numbers the
offline plan's cost estimate uses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from components.core.hardware import catalog
from components.core.planning import cost

from .aws_resources import EKS_CLUSTER, LAUNCH_TEMPLATE, LUSTRE, NODE_GROUP
from .base import Resource, as_int, get, is_list, is_unknown, problem, related

PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"
SUBNET = "aws:ec2/subnet:Subnet"
NAT_GATEWAY = "aws:ec2/natGateway:NatGateway"
EIP = "aws:ec2/eip:Eip"
# EC2 API, LaunchTemplateEfaNetworkInterface / InterfaceType: "efa" (EFA with
# ENA) and "efa-only" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html).
EFA_INTERFACE_TYPES = ("efa", "efa-only")

DEFAULT_MAX_GPUS = 128
DEFAULT_MAX_COST_PER_HOUR_USD = 1000.0

Finding = tuple[Resource | None, str]


def _efa_interfaces(template: Resource) -> int:
    interfaces = get(template.props, "networkInterfaces")
    return sum(1 for i in (interfaces if is_list(interfaces) else [])
               if get(i, "interfaceType") in EFA_INTERFACE_TYPES)


def _on_reservation(template: Resource) -> bool:
    """Bound to an On-Demand Capacity Reservation or a Capacity Block: placement is the reservation's."""
    target = get(template.props, "capacityReservationSpecification.capacityReservationTarget")
    return bool(get(target, "capacityReservationId") or get(target, "capacityReservationResourceGroupArn")
                or get(template.props, "instanceMarketOptions.marketType") == "capacity-block")


def efa_in_cluster_placement_group(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[Finding]:
    """A launch template with EFA interfaces puts its instances in a cluster placement group, unless a
    capacity reservation or Capacity Block fixes their placement.

    EC2 User Guide, "Placement strategies for your placement groups":
    cluster packs instances close together in one zone for the low-latency,
    high-throughput traffic of tightly coupled HPC/ML jobs
    (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/placement-strategies.html).
    A placement group forced onto an ODCR or Capacity Block fails to launch
    (components/core/config/pools.py, uses_placement_group).
    """
    groups = [r for r in resources if r.type == PLACEMENT_GROUP]
    out: list[Finding] = []
    for template in (r for r in resources if r.type == LAUNCH_TEMPLATE):
        efa = _efa_interfaces(template)
        if not efa or _on_reservation(template):
            continue
        group_name = get(template.props, "placement.groupName") or get(template.props, "placement.groupId")
        fix = ("create aws.ec2.PlacementGroup(strategy='cluster') and set placement={'group_name': group.id} "
               "(gpuPools[].placementGroup: cluster or auto), or bind the pool to a capacity reservation")
        if not group_name:
            out.append((template, problem(template, f"{efa} EFA interfaces and no placement group or reservation",
                                          fix)))
            continue
        mine = related(template, "placement", groups, known=("name",), value_path="placement.groupName")
        for group in mine:
            strategy = get(group.props, "strategy")
            if not is_unknown(strategy) and strategy != "cluster":
                out.append((template, problem(template, f"{efa} EFA interfaces in placement group {group.name} "
                                                        f"of strategy {strategy!r}", fix)))
    return out


def _zones(subnets: Sequence[Resource]) -> set[str] | None:
    """The subnets' zones (name, else id); None when one of them is not known."""
    zones = set()
    for subnet in subnets:
        zone = get(subnet.props, "availabilityZone") or get(subnet.props, "availabilityZoneId")
        if not zone or is_unknown(zone):
            return None
        zones.add(zone)
    return zones


def _instance_types(group: Resource, templates: Sequence[Resource]) -> list[str] | None:
    """A node group's instance types: its own, else its launch template's (a Capacity Block pool
    names the type in the template). None when neither is known."""
    types = get(group.props, "instanceTypes")
    if types and not is_unknown(types) and not any(is_unknown(t) for t in types):
        return [str(t) for t in types]
    # Unset (a Capacity Block pool), or computed and not known in a preview: the template's.
    for template in related(group, "launchTemplate", templates, known=("name",), value_path="launchTemplate.id"):
        instance_type = get(template.props, "instanceType")
        if instance_type and not is_unknown(instance_type):
            return [str(instance_type)]
    return None


def _root_gib(group: Resource, templates: Sequence[Resource]) -> int | None:
    """A node's root volume: the node group's diskSize, else its launch template's first EBS volume."""
    size = as_int(get(group.props, "diskSize"))
    if size is not None:
        return size
    for template in related(group, "launchTemplate", templates, known=("name",), value_path="launchTemplate.id"):
        for mapping in get(template.props, "blockDeviceMappings") or []:
            size = as_int(get(mapping, "ebs.volumeSize"))
            if size is not None:
                return size
    return None


def _is_gpu_group(group: Resource, templates: Sequence[Resource]) -> bool:
    types = _instance_types(group, templates) or []
    if any(t in catalog.CATALOG and catalog.get(t).is_gpu for t in types):
        return True
    ami = get(group.props, "amiType")
    return isinstance(ami, str) and ("NVIDIA" in ami or "NEURON" in ami)


def fsx_and_gpu_pools_in_one_zone(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[Finding]:
    """The FSx for Lustre file system and every GPU node group's subnets are in one Availability Zone.

    A Lustre file system lives in one zone; clients elsewhere pay inter-zone
    data transfer both ways and the extra latency on every read
    (https://docs.aws.amazon.com/fsx/latest/LustreGuide/performance.html; DESIGN.md: the program
    picks one GPU zone).
    """
    subnets = [r for r in resources if r.type == SUBNET]
    templates = [r for r in resources if r.type == LAUNCH_TEMPLATE]
    out: list[Finding] = []
    for fsx in (r for r in resources if r.type == LUSTRE):
        fsx_zones = _zones(related(fsx, "subnetIds", subnets))
        if not fsx_zones:
            continue
        for group in (r for r in resources if r.type == NODE_GROUP and _is_gpu_group(r, templates)):
            zones = _zones(related(group, "subnetIds", subnets))
            if zones is None or not zones or zones <= fsx_zones:
                continue
            out.append((group, problem(group, f"runs in {', '.join(sorted(zones))} while FSx {fsx.name} is in "
                                              f"{', '.join(sorted(fsx_zones))}",
                                       "give the GPU node group only the FSx zone's private subnet "
                                       "(gpucluster:gpuAvailabilityZone picks it for both)")))
    return out


def _price(instance_type: str, prices: Mapping[str, Any]) -> float | None:
    if instance_type in prices:
        return float(prices[instance_type])
    if instance_type in catalog.CATALOG:
        return catalog.price(instance_type)
    return None


def fleet_at_max(resources: Sequence[Resource], config: Mapping[str, Any]) -> dict[str, Any]:
    """GPUs and cost per hour with every node group at scalingConfig.maxSize, and what could not be counted.

    Cost lines as components/core/planning/cost.estimate draws them: node
    groups at maxSize x catalog price (the pack config's `prices` first) and
    their root volumes, the EKS control plane, NAT gateways and their public
    addresses, FSx capacity; not the Prometheus volume or AMP (cents), data
    transfer or S3.
    """
    prices = config.get("prices") or {}
    templates = [r for r in resources if r.type == LAUNCH_TEMPLATE]
    gpus, lines, pools, unpriced = 0, [], [], []
    for group in (r for r in resources if r.type == NODE_GROUP):
        max_size = as_int(get(group.props, "scalingConfig.maxSize"))
        types = _instance_types(group, templates)
        if max_size is None or not types:
            unpriced.append((group, "its instance type or scalingConfig.maxSize is not known"))
            continue
        known = [t for t in types if t in catalog.CATALOG]
        rates = [_price(t, prices) for t in types]
        if len(known) < len(types) or None in rates:
            unpriced.append((group, f"instance type {', '.join(t for t in types if t not in catalog.CATALOG)} "
                                    "is not in components/core/hardware/catalog.py"))
            continue
        # Several types in one group: count the largest and dearest (the autoscaler may pick either).
        per_node_gpus = max(catalog.get(t).gpu_count for t in types)
        gpus += per_node_gpus * max_size
        lines.append((f"{group.name} {max_size} x {'/'.join(types)}", max(rates) * max_size))
        if (root := _root_gib(group, templates)) is not None:
            lines.append((f"{group.name} root volumes {max_size} x {root} GiB gp3",
                          max_size * root * cost.GIB * cost.GP3_GB_MONTH / cost.HOURS_PER_MONTH))
        if per_node_gpus:
            pools.append(f"{group.name} {max_size} x {'/'.join(types)} = {per_node_gpus * max_size} GPUs")
    for cluster in (r for r in resources if r.type == EKS_CLUSTER):
        # EKS UpgradePolicy.supportType: STANDARD or EXTENDED; unset counts as the dearer one.
        support = get(cluster.props, "upgradePolicy.supportType")
        rate = cost.EKS_STANDARD_PER_HOUR if support == "STANDARD" else cost.EKS_EXTENDED_PER_HOUR
        lines.append((f"EKS {cluster.name}", rate))
    nats = [r for r in resources if r.type == NAT_GATEWAY]
    if nats:
        lines.append((f"NAT gateways x{len(nats)}", len(nats) * cost.NAT_GATEWAY_PER_HOUR))
    if eips := [r for r in resources if r.type == EIP]:
        lines.append((f"public IPv4 addresses x{len(eips)}", len(eips) * cost.PUBLIC_IPV4_PER_HOUR))
    for fsx in (r for r in resources if r.type == LUSTRE):
        deployment = get(fsx.props, "deploymentType", "SCRATCH_1")
        throughput = as_int(get(fsx.props, "perUnitStorageThroughput"))
        capacity = as_int(get(fsx.props, "storageCapacity"))
        rate = cost.FSX_GB_MONTH.get((deployment, throughput))
        if rate is None or capacity is None:
            unpriced.append((fsx, f"{deployment} at {throughput} MB/s/TiB has no rate in "
                                  "components/core/planning/cost.py FSX_GB_MONTH"))
            continue
        lines.append((f"FSx {fsx.name} {capacity} GiB", capacity * rate / cost.HOURS_PER_MONTH))
    return {"gpus": gpus, "costPerHour": round(sum(v for _, v in lines), 4), "lines": lines, "pools": pools,
            "unpriced": unpriced}


def budget(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[Finding]:
    """The stack's GPUs and its cost per hour, at maximum scale, stay within the pack config's bounds
    (maxGpus, maxCostPerHourUsd)."""
    # Pack config comes through a protobuf Struct: numbers are floats (8.0 for 8).
    max_gpus = float(config.get("maxGpus", DEFAULT_MAX_GPUS))
    max_cost = float(config.get("maxCostPerHourUsd", DEFAULT_MAX_COST_PER_HOUR_USD))
    fleet = fleet_at_max(resources, config)
    out: list[Finding] = []
    for res, why in fleet["unpriced"]:
        out.append((res, problem(res, f"cannot be counted against the budget: {why}",
                                 "use a catalog instance type, or give its price in the pack config `prices`")))
    pools = "; ".join(fleet["pools"]) or "no GPU node groups"
    if fleet["gpus"] > max_gpus:
        out.append((None, f"The stack can run {fleet['gpus']} GPUs at maximum scale ({pools}), over maxGpus "
                          f"{max_gpus:g}. Fix: lower the pools' maxNodes (scalingConfig.maxSize), or raise maxGpus "
                          f"for policy gpu-budget in the pack config."))
    if fleet["costPerHour"] > max_cost:
        lines = "; ".join(f"{item} ${value:,.2f}" for item, value in fleet["lines"])
        out.append((None, f"The stack costs ${fleet['costPerHour']:,.2f}/h at maximum scale ({lines}), over "
                          f"maxCostPerHourUsd ${max_cost:,.2f}. Fix: lower the pools' maxNodes or pick "
                          f"cheaper types, or raise maxCostPerHourUsd for policy gpu-budget in the pack config."))
    return out
