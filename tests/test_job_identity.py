"""The jobs' AWS identity: a Pod Identity role on the training namespace's default service account, scoped to
the stack's bucket (plus the stack's policies), registered before any job, and shown in the plan."""

from __future__ import annotations

import json

import pytest

from bootstrap.offline import plan_text
from bootstrap.offline.mocks import run_program
from bootstrap.offline.plan_report import build_report
from components.core import job_identity
from tests.conftest import prod_started, stack_config, stack_raw
from tests.test_config import problems

ROLE = "aws:iam/role:Role"
POLICY = "aws:iam/rolePolicy:RolePolicy"
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
EXTRA = ["arn:aws:iam::aws:policy/AmazonSageMakerReadOnly", "arn:aws:iam::210987654321:policy/team/wandb-secrets"]


@pytest.fixture(scope="module")
def prod():
    return run_program(stack_raw("prod", prod_started({"gpucluster:jobPolicyArns": EXTRA})), "prod")


def test_the_jobs_role_reads_and_writes_the_stack_s_bucket_only(prod):
    role = prod.named("gpucluster-prod-job-identity-role")
    trust = json.loads(role.inputs["assumeRolePolicy"])
    assert [s["Principal"] for s in trust["Statement"]] == [{"Service": "pods.eks.amazonaws.com"}]
    assert sorted(trust["Statement"][0]["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
    # Only this cluster's association for training/default may take it (EKS User Guide, pod-id-role).
    tags = trust["Statement"][0]["Condition"]["StringEquals"]
    assert tags["aws:RequestTag/kubernetes-namespace"] == "training"
    assert tags["aws:RequestTag/kubernetes-service-account"] == "default"
    assert tags["aws:RequestTag/eks-cluster-arn"].endswith(":cluster/gpucluster-prod")
    access = prod.named("gpucluster-prod-job-identity-bucket-access")
    bucket_arn = prod.named("gpucluster-prod-storage-bucket").outputs["arn"]
    assert json.loads(access.inputs["policy"])["Statement"] == [
        {"Sid": "Bucket", "Effect": "Allow", "Resource": bucket_arn,
         "Action": ["s3:ListBucket", "s3:GetBucketLocation", "s3:ListBucketMultipartUploads"]},
        {"Sid": "Objects", "Effect": "Allow", "Resource": f"{bucket_arn}/*",
         "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload",
                    "s3:ListMultipartUploadParts", "s3:GetObjectTagging", "s3:PutObjectTagging"]}]
    assert access.inputs["role"] == role.outputs["name"]


def test_the_stack_s_policies_are_attached_each_once(prod):
    attached = {r.inputs["policyArn"]: r.name for r in prod.of_type(ATTACHMENT)
                if r.name.startswith("gpucluster-prod-job-identity-")}
    assert sorted(attached) == sorted(EXTRA)
    role = prod.named("gpucluster-prod-job-identity-role")
    assert all(prod.named(n).inputs["role"] == role.outputs["name"] for n in attached.values())
    # Two policies of one name (AWS's and an account's) get two resource names.
    slugs = job_identity.attachment_slugs(["arn:aws:iam::aws:policy/X", "arn:aws:iam::210987654321:policy/X"])
    assert len(set(slugs.values())) == 2 and all(s.startswith("policy-x-") for s in slugs.values())


def test_every_pod_of_the_training_namespace_gets_the_role_before_any_job_starts(prod):
    (association,) = [r for r in prod.of_type(ASSOCIATION) if r.name == "gpucluster-prod-job-identity-pod-identity"]
    assert association.inputs["namespace"] == "training" and association.inputs["serviceAccount"] == "default"
    assert association.inputs["clusterName"] == prod.named("gpucluster-prod-eks").outputs["name"]
    assert association.inputs["roleArn"] == prod.named("gpucluster-prod-job-identity-role").outputs["arn"]
    agent = [r for r in prod.of_type("aws:eks/addon:Addon") if r.inputs["addonName"] == "eks-pod-identity-agent"]
    assert prod.depends_on(association, agent[0])
    jobs = [r for r in prod.resources if r.type in ("kubernetes:kubeflow.org/v2beta1:MPIJob",
                                                   "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob")
            and "fabric-test" not in r.name]
    assert jobs
    for job in jobs:
        assert prod.depends_on(job, association), job.name
    assert prod.stack_outputs["jobRoleArn"] == prod.named("gpucluster-prod-job-identity-role").outputs["arn"]


def test_an_adopted_bucket_is_the_scope(run_stack):
    rec = run_stack("dev", {"gpucluster:storage": {"bucketName": "kept-data"}})
    statements = json.loads(rec.named("gpucluster-dev-job-identity-bucket-access").inputs["policy"])["Statement"]
    assert [s["Resource"] for s in statements] == ["arn:aws:s3:::kept-data", "arn:aws:s3:::kept-data/*"]


def test_the_plan_shows_the_role_and_its_bucket_scope(prod):
    cfg = stack_config("prod", prod_started({"gpucluster:jobPolicyArns": EXTRA}))
    report = build_report(cfg, prod, [])
    bucket = prod.stack_outputs["bucketName"]
    text = plan_text.render(report, plan_text.resource_tree(prod))
    assert "Jobs' AWS identity (EKS Pod Identity)" in text
    assert "  role gpucluster-prod-job-identity-role: every pod in training (service account training/default)" in text
    assert (f"  s3:GetObject, s3:PutObject, s3:DeleteObject, s3:AbortMultipartUpload, s3:ListMultipartUploadParts, "
            f"s3:GetObjectTagging, s3:PutObjectTagging on arn:aws:s3:::{bucket}/*") in text
    assert f"  and {', '.join(EXTRA)}" in text
    assert "169.254.170.23:80" in text


@pytest.mark.parametrize("value, expected", [
    (["arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess", "arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess"],
     ["gpucluster:jobPolicyArns[1]: repeats entry [0]"]),
    (["arn:aws:iam::210987654321:role/not-a-policy"],
     ["gpucluster:jobPolicyArns[0]: got 'arn:aws:iam::210987654321:role/not-a-policy'; must be an IAM managed "
      "policy ARN, arn:aws:iam::aws:policy/<name> or arn:aws:iam::<12-digit account>:policy/<name>"]),
    ([f"arn:aws:iam::aws:policy/P{i}" for i in range(11)],
     ["gpucluster:jobPolicyArns: has 11 entries; IAM attaches at most 10 managed policies to a role by default "
      "(IAM quotas); combine them into fewer policies"]),
])
def test_bad_policy_lists_are_refused_naming_the_key(value, expected):
    assert [p for p in problems({"gpucluster:jobPolicyArns": value}) if "jobPolicyArns" in p] == expected


def test_partitions_other_than_aws_are_policy_arns_too():
    cfg = stack_config("dev", {"aws:region": "us-gov-west-1", "gpucluster:imageCache": False,
                               "gpucluster:adminPrincipalArns": ["arn:aws-us-gov:iam::210987654321:role/admin"],
                               "gpucluster:jobPolicyArns": ["arn:aws-us-gov:iam::aws:policy/ReadOnlyAccess"]})
    assert cfg.job_policy_arns == ("arn:aws-us-gov:iam::aws:policy/ReadOnlyAccess",)


def test_mpirun_passes_the_credentials_on_to_every_rank():
    """Ranks start over ssh, without the pod's environment: mpirun exports the Pod Identity variables by name."""
    from components.core.kube import launcher

    command = launcher.mpirun_command(2, 8, {}, ["python", "train.py"])
    exported = [command[i + 1] for i, arg in enumerate(command) if arg == "-x"]
    assert exported == ["PATH", "LD_LIBRARY_PATH", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_REGION", "AWS_DEFAULT_REGION"]


def test_an_arn_of_another_partition_than_the_region_s_is_refused():
    found = problems({"aws:region": "us-gov-west-1", "gpucluster:imageCache": False,
                      "gpucluster:adminPrincipalArns": ["arn:aws-us-gov:iam::210987654321:role/admin"],
                      "gpucluster:jobPolicyArns": ["arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess"]})
    assert found == ["gpucluster:jobPolicyArns[0]: got 'arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess'; it is in "
                     "partition aws, but aws:region us-gov-west-1 is in aws-us-gov: use arn:aws-us-gov:..."]
