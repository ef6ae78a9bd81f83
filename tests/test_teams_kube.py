"""Teams in Kueue and Kubernetes: queues in one cohort whose quotas add up to the pools, fair sharing, reclaim
of lent capacity, access in the team's namespace only, and the admission policy; nothing of it without teams."""

from __future__ import annotations

import pytest
import yaml

from components.core.config import CpuPoolConfig, GpuPoolConfig, SystemNodesConfig
from components.core.config.teams import TeamConfig
from components.core.kube import queueing
from components.core.teams import access as team_access
from components.core.teams import queues as teams
from tests import k8s
from tests.conftest import recording, stack_config

P5 = GpuPoolConfig(name="h100", instance_type="p5.48xlarge", max_nodes=16)
DEV = GpuPoolConfig(name="dev", instance_type="g6e.xlarge", max_nodes=2)
SYSTEM = SystemNodesConfig(instance_type="m7i.2xlarge", count=3)
VISION = TeamConfig(name="vision", pools={"h100": {"guaranteedGpus": 32, "borrowLimitGpus": 64, "lendLimitGpus": 16}},
                    weight=2)
LANGUAGE = TeamConfig(name="language", pools={"h100": {"guaranteedShare": 0.25}},
                      priority_classes=("gpucluster-high", "gpucluster-training"))


def quotas(queue: dict) -> dict[str, dict[str, dict[str, str]]]:
    (group,) = queue["spec"]["resourceGroups"]
    return {f["name"]: {r["name"]: {k: v for k, v in r.items() if k != "name"} for r in f["resources"]}
            for f in group["flavors"]}


def all_queues(pools=(P5,), team_list=(VISION, LANGUAGE)) -> dict[str, dict]:
    out = {queueing.CLUSTER_QUEUE: teams.training_cluster_queue(pools, SYSTEM, "training", team_list)}
    for team in team_list:
        out[teams.cluster_queue_name(team)] = teams.team_cluster_queue(team, pools, SYSTEM)
    return out


def test_each_team_is_guaranteed_whole_nodes_and_its_limits_and_the_training_queue_keeps_the_rest():
    queues = all_queues()
    assert list(queues) == ["gpucluster", "gpucluster-team-vision", "gpucluster-team-language"]
    vision = quotas(queues["gpucluster-team-vision"])["pool-h100"]
    # 32 GPUs = 4 p5.48xlarge nodes; every covered resource scales with the nodes (a worker's requests per node).
    assert vision["nvidia.com/gpu"] == {"nominalQuota": "32", "borrowingLimit": "64", "lendingLimit": "16"}
    assert vision["cpu"] == {"nominalQuota": f"{4 * 153600}m", "borrowingLimit": f"{8 * 153600}m",
                             "lendingLimit": f"{2 * 153600}m"}
    assert vision["vpc.amazonaws.com/efa"] == {"nominalQuota": "128", "borrowingLimit": "256", "lendingLimit": "64"}
    language = quotas(queues["gpucluster-team-language"])["pool-h100"]
    assert language["nvidia.com/gpu"] == {"nominalQuota": "32"}  # 0.25 x 16 nodes; no limits: borrow and lend all
    training = quotas(queues["gpucluster"])["pool-h100"]
    assert training["nvidia.com/gpu"] == {"nominalQuota": "64"}  # 16 - 4 - 4 nodes


def test_the_cohort_holds_exactly_the_gpu_pools_and_every_queue_holds_the_rest_whole_never_lent():
    queues = all_queues()
    for resource, whole in queueing.pool_quota(P5, queueing.covered_resources([P5])).items():
        total = sum(queueing.split_quantity(quotas(q)["pool-h100"][resource]["nominalQuota"])[0]
                    for q in queues.values())
        assert total == queueing.split_quantity(whole)[0], resource
    system = queueing.system_quota(SYSTEM, queueing.covered_resources([P5]))
    assert system == {"cpu": "12000m", "memory": "48Gi", "nvidia.com/gpu": "0", "vpc.amazonaws.com/efa": "0",
                      "hugepages-2Mi": "0"}
    # Launchers and chiefs: each queue holds the system flavor whole, and neither lends nor borrows it, so a
    # team's launcher never makes its queue a borrower (whose every job a reclaim may preempt).
    for queue in queues.values():
        assert quotas(queue)["system"] == {r: {"nominalQuota": q, "borrowingLimit": "0", "lendingLimit": "0"}
                                           for r, q in system.items()}


