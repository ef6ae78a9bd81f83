"""Which live jobs the stack's next `pulumi up` would strand or re-provision, read before it runs (pure).

`bootstrap preflight` reads the cluster's ResourceFlavors, ClusterQueues and Workloads (and which jobs Pulumi
made) and asks `checks` what the next `pulumi up` does under them. Kueue v0.19.2:

- A ClusterQueue that gains the admission check gpucluster-atomic-scale-up on a flavor applies it to the
  Workloads already holding quota there. A change of its admissionChecksStrategy re-queues every Workload of
  the queue (pkg/controller/core/workload_controller.go L1793). reconcileSyncAdmissionChecks (L1002) adds the
  check, Pending, by the flavors of the Workload's admission (pkg/workload/workload.go AdmissionChecksForWorkload
  L1477-1488; syncAdmissionCheckConditions L1194), admitted or not. The provisioning controller skips only
  Workloads without quota (pkg/controller/admissionchecks/provisioning/controller.go L137). reqIsNeeded (L478)
  has no admitted guard, so it makes a ProvisioningRequest for the running job's GPU pod sets: cluster-autoscaler
  adds that many nodes where maxNodes leaves room. Without room the request fails after 7 days
  (cluster-autoscaler-1.35.2 processors/provreq/processor.go L42, L100-104); Failed turns the check to Retry
  (the provisioning controller, L618), and reconcileCheckBasedEviction (workload_controller.go L969, run for any
  Workload with quota, L833) evicts the job. A Workload with no quota yet gets only the checks on every flavor of
  its queue (AdmissionChecksForWorkload L1490-1501): a queued job meets the check when admitted, as a new one
  does, so it is not listed for it.
- A ResourceFlavor that gains spec.topologyName takes only pod sets that ask for a topology
  (pkg/workload/workload.go IsExplicitlyRequestingTAS L515) while some flavor of the queue has none, as ours
  (the system flavor) always do: "Flavor %q supports only TopologyAwareScheduling"
  (pkg/scheduler/flavorassigner/tas_flavorassigner.go L200). A Workload's pod sets are fixed when Kueue makes it
  from the job (pkg/controller/jobframework/tas.go L60-88): one made before never gets the flavor. Queued, it
  never starts; running, it runs on and is never admitted again after an eviction.
- topologyName cannot change or go once set (apis/kueue/v1beta2/resourceflavor_types.go L51, "topologyName is
  immutable when topologyName is set"): `pulumi up` would fail on the flavor after updating Kueue and the
  autoscaler. Deleting the flavor waits on Kueue's resource-in-use finalizer while a ClusterQueue lists it
  (pkg/controller/core/resourceflavor_controller.go L107-116); a ClusterQueue's own waits while a Workload holds
  quota in it (clusterqueue_controller.go L193-197). So the way out is by hand, the flavor taken out of the
  queues, never one `pulumi up`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bootstrap.account.checks import FAIL, PASS, WARN, Check
from components.core.kube.nodepool import GPU_RESOURCE, POOL_LABEL
from components.core.kube.queueing import CLUSTER_QUEUE, flavor_name
from components.core.placement import provisioning
from components.core.placement.topology import pool_topology
from components.core.teams.queues import cluster_queue_name

NAME = "upgrade: live jobs"
# PodSetTopologyRequest fields that make a pod set ask for a topology (workload.go IsExplicitlyRequestingTAS;
# json names apis/kueue/v1beta2/workload_types.go L173-248): podIndexLabel and the sub-group ones alone do not.
EXPLICIT = ("required", "preferred", "unconstrained", "podSetSliceRequiredTopology", "podSetSliceSize",
            "podsetSliceRequiredTopologyConstraints")


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _name(obj: dict[str, Any]) -> str:
    return str(_d(obj.get("metadata")).get("name"))


def _true(obj: dict[str, Any], ctype: str) -> bool:
    return any(_d(c).get("type") == ctype and _d(c).get("status") == "True"
               for c in _l(_d(obj.get("status")).get("conditions")))


@dataclass(frozen=True)
class Pool:
    index: int
    name: str
    flavor: str
    topology: str | None  # the one the stack wants
    live: str | None  # the live flavor's


def pools(cfg: Any, flavors: Sequence[dict[str, Any]]) -> list[Pool]:
    """The stack's GPU pools whose flavor is live, with the topology each has and wants."""
    live = {_name(f): _d(f.get("spec")).get("topologyName") for f in flavors}
    return [Pool(i, p.name, flavor_name(p), pool_topology(p), live[flavor_name(p)])
            for i, p in enumerate(cfg.gpu_pools) if flavor_name(p) in live]


def _has_check(queue: dict[str, Any], flavor: str) -> bool:
    """Whether the live queue runs the check on the flavor (an empty onFlavors: on all of them)."""
    rules = _l(_d(_d(queue.get("spec")).get("admissionChecksStrategy")).get("admissionChecks"))
    return any(_d(r).get("name") == provisioning.NAME and (not _d(r).get("onFlavors") or flavor in r["onFlavors"])
               for r in rules)


