"""The plan's view of each job's placement and admission: where Kueue may put it, whether it can be met, and
what a partial scale-up costs (pure; rendered as the plan's "Placement and admission" section).

A partial scale-up: EC2 launches k < N of a job's nodes, even atomically: AWS has no AtomicIncreaseSize
(cluster-autoscaler-1.35.2 cloudprovider/aws/aws_cloud_provider.go:288-291; core/scaleup/orchestrator/executor.go:
144-153 falls back to IncreaseSize). Reserved instances bill whether used or not (cost.pool_line); otherwise the k bill:
- atomic with a network topology: Kueue never admits the job short of N Ready nodes (its topology pass; Kueue
  v0.19.2 pkg/scheduler/flavorassigner/tas_flavorassigner.go delayed topology request): for the autoscaler's
  booking (BOOKING_MINUTES, processors/provreq/processor.go defaultReservationTime, not configurable), then until
  they idle out (pool.idle_minutes) once Kueue evicts the job; Kueue asks again RETRY_STRATEGY backoffLimitCount
  times (pkg/controller/admissionchecks/provisioning/controller.go syncCheckStates: Retry while the attempt <=
  backoffLimitCount, else Rejected), then deactivates the job.
- atomic without one (admitted at Provisioned=True; the missing pods carry autoscaling.x-k8s.io/consume-
  provisioning-request, so never trigger a scale-up: processors/provreq/pods_filter.go), or not atomic: until
  waitForPodsReady evicts the job (queueing.PODS_READY_TIMEOUT after admission without all pods ready) and
  requeues it, 1 + REQUEUE_LIMIT admissions in all (workload_controller.go:1282-1291 triggerDeactivation:
  deactivate once requeueState.count + 1 > backoffLimitCount; workload.go:817 UpdateRequeueState, one per eviction).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from components.core.config import GpuPoolConfig, StackConfig
from components.core.hardware.topology import layer_label
from components.core.kube import autoscaling, launcher, queueing
from components.core.placement import provisioning, topology

_DURATION = re.compile(r"(\d+)([hms])")


def timeout_minutes(duration: str = queueing.PODS_READY_TIMEOUT) -> float:
    """A Go duration of hours, minutes and seconds ("40m", "1h30m") in minutes."""
    if not re.fullmatch(r"(\d+[hms])+", duration):
        raise ValueError(f"not a duration of h, m and s: {duration!r}")
    return sum(int(n) * {"h": 60, "m": 1, "s": 1 / 60}[unit] for n, unit in _DURATION.findall(duration))


# The first admission and one per requeue; the first request and one per retry; what ends one attempt of a
# partial scale-up (all above).
ATTEMPTS, CHECK_ATTEMPTS = 1 + queueing.REQUEUE_LIMIT, 1 + provisioning.RETRY_STRATEGY["backoffLimitCount"]
BOOKING_MINUTES = 10  # cluster-autoscaler-1.35.2 processors/provreq/processor.go defaultReservationTime
BOOKING, PODS_READY = "bookingExpiry", "podsReadyTimeout"


@dataclass(frozen=True)
class Reservation:
    kind: str  # "Capacity Block" | "ODCR"
    id: str
    instances: int
    assumed: bool  # an ODCR: not looked up, assumed maxNodes (as cost.pool_line)


@dataclass(frozen=True)
class PartialScaleUp:
    """The worst partial scale-up of one attempt: `nodes` launched, the rest never, billed for `minutes` until
    `released_by` (BOOKING: the booking and the pool's idleMinutes; PODS_READY: the timeout), `attempts` times."""

    nodes: int
    price_per_node_hour: float
    minutes: float
    within_reservation: bool  # the nodes are reserved instances, billed whether used or not
    released_by: str
    attempts: int

    @property
    def per_attempt_usd(self) -> float:
        return round(self.nodes * self.price_per_node_hour * self.minutes / 60, 2)

    @property
    def all_attempts_usd(self) -> float:
        return round(self.nodes * self.price_per_node_hour * self.minutes / 60 * self.attempts, 2)

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "pricePerNodeHour": self.price_per_node_hour, "minutes": self.minutes,
                "attempts": self.attempts, "perAttemptUsd": self.per_attempt_usd,
                "allAttemptsUsd": self.all_attempts_usd, "withinReservation": self.within_reservation,
                "releasedBy": self.released_by}


