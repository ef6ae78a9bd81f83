"""m. Placement and atomic admission on prod (issue 30), through the real Kueue v0.19.2.

prod's h100 pool: 16 p5.48xlarge KWOK nodes labelled as EKS labels them, topology.k8s.aws/network-node-layer-1..3
(local/nodes.py): one layer-1 node, 2 spines (layer 2) of 2 blocks (layer 3) of 4 nodes. The pool's flavor names
the Topology gpucluster-network-3 and every ClusterQueue runs the ProvisioningRequest check gpucluster-atomic-scale-up
on it (components/core/placement/). cluster-autoscaler cannot be built here (the Go module proxy refuses
k8s.io/autoscaler/cluster-autoscaler), so a stand-in in the local control plane answers the ProvisioningRequests with
cluster-autoscaler 1.35's rules for best-effort-atomic-scale-up (local/autoscaler/provisioner.py, local/autoscaler/rules.py): the
real Kueue creates each request, waits on it, retries it and places the job by topology in its second pass.

Jobs are rendered as `bootstrap submit --file` renders them (placement as the job file says) and applied by the
harness. Fillers, plain batch Jobs of one whole node pinned to a node by hostname, take exactly the nodes a scenario
needs busy. KWOK plays the nodes; no training process runs.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from bootstrap import stackfile
from bootstrap.deployed import pausing
from bootstrap.jobs import render
from components.core import versions
from components.core.hardware import topology as hw
from components.core.kube import nodepool, queueing, workers
from local.autoscaler import provisioner

from .conftest import Local, dumps, jsonpath
from .teams_support import WORKLOADS, clear, finish, job_file, job_pods, submit

pytestmark = pytest.mark.stack("prod")

POOL = "h100"
NAMESPACE = "training"
BLOCK = hw.layer_label(3)
SPINE = hw.layer_label(2)
PR = "provisioningrequests.autoscaling.x-k8s.io"


# --- the pool's nodes and where pods run ------------------------------------------------------------------------


def pool_nodes(local: Local) -> list[dict]:
    return local.get("nodes", selector=f"{nodepool.POOL_LABEL}={POOL}")["items"]


def blocks(local: Local) -> dict[str, list[str]]:
    """Layer-3 domain -> its nodes' names, in name order."""
    out: dict[str, list[str]] = {}
    for node in sorted(pool_nodes(local), key=lambda n: n["metadata"]["name"]):
        out.setdefault(node["metadata"]["labels"][BLOCK], []).append(node["metadata"]["name"])
    return out


def labels_of(local: Local) -> dict[str, dict[str, str]]:
    return {n["metadata"]["name"]: n["metadata"]["labels"] for n in pool_nodes(local)}


def running_pods(local: Local, job: str) -> list[dict]:
    return [p for p in job_pods(local, NAMESPACE)
            if p["metadata"]["labels"].get("jobset.sigs.k8s.io/jobset-name") == job
            and p["status"].get("phase") == "Running" and p["spec"].get("nodeName")]


def workload_of(local: Local, job: str) -> dict | None:
    for wl in local.get(WORKLOADS, namespace=NAMESPACE)["items"]:
        if any(o.get("name") == job for o in wl["metadata"].get("ownerReferences", [])):
            return wl
    return None


def quota_reserved(wl: dict | None) -> bool:
    return any(c["type"] == "QuotaReserved" and c["status"] == "True"
               for c in jsonpath(wl or {}, "status", "conditions", default=[]))


def admitted(wl: dict | None) -> bool:
    return wl is not None and any(c["type"] == "Admitted" and c["status"] == "True"
                                  for c in jsonpath(wl, "status", "conditions", default=[]))


# --- jobs -------------------------------------------------------------------------------------------------------


def entry(name: str, nodes: int, placement: dict | None = None) -> dict:
    """A job file's entry as a user writes it for `bootstrap submit --file`: a torchrun job on h100."""
    return {"name": name, "pool": POOL, "nodes": nodes, "launcher": "torchrun", "image": versions.DLC_PYTORCH_IMAGE,
            "command": ["python", "-c", "print(1)"], **({"placement": placement} if placement else {})}


def submit_jobs(local: Local, *entries: dict) -> None:
    cfg, _, _ = stackfile.load_stack("prod", standins=True, overrides={"gpucluster:jobs": list(entries)})
    submit(local, [render.build(cfg, i, from_file=True) for i in range(len(entries))], "placement jobs")


