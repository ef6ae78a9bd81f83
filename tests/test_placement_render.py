"""A job's placement on its GPU workers' pod template, as Kueue's pod-set topology annotation (issue 30): MPIJob,
TrainJob (through its runtime patch), JobSet and the fabric test; never on a launcher, chief or parameter server;
and a job on a pool without a topology renders exactly as before."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from components.core.config.text import stack_yaml
from components.core.kube import launcher, queueing, trainer, validation, workers
from tests import k8s
from tests.conftest import ROOT, prod_started, stack_config

# Kueue v0.19.2 apis/kueue/v1beta2/topology_types.go; EKS's layer labels (EKS User Guide, "Place distributed
# AI/ML workloads with network topology labels").
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
SAFE = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
CRD = {"MPIJob": "kubeflow.org_mpijobs.yaml", "TrainJob": "trainer.kubeflow.org_trainjobs.yaml",
       "JobSet": "jobset.x-k8s.io_jobsets.yaml"}
IMAGE = "210987654321.dkr.ecr.us-east-1.amazonaws.com/train:1.0"
NAMESPACE = "training"
LAUNCHERS = ("mpirun", "torchrun", "ps")


def layer(n: int) -> str:
    return f"topology.k8s.aws/network-node-layer-{n}"


POOLS = [
    {"name": "h100", "instanceType": "p5.48xlarge", "maxNodes": 8, "fabricTest": True},  # 3 layers
    {"name": "b200", "instanceType": "p6-b200.48xlarge", "maxNodes": 4, "fabricTest": True},  # 4 layers
    {"name": "a10", "instanceType": "g5.48xlarge", "maxNodes": 4, "fabricTest": True},  # EKS labels none
    {"name": "off", "instanceType": "p5.48xlarge", "maxNodes": 4, "fabricTest": True, "topology": "off"},
]
CPU_POOLS = [{"name": "ps", "instanceType": "m7i.4xlarge", "maxNodes": 2}]
# variant -> (pool, nodes, placement asked, the workers' Kueue annotation)
VARIANTS = {
    "default": ("h100", 4, None, {PREFERRED: layer(3)}),  # multi-node: preferred at the closest layer
    "required": ("h100", 4, {"policy": "required", "layer": 2}, {REQUIRED: layer(2)}),
    "preferred1": ("h100", 2, {"layer": 1}, {PREFERRED: layer(1)}),
    "single": ("h100", 1, None, {UNCONSTRAINED: "true"}),  # one node asks for no domain
    "none": ("h100", 4, {"policy": "none"}, {UNCONSTRAINED: "true"}),
    "b200": ("b200", 2, None, {PREFERRED: layer(4)}),
    "a10": ("a10", 2, None, {}),  # no topology: no annotation at all
    "off": ("off", 2, {"policy": "none"}, {}),
}


def _job(name: str, launcher_name: str, pool: str, nodes: int, placement: dict | None) -> dict[str, Any]:
    job = {"name": name, "pool": pool, "nodes": nodes, "launcher": launcher_name, "image": IMAGE,
           "command": ["python", "train.py"]}
    if launcher_name == "ps":
        job["psPool"] = "ps"
    if placement is not None:
        job["placement"] = placement
    return job


CFG = stack_config("dev", {
    "gpucluster:gpuPools": POOLS, "gpucluster:cpuPools": CPU_POOLS,
    "gpucluster:jobs": [_job(f"{variant}-{name}", name, *spec[:3]) for variant, spec in VARIANTS.items()
                        for name in LAUNCHERS],
    "gpucluster:systemNodes": {"instanceType": "m7i.2xlarge", "count": 6}})


def render(cfg, job) -> dict[str, Any]:
    return launcher.job_manifest(job, cfg.pool(job.pool), launcher.JobContext(
        NAMESPACE, "fsx", cfg.storage, cfg.prices, cfg.cpu_pools))


def manifest(name: str) -> dict[str, Any]:
    return render(CFG, next(j for j in CFG.jobs if j.name == name))


def runtime_of(cfg, job) -> dict[str, Any]:
    return trainer.runtime(cfg.pool(job.pool), job.max_restarts, "fsx", job.mount_path,
                           job.termination_grace_period_seconds)


def merged_node_metadata(trainjob: dict[str, Any], runtime: dict[str, Any]) -> dict[str, Any]:
    """The node pod template's metadata of the JobSet Trainer builds, and Kueue computes the pod sets from: each
    runtime patch's replicated-job template merged over the runtime's (Trainer v2.2.1 and v2.3.0
    mergeRuntimePatches, a strategic merge patch: maps merge key by key)."""
    (node,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    merged = {k: dict(v) for k, v in node["template"]["spec"]["template"]["metadata"].items()}
    for patch in trainjob["spec"]["runtimePatches"]:
        for rjob in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]:
            if rjob["name"] == node["name"]:
                for key, values in rjob["template"]["spec"]["template"].get("metadata", {}).items():
                    merged.setdefault(key, {}).update(values)
    return merged


def worker_annotations(m: dict[str, Any], cfg=CFG) -> dict[str, str]:
    """The annotations Kueue reads the GPU workers' pod set's topology request from."""
    if m["kind"] == "MPIJob":
        return m["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"]["annotations"]
    if m["kind"] == "JobSet":
        (worker,) = [r for r in m["spec"]["replicatedJobs"] if r["name"] == "worker"]
        return worker["template"]["spec"]["template"]["metadata"]["annotations"]
    job = next(j for j in cfg.jobs if j.name == m["metadata"]["name"])
    return merged_node_metadata(m, runtime_of(cfg, job))["annotations"]


@pytest.mark.parametrize("launcher_name", LAUNCHERS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_the_gpu_workers_carry_the_jobs_placement(variant, launcher_name):
    m = manifest(f"{variant}-{launcher_name}")
    assert worker_annotations(m) == {**SAFE, **VARIANTS[variant][3]}
    k8s.validate_custom(m, CRD[m["kind"]])


@pytest.mark.parametrize("variant", VARIANTS)
def test_launchers_chiefs_and_parameter_servers_never_ask_for_a_topology(variant):
    # Their flavors (system, the CPU pool's) have no topology: a pod set asking for one would get no flavor.
    mpijob = manifest(f"{variant}-mpirun")
    assert "annotations" not in mpijob["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["metadata"]
    jobset = manifest(f"{variant}-ps")
    roles = {r["name"]: r["template"]["spec"]["template"]["metadata"]["annotations"]
             for r in jobset["spec"]["replicatedJobs"]}
    assert (roles["chief"], roles["ps"]) == (SAFE, SAFE)


def test_a_trainjob_asks_through_its_runtime_patch_and_its_runtime_is_untouched():
    m = manifest("required-torchrun")
    (patch,) = m["spec"]["runtimePatches"]
    (node,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert node["name"] == "node"
    assert node["template"]["spec"]["template"]["metadata"]["annotations"] == {REQUIRED: layer(2)}
    # Not on the TrainJob itself: Trainer copies none of its annotations to the JobSet's pods.
    assert m["metadata"]["annotations"] == {"pulumi.com/deletionPropagationPolicy": "background"}
    k8s.validate_custom(m, CRD["TrainJob"])
    # Every job of the pool shares the runtime: it keeps safe-to-evict only, whatever the jobs ask.
    job = next(j for j in CFG.jobs if j.name == "required-torchrun")
    pod = runtime_of(CFG, job)["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod["metadata"] == {"annotations": SAFE}
    # Without a topology the patch carries the labels alone, as before.
    (plain,) = manifest("a10-torchrun")["spec"]["runtimePatches"]
    pod_patch = plain["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert list(pod_patch["metadata"]) == ["labels"]


@pytest.mark.parametrize(("pool", "expected"), [
    ("h100", {PREFERRED: layer(3)}), ("b200", {PREFERRED: layer(4)}), ("a10", {}), ("off", {})])
def test_the_fabric_test_prefers_the_closest_domain_and_never_requires_it(pool, expected):
    m = launcher.nccl_test_mpijob(CFG.pool(pool), NAMESPACE)
    assert worker_annotations(m) == {**SAFE, **expected}
    assert "annotations" not in m["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["metadata"]
    k8s.validate_custom(m, CRD["MPIJob"])


def test_worker_templates_with_an_annotation_are_valid_pods():
    for m in (manifest("required-mpirun"), launcher.nccl_test_mpijob(CFG.pool("b200"), NAMESPACE)):
        template = m["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
        k8s.validate_core({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w", **template["metadata"]},
                           "spec": template["spec"]}, "1.35")


def test_validates_mpijobs_are_admittable_on_a_pool_with_a_topology():
    # `bootstrap validate` queues its stages on the same flavors: their workers must ask for a topology too.
    for stage in validation.STAGES:
        m = validation.mpijob(stage, CFG.pool("h100"), NAMESPACE, "fsx")
        assert worker_annotations(m) == {**SAFE, UNCONSTRAINED: "true"}
        assert worker_annotations(validation.mpijob(stage, CFG.pool("a10"), NAMESPACE, "fsx")) == SAFE


def test_workers_ask_for_a_topology_exactly_where_their_flavor_has_one():
    # Kueue v0.19.2 gives a topology flavor only to pod sets asking for a topology (our queues also hold the
    # system flavor, which has none), and a flavor without one only to pod sets that do not: both ways, a
    # mismatch leaves the job unadmitted for ever.
    flavors = {f["metadata"]["name"]: f["spec"] for f in queueing.resource_flavors(CFG.all_pools)}
    asks = {f"pool-{p.name}": bool(workers.topology_annotations(None, p)) for p in CFG.gpu_pools}
    assert asks == {"pool-h100": True, "pool-b200": True, "pool-a10": False, "pool-off": False}
    assert {name: "topologyName" in flavors[name] for name in asks} == asks
    assert workers.topology_annotations(None, CFG.pool("h100")) == {UNCONSTRAINED: "true"}


# -- what changes for dev and prod, and what does not ----------------------------------------------------------

def _pools_unchecked(stack: str) -> list[dict[str, Any]]:
    """The stack's pools without issue 32's pre-step check, which multi-node jobs of EFA pools start with
    (tests/test_prestep_render.py): what placement alone changes."""
    pools = stack_yaml.parse((ROOT / f"Pulumi.{stack}.yaml").read_text(), "gpucluster").config["gpucluster:gpuPools"]
    return [{**p, "preStepCheck": False} for p in pools]


def _pools_off(stack: str) -> list[dict[str, Any]]:
    """The stack's pools without a topology (and without the pre-step check)."""
    return [{**p, "topology": "off"} for p in _pools_unchecked(stack)]


