"""Parse a whole stack: the top-level keys, then each section's parser; every problem at once.

`parse()` turns the raw `gpucluster:*` keys of a stack (strings, structured
values as JSON, exactly as the Pulumi engine hands them to the program) into
a `StackConfig`, or raises `ConfigError` listing every problem with its key
path, the bad value and what is allowed. Nothing here touches the cloud, so
a bad config registers nothing. The README's configuration reference
documents every key read here.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import re
from dataclasses import replace
from typing import Any

from components.spec import catalog, namespaces
from components.spec.config.jobs import parse_jobs
from components.spec.config.pools import parse_pools
from components.spec.config.storage import parse_storage
from components.spec.config.types import (
    ADDON_VERSION,
    ADDONS,
    AMI_RELEASE,
    AZ_NAME,
    CLUSTER_NAME,
    DEFAULT_KUBERNETES_VERSION,
    DNS_LABEL,
    EKS_VERSIONS,
    KNOWN_NAMESPACES,
    NAMESPACE,
    NAT_MODES,
    PAUSE_MODES,
    STRUCTURED_KEYS,
    NetworkConfig,
    StackConfig,
    SystemNodesConfig,
    VersionPins,
)
from components.spec.validation import (
    ConfigError,
    Problems,
    Section,
    check_cidr,
    check_principal_arn,
    check_public_cidr,
)
from components.spec.zones import ZONE_ID_PATTERN


def parse(raw: dict[str, Any], project: str = NAMESPACE, stack: str = "dev") -> StackConfig:
    """Validate a stack's raw config (`{"gpucluster:network": "<json>", ...}`)."""
    problems = Problems()
    region = raw.get("aws:region")
    if not isinstance(region, str) or region not in eks_regions():
        problems.bad("aws:region", region, "must be set to an AWS region that has EKS, such as us-east-1"
                     if region in (None, "") else f"not a region with EKS; regions: {', '.join(eks_regions())}")
        region = ""

    ours: dict[str, Any] = {}
    unreadable: set[str] = set()
    for key, value in raw.items():
        ns, colon, name = key.partition(":")
        if not colon:
            problems.add(key, f"unknown key: stack config keys carry a namespace; did you mean {NAMESPACE}:{key}?")
            continue
        if ns not in KNOWN_NAMESPACES:
            problems.add(key, f"unknown namespace {ns!r}; this program reads {NAMESPACE}:* and the providers' "
                              f"keys ({', '.join(KNOWN_NAMESPACES[1:])})")
            continue
        if ns != NAMESPACE or value == "":
            # "" is how Pulumi.yaml spells "no default" for optional strings.
            continue
        if name in STRUCTURED_KEYS and isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                problems.bad(key, value, "must be structured YAML (a list or mapping)")
                unreadable.add(name)
                continue
        ours[name] = value

    top = Section(ours, NAMESPACE, problems, sep=":")
    cfg = _parse_stack(top, problems, project, stack, region, unreadable)
    top.finish()
    profile, role_arn = _aws_identity(raw, problems)
    problems.raise_if_any()
    return replace(cfg, aws_profile=profile, aws_role_arn=role_arn)


@functools.cache
def eks_regions() -> tuple[str, ...]:
    """Regions with EKS, from botocore's endpoint data (the commercial, China and GovCloud partitions)."""
    import botocore.session

    session = botocore.session.get_session()
    return tuple(sorted({r for partition in ("aws", "aws-cn", "aws-us-gov")
                         for r in session.get_available_regions("eks", partition_name=partition)}))


def _aws_identity(raw: dict[str, Any], problems: Problems) -> tuple[str | None, str | None]:
    """aws:profile and the last role of aws:assumeRoles: the identity `aws eks get-token` must use too."""
    profile = raw.get("aws:profile") or None
    roles = raw.get("aws:assumeRoles")
    if isinstance(roles, str) and roles:
        try:
            roles = json.loads(roles)
        except json.JSONDecodeError:
            roles = None
    role_arn = None
    if isinstance(roles, list) and roles:
        last = roles[-1] if isinstance(roles[-1], dict) else {}
        role_arn = last.get("roleArn") or None
        if last.get("externalId"):
            # `aws eks get-token --role-arn` has no external ID option.
            problems.add(f"aws:assumeRoles[{len(roles) - 1}].externalId",
                         "the Kubernetes provider authenticates with `aws eks get-token --role-arn`, which cannot "
                         "pass an external ID; assume that role in an aws:profile instead")
    return (profile if isinstance(profile, str) else None), role_arn


