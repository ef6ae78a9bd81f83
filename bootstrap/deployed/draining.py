"""A fleet's members before their destroy: a worker is drained, a manager's unfinished jobs are counted.

A worker's drain (drain_worker): every ClusterQueue on it gets stopPolicy HoldAndDrain through the API (Kueue
evicts what it admitted; the manager dispatches those jobs to its other workers), and the destroy waits, at most
--drain-timeout seconds (0: no wait), until no Workload there is admitted and no pod of a job is left in its job
namespaces (an evicted job's pods get their grace period, in which they write a checkpoint on SIGTERM). A drain
that fails, times out or is interrupted puts back the stopPolicy each ClusterQueue had, through the API (a
`pulumi up` would not: it does not refresh, so it sees no change to undo), and says what it put back.

A manager's destroy (manager_jobs): its queued jobs exist only on it, and the workers' copies of its admitted ones
go when its namespaces do (MultiKueue deletes them); its unfinished Workloads are listed and the destroy refused
unless --abandon-fleet-jobs.

The functions above the line are pure; those below it read or write through a Kube.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

from bootstrap.cluster.api import ClusterUnreachable, Kube, KubeError
from bootstrap.cluster.kinds import CLUSTER_QUEUE, POD, WORKLOAD
from bootstrap.jobs import fleet, state
from components.core import config
from components.core.config.cluster import stack_name

DRAIN_TIMEOUT_SECONDS = 1800
# Kueue v0.19.2 apis/kueue/v1beta2/clusterqueue_types.go StopPolicy: Hold (admitted workloads run to completion)
# and HoldAndDrain (admitted workloads are evicted); both cancel reservations and admit nothing new. Unset, the API
# server defaults it to None (+kubebuilder:default="None").
NONE, HOLD, HOLD_AND_DRAIN = "None", "Hold", "HoldAndDrain"
# Every pod of a job carries JOB_LABEL (components/core/kube/workers.py); a TrainJob's made before it, its JobSet's.
POD_LABELS = (state.JOB_LABEL, "jobset.sigs.k8s.io/jobset-name")


def held(cluster_queue: dict[str, Any], policy: str) -> dict[str, Any]:
    """The ClusterQueue with spec.stopPolicy set to `policy` (the rest as read, resourceVersion included)."""
    return {**cluster_queue, "spec": {**(cluster_queue.get("spec") or {}), "stopPolicy": policy}}


def admitted(workloads: list[dict[str, Any]]) -> list[str]:
    """`Workload namespace/name` of each still admitted (condition Admitted True): what a drain waits for."""
    return sorted(f"Workload {w['metadata'].get('namespace')}/{w['metadata']['name']}" for w in workloads
                  if state.condition(w, "Admitted"))


def job_pods(pods: list[dict[str, Any]]) -> list[str]:
    """`Pod namespace/name` of each pod of a job not finished (phase neither Succeeded nor Failed), "(terminating)"
    in its grace period, when an evicted job writes its checkpoint on SIGTERM: what a drain waits for too."""
    return sorted(f"Pod {p['metadata'].get('namespace')}/{p['metadata']['name']}"
                  f"{' (terminating)' if p['metadata'].get('deletionTimestamp') else ''}" for p in pods
                  if any(k in (p['metadata'].get('labels') or {}) for k in POD_LABELS)
                  and (p.get('status') or {}).get('phase') not in ('Succeeded', 'Failed'))


def waiting(left: list[str], seconds: float) -> str:
    """"  waiting for 1 admitted workload and 2 job pods to leave: ... (N s left)"."""
    workloads = sum(1 for item in left if item.startswith("Workload "))
    counts = [f"{n} {what}{'' if n == 1 else 's'}" for n, what in ((workloads, "admitted workload"),
                                                                  (len(left) - workloads, "job pod")) if n]
    return (f"  waiting for {' and '.join(counts)} to leave: {', '.join(left[:5])}{' ...' if len(left) > 5 else ''} "
            f"({int(seconds)} s left)")


def lost_with_manager(workloads: list[dict[str, Any]]) -> list[str]:
    """What a manager's destroy loses: each unfinished Workload (no condition Finished True) as "ns/job (Kind):
    where it is"."""
    lines = []
    for w in workloads:
        if state.condition(w, "Finished"):
            continue
        meta = w["metadata"]
        owner = next(iter(meta.get("ownerReferences") or []), {"name": meta["name"], "kind": "Workload"})
        p = fleet.placement(w)
        if p.worker is not None:
            where = f"runs on worker {p.worker}; MultiKueue deletes it there when the manager's namespaces go"
        elif p.nominated:
            where = f"offered to {', '.join(p.nominated)}, admitted by none: it exists only on the manager"
        else:
            where = "queued on the manager, the only place it exists"
        lines.append(f"{meta.get('namespace')}/{owner['name']} ({owner['kind']}): {where}")
    return sorted(lines)