def rendered(cfg) -> dict[str, dict[str, Any]]:
    """Every job object `pulumi up` or `submit` makes of the stack: jobs, their runtimes, fabric tests."""
    out = {}
    for job in cfg.jobs:
        out[job.name] = render(cfg, job)
        if job.launcher == "torchrun":
            rt = runtime_of(cfg, job)
            out[rt["metadata"]["name"]] = rt
    for pool in cfg.gpu_pools:
        if pool.fabric_test:
            out[launcher.nccl_test_name(pool)] = launcher.nccl_test_mpijob(pool, NAMESPACE)
    return out


def _digest(obj: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(obj).encode()).hexdigest()[:16]


def _no_topology_stack():
    pools = [{"name": "a10", "instanceType": "g5.48xlarge", "maxNodes": 4, "fabricTest": True, "preStepCheck": False},
             {"name": "h100", "instanceType": "p5.48xlarge", "maxNodes": 4, "topology": "off", "fabricTest": True,
              "preStepCheck": False}]
    jobs = [_job(f"{name}-{pool}", name, pool, 2, None) for pool in ("a10", "h100") for name in LAUNCHERS]
    jobs.append(_job("none-h100", "mpirun", "h100", 4, {"policy": "none"}))
    return stack_config("dev", {"gpucluster:gpuPools": pools, "gpucluster:cpuPools": CPU_POOLS,
                                "gpucluster:jobs": jobs,
                                "gpucluster:systemNodes": {"instanceType": "m7i.2xlarge", "count": 2}})


