"""The jobs' AWS identity (pure): who a training pod is to AWS, and how its credentials reach it.

A pod gets AWS credentials from the EKS Pod Identity agent, a DaemonSet on
the host network of every node that serves them on a link-local address
(EKS User Guide, "Understand how EKS Pod Identity works"): the SDKs read
AWS_CONTAINER_CREDENTIALS_FULL_URI, which the Pod Identity webhook sets to
http://169.254.170.23/v1/credentials (http://[fd00:ec2::23]/v1/credentials
on IPv6), in every pod whose service account has an association.

The association is on the training namespace's `default` service account,
which Kubernetes creates in every namespace: every pod of the namespace
gets the jobs' role, whoever created it (`pulumi up`, `bootstrap submit`,
`kubectl apply`, the MPI Operator's launcher, Trainer's JobSet), with no
serviceAccountName in any manifest. A dedicated service account would need
that field in every job's pod template, and changing a running job's
template replaces the job. The namespace is the boundary, as for the
NetworkPolicies (components/core/kube/network_policy.py).

The role reads and writes the stack's bucket (datasets in, checkpoints
out, besides FSx's own link to it) and nothing else, unless the stack adds
managed policies (gpucluster:jobPolicyArns).

A team's namespace (gpucluster:teams) gets a role of its own, the same way
on its own `default` service account, scoped to the team's prefix of the
bucket (components.core.storage.team_data) and given the same managed policies.
"""

from __future__ import annotations

import hashlib
import json

SERVICE_ACCOUNT = "default"

# EKS User Guide, "Understand how EKS Pod Identity works" (pod-id-how-it-works): the agent listens on
# 169.254.170.23 and [fd00:ec2::23], port 80, on the node's host network.
AGENT_IPV4 = "169.254.170.23"
AGENT_IPV6 = "fd00:ec2::23"
AGENT_PORT = 80

# What the Pod Identity webhook sets in every container of such a pod (aws/amazon-eks-pod-identity-webhook,
# pkg/handler/handler.go addEnvToContainer): the SDKs' container credential provider reads the first two.
# Processes started over ssh (mpirun's ranks) do not inherit them: mpirun passes them on (launcher.py).
POD_IDENTITY_ENV = ("AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
                    "AWS_REGION", "AWS_DEFAULT_REGION")

# S3 User Guide, "Policy examples" (read-write access to a bucket's objects) and "Multipart upload API
# and permissions": a checkpoint of a few GB is a multipart upload, which needs its own actions to list
# and abort parts; GetBucketLocation lets SDKs find the bucket's region. The tagging actions: the AWS CLI's
# S3-to-S3 copies carry tags over (`aws s3 cp/sync`, --copy-props default). No version actions: a job can
# neither read nor erase a checkpoint's history, which the bucket's versioning keeps.
BUCKET_ACTIONS = ("s3:ListBucket", "s3:GetBucketLocation", "s3:ListBucketMultipartUploads")
OBJECT_ACTIONS = ("s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload",
                  "s3:ListMultipartUploadParts", "s3:GetObjectTagging", "s3:PutObjectTagging")


def bucket_policy(bucket_arn: str, prefix: str | None = None) -> str:
    """The jobs' inline policy: read and write the stack's bucket and its objects, nothing else; with a
    `prefix` ("teams/<team>/"), only the objects under it and listings of it."""
    if prefix is None:
        statements = [
            {"Sid": "Bucket", "Effect": "Allow", "Action": list(BUCKET_ACTIONS), "Resource": bucket_arn},
            {"Sid": "Objects", "Effect": "Allow", "Action": list(OBJECT_ACTIONS), "Resource": f"{bucket_arn}/*"},
        ]
    else:
        statements = [
            # S3 User Guide, "Identity-based policy examples for Amazon S3", "Allowing each IAM user access to
            # a folder in a bucket": ListBucket only with an s3:prefix under the folder (StringLike
            # "home/${aws:username}/*"), the object actions on <bucket>/<folder>/*.
            {"Sid": "ListPrefix", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": bucket_arn,
             "Condition": {"StringLike": {"s3:prefix": [f"{prefix}*"]}}},
            # The region only: no key of anyone's. ListBucketMultipartUploads is left out: it names the
            # uploads of the whole bucket, other teams' keys too (a team aborts and lists the parts of its
            # own uploads by key, the object actions below).
            {"Sid": "BucketLocation", "Effect": "Allow", "Action": ["s3:GetBucketLocation"], "Resource": bucket_arn},
            {"Sid": "PrefixObjects", "Effect": "Allow", "Action": list(OBJECT_ACTIONS),
             "Resource": f"{bucket_arn}/{prefix}*"},
        ]
    return json.dumps({"Version": "2012-10-17", "Statement": statements})


# IAM CreateRole: RoleName at most 64 characters. A role Pulumi names is `<resource name>-<7 hex>`
# (auto-naming), so its resource name has 56.
ROLE_NAME_MAX = 64
AUTONAME_SUFFIX = 8


def team_identity_name(cluster_name: str, team: str) -> str:
    """The resource name of a team's JobIdentity, `<cluster>-team-<team>-job`, whose role
    (`<name>-role`, auto-named) fits IAM: the cluster part is cut when the whole would not (the
    team, at most 24 characters, keeps names distinct within the stack; auto-naming across stacks)."""
    tail = f"-team-{team}-job"
    room = ROLE_NAME_MAX - AUTONAME_SUFFIX - len("-role") - len(tail)
    return cluster_name[:room].rstrip("-_") + tail


def attachment_slugs(policy_arns: tuple[str, ...] | list[str]) -> dict[str, str]:
    """A resource-name part per policy ARN: its name, lowercase, and a hash of the whole ARN, so that two
    policies of one name (AWS's and an account's) never share a name, and reordering renames nothing."""
    return {arn: f"policy-{arn.rsplit('/', 1)[-1].lower()}-{hashlib.sha256(arn.encode()).hexdigest()[:6]}"
            for arn in policy_arns}

