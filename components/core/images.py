"""Where nodes pull images from: public ECR through the stack's ECR pull-through cache (pure).

A pull-through cache rule keeps a copy of every public.ecr.aws image a node
pulls in the account's private registry of the cluster's region, under the
rule's repository prefix: `public.ecr.aws/<repo>:<tag>` becomes
`<account>.dkr.ecr.<region>.amazonaws.com/<prefix>/<repo>:<tag>`, same
digest (ECR User Guide, "Pulling an image with a pull through cache rule").
The first pull fetches it from public ECR, every later one is a private ECR
pull: in-region, its layers through the VPC's S3 gateway endpoint (ECR
serves layers from S3 pre-signed URLs), not the NAT gateway, and no public
ECR rate limit. Public ECR needs no upstream credentials (ECR User Guide,
"Sync an upstream registry", supported upstreams); nvcr.io, which NVIDIA's
images come from, is not a supported upstream at all.
"""

from __future__ import annotations

import hashlib
import re

PUBLIC_ECR = "public.ecr.aws"
# CreatePullThroughCacheRule ecrRepositoryPrefix (ECR API Reference; botocore's ecr model, shape
# PullThroughCacheRuleRepositoryPrefix): 2-30 characters of
# ([a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(\/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*\/?|ROOT). terraform-provider-aws
# (internal/service/ecr/pull_through_cache_rule.go) checks the stricter one below: one of . _ - between
# runs. ECR reads the prefix as `<prefix>/` (the same reference), so `gpu-a` never covers `gpu-a-2/...`.
PREFIX_MAX = 30
PREFIX_PATTERN = r"(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*"
# A cluster name kept as its own prefix: lowercase letters and digits in runs joined by single hyphens.
# EKS names are case-sensitive and take `_` (CreateCluster name: [0-9A-Za-z][A-Za-z0-9-_]*, 1-100), so
# every other name gets a hash of its exact spelling, after a hyphen; a kept name never ends the way a
# hashed one does (`-` and 8 hex digits), so no name is kept as another name's hashed prefix.
_KEPT = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_HASHED = re.compile(r".*-[0-9a-f]{8}")
HASH_CHARS = 8

# The training namespace's ConfigMap that says where cached images are (components.aws.image_cache
# writes it; `bootstrap submit` and `bootstrap validate` read it): data[CONFIG_MAP_KEY] = cache_base().
CONFIG_MAP_NAME = "gpucluster-images"
CONFIG_MAP_KEY = "publicEcrCache"

# Images the stack runs that do not come through the cache, and why (README, "Images").
NOT_CACHED = {
    "registry.k8s.io": "cluster-autoscaler, Kueue, JobSet (public, no rate limit; a cache rule for it would "
                       "take a second rule)",
    "ghcr.io": "Kubeflow Trainer (a GitHub cache rule needs a Secrets Manager credential)",
    "docker.io": "the MPI Operator, TensorBoard's tensorflow image (a Docker Hub cache rule needs a Secrets "
                 "Manager credential)",
    "quay.io": "Prometheus, node-exporter and the rest of kube-prometheus-stack",
    "nvcr.io": "the NVIDIA device plugin and DCGM exporter (nvcr.io is not a supported upstream)",
    "EKS's registries": "the EFA device plugin and the EKS add-ons (already private ECR in the region)",
}


def cache_prefix(cluster_name: str) -> str:
    """The rule's repository prefix: one per exact cluster name, readable, valid for ECR, deterministic.

    A name that is already a lowercase, single-hyphen ECR prefix of 2-30 characters is kept as it is
    (`gpucluster-dev`); any other is its lowercase slug, cut to fit, plus `-` and the first 8 hex digits of
    the SHA-256 of the exact name: `GPU_A` -> `gpu-a-<hash>`, so it differs from `gpu-a` and `gpu_a`.
    Names past 30 characters get the same form as before this rule, so their prefix did not change.
    """
    if 2 <= len(cluster_name) <= PREFIX_MAX and _KEPT.fullmatch(cluster_name) and not _HASHED.fullmatch(cluster_name):
        return cluster_name
    slug = re.sub(r"[^a-z0-9]+", "-", cluster_name.lower()).strip("-") or "gpucluster"
    digest = hashlib.sha256(cluster_name.encode()).hexdigest()[:HASH_CHARS]
    return f"{slug[:PREFIX_MAX - HASH_CHARS - 1].rstrip('-')}-{digest}"


def registry_host(account_id: str, region: str) -> str:
    """The account's private registry in `region` (China regions end in .amazonaws.com.cn)."""
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"{account_id}.dkr.ecr.{region}.{suffix}"


def cache_base(account_id: str, region: str, cluster_name: str) -> str:
    """Where cached public ECR images are pulled from: <registry>/<prefix>."""
    return f"{registry_host(account_id, region)}/{cache_prefix(cluster_name)}"


def through_cache(image: str, base: str | None) -> str:
    """`image` pulled through the cache at `base` when it is a public ECR image; unchanged otherwise."""
    if base is None or not image.startswith(f"{PUBLIC_ECR}/"):
        return image
    return f"{base}/{image[len(PUBLIC_ECR) + 1:]}"