def filler(local: Local, node: str) -> dict:
    """A queued batch Job of one whole h100 node, pinned to `node`: Kueue's topology assignment honours the pod's
    nodeSelector (tas_flavor_snapshot.go), so it takes exactly that node."""
    cfg, _, _ = stackfile.load_stack("prod", standins=True)
    pool = cfg.pool(POOL)
    name = f"fill-{node.split('.')[0][-8:]}"
    container = workers.worker_container("worker", versions.DLC_PYTORCH_IMAGE, pool, pool.instance.gpu_count, None)
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NAMESPACE,
                         "labels": queueing.workload_labels(queueing.TRAINING_PRIORITY, None)},
            "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": {
                "metadata": {"annotations": {"kueue.x-k8s.io/podset-unconstrained-topology": "true"}},
                "spec": {"restartPolicy": "Never",
                         "nodeSelector": {nodepool.POOL_LABEL: POOL, "kubernetes.io/hostname": node},
                         "tolerations": [t.toleration() for t in nodepool.node_taints(pool)],
                         "containers": [{"name": "worker", "image": container["image"], "command": ["sleep", "1d"],
                                         "resources": container["resources"]}]}}}}


def occupy(local: Local, nodes: list[str]) -> list[str]:
    """One filler on each of `nodes`, running."""
    jobs = [filler(local, n) for n in nodes]
    local.apply(jobs, "fillers")
    local.wait(lambda: {p["spec"].get("nodeName") for p in job_pods(local, NAMESPACE)
                        if p["metadata"]["name"].startswith("fill-") and p["status"].get("phase") == "Running"}
               >= set(nodes), f"fillers running on {nodes}", timeout=180)
    return [j["metadata"]["name"] for j in jobs]


def layout(local: Local, pods: list[dict]) -> tuple[Counter, set[str]]:
    """How many of the pods run in each block, and the spines they use."""
    labels = labels_of(local)
    nodes = [p["spec"]["nodeName"] for p in pods]
    return Counter(labels[n][BLOCK] for n in nodes), {labels[n][SPINE] for n in nodes}


@pytest.fixture
def cleared(cluster) -> Local:
    """prod with no job and no filler left (its h100 nodes as the last test left them)."""
    local = cluster("prod")
    clear(local)
    local.kubectl("delete", "jobs.batch", "-l", f"{queueing.QUEUE_LABEL}={queueing.LOCAL_QUEUE}", "-n", NAMESPACE,
                  "--ignore-not-found", "--wait=true")
    return local


@pytest.fixture
def idle(cleared) -> Local:
    local = cleared
    found = blocks(local)
    assert sorted(len(v) for v in found.values()) == [4, 4, 4, 4], f"prod's h100 pool as 4 blocks of 4: {found}"
    return local


# --- topology ---------------------------------------------------------------------------------------------------


def test_a_required_job_lands_in_the_one_block_that_has_room(idle):
    local = idle
    domains = blocks(local)
    busy = [nodes[0] for nodes in list(domains.values())[:3]]
    free_block = list(domains)[3]
    occupy(local, busy)
    submit_jobs(local, entry("tight", 4, {"policy": "required"}))
    pods = local.wait(lambda: len(running_pods(local, "tight")) == 4 and running_pods(local, "tight"),
                      "the required 4-node job running", timeout=240)
    per_block, _ = layout(local, pods)
    print(f"required 4-node job with one node busy in blocks {list(domains)[:3]}: {dict(per_block)}")
    assert per_block == Counter({free_block: 4}), dumps(workload_of(local, "tight"))
    wl = workload_of(local, "tight")
    assignment = jsonpath(wl, "status", "admission", "podSetAssignments", 0, "topologyAssignment")
    assert assignment is not None, dumps(wl)


def test_a_required_job_waits_while_no_block_has_room_then_starts_in_the_first_that_does(idle, tmp_path):
    local = idle
    domains = blocks(local)
    fillers = occupy(local, [nodes[0] for nodes in domains.values()])
    submit_jobs(local, entry("tight", 4, {"policy": "required"}))

    def waiting():
        wl = workload_of(local, "tight")
        return wl is not None and not admitted(wl) and not running_pods(local, "tight") and wl
    first = local.wait(waiting, "the required job's Workload, not admitted")
    # Kueue keeps trying (second pass after the request is provisioned): it stays unplaced for a while.
    time.sleep(30)
    wl = workload_of(local, "tight")
    assert not admitted(wl) and not running_pods(local, "tight"), dumps(wl)
    events = local.get("events", namespace=NAMESPACE)["items"]
    said = [e["message"] for e in events if e["involvedObject"].get("name") == first["metadata"]["name"]]
    print("Kueue on the waiting job:", *said[-5:], sep="\n  ")
    doctor = local.cli("doctor", "--stack", "prod", "tight", "--namespace", NAMESPACE, timeout=180)
    print(doctor.stdout)
    assert "[network-domain]" in doctor.stdout, doctor.stdout + doctor.stderr
    # The filler in the last block ends: that block has 4 free nodes, and the job starts there, whole.
    last = list(domains)[3]
    ending = [p for p in job_pods(local, NAMESPACE) if p["spec"].get("nodeName") == domains[last][0]]
    finish(local, NAMESPACE, ending)
    pods = local.wait(lambda: len(running_pods(local, "tight")) == 4 and running_pods(local, "tight"),
                      "the required job running once a block has room", timeout=240)
    per_block, _ = layout(local, pods)
    assert per_block == Counter({last: 4})
    assert fillers