@dataclass(frozen=True)
class JobPlacement:
    name: str
    fabric_test: bool
    pool: str
    instance_type: str
    nodes: int
    policy: str  # preferred | required | none
    layer: int | None
    none_because: str | None  # why policy none
    min_nodes: int
    max_nodes: int
    reservation: Reservation | None
    placement_group: bool
    atomic: bool
    partial: PartialScaleUp | None  # None: a single node

    @property
    def capacity(self) -> int:
        """The most nodes the pool can give it: maxNodes, or fewer when its reservation holds fewer."""
        return self.max_nodes if self.reservation is None else min(self.max_nodes, self.reservation.instances)

    @property
    def can_be_met(self) -> bool:
        return self.nodes <= self.capacity

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "fabricTest": self.fabric_test, "pool": self.pool,
                "instanceType": self.instance_type, "nodes": self.nodes,
                "placement": {"policy": self.policy, "layer": self.layer,
                              "label": layer_label(self.layer) if self.layer else None,
                              "noneBecause": self.none_because},
                "minNodes": self.min_nodes, "maxNodes": self.max_nodes, "capacityNodes": self.capacity,
                "canBeMet": self.can_be_met, "reservation": asdict(self.reservation) if self.reservation else None,
                "placementGroup": self.placement_group, "admission": "atomic" if self.atomic else "quota",
                "partialScaleUp": self.partial.to_dict() if self.partial else None}


@dataclass(frozen=True)
class PlacementPlan:
    jobs: tuple[JobPlacement, ...]
    warnings: tuple[tuple[str, str], ...]  # (level "error" | "warning", message)

    def to_dict(self) -> dict[str, Any]:
        return {"podsReadyTimeout": queueing.PODS_READY_TIMEOUT, "podsReadyTimeoutMinutes": timeout_minutes(),
                "attempts": ATTEMPTS, "bookingMinutes": BOOKING_MINUTES, "jobs": [j.to_dict() for j in self.jobs],
                "warnings": [{"level": level, "message": message} for level, message in self.warnings]}


def _reservation(pool: GpuPoolConfig, reserved: dict[str, int]) -> Reservation | None:
    if pool.capacity_reservation_id is None:
        return None
    kind = "Capacity Block" if pool.capacity_type == "CAPACITY_BLOCK" else "ODCR"
    looked_up = reserved.get(pool.name)
    return Reservation(kind, pool.capacity_reservation_id, pool.max_nodes if looked_up is None else looked_up,
                       looked_up is None)


def _none_because(pool: GpuPoolConfig, asked: str | None, nodes: int) -> str:
    if asked == "none":
        return "policy none"
    if topology.pool_layers(pool) == 0:
        return ("its pool's topology is off" if pool.topology == "off"
                else f"EKS labels no network layers on {pool.instance_type}")
    return "a single node" if nodes < 2 else "policy none"


def job_placement(name: str, fabric: bool, nodes: int, placement: topology.Placement | None, asked: str | None,
                  pool: GpuPoolConfig, cfg: StackConfig, reserved: dict[str, int]) -> JobPlacement:
    reservation = _reservation(pool, reserved)
    capacity = pool.max_nodes if reservation is None else min(pool.max_nodes, reservation.instances)
    # A Spot pool that may launch other types: the dearest of them bounds it (as cost.pool_line).
    price = max(cfg.price(t) for t in pool.instance_types)
    minutes, released_by, attempts = ((BOOKING_MINUTES + pool.idle_minutes, BOOKING, CHECK_ATTEMPTS)
                                      if pool.atomic_scale_up and topology.pool_layers(pool) > 0 else
                                      (timeout_minutes(), PODS_READY, ATTEMPTS))
    partial = (PartialScaleUp(min(nodes - 1, capacity), price, minutes, reservation is not None, released_by,
                              attempts) if nodes > 1 else None)
    return JobPlacement(name, fabric, pool.name, pool.instance_type, nodes,
                        placement.policy if placement else "none", placement.layer if placement else None,
                        None if placement else _none_because(pool, asked, nodes), pool.min_nodes, pool.max_nodes,
                        reservation, pool.uses_placement_group, pool.atomic_scale_up, partial)