# Recorded at 9759816, before placement was rendered (json.dumps of each object, key order kept): what a stack
# without a topology (and without the pre-step check, issue 32) rendered then, it renders now, so `pulumi up`
# replaces none of its jobs.
BEFORE_ISSUE_30 = {
    "dev": {"smoke": "4a3671d098bda037", "gpucluster-torch-dev-r3": "809e881bdaf30515"},
    "prod": {"llama-70b": "172da91005d67d76", "gpucluster-torch-h100-r10-g120": "c7b96475a3db3550",
             "gpt-pretrain": "b79fcdf9dafedfe8", "nccl-tests-h100": "412703605ab4dceb"},
    "no-topology": {"mpirun-a10": "921954ec3d34b9e4", "torchrun-a10": "6418daa6828b968c",
                    "gpucluster-torch-a10-r3": "93a172ffd5aae857", "ps-a10": "fa8f3de13fb2f1ce",
                    "mpirun-h100": "a96b359c9881b8dd", "torchrun-h100": "ea97d8ff3bb2c18f",
                    "gpucluster-torch-h100-r3": "3230b1390b75c955", "ps-h100": "2c929037c7849934",
                    "none-h100": "bae735dac8decb77", "nccl-tests-a10": "ed51321b5277233b",
                    "nccl-tests-h100": "412703605ab4dceb"},
}


