"""What each side of a fleet renders (components.core.fleet): exact names, rights, quotas; nothing for an island."""

from __future__ import annotations

import base64
import json

import pytest
import yaml

from components.core.fleet import manager, names, queues, rotator, worker
from components.core.fleet.workers import FleetMember
from components.core.kube import queueing, trainer
from tests.conftest import recording, stack_config

R = ["get", "list", "watch"]
# Transcribed from Kueue v0.19.2 site/static/examples/multikueue/create-multikueue-kubeconfig.sh (ClusterRole
# multikueue-sa-role), the rules of the kinds we run, in the script's order, without its pods rule (no pod
# integration here); then TrainJob, which it lacks. Split: reads cluster-wide, writes per job namespace.
EXPECTED_READ_RULES = [
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": R},
    {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get"]},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": R},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets/status"], "verbs": ["get"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": R},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues", "localqueues"], "verbs": R},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["get"]},
    {"apiGroups": ["kubeflow.org"], "resources": ["mpijobs"], "verbs": R},
    {"apiGroups": ["kubeflow.org"], "resources": ["mpijobs/status"], "verbs": ["get"]},
    {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"], "verbs": R},
    {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs/status"], "verbs": ["get"]},
]
EXPECTED_WRITE_RULES = [
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "delete"]},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["create", "delete"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["create", "delete", "update", "patch"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["patch", "update"]},
    {"apiGroups": ["kubeflow.org"], "resources": ["mpijobs"], "verbs": ["create", "delete"]},
    {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"], "verbs": ["create", "delete"]},
]
SUBJECTS = [{"kind": "ServiceAccount", "name": "gpucluster-multikueue", "namespace": "gpucluster-fleet"}]
TEAM = {"gpucluster:teams": json.dumps([{"name": "vision", "pools": {"h100": {"guaranteedGpus": 8}}},
                                        {"name": "audio", "pools": {"h100": {"guaranteedGpus": 8}}}])}


@pytest.fixture(scope="module")
def members() -> tuple[FleetMember, ...]:
    return tuple(FleetMember(s, s, s, stack_config(s)) for s in ("fleet-east", "fleet-west"))


@pytest.fixture(scope="module")
def fleet_cfg():
    return stack_config("fleet")


def by_kind(objs):
    return [(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) for o in objs]


# -- worker -----------------------------------------------------------------------------------------------

def test_a_worker_renders_the_manager_s_account_rights_and_bootstrap_token():
    objs = worker.objects(stack_config("fleet-east"))
    assert by_kind(objs) == [
        ("Namespace", "gpucluster-fleet", None),
        ("ServiceAccount", "gpucluster-multikueue", "gpucluster-fleet"),
        ("ClusterRole", "gpucluster-multikueue-read", None),
        ("ClusterRoleBinding", "gpucluster-multikueue-read", None),
        ("ClusterRole", "gpucluster-multikueue-write", None),
        ("RoleBinding", "gpucluster-multikueue-write", "training"),
        ("Role", "gpucluster-multikueue-token", "gpucluster-fleet"),
        ("RoleBinding", "gpucluster-multikueue-token", "gpucluster-fleet"),
        ("Secret", "gpucluster-multikueue-bootstrap", "gpucluster-fleet")]
    read, read_binding, write, write_binding, token_role, token_binding, secret = objs[2:]
    assert read["rules"] == EXPECTED_READ_RULES and write["rules"] == EXPECTED_WRITE_RULES
    resources = {r for rule in read["rules"] + write["rules"] for r in rule["resources"]}
    assert not resources & {"pods", "events", "secrets"}  # no pod integration, no events
    assert not {v for rule in write["rules"] for v in rule["verbs"]} & set(R)  # reads are the cluster-wide role's
    assert read_binding["subjects"] == write_binding["subjects"] == token_binding["subjects"] == SUBJECTS
    assert read_binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                       "name": "gpucluster-multikueue-read"}
    assert write_binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                        "name": "gpucluster-multikueue-write"}
    assert token_binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                       "name": "gpucluster-multikueue-token"}
    # Its own tokens, and anchors it creates and deletes; never a read of the Secrets there (the bootstrap one).
    assert token_role["rules"] == [
        {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"],
         "resourceNames": ["gpucluster-multikueue"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create", "delete"]}]
    assert secret["type"] == "kubernetes.io/service-account-token"
    assert secret["metadata"]["annotations"] == {"kubernetes.io/service-account.name": "gpucluster-multikueue",
                                                 "pulumi.com/waitFor": "jsonpath={.data.token}"}
    assert worker.access("https://x", "Q0E=", "t") == {"server": "https://x", "certificateAuthorityData": "Q0E=",
                                                      "token": "t"}


def test_the_write_rights_are_bound_in_every_namespace_the_worker_queues_jobs_in():
    cfg = stack_config("fleet-east", {**TEAM, "gpucluster:trainingNamespace": "jobs"})
    bindings = [o for o in worker.objects(cfg) if o["metadata"]["name"] == "gpucluster-multikueue-write"]
    assert by_kind(bindings) == [("ClusterRole", "gpucluster-multikueue-write", None),
                                 ("RoleBinding", "gpucluster-multikueue-write", "jobs"),
                                 ("RoleBinding", "gpucluster-multikueue-write", "vision"),
                                 ("RoleBinding", "gpucluster-multikueue-write", "audio")]
    assert worker.job_namespaces(cfg) == ["jobs", "vision", "audio"]
    assert all(b["subjects"] == SUBJECTS and b["roleRef"]["kind"] == "ClusterRole" for b in bindings[1:])


def test_an_island_and_a_manager_render_no_worker_objects(fleet_cfg):
    assert worker.objects(stack_config("dev")) == [] == worker.objects(fleet_cfg)
    assert manager.multi_kueue(stack_config("dev")) is None
    assert manager.multi_kueue(stack_config("fleet-east")) is None
    assert rotator.objects(stack_config("dev"), ()) == []


# -- manager ----------------------------------------------------------------------------------------------

def test_the_manager_s_kueue_config_has_multikueue_and_an_island_s_has_none(fleet_cfg):
    mk = manager.multi_kueue(fleet_cfg)
    assert mk == {"dispatcherName": "kueue.x-k8s.io/multikueue-dispatcher-all-at-once", "workerLostTimeout": "15m",
                  "origin": f"gpucluster-{fleet_cfg.cluster_name}"}
    incremental = stack_config("fleet", {"gpucluster:fleet": {**json.loads(json.dumps(
        {"role": "manager", "workers": [{"stack": "fleet-east"}]})), "dispatcher": "incremental",
        "workerLostMinutes": 7}})
    assert manager.multi_kueue(incremental)["dispatcherName"] == "kueue.x-k8s.io/multikueue-dispatcher-incremental"
    assert manager.multi_kueue(incremental)["workerLostTimeout"] == "7m"
    values = queueing.helm_values("training", multi_kueue=mk)
    assert yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])["multiKueue"] == mk
    plain = yaml.safe_load(queueing.helm_values("training")["managerConfig"]["controllerManagerConfigYaml"])
    assert "multiKueue" not in plain


def test_origin_is_a_label_value_even_for_a_long_cluster_name():
    assert manager.origin("gpu_cluster.A") == "gpucluster-gpu_cluster.A"
    long = manager.origin("x" * 100)
    assert len(long) == 63 and long.startswith("gpucluster-xxx") and long == manager.origin("x" * 100)
    assert manager.origin("x" * 100) != manager.origin("x" * 99)


def test_the_kubeconfig_kueue_accepts(members):
    text = manager.kubeconfig("fleet-east", {"server": "https://E.gr7.us-east-1.eks.amazonaws.com",
                                             "certificateAuthorityData": "Q0E=", "token": "tok"})
    config = json.loads(text)
    assert config == {
        "apiVersion": "v1", "kind": "Config", "current-context": "fleet-east",
        "clusters": [{"name": "fleet-east", "cluster": {"server": "https://E.gr7.us-east-1.eks.amazonaws.com",
                                                        "certificate-authority-data": "Q0E="}}],
        "users": [{"name": "fleet-east", "user": {"token": "tok"}}],
        "contexts": [{"name": "fleet-east", "context": {"cluster": "fleet-east", "user": "fleet-east"}}]}
    for refused in ("tokenFile", "exec", "insecure-skip-tls-verify", "certificate-authority\"", "auth-provider"):
        assert refused not in text
    secret = manager.kubeconfig_secret("fleet-east", text)
    assert (secret["metadata"]["name"], secret["metadata"]["namespace"]) == ("gpucluster-fleet-fleet-east",
                                                                             "kueue-system")
    assert base64.b64decode(secret["data"]["kubeconfig"]).decode() == text
    seed = manager.seed_secret("fleet-east", text)
    assert (seed["metadata"]["name"], seed["metadata"]["namespace"]) == ("gpucluster-fleet-fleet-east-seed",
                                                                         "kueue-system")
    assert seed["data"] == secret["data"] and seed["type"] == "Opaque"


def test_the_multikueue_objects(members):
    assert manager.multikueue_cluster("fleet-east") == {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster",
        "metadata": {"name": "fleet-east", "labels": manager.LABELS},
        "spec": {"clusterSource": {"kubeConfig": {"location": "gpucluster-fleet-fleet-east",
                                                  "locationType": "Secret"}}}}
    assert manager.multikueue_config(members)["spec"] == {"clusters": ["fleet-east", "fleet-west"]}
    assert manager.multikueue_config(members[::-1])["spec"] == {"clusters": ["fleet-west", "fleet-east"]}
    assert manager.multikueue_config(members)["metadata"]["name"] == "gpucluster-fleet"
    check = manager.admission_check()
    assert check["metadata"]["name"] == "gpucluster-fleet"
    assert check["spec"] == {"controllerName": "kueue.x-k8s.io/multikueue", "parameters": {
        "apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "gpucluster-fleet"}}


def quotas(queue):
    return {(f["name"], r["name"]): r["nominalQuota"] for g in queue["spec"]["resourceGroups"]
            for f in g["flavors"] for r in f["resources"]}


def test_the_manager_mirrors_the_workers_queues_with_summed_quotas(fleet_cfg, members):
    mirrored = queues.manager_queues(fleet_cfg, members)
    assert mirrored.namespaces == ("training",)
    assert [f["metadata"]["name"] for f in mirrored.flavors] == ["system", "pool-h100"]
    # The workers' own flavors: an h100 job stays on the h100 quota, and a job asking for a network level
    # finds a topology-aware flavor (Kueue delays its placement to the worker).
    assert [f["spec"] for f in mirrored.flavors] == [f["spec"] for f in queueing.resource_flavors(
        members[0].config.all_pools)]
    assert mirrored.flavors[1]["spec"]["topologyName"] == "gpucluster-network-3"
    assert [(t["kind"], t["metadata"]["name"], [level["nodeLabel"] for level in t["spec"]["levels"]])
            for t in mirrored.topologies] == [("Topology", "gpucluster-network-3", [
                "topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2",
                "topology.k8s.aws/network-node-layer-3", "kubernetes.io/hostname"])]
    assert by_kind(mirrored.local_queues) == [("LocalQueue", "gpu", "training")]
    assert mirrored.local_queues[0]["spec"] == {"clusterQueue": "gpucluster"}
    [cq] = mirrored.cluster_queues
    assert cq["metadata"]["name"] == "gpucluster"
    assert cq["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "gpucluster-fleet"}]}
    east = queues.worker_cluster_queues(members[0].config)[0]
    west = queues.worker_cluster_queues(members[1].config)[0]
    got, e, w = quotas(cq), quotas(east), quotas(west)
    assert got[("pool-h100", "nvidia.com/gpu")] == "32"  # 2 workers x 2 p5.48xlarge x 8 GPUs
    assert got[("pool-h100", "vpc.amazonaws.com/efa")] == "128"  # 2 x 2 nodes x 32 EFA interfaces each
    for key in e:
        ne, ue = queueing.split_quantity(e[key])
        nw, uw = queueing.split_quantity(w[key])
        assert ue == uw and got[key] == f"{ne + nw}{ue}", key
    assert cq["spec"]["namespaceSelector"] == east["spec"]["namespaceSelector"]
    assert cq["spec"]["stopPolicy"] == "None"
    # The workers' runtime exactly, FSx claim included: Kueue on a worker finishes a copy whose pod sets its
    # own runtime does not build ("The prebuilt workload is out of sync with its user job", seen on the local
    # fleet when the manager's runtime had no claim).
    worker = members[0].config
    job = next(j for j in worker.jobs if j.name == "pretrain")
    assert list(mirrored.runtimes) == [trainer.runtime(worker.pool("h100"), job.max_restarts, "fsx", job.mount_path,
                                                       job.termination_grace_period_seconds)]
    assert mirrored.runtimes[0]["metadata"]["name"] == "gpucluster-torch-h100-r3"


def test_a_paused_manager_holds_every_mirrored_queue(members):
    paused = stack_config("fleet", {"gpucluster:paused": True})
    assert {q["spec"]["stopPolicy"] for q in queues.manager_queues(paused, members).cluster_queues} == {"Hold"}


def test_quantities_add_in_their_unit_or_in_base_units():
    assert queues.add_quantities(["153600m", "1000m"]) == "154600m"
    assert queues.add_quantities(["1Gi", "512Mi"]) == str(1536 * 2**20)
    assert queues.add_quantities(["1", "500m"]) == "1500m"
    assert queues.add_quantities(["0"]) == "0"


# -- the rotator ------------------------------------------------------------------------------------------

def test_the_rotator_runs_every_period_with_tokens_living_two(fleet_cfg, members):
    objs = rotator.objects(fleet_cfg, members)
    assert by_kind(objs) == [("ConfigMap", "gpucluster-fleet-token-code", "kueue-system"),
                             ("ServiceAccount", "gpucluster-fleet-token-rotator", "kueue-system"),
                             ("Role", "gpucluster-fleet-token-rotator", "kueue-system"),
                             ("RoleBinding", "gpucluster-fleet-token-rotator", "kueue-system"),
                             ("CronJob", "gpucluster-fleet-token-rotator", "kueue-system")]
    code, _, role, _, cron = objs
    assert set(code["data"]) >= {"__init__.py", "__main__.py", "rotate.py", "client.py", "names.py", "kubeapi.py"}
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "update"],
                              "resourceNames": ["gpucluster-fleet-fleet-east", "gpucluster-fleet-fleet-west"]},
                             {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"],
                              "resourceNames": ["gpucluster-fleet-fleet-east-seed",
                                                "gpucluster-fleet-fleet-west-seed"]}]
    spec = cron["spec"]
    assert spec["schedule"] == "17 */6 * * *" and spec["concurrencyPolicy"] == "Forbid"
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["command"] == [
        "python3", "-m", "gpucluster_fleet_token", "--kubeconfig", "in-cluster", "--namespace", "kueue-system",
        "--secret", "gpucluster-fleet-fleet-east", "--secret", "gpucluster-fleet-fleet-west",
        "--lifetime-seconds", str(2 * 6 * 3600)]
    assert container["image"] == "public.ecr.aws/docker/library/python:3.13.9-slim-trixie"
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}}
    assert pod["securityContext"] == {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
                                      "seccompProfile": {"type": "RuntimeDefault"}}
    assert pod["serviceAccountName"] == "gpucluster-fleet-token-rotator"
    assert {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}} in pod["volumes"]


