"""What cluster-autoscaler 1.35 decides for a ProvisioningRequest, pure: the local stand-in's rules.

The stand-in (local/autoscaler/provisioner.py) plays cluster-autoscaler's
ProvisioningRequest processing for the two classes Kueue uses; this module
holds its decisions, each from CA's source at tag cluster-autoscaler-1.35.2
(paths under cluster-autoscaler/):

- a request's pods are its pod sets' templates times their counts
  (provisioningrequest/pods/pods.go); those that fit the free room of
  existing nodes (allocatable less the requests of bound pods and of the
  pods booked for other requests) need nothing new;
- best-effort-atomic-scale-up: the rest must all fit new nodes of ONE node
  group within its maximum size, else no node is asked for at all
  (core/scaleup/orchestrator/orchestrator.go, allOrNothing); check-capacity
  never adds nodes (provisioningrequest/checkcapacity/provisioningclass.go);
- the conditions written, with CA's reasons and messages
  (provisioningrequest/conditions/conditions.go,
  provisioningrequest/besteffortatomic/provisioning_class.go), the retry of a
  Provisioned=False request after a doubling backoff
  (processors/provreq/injector.go), booking and its expiry
  (processors/provreq/processor.go).

So a best-effort-atomic request that cannot get all its nodes gets
Provisioned=False (CapacityIsNotFound), never Failed: Kueue keeps its check
Pending with that message, and CA itself tries again after 1, 2, 4 ... up to
10 minutes; Kueue's retryStrategy acts only on Failed and BookingExpired.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kubernetes.utils.quantity import parse_quantity

# apis/provisioningrequest/autoscaling.x-k8s.io/v1/types.go
ACCEPTED, PROVISIONED, FAILED, BOOKING_EXPIRED = "Accepted", "Provisioned", "Failed", "BookingExpired"
BEST_EFFORT_ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
CONSUME_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"

# provisioningrequest/conditions/conditions.go: (reason, message).
ACCEPTED_CONDITION = ("Accepted", "ProvisioningRequest is accepted by ClusterAutoscaler")
CAPACITY_FOUND = ("CapacityIsFound", "Capacity is found in the cluster")
CAPACITY_PROVISIONED = ("CapacityIsProvisioned", "Capacity is found in the cluster")  # sic: CA's message
# besteffortatomic/provisioning_class.go and checkcapacity/provisioningclass.go spell this message inline.
CAPACITY_NOT_FOUND = ("CapacityIsNotFound", "Capacity is not found, CA will try to find it later.")
# checkcapacity/provisioningclass.go, with the noRetry parameter "true": Failed, so Kueue retries.
CAPACITY_NOT_FOUND_NO_RETRY = ("CapacityIsNotFound", "CA could not find requested capacity")
NO_RETRY_PARAMETER = "noRetry"
BOOKING_EXPIRED_CONDITION = ("CapacityReservationTimeExpired", "Capacity reservation time is expired")
EXPIRED = ("Expired", "ProvisioningRequest is expired")
FAILED_TO_CREATE_PODS = "FailedToCreatePods"

# processors/provreq/processor.go: defaultReservationTime, defaultExpirationTime (constants, no flag).
BOOKING_SECONDS = 10 * 60
EXPIRATION_SECONDS = 7 * 24 * 3600
# config/flags/flags.go: --provisioning-request-initial-backoff-time 1m, --provisioning-request-max-backoff-time 10m.
RETRY_INITIAL_SECONDS = 60
RETRY_MAX_SECONDS = 10 * 60

Resources = dict[str, Decimal]


def quantities(values: dict[str, Any] | None) -> Resources:
    return {name: Decimal(parse_quantity(value)) for name, value in (values or {}).items()}


def pod_requests(spec: dict[str, Any]) -> Resources:
    """A pod's requests as the scheduler counts them: its containers' sum or its largest init container, plus
    overhead, and one of the node's pod slots."""
    total: Resources = {}
    for container in spec.get("containers", []):
        for name, value in quantities(container.get("resources", {}).get("requests")).items():
            total[name] = total.get(name, Decimal(0)) + value
    for container in spec.get("initContainers", []):
        for name, value in quantities(container.get("resources", {}).get("requests")).items():
            total[name] = max(total.get(name, Decimal(0)), value)
    for name, value in quantities(spec.get("overhead")).items():
        total[name] = total.get(name, Decimal(0)) + value
    total["pods"] = total.get("pods", Decimal(0)) + 1
    return total


def fits(need: Resources, free: Resources) -> bool:
    return all(free.get(name, Decimal(0)) >= value for name, value in need.items() if value > 0)


def take(free: Resources, need: Resources) -> None:
    for name, value in need.items():
        free[name] = free.get(name, Decimal(0)) - value