def plan(cfg: StackConfig, reserved_nodes: dict[str, int] | None = None) -> PlacementPlan:
    """Every fabric test and job, in the plan's order. `reserved_nodes`: each pool's Capacity Block instance
    count (cost.estimate's lookup); an ODCR's is assumed maxNodes."""
    reserved = reserved_nodes or {}
    rows = [job_placement(launcher.nccl_test_name(pool), True, launcher.FABRIC_TEST_NODES,
                          topology.fabric_test_placement(pool), None, pool, cfg, reserved)
            for pool in cfg.gpu_pools if pool.fabric_test]
    for job in cfg.jobs:
        pool = cfg.pool(job.pool)
        rows.append(job_placement(job.name, False, job.nodes, topology.job_placement(job, pool),
                                  job.placement.policy if job.placement else None, pool, cfg, reserved))
    pools = [*provisioning.replacement_warnings(cfg.gpu_pools, topology.pool_layers,
                                                queueing.PODS_READY_RECOVERY_TIMEOUT),
             *provisioning.block_admission_warnings(cfg.gpu_pools)]
    return PlacementPlan(tuple(rows), tuple(w for row in rows for w in _warnings(row)) + tuple(("warning", w)
                                                                                          for w in pools))


def _who(row: JobPlacement) -> str:
    return f"the fabric test {row.name}" if row.fabric_test else f"job {row.name}"


def _holds(partial: PartialScaleUp, instance_type: str) -> str:
    """What one attempt's partial scale-up costs."""
    why = (f"the {BOOKING_MINUTES}-min booking, then idleMinutes {partial.minutes - BOOKING_MINUTES:g}"
           if partial.released_by == BOOKING else "")
    if partial.within_reservation:
        return (f"holds up to {_plural(partial.nodes, 'reserved node')} for {partial.minutes:g} min per attempt "
                f"({why + '; ' if why else ''}${partial.per_attempt_usd:,.2f} at the on-demand rate; the reservation "
                "bills whether used or not: nothing extra)")
    return (f"bills up to ${partial.per_attempt_usd:,.2f} per attempt ({partial.nodes} x {instance_type} x "
            f"{partial.minutes:g} min{': ' + why if why else ''}), ${partial.all_attempts_usd:,.2f} over "
            f"{partial.attempts} attempts")


def _misses(j: dict[str, Any]) -> str:  # required on a pool that scales: when its new nodes share no domain
    p, n = j["partialScaleUp"], j["nodes"]
    usd = n * p["pricePerNodeHour"] * p["minutes"] / 60
    return (f"the autoscaler adds nodes without regard to network domains, so if the {n} it gets do not share one, "
            f"Kueue cannot place it, their {BOOKING_MINUTES}-min booking expires and Kueue asks again, billing them "
            f"each time (up to ${usd:,.2f} per attempt: {n} x {j['instanceType']} x {p['minutes']:g} min; "
            f"${usd * p['attempts']:,.2f} over {p['attempts']} attempts), then deactivates it; a retry mostly "
            "finds the same nodes (the autoscaler counts idle ones as capacity): prefer preferred, a broader layer "
            "or reserved capacity")


def _warnings(row: JobPlacement) -> list[tuple[str, str]]:
    out = []
    r = row.reservation
    if r is not None and row.nodes > r.instances:
        holds = f"the {r.instances} instances pool {row.pool}'s {r.kind} {r.id} holds (the pool launches only into it)"
        out.append(("error", f"{_who(row)}: required within one layer-{row.layer} network domain, but its {row.nodes} "
                             f"nodes are more than {holds}: no domain can ever hold them; lower its nodes or reserve "
                             "more" if row.policy == "required" else f"{_who(row)}: {row.nodes} nodes, more than "
                             f"{holds}: it can never be placed; lower its nodes or reserve more"))
    if row.partial is not None and not row.atomic:
        out.append(("warning", f"{_who(row)} ({row.nodes} nodes) on pool {row.pool}, whose atomicScaleUp is false: "
                               "nodes arrive one by one; a partial scale-up "
                               + _holds(row.partial, row.instance_type)))
    return out


