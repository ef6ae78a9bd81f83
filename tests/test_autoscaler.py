"""cluster-autoscaler: chart values and flags, the scoped IAM policy, Pod Identity, idle teardown per pool."""

from __future__ import annotations

import json

import pulumi_kubernetes as k8s_sdk
import pytest

from components.core import versions as v
from components.core.config import GpuPoolConfig
from components.core.kube import autoscaling, nodepool
from components.core.kube.nodepool import SYSTEM_NODE_LABEL
from components.core.planning import teardown
from components.kubernetes.autoscaler import ClusterAutoscaler, ClusterAutoscalerArgs
from tests.conftest import stack_config

P5 = GpuPoolConfig(name="h100", instance_type="p5.48xlarge", max_nodes=16, idle_minutes=5)
P4D = GpuPoolConfig(name="a100", instance_type="p4d.24xlarge", max_nodes=4, idle_minutes=3)
CLUSTER = "gpucluster-prod"

# The chart's values.yaml keys at 9.59.0 that we set (kubernetes/autoscaler
# cluster-autoscaler-chart-9.59.0, cluster-autoscaler/charts/cluster-autoscaler/values.yaml).
CHART_KEYS = {"serviceMonitor", "cloudProvider", "awsRegion", "autoDiscovery", "image", "fullnameOverride", "rbac", "nodeSelector",
              "resources", "securityContext", "containerSecurityContext", "extraArgs"}
# Flags of cluster-autoscaler 1.35 (FAQ.md "What are the parameters to CA?", config/flags.go).
KNOWN_FLAGS = {"logtostderr", "stderrthreshold", "v", "expander", "balance-similar-node-groups",
               "max-node-provision-time", "scale-down-delay-after-add", "scale-down-delay-after-delete",
               "scale-down-delay-after-failure", "skip-nodes-with-local-storage", "skip-nodes-with-system-pods",
               "scale-down-unneeded-time", "enable-provisioning-requests", "kube-api-content-type"}


def test_chart_pinned_and_image_follows_the_cluster_minor():
    assert (v.CLUSTER_AUTOSCALER_CHART, v.CLUSTER_AUTOSCALER_CHART_VERSION) == ("cluster-autoscaler", "9.59.0")
    assert v.CLUSTER_AUTOSCALER_CHART_REPO == "https://kubernetes.github.io/autoscaler"
    assert v.CLUSTER_AUTOSCALER_IMAGE_TAGS == {"1.32": "v1.32.7", "1.33": "v1.33.6", "1.34": "v1.34.5",
                                               "1.35": "v1.35.2", "1.36": "v1.36.1"}
    for minor, tag in v.CLUSTER_AUTOSCALER_IMAGE_TAGS.items():
        assert tag.startswith(f"v{minor}.")  # never another minor's release


def test_helm_values_exact():
    values = autoscaling.helm_values(CLUSTER, "us-east-1", "1.35", [P5, P4D], SYSTEM_NODE_LABEL)
    assert set(values) <= CHART_KEYS
    assert values == {
        "serviceMonitor": {"enabled": False, "namespace": "kube-system"},
        "cloudProvider": "aws",
        "awsRegion": "us-east-1",
        "autoDiscovery": {"clusterName": CLUSTER},
        "image": {"repository": "registry.k8s.io/autoscaling/cluster-autoscaler", "tag": "v1.35.2"},
        "fullnameOverride": "cluster-autoscaler",
        "rbac": {"create": True, "serviceAccount": {"create": True, "name": "cluster-autoscaler"},
                 # Atomic pools: the autoscaler deletes ProvisioningRequests finished a week ago (the chart grants
                 # every other verb it uses; tests/test_placement_kueue.py).
                 "additionalRules": [{"apiGroups": ["autoscaling.x-k8s.io"], "resources": ["provisioningrequests"],
                                      "verbs": ["delete"]}]},
        "nodeSelector": {"gpucluster.io/role": "system"},
        "resources": {"requests": {"cpu": "100m", "memory": "300Mi"}, "limits": {"memory": "600Mi"}},
        # distroless/static:nonroot's user, stated; nothing written, nothing privileged (tests/test_hardening.py).
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containerSecurityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                     "capabilities": {"drop": ["ALL"]}},
        "extraArgs": {
            "logtostderr": "true", "stderrthreshold": "info", "v": "4",
            "expander": "least-waste",
            "balance-similar-node-groups": "false",
            "max-node-provision-time": "25m0s",
            "scale-down-delay-after-add": "3m0s",
            "scale-down-delay-after-delete": "0s",
            "scale-down-delay-after-failure": "3m0s",
            "skip-nodes-with-local-storage": "false",
            "skip-nodes-with-system-pods": "true",
            # P5 and P4D are atomic (atomicScaleUp defaults to true): Kueue's ProvisioningRequests are acted on.
            "enable-provisioning-requests": "true",
        },
    }
    assert set(values["extraArgs"]) <= KNOWN_FLAGS
    assert all(isinstance(x, str) for x in values["extraArgs"].values())


