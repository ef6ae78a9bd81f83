"""What a team's unfinished jobs may still cost (pure): each one's nodes x its pool's price x what is left of its bound.

A team's budget has to hold the jobs it already runs or queues, not only the spend so far and the
new job: ten jobs each bounded at $100k fit a $150k budget one at a time. Every Kueue Workload of
the team's namespace that is not Finished counts (Kueue v0.19.2, apis/kueue/v1beta2/workload_types.go),
but an inactive one (spec.active false: "a workload should never be admitted and evicts running
workloads"), which runs no more unless an admin reactivates it.

What is left of a bound is Kueue's own arithmetic (pkg/controller/core/workload_controller.go,
reconcileMaxExecutionTime): spec.maximumExecutionTimeSeconds (copied from the job's
kueue.x-k8s.io/max-exec-time-seconds label when Kueue makes the Workload, jobframework/utils.go
NewWorkload) minus status.accumulatedPastExecutionTimeSeconds ("the total time, in seconds, the
workload spent in Admitted state, in the previous Admit - Evict cycles"), minus the time since the
Admitted condition's lastTransitionTime while it is admitted. A queued job has its whole bound
left. A Workload of something other than a job of ours (a member's batch Job) counts its GPUs at
the stack's dearest GPU price, the most the spend rules can bill it; one requesting no GPU bills
nothing (components.core.observability.spend counts GPU requests only).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bootstrap.jobs import state

GPU = "nvidia.com/gpu"


def usd(x: float) -> str:
    return f"${x:,.2f}"


@dataclass(frozen=True)
class Commitment:
    """One unfinished job: `count` nodes (or GPUs) at `price_per_hour` each, `remaining_seconds` of its bound
    left (None: it has none)."""

    job: str  # its name, or its Workload's when it is no job of ours
    workload: str
    count: int
    unit: str  # "node" or "GPU"
    price_per_hour: float
    remaining_seconds: int | None

    @property
    def usd(self) -> float | None:
        if self.remaining_seconds is None:
            return None
        return self.count * self.price_per_hour * self.remaining_seconds / 3600

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, "workload": self.workload, "count": self.count, "unit": self.unit,
                "pricePerHour": round(self.price_per_hour, 2), "remainingSeconds": self.remaining_seconds,
                "usd": None if self.usd is None else round(self.usd, 2)}


@dataclass(frozen=True)
class Committed:
    items: tuple[Commitment, ...]

    @property
    def unbounded(self) -> tuple[str, ...]:
        return tuple(c.job for c in self.items if c.remaining_seconds is None)

    @property
    def usd(self) -> float | None:
        """The most they may still cost; None when one has no bound."""
        if self.unbounded:
            return None
        return sum(c.usd or 0.0 for c in self.items)

    def phrase(self) -> str:
        n = len(self.items)
        return f"committed by {n} unfinished job{'' if n == 1 else 's'}: " + (
            usd(self.usd) if self.usd is not None else "unlimited")

    def to_dict(self) -> dict[str, Any]:
        return {"jobs": len(self.items), "usd": None if self.usd is None else round(self.usd, 2),
                "unbounded": list(self.unbounded), "items": [c.to_dict() for c in self.items]}


def unfinished(workload: dict[str, Any]) -> bool:
    return state.condition(workload, "Finished") is None and (workload.get("spec") or {}).get("active") is not False


def _label_seconds(job: dict[str, Any] | None) -> int | None:
    label = ((job or {}).get("metadata", {}).get("labels") or {}).get(state.DEADLINE_LABEL)
    return int(label) if label and label.isdigit() else None


def remaining_seconds(workload: dict[str, Any], job: dict[str, Any] | None, now: datetime) -> int | None:
    """What is left of the Workload's bound (Kueue's reconcileMaxExecutionTime), never below 0; None: no bound."""
    bound = (workload.get("spec") or {}).get("maximumExecutionTimeSeconds")
    if bound is None:
        bound = _label_seconds(job)  # before Kueue has copied it (or a Workload made without it)
    if bound is None:
        return None
    used = int((workload.get("status") or {}).get("accumulatedPastExecutionTimeSeconds") or 0)
    admitted = state.condition(workload, "Admitted")
    if admitted and (since := state.parse_time(admitted.get("lastTransitionTime"))) is not None:
        used += int((now - since).total_seconds())
    return max(0, int(bound) - used)


def workload_gpus(workload: dict[str, Any]) -> int:
    """GPUs a Workload asks for: each pod set's count x its pod's containers' nvidia.com/gpu (requests, else
    limits: an extended resource's request defaults to its limit)."""
    total = 0
    for pod_set in (workload.get("spec") or {}).get("podSets") or []:
        pod = (pod_set.get("template") or {}).get("spec") or {}
        per_pod = 0
        for container in pod.get("containers") or []:
            resources = container.get("resources") or {}
            per_pod += int((resources.get("requests") or {}).get(GPU) or (resources.get("limits") or {}).get(GPU) or 0)
        total += int(pod_set.get("count") or 0) * per_pod
    return total


def of(workloads: Sequence[dict[str, Any]], jobs: Sequence[dict[str, Any]],
       node_price: Callable[[str | None], float | None], gpu_price: float, now: datetime) -> Committed:
    """The unfinished Workloads of a namespace against their jobs (`jobs`: the namespace's, ops.jobs);
    `node_price(pool)`: a node of the pool, None when unknown; `gpu_price`: the dearest GPU-hour."""
    by_uid = {j["metadata"].get("uid"): j for j in jobs}
    items = []
    for wl in sorted(workloads, key=lambda w: (w["metadata"].get("creationTimestamp") or "", w["metadata"]["name"])):
        if not unfinished(wl):
            continue
        owner = next((by_uid[r.get("uid")] for r in wl["metadata"].get("ownerReferences") or []
                      if r.get("uid") in by_uid), None)
        left = remaining_seconds(wl, owner, now)
        name = wl["metadata"]["name"]
        price = node_price((owner["metadata"].get("labels") or {}).get(state.POOL_LABEL)) if owner else None
        if owner is not None and price is not None:
            items.append(Commitment(owner["metadata"]["name"], name, state.nodes(owner), "node", price, left))
        elif gpus := workload_gpus(wl):
            job = owner["metadata"]["name"] if owner else name
            items.append(Commitment(job, name, gpus, "GPU", gpu_price, left))
    return Committed(tuple(items))
