"""What the team rules read of Kueue's ClusterQueues: which queue a Workload waits in, whose it is, its quota and use.

Kueue v0.19.2, v1beta2 (apis/kueue/v1beta2/clusterqueue_types.go):
- spec.cohortName (L78-91) links the queues that lend to each other; spec.resourceGroups[].
  flavors[].resources[] = {name, nominalQuota, borrowingLimit?, lendingLimit?} (L300-343).
- status.flavorsReservation[] = {name, resources[]: {name, total, borrowed}} (L363-369, FlavorUsage
  and ResourceUsage L401-428): `total` is the quota the queue's Workloads reserve, borrowed included;
  `borrowed` is the part over nominalQuota. status.flavorsUsage is the same for admitted Workloads
  (L371-377). pkg/controller/core/clusterqueue_controller.go L533-534 writes both.
- A pending Workload has no status.admission; its queue is the one whose namespaceSelector takes its
  namespace (the project's queues select `kubernetes.io/metadata.name`, components/core/kube/queueing.py
  and components/core/teams/queues.py), a team's named `gpucluster-team-<team>` (team == namespace).

Every accessor here answers None (or nothing) for a field that is absent or malformed.
"""

from __future__ import annotations

import re
from typing import Any

from bootstrap.doctor.bundle import Bundle, name
from components.core.kube import queueing

GPU = "nvidia.com/gpu"
TEAM_QUEUE_PREFIX = f"{queueing.CLUSTER_QUEUE}-team-"  # components.core.teams.queues.cluster_queue_name
FLAVOR_PREFIX = "pool-"  # components.core.kube.queueing.flavor_name
NAMESPACE_LABEL = "kubernetes.io/metadata.name"
# resource.Quantity's suffixes (k8s.io/apimachinery pkg/api/resource/suffix.go).
_SUFFIX = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
           "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60}
_QUANTITY = re.compile(r"^\s*([+-]?\d+(?:\.\d+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?\s*$")