def test_a_preferred_job_spreads_only_when_it_must(idle):
    local = idle
    domains = blocks(local)
    # One block free: the whole job goes there.
    occupy(local, [nodes[0] for nodes in list(domains.values())[:3]])
    submit_jobs(local, entry("near", 4, {"policy": "preferred"}))
    pods = local.wait(lambda: len(running_pods(local, "near")) == 4 and running_pods(local, "near"),
                      "the preferred job running", timeout=240)
    per_block, spines = layout(local, pods)
    print(f"preferred 4-node job, one block free: {dict(per_block)}")
    assert per_block == Counter({list(domains)[3]: 4})
    clear(local)
    local.kubectl("delete", "jobs.batch", "-l", f"{queueing.QUEUE_LABEL}={queueing.LOCAL_QUEUE}", "-n", NAMESPACE,
                  "--ignore-not-found", "--wait=true")
    # No block free (3 free nodes in each): it spreads over two blocks of one spine, 3 + 1, not further.
    occupy(local, [nodes[0] for nodes in domains.values()])
    submit_jobs(local, entry("spread", 4))  # the default: preferred at the closest layer
    pods = local.wait(lambda: len(running_pods(local, "spread")) == 4 and running_pods(local, "spread"),
                      "the default-placement job running", timeout=240)
    per_block, spines = layout(local, pods)
    print(f"preferred 4-node job, 3 free nodes in each block: {dict(per_block)} over spines {sorted(spines)}")
    assert sorted(per_block.values()) == [1, 3] and len(spines) == 1


def test_a_submitted_job_file_with_placement_is_checked_like_the_stack(idle, tmp_path):
    local = idle
    bad = entry("wide", 4, {"policy": "required", "layer": 4})
    out = local.cli("submit", "--stack", "prod", "--file", job_file(tmp_path, bad))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "placement.layer: got 4; p5.48xlarge nodes have 3 network layers (1 to 3)" in out.stderr + out.stdout



# --- atomic admission (last: it takes the pool's nodes away) ------------------------------------------------------


def provisioning_requests(local: Local) -> list[dict]:
    return local.get(PR, namespace=NAMESPACE)["items"]


def condition_of(obj: dict, kind: str) -> dict | None:
    return next((c for c in jsonpath(obj, "status", "conditions", default=[]) if c["type"] == kind), None)


def test_with_capacity_for_3_of_4_nodes_none_is_started_and_with_4_the_job_starts_whole(idle):
    """The stand-in's node group may hold 3 nodes (as the kwok provider's max size limits cluster-autoscaler's): a
    4-node job gets no node and is not admitted; with room for 4 it gets all 4 at once and runs whole."""
    local = idle
    # CA's own retry of a request it could not satisfy (1 min doubling to 10) and the idle time, shortened.
    local.apply([provisioner.settings_configmap(retryInitialSeconds=5, retryMaxSeconds=10, idleSeconds=30),
                 provisioner.capacity_configmap({POOL: 3})], "the stand-in's capacity: 3 h100 nodes")
    try:
        local.kubectl("delete", "node", "-l", f"{nodepool.POOL_LABEL}={POOL}", "--wait=true")
        local.wait(lambda: not pool_nodes(local), "the h100 pool at zero nodes")
        submit_jobs(local, entry("whole", 4))

        def refused():
            requests = provisioning_requests(local)
            found = requests and condition_of(requests[-1], "Provisioned")
            return found and found["status"] == "False" and requests[-1]
        request = local.wait(refused, "the job's ProvisioningRequest refused for capacity", timeout=120)
        time.sleep(20)  # the autoscaler tries again (every 5-10 s here): still all or nothing
        wl = workload_of(local, "whole")
        check = jsonpath(wl, "status", "admissionChecks", 0, default={})
        print(f"capacity 3 of 4: {request['metadata']['name']} Provisioned={condition_of(request, 'Provisioned')}; "
              f"Workload check {check.get('name')} {check.get('state')}: {check.get('message')}")
        assert condition_of(request, "Provisioned")["reason"] == "CapacityIsNotFound", dumps(request)
        assert not pool_nodes(local), "no node of the job is started while it cannot have all 4"
        assert not admitted(wl) and not running_pods(local, "whole"), dumps(wl)
        assert check.get("name") == "gpucluster-atomic-scale-up" and check.get("state") == "Pending", dumps(wl)
        doctor = local.cli("doctor", "--stack", "prod", "whole", "--namespace", NAMESPACE, timeout=180)
        print(doctor.stdout)
        assert "[waiting-for-all-nodes]" in doctor.stdout, doctor.stdout + doctor.stderr

        local.apply([provisioner.capacity_configmap({POOL: 16})], "the stand-in's capacity restored")
        pods = local.wait(lambda: len(running_pods(local, "whole")) == 4 and running_pods(local, "whole"),
                          "the job running whole once 4 nodes can be had", timeout=240)
        nodes = {p["spec"]["nodeName"] for p in pods}
        per_block, _ = layout(local, pods)
        print(f"capacity restored: {len(pool_nodes(local))} h100 nodes started, the job on {dict(per_block)}")
        assert len(nodes) == 4 and {n["metadata"]["name"] for n in pool_nodes(local)} == nodes
        assert admitted(workload_of(local, "whole"))
    finally:
        local.kubectl("delete", "configmap", "-n", "kube-system", provisioner.CAPACITY_CONFIGMAP,
                      provisioner.SETTINGS_CONFIGMAP, "--ignore-not-found")


