"""The fabric test once per network domain of a pool's running nodes, and where each test ran (pure).

EKS labels a node of the types it knows with its EC2 network node at each layer
(components.core.hardware.topology). The stack cannot know the domains before
nodes exist, so `fabric-test` groups the pool's Ready nodes by one layer's label
(by default the closest, the pool's last) and plans one 2-node all_reduce test in
each domain that has 2 nodes, pinned there, and one pair across two domains, so
nccl-report can compare within against across.

A test records what it was planned on (its domains, how many Ready nodes each had,
the domains left untested) in an annotation: its workers, which name the nodes it
ran on, are gone once it ends (the MPI Operator's cleanPodPolicy Running deletes
running workers when the launcher finishes: mpi-operator v0.8.2
pkg/controller/mpi_job_controller.go deleteWorkerPods).
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from components.core.hardware import topology as hw
from components.core.kube import launcher, workers
from components.core.kube.nodepool import POOL_LABEL
from components.core.placement.topology import Placement, pool_layers

# On every MPIJob fabric-test creates: the layer it compares (0: the pool has no topology). nccl-report finds a
# pool's tests by it, and fabric-test removes the previous run's by it.
LAYER_LABEL = "gpucluster.io/fabric-test-layer"
RECORD_ANNOTATION = "gpucluster.io/fabric-test"
ACROSS = "across"  # the test's name suffix for the pair across two domains
ANYWHERE = "any"  # ... for the single test of a pool without a topology
SUFFIX_CHARS = 8  # of a network node id (nn- and 17 hex digits): its last 8 tell the pool's domains apart
KUEUE_PODSET_PREFIX = "kueue.x-k8s.io/podset-"
GPU = "nvidia.com/gpu"
TEST_NODES = launcher.FABRIC_TEST_NODES


@dataclass(frozen=True)
class Domain:
    id: str
    nodes: tuple[str, ...]  # the pool's Ready nodes in it, by name


@dataclass(frozen=True)
class DomainTest:
    name: str
    domains: tuple[str, ...]  # 1: within that domain; 2: the pair across them; 0: anywhere in the pool
    hosts: tuple[str, ...] = ()  # the pair's nodes (their kubernetes.io/hostname), one in each domain


@dataclass(frozen=True)
class Plan:
    pool: str
    layer: int  # 0: the pool has no topology
    domains: tuple[Domain, ...]  # by id
    unlabeled: tuple[str, ...]  # Ready nodes without the layer's label (EKS labels them as they join)
    tests: tuple[DomainTest, ...]
    note: str
    busy: tuple[str, ...] = ()  # Ready nodes a job's GPU pods hold: left out

    @property
    def label(self) -> str | None:
        return hw.layer_label(self.layer) if self.layer else None

    @property
    def untested(self) -> tuple[Domain, ...]:
        return tuple(d for d in self.domains if len(d.nodes) < TEST_NODES)


def ready(node: dict[str, Any]) -> bool:
    """Ready, and not cordoned: a test's pod can land on it."""
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def busy_nodes(pods: list[dict[str, Any]], ignore: set[str] | frozenset[str] = frozenset()) -> set[str]:
    """The nodes where an unfinished pod asks for GPUs (not a DaemonSet's, nor one of the jobs `ignore` names: the
    previous run's tests, removed before this run's start). A test pinned to such a node's domain would wait for
    the job there, and the autoscaler cannot help it (it adds nodes to a pool, not to a domain): its
    ProvisioningRequest would retry until the domain's nodes free up, and they may idle out first."""
    out = set()
    for pod in pods:
        spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") or not spec.get("nodeName") or any(
                ref.get("kind") == "DaemonSet" for ref in meta.get("ownerReferences") or []) or \
                (meta.get("labels") or {}).get(workers.JOB_LABEL) in ignore:
            continue
        containers = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
        if any({**((c.get("resources") or {}).get("limits") or {}),
                **((c.get("resources") or {}).get("requests") or {})}.get(GPU, "0") not in ("0", 0)
               for c in containers):
            out.add(spec["nodeName"])
    return out