def test_a_cpu_pool_is_held_whole_by_every_queue_and_never_lent():
    ps = CpuPoolConfig(name="ps", instance_type="m7i.8xlarge", max_nodes=4)
    queues = all_queues(pools=(P5, ps))
    whole = queueing.pool_quota(ps, queueing.covered_resources([P5, ps]))
    for queue in queues.values():
        assert quotas(queue)["pool-ps"] == {r: {"nominalQuota": q, "borrowingLimit": "0", "lendingLimit": "0"}
                                            for r, q in whole.items()}
        k8s.validate_custom(queue, "kueue.x-k8s.io_clusterqueues.yaml")


def test_every_queue_is_in_the_cohort_with_fair_sharing_weights_and_reclaims_lent_capacity():
    queues = all_queues()
    for queue in queues.values():
        spec = queue["spec"]
        assert spec["cohortName"] == "gpucluster"
        # Any: a queue within its guarantee takes lent GPUs back whatever the borrowers' priority
        # (LowerPriority would leave a borrower's training job at the same priority in place).
        assert spec["preemption"] == {"reclaimWithinCohort": "Any", "withinClusterQueue": "Never"}
        assert spec["queueingStrategy"] == "BestEffortFIFO"
    assert [q["spec"]["fairSharing"]["weight"] for q in queues.values()] == ["1", "2", "1"]
    assert queues["gpucluster-team-vision"]["spec"]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "vision"}}


def test_every_queue_runs_the_atomic_scale_up_check_on_the_atomic_gpu_pools_flavors_only():
    plain = GpuPoolConfig(name="a100", instance_type="p4d.24xlarge", max_nodes=4, atomic_scale_up=False,
                          topology="off")
    ps = CpuPoolConfig(name="ps", instance_type="m7i.8xlarge", max_nodes=4)
    queues = all_queues(pools=(P5, plain, ps))
    assert list(queues) == ["gpucluster", "gpucluster-team-vision", "gpucluster-team-language"]
    for queue in queues.values():
        # Not the system flavor, the CPU pool or the non-atomic a100 pool: their jobs are admitted on quota.
        assert queue["spec"]["admissionChecksStrategy"] == {
            "admissionChecks": [{"name": "gpucluster-atomic-scale-up", "onFlavors": ["pool-h100"]}]}
        # Kueue's webhook: every onFlavors entry is a flavor of the queue (clusterqueue_webhook.go
        # validateAdmissionCheckOnFlavors).
        assert set(queue["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["onFlavors"]) <= set(quotas(queue))
        k8s.validate_custom(queue, "kueue.x-k8s.io_clusterqueues.yaml")
    none_atomic = all_queues(pools=(plain, ps))
    assert all("admissionChecksStrategy" not in q["spec"] for q in none_atomic.values())


@pytest.mark.parametrize("team", [VISION, LANGUAGE], ids=["limits", "plain"])
def test_team_queues_validate_against_the_v0_19_2_crd_and_lending_stays_within_the_guarantee(team):
    queue = all_queues()[teams.cluster_queue_name(team)]
    k8s.validate_custom(queue, "kueue.x-k8s.io_clusterqueues.yaml")
    k8s.validate_custom(teams.local_queue(team), "kueue.x-k8s.io_localqueues.yaml")
    # Kueue's webhook: lendingLimit "must be less than or equal to the nominalQuota" (clusterqueue_webhook.go).
    for flavor in quotas(queue).values():
        for row in flavor.values():
            if "lendingLimit" in row:
                assert queueing.split_quantity(row["lendingLimit"])[0] <= queueing.split_quantity(
                    row["nominalQuota"])[0]


def test_the_manager_turns_fair_sharing_on_and_manages_the_team_namespaces():
    config = yaml.safe_load(queueing.helm_values("training", team_namespaces=["vision", "language"],
                                                 fair_sharing=teams.FAIR_SHARING)
                            ["managerConfig"]["controllerManagerConfigYaml"])
    # v1beta2 has no fairSharing.enable (strict decoding refuses it); the strategies are required.
    assert config["fairSharing"] == {"preemptionStrategies": ["LessThanOrEqualToFinalShare",
                                                              "LessThanInitialShare"]}
    # The training namespace, then the teams' sorted: reordering the teams restarts nothing.
    assert config["managedJobsNamespaceSelector"] == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["training", "language", "vision"]}]}
    # blockAdmission waits on every queue's admitted jobs: with teams, one team's job waiting for nodes would
    # hold every other team's admission.
    assert config["waitForPodsReady"]["blockAdmission"] is False
    alone = queueing.manager_config("training")
    assert "fairSharing" not in alone and alone["waitForPodsReady"]["blockAdmission"] is True