# -- through a Kube ----------------------------------------------------------------------------------------------


def put_stop_policy(kube: Kube, queue: dict[str, Any], policy: str) -> str | None:
    """ClusterQueue `queue` (as read) with spec.stopPolicy `policy`, live: a PUT of what was read (Kube has no
    update), a conflict re-reads; the policy it had before, None when it had `policy` already."""
    name = queue["metadata"]["name"]
    for _ in range(3):
        before = (queue.get("spec") or {}).get("stopPolicy") or NONE
        if before == policy:
            return None
        try:
            kube._call("PUT", CLUSTER_QUEUE.path(None, name), body=held(queue, policy))
            return before
        except KubeError as err:
            if not err.conflict:
                raise
            queue = kube.get(CLUSTER_QUEUE, name) or queue
    raise KubeError(409, "Conflict", f"ClusterQueue {name} changed under each of 3 updates of its stopPolicy")


def set_stop_policy(kube: Kube, policy: str, previous: dict[str, str]) -> list[str]:
    """Every ClusterQueue's stopPolicy set to `policy`; `previous` gets the one each had, as soon as it is changed
    (a failure midway still knows what to put back); the names of those changed."""
    changed = []
    for queue in kube.list(CLUSTER_QUEUE):
        if (before := put_stop_policy(kube, queue, policy)) is not None:
            previous[queue["metadata"]["name"]] = before
            changed.append(queue["metadata"]["name"])
    return changed


def restore(kube: Kube, previous: dict[str, str]) -> list[str]:
    """Each ClusterQueue of `previous` back to its stopPolicy there; "name (policy)" of each (a queue gone since is
    left out)."""
    done = []
    for name, policy in previous.items():
        if (queue := kube.get(CLUSTER_QUEUE, name)) is not None:
            put_stop_policy(kube, queue, policy)
            done.append(f"{name} ({policy})")
    return done


def left_on(kube: Kube, namespaces: tuple[str, ...]) -> list[str]:
    """What a drain waits for: Workloads admitted anywhere, pods of jobs in the job namespaces."""
    return admitted(kube.list(WORKLOAD)) + [p for ns in namespaces for p in job_pods(kube.list(POD, ns))]


def drain(kube: Kube, namespaces: tuple[str, ...], timeout: float, out: Callable[[str], None],
          sleep: Callable[[float], None], clock: Callable[[], float], previous: dict[str, str],
          every: float = 10.0) -> list[str]:
    """Hold every ClusterQueue with HoldAndDrain (`previous`: set_stop_policy's) and wait, at most `timeout`
    seconds (0: not at all), until no Workload is admitted and no pod of a job is left in `namespaces` (an evicted
    one writes its checkpoint in its grace period), a line each `every` seconds; what is left then ([]: drained)."""
    changed = set_stop_policy(kube, HOLD_AND_DRAIN, previous)
    out(f"stopPolicy {HOLD_AND_DRAIN} on ClusterQueue {', '.join(changed) or '(none changed: already held)'}: "
        "admitted jobs are evicted, nothing new is admitted")
    deadline = clock() + timeout
    while True:
        left = left_on(kube, namespaces)
        if not left or clock() >= deadline:
            return left
        out(waiting(left, deadline - clock()))
        sleep(min(every, deadline - clock()))


# -- the destroy's steps -----------------------------------------------------------------------------------------


def job_namespaces(cfg: config.StackConfig) -> tuple[str, ...]:
    """Where a stack's jobs run: its training namespace and its teams'."""
    return tuple(dict.fromkeys((cfg.training_namespace, *(t.namespace for t in cfg.teams))))


def patch_line(context: str, name: str, policy: str) -> str:
    return (f"kubectl --context {context} patch clusterqueue {name} --type merge "
            f"-p '{{\"spec\":{{\"stopPolicy\":\"{policy}\"}}}}'")