def _parse_stack(top: Section, problems: Problems, project: str, stack: str, region: str,
                 unreadable: set[str]) -> StackConfig:
    cluster_name = top.string("clusterName", f"{project}-{stack}", pattern=CLUSTER_NAME,
                              allowed="an EKS cluster name: letters, digits, - and _, "
                                      "starting with a letter or digit", max_len=100)
    version = _kubernetes_version(top, problems)
    admins = top.string_list("adminPrincipalArns", lambda _p, v: check_principal_arn(v), "an IAM ARN")
    if not admins and not top.raw.get("adminPrincipalArns"):
        # Nobody else gets access: the Kubernetes provider acts as the deployer,
        # who must be listed (EKS access entries; bootstrap_cluster_creator_admin is off).
        problems.add(top.key_path("adminPrincipalArns"),
                     "is required: the IAM roles or users given cluster admin, the one you deploy with first "
                     "(`python -m bootstrap whoami` prints it)")
    cidrs = top.string_list("publicAccessCidrs", lambda _p, v: check_public_cidr(v), "a CIDR block")
    in_vpc = top.boolean("deployerInVpc", False)
    if not cidrs and not top.raw.get("publicAccessCidrs") and not in_vpc:
        # The Kubernetes provider runs where `pulumi up` runs (EKS User Guide,
        # "Cluster API server endpoint": a private endpoint is reachable from the VPC only).
        problems.add(top.key_path("publicAccessCidrs"),
                     "is empty, so the API endpoint would be private-only and unreachable from where pulumi runs: "
                     "every Kubernetes resource, and `pulumi destroy`, would fail; list the public CIDR you deploy "
                     "from (your address: `curl -s https://checkip.amazonaws.com`, as a /32), or set "
                     f"{NAMESPACE}:deployerInVpc: true when pulumi runs inside the VPC")
    gpu_az = top.string("gpuAvailabilityZone", pattern=f"{AZ_NAME}|{ZONE_ID_PATTERN}",
                        allowed="an availability zone name such as us-east-1a or a zone ID such as use1-az6")
    if gpu_az and region and not re.fullmatch(ZONE_ID_PATTERN, gpu_az) and not gpu_az.startswith(region):
        problems.bad(top.key_path("gpuAvailabilityZone"), gpu_az, f"must be a zone of aws:region {region!r}")
    namespace = top.string("trainingNamespace", "training", pattern=DNS_LABEL, max_len=63,
                           allowed="a Kubernetes namespace name (lowercase DNS label)")
    if namespace in namespaces.RESERVED:
        problems.bad(top.key_path("trainingNamespace"), namespace,
                     f"is a namespace the cluster's system or operators own; not one of {', '.join(namespaces.RESERVED)}")
        namespace = None
    paused = top.boolean("paused", False)
    pause_mode = top.enum("pauseMode", tuple(PAUSE_MODES), "finish")
    versions = _versions(top.section("versions"), version)
    prices = _prices(top.section("prices"))
    tags = top.string_map("tags", key_pattern=r"(?!aws:)[\w .:/=+@-]{1,128}",
                          key_what="a valid AWS tag key (1-128 characters, not starting with aws:)")

    network = _network(top.section("network"))
    system_nodes = _system_nodes(top.section("systemNodes"))
    pools, declared_pools = parse_pools(top, problems)
    if "gpuPools" in unreadable:
        declared_pools = None
    storage = parse_storage(top.section("storage"))
    jobs = parse_jobs(top, problems, pools, declared_pools, prices)

    return StackConfig(
        project=project, stack=stack, region=region, cluster_name=cluster_name or "",
        kubernetes_version=version, admin_principal_arns=admins, public_access_cidrs=cidrs,
        gpu_availability_zone=gpu_az, network=network, system_nodes=system_nodes,
        gpu_pools=pools, storage=storage, jobs=jobs, versions=versions, training_namespace=namespace or "training",
        prices=prices, tags=tags, deployer_in_vpc=bool(in_vpc), paused=bool(paused),
        pause_mode=pause_mode or "finish",
    )


def _versions(sec: Section, kubernetes_version: str) -> VersionPins:
    """The pinned AMI release and add-on versions: required, each matching the cluster's version."""
    upgrade = "run `python -m bootstrap upgrade --stack <stack> --write` to resolve and pin them"
    p = sec.problems
    ami = sec.string("amiReleaseVersion", pattern=AMI_RELEASE,
                     allowed="an EKS AMI release version such as 1.35.6-20260714")
    if ami is None and not sec.has("amiReleaseVersion"):
        p.add(sec.key_path("amiReleaseVersion"), f"is required (the AL2023 AMI release of every node group); {upgrade}")
    elif ami is not None and not ami.startswith(f"{kubernetes_version}."):
        p.bad(sec.key_path("amiReleaseVersion"), ami,
              f"must be a release of Kubernetes {kubernetes_version} (kubernetesVersion); {upgrade}")
    addons_sec = sec.section("addons")
    addons = {}
    for name in ADDONS:
        value = addons_sec.string(name, pattern=ADDON_VERSION, allowed="an EKS add-on version such as v1.20.4-eksbuild.1")
        if value is None and not addons_sec.has(name):
            p.add(addons_sec.key_path(name), f"is required (the pinned {name} add-on version); {upgrade}")
        elif value is not None and name == "kube-proxy" and not value.startswith(f"v{kubernetes_version}."):
            # kube-proxy follows the control plane's minor (EKS User Guide, managing-kube-proxy).
            p.bad(addons_sec.key_path(name), value, f"must be a kube-proxy of Kubernetes {kubernetes_version}; {upgrade}")
        elif value is not None:
            addons[name] = value
    addons_sec.finish()
    sec.finish()
    return VersionPins(ami_release_version=ami or "", addons=addons)