@pytest.mark.parametrize(("hours", "schedule"), [(1, "17 */1 * * *"), (6, "17 */6 * * *"), (24, "17 0 * * *"),
                                                 (36, "17 0 * * *"), (168, "17 0 */7 * *")])
def test_the_schedule_never_leaves_more_than_a_period_between_runs(hours, schedule):
    assert rotator.schedule(hours) == schedule


# -- the program ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_a_stack_without_a_fleet_renders_nothing_of_one(stack):
    rec = recording(stack)
    assert rec.of_type("gpucluster:index:Fleet") == []
    assert not [r.name for r in rec.resources if "fleet" in r.name]
    assert names.ACCESS_OUTPUT not in rec.stack_outputs
    [release] = [r for r in rec.of_type("kubernetes:helm.sh/v3:Release") if r.inputs.get("chart", "").endswith("/kueue")]
    config = yaml.safe_load(release.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert "multiKueue" not in config


def test_a_worker_stack_registers_its_side_and_exports_its_access_as_a_secret():
    rec = recording("fleet-east")
    [component] = rec.of_type("gpucluster:index:Fleet")
    children = [r for r in rec.resources if r.parent == component.urn]
    kinds = sorted(r.type for r in children)
    assert kinds == sorted(["kubernetes:core/v1:Namespace", "kubernetes:core/v1:ServiceAccount",
                            "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole",
                            "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
                            "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole",
                            "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding",
                            "kubernetes:rbac.authorization.k8s.io/v1:Role",
                            "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding",
                            "kubernetes:core/v1:Secret"])  # the live read of the Secret is not a registration
    # The write RoleBinding waits for the training namespace the Cluster creates.
    [binding] = [r for r in children if r.type.endswith(":RoleBinding") and r.inputs["metadata"]["namespace"] == "training"]
    [training] = [r for r in rec.resources if r.type == "kubernetes:core/v1:Namespace"
                  and r.inputs.get("metadata", {}).get("name") == "training"]
    assert training.urn in binding.dependencies
    assert names.ACCESS_OUTPUT in rec.stack_outputs and names.ACCESS_OUTPUT in rec.secret_outputs
    access = rec.stack_outputs[names.ACCESS_OUTPUT]
    assert set(access) == {"server", "certificateAuthorityData", "token"}
    assert access["server"].startswith("https://") and access["server"].endswith(".eks.amazonaws.com")


def test_a_manager_stack_writes_each_worker_s_kubeconfig_and_its_seed():
    rec = recording("fleet")
    secrets = {r.inputs["metadata"]["name"]: r for r in rec.of_type("kubernetes:core/v1:Secret")
               if r.inputs["metadata"]["name"].startswith("gpucluster-fleet-")}
    assert sorted(secrets) == ["gpucluster-fleet-fleet-east", "gpucluster-fleet-fleet-east-seed",
                               "gpucluster-fleet-fleet-west", "gpucluster-fleet-fleet-west-seed"]
    for cluster in ("fleet-east", "fleet-west"):
        kueue_s, seed = secrets[f"gpucluster-fleet-{cluster}"], secrets[f"gpucluster-fleet-{cluster}-seed"]
        assert kueue_s.inputs["metadata"]["namespace"] == seed.inputs["metadata"]["namespace"] == "kueue-system"
        # Kueue's is the rotator's after creation; the seed is the program's, rewritten at every `up`.
        assert kueue_s.ignore_changes == ["data", "stringData"] and not seed.ignore_changes
        assert seed.inputs["data"] == kueue_s.inputs["data"] and "data" in seed.secret_inputs
        config = json.loads(base64.b64decode(seed.inputs["data"]["kubeconfig"]))
        assert config["users"] == [{"name": cluster, "user": {"token": "offline-plan-stand-in"}}]
    [mkc] = [r for r in rec.resources if r.type.endswith("MultiKueueCluster") and r.inputs["metadata"]["name"]
             == "fleet-east"]
    assert mkc.inputs["spec"]["clusterSource"]["kubeConfig"]["location"] == "gpucluster-fleet-fleet-east"
