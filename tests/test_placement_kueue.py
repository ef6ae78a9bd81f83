"""Atomic scale-up and topology-aware admission in Kueue and cluster-autoscaler (issue 30): the objects, every field
name against the vendored v0.19.2 CRDs, the chart keys and autoscaler flags against the pinned upstream files, the
start order, and a stack with both off rendering exactly as before."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from bootstrap.offline.plan_report import kubernetes_objects
from components.core.config import CpuPoolConfig, GpuPoolConfig, SystemNodesConfig
from components.core.kube import autoscaling, queueing
from components.core.kube.nodepool import SYSTEM_NODE_LABEL
from components.core.placement import provisioning, topology
from tests import k8s
from tests.conftest import recording, stack_config
from tests.test_queueing import build  # the Queue component under the mocks, as test_queueing builds it

P5 = GpuPoolConfig(name="h100", instance_type="p5.48xlarge", max_nodes=16)
P6 = GpuPoolConfig(name="b200", instance_type="p6-b200.48xlarge", max_nodes=4)
PLAIN = GpuPoolConfig(name="a100", instance_type="p4d.24xlarge", max_nodes=4, atomic_scale_up=False, topology="off")
PS = CpuPoolConfig(name="ps", instance_type="m7i.8xlarge", max_nodes=4)
SYSTEM = SystemNodesConfig(instance_type="m7i.2xlarge", count=3)
CRDS = {"Topology": "kueue.x-k8s.io_topologies.yaml", "AdmissionCheck": "kueue.x-k8s.io_admissionchecks.yaml",
        "ProvisioningRequestConfig": "kueue.x-k8s.io_provisioningrequestconfigs.yaml",
        "ResourceFlavor": "kueue.x-k8s.io_resourceflavors.yaml", "ClusterQueue": "kueue.x-k8s.io_clusterqueues.yaml"}
CHARTS = k8s.UPSTREAM / "charts"
FLAGS = {"1.35.2": k8s.UPSTREAM / "flags" / "cluster-autoscaler-1.35.2-flags.go",
         "1.32.7": k8s.UPSTREAM / "flags" / "cluster-autoscaler-1.32.7-main.go"}
# klog's flags (the chart's defaults), not the autoscaler's own: registered by klog.InitFlags, not in flags.go.
KLOG_FLAGS = {"logtostderr", "stderrthreshold", "v"}
BEFORE = Path(__file__).parent / "data" / "placement"


def unknown_fields(obj: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Keys of `obj` its CRD schema has no property for. The API server prunes them without a word (structural
    schemas), and jsonschema lets them through, so a misspelt field would pass validation and do nothing."""
    if isinstance(obj, dict) and "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
        found = []
        for key, value in obj.items():
            where = f"{path}.{key}" if path else key
            if key not in schema["properties"]:
                found.append(where)
            else:
                found += unknown_fields(value, schema["properties"][key], where)
        return found
    if isinstance(obj, list) and "items" in schema:
        return [f for i, item in enumerate(obj) for f in unknown_fields(item, schema["items"], f"{path}[{i}]")]
    return []


def check_against_crd(obj: dict[str, Any]) -> None:
    filename = CRDS[obj["kind"]]
    k8s.validate_custom(obj, filename)
    assert unknown_fields(obj, k8s.crd_schema(filename, obj["apiVersion"].split("/")[1])) == [], obj["kind"]


# -- the objects -------------------------------------------------------------------------------------------------


