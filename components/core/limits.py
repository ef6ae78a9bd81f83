"""What AWS or Kubernetes would refuse minutes into a deploy, caught before any resource registers.

- Tags: at most 50 on a resource, ours included (EC2, EKS and Auto Scaling:
  "Tag naming limits and requirements", Tagging AWS Resources User Guide);
  a pool's node group and its Auto Scaling group carry the most of ours:
  the autoscaler's node-template tags, the node group's scaling tag, and on
  the Auto Scaling group EKS's own beside the stack's, which reach the
  instances from there. `Name` is ours on every resource that has one.
- Node labels: ours (gpucluster.io/*, the EFA and accelerator labels) are
  what plugins, the autoscaler and jobs select on, so a pool may not set
  them; and kubelet may only set labels of kubernetes.io and k8s.io under
  kubelet.kubernetes.io/ and node.kubernetes.io/ (Kubernetes docs,
  "NodeRestriction" admission plugin), or the node never registers.
- Names: a job may not take the name of a pool's fabric test (one object
  in the training namespace).
"""

from __future__ import annotations

from components.core import node_updates
from components.core.config import NAMESPACE, StackConfig
from components.core.config.stack import entries
from components.core.kube import launcher, nodepool
from components.core.problems import Problem, show

TAGS_PER_RESOURCE_MAX = 50
OUR_TAG_KEYS = ("Name",)
# The subnets' own: Name, the cluster's shared tag and the load balancer role (components.aws.network).
SUBNET_TAGS = 3
# EKS's on a managed node group's Auto Scaling group: eks:cluster-name, eks:nodegroup-name,
# kubernetes.io/cluster/<name> and the two cluster-autoscaler discovery tags (EKS User Guide, "Managed
# node groups"; five, as terraform-provider-aws #46288 counts them). aws:-prefixed ones do not count.
EKS_ASG_TAGS = 5
OUR_LABEL_DOMAIN = "gpucluster.io"
KUBELET_DOMAINS = ("kubernetes.io", "k8s.io")
KUBELET_ALLOWED_PREFIXES = ("kubelet.kubernetes.io/", "node.kubernetes.io/")

NEEDS = frozenset({"gpu_pools", "jobs", "tags"})


def problems(cfg: StackConfig, valid: set[str]) -> list[Problem]:
    if not valid >= NEEDS:
        return []
    return _tag_problems(cfg) + _label_problems(cfg) + _name_problems(cfg)


def ours_per_resource(cfg: StackConfig) -> int:
    """The most tags the program and EKS put on one resource beside the stack's: a pool's node group or its
    Auto Scaling group, usually."""
    pools = [pool for _, pool in [*entries(cfg.gpu_pools), *entries(cfg.cpu_pools)]]
    node_groups = [len(node_updates.node_group_tags(pool, cfg.cluster_name)) for pool in pools]
    asgs = [EKS_ASG_TAGS + len(nodepool.node_template_tags(pool)) for pool in pools]
    return max([SUBNET_TAGS, *node_groups, *asgs])


def _tag_problems(cfg: StackConfig) -> list[Problem]:
    out = []
    for key in OUR_TAG_KEYS:
        if key in cfg.tags:
            out.append(Problem(f"{NAMESPACE}:tags.{key}", f"is set by the program on each resource ({key} = "
                                                          "<cluster>-<role>); remove it"))
    ours = ours_per_resource(cfg)
    room = TAGS_PER_RESOURCE_MAX - ours
    if len(cfg.tags) > room:
        out.append(Problem(f"{NAMESPACE}:tags", f"has {len(cfg.tags)} tags; with the program's {ours} on a pool's "
                                                f"Auto Scaling group that is over AWS's {TAGS_PER_RESOURCE_MAX} per resource: at "
                                                f"most {room}"))
    return out


def _label_problems(cfg: StackConfig) -> list[Problem]:
    out = []
    for i, pool in entries(cfg.gpu_pools):
        for key in pool.labels:
            path = f"{NAMESPACE}:gpuPools[{i}].labels.{key}"
            domain = key.split("/", 1)[0] if "/" in key else ""
            if key in nodepool.node_labels(pool.model_copy(update={"labels": {}})) or \
                    domain == OUR_LABEL_DOMAIN or domain.endswith("." + OUR_LABEL_DOMAIN):
                out.append(Problem(path, f"key {show(key)} is the program's own (plugins, the autoscaler and jobs "
                                         f"select on it); use a key of your own domain"))
            elif any(domain == d or domain.endswith("." + d) for d in KUBELET_DOMAINS) and \
                    not key.startswith(KUBELET_ALLOWED_PREFIXES):
                out.append(Problem(path, f"key {show(key)} is in a domain kubelet may not label (NodeRestriction): "
                                         f"the node would never join; kubernetes.io and k8s.io keys only under "
                                         f"{' or '.join(KUBELET_ALLOWED_PREFIXES)}"))
    return out


def _name_problems(cfg: StackConfig) -> list[Problem]:
    tests = {launcher.nccl_test_name(pool): pool.name for _, pool in entries(cfg.gpu_pools) if pool.fabric_test}
    return [Problem(f"{NAMESPACE}:jobs[{i}].name", f"got {show(job.name)}; pool {tests[job.name]!r}'s fabric test "
                                                   "has that name; choose another")
            for i, job in entries(cfg.jobs) if job.name in tests]
