"""cluster-autoscaler for GPU pools that scale from zero and give idle nodes back (pure).

The Helm values of chart 9.59.0, the flags chosen for training, and the
least-privilege IAM policy. Keys and flags are the chart's and the
autoscaler's own (kubernetes/autoscaler at cluster-autoscaler-chart-9.59.0,
cluster-autoscaler/charts/cluster-autoscaler/values.yaml and
templates/deployment.yaml; FAQ.md and config/flags.go at 1.35.2).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from components.core import namespaces
from components.core import versions as v
from components.core.kube import hardening, nodepool
from components.core.placement import provisioning

NAMESPACE = namespaces.KUBE_SYSTEM
RELEASE_NAME = "cluster-autoscaler"
# Set explicitly: the chart's default is <release>-aws-cluster-autoscaler
# (_helpers.tpl cluster-autoscaler.serviceAccountName), and the Pod Identity
# association must name the service account exactly.
SERVICE_ACCOUNT = "cluster-autoscaler"

# A p5 node takes long to join: 32 network interfaces, the NVIDIA and EFA
# drivers, RAID0 over 8 NVMe disks, and huge pages before kubelet starts.
# The 15-minute default would call a slow boot a failed scale-up, back the
# group off and take the instance away; 25 minutes leaves room.
MAX_NODE_PROVISION_MINUTES = 25

# What an autoscaler on this cluster may do to Auto Scaling groups: describe
# anything (auto-discovery lists every group), change only ours
# (cluster-autoscaler/cloudprovider/aws/README.md at 1.35.2, "Full Cluster
# Autoscaler Features Policy": these describe actions and the two mutating
# ones, which it asks to restrict by tag condition).
DESCRIBE_ACTIONS = (
    "autoscaling:DescribeAutoScalingGroups",
    "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeLaunchConfigurations",
    "autoscaling:DescribeScalingActivities",
    "ec2:DescribeImages",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplateVersions",
    "ec2:GetInstanceTypesFromInstanceRequirements",
)
SCALE_ACTIONS = ("autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup")


def image_tag(kubernetes_version: str) -> str:
    """The autoscaler release of the cluster's minor (config validation rejects a minor without one)."""
    return v.CLUSTER_AUTOSCALER_IMAGE_TAGS[kubernetes_version]


def flags(pools: Sequence[nodepool.Pool]) -> dict[str, str]:
    """extraArgs: each renders as --<key>=<value> (deployment.yaml: `- --{{ $key }}={{ $value }}`).

    Values are strings so the chart never renders a number or boolean in
    another form.
    """
    shortest_idle = min((p.idle_minutes for p in pools), default=10)
    return {
        # The chart's defaults, kept because a values map replaces them.
        "logtostderr": "true",
        "stderrthreshold": "info",
        "v": "4",
        # A pending pod selects its pool by label, so only one group fits it;
        # least-waste (the default, stated) then only breaks ties.
        "expander": "least-waste",
        # Each pool is one node group in one zone (EFA does not cross zones)
        # with its own pool label: no two groups are "similar", and balancing
        # would only spread a job across zones. Off, stated.
        "balance-similar-node-groups": "false",
        "max-node-provision-time": nodepool.go_duration(MAX_NODE_PROVISION_MINUTES),
        # The per-pool scaledownunneededtime tag decides GPU nodes' idle time;
        # after any scale-up every scale-down waits this long, so it must not be
        # longer than the shortest idleMinutes or an idle node outlives it.
        "scale-down-delay-after-add": nodepool.go_duration(shortest_idle),
        "scale-down-delay-after-delete": "0s",
        "scale-down-delay-after-failure": "3m0s",
        # Training pods mount a memory-backed /dev/shm (emptyDir): local storage
        # must not pin a node once its pods are gone. Running training pods are
        # protected by their safe-to-evict: "false" annotation instead.
        "skip-nodes-with-local-storage": "false",
        "skip-nodes-with-system-pods": "true",
    }


def provisioning_flags(pools: Sequence[nodepool.Pool], kubernetes_version: str) -> dict[str, str]:
    """extraArgs for Kueue's ProvisioningRequests when a pool is atomic ({} otherwise: flags as before).

    --enable-provisioning-requests (default false) makes the autoscaler act on them, best-effort-atomic-scale-up
    included (config/flags/flags.go:218 at 1.35.2; main.go:272 at 1.32.7). The CRDs serve no protobuf, and 1.32
    talks to the API server in protobuf unless told JSON (--kube-api-content-type, main.go:121 at 1.32.7; FAQ.md
    "How can I use ProvisioningRequest"): from 1.33 the ProvisioningRequest client forces JSON itself
    (main.go:148-150 at 1.35.2), so only 1.32 sets it, and every other client keeps protobuf.
    """
    if not provisioning.needed(pools):
        return {}
    return {"enable-provisioning-requests": "true",
            **({"kube-api-content-type": "application/json"} if image_tag(kubernetes_version).startswith("v1.32.")
               else {})}


