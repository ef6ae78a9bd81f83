"""Identity hardening: Pod Identity roles trust only their own association, nodes pull only, and the system
nodes answer instance metadata like the pools (IMDSv2, one hop)."""

from __future__ import annotations

import json

import pulumi
import pytest

from bootstrap.offline import mocks
from components.aws import iam
from components.aws.node_group import METADATA_OPTIONS
from tests.conftest import stack_raw

ROLE = "aws:iam/role:Role"
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
ADDON = "aws:eks/addon:Addon"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
# Every Pod Identity role of the program: the monitoring ones need AMP and an SNS topic; prod's teams' job
# roles stay (their budgets need prod's 32 days of metrics, which this override keeps).
EVERY_ROLE = {"gpucluster:observability": {"retentionDays": 32, "remoteWrite": "amp",
                                           "alertSnsTopicArn": "arn:aws:sns:us-east-1:000000000000:alerts"}}


@pytest.fixture(scope="module")
def prod():
    return mocks.run_program(stack_raw("prod", EVERY_ROLE), "prod")


def associations(rec: mocks.Recording) -> list[tuple[str, str, str, str, str]]:
    """(what, role ARN, cluster name, namespace, service account) of every Pod Identity association: the
    PodIdentityAssociation resources and the ones EKS add-ons create (in kube-system, the add-ons' namespace)."""
    out = [(r.name, r.inputs["roleArn"], r.inputs["clusterName"], r.inputs["namespace"], r.inputs["serviceAccount"])
           for r in rec.of_type(ASSOCIATION)]
    for addon in rec.of_type(ADDON):
        for a in addon.inputs.get("podIdentityAssociations") or []:
            out.append((addon.name, a["roleArn"], addon.inputs["clusterName"], "kube-system", a["serviceAccount"]))
    return out


