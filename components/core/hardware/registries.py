"""Where EKS keeps its add-on images in each region (the EFA device plugin is one).

EKS User Guide, "View Amazon container image registries for Amazon EKS
add-ons" (add-ons-images): most regions use account 602401143452; the
regions below use their own account. Cross-checked with awslabs/amazon-eks-ami
templates/al2/runtime/get-ecr-uri.sh, which also gives ap-east-2 its own host
(the guide's row for it names ap-east-1, a typo) and adds ap-southeast-5.
Nodes pull with the node role's AmazonEC2ContainerRegistryPullOnly policy.
"""

from __future__ import annotations

DEFAULT_ACCOUNT = "602401143452"
REGION_ACCOUNTS = {
    "af-south-1": "877085696533",
    "ap-east-1": "800184023465",
    "ap-east-2": "533267051163",
    "ap-south-2": "900889452093",
    "ap-southeast-3": "296578399912",
    "ap-southeast-4": "491585149902",
    "ap-southeast-5": "151610086707",
    "ap-southeast-6": "333609536671",
    "ap-southeast-7": "121268973566",
    "ca-west-1": "761377655185",
    "cn-north-1": "918309763551",
    "cn-northwest-1": "961992271922",
    "eu-central-2": "900612956339",
    "eu-south-1": "590381155156",
    "eu-south-2": "455263428931",
    "il-central-1": "066635153087",
    "me-central-1": "759879836304",
    "me-south-1": "558608220178",
    "mx-central-1": "730335286997",
    "us-gov-east-1": "151742754352",
    "us-gov-west-1": "013241004608",
}


def addon_registry(region: str) -> str:
    """The EKS add-on image registry host of `region` (China regions end in .amazonaws.com.cn)."""
    account = REGION_ACCOUNTS.get(region, DEFAULT_ACCOUNT)
    domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"{account}.dkr.ecr.{region}.{domain}"