def test_the_provisioning_request_config_and_its_admission_check_exactly():
    assert provisioning.kueue_objects([P5]) == [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ProvisioningRequestConfig",
         "metadata": {"name": "gpucluster-atomic-scale-up"},
         # cluster-autoscaler's class (types.go ProvisioningClassBestEffortAtomicScaleUp at 1.35.2); only GPU pod
         # sets go into the request; 5 retries (the CRD's default is 3) 1, 2, 2, 2, 2 minutes apart: short of the
         # default idleMinutes (3), so a retry after a booking ran out finds the nodes that came still there.
         "spec": {"provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
                  "managedResources": ["nvidia.com/gpu"],
                  "retryStrategy": {"backoffLimitCount": 5, "backoffBaseSeconds": 60, "backoffMaxSeconds": 120}}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
         "metadata": {"name": "gpucluster-atomic-scale-up"},
         # Kueue's ProvisioningRequestControllerName (provisioningrequestconfig_types.go at v0.19.2).
         "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                  "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig",
                                 "name": "gpucluster-atomic-scale-up"}}},
    ]
    assert provisioning.kueue_objects([PLAIN, PS]) == []
    # The check names the config it reads.
    config, check = provisioning.kueue_objects([P5])
    assert check["spec"]["parameters"]["name"] == config["metadata"]["name"]


def test_only_atomic_gpu_pools_are_checked():
    assert [p.name for p in provisioning.atomic_pools([P5, PLAIN, PS, P6])] == ["h100", "b200"]
    assert queueing.admission_checks([P5, PLAIN, PS, P6]) == {"admissionChecksStrategy": {"admissionChecks": [
        {"name": "gpucluster-atomic-scale-up", "onFlavors": ["pool-h100", "pool-b200"]}]}}
    assert queueing.admission_checks([PLAIN, PS]) == {}
    # CPU pools have no atomicScaleUp: a parameter server's pool is never checked.
    assert not hasattr(PS, "atomic_scale_up") or not PS.atomic_scale_up


def test_topologies_one_per_layer_count_and_flavors_name_theirs():
    names = {f["metadata"]["name"]: f["spec"].get("topologyName") for f in queueing.resource_flavors([P5, P6, PLAIN, PS])}
    assert names == {"system": None, "pool-h100": "gpucluster-network-3", "pool-b200": "gpucluster-network-4",
                     "pool-a100": None, "pool-ps": None}
    three, four = topology.topologies([P5, P6, PLAIN, PS])
    assert three["spec"]["levels"] == [{"nodeLabel": "topology.k8s.aws/network-node-layer-1"},
                                       {"nodeLabel": "topology.k8s.aws/network-node-layer-2"},
                                       {"nodeLabel": "topology.k8s.aws/network-node-layer-3"},
                                       {"nodeLabel": "kubernetes.io/hostname"}]
    assert four["metadata"]["name"] == "gpucluster-network-4" and len(four["spec"]["levels"]) == 5


@pytest.mark.parametrize("pools", [(P5,), (P5, P6, PLAIN, PS)], ids=["p5", "mixed"])
def test_every_field_is_one_the_v0_19_2_crds_have(pools):
    objects = [*topology.topologies(pools), *provisioning.kueue_objects(pools), *queueing.resource_flavors(pools),
               queueing.cluster_queue(pools, SYSTEM, "training")]
    assert {o["kind"] for o in objects} == set(CRDS)
    for obj in objects:
        check_against_crd(obj)


def test_the_field_check_catches_a_misspelt_field():
    config = provisioning.provisioning_request_config()
    config["spec"]["managedResource"] = config["spec"].pop("managedResources")
    k8s.validate_custom(config, CRDS["ProvisioningRequestConfig"])  # jsonschema alone lets it through
    schema = k8s.crd_schema(CRDS["ProvisioningRequestConfig"], "v1beta2")
    assert unknown_fields(config, schema) == ["spec.managedResource"]


def test_v1beta2_has_only_the_per_flavor_strategy():
    # v1beta1's queue-wide spec.admissionChecks is gone in v1beta2: admissionChecksStrategy is the only way.
    spec = k8s.crd_schema(CRDS["ClusterQueue"], "v1beta2")["properties"]["spec"]["properties"]
    assert "admissionChecks" not in spec and "admissionChecksStrategy" in spec
    rule = spec["admissionChecksStrategy"]["properties"]["admissionChecks"]["items"]["properties"]
    assert set(rule) == {"name", "onFlavors"}
    assert "admissionChecks" in k8s.crd_schema(CRDS["ClusterQueue"], "v1beta1")["properties"]["spec"]["properties"]


