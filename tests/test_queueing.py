"""Kueue: the manager configuration, flavors and quotas per pool, schemas, the queue component, start order."""

from __future__ import annotations

import pulumi_kubernetes as k8s_sdk
import pytest
import yaml

from components.core import versions as v
from components.core.config import GpuPoolConfig, SystemNodesConfig
from components.core.kube import queueing
from components.core.kube.nodepool import SYSTEM_NODE_LABEL
from components.core.placement import provisioning, topology
from components.core.planning import schedule
from components.kubernetes.queue import Queue, QueueArgs
from tests import k8s
from tests.conftest import stack_config

SCHEMAS = {"ResourceFlavor": "kueue.x-k8s.io_resourceflavors.yaml", "ClusterQueue": "kueue.x-k8s.io_clusterqueues.yaml",
           "LocalQueue": "kueue.x-k8s.io_localqueues.yaml",
           "WorkloadPriorityClass": "kueue.x-k8s.io_workloadpriorityclasses.yaml",
           "Topology": "kueue.x-k8s.io_topologies.yaml", "AdmissionCheck": "kueue.x-k8s.io_admissionchecks.yaml",
           "ProvisioningRequestConfig": "kueue.x-k8s.io_provisioningrequestconfigs.yaml"}
P5 = GpuPoolConfig(name="h100", instance_type="p5.48xlarge", max_nodes=16)
P4D = GpuPoolConfig(name="a100", instance_type="p4d.24xlarge", max_nodes=4)
DEV = GpuPoolConfig(name="dev", instance_type="g6e.xlarge", max_nodes=2)
SYSTEM = SystemNodesConfig(instance_type="m7i.2xlarge", count=3)


# Pools as before atomic scale-up and topologies (issue 30): no admission check, no topology.
PLAIN_P5 = GpuPoolConfig(name="h100", instance_type="p5.48xlarge", max_nodes=16, atomic_scale_up=False,
                         topology="off")


def objects(pools, namespace="training") -> list[dict]:
    return [*topology.topologies(pools), *provisioning.kueue_objects(pools), *queueing.resource_flavors(pools),
            queueing.cluster_queue(pools, SYSTEM, namespace), queueing.local_queue(namespace),
            *queueing.priority_classes()]


@pytest.mark.parametrize("pools", [(P5,), (P5, P4D), (DEV,), (PLAIN_P5,)], ids=["p5", "p5+p4d", "dev", "plain"])
def test_every_object_validates_against_the_v0_19_2_schema(pools):
    for obj in objects(pools):
        assert obj["apiVersion"] == "kueue.x-k8s.io/v1beta2"
        k8s.validate_custom(obj, SCHEMAS[obj["kind"]])


def test_two_pools_get_a_flavor_each_with_their_capacity_as_quota():
    cq = queueing.cluster_queue([P5, P4D], SYSTEM, "training")
    (group,) = cq["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu", "vpc.amazonaws.com/efa", "hugepages-2Mi"]
    quotas = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in group["flavors"]}
    assert list(quotas) == ["system", "pool-h100", "pool-a100"]  # launchers try the system flavor first
    # maxNodes x what a worker asks of one node: every GPU and EFA device, huge pages, 80 % of CPU and memory.
    assert quotas["pool-h100"] == {"cpu": f"{16 * 153600}m", "memory": f"{16 * 1638}Gi", "nvidia.com/gpu": "128",
                                   "vpc.amazonaws.com/efa": "512", "hugepages-2Mi": f"{16 * 5120}Mi"}
    assert quotas["pool-a100"] == {"cpu": f"{4 * 76800}m", "memory": f"{4 * 921}Gi", "nvidia.com/gpu": "32",
                                   "vpc.amazonaws.com/efa": "16", "hugepages-2Mi": f"{4 * 5120}Mi"}
    # Launchers: half of 3 x m7i.2xlarge, no GPU, EFA or huge pages.
    assert quotas["system"] == {"cpu": "12000m", "memory": "48Gi", "nvidia.com/gpu": "0",
                                "vpc.amazonaws.com/efa": "0", "hugepages-2Mi": "0"}