# The chart's ClusterRole lets the autoscaler get, list, watch, update and patch ProvisioningRequests
# (templates/clusterrole.yaml at cluster-autoscaler-chart-9.59.0) but not delete them, which it does to those
# finished more than 7 days ago (processors/provreq/processor.go DeleteOldProvReqs at 1.35.2; FAQ.md lists
# delete); rbac.additionalRules is appended to that ClusterRole (and to the chart's Role in kube-system).
PROVISIONING_RBAC = ({"apiGroups": ["autoscaling.x-k8s.io"], "resources": ["provisioningrequests"],
                      "verbs": ["delete"]},)


RESOURCES = {"requests": {"cpu": "100m", "memory": "300Mi"}, "limits": {"memory": "600Mi"}}

# The chart sets no securityContext (values.yaml: securityContext: {}, containerSecurityContext: {}, both
# rendered as given by templates/deployment.yaml). The image is gcr.io/distroless/static:nonroot
# (cluster-autoscaler/Dockerfile at every pinned 1.32.7 ... 1.36.1 tag): 65532, stated so kubelet can
# check runAsNonRoot; a static binary that writes nothing (logs to stderr). The chart's liveness probe
# (/health-check on 8085) is fixed in the template; it has no readiness probe and no key for one.
POD_SECURITY = hardening.pod_security_context(hardening.DISTROLESS_NONROOT)


def helm_values(cluster_name: str, region: str, kubernetes_version: str, pools: Sequence[nodepool.Pool],
                system_node_selector: dict[str, str], metrics: bool = False) -> dict[str, Any]:
    """Values of chart 9.59.0 (values.yaml keys: cloudProvider, awsRegion, autoDiscovery, image,
    rbac.serviceAccount, rbac.additionalRules, fullnameOverride, nodeSelector, extraArgs, resources,
    serviceMonitor, securityContext, containerSecurityContext).

    `metrics`: the chart's ServiceMonitor, in the autoscaler's namespace (Prometheus selects all)."""
    return {
        "serviceMonitor": {"enabled": metrics, "namespace": NAMESPACE},
        "cloudProvider": "aws",
        "awsRegion": region,
        # Renders --node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,
        # k8s.io/cluster-autoscaler/<cluster>: the tags EKS puts on every
        # managed node group's Auto Scaling group. Without clusterName the chart
        # renders no Deployment at all.
        "autoDiscovery": {"clusterName": cluster_name},
        "image": {"repository": v.CLUSTER_AUTOSCALER_IMAGE, "tag": image_tag(kubernetes_version)},
        "fullnameOverride": RELEASE_NAME,
        "rbac": {"create": True, "serviceAccount": {"create": True, "name": SERVICE_ACCOUNT},
                 **({"additionalRules": [dict(r) for r in PROVISIONING_RBAC]} if provisioning.needed(pools) else {})},
        "nodeSelector": dict(system_node_selector),
        "resources": RESOURCES,
        "securityContext": dict(POD_SECURITY),
        "containerSecurityContext": hardening.container_security_context(),
        "extraArgs": {**flags(pools), **provisioning_flags(pools, kubernetes_version)},
    }


def iam_policy(cluster_name: str, account_id: str, region: str, partition: str = "aws") -> str:
    """Describe broadly; scale and terminate only in groups tagged for this cluster.

    EKS tags each managed node group's Auto Scaling group
    k8s.io/cluster-autoscaler/<cluster> = owned, and Auto Scaling evaluates
    autoscaling:ResourceTag/<key> for SetDesiredCapacity and
    TerminateInstanceInAutoScalingGroup (EC2 Auto Scaling User Guide,
    "Control access with IAM": tag-based conditions). eks:DescribeNodegroup,
    which reads a zero-node group's labels and taints, is limited to this
    cluster's node groups.
    """
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "Discover", "Effect": "Allow", "Action": list(DESCRIBE_ACTIONS), "Resource": "*"},
            {"Sid": "ReadNodeGroupsOfThisCluster", "Effect": "Allow", "Action": ["eks:DescribeNodegroup"],
             "Resource": f"arn:{partition}:eks:{region}:{account_id}:nodegroup/{cluster_name}/*/*"},
            {"Sid": "ScaleGroupsOfThisCluster", "Effect": "Allow", "Action": list(SCALE_ACTIONS), "Resource": "*",
             "Condition": {"StringEquals": {
                 f"autoscaling:ResourceTag/{nodepool.AUTOSCALER_TAG_PREFIX}/{cluster_name}": "owned"}}},
        ],
    })