def test_a_member_may_run_jobs_and_read_their_pods_in_the_team_namespace_only():
    role, binding = team_access.role(VISION), team_access.role_binding(VISION)
    assert role["kind"] == "Role" and role["metadata"] == {"name": "gpucluster-team-member", "namespace": "vision"}
    granted = {(g, r): rule["verbs"] for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    for group, resource in (("kubeflow.org", "mpijobs"), ("trainer.kubeflow.org", "trainjobs"),
                            ("jobset.x-k8s.io", "jobsets"), ("batch", "jobs")):
        assert granted[(group, resource)] == ["create", "get", "list", "watch", "delete"]
    assert granted[("", "pods/log")] == ["get", "list", "watch"]
    # Not pods (a bare pod skips the queue), not the queues' objects, not patch or update of anything.
    assert ("", "pods") in granted and "create" not in granted[("", "pods")]
    assert all("update" not in verbs and "patch" not in verbs and "*" not in verbs for verbs in granted.values())
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                    "name": "gpucluster:team:vision"}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"] and binding["metadata"]["namespace"] == "vision"


def test_the_admission_policy_holds_a_member_s_jobs_to_the_team_queue_and_its_priority_classes():
    policy, binding = team_access.admission_policy(LANGUAGE), team_access.admission_policy_binding(LANGUAGE)
    spec = policy["spec"]
    assert spec["matchConstraints"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "language"}}
    assert {r["resources"][0] for r in spec["matchConstraints"]["resourceRules"]} == {
        "jobs", "mpijobs", "trainjobs", "jobsets"}
    assert all(r["operations"] == ["CREATE", "UPDATE"] for r in spec["matchConstraints"]["resourceRules"])
    assert spec["matchConditions"] == [{"name": "by-a-member",
                                        "expression": "'gpucluster:team:language' in request.userInfo.groups"}]
    queue_rule, priority_rule = spec["validations"]
    assert "object.metadata.labels['kueue.x-k8s.io/queue-name'] == 'gpu'" in queue_rule["expression"]
    assert priority_rule["expression"].endswith("in ['gpucluster-high', 'gpucluster-training']")
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}


def test_the_team_priority_classes_exist_only_with_teams():
    assert [c["metadata"]["name"] for c in queueing.priority_classes()] == ["gpucluster-fabric-test",
                                                                            "gpucluster-training"]
    with_teams = {c["metadata"]["name"]: c["value"] for c in queueing.priority_classes(teams=True)}
    assert with_teams == {"gpucluster-fabric-test": 1000, "gpucluster-training": 100, "gpucluster-high": 500,
                          "gpucluster-low": 10}


def _k8s_objects(stack: str) -> dict[tuple[str, str, str], dict]:
    out = {}
    for r in recording(stack, None).resources:
        if r.type.startswith("kubernetes:") and isinstance(r.inputs.get("metadata"), dict):
            meta = r.inputs["metadata"]
            kind = r.inputs.get("kind", r.type.rsplit(":", 1)[-1])  # typed resources (ConfigMap) have none
            out[(kind, meta.get("namespace", ""), meta.get("name", ""))] = r.inputs
    return out


def test_the_prod_stack_renders_each_team_s_objects():
    objects = _k8s_objects("prod")
    for team in ("vision", "language"):
        for key in (("ClusterQueue", "", f"gpucluster-team-{team}"), ("LocalQueue", team, "gpu"),
                    ("Role", team, "gpucluster-team-member"), ("RoleBinding", team, "gpucluster-team-member"),
                    ("ValidatingAdmissionPolicy", "", f"gpucluster-team-jobs-{team}"),
                    ("ValidatingAdmissionPolicyBinding", "", f"gpucluster-team-jobs-{team}"),
                    ("NetworkPolicy", team, "gpucluster-default-deny")):
            assert key in objects, key
    assert objects[("ClusterQueue", "", "gpucluster")]["spec"]["cohortName"] == "gpucluster"