def _tolerates(tolerations: Iterable[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
            continue
        if toleration.get("operator") == "Exists":
            if not toleration.get("key") or toleration["key"] == taint["key"]:
                return True
        elif toleration.get("key") == taint["key"] and toleration.get("value", "") == taint.get("value", ""):
            return True
    return False


def _expression_holds(expression: dict[str, Any], labels: dict[str, str]) -> bool:
    key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
    if operator == "In":
        return labels.get(key) in values
    if operator == "NotIn":
        return labels.get(key) not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    if operator in ("Gt", "Lt"):
        try:
            number = int(labels[key])
        except (KeyError, ValueError):
            return False
        return number > int(values[0]) if operator == "Gt" else number < int(values[0])
    return False


def schedulable(spec: dict[str, Any], labels: dict[str, str], taints: Sequence[dict[str, Any]]) -> bool:
    """The pod may run on a node of these labels and taints: node selector, required node affinity, taints."""
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or []
    if terms and not any(all(_expression_holds(e, labels) for e in term.get("matchExpressions", []))
                         for term in terms):
        return False
    tolerations = spec.get("tolerations") or []
    return all(_tolerates(tolerations, t) for t in taints if t.get("effect") in ("NoSchedule", "NoExecute"))


@dataclass
class NodeRoom:
    """A node as the simulation sees it: where it is, and its room left (mutated as pods are placed)."""

    name: str
    labels: dict[str, str]
    taints: list[dict[str, Any]]
    free: Resources


@dataclass(frozen=True)
class Group:
    """A node group: what a new node of it looks like, how many it has and how many it may have."""

    name: str
    labels: dict[str, str]
    taints: list[dict[str, Any]]
    allocatable: Resources
    size: int
    limit: int  # min(maxNodes, what the cloud will give)


@dataclass(frozen=True)
class Pod:
    spec: dict[str, Any] = field(hash=False)
    requests: Resources = field(hash=False)


def pods_of(pod_sets: Iterable[tuple[dict[str, Any], int]]) -> list[Pod]:
    """Each pod set's template spec, count times (pods.go PodsForProvisioningRequest)."""
    out = []
    for spec, count in pod_sets:
        requests = pod_requests(spec)
        out += [Pod(spec, requests) for _ in range(count)]
    return out


def place(pods: Iterable[Pod], nodes: Sequence[NodeRoom]) -> list[Pod]:
    """Put each pod on the first node it fits (taking the room); the pods that fit nowhere."""
    left = []
    for pod in pods:
        node = next((n for n in nodes if schedulable(pod.spec, n.labels, n.taints) and fits(pod.requests, n.free)),
                    None)
        if node is None:
            left.append(pod)
        else:
            take(node.free, pod.requests)
    return left


def new_nodes_needed(pods: Sequence[Pod], group: Group) -> int | None:
    """How many empty nodes of the group hold all the pods (first fit, as CA's binpacking estimator); None when
    some pod fits no node of the group at all."""
    nodes: list[NodeRoom] = []
    for pod in pods:
        if not (schedulable(pod.spec, group.labels, group.taints) and fits(pod.requests, group.allocatable)):
            return None
        if place([pod], nodes):
            nodes.append(NodeRoom(f"{group.name}-new-{len(nodes)}", group.labels, group.taints, dict(group.allocatable)))
            place([pod], nodes[-1:])
    return len(nodes)


@dataclass(frozen=True)
class Decision:
    """What becomes of a request: found (on existing nodes), scale `group` up by `new_nodes`, or not found."""

    provisioned: bool
    on_existing: int
    group: str | None = None
    new_nodes: int = 0
    why: str = ""  # for the log

    @property
    def scale_up(self) -> bool:
        return self.new_nodes > 0


def decide(provisioning_class: str, pods: Sequence[Pod], nodes: Sequence[NodeRoom], groups: Sequence[Group]) -> Decision:
    """All the pods placed on existing room, or all the rest on new nodes of one group within its limit, or none."""
    left = place(pods, nodes)
    on_existing = len(pods) - len(left)
    if not left:
        return Decision(True, on_existing, why=f"all {len(pods)} pods fit existing nodes")
    if provisioning_class == CHECK_CAPACITY:
        return Decision(False, on_existing, why=f"{len(left)} of {len(pods)} pods fit no existing node")
    reasons = []
    for group in groups:
        needed = new_nodes_needed(left, group)
        if needed is None:
            continue
        if group.size + needed <= group.limit:
            return Decision(True, on_existing, group.name, needed,
                            f"{on_existing} pods fit existing nodes, {len(left)} need {needed} new {group.name} nodes "
                            f"({group.size} + {needed} <= {group.limit})")
        reasons.append(f"{group.name} needs {needed} new nodes but has {group.size} of at most {group.limit}")
    if not reasons:
        return Decision(False, on_existing, why=f"{len(left)} pods fit no existing node and no node group")
    return Decision(False, on_existing, why="; ".join(reasons) + " (all or nothing: no node asked for)")


# -- conditions ----------------------------------------------------------------------------------------------------

def timestamp(now: datetime.datetime) -> str:
    return now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str) -> datetime.datetime:
    return datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)


