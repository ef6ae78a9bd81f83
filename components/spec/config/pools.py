"""gpucluster:gpuPools: one GpuPoolConfig per entry, checked against the catalog."""

from __future__ import annotations

import re

from components.spec import catalog
from components.spec.config.types import (
    CAPACITY_TYPES,
    DNS_LABEL,
    EFA_MODES,
    IDLE_MINUTES_DEFAULT,
    IDLE_MINUTES_MAX,
    K8S_LABEL_KEY,
    K8S_LABEL_VALUE,
    MAX_NODES_PER_MANAGED_NODE_GROUP,
    PLACEMENT_MODES,
    RESERVATION_ID,
    GpuPoolConfig,
)
from components.spec.validation import Problems, Section, unique


def parse_pools(top: Section, problems: Problems) -> tuple[tuple[GpuPoolConfig, ...], set[str] | None]:
    """The valid pools, and every name declared (None when gpuPools itself is unreadable).

    Jobs on a declared but invalid pool are not reported again: one mistake, one message.
    """
    declared: set[str] | None = set()
    raw = top.raw.get("gpuPools")
    if raw is not None and not isinstance(raw, list):
        declared = None
    pools = []
    for path, item in top.items("gpuPools"):
        if isinstance(item, dict) and isinstance(item.get("name"), str) and declared is not None:
            declared.add(item["name"])
        pool = parse_pool(Section(item, path, problems))
        if pool is not None:
            pools.append((path, pool))
    unique(problems, [(f"{p}.name", pool.name) for p, pool in pools], "pool name")
    return tuple(pool for _, pool in pools), declared


def parse_pool(sec: Section) -> GpuPoolConfig | None:
    p = sec.problems
    name = sec.string("name", required=True, pattern=DNS_LABEL, max_len=32,
                      allowed="a lowercase DNS label of at most 32 characters")
    itype = sec.string("instanceType", required=True, allowed="a GPU instance type")
    instance = None
    if itype is not None:
        if itype not in catalog.CATALOG:
            p.bad(sec.key_path("instanceType"), itype, f"allowed GPU types: {', '.join(catalog.GPU_TYPES)}")
        elif not catalog.get(itype).is_gpu:
            p.bad(sec.key_path("instanceType"), itype,
                  f"is not a GPU instance type; allowed: {', '.join(catalog.GPU_TYPES)}")
        else:
            instance = catalog.get(itype)
    min_nodes = sec.integer("minNodes", 0, minimum=0, maximum=MAX_NODES_PER_MANAGED_NODE_GROUP)
    max_nodes = sec.integer("maxNodes", required=True, minimum=1, maximum=MAX_NODES_PER_MANAGED_NODE_GROUP)
    desired = sec.integer("desiredNodes", min_nodes, minimum=0, maximum=MAX_NODES_PER_MANAGED_NODE_GROUP)
    if None not in (min_nodes, max_nodes) and min_nodes > max_nodes:
        p.add(sec.key_path("maxNodes"), f"got {max_nodes}; must be >= minNodes ({min_nodes})")
    elif None not in (min_nodes, max_nodes, desired) and not min_nodes <= desired <= max_nodes:
        p.add(sec.key_path("desiredNodes"),
              f"got {desired}; must be from minNodes ({min_nodes}) to maxNodes ({max_nodes})")

    capacity_type = sec.enum("capacityType", CAPACITY_TYPES, "ON_DEMAND")
    reservation = sec.string("capacityReservationId", pattern=RESERVATION_ID,
                             allowed="a capacity reservation id, cr- and 17 hex digits")
    if capacity_type == "CAPACITY_BLOCK" and reservation is None and not sec.has("capacityReservationId"):
        p.add(sec.key_path("capacityReservationId"),
              "is required when capacityType is CAPACITY_BLOCK (the Capacity Block's reservation id, cr-...)")
    if capacity_type == "SPOT" and reservation is not None:
        p.bad(sec.key_path("capacityReservationId"), reservation,
              "must not be set with capacityType SPOT (reservations are on-demand or Capacity Blocks)")

    efa = sec.enum("efa", EFA_MODES, "auto")
    if instance is not None and efa == "required" and not instance.efa_supported:
        p.add(sec.key_path("efa"), f"got 'required', but {instance.name} has no EFA; use auto or disabled, "
                                   "or an EFA type such as p5.48xlarge")
    placement = sec.enum("placementGroup", PLACEMENT_MODES, "auto")
    efa_on = instance is not None and instance.efa_supported and efa != "disabled"
    if placement == "cluster" and instance is not None and not efa_on:
        p.add(sec.key_path("placementGroup"),
              f"got 'cluster', but the pool has no EFA ({instance.name}, efa {efa}); use auto or none")
    root = sec.integer("rootVolumeGiB", 200, minimum=50, maximum=16384)
    raid0 = sec.boolean("localNvmeRaid0", True)
    fabric_test = sec.boolean("fabricTest", False)
    if fabric_test and instance is not None:
        if not efa_on:
            p.add(sec.key_path("fabricTest"), f"needs an EFA pool; {instance.name} with efa {efa} has none")
        elif max_nodes is not None and max_nodes < 2:
            p.add(sec.key_path("fabricTest"), f"needs maxNodes >= 2 to test the fabric (maxNodes is {max_nodes})")
    labels = sec.string_map("labels", key_pattern=K8S_LABEL_KEY, key_what="a Kubernetes label key",
                            value_check=lambda v: None if re.fullmatch(K8S_LABEL_VALUE, v)
                            else "must be a Kubernetes label value (at most 63 alphanumerics, -, _ or .)")
    idle = sec.integer("idleMinutes", IDLE_MINUTES_DEFAULT, minimum=1, maximum=IDLE_MINUTES_MAX)
    sec.finish()
    if None in (name, instance, min_nodes, max_nodes, desired, capacity_type, efa, placement, root):
        return None
    return GpuPoolConfig(
        name=name, instance_type=instance.name, min_nodes=min_nodes, desired_nodes=desired,
        max_nodes=max_nodes, capacity_type=capacity_type, capacity_reservation_id=reservation,
        efa=efa, placement_group=placement, root_volume_gib=root, local_nvme_raid0=bool(raid0),
        fabric_test=bool(fabric_test), labels=labels, idle_minutes=idle or IDLE_MINUTES_DEFAULT,
    )