@pytest.mark.parametrize("key", sorted(BEFORE_ISSUE_30))
def test_without_a_topology_every_job_object_renders_byte_for_byte_as_before(key):
    cfg = {"dev": lambda: stack_config("dev", {"gpucluster:gpuPools": _pools_off("dev")}),
           "prod": lambda: stack_config("prod", prod_started({"gpucluster:gpuPools": _pools_off("prod")})),
           "no-topology": _no_topology_stack}[key]()
    assert {name: _digest(obj) for name, obj in rendered(cfg).items()} == BEFORE_ISSUE_30[key]


def _leaves(obj: Any, path: tuple = ()) -> dict[tuple, Any]:
    if isinstance(obj, dict) and obj:
        return {k: v for key, value in obj.items() for k, v in _leaves(value, (*path, key)).items()}
    if isinstance(obj, list) and obj:
        return {k: v for i, value in enumerate(obj) for k, v in _leaves(value, (*path, i)).items()}
    return {path: obj}


def _added(before: dict[str, Any], after: dict[str, Any]) -> dict[tuple, Any]:
    """What `after` adds to `before`; fails if it changes or removes anything."""
    old, new = _leaves(before), _leaves(after)
    assert {p: v for p, v in old.items() if new.get(p, object()) != v} == {}
    return {p: v for p, v in new.items() if p not in old}


WORKER = ("spec", "mpiReplicaSpecs", "Worker", "template", "metadata", "annotations")
NODE_PATCH = ("spec", "runtimePatches", 0, "trainingRuntimeSpec", "template", "spec", "replicatedJobs", 0,
              "template", "spec", "template", "metadata", "annotations")


@pytest.mark.parametrize(("stack", "expected"), [
    # dev: its one-node smoke test now asks for its flavor's topology, unconstrained (else Kueue would not admit it).
    ("dev", {"smoke": {(*NODE_PATCH, UNCONSTRAINED): "true"}}),
    # prod: the fabric test and both (opt-in) examples prefer one layer-3 domain of p5.48xlarge.
    ("prod", {"llama-70b": {(*NODE_PATCH, PREFERRED): layer(3)},
              "gpt-pretrain": {(*WORKER, PREFERRED): layer(3)},
              "nccl-tests-h100": {(*WORKER, PREFERRED): layer(3)}}),
])
def test_dev_and_prod_gain_one_worker_annotation_per_job_and_nothing_else(stack, expected):
    overrides = prod_started if stack == "prod" else (lambda extra=None: extra)
    now = rendered(stack_config(stack, overrides({"gpucluster:gpuPools": _pools_unchecked(stack)})))
    off = rendered(stack_config(stack, overrides({"gpucluster:gpuPools": _pools_off(stack)})))
    assert set(now) == set(off)
    changed = {name: _added(off[name], now[name]) for name in now}
    assert {name: added for name, added in changed.items() if added} == expected