def _kubernetes_version(top: Section, problems: Problems) -> str:
    path = top.key_path("kubernetesVersion")
    value = top.raw.get("kubernetesVersion")
    if isinstance(value, float) or (isinstance(value, str) and re.fullmatch(r"1\.\d", value)):
        # YAML reads 1.30 as the float 1.3 (and the engine passes "1.3"): a
        # one-digit minor is what is left of x.y0, so suggest that.
        text = str(value)
        meant = f"{text}0" if re.fullmatch(r"1\.\d", text) else text
        problems.bad(path, value, f"quote the version (\"{meant}\") so YAML keeps it a string; "
                                  f"allowed: {', '.join(EKS_VERSIONS)}")
        top.skip("kubernetesVersion")
        return DEFAULT_KUBERNETES_VERSION
    version = top.enum("kubernetesVersion", EKS_VERSIONS, DEFAULT_KUBERNETES_VERSION) or DEFAULT_KUBERNETES_VERSION
    from components.spec.versions import CLUSTER_AUTOSCALER_IMAGE_TAGS

    if version not in CLUSTER_AUTOSCALER_IMAGE_TAGS:
        # The autoscaler's minor must match the cluster's (components.spec.versions).
        problems.bad(path, version, "has no cluster-autoscaler release pinned; supported: "
                                    f"{', '.join(CLUSTER_AUTOSCALER_IMAGE_TAGS)}")
    return version


def _prices(sec: Section) -> dict[str, float]:
    prices = {}
    for name in list(sec.raw):
        if name not in catalog.CATALOG:
            sec.skip(name)
            sec.problems.add(sec.key_path(name), f"unknown instance type; known: {', '.join(catalog.CATALOG)}")
            continue
        value = sec.number(name, minimum=0, exclusive_minimum=True)
        if value is not None:
            prices[name] = value
    sec.finish()
    return prices


def _network(sec: Section) -> NetworkConfig:
    d = NetworkConfig()
    cidr = sec.string("cidr", d.cidr)
    if cidr is not None and _check_vpc_cidr(sec, cidr):
        cidr = d.cidr
    nat = sec.enum("natGateways", NAT_MODES, d.nat_gateways)
    az_count = sec.integer("azCount", d.az_count, minimum=2, maximum=6)
    sec.finish()
    return NetworkConfig(cidr=cidr or d.cidr, nat_gateways=nat or d.nat_gateways, az_count=az_count or d.az_count)


_PRIVATE_RANGES = tuple(ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
                                                           "100.64.0.0/10"))


def _check_vpc_cidr(sec: Section, cidr: str) -> bool:
    """Report a bad VPC CIDR; True when it was bad."""
    path = sec.key_path("cidr")
    reason = check_cidr(cidr)
    if reason:
        sec.problems.bad(path, cidr, reason)
        return True
    net = ipaddress.IPv4Network(cidr)
    bad = False
    if not any(net.subnet_of(p) for p in _PRIVATE_RANGES):
        sec.problems.bad(path, cidr, "must be a private range (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 "
                                     "or 100.64.0.0/10)")
        bad = True
    # /16 to /20: a private and a public subnet per zone, and enough pod IPs
    # for the VPC CNI on 8-GPU nodes.
    if not 16 <= net.prefixlen <= 20:
        sec.problems.bad(path, cidr, "prefix length must be from /16 to /20")
        bad = True
    return bad


def _system_nodes(sec: Section) -> SystemNodesConfig:
    d = SystemNodesConfig()
    itype = sec.enum("instanceType", catalog.SYSTEM_TYPES, d.instance_type)
    count = sec.integer("count", d.count, minimum=1, maximum=20)
    disk = sec.integer("diskSizeGiB", d.disk_size_gib, minimum=20, maximum=1024)
    sec.finish()
    return SystemNodesConfig(instance_type=itype or d.instance_type, count=count or d.count,
                             disk_size_gib=disk or d.disk_size_gib)


def raise_problems(problems: list) -> None:
    """Raise ConfigError for problems found outside parse() (e.g. by invokes)."""
    if problems:
        raise ConfigError(problems)


def raw_from_engine() -> dict[str, Any]:
    """Every config key the Pulumi engine gave this program, as strings."""
    from pulumi.runtime import config as runtime_config

    raw: dict[str, Any] = dict(runtime_config.get_config_env())
    raw.update(runtime_config.CONFIG.get())
    return raw


def load() -> StackConfig:
    """The current stack's config, validated (raises ConfigError)."""
    import pulumi

    return parse(raw_from_engine(), pulumi.get_project(), pulumi.get_stack())