def test_every_pod_identity_role_trusts_only_its_own_association(prod):
    (eks,) = prod.of_type("aws:eks/cluster:Cluster")
    roles = {r.outputs["arn"]: r for r in prod.of_type(ROLE)}
    found = associations(prod)
    used = set()
    wrong = []
    for what, role_arn, cluster, namespace, service_account in found:
        role = roles[role_arn]
        used.add(role.name)
        assert cluster == eks.outputs["name"], what
        (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
        expected = {"aws:RequestTag/eks-cluster-arn": eks.outputs["arn"],
                    "aws:RequestTag/kubernetes-namespace": namespace,
                    "aws:RequestTag/kubernetes-service-account": service_account}
        if (statement.get("Condition"), statement["Principal"], sorted(statement["Action"])) != (
                {"StringEquals": expected}, {"Service": "pods.eks.amazonaws.com"}, ["sts:AssumeRole", "sts:TagSession"]):
            wrong.append((what, role.name, statement))
    assert not wrong, wrong
    # Every role pods.eks.amazonaws.com may assume belongs to exactly one association.
    pod_roles = [r.name for r in prod.of_type(ROLE) if "pods.eks.amazonaws.com" in r.inputs["assumeRolePolicy"]]
    assert sorted(pod_roles) == sorted(used) and len(used) == len(found)
    assert {"aws-node", "ebs-csi-controller-sa", "fsx-csi-controller-sa", "cluster-autoscaler", "grafana",
            "prometheus", "alertmanager"} <= {sa for *_, sa in found}
    # The jobs' roles, one per job namespace: training's and each team's (prod's vision and language).
    assert sorted((ns, what) for what, _, _, ns, sa in found if sa == "default") == [
        ("language", "gpucluster-prod-team-language-job-pod-identity"),
        ("training", "gpucluster-prod-job-identity-pod-identity"),
        ("vision", "gpucluster-prod-team-vision-job-pod-identity")]


def test_the_trust_policies_are_the_guides_and_service_role_still_takes_five_arguments(run_mocked):
    def program():
        parent = pulumi.ComponentResource("test:index:Parent", "parent")
        iam.service_role("legacy", "ec2.amazonaws.com", ["arn:aws:iam::aws:policy/X"], {"k": "v"}, parent)
        iam.service_role("scoped", "pods.eks.amazonaws.com", [], {}, parent, namespace="monitoring",
                         cluster_arn="arn:aws-us-gov:eks:us-gov-west-1:111122223333:cluster/c", service_account="grafana")
        iam.service_role("asked", "pods.eks.amazonaws.com", [], {}, parent,
                         cluster_arn=iam.cluster_arn("c"), namespace="ns", service_account="sa")

    rec = run_mocked(program)
    assert rec.named("legacy").inputs["tags"] == {"k": "v"}
    assert rec.named("legacy-x").inputs["policyArn"] == "arn:aws:iam::aws:policy/X"
    assert json.loads(rec.named("legacy").inputs["assumeRolePolicy"])["Statement"] == [
        {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": ["sts:AssumeRole"]}]
    # EKS User Guide, pod-id-role (Setting Conditions): StringEquals on the session tags Pod Identity sends.
    assert json.loads(rec.named("scoped").inputs["assumeRolePolicy"]) == {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": "pods.eks.amazonaws.com"},
        "Action": ["sts:AssumeRole", "sts:TagSession"],
        "Condition": {"StringEquals": {
            "aws:RequestTag/eks-cluster-arn": "arn:aws-us-gov:eks:us-gov-west-1:111122223333:cluster/c",
            "aws:RequestTag/kubernetes-namespace": "monitoring",
            "aws:RequestTag/kubernetes-service-account": "grafana"}}}]}
    # Partition, region and account from the provider when not passed.
    condition = json.loads(rec.named("asked").inputs["assumeRolePolicy"])["Statement"][0]["Condition"]
    assert condition["StringEquals"]["aws:RequestTag/eks-cluster-arn"] == "arn:aws:eks:us-east-1:000000000000:cluster/c"
    assert iam.managed_policy("aws-cn", "AmazonEKS_CNI_Policy") == "arn:aws-cn:iam::aws:policy/AmazonEKS_CNI_Policy"


def test_nodes_pull_only_and_the_image_cache_still_imports_and_creates(prod):
    (role,) = [r for r in prod.of_type(ROLE) if r.name.endswith("-node-role")]
    attached = {a.inputs["policyArn"] for a in prod.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
                if a.inputs["role"] == role.outputs["name"]}
    assert "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly" in attached
    assert "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly" not in attached
    # A first pull through the cache imports the image and creates its repository (ECR User Guide,
    # pull-through-cache-iam): the node role's own inline policy, on the cluster's prefix.
    (pull,) = [p for p in prod.of_type("aws:iam/rolePolicy:RolePolicy") if p.name.endswith("image-cache-node-pull")]
    assert pull.inputs["role"] == role.outputs["name"]
    (statement,) = json.loads(pull.inputs["policy"])["Statement"]
    assert statement["Action"] == ["ecr:BatchImportUpstreamImage", "ecr:CreateRepository"]


def test_system_nodes_have_imdsv2_with_one_hop_like_the_pools(prod):
    (system,) = [r for r in prod.of_type(NODE_GROUP) if r.name.endswith("system-nodes")]
    templates = {t.id: t for t in prod.of_type(TEMPLATE)}
    template = templates[system.inputs["launchTemplate"]["id"]]
    assert template.inputs["metadataOptions"] == {
        "httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 1}
    assert METADATA_OPTIONS["http_put_response_hop_limit"] == 1
    # Every node group of the stack, system and pools, answers instance metadata the same way.
    for group in prod.of_type(NODE_GROUP):
        assert templates[group.inputs["launchTemplate"]["id"]].inputs["metadataOptions"] == template.inputs[
            "metadataOptions"], group.name
    assert system.inputs["launchTemplate"]["version"] == "1"
    # EKS adds the cluster security group only when the template names none (launch-templates).
    assert "vpcSecurityGroupIds" not in template.inputs and "networkInterfaces" not in template.inputs
    # The disk moves into the template: a node group with one may not set diskSize.
    assert "diskSize" not in system.inputs
    assert template.inputs["blockDeviceMappings"] == [{"deviceName": "/dev/xvda", "ebs": {
        "volumeSize": 100, "volumeType": "gp3", "encrypted": "true", "deleteOnTermination": "true"}}]