def check_gains(cfg: Any, queues: Sequence[dict[str, Any]]) -> set[tuple[str, str]]:
    """(queue, flavor) pairs where `pulumi up` adds the check: the stack's queues on its atomic pools' flavors."""
    ours = {CLUSTER_QUEUE, *(cluster_queue_name(t) for t in cfg.teams)}
    atomic = {flavor_name(p) for p in provisioning.atomic_pools(cfg.gpu_pools)}
    return {(_name(q), str(_d(f).get("name"))) for q in queues if _name(q) in ours
            for g in _l(_d(q.get("spec")).get("resourceGroups")) for f in _l(_d(g).get("flavors"))
            if _d(f).get("name") in atomic and not _has_check(q, str(_d(f).get("name")))}


def _asks_topology(pod_set: dict[str, Any]) -> bool:
    request = _d(pod_set.get("topologyRequest"))
    return any(request.get(key) not in (None, [], "") for key in EXPLICIT)


def _uses_gpus(pod_set: dict[str, Any]) -> bool:
    spec = _d(_d(pod_set.get("template")).get("spec"))
    return any(GPU_RESOURCE in _d(_d(_d(c).get("resources")).get(part)) for c in
               [*_l(spec.get("containers")), *_l(spec.get("initContainers"))] for part in ("requests", "limits"))


@dataclass(frozen=True)
class Affected:
    namespace: str
    kind: str  # the owning job's kind (Workload when it has none)
    job: str
    state: str  # running (holds quota) | queued | deactivated
    pool: Pool
    pod_set: str
    count: int  # its pods
    queue: str | None
    check: bool  # gains the admission check under it
    topology: bool  # its pool gains a topology its pod set does not ask for
    pulumi: bool  # `pulumi up` made the job (startOnUp: true)


def _owner(wl: dict[str, Any]) -> dict[str, Any]:
    refs = [_d(r) for r in _l(_d(wl.get("metadata")).get("ownerReferences"))]
    return next((r for r in refs if r.get("controller")), refs[0] if refs else {})


def _state(wl: dict[str, Any]) -> str | None:
    if _true(wl, "Finished"):
        return None
    if _d(wl.get("spec")).get("active") is False:
        return "deactivated"
    return "running" if _true(wl, "QuotaReserved") else "queued"


def affected(cfg: Any, flavors: Sequence[dict[str, Any]], queues: Sequence[dict[str, Any]],
             workloads: Iterable[dict[str, Any]], pulumi_jobs: Iterable[str] = ()) -> list[Affected]:
    """The Workloads the next `pulumi up` would affect, one entry per Workload (its first affected pod set);
    `pulumi_jobs`: the uids of the jobs `pulumi up` made."""
    by_flavor = {p.flavor: p for p in pools(cfg, flavors)}
    by_pool = {p.name: p for p in by_flavor.values()}
    gains = check_gains(cfg, queues)
    owned = set(pulumi_jobs)
    out = []
    for wl in workloads:
        state = _state(wl)
        if state is None:
            continue
        pod_sets = {str(_d(ps).get("name")): _d(ps) for ps in _l(_d(wl.get("spec")).get("podSets"))}
        admission = _d(_d(wl.get("status")).get("admission"))
        queue = admission.get("clusterQueue") if state == "running" else None
        if state == "running":
            placed = [(str(_d(a).get("name")), flavor) for a in _l(admission.get("podSetAssignments"))
                      for flavor in sorted(set(_d(_d(a).get("flavors")).values()))]
        else:
            placed = [(n, f"pool-{_d(_d(_d(ps.get('template')).get('spec')).get('nodeSelector')).get(POOL_LABEL)}")
                      for n, ps in pod_sets.items()]
        for pod_set, flavor in placed:
            pool, ps = by_flavor.get(flavor), pod_sets.get(pod_set, {})
            if pool is None:
                continue
            topology = bool(pool.topology and not pool.live and not _asks_topology(ps))
            check = (queue, flavor) in gains and _uses_gpus(ps) and int(ps.get("count", 1) or 0) > 0
            if topology or check:
                owner = _owner(wl)
                out.append(Affected(str(_d(wl.get("metadata")).get("namespace")), str(owner.get("kind", "Workload")),
                                    str(owner.get("name", _name(wl))), state, by_pool[pool.name], pod_set,
                                    int(ps.get("count", 1) or 0), queue, check, topology, owner.get("uid") in owned))
                break
    return out


def _commands(stack: str, a: Affected, cfg: Any) -> tuple[str, str]:
    team = next((t.name for t in cfg.teams if t.namespace == a.namespace), None)
    where = (f" --team {team}" if team else "" if a.namespace == cfg.training_namespace
             else f" --namespace {a.namespace}")
    return (f"`python -m bootstrap cancel {a.job} --stack {stack}{where}`",
            f"`python -m bootstrap submit --stack {stack}{where} {a.job}`, or --file with its job file")