def quantity(value: Any) -> float | None:
    """A Kubernetes quantity ("32", "614400m", "16Gi") as a number; None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    match = _QUANTITY.match(value) if isinstance(value, str) else None
    return float(match.group(1)) * _SUFFIX[match.group(2) or ""] if match else None


def show(number: float | None) -> str:
    if number is None:
        return "?"
    return str(int(number)) if float(number).is_integer() else f"{number:g}"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def pool_of(flavor: str) -> str:
    return flavor[len(FLAVOR_PREFIX):] if flavor.startswith(FLAVOR_PREFIX) else flavor


def cohort(cq: dict[str, Any] | None) -> str | None:
    value = _dict(_dict(cq).get("spec")).get("cohortName")
    return value if isinstance(value, str) and value else None


def selected_namespace(cq: dict[str, Any]) -> str | None:
    labels = _dict(_dict(_dict(cq.get("spec")).get("namespaceSelector")).get("matchLabels"))
    value = labels.get(NAMESPACE_LABEL)
    return value if isinstance(value, str) else None


def queue(bundle: Bundle, cq_name: str | None) -> dict[str, Any] | None:
    return next((cq for cq in bundle.of("ClusterQueue") if name(cq) == cq_name), None) if cq_name else None


def queue_of(bundle: Bundle, wl: dict[str, Any]) -> dict[str, Any] | None:
    """The ClusterQueue the Workload is (or was) admitted to, else the one that takes its namespace."""
    admitted = queue(bundle, _dict(_dict(wl.get("status")).get("admission")).get("clusterQueue"))
    if admitted is not None:
        return admitted
    namespace = _dict(wl.get("metadata")).get("namespace") or bundle.namespace
    selecting = [cq for cq in bundle.of("ClusterQueue") if selected_namespace(cq) == namespace]
    return selecting[0] if len(selecting) == 1 else queue(bundle, f"{TEAM_QUEUE_PREFIX}{namespace}")


def team_of(cq_name: str) -> str | None:
    return cq_name[len(TEAM_QUEUE_PREFIX):] or None if cq_name.startswith(TEAM_QUEUE_PREFIX) else None


def owner(bundle: Bundle, cq_name: str) -> str:
    """Whose queue it is, in words: "team vision", "the training namespace (training)"."""
    team = team_of(cq_name)
    if team:
        return f"team {team}"
    namespace = selected_namespace(queue(bundle, cq_name) or {})
    if cq_name == queueing.CLUSTER_QUEUE:
        return f"the training namespace ({namespace})" if namespace else "the training namespace"
    return f"ClusterQueue {cq_name}" + (f" (namespace {namespace})" if namespace else "")


def _quota_row(cq: dict[str, Any], flavor: str, resource: str) -> dict[str, Any] | None:
    for group in _list(_dict(cq.get("spec")).get("resourceGroups")):
        for fl in _list(_dict(group).get("flavors")):
            if _dict(fl).get("name") != flavor:
                continue
            for row in _list(fl.get("resources")):
                if _dict(row).get("name") == resource:
                    return row
    return None


def quota(cq: dict[str, Any], flavor: str, resource: str = GPU) -> tuple[float, float | None]:
    """(nominalQuota, borrowingLimit or None) of the resource in the flavor; 0 when the queue has no such row."""
    row = _quota_row(cq, flavor, resource)
    if row is None:
        return 0.0, None
    return quantity(row.get("nominalQuota")) or 0.0, quantity(row.get("borrowingLimit"))


def usage(cq: dict[str, Any], flavor: str, resource: str = GPU) -> tuple[float, float] | None:
    """(total, borrowed) the queue's Workloads reserve of the resource in the flavor; None when its status
    does not say (flavorsReservation, else flavorsUsage)."""
    status = _dict(cq.get("status"))
    for key in ("flavorsReservation", "flavorsUsage"):
        for fl in _list(status.get(key)):
            if _dict(fl).get("name") != flavor:
                continue
            for row in _list(fl.get("resources")):
                if _dict(row).get("name") == resource:
                    total = quantity(row.get("total", "0"))
                    borrowed = quantity(row.get("borrowed", "0"))
                    if total is not None and borrowed is not None:
                        return total, borrowed
    return None


def holders(bundle: Bundle, cq: dict[str, Any], flavor: str) -> list[dict[str, Any]]:
    """The other queues of the cohort that hold GPUs of the flavor, most first."""
    out = []
    for other in bundle.of("ClusterQueue"):
        if name(other) == name(cq) or cohort(other) != cohort(cq):
            continue
        used = usage(other, flavor)
        if used and used[0] > 0:
            nominal, _ = quota(other, flavor)
            out.append({"queue": name(other), "owner": owner(bundle, name(other)), "using": used[0],
                        "borrowed": used[1], "guaranteed": nominal})
    return sorted(out, key=lambda h: (-h["using"], h["queue"]))


def describe_holder(holder: dict[str, Any]) -> str:
    """"team language: 32 of its 32 guaranteed + 8 borrowed"."""
    text = f"{holder['owner']}: {show(holder['using'] - holder['borrowed'])} of its {show(holder['guaranteed'])} " \
           "guaranteed"
    return text + (f" + {show(holder['borrowed'])} borrowed" if holder["borrowed"] else "")


def usage_text(cq: dict[str, Any], flavor: str) -> str:
    """The queue's status and spec for the flavor's GPUs, as evidence."""
    used = usage(cq, flavor)
    nominal, limit = quota(cq, flavor)
    text = (f"{flavor} {GPU}: reserved {show(used[0])}, borrowed {show(used[1])}" if used
            else f"{flavor} {GPU}: no reservation in status")
    return text + f"; nominalQuota {show(nominal)}" + (f", borrowingLimit {show(limit)}" if limit is not None else "")


def cohort_queues(bundle: Bundle, cq: dict[str, Any]) -> list[dict[str, Any]]:
    """The queue and every other queue of its cohort (the queue alone without one)."""
    group = cohort(cq)
    return [cq] + ([o for o in bundle.of("ClusterQueue") if name(o) != name(cq) and cohort(o) == group] if group else [])


def headroom(bundle: Bundle, cq: dict[str, Any], flavor: str, resource: str = GPU) -> tuple[float, float] | None:
    """(available, potential): what the queue may still take of the resource in the flavor now, and the most it
    could ever hold, as Kueue counts them for a queue alone or in a flat cohort (pkg/cache/scheduler/resource_node.go:
    localQuota L63-71 = nominal - lendingLimit stays with the queue, the rest is the cohort's and so is usage past
    it, accumulateFromChild L216-227; available L97-121 caps what the cohort gives by the borrowingLimit,
    potentialAvailable L123-140 likewise). None when a queue's usage is unknown."""
    rows = []  # (local quota, usage) of each queue, the queue's own first
    lent = 0.0  # the cohort's: every queue's nominal quota but its local part
    for member in cohort_queues(bundle, cq):
        row = _quota_row(member, flavor, resource)
        used = usage(member, flavor, resource)
        if used is None and row is not None:
            return None
        nominal, _ = quota(member, flavor, resource)
        lending = quantity(row.get("lendingLimit")) if row is not None else None
        local = max(0.0, nominal - lending) if lending is not None else 0.0
        rows.append((local, used[0] if used else 0.0))
        lent += nominal - local
    used_in_cohort = sum(max(0.0, total - local) for local, total in rows)  # usage past localQuota goes up
    local, total = rows[0]
    nominal, limit = quota(cq, flavor, resource)
    if cohort(cq) is None:
        return nominal - total, nominal
    from_cohort = lent - used_in_cohort
    if limit is not None:
        from_cohort = min(from_cohort, nominal - local - max(0.0, total - local) + limit)
    potential = local + lent if limit is None else min(nominal + limit, local + lent)
    return max(0.0, local - total) + from_cohort, potential
