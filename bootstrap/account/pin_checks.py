"""Preflight: the pinned AMI release and add-on versions exist for the cluster's Kubernetes version.

A pin nobody publishes fails a node group or an add-on minutes into `pulumi
up` (CreateNodegroup "Requested release version ... is not valid",
CreateAddon "Addon version specified is not supported"). The AMI release is
looked up in the public SSM parameters EKS publishes per AMI
(/aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/x86_64/<variant>/
amazon-eks-node-al2023-x86_64-<variant>-<k8s>-v<date>/release_version; EKS
User Guide, "Retrieve recommended Amazon Linux AMI IDs"), for the variants
the stack runs: nvidia (GPU pools) and standard (system nodes). Add-ons
through DescribeAddonVersions for the cluster's version.
"""

from __future__ import annotations

from bootstrap.account.checks import FAIL, PASS, Check, Context, error_code
from components.core import config

AMI_ROOT = "/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/x86_64/{variant}"
VARIANTS = ("nvidia", "standard")  # GPU pools (AL2023_x86_64_NVIDIA), system nodes (AL2023_x86_64_STANDARD)
MAX_PAGES = 50  # of get_parameters_by_path, when the name EKS gives the release is not the one we expect
UPGRADE = "`python -m bootstrap upgrade --stack {stack} --write` pins published ones"


def ami_parameter(k8s: str, variant: str, release: str) -> str:
    """1.35.6-20260714 -> .../nvidia/amazon-eks-node-al2023-x86_64-nvidia-1.35-v20260714/release_version."""
    date = release.rsplit("-", 1)[-1]
    name = f"amazon-eks-node-al2023-x86_64-{variant}-{k8s}-v{date}"
    return f"{AMI_ROOT.format(k8s=k8s, variant=variant)}/{name}/release_version"


def _ami_published(ssm, k8s: str, variant: str, release: str) -> bool:
    try:
        return ssm.get_parameter(Name=ami_parameter(k8s, variant, release))["Parameter"]["Value"] == release
    except Exception as err:
        if error_code(err) != "ParameterNotFound":
            raise
    # Named otherwise? Every release of the variant carries its release_version: look for ours.
    pages = ssm.get_paginator("get_parameters_by_path").paginate(
        Path=AMI_ROOT.format(k8s=k8s, variant=variant), Recursive=True, PaginationConfig={"MaxItems": 10 * MAX_PAGES})
    return any(p["Name"].endswith("/release_version") and p["Value"] == release
               for page in pages for p in page["Parameters"])


def ami_release(ctx: Context) -> list[Check]:
    cfg: config.StackConfig = ctx.cfg
    k8s, release = cfg.kubernetes_version, cfg.versions.ami_release_version
    hint = UPGRADE.format(stack=cfg.stack)
    ssm = ctx.client("ssm")
    out = []
    for variant in VARIANTS:
        name = f"AMI release {release} ({variant})"
        if _ami_published(ssm, k8s, variant, release):
            out.append(Check(name, PASS, f"published for Kubernetes {k8s} (AL2023 {variant})"))
        else:
            out.append(Check(name, FAIL, f"not published for Kubernetes {k8s} (AL2023 {variant}) in {cfg.region}; "
                                         f"node groups would fail to create; {hint}"))
    return out


def addon_versions(ctx: Context) -> list[Check]:
    cfg: config.StackConfig = ctx.cfg
    k8s, hint, eks = cfg.kubernetes_version, UPGRADE.format(stack=cfg.stack), ctx.client("eks")
    out = []
    for addon, pinned in sorted(cfg.versions.addons.items()):
        response = eks.describe_addon_versions(addonName=addon, kubernetesVersion=k8s)
        offered = [av["addonVersion"] for item in response.get("addons", []) for av in item.get("addonVersions", [])
                   if any(c.get("clusterVersion") == k8s for c in av.get("compatibilities", []))]
        if pinned in offered:
            out.append(Check(f"add-on {addon} {pinned}", PASS, f"offered for Kubernetes {k8s}"))
        else:
            newest = f" (newest: {max(offered, key=_version_key)})" if offered else ""
            out.append(Check(f"add-on {addon} {pinned}", FAIL,
                             f"not offered for Kubernetes {k8s}{newest}; the add-on would fail to install; {hint}"))
    return out


def _version_key(version: str) -> tuple[int, ...]:
    import re

    return tuple(int(n) for n in re.findall(r"\d+", version))