def test_a_topology_flavor_keeps_its_taint_and_has_the_node_label_the_crd_asks_for():
    (_, flavor) = queueing.resource_flavors([P5])
    rules = [r["rule"] for r in k8s.crd_schema(CRDS["ResourceFlavor"], "v1beta2")["properties"]["spec"][
        "x-kubernetes-validations"]]
    assert "!has(self.topologyName) || self.nodeLabels.size() >= 1" in rules
    assert flavor["spec"]["nodeLabels"] and flavor["spec"]["nodeTaints"] and flavor["spec"]["topologyName"]


# -- Kueue's chart: restart when atomic scale-up is turned on -----------------------------------------------------


def test_the_manager_pod_annotation_is_a_chart_key_rendered_onto_the_pod():
    values = yaml.safe_load((CHARTS / "kueue-0.19.2" / "values.yaml").read_text())
    assert values["controllerManager"]["manager"]["podAnnotations"] == {}
    template = (CHARTS / "kueue-0.19.2" / "templates" / "manager" / "manager.yaml").read_text()
    pod_metadata = template[template.index("  template:"):template.index("    spec:")]
    assert "toYaml .Values.controllerManager.manager.podAnnotations" in pod_metadata
    on = queueing.helm_values("training", provisioning_requests=True)["controllerManager"]["manager"]
    assert on["podAnnotations"] == {"gpucluster.io/provisioning-requests": "enabled"}
    assert "podAnnotations" not in queueing.helm_values("training")["controllerManager"]["manager"]


def wait_for_pods_ready(rec) -> dict[str, Any]:
    (kueue,) = [r for r in rec.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kueue"]
    return yaml.safe_load(kueue.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])["waitForPodsReady"]


def test_block_admission_is_off_whenever_a_queue_runs_the_atomic_check():
    # A job whose ProvisioningRequest is pending holds quota unadmitted, and its topology pass runs in the scheduling
    # loop blockAdmission stops (Kueue v0.19.2 pkg/scheduler/scheduler.go waitForPodsReadyIfNeeded;
    # kubernetes-sigs/kueue#7656): two such jobs would evict each other by booking expiry.
    assert stack_config("dev").teams == () and provisioning.needed(stack_config("dev").gpu_pools)
    assert wait_for_pods_ready(recording("dev"))["blockAdmission"] is False
    assert wait_for_pods_ready(recording("prod"))["blockAdmission"] is False
    # One atomic pool among others is enough; no atomic pool and no teams keeps it on, as before issue 30.
    (dev,) = off("dev")["gpucluster:gpuPools"]
    mixed = [{**dev, "atomicScaleUp": True}, {**dev, "name": "plain"}]
    assert wait_for_pods_ready(recording("dev", {"gpucluster:gpuPools": mixed}))["blockAdmission"] is False
    assert wait_for_pods_ready(recording("dev", off("dev")))["blockAdmission"] is True
    # The pure function agrees.
    assert queueing.manager_config("training", admission_checks=True)["waitForPodsReady"]["blockAdmission"] is False
    assert queueing.manager_config("training")["waitForPodsReady"]["blockAdmission"] is True


# -- cluster-autoscaler ----------------------------------------------------------------------------------------------


def declared_flags(version: str) -> set[str]:
    return set(re.findall(r'flag\.\w+\("([a-z0-9-]+)"', FLAGS[version].read_text()))


@pytest.mark.parametrize(("minor", "source"), [("1.35", "1.35.2"), ("1.32", "1.32.7")])
def test_every_flag_we_pass_is_one_the_autoscaler_declares(minor, source):
    args = autoscaling.helm_values("c", "us-east-1", minor, [P5], SYSTEM_NODE_LABEL)["extraArgs"]
    assert {"enable-provisioning-requests"} <= set(args)
    assert set(args) - KLOG_FLAGS <= declared_flags(source)