def put_back(kube: Kube | None, previous: dict[str, str], stack: str, context: str) -> None:
    """After a drain that did not end: each ClusterQueue's stopPolicy as it was, said on stderr (or how to)."""
    if kube is None or not previous:
        return
    try:
        done = restore(kube, previous)
    except (ClusterUnreachable, KubeError, KeyboardInterrupt) as err:
        print(f"gpucluster: the stopPolicy of {stack}'s ClusterQueues could not be put back ({err or 'interrupted'}): "
              f"they admit nothing until you run:\n" + "\n".join(f"  {patch_line(context, name, policy)}"
                                                                for name, policy in previous.items()),
              file=sys.stderr)
        return
    print(f"gpucluster: put back the stopPolicy {stack}'s ClusterQueues had before the drain: "
          f"{', '.join(done) or '(none left to put back)'}", file=sys.stderr)


def drain_worker(args: argparse.Namespace, cfg: config.StackConfig, out: Callable[[str], None],
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> int:
    """Drain fleet worker `cfg` (the module's docstring): 0 drained; 1 jobs left at the timeout; 2 unreachable,
    refused by its API server or interrupted. Not drained, its ClusterQueues' stopPolicy is put back."""
    from bootstrap.cluster.connect import connect_stack

    manager = stack_name(cfg.fleet.manager or "")
    given = getattr(args, "drain_timeout", None)
    timeout = DRAIN_TIMEOUT_SECONDS if given is None else max(float(given), 0.0)
    out(f"\nDraining {args.stack}, a worker of fleet {manager}, before the destroy (at most {timeout:.0f} s):")
    kube, previous, context = None, {}, getattr(args, "context", None)
    try:
        kube = connect_stack(args.stack, getattr(args, "kubeconfig", None), context)
        left = drain(kube, job_namespaces(cfg), timeout, out, sleep, clock, previous)
    except (ClusterUnreachable, KubeError) as err:
        code, why = 2, (f"cannot drain worker {args.stack}: {err}. If it is gone for good, the manager requeues its "
                        "jobs after fleet.workerLostMinutes; add --skip-drain to destroy it without draining")
    except KeyboardInterrupt:
        code, why = 2, f"the drain of {args.stack} was interrupted"
    else:
        if not left:
            out(f"drained: no workload is admitted and no job pod is left on {args.stack}; the manager {manager} "
                "re-dispatches its jobs to the other workers")
            return 0
        code, why = 1, (f"still on {args.stack} after {timeout:.0f} s: {', '.join(left)}; give them longer "
                        "(--drain-timeout) or add --skip-drain")
    print(f"gpucluster: {why}; nothing was destroyed", file=sys.stderr)
    put_back(kube, previous, args.stack, context or args.stack)
    return code


def manager_jobs(args: argparse.Namespace, cfg: config.StackConfig, out: Callable[[str], None]) -> int:
    """Before a fleet manager's destroy (the module's docstring): 0 nothing unfinished, or --abandon-fleet-jobs
    (what is lost said); 1 refused, what would be lost and how to keep it on stderr; 2 the jobs cannot be listed."""
    from bootstrap.cluster.connect import connect_stack

    stack, abandon = args.stack, getattr(args, "abandon_fleet_jobs", False)
    kubeconfig, context = getattr(args, "kubeconfig", None), getattr(args, "context", None)
    try:
        kube = connect_stack(stack, kubeconfig, context)
        fleet.ensure_manager(kube, stack, lambda: fleet.reached(kube, stack, kubeconfig, context, False))
        lost = lost_with_manager(kube.list(WORKLOAD))
    except (ClusterUnreachable, KubeError, fleet.FleetError) as err:
        if abandon:
            out(f"\nWARNING: --abandon-fleet-jobs: the jobs of fleet {stack} could not be listed ({err}); whatever "
                "its manager queues or runs is lost")
            return 0
        print(f"gpucluster: cannot list the jobs of fleet {stack} on its manager: {err}; add --abandon-fleet-jobs to "
              "destroy it without knowing what is lost; nothing was destroyed", file=sys.stderr)
        return 2
    if not lost:
        return 0
    listed = "\n".join(f"  {line}" for line in lost)
    n = f"{len(lost)} unfinished job{'' if len(lost) == 1 else 's'}"
    if abandon:
        out(f"\nWARNING: --abandon-fleet-jobs: {n} of fleet {stack} are lost with its manager:\n{listed}")
        return 0
    print(f"gpucluster: fleet manager {stack} still has {n}, lost with it:\n{listed}\n"
          f"To keep them: cancel them (`python -m bootstrap cancel JOB --stack {stack}`) or wait until they finish "
          f"(`python -m bootstrap status --stack {stack}`); or pause the manager (`python -m bootstrap pause --stack "
          f"{stack}`: nothing more is dispatched) and let the workers finish what they run. Or add "
          "--abandon-fleet-jobs to destroy it anyway. Nothing was destroyed.", file=sys.stderr)
    return 1
