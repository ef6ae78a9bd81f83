"""The cluster's own keys: its Kubernetes version, the VPC, the system node group, the pinned versions."""

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, WithJsonSchema

from components.core import versions
from components.core.config.base import Choice, Int, Model, Text, given, problem, rule
from components.core.config.describe import DefaultText, Missing
from components.core.config.text.patterns import VPC_CIDR
from components.core.config.values import ADDON_VERSION, AMI_RELEASE, check_vpc_cidr
from components.core.hardware import catalog
from components.core.problems import show

# EKS Kubernetes versions on 2026-12-03 (EKS User Guide, "Understand the
# Kubernetes version lifecycle on EKS",
# https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html):
# 1.35 and 1.36 in standard support; 1.32-1.34 in extended support, which
# costs $0.60 instead of $0.10 per cluster-hour (https://aws.amazon.com/eks/pricing/).
EKS_STANDARD_VERSIONS = ("1.35", "1.36")
EKS_EXTENDED_VERSIONS = ("1.32", "1.33", "1.34")
EKS_VERSIONS = EKS_EXTENDED_VERSIONS + EKS_STANDARD_VERSIONS
DEFAULT_KUBERNETES_VERSION = "1.35"

NAT_MODES = ("single", "perAz")

# The EKS managed add-ons the program installs; each is pinned per stack
# (gpucluster:versions.addons) so a later `pulumi up` never moves one.
ADDONS = ("vpc-cni", "kube-proxy", "eks-pod-identity-agent", "coredns", "eks-node-monitoring-agent",
          "aws-fsx-csi-driver", "aws-ebs-csi-driver")
UPGRADE_HINT = "run `python -m bootstrap upgrade --stack <stack> --write` to resolve and pin them"


def support_type(version: str) -> str:
    """Stay on standard support where the version has it; extended costs 6x."""
    return "STANDARD" if version in EKS_STANDARD_VERSIONS else "EXTENDED"


def _unquoted_version(value: Any) -> Any:
    # YAML reads 1.30 as the float 1.3 (and the engine passes "1.3"): a
    # one-digit minor is what is left of x.y0, so suggest that.
    if isinstance(value, float) or (isinstance(value, str) and re.fullmatch(r"1\.\d", value)):
        text = str(value)
        meant = f"{text}0" if re.fullmatch(r"1\.\d", text) else text
        raise problem(f"got {show(text)}; quote the version (\"{meant}\") so YAML keeps it a string; "
                      f"allowed: {', '.join(EKS_VERSIONS)}")
    return value


def _has_autoscaler(version: str) -> str:
    # The autoscaler's minor must match the cluster's (components.core.versions).
    if version not in versions.CLUSTER_AUTOSCALER_IMAGE_TAGS:
        raise problem(f"got {show(version)}; has no cluster-autoscaler release pinned; supported: "
                      f"{', '.join(versions.CLUSTER_AUTOSCALER_IMAGE_TAGS)}")
    return version

KubernetesVersion = Annotated[Choice(*EKS_VERSIONS), BeforeValidator(_unquoted_version),
                              AfterValidator(_has_autoscaler)]
AddonVersion = Text(ADDON_VERSION, "an EKS add-on version such as v1.20.4-eksbuild.1", short="`vX.Y.Z-eksbuild.N`")


class NetworkConfig(Model):
    """The VPC: a private and a public subnet per zone."""

    cidr: Text(allowed="a private IPv4 CIDR block, /16 to /20", short="CIDR", check=check_vpc_cidr,
               json_pattern=VPC_CIDR) = Field(
        "10.0.0.0/16", description="VPC range: private (RFC 1918 or 100.64/10), /16 to /20")
    nat_gateways: Choice(*NAT_MODES) = Field("single", description="one NAT gateway (in the GPU zone) or one per zone")
    az_count: Int(ge=2, le=6) = Field(
        2, description="zones of the cluster's subnets (EKS needs two, in zone IDs it accepts); the GPU zone is one of "
                       "them unless EKS refuses its ID, then it gets subnets besides")


class SystemNodesConfig(Model):
    """The on-demand node group for add-ons, operators and launchers."""

    instance_type: Choice(*catalog.SYSTEM_TYPES) = Field(
        "m7i.xlarge", description="on-demand AL2023 nodes for add-ons and operators")
    count: Int(ge=1, le=20) = Field(2, description="fixed size of the system node group")
    disk_size_gib: Int(ge=20, le=1024) = Field(50, description="root volume")


def _addons_required(schema: dict[str, Any]) -> None:
    # Every add-on is pinned: `addons` has a default only so that _every_addon can name each one missing.
    schema["required"] = [*schema.get("required", []), "addons"]


class VersionPins(Model):
    """What a later `pulumi up` must not move: AMI release and add-on versions (bootstrap upgrade writes them)."""

    model_config = ConfigDict(**Model.model_config, json_schema_extra=_addons_required)

    ami_release_version: Annotated[
        Text(AMI_RELEASE, "an EKS AMI release version such as 1.35.6-20260714", short="`<k8s x.y.z>-<YYYYMMDD>`"),
        Missing(f"is required (the AL2023 AMI release of every node group); {UPGRADE_HINT}")] = Field(
        description="the AL2023 AMI release of every node group, a release of `kubernetesVersion` (`bootstrap "
                    "upgrade` writes it)")
    addons: Annotated[dict[Choice(*ADDONS), AddonVersion], WithJsonSchema({
        "type": "object", "additionalProperties": False, "required": list(ADDONS),
        "properties": {a: {"type": "string", "pattern": f"^(?:{ADDON_VERSION})$"} for a in ADDONS}}),
        DefaultText("required: every one")] = Field(
        default_factory=dict, description="pinned versions of " + ", ".join(ADDONS) + " (kube-proxy of "
                                          "`kubernetesVersion`'s minor)")

    @rule()
    def _every_addon(self, given_keys: dict[str, Any]):
        # On the keys as given: a pin with a bad version is reported as that, not as missing.
        addons = given(given_keys, VersionPins, "addons", {})
        for name in ADDONS if isinstance(addons, dict) else ():
            if name not in addons:
                yield f"addons.{name}", f"is required (the pinned {name} add-on version); {UPGRADE_HINT}"