def hostname(node: dict[str, Any]) -> str:
    return (node["metadata"].get("labels") or {}).get(hw.HOSTNAME_LABEL) or node["metadata"]["name"]


def no_topology_reason(pool: Any) -> str:
    if pool.topology != "auto":
        return "its `topology` is off"
    return f"EKS labels no network layers on {pool.instance_type}"


def suffixes(domain_ids: list[str]) -> dict[str, str]:
    """Each domain's test name suffix: the id's last 8 characters as a DNS label; a hash of the id where two
    would be the same, or where one would be empty or a reserved suffix."""
    clean = {d: re.sub(r"[^a-z0-9-]", "-", d.lower())[-SUFFIX_CHARS:].strip("-") for d in domain_ids}
    counts: dict[str, int] = {}
    for value in clean.values():
        counts[value] = counts.get(value, 0) + 1
    return {d: s if s and counts[s] == 1 and s not in (ACROSS, ANYWHERE)
            else hashlib.sha256(d.encode()).hexdigest()[:SUFFIX_CHARS] for d, s in clean.items()}


def job_name(pool: Any, suffix: str) -> str:
    """nccl-tests-<pool>-<suffix>: at most 52 characters (pool names have at most 32), within the 54 that keep the
    launcher's batch Job <name>-launcher (its pods' job-name label) and a worker's hostname <name>-worker-N at
    most 63."""
    return f"{launcher.nccl_test_name(pool)}-{suffix}"


def plan(pool: Any, nodes: list[dict[str, Any]], layer: int | None = None, busy: set[str] | None = None) -> Plan:
    """The tests for the pool's nodes (as the API lists them) at `layer` (default: the pool's closest), on those
    no job's GPU pods hold (`busy`, busy_nodes())."""
    held = tuple(sorted(n["metadata"]["name"] for n in nodes if ready(n) and n["metadata"]["name"] in (busy or ())))
    names = sorted(n["metadata"]["name"] for n in nodes if ready(n) and n["metadata"]["name"] not in held)
    layers = pool_layers(pool)
    if not layers:
        return Plan(pool.name, 0, (), (), (DomainTest(job_name(pool, ANYWHERE), ()),),
                    f"no network topology ({no_topology_reason(pool)}): one test over {TEST_NODES} nodes anywhere "
                    "in the pool", held)
    layer = layer or layers
    label = hw.layer_label(layer)
    by_name = {n["metadata"]["name"]: n for n in nodes}
    grouped: dict[str, list[str]] = {}
    unlabeled = []
    for name in names:
        domain = (by_name[name]["metadata"].get("labels") or {}).get(label)
        if domain:
            grouped.setdefault(domain, []).append(name)
        else:
            unlabeled.append(name)
    domains = tuple(Domain(d, tuple(grouped[d])) for d in sorted(grouped))
    suffix = suffixes([d.id for d in domains])
    tests = [DomainTest(job_name(pool, suffix[d.id]), (d.id,)) for d in domains if len(d.nodes) >= TEST_NODES]
    if len(domains) >= 2:
        # The two largest domains (then by id), each's first node by name: a deterministic pair.
        first, second = sorted(domains, key=lambda d: (-len(d.nodes), d.id))[:2]
        pair = sorted((first, second), key=lambda d: d.id)
        tests.append(DomainTest(job_name(pool, ACROSS), tuple(d.id for d in pair),
                          tuple(hostname(by_name[d.nodes[0]]) for d in pair)))
    return Plan(pool.name, layer, domains, tuple(unlabeled), tuple(tests),
                _note(len(names), domains, tests, label, held), held)