def test_provisioning_flags_by_image():
    assert autoscaling.provisioning_flags([P5], "1.35") == {"enable-provisioning-requests": "true"}
    # 1.32 talks protobuf to the API server unless told (CRDs serve JSON only); 1.33 on force JSON for the
    # ProvisioningRequest client themselves.
    assert autoscaling.provisioning_flags([P5], "1.32") == {"enable-provisioning-requests": "true",
                                                            "kube-api-content-type": "application/json"}
    for minor in ("1.33", "1.34", "1.36"):
        assert "kube-api-content-type" not in autoscaling.provisioning_flags([P5], minor)
    assert autoscaling.provisioning_flags([PLAIN, PS], "1.32") == {}
    assert 'flag.String("kube-api-content-type", "application/vnd.kubernetes.protobuf"' in FLAGS["1.32.7"].read_text()


def test_the_autoscaler_may_delete_provisioning_requests_through_the_charts_additional_rules():
    values = yaml.safe_load((CHARTS / "cluster-autoscaler-9.59.0" / "values.yaml").read_text())
    assert values["rbac"]["additionalRules"] == []
    template = (CHARTS / "cluster-autoscaler-9.59.0" / "templates" / "clusterrole.yaml").read_text()
    assert "toYaml .Values.rbac.additionalRules" in template
    # The chart's own rule for them stops short of delete.
    chart_rule = re.search(r"- provisioningrequests\n\s*- provisioningrequests/status\n\s*verbs:\n((?:\s*- \w+\n)+)",
                           template)
    assert re.findall(r"- (\w+)", chart_rule.group(1)) == ["get", "list", "watch", "update", "patch"]
    rbac = autoscaling.helm_values("c", "us-east-1", "1.35", [P5], SYSTEM_NODE_LABEL)["rbac"]
    assert rbac["additionalRules"] == [{"apiGroups": ["autoscaling.x-k8s.io"], "resources": ["provisioningrequests"],
                                        "verbs": ["delete"]}]
    assert "additionalRules" not in autoscaling.helm_values("c", "us-east-1", "1.35", [PLAIN], SYSTEM_NODE_LABEL)[
        "rbac"]


# -- the CRD ---------------------------------------------------------------------------------------------------------


def test_the_provisioning_request_crd_serves_v1_which_kueue_and_the_autoscaler_use():
    crd = provisioning.crd()
    assert crd["metadata"]["name"] == provisioning.CRD_NAME == "provisioningrequests.autoscaling.x-k8s.io"
    assert crd["spec"]["scope"] == "Namespaced"
    served = {v["name"]: (v["served"], v["storage"]) for v in crd["spec"]["versions"]}
    assert served == {"v1": (True, True), "v1beta1": (True, False)}
    k8s.validate_core(crd, "1.35")
    assert k8s.crd_path(provisioning.CRD_FILE.name) == provisioning.CRD_FILE


# -- the Queue component: start order ----------------------------------------------------------------------------


def test_what_a_flavor_or_queue_names_is_created_before_it(run_mocked):
    rec = run_mocked(build(stack_config("prod")), "prod")
    (component,) = rec.of_type("gpucluster:index:Queue")
    release = rec.named("q-kueue")
    topo, config, check = rec.named("q-topology-gpucluster-network-3"), rec.named("q-provisioning-config"), \
        rec.named("q-admission-check")
    assert topo.type == "kubernetes:kueue.x-k8s.io/v1beta2:Topology"
    assert config.type == "kubernetes:kueue.x-k8s.io/v1beta2:ProvisioningRequestConfig"
    assert check.type == "kubernetes:kueue.x-k8s.io/v1beta2:AdmissionCheck"
    for res in (topo, config, check):
        assert res.parent == component.urn and rec.depends_on(res, release)
    assert rec.depends_on(check, config)
    assert rec.depends_on(rec.named("q-flavor-pool-h100"), topo)
    queue = rec.named("q-cluster-queue")
    assert rec.depends_on(queue, check) and rec.depends_on(queue, rec.named("q-flavor-pool-h100"))
    assert queue.inputs["spec"]["admissionChecksStrategy"] == {"admissionChecks": [
        {"name": "gpucluster-atomic-scale-up", "onFlavors": ["pool-h100"]}]}
    assert release.inputs["values"]["controllerManager"]["manager"]["podAnnotations"] == {
        "gpucluster.io/provisioning-requests": "enabled"}