def test_pools_without_efa_cover_no_efa_resources():
    cq = queueing.cluster_queue([DEV], SYSTEM, "training")
    (group,) = cq["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
    assert [r["nominalQuota"] for r in group["flavors"][1]["resources"]] == ["6400m", "50Gi", "2"]  # 2 x (80 % of 4 vCPU, 32 GiB)


def test_every_resource_a_worker_requests_is_covered():
    from components.core.kube import workers

    for pool in (P5, P4D, DEV):
        requested = set(workers.worker_resources(pool, pool.instance.gpu_count)["requests"])
        assert requested <= set(queueing.covered_resources([pool])), pool.name


def test_flavors_carry_the_pools_labels_and_taint_toleration():
    system, h100, a100 = queueing.resource_flavors([P5, P4D])
    assert system == {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                      "metadata": {"name": "system"}, "spec": {"nodeLabels": SYSTEM_NODE_LABEL}}
    # The pool's taint, not a toleration: Kueue 0.19.2 matches node selectors only on a flavor's own label
    # keys, so the taint is what keeps launchers (no GPU toleration) off GPU flavors when the system quota runs out.
    # And the network topology EKS labels p5 and p4d nodes with (3 layers, then the node).
    assert h100["spec"] == {"nodeLabels": {"gpucluster.io/pool": "h100"},
                            "nodeTaints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
                            "topologyName": "gpucluster-network-3"}
    assert a100["metadata"] == {"name": "pool-a100"}
    assert a100["spec"]["topologyName"] == "gpucluster-network-3"
    _, plain = queueing.resource_flavors([PLAIN_P5])
    assert plain["spec"] == {"nodeLabels": {"gpucluster.io/pool": "h100"},
                             "nodeTaints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]}


def test_cluster_queue_admits_only_the_training_namespace_and_never_preempts():
    spec = queueing.cluster_queue([P5], SYSTEM, "research")["spec"]
    # No selector would admit no namespace at all (CRD: a null selector is a nothing selector).
    assert spec["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "research"}}
    assert spec["queueingStrategy"] == "BestEffortFIFO"
    assert spec["stopPolicy"] == "None"
    assert "preemption" not in spec  # default Never: priority orders the queue, it never evicts a running job
    assert queueing.local_queue("research") == {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": "gpu", "namespace": "research"}, "spec": {"clusterQueue": "gpucluster"}}


def test_fabric_test_outranks_training():
    wpcs = {w["metadata"]["name"]: w for w in queueing.priority_classes()}
    assert wpcs["gpucluster-fabric-test"]["value"] > wpcs["gpucluster-training"]["value"]
    assert "spec" not in wpcs["gpucluster-training"]  # value and description are top-level fields


def test_manager_config_keeps_the_charts_integrations_and_adds_waiting_for_pods():
    config = yaml.safe_load(queueing.helm_values("training")["managerConfig"]["controllerManagerConfigYaml"])
    assert config == queueing.manager_config("training")
    assert (config["apiVersion"], config["kind"]) == ("config.kueue.x-k8s.io/v1beta2", "Configuration")
    # The string replaces the chart's whole default, so the list is ours: the jobs we emit and what they are
    # made of; no pod/deployment/statefulset webhooks (failurePolicy Fail) on kinds never queued.
    assert config["integrations"]["frameworks"] == [
        "batch/job", "kubeflow.org/mpijob", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob"]
    assert not {"pod", "deployment", "statefulset", "kubeflow.org/pytorchjob"} & set(config["integrations"]["frameworks"])
    wait = config["waitForPodsReady"]
    # v1beta2 decodes strictly and has no `enable`: one there would stop the manager from starting.
    assert set(wait) == {"timeout", "recoveryTimeout", "blockAdmission", "requeuingStrategy"}
    assert wait["timeout"] == "40m" and wait["recoveryTimeout"] == "30m" and wait["blockAdmission"] is True
    # Off with an atomic pool, as dev's and prod's are (tests/test_placement_kueue.py: why, and the stacks).
    atomic = yaml.safe_load(queueing.helm_values("training", provisioning_requests=True)["managerConfig"][
        "controllerManagerConfigYaml"])
    assert atomic["waitForPodsReady"]["blockAdmission"] is False
    assert {**atomic["waitForPodsReady"], "blockAdmission": True} == wait
    assert wait["requeuingStrategy"] == {"timestamp": "Eviction", "backoffLimitCount": 5,
                                         "backoffBaseSeconds": 60, "backoffMaxSeconds": 3600}
    # The pods' wait outlasts a scale-up from zero.
    from components.core.kube import autoscaling

    assert int(wait["timeout"].rstrip("m")) > autoscaling.MAX_NODE_PROVISION_MINUTES
    assert config["leaderElection"] == {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"}
    # Jobs of the training namespace only: the chart copies this into its job webhooks' namespaceSelector, so
    # kube-prometheus-stack's hook Jobs in `monitoring`, installed beside Kueue, never meet its webhook.
    assert config["managedJobsNamespaceSelector"] == {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["training"]}]}


def test_helm_values_use_the_charts_keys():
    values = queueing.helm_values("training")
    assert values["controllerManager"] == {
        "replicas": 1,
        "manager": {"image": {"repository": "registry.k8s.io/kueue/kueue", "tag": "v0.19.2",
                              "pullPolicy": "IfNotPresent"},
                    # The chart's defaults, stated (tests/test_hardening.py).
                    "podSecurityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containerSecurityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                                 "capabilities": {"drop": ["ALL"]}}},
        # controllerManager.nodeSelector, not controllerManager.manager.*; the chart has no affinity key.
        "nodeSelector": SYSTEM_NODE_LABEL,
    }
    assert set(values) == {"controllerManager", "managerConfig", "enablePrometheus"}
    assert values["enablePrometheus"] is False and queueing.helm_values("training", metrics=True)["enablePrometheus"] is True
    assert (v.KUEUE_CHART, v.KUEUE_CHART_VERSION) == ("oci://registry.k8s.io/kueue/charts/kueue", "0.19.2")


def test_workload_labels():
    assert queueing.workload_labels("gpucluster-training", None) == {
        "kueue.x-k8s.io/queue-name": "gpu", "kueue.x-k8s.io/priority-class": "gpucluster-training"}
    assert queueing.workload_labels("gpucluster-training", 3600)["kueue.x-k8s.io/max-exec-time-seconds"] == "3600"


# -- the component ----------------------------------------------------------------------


def build(cfg):
    def run():
        provider = k8s_sdk.Provider("k8s", kubeconfig="{}")
        ns = k8s_sdk.core.v1.Namespace("ns", metadata={"name": cfg.training_namespace},
                                       opts=__import__("pulumi").ResourceOptions(provider=provider))
        Queue("q", QueueArgs(pools=cfg.gpu_pools, system_nodes=cfg.system_nodes, namespace=cfg.training_namespace,
                             namespace_resource=ns, provider=provider))
    return run


def test_queue_objects_wait_for_kueue_and_are_registered_whole(run_mocked):
    cfg = stack_config("prod")
    rec = run_mocked(build(cfg), "prod")
    release = rec.named("q-kueue")
    assert (release.inputs["chart"], release.inputs["version"]) == (v.KUEUE_CHART, "0.19.2")
    assert release.inputs["namespace"] == "kueue-system" and rec.depends_on(release, rec.named("q-kueue-ns"))
    # prod's h100 pool is atomic: the manager's pod carries the annotation that restarts it when that changes.
    assert release.inputs["values"] == queueing.helm_values("training", provisioning_requests=True)
    custom = [r for r in rec.resources if r.type.startswith("kubernetes:kueue.x-k8s.io/")]
    assert sorted(r.inputs["kind"] for r in custom) == ["AdmissionCheck", "ClusterQueue", "LocalQueue",
                                                       "ProvisioningRequestConfig", "ResourceFlavor",
                                                       "ResourceFlavor", "Topology", "WorkloadPriorityClass",
                                                       "WorkloadPriorityClass"]
    for r in custom:
        assert rec.depends_on(r, release), r.name  # Kueue's webhooks reject them until it runs
    expected = {(o["kind"], o["metadata"]["name"]): o for o in objects(cfg.gpu_pools)}
    for r in custom:
        want = expected[r.inputs["kind"], r.inputs["metadata"]["name"]]
        assert {k: r.inputs[k] for k in want} == want
    wpc = rec.named("q-priority-gpucluster-fabric-test")
    assert wpc.inputs["value"] == 1000  # top-level fields survive registration
    local = rec.named("q-local-queue")
    assert local.replace_on_changes == ["spec.clusterQueue"] and local.delete_before_replace
    assert rec.depends_on(rec.named("q-cluster-queue"), rec.named("q-flavor-pool-h100"))


# -- start order ------------------------------------------------------------------------


def test_a_simulated_best_effort_fifo():
    W = schedule.Workload
    starts = schedule.simulate([
        W("big", "p", 16, 100, 100.0), W("small", "p", 2, 100, None), W("check", "p", 2, 1000, 0.25),
        W("after", "p", 4, 100, 1.0), W("huge", "p", 17, 100, 1.0)], {"p": 16})
    assert (starts["check"].order, starts["check"].after) == (1, [])
    assert (starts["small"].order, starts["small"].after) == (2, [])
    assert (starts["after"].order, starts["after"].after) == (3, [])  # 12 free: fits at once, passes "big"
    assert starts["big"].order == 4 and set(starts["big"].after) == {"check", "small", "after"}
    assert "huge" not in starts  # larger than its pool: never (config rejects it first)


def test_pools_queue_independently():
    W = schedule.Workload
    starts = schedule.simulate([W("a", "p", 2, 100, 1.0), W("b", "q", 2, 100, 1.0), W("c", "p", 2, 100, 1.0)],
                               {"p": 2, "q": 2})
    assert (starts["a"].order, starts["b"].order, starts["c"].order) == (1, 1, 2)
    assert starts["c"].after == ["a"] and starts["b"].after == []