def _verdict(cfg: Any, stack: str, a: Affected) -> Check:
    pool, name = a.pool, f"upgrade: {a.kind} {a.namespace}/{a.job}"
    cancel, submit = _commands(stack, a, cfg)
    tas = (f"{pool.flavor} gets the network topology {pool.topology} and then takes only pod sets that ask for "
           f"one; its pod set {a.pod_set}, made before, asks none")
    # Putting the change off is open only while the live flavor has no topology (none can be taken off later).
    keys = [*(["atomicScaleUp: false"] if a.check else []), *(["topology: off"] if pool.topology else [])]
    later = (f"; or upgrade now and leave pool {pool.name} as it was (gpuPools[{pool.index}] {', '.join(keys)}) "
             "until it ends" if pool.live is None and keys else "")
    if a.pulumi and a.topology:
        if a.state != "running":
            return Check(name, PASS, "`pulumi up` made it (startOnUp: true) and replaces it with workers that ask "
                                     f"for the topology of pool {pool.name}")
        return Check(name, WARN, f"it runs on pool {pool.name} and `pulumi up` made it (startOnUp: true): its "
                                 "workers now ask for the pool's network topology, so `pulumi up` replaces it and "
                                 "it restarts (from its last checkpoint, if it writes them). Let it finish first "
                                 "to keep the run whole")
    if a.state == "deactivated":
        return Check(name, WARN, f"Kueue deactivated it; reactivated after `pulumi up` it would never start: {tas}. "
                                 f"To run it again, cancel it ({cancel}) and submit it after `pulumi up` ({submit})")
    if a.state == "queued":
        return Check(name, FAIL, f"it waits for pool {pool.name} and would never start: {tas}. Cancel it ({cancel}) "
                                 f"and submit it again after `pulumi up` ({submit}){later}")
    effects = []
    if a.check:
        effects.append(f"Kueue adds the admission check {provisioning.NAME} (ClusterQueue {a.queue}) to it though "
                       f"it runs, and asks cluster-autoscaler for its {a.count} nodes again (a ProvisioningRequest): "
                       f"where maxNodes leaves room, {a.count} more start and bill until they idle out; where not, "
                       "the request fails after 7 days and Kueue evicts the job")
    if a.topology:
        effects.append(f"{tas}, so after any eviction (a preemption, a node failure, `pause --mode drain`) Kueue "
                       "never admits it again")
    todo = ("Let it finish before `pulumi up`" if a.pulumi else
            f"Let it finish before `pulumi up`, or cancel it ({cancel}) and submit it again after ({submit})")
    return Check(name, FAIL, f"it runs on pool {pool.name}: " + "; ".join(effects) + ". " + todo + later)


def _removed(p: Pool, queues: Sequence[dict[str, Any]]) -> Check:
    listing = sorted(_name(q) for q in queues for g in _l(_d(q.get("spec")).get("resourceGroups"))
                     for f in _l(_d(g).get("flavors")) if _d(f).get("name") == p.flavor)
    wants = f"wants {p.topology}" if p.topology else "wants none (topology: off, or a type EKS labels no layers on)"
    return Check(f"upgrade: topology of pool {p.name}", FAIL, (
        f"ResourceFlavor {p.flavor} has the topology {p.live} and the stack {wants}: Kueue refuses to change or "
        "remove a flavor's topologyName, so `pulumi up` would fail on it after updating Kueue and the autoscaler. "
        f"Keep it (gpuPools[{p.index}] topology: auto, an instanceType with the same network layers). No `pulumi "
        "up` can change it; by hand, with no job on the pool: let its jobs finish or cancel them (queued ones "
        f"too), take {p.flavor} out of every ClusterQueue listing it ({', '.join(listing) or 'none'}: "
        "spec.resourceGroups[].flavors, and admissionChecksStrategy onFlavors, dropping a rule left with none, "
        f"which would mean every flavor), `kubectl delete resourceflavor {p.flavor}` (Kueue lets it go once no "
        "ClusterQueue lists it), then `pulumi up --refresh` makes it anew and restores the queues"))


def checks(cfg: Any, stack: str, flavors: Sequence[dict[str, Any]], queues: Sequence[dict[str, Any]],
           workloads: Sequence[dict[str, Any]], pulumi_jobs: Iterable[str] = ()) -> list[Check]:
    """preflight's verdicts: a topology `pulumi up` cannot change, each job it would affect; else one pass."""
    live = pools(cfg, flavors)
    out = [_removed(p, queues) for p in live if p.live and p.live != p.topology]
    out += [_verdict(cfg, stack, a) for a in affected(cfg, flavors, queues, workloads, pulumi_jobs)]
    if any(c.status != PASS for c in out):
        return out
    gains = check_gains(cfg, queues)
    changes = [f"the network topology {p.topology} to {p.flavor}" for p in live if p.topology and not p.live]
    changes += [f"the admission check {provisioning.NAME} to {f} in {', '.join(sorted(q for q, g in gains if g == f))}"
                for f in sorted({f for _, f in gains})]
    active = sum(1 for wl in workloads if _state(wl) is not None)
    what = (f"`pulumi up` adds {' and '.join(changes)}, and strands or re-provisions no running or queued job"
            if changes else
            "`pulumi up` adds no admission check or topology to a live pool")
    return [*out, Check(NAME, PASS, f"{what} ({active} unfinished Workloads read)")]