# -- the whole program -------------------------------------------------------------------------------------------


def test_prod_renders_the_check_on_every_queue_and_installs_the_crd_before_kueue():
    rec = recording("prod")
    objects = {(o["kind"], o["metadata"]["name"]) for o in kubernetes_objects(rec)}
    assert {("Topology", "gpucluster-network-3"), ("ProvisioningRequestConfig", "gpucluster-atomic-scale-up"),
            ("AdmissionCheck", "gpucluster-atomic-scale-up"),
            ("CustomResourceDefinition", "provisioningrequests.autoscaling.x-k8s.io")} <= objects
    queues = {r.inputs["metadata"]["name"]: r for r in rec.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")}
    assert sorted(queues) == ["gpucluster", "gpucluster-team-language", "gpucluster-team-vision"]
    check = rec.named("gpucluster-prod-queue-admission-check")
    for queue in queues.values():
        assert queue.inputs["spec"]["admissionChecksStrategy"]["admissionChecks"] == [
            {"name": "gpucluster-atomic-scale-up", "onFlavors": ["pool-h100"]}]
        assert rec.depends_on(queue, check)
    crd = rec.named("gpucluster-prod-operators-crd-provisioningrequests.autoscaling.x-k8s.io")
    (kueue,) = [r for r in rec.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kueue"]
    assert rec.depends_on(kueue, crd)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_autoscaler_starts_after_the_provisioning_request_crd(stack):
    rec = recording(stack)
    crd = rec.named(f"gpucluster-{stack}-operators-crd-provisioningrequests.autoscaling.x-k8s.io")
    autoscaler = rec.named(f"gpucluster-{stack}-autoscaler-release")
    assert autoscaler.inputs["values"]["extraArgs"]["enable-provisioning-requests"] == "true"
    # Its informer for them never syncs without the CRD (provreqclient/client.go newPRsLister at 1.35.2).
    assert rec.depends_on(autoscaler, crd)


def off(stack: str) -> dict[str, Any]:
    pools = yaml.safe_load((k8s.ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]["gpucluster:gpuPools"]
    return {"gpucluster:gpuPools": [{**p, "atomicScaleUp": False, "topology": "off"} for p in pools]}


def snapshot(rec) -> dict[str, Any]:
    """What tests/data/placement/before-issue-30-*.json hold (its README)."""
    releases = {r.inputs["name"]: r.inputs["values"] for r in rec.of_type("kubernetes:helm.sh/v3:Release")
                if r.inputs["name"] in ("kueue", "cluster-autoscaler")}
    objects = kubernetes_objects(rec)
    return {
        "releases": releases,
        "kueue": sorted((o for o in objects if o["apiVersion"].startswith("kueue.x-k8s.io/")),
                        key=lambda o: (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])),
        "crds": sorted(o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition"),
    }


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_with_both_off_a_stack_renders_exactly_as_before(stack):
    now = json.loads(json.dumps(snapshot(recording(stack, off(stack)))))
    before = json.loads((BEFORE / f"before-issue-30-{stack}.json").read_text())
    assert now == before
    assert before["crds"] == ["mpijobs.kubeflow.org"]
    assert not [o for o in before["kueue"] if o["kind"] in ("Topology", "AdmissionCheck", "ProvisioningRequestConfig")]
    # And with them on, it does not (the snapshot sees the change).
    assert json.loads(json.dumps(snapshot(recording(stack)))) != before