def find(conditions: Sequence[dict[str, Any]], kind: str) -> dict[str, Any] | None:
    return next((c for c in conditions if c.get("type") == kind), None)


def is_true(conditions: Sequence[dict[str, Any]], kind: str) -> bool:
    found = find(conditions, kind)
    return found is not None and found.get("status") == "True"


def with_condition(conditions: Sequence[dict[str, Any]], kind: str, status: str, reason_message: tuple[str, str],
                   now: datetime.datetime, generation: int) -> list[dict[str, Any]]:
    """conditions.go AddOrUpdateCondition: the condition of that type replaced in place (its transition time is
    now even when its status is unchanged), else appended."""
    reason, message = reason_message
    new = {"type": kind, "status": status, "observedGeneration": generation, "lastTransitionTime": timestamp(now),
           "reason": reason, "message": message}
    out = [new if c.get("type") == kind else dict(c) for c in conditions]
    return out if find(conditions, kind) else [*out, new]


def outcome(provisioning_class: str, decision: Decision, parameters: dict[str, str]) -> tuple[str, str, tuple[str, str]]:
    """(condition type, status, (reason, message)) the class writes for the decision."""
    if decision.provisioned:
        return PROVISIONED, "True", CAPACITY_PROVISIONED if decision.scale_up else CAPACITY_FOUND
    if provisioning_class == CHECK_CAPACITY and parameters.get(NO_RETRY_PARAMETER) == "true":
        return FAILED, "True", CAPACITY_NOT_FOUND_NO_RETRY
    return PROVISIONED, "False", CAPACITY_NOT_FOUND


def due_for_attempt(conditions: Sequence[dict[str, Any]], now: datetime.datetime,
                    backoff_seconds: float) -> bool:
    """injector.go IsAvailableForProvisioning: never tried, or Provisioned=False for longer than its backoff;
    never once Failed or Provisioned."""
    if is_true(conditions, FAILED) or is_true(conditions, PROVISIONED):
        return False
    provisioned = find(conditions, PROVISIONED)
    if provisioned is None:
        return True
    if provisioned.get("status") != "False":
        return False
    return parse_time(provisioned["lastTransitionTime"]) + datetime.timedelta(seconds=backoff_seconds) < now


def next_backoff(current: float | None, initial: float, maximum: float) -> float:
    """The wait before the attempt after this one (injector.go: doubled, at most the maximum)."""
    return min(2 * (initial if current is None else current), maximum)


def booked(conditions: Sequence[dict[str, Any]]) -> bool:
    """conditions.go ShouldCapacityBeBooked: Provisioned, and neither Failed nor BookingExpired."""
    return (is_true(conditions, PROVISIONED) and not is_true(conditions, FAILED)
            and not is_true(conditions, BOOKING_EXPIRED))


def expiry(conditions: Sequence[dict[str, Any]], created: str, now: datetime.datetime,
           booking_seconds: float) -> tuple[str, tuple[str, str]] | None:
    """processor.go refresh: BookingExpired once booked longer than the booking time; Failed (Expired) when not
    provisioned within 7 days of creation; None otherwise."""
    if is_true(conditions, BOOKING_EXPIRED) or is_true(conditions, FAILED):
        return None
    provisioned = find(conditions, PROVISIONED)
    if provisioned is not None and provisioned.get("status") == "True":
        if parse_time(provisioned["lastTransitionTime"]) + datetime.timedelta(seconds=booking_seconds) < now:
            return BOOKING_EXPIRED, BOOKING_EXPIRED_CONDITION
        return None
    if parse_time(created) + datetime.timedelta(seconds=EXPIRATION_SECONDS) < now:
        return FAILED, EXPIRED
    return None


def missing_templates(referenced: Sequence[str], found: Iterable[str]) -> str | None:
    """provreqwrapper/wrapper.go errMissingPodTemplates's message, or None when every template is there."""
    present = set(found)
    missing = [name for name in referenced if name not in present]
    if not missing:
        return None
    return (f"missing pod templates, {len(referenced)} pod templates were referenced, {len(missing)} templates were "
            f"missing: {','.join(missing)}")