def test_a_stack_without_teams_renders_no_cohort_no_fair_sharing_and_no_team_classes():
    objects = _k8s_objects("dev")
    queue = objects[("ClusterQueue", "", "gpucluster")]
    assert "cohortName" not in queue["spec"] and "preemption" not in queue["spec"]
    # No team's: the goodput controller's own rights are the only Roles (tests/test_goodput_agent.py).
    assert not [k for k in objects if k[0] in ("Role", "RoleBinding", "ValidatingAdmissionPolicy")
                and not k[2].startswith("gpucluster-goodput")]
    assert {k[2] for k in objects if k[0] == "WorkloadPriorityClass"} == {"gpucluster-fabric-test",
                                                                          "gpucluster-training"}
    assert stack_config("dev").teams == ()


def test_members_read_spend_through_one_proxy_in_the_metrics_namespace_only():
    objects = _k8s_objects("prod")
    role = objects[("Role", "monitoring", "gpucluster-spend-reader")]
    # The API server names a proxied service <name>:<port> (the path segment bootstrap/jobs/budget.py GETs).
    assert role["rules"] == [{"apiGroups": [""], "resources": ["services/proxy"],
                              "resourceNames": ["kps-prometheus:http-web"], "verbs": ["get"]}]
    binding = objects[("RoleBinding", "monitoring", "gpucluster-spend-reader")]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": "gpucluster-spend-reader"}
    assert [s["name"] for s in binding["subjects"]] == ["gpucluster:team:vision", "gpucluster:team:language"]
    from bootstrap.jobs import budget
    assert budget.PROXY_PATH == "/api/v1/namespaces/monitoring/services/kps-prometheus:http-web/proxy/api/v1/query"
    assert ("Role", "monitoring", "gpucluster-spend-reader") not in _k8s_objects("dev")


def test_each_team_namespace_has_the_image_cache_config_map_and_a_job_pod_monitor():
    objects = _k8s_objects("prod")
    training = objects[("ConfigMap", "training", "gpucluster-images")]
    for team in ("vision", "language"):
        assert objects[("ConfigMap", team, "gpucluster-images")]["data"] == training["data"]
        assert objects[("PodMonitor", team, "gpucluster-jobs")]["spec"] == \
            objects[("PodMonitor", "training", "gpucluster-jobs")]["spec"]


def test_team_pods_may_not_reach_the_node_and_ours_ask_for_nothing_it_refuses():
    policy = team_access.pod_policy([VISION, LANGUAGE])
    spec = policy["spec"]
    assert spec["matchConstraints"]["namespaceSelector"] == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["vision", "language"]}]}
    assert spec["matchConstraints"]["resourceRules"] == [{"apiGroups": [""], "apiVersions": ["v1"],
                                                         "resources": ["pods"], "operations": ["CREATE"]}]
    assert "matchConditions" not in spec  # whoever creates the pod: the job controller does, for a member's Job
    messages = [v["message"] for v in spec["validations"]]
    assert messages == ["a team's pod may not use the node's network, process or IPC namespace",
                        "a team's pod may not mount a path of the node (hostPath)",
                        "a team's pod may not run a privileged container",
                        "a team's pod may add no capability but IPC_LOCK"]
    for field in ("containers", "initContainers", "ephemeralContainers"):
        assert all(f"object.spec.{field}.all(c, " in v["expression"] for v in spec["validations"][2:])
    # What our workers add (EFA's memory pinning) is the one capability allowed.
    from components.core.kube import workers
    worker = workers.worker_container("worker", "img:1", P5, 8, "/fsx")
    assert worker["securityContext"] == {"capabilities": {"add": list(team_access.ALLOWED_CAPABILITIES)}}
    assert team_access.pod_policy_binding()["spec"] == {"policyName": "gpucluster-team-pods",
                                                        "validationActions": ["Deny"]}
    assert ("ValidatingAdmissionPolicy", "", "gpucluster-team-pods") in _k8s_objects("prod")
