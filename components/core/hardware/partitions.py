"""AWS partitions: which one a region belongs to, and its DNS suffix (pure).

Every ARN names its partition (arn:aws:..., arn:aws-cn:..., arn:aws-us-gov:...), and an
ARN of another partition than the account's does not exist there. The program asks the
provider (aws.get_partition); bootstrap and the offline mocks know only a region and ask
partition_of. The table is botocore's data/endpoints.json, partitions[].regionRegex and
dnsSuffix (botocore 1.44; tests/test_partitions.py checks every region botocore knows).
Service principals are another matter: in aws-cn and aws-us-gov, ec2, eks and
pods.eks keep `<service>.amazonaws.com` (EKS User Guide, China edition, pod-id-role and
auto-create-node-role; terraform-provider-aws servicePrincipalNameForPartition: in aws-cn only
codedeploy, elasticmapreduce and logs use amazonaws.com.cn), so no principal here changes.
"""

from __future__ import annotations

import re

# (partition, regionRegex, dnsSuffix), as botocore's endpoints.json has them.
PARTITIONS: tuple[tuple[str, str, str], ...] = (
    ("aws", r"^(us|eu|ap|sa|ca|me|af|il|mx)\-\w+\-\d+$", "amazonaws.com"),
    ("aws-cn", r"^cn\-\w+\-\d+$", "amazonaws.com.cn"),
    ("aws-us-gov", r"^us\-gov\-\w+\-\d+$", "amazonaws.com"),
    ("aws-iso", r"^us\-iso\-\w+\-\d+$", "c2s.ic.gov"),
    ("aws-iso-b", r"^us\-isob\-\w+\-\d+$", "sc2s.sgov.gov"),
    ("aws-iso-e", r"^eu\-isoe\-\w+\-\d+$", "cloud.adc-e.uk"),
    ("aws-iso-f", r"^us\-isof\-\w+\-\d+$", "csp.hci.ic.gov"),
    ("aws-eusc", r"^eusc\-(de)\-\w+\-\d+$", "amazonaws.eu"),
)


def partition_of(region: str) -> str:
    """The partition of `region` (us-gov-west-1 -> aws-us-gov); ValueError for a name no partition has."""
    for partition, pattern, _ in PARTITIONS:
        if re.match(pattern, region):
            return partition
    raise ValueError(f"{region!r} is in no AWS partition")


def dns_suffix(partition: str) -> str:
    """The partition's DNS suffix (aws-cn -> amazonaws.com.cn)."""
    return next(suffix for name, _, suffix in PARTITIONS if name == partition)
