"""Rules on one AWS resource at a time: IMDSv2, EBS/FSx/EKS encryption, the API endpoint, pinned add-ons and AMIs.

Each check takes a Resource and the policy's config and returns violation
messages. Type tokens and property names are the ones the program
registers (pulumi-aws 7, camelCase as the engine carries them).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from .base import Resource, falsy, get, is_list, is_unknown, problem, truthy

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
EKS_CLUSTER = "aws:eks/cluster:Cluster"
EKS_ADDON = "aws:eks/addon:Addon"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"


def imdsv2_required(res: Resource, config: Mapping[str, Any]) -> list[str]:
    """metadataOptions.httpTokens must be "required" (IMDSv2 only), unless the metadata endpoint is off.

    EC2 API, LaunchTemplateInstanceMetadataOptionsRequest: HttpTokens
    "optional" serves IMDSv1 and v2; when unset the default is "required"
    only if the AMI's ImdsSupport is v2.0, else "optional"
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_LaunchTemplateInstanceMetadataOptionsRequest.html).
    """
    tokens = get(res.props, "metadataOptions.httpTokens")
    endpoint = get(res.props, "metadataOptions.httpEndpoint")
    if is_unknown(tokens) or tokens == "required" or endpoint == "disabled":
        return []
    what = (f"metadataOptions.httpTokens is {tokens!r}, so IMDSv1 answers" if tokens
            else "metadataOptions.httpTokens is not set, so IMDSv1 answers unless the AMI declares ImdsSupport v2.0")
    return [problem(res, what, "set metadata_options={'http_endpoint': 'enabled', 'http_tokens': 'required', "
                               "'http_put_response_hop_limit': 1} on the launch template")]


def ebs_encrypted(res: Resource, config: Mapping[str, Any]) -> list[str]:
    """Every EBS block device of a launch template has `encrypted: "true"`, and the root one is declared.

    EC2 API, LaunchTemplateEbsBlockDeviceRequest.Encrypted
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_LaunchTemplateEbsBlockDeviceRequest.html);
    pulumi-aws 7 types it as a string ("true"/"false"). A template that
    declares no EBS device leaves the root volume to the AMI's snapshot and
    the account's encryption-by-default setting, which no preview can see.
    """
    mappings = get(res.props, "blockDeviceMappings")
    if is_unknown(mappings):
        return []
    ebs_devices = [m for m in (mappings or []) if isinstance(m, Mapping) and isinstance(m.get("ebs"), Mapping)]
    if not ebs_devices:
        return [problem(res, "declares no EBS block device, so the root volume's encryption is whatever the AMI "
                             "snapshot and the account default say",
                        "declare the root device: block_device_mappings=[{'device_name': '/dev/xvda', "
                        "'ebs': {'encrypted': 'true', ...}}]")]
    out = []
    for mapping in ebs_devices:
        encrypted = mapping["ebs"].get("encrypted")
        if is_unknown(encrypted) or truthy(encrypted):
            continue
        device = mapping.get("deviceName") or "?"
        out.append(problem(res, f"the EBS volume at {device} is not encrypted (ebs.encrypted is {encrypted!r})",
                           f"set 'encrypted': 'true' in the ebs block of {device}"))
    return out


def fsx_encrypted(res: Resource, config: Mapping[str, Any]) -> list[str]:
    """FSx for Lustre is always encrypted at rest; a customer-managed key only when the config asks for it.

    "Encryption of data at rest is automatically enabled when you create an
    Amazon FSx for Lustre file system"; persistent file systems take a KMS
    key (default: the AWS-managed aws/fsx key), scratch ones use keys
    managed by Amazon FSx
    (https://docs.aws.amazon.com/fsx/latest/LustreGuide/encryption-at-rest.html).
    So by default nothing can violate this rule: it documents that the
    default is relied on. `requireCustomerManagedKey: true` in the pack
    config makes a PERSISTENT_* file system without kmsKeyId a violation.
    """
    if not config.get("requireCustomerManagedKey"):
        return []
    deployment = get(res.props, "deploymentType", "SCRATCH_1")  # CreateFileSystemLustreConfiguration default
    kms = get(res.props, "kmsKeyId")
    if is_unknown(deployment) or not str(deployment).startswith("PERSISTENT") or kms:
        return []
    return [problem(res, f"{deployment} file system without kmsKeyId: encrypted with the AWS-managed aws/fsx key, "
                         "and the pack config asks for a customer-managed key",
                    "set kms_key_id to a customer-managed KMS key ARN")]


def eks_secrets_encrypted(res: Resource, config: Mapping[str, Any]) -> list[str]:
    """The cluster envelope-encrypts Kubernetes Secrets with a KMS key (encryptionConfig, resources [secrets]).

    EKS User Guide, "Encrypt Kubernetes secrets with KMS on existing
    clusters" (https://docs.aws.amazon.com/eks/latest/userguide/enable-kms.html).
    """
    config_value = get(res.props, "encryptionConfig")
    if is_unknown(config_value):
        return []
    configs = config_value if is_list(config_value) else [config_value] if config_value else []
    for entry in configs:
        resources = get(entry, "resources")
        key = get(entry, "provider.keyArn")
        secrets = is_unknown(resources) or (is_list(resources) and "secrets" in resources)
        if secrets and key:  # an unknown key ARN (a key created in this update) is a key
            return []
    return [problem(res, "Kubernetes Secrets are not envelope-encrypted with a KMS key "
                         "(encryptionConfig with resources ['secrets'] and provider.keyArn)",
                    "set encryption_config={'provider': {'key_arn': <KMS key ARN>}, 'resources': ['secrets']}")]


def _is_world(cidr: Any) -> bool:
    try:
        return ipaddress.ip_network(str(cidr), strict=False).prefixlen == 0
    except ValueError:
        return False


def eks_endpoint_not_public(res: Resource, config: Mapping[str, Any]) -> list[str]:
    """The public API endpoint, when on, is limited to CIDRs none of which is 0.0.0.0/0 or ::/0.

    EKS API, VpcConfigRequest: endpointPublicAccess defaults to true and
    publicAccessCidrs to 0.0.0.0/0
    (https://docs.aws.amazon.com/eks/latest/APIReference/API_VpcConfigRequest.html;
    pulumi-aws 7 docs for ClusterVpcConfig say the same).
    """
    vpc = get(res.props, "vpcConfig")
    public = get(vpc, "endpointPublicAccess", True)
    if is_unknown(vpc) or is_unknown(public) or falsy(public):
        return []
    cidrs = get(vpc, "publicAccessCidrs")
    if is_unknown(cidrs):
        return []
    fix = ("list only the CIDRs that run pulumi and kubectl in gpucluster:publicAccessCidrs "
           "(vpc_config.public_access_cidrs), or set endpoint_public_access=False and reach the API from the VPC")
    if not cidrs:
        return [problem(res, "the public API endpoint is on with no publicAccessCidrs, and EKS then opens it to "
                             "0.0.0.0/0", fix)]
    world = [c for c in cidrs if _is_world(c)]
    if world:
        return [problem(res, f"the public API endpoint is open to {', '.join(world)}", fix)]
    return []


def addon_version_pinned(res: Resource, config: Mapping[str, Any]) -> list[str]:
    """An EKS add-on names its addonVersion; without one EKS installs its default for the cluster version,
    which moves as AWS publishes builds (https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateAddon.html)."""
    version = get(res.props, "addonVersion")
    if version:
        return []
    addon = get(res.props, "addonName", "?")
    return [problem(res, f"add-on {addon} has no addonVersion, so EKS picks the version",
                    f"pin it in gpucluster:versions.addons.{addon} (addon_version='vX.Y.Z-eksbuild.N'; "
                    "`python -m bootstrap upgrade` lists the current ones)")]


def nodegroup_release_pinned(res: Resource, config: Mapping[str, Any]) -> list[str]:
    """A managed node group names its AMI releaseVersion; unset, EKS takes the latest AMI for the
    Kubernetes version (pulumi-aws 7 NodeGroup.release_version: "Defaults to latest version for
    Kubernetes version"). A CUSTOM AMI type takes its AMI from the launch template instead."""
    if get(res.props, "releaseVersion") or get(res.props, "amiType") == "CUSTOM":
        return []
    return [problem(res, "no releaseVersion, so every replacement of the group takes whatever AMI is latest",
                    "pin gpucluster:versions.amiReleaseVersion (release_version='1.35.x-YYYYMMDD')")]
