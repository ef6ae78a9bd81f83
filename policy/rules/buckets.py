"""Rules on S3 buckets: encryption and public-access-block resources present, data kept on destroy.

A bucket's encryption and public access block are separate resources in
pulumi-aws 7, tied to the bucket by their `bucket` input: these are stack
rules, looking across resources (in CrossGuard, a StackValidationPolicy).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .base import Resource, get, is_list, is_unknown, problem, related, truthy

BUCKET_TYPES = ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2")
SSE_TYPES = ("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
             "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2")
PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
ACCOUNT_PUBLIC_ACCESS_BLOCK = "aws:s3/accountPublicAccessBlock:AccountPublicAccessBlock"
# S3 API, ServerSideEncryptionByDefault.SSEAlgorithm
# (https://docs.aws.amazon.com/AmazonS3/latest/API/API_ServerSideEncryptionByDefault.html).
SSE_ALGORITHMS = ("AES256", "aws:kms", "aws:kms:dsse")
# S3 User Guide, "Blocking public access to your Amazon S3 storage": the four
# settings (https://docs.aws.amazon.com/AmazonS3/latest/userguide/access-control-block-public-access.html).
BLOCK_SETTINGS = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")


def _buckets(resources: Sequence[Resource]) -> list[Resource]:
    return [r for r in resources if r.type in BUCKET_TYPES]


def _attached(companion: Resource, buckets: Sequence[Resource]) -> set[str]:
    """The URNs of the buckets a companion resource's `bucket` (the bucket's name: its id and its
    `bucket` property) refers to."""
    return {b.urn for b in related(companion, "bucket", buckets, known=("bucket",))}


def s3_encrypted(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """Every bucket has a BucketServerSideEncryptionConfiguration with a valid algorithm.

    S3 has encrypted new objects with SSE-S3 by default since January 2023
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/default-encryption-faq.html);
    the rule asks for the configuration as a resource anyway, so the choice
    (SSE-S3 or a KMS key) is in the program and a drift shows in a preview.
    """
    buckets = _buckets(resources)
    configs = [r for r in resources if r.type in SSE_TYPES]
    out: list[tuple[Resource | None, str]] = []
    for bucket in buckets:
        mine = [c for c in configs if bucket.urn in _attached(c, buckets)]
        if not mine:
            out.append((bucket, problem(bucket, "has no BucketServerSideEncryptionConfiguration",
                                        "add aws.s3.BucketServerSideEncryptionConfiguration(bucket=bucket.id, "
                                        "rules=[{'apply_server_side_encryption_by_default': "
                                        "{'sse_algorithm': 'AES256'}}]) (or aws:kms with a key)")))
            continue
        for sse in mine:
            rules = get(sse.props, "rules")
            if is_unknown(rules):
                continue
            algorithms = [get(rule, "applyServerSideEncryptionByDefault.sseAlgorithm")
                          for rule in (rules if is_list(rules) else [])]
            if not any(is_unknown(a) or a in SSE_ALGORITHMS for a in algorithms):
                out.append((bucket, problem(sse, f"encrypts bucket {bucket.name} with no default algorithm "
                                                 f"(found {algorithms or 'no rules'})",
                                            f"set apply_server_side_encryption_by_default.sse_algorithm to one "
                                            f"of {', '.join(SSE_ALGORITHMS)}")))
    return out


def _blocks_all(block: Resource) -> list[str]:
    """The settings of a public access block that are not true (unknown ones count as set)."""
    return [k for k in BLOCK_SETTINGS if not (is_unknown(get(block.props, k)) or truthy(get(block.props, k)))]


def s3_public_access_blocked(resources: Sequence[Resource],
                             config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """Every bucket has a BucketPublicAccessBlock with all four settings true (or the account has one)."""
    buckets = _buckets(resources)
    if any(not _blocks_all(a) for a in resources if a.type == ACCOUNT_PUBLIC_ACCESS_BLOCK):
        return []
    blocks = [r for r in resources if r.type == PUBLIC_ACCESS_BLOCK]
    fix = ("add aws.s3.BucketPublicAccessBlock(bucket=bucket.id, block_public_acls=True, "
           "block_public_policy=True, ignore_public_acls=True, restrict_public_buckets=True)")
    out: list[tuple[Resource | None, str]] = []
    for bucket in buckets:
        mine = [b for b in blocks if bucket.urn in _attached(b, buckets)]
        if not mine:
            out.append((bucket, problem(bucket, "has no BucketPublicAccessBlock", fix)))
            continue
        for block in mine:
            off = _blocks_all(block)
            if off:
                out.append((bucket, problem(block, f"leaves {', '.join(off)} off for bucket {bucket.name}",
                                            f"set {', '.join(off)} to true")))
    return out


def bucket_retained(res: Resource, config: Mapping[str, Any]) -> list[str]:
    """The bucket outlives `pulumi destroy`: protect, or retainOnDelete.

    CrossGuard never sees retainOnDelete (see base.Resource), so when it is
    unknown the rule takes `forceDestroy` false as the sign: the program
    sets retain_on_delete and force_destroy=False together
    (gpucluster:storage.retainOnDestroy), and without force_destroy the
    provider refuses to delete a bucket that holds objects.
    """
    if res.protect or res.retain_on_delete:
        return []
    force = get(res.props, "forceDestroy")
    if res.retain_on_delete is None and not (is_unknown(force) or truthy(force)):
        return []
    what = ("neither retainOnDelete nor protect is set" + (" and forceDestroy is true" if truthy(force) else "")
            + ": `pulumi destroy` deletes the bucket and the checkpoints in it")
    return [problem(res, what, "set gpucluster:storage.retainOnDestroy: true (retain_on_delete=True, "
                               "force_destroy=False), or protect=True")]