def test_pause_cancels_a_waiting_jobs_scale_up_and_resume_starts_it_whole(cleared):
    """A job waits on its scale-up (room for 3 of its 4 nodes) when the stack is paused: the stopped queue takes its
    quota back but Kueue leaves its ProvisioningRequest, which pause deletes after its `pulumi up`; no node is raised
    for it, even once there is room; resume gives the quota back, Kueue asks again and the job starts whole."""
    local = cleared
    local.apply([provisioner.settings_configmap(retryInitialSeconds=5, retryMaxSeconds=10, idleSeconds=30),
                 provisioner.capacity_configmap({POOL: 3})], "the stand-in's capacity: 3 h100 nodes")
    paused, _, _ = stackfile.load_stack("prod", standins=True, overrides={pausing.PAUSED: True})
    queues = [q["metadata"]["name"] for q in local.get("clusterqueues.kueue.x-k8s.io")["items"]]

    def stop_policy(policy: str) -> None:  # what `pulumi up` changes on each ClusterQueue for pause and resume
        for queue in queues:
            local.kubectl("patch", "clusterqueue", queue, "--type", "merge", "-p",
                          json.dumps({"spec": {"stopPolicy": policy}}))

    try:
        local.kubectl("delete", "node", "-l", f"{nodepool.POOL_LABEL}={POOL}", "--wait=true")
        local.wait(lambda: not pool_nodes(local), "the h100 pool at zero nodes")
        submit_jobs(local, entry("paused", 4))
        local.wait(lambda: (found := provisioning_requests(local)) and condition_of(found[-1], "Provisioned")
                   and condition_of(found[-1], "Provisioned")["status"] == "False", "the job's request refused")

        stop_policy(paused.stop_policy)
        local.wait(lambda: not quota_reserved(workload_of(local, "paused")), "the stopped queue to take the quota back")
        assert provisioning_requests(local), "Kueue v0.19.2 leaves the request of a job whose quota it took back"
        lines: list[str] = []
        assert pausing.release_scale_ups(paused, str(local.kubeconfig), lines.append) == 0
        print("\n".join(lines))
        assert lines[0].startswith("cancelled the scale-up for queued job training/paused (ProvisioningRequest ")
        assert provisioning_requests(local) == []

        local.apply([provisioner.capacity_configmap({POOL: 16})], "the stand-in's capacity restored, while paused")
        time.sleep(15)  # the stand-in scans every second: a request left behind would have its nodes by now
        assert not pool_nodes(local) and provisioning_requests(local) == [], "no node raised while paused"

        stop_policy("None")
        pods = local.wait(lambda: len(running_pods(local, "paused")) == 4 and running_pods(local, "paused"),
                          "the job running whole on resume", timeout=240)
        print(f"resumed: a new request, {len(pool_nodes(local))} h100 nodes, the job on "
              f"{dict(layout(local, pods)[0])}")
        assert {p["spec"]["nodeName"] for p in pods} == {n["metadata"]["name"] for n in pool_nodes(local)}
    finally:
        stop_policy("None")
        local.kubectl("delete", "configmap", "-n", "kube-system", provisioner.CAPACITY_CONFIGMAP,
                      provisioner.SETTINGS_CONFIGMAP, "--ignore-not-found")