def _note(ready_nodes: int, domains: tuple[Domain, ...], tests: list[DomainTest], label: str,
          held: tuple[str, ...] = ()) -> str:
    if not ready_nodes and held:
        return f"every Ready node runs a job ({len(held)}): run this again when some are free"
    if not ready_nodes:
        return ("no Ready nodes: the domains are known once nodes run; start some (a job, or the stack's fabric "
                "test) and run this again")
    if not domains:
        return f"no Ready node has {label} yet (EKS labels a node as it joins): run this again in a minute"
    if len(domains) == 1:
        only = domains[0]
        if len(only.nodes) == 1:
            return f"the only labeled Ready node sits in {only.id}: a test needs {TEST_NODES} nodes"
        return f"all {len(only.nodes)} labeled Ready nodes sit in one domain, {only.id}: one test, nothing to compare"
    tested = sum(1 for t in tests if len(t.domains) == 1)
    return f"{len(domains)} domains: {tested} tested within, and one pair across two"


def record(plan_: Plan, test: DomainTest) -> dict[str, Any]:
    """What nccl-report needs after the test's workers are gone: the layer, the test's domains with their Ready
    node counts at submission, the run's untested domains and unlabeled nodes."""
    by_id = {d.id: d for d in plan_.domains}
    return {"layer": plan_.layer, "domains": {d: len(by_id[d].nodes) for d in test.domains},
            "hosts": list(test.hosts), "untested": {d.id: list(d.nodes) for d in plan_.untested},
            "unlabeled": list(plan_.unlabeled)}


def read_record(job: dict[str, Any]) -> dict[str, Any] | None:
    text = (job["metadata"].get("annotations") or {}).get(RECORD_ANNOTATION)
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def manifest(base: dict[str, Any], plan_: Plan, test: DomainTest) -> dict[str, Any]:
    """launcher.nccl_test_mpijob's fabric test, renamed for `test` and pinned to its domain (a nodeSelector on the
    layer's label, and Kueue's required topology at that layer, so Kueue admits it only where it can run) or, for
    the pair, to its two nodes (required node affinity; whole-node workers land one on each). Kueue's
    topology-aware scheduling honours both when it picks the nodes (v0.19.2 pkg/cache/scheduler/
    tas_flavor_snapshot.go: the pod set's nodeSelector and required node affinity filter the domains)."""
    out = copy.deepcopy(base)
    meta = out["metadata"]
    replicas = out["spec"]["mpiReplicaSpecs"]
    for labels in (meta["labels"], *(r["template"]["metadata"]["labels"] for r in replicas.values())):
        labels[workers.JOB_LABEL] = test.name
    meta["name"] = test.name
    meta["labels"][LAYER_LABEL] = str(plan_.layer)
    meta["annotations"] = {RECORD_ANNOTATION: json.dumps(record(plan_, test), sort_keys=True)}
    worker = replicas["Worker"]["template"]
    annotations = {k: v for k, v in (worker["metadata"].get("annotations") or {}).items()
                   if not k.startswith(KUEUE_PODSET_PREFIX)}
    spec = worker["spec"]
    if len(test.domains) == 1:
        spec["nodeSelector"][hw.layer_label(plan_.layer)] = test.domains[0]
        annotations.update(Placement("required", plan_.layer).annotation)
    elif len(test.domains) == 2:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": hw.HOSTNAME_LABEL, "operator": "In", "values": list(test.hosts)}]}]}}}
        # Two domains by design: no topology request but Kueue's unconstrained one, without which a pod set on a
        # topology flavor of our queues is not admitted (components.core.kube.workers).
        annotations[workers.UNCONSTRAINED_TOPOLOGY] = "true"
    else:
        annotations = dict(worker["metadata"].get("annotations") or {})  # the pool's test as the stack renders it
    worker["metadata"]["annotations"] = annotations
    return out


def domains_ran(pods: list[dict[str, Any]], nodes: dict[str, dict[str, Any]], layer: int) -> tuple[str, ...]:
    """The layer's domains of the nodes the test's workers run on (none once they are gone)."""
    label = hw.layer_label(layer)
    found = {(nodes.get((p.get("spec") or {}).get("nodeName") or "", {}).get("metadata", {}).get("labels")
              or {}).get(label) for p in pods}
    return tuple(sorted(found - {None, ""}))


def selector(pool: str) -> str:
    """A pool's fabric-test MPIJobs."""
    return f"{POOL_LABEL}={pool},{LAYER_LABEL}"