# -- text ------------------------------------------------------------------------------------------------


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _row_text(j: dict[str, Any]) -> str:
    p, r = j["placement"], j["reservation"]
    name = f"{j['name']} (fabric test)" if j["fabricTest"] else j["name"]
    line = f"  {name}: {_plural(j['nodes'], 'node')} on {j['pool']}, "
    domain = f"within one layer-{p['layer']} network domain ({p['label']})"
    if p["policy"] == "preferred":
        line += f"preferred {domain}: as close as Kueue can, spread only when it must"
    elif p["policy"] == "required" and j["nodes"] > 1 and r is None and j["minNodes"] < j["maxNodes"]:
        line += f"required {domain}: " + _misses(j)
    elif p["policy"] == "required":  # its nodes always exist, or the reservation fixes where they are
        line += f"required {domain}: it waits until one domain has all {j['nodes']}"
    else:
        line += f"placement none ({p['noneBecause']})"
    where = (f"at maxNodes ({j['nodes']} of {j['maxNodes']})" if r is None else
             f"in its {r['kind']} ({j['nodes']} of {r['instances']} instances"
             + (", assumed maxNodes)" if r["assumed"] else ")"))
    if not j["canBeMet"]:
        line += f"; can never be met: its {r['kind']} holds {_plural(r['instances'], 'instance')}"
    elif p["policy"] == "required":
        group = ("the pool's cluster placement group packs its nodes close" if j["placementGroup"] else
                 "the pool has no cluster placement group" if r is None else
                 f"the {r['kind']} fixes where its instances are (no placement group of ours)")
        line += (f"; can be met {where} if EC2 places them so: EC2 does not promise how many nodes share one "
                 f"layer-{p['layer']} network node; {group}")
    else:
        line += f"; can be met {where}"
    line += ("; admitted atomically" + (f" (one ProvisioningRequest per attempt for its {j['nodes']} nodes)"
                                        if j["nodes"] > 1 else "")
             if j["admission"] == "atomic" else "; admitted on quota (nodes arrive one by one)")
    partial = j["partialScaleUp"]
    if partial is None:
        return line + "; no partial scale-up (a single node)"
    held = PartialScaleUp(partial["nodes"], partial["pricePerNodeHour"], partial["minutes"],
                          partial["withinReservation"], partial["releasedBy"], partial["attempts"])
    return line + "; a partial scale-up " + _holds(held, j["instanceType"])


def render(section: dict[str, Any] | None) -> list[str]:
    """The section's lines (a blank line first), from the report's `placement`; nothing without one."""
    if section is None:
        return []
    out = ["", "Placement and admission (Kueue topology-aware scheduling over the EKS network-node labels; atomic "
               "admission: a ProvisioningRequest for all of a job's nodes; README, How jobs run)"]
    out += [_row_text(j) for j in section["jobs"]]
    partial = [j for j in section["jobs"] if j["partialScaleUp"] is not None]
    booked = [j["partialScaleUp"] for j in partial if j["partialScaleUp"]["releasedBy"] == BOOKING]
    timeout, booking = section["podsReadyTimeout"], section["bookingMinutes"]
    if booked:
        out.append(f"  A partial scale-up on an atomic pool with a network topology: EC2 launches k < N of a job's "
                   f"nodes; Kueue never admits the job short of N Ready nodes (its topology pass), so the k bill for "
                   f"cluster-autoscaler's {booking}-min booking and then the pool's idleMinutes, and Kueue asks "
                   f"again, {booked[0]['attempts']} attempts in all, then deactivates it; worst case per attempt: N-1 "
                   f"nodes x the pool's price x ({booking} min + idleMinutes). Nodes that take longer than the booking "
                   f"to become Ready (up to {autoscaling.MAX_NODE_PROVISION_MINUTES} min) normally cost a cold start a "
                   "retry or two, not the job: a retry finds them Ready")
    if len(booked) < len(partial):
        out.append(f"  A partial scale-up on a pool with no network topology or no atomic admission: EC2 launches k < "
                   f"N of a job's nodes; Kueue admits the job (atomic: once the autoscaler has asked for all N), and "
                   f"the k bill until Kueue evicts it {timeout} after admission without all of its pods ready "
                   f"(waitForPodsReady) and requeues it, {section['attempts']} attempts in all, then deactivates it; "
                   f"worst case per attempt: N-1 nodes x the pool's price x {timeout}")
    if any(j["admission"] == "atomic" for j in partial):
        out.append("  Atomic admission on AWS: cluster-autoscaler asks for all N nodes at once and never starts a "
                   "scale-up the node group cannot hold (maxNodes), so a job it cannot plan waits with no node; it "
                   "says Provisioned once it has raised the group's desired size, before any node is Ready, and cannot "
                   "make EC2's launch atomic (AtomicIncreaseSize is not implemented for AWS), so a shortfall of EC2 "
                   "capacity still bills the nodes that did launch, as above. On a Capacity Block or ODCR whose free "
                   "instances cover N the launch is all or nothing in practice: the capacity is held for you")
    out += [f"  {w['level'].upper()}: {w['message']}" for w in section["warnings"]]
    return out
