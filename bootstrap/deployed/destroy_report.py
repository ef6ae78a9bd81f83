"""What `pulumi destroy` of a stack will delete, what it keeps, and what it leaves to you (pure).

Read from the stack's state (`pulumi stack export`, resources as apitype
ResourceV3 dicts) and its config; no cloud call. `bootstrap.verbs.destroy` prints
it before asking, and the kept part again afterwards.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from components.core import images
from components.core.config import NAMESPACE, StackConfig

BUCKET = "aws:s3/bucket:Bucket"
FILE_SYSTEM = "aws:fsx/lustreFileSystem:LustreFileSystem"
LINK = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
CLUSTER = "aws:eks/cluster:Cluster"
KMS_KEY = "aws:kms/key:Key"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
VPC = "aws:ec2/vpc:Vpc"
CACHE_RULE = "aws:ecr/pullThroughCacheRule:PullThroughCacheRule"


@dataclass
class DestroyReport:
    stack: str
    resource_count: int = 0
    steps: list[str] = field(default_factory=list)  # what the destroy does, in order
    deleted: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # stays in the account, and what it costs or needs
    kept_bucket: str | None = None  # the bucket a next stack can adopt
    bucket_to_delete: str | None = None  # a bucket the destroy deletes, with whatever it holds
    exports: list[str] = field(default_factory=list)  # s3 links exported before deletion
    cache_prefixes: list[str] = field(default_factory=list)  # ECR prefixes swept again after the destroy

    def adopt_line(self) -> str | None:
        """The exact command that makes the next `pulumi up` of this stack link the kept bucket."""
        if self.kept_bucket is None:
            return None
        return f"pulumi config set --path '{NAMESPACE}:storage.bucketName' {self.kept_bucket} --stack {self.stack}"

    def render(self) -> str:
        out = [f"Destroy of stack {self.stack}: {self.resource_count} resources"]
        out += ["", "In this order (parts that do not depend on each other go in parallel):"] + [f"  {i}. {s}" for i, s in enumerate(self.steps, 1)]
        out += ["", "Deleted:"] + [f"  - {d}" for d in self.deleted]
        out += ["", "Kept:"] + ([f"  - {k}" for k in self.kept] or ["  (nothing)"])
        return "\n".join(out)


def _out(resource: dict[str, Any], key: str) -> Any:
    return (resource.get("outputs") or {}).get(key)


def _of(resources: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    return [r for r in resources if r.get("type") == type_]


def build(resources: list[dict[str, Any]], cfg: StackConfig) -> DestroyReport:
    """The report for a state's `resources` under the stack's config."""
    live = [r for r in resources if r.get("custom") and not r.get("delete")
            and not str(r.get("type", "")).startswith("pulumi:providers:")]
    owned = [r for r in live if not r.get("external")]
    report = DestroyReport(stack=cfg.stack, resource_count=len(owned))
    retained = [r for r in owned if r.get("retainOnDelete")]

    kube = Counter(r["type"].split(":")[-1] for r in owned if r["type"].startswith("kubernetes:"))
    if kube:
        report.steps.append(f"{sum(kube.values())} Kubernetes objects: jobs first (their pods get SIGTERM and "
                            "their grace period), then the queue, the volume claim, operators and charts")
    groups = sorted(_out(r, "nodeGroupName") or r.get("id", "") for r in _of(owned, NODE_GROUP))
    if groups:
        report.steps.append(f"node groups {', '.join(groups)}: every node terminates")
        report.deleted.append(f"{len(groups)} node groups and their instances")

    _image_cache(report, resources, cfg)
    _storage(report, owned, cfg)

    clusters = [_out(r, "name") or r.get("id") for r in _of(owned, CLUSTER)]
    if clusters:
        report.steps.append(f"EKS cluster {', '.join(clusters)} (about 10 minutes)")
        report.deleted.append(f"EKS cluster {', '.join(clusters)} with its add-ons, roles and access entries")
    for key in _of(owned, KMS_KEY):
        days = int(_out(key, "deletionWindowInDays") or 30)
        report.kept.append(f"KMS key {key.get('id')} (EKS secrets): pending deletion for {days} days, then gone; "
                           f"`aws kms cancel-key-deletion --key-id {key.get('id')}` within that window undoes it")
    for vpc in _of(owned, VPC):
        report.steps.append(f"network {vpc.get('id')}: interfaces the VPC CNI left in the private subnets are "
                            "deleted first, then subnets, NAT gateways and the VPC")
        report.deleted.append(f"VPC {vpc.get('id')} with its subnets, NAT gateways and Elastic IPs")
    for group in _of(retained, LOG_GROUP):
        name = _out(group, "name") or group.get("id")
        retention = _out(group, "retentionInDays")
        report.kept.append(f"CloudWatch log group {name} (control-plane logs, expiring after "
                           f"{int(retention) if retention else 'its retention in'} days): the next `pulumi up` "
                           "of this cluster name adopts it; delete it by hand if you do not come back")
    other = Counter(r["type"] for r in retained if r["type"] not in (BUCKET, LOG_GROUP)
                    and not r["type"].startswith("aws:s3/"))
    report.kept += [f"{n} x {t} (retained on delete)" for t, n in sorted(other.items())]
    return report


def _storage(report: DestroyReport, owned: list[dict[str, Any]], cfg: StackConfig) -> None:
    links = _of(owned, LINK)
    minutes = cfg.storage.export_timeout_minutes
    for link in links:
        target = _out(link, "dataRepositoryPath")
        report.exports.append(target)
        report.steps.append(f"export {_out(link, 'fileSystemPath') or '/'} of {_out(link, 'fileSystemId')} to "
                            f"{target} with a data repository task (up to {minutes} min; if it fails or times "
                            "out, the destroy stops here and the file system keeps its data), then unlink it")
    for fs in _of(owned, FILE_SYSTEM):
        kind = _out(fs, "deploymentType") or "FSx for Lustre"
        if links:
            fate = "its files are in S3"
        elif _out(fs, "skipFinalBackup") is False:
            fate = "a final backup is kept (billed until you delete it)"
        else:
            fate = "NOT linked to S3 and no final backup: its files are lost"
        report.steps.append(f"file system {fs.get('id')} ({kind}) once its tasks end")
        report.deleted.append(f"FSx for Lustre {fs.get('id')}: {fate}")

    if cfg.storage.bucket_name is not None:
        report.kept_bucket = cfg.storage.bucket_name
        report.kept.append(f"s3://{cfg.storage.bucket_name}, adopted by storage.bucketName: never touched by the "
                           "stack")
    for bucket in _of(owned, BUCKET):
        name = _out(bucket, "bucket") or bucket.get("id")
        if bucket.get("retainOnDelete"):
            report.kept_bucket = name
            report.kept.append(f"s3://{name} with every object, version and setting (retainOnDestroy): S3 storage "
                               "keeps billing; the next stack adopts it with the line printed at the end")
        else:
            report.bucket_to_delete = name
            report.deleted.append(f"s3://{name} with every object and version (retainOnDestroy: false; only with "
                                  "--delete-bucket-data when it holds any)")


def cache_prefixes(resources: list[dict[str, Any]], cfg: StackConfig) -> list[str]:
    """The ECR prefixes the stack's pull-through cache rules use: each rule's in the state (a replaced one
    pending deletion included), and, with the cache on, the cluster's own (a destroy resumed after the rule
    went; components.core.images.cache_prefix, unique per exact cluster name)."""
    found = [_out(r, "ecrRepositoryPrefix") or (r.get("inputs") or {}).get("ecrRepositoryPrefix") or r.get("id")
             for r in resources if r.get("type") == CACHE_RULE and not r.get("external")]
    if cfg.image_cache:
        found.append(images.cache_prefix(cfg.cluster_name))
    return list(dict.fromkeys(p for p in found if p))


def _image_cache(report: DestroyReport, resources: list[dict[str, Any]], cfg: StackConfig) -> None:
    report.cache_prefixes = cache_prefixes(resources, cfg)
    for prefix in report.cache_prefixes:
        report.steps.append(f"ECR pull-through cache {prefix}: the repositories cached under {prefix}/ are deleted, "
                            "then its rule; a node may pull meanwhile, so once the destroy has ended and no node is "
                            "left they are deleted again")
        report.deleted.append(f"every repository cached under {prefix}/ (copies of public ECR images)")