@pytest.mark.parametrize(("idle", "delay"), [((5, 3), "3m0s"), ((10,), "10m0s"), ((60, 45), "45m0s")])
def test_no_global_delay_outlasts_the_shortest_idle_time(idle, delay):
    pools = [GpuPoolConfig(name=f"p{i}", instance_type="p5.48xlarge", max_nodes=2, idle_minutes=m)
             for i, m in enumerate(idle)]
    flags = autoscaling.flags(pools)
    assert flags["scale-down-delay-after-add"] == delay
    assert "scale-down-unneeded-time" not in flags  # each GPU group's own tag decides its idle time


def test_p5_boots_within_the_provision_time():
    assert autoscaling.MAX_NODE_PROVISION_MINUTES == 25
    assert autoscaling.flags([P5])["max-node-provision-time"] == "25m0s"


def test_iam_policy_describes_broadly_and_scales_only_this_clusters_groups():
    policy = json.loads(autoscaling.iam_policy(CLUSTER, "210987654321", "us-east-1"))
    discover, nodegroups, scale = policy["Statement"]
    assert discover == {"Sid": "Discover", "Effect": "Allow", "Resource": "*", "Action": [
        "autoscaling:DescribeAutoScalingGroups", "autoscaling:DescribeAutoScalingInstances",
        "autoscaling:DescribeLaunchConfigurations", "autoscaling:DescribeScalingActivities",
        "ec2:DescribeImages", "ec2:DescribeInstanceTypes", "ec2:DescribeLaunchTemplateVersions",
        "ec2:GetInstanceTypesFromInstanceRequirements"]}
    assert nodegroups["Action"] == ["eks:DescribeNodegroup"]
    assert nodegroups["Resource"] == f"arn:aws:eks:us-east-1:210987654321:nodegroup/{CLUSTER}/*/*"
    assert scale["Action"] == ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"]
    # EKS tags every managed node group's ASG k8s.io/cluster-autoscaler/<cluster> = owned.
    assert scale["Condition"] == {"StringEquals": {f"autoscaling:ResourceTag/k8s.io/cluster-autoscaler/{CLUSTER}":
                                                   "owned"}}
    assert all(s["Effect"] == "Allow" for s in policy["Statement"])
    everything = [a for s in policy["Statement"] for a in s["Action"]]
    assert not [a for a in everything if a.endswith("*")]


def test_the_idle_tag_and_the_discovery_tag_agree_with_the_policy():
    tags = nodepool.autoscaler_tags(P5, CLUSTER)
    assert tags[f"k8s.io/cluster-autoscaler/{CLUSTER}"] == "owned"
    assert tags["k8s.io/cluster-autoscaler/node-template/autoscaling-options/scaledownunneededtime"] == "5m0s"
    assert teardown.removal_minutes(P5) == 7


def build():
    cfg = stack_config("prod")

    def run():
        provider = k8s_sdk.Provider("k8s", kubeconfig="{}")
        ClusterAutoscaler("ca", ClusterAutoscalerArgs(
            cluster_name=cfg.cluster_name, cluster=cfg.cluster_name, region=cfg.region, account_id="210987654321",
            partition="aws", kubernetes_version=cfg.kubernetes_version, pools=cfg.gpu_pools, provider=provider,
            tags={"team": "ml"}))
    return run


def test_component_contract(run_mocked):
    rec = run_mocked(build(), "prod")
    (component,) = rec.of_type("gpucluster:index:ClusterAutoscaler")
    role, policy = rec.named("ca-role"), rec.named("ca-role-policy")
    # Only this cluster's kube-system/cluster-autoscaler (EKS User Guide, pod-id-role: the session tags).
    assert json.loads(role.inputs["assumeRolePolicy"])["Statement"][0] == {
        "Effect": "Allow", "Principal": {"Service": "pods.eks.amazonaws.com"},
        "Action": ["sts:AssumeRole", "sts:TagSession"],
        "Condition": {"StringEquals": {
            "aws:RequestTag/eks-cluster-arn": "arn:aws:eks:us-east-1:210987654321:cluster/gpucluster-prod",
            "aws:RequestTag/kubernetes-namespace": "kube-system",
            "aws:RequestTag/kubernetes-service-account": "cluster-autoscaler"}}}
    assert json.loads(policy.inputs["policy"]) == json.loads(
        autoscaling.iam_policy("gpucluster-prod", "210987654321", "us-east-1"))
    association = rec.named("ca-pod-identity")
    assert association.inputs == {"clusterName": "gpucluster-prod", "namespace": "kube-system",
                                  "serviceAccount": "cluster-autoscaler", "roleArn": role.outputs["arn"],
                                  "tags": {"team": "ml"}}
    release = rec.named("ca-release")
    assert release.inputs["chart"] == "cluster-autoscaler" and release.inputs["version"] == "9.59.0"
    assert release.inputs["repositoryOpts"] == {"repo": "https://kubernetes.github.io/autoscaler"}
    assert release.inputs["namespace"] == "kube-system" and release.inputs["name"] == "cluster-autoscaler"
    assert release.inputs["values"]["rbac"]["serviceAccount"]["name"] == association.inputs["serviceAccount"]
    assert release.inputs["values"]["extraArgs"]["scale-down-delay-after-add"] == "5m0s"  # prod: idleMinutes 5
    assert rec.depends_on(release, association) and rec.depends_on(association, policy)
    assert all(r.parent == component.urn for r in (role, policy, association, release))
    assert component.component_outputs["image"] == "registry.k8s.io/autoscaling/cluster-autoscaler:v1.35.2"
