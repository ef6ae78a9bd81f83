"""The stack config, parsed and validated into frozen dataclasses.

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
from dataclasses import dataclass, field, replace
from typing import Any

from components.spec import catalog, namespaces
from components.spec.validation import (
    ConfigError,
    Problems,
    Section,
    check_cidr,
    check_principal_arn,
    check_public_cidr,
    show,
    unique,
)
from components.spec.zones import ZONE_ID_PATTERN

NAMESPACE = "gpucluster"

# EKS Kubernetes versions on 2026-12-03 (EKS User Guide, "Understand the
# Kubernetes version lifecycle on EKS",
# https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html):
# 1.35 and 1.36 in standard support; 1.32-1.34 in extended support, which
# costs $0.60 instead of $0.10 per cluster-hour (https://aws.amazon.com/eks/pricing/).
EKS_STANDARD_VERSIONS = ("1.35", "1.36")
EKS_EXTENDED_VERSIONS = ("1.32", "1.33", "1.34")
EKS_VERSIONS = EKS_EXTENDED_VERSIONS + EKS_STANDARD_VERSIONS
DEFAULT_KUBERNETES_VERSION = "1.35"


def support_type(version: str) -> str:
    """Stay on standard support where the version has it; extended costs 6x."""
    return "STANDARD" if version in EKS_STANDARD_VERSIONS else "EXTENDED"

# https://docs.aws.amazon.com/eks/latest/userguide/service-quotas.html
MAX_NODES_PER_MANAGED_NODE_GROUP = 450

CAPACITY_TYPES = ("ON_DEMAND", "SPOT", "CAPACITY_BLOCK")
EFA_MODES = ("auto", "required", "disabled")
PLACEMENT_MODES = ("auto", "cluster", "none")
NAT_MODES = ("single", "perAz")
LAUNCHERS = ("mpirun", "torchrun")
CLEAN_POD_POLICIES = ("None", "Running", "All")

# FSx for Lustre User Guide, "Managing storage capacity" and "Throughput".
FSX_DEPLOYMENT_TYPES = ("SCRATCH_2", "PERSISTENT_2")
FSX_PERSISTENT_2_THROUGHPUT = (125, 250, 500, 1000)
FSX_MAX_CAPACITY_GIB = 2_400 * 1_000
# Metadata IOPS for USER_PROVISIONED mode (FSx Lustre User Guide,
# "Lustre metadata performance configuration").
# FSx counts 1,200 GiB as 1.2 TiB when it quotes throughput per TiB.
FSX_GIB_PER_TIB = 1000
FSX_METADATA_IOPS = (1500, 3000, 6000, 12000) + tuple(range(24000, 192001, 12000))

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_CLUSTER_NAME = r"[0-9A-Za-z][A-Za-z0-9_-]*"  # EKS CreateCluster name pattern
_RESERVATION_ID = r"cr-[0-9a-f]{17}"
_ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_S3_PREFIX = r"[A-Za-z0-9!_.*'()-]+(/[A-Za-z0-9!_.*'()-]+)*/"
_AZ = r"[a-z]{2}(-gov)?-[a-z]+-\d[a-z]"
_K8S_LABEL_KEY = r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_K8S_LABEL_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?"

# Top-level keys whose values are structured (JSON from the engine).
_STRUCTURED = {
    "adminPrincipalArns", "publicAccessCidrs", "network", "systemNodes", "gpuPools",
    "storage", "jobs", "prices", "tags", "versions",
}
# Config namespaces a stack may use: ours, and the providers' own.
KNOWN_NAMESPACES = (NAMESPACE, "aws", "kubernetes", "random", "pulumi")

# The EKS managed add-ons the program installs; each is pinned per stack
# (gpucluster:versions.addons) so a later `pulumi up` never moves one.
ADDONS = ("vpc-cni", "kube-proxy", "eks-pod-identity-agent", "coredns", "eks-node-monitoring-agent",
          "aws-fsx-csi-driver")
_ADDON_VERSION = r"v\d+\.\d+\.\d+(-[a-z0-9]+)*-eksbuild\.\d+"  # v1.20.4-eksbuild.1
# AL2023 AMI release of a managed node group: <Kubernetes x.y.z>-<build date>
# (EKS API NodeGroup.releaseVersion; the SSM .../recommended/release_version parameter).
_AMI_RELEASE = r"\d+\.\d+\.\d+-\d{8}"

IDLE_MINUTES_DEFAULT = 3
IDLE_MINUTES_MAX = 60


@dataclass(frozen=True)
class NetworkConfig:
    cidr: str = "10.0.0.0/16"
    nat_gateways: str = "single"
    az_count: int = 2


@dataclass(frozen=True)
class SystemNodesConfig:
    instance_type: str = "m7i.xlarge"
    count: int = 2
    disk_size_gib: int = 50


@dataclass(frozen=True)
class GpuPoolConfig:
    name: str
    instance_type: str
    min_nodes: int = 0
    desired_nodes: int = 0
    max_nodes: int = 1
    capacity_type: str = "ON_DEMAND"
    capacity_reservation_id: str | None = None
    efa: str = "auto"
    placement_group: str = "auto"
    root_volume_gib: int = 200
    local_nvme_raid0: bool = True
    fabric_test: bool = False
    labels: dict[str, str] = field(default_factory=dict)
    # Minutes a node may sit without training pods before the autoscaler removes it.
    idle_minutes: int = IDLE_MINUTES_DEFAULT

    @property
    def instance(self) -> catalog.InstanceType:
        return catalog.get(self.instance_type)

    @property
    def efa_enabled(self) -> bool:
        return self.efa != "disabled" and self.instance.efa_supported

    @property
    def uses_placement_group(self) -> bool:
        """A cluster placement group, unless a reservation already fixes placement."""
        if not self.efa_enabled or self.placement_group == "none":
            return False
        if self.placement_group == "cluster":
            return True
        # auto: a placement group forced onto an ODCR or Capacity Block fails
        # to launch (eksctl #7949, terraform-aws-eks #3699).
        return self.capacity_reservation_id is None


@dataclass(frozen=True)
class FsxConfig:
    deployment_type: str = "SCRATCH_2"
    storage_capacity_gib: int = 1200
    throughput_per_tib: int | None = None  # PERSISTENT_2 only
    efa_enabled: bool = False
    metadata_iops: int | None = None  # None: AUTOMATIC metadata mode
    backup_retention_days: int = 0
    final_backup_on_delete: bool = False

    @property
    def aggregate_throughput_mbps(self) -> float:
        """Capacity (TiB) x per-unit throughput; SCRATCH_2 is 200 MB/s/TiB.

        FSx counts 1,200 GiB as 1.2 TiB (FSx Lustre User Guide, "Amazon FSx for
        Lustre performance": 1.2 TiB SCRATCH_2 gives 240 MB/s), so TiB = GiB / 1000.
        """
        per_tib = self.throughput_per_tib if self.throughput_per_tib is not None else 200
        return self.storage_capacity_gib / FSX_GIB_PER_TIB * per_tib


@dataclass(frozen=True)
class StorageConfig:
    fsx: FsxConfig = FsxConfig()
    dataset_prefix: str = "datasets/"
    checkpoint_prefix: str = "checkpoints/"
    retain_on_destroy: bool = True
    read_target_mbps_per_gpu: float = 100.0
    s3_link: bool = True


@dataclass(frozen=True)
class ModelConfig:
    """What the sizing checks need to know about a job's model."""

    params: float
    tokens: float | None = None
    zero_stage: int = 3
    tp: int = 1
    pp: int = 1
    mfu: float | None = 0.4
    recompute: bool = False


@dataclass(frozen=True)
class RunPolicyConfig:
    clean_pod_policy: str = "Running"
    ttl_seconds_after_finished: int | None = None
    active_deadline_seconds: int | None = None
    backoff_limit: int = 3


@dataclass(frozen=True)
class JobConfig:
    name: str
    pool: str
    nodes: int
    launcher: str
    image: str
    command: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    gpus_per_node: int | None = None  # None: every GPU of the node
    model: ModelConfig | None = None
    run_policy: RunPolicyConfig = RunPolicyConfig()
    max_restarts: int = 3
    mount_path: str = "/fsx"
    max_cost_usd: float | None = None  # becomes a run deadline from nodes x the pool's price


@dataclass(frozen=True)
class VersionPins:
    """What a later `pulumi up` must not move: AMI release and add-on versions (bootstrap upgrade writes them)."""

    ami_release_version: str
    addons: dict[str, str]


@dataclass(frozen=True)
class StackConfig:
    project: str
    stack: str
    region: str
    cluster_name: str
    kubernetes_version: str
    admin_principal_arns: tuple[str, ...]
    public_access_cidrs: tuple[str, ...]
    gpu_availability_zone: str | None
    network: NetworkConfig
    system_nodes: SystemNodesConfig
    gpu_pools: tuple[GpuPoolConfig, ...]
    storage: StorageConfig
    jobs: tuple[JobConfig, ...]
    versions: VersionPins = VersionPins("", {})
    training_namespace: str = "training"
    prices: dict[str, float] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    deployer_in_vpc: bool = False  # pulumi runs inside the VPC: a private-only endpoint is reachable
    aws_profile: str | None = None  # aws:profile, passed to `aws eks get-token`
    aws_role_arn: str | None = None  # the last role of aws:assumeRoles, likewise

    def pool(self, name: str) -> GpuPoolConfig:
        return next(p for p in self.gpu_pools if p.name == name)

    def price(self, instance_type: str) -> float:
        return catalog.price(instance_type, self.prices)


# ---------------------------------------------------------------------------
# Parsing


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
        if name in _STRUCTURED and isinstance(value, str):
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
    cluster_name = top.string("clusterName", f"{project}-{stack}", pattern=_CLUSTER_NAME,
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
    gpu_az = top.string("gpuAvailabilityZone", pattern=f"{_AZ}|{ZONE_ID_PATTERN}",
                        allowed="an availability zone name such as us-east-1a or a zone ID such as use1-az6")
    if gpu_az and region and not re.fullmatch(ZONE_ID_PATTERN, gpu_az) and not gpu_az.startswith(region):
        problems.bad(top.key_path("gpuAvailabilityZone"), gpu_az, f"must be a zone of aws:region {region!r}")
    namespace = top.string("trainingNamespace", "training", pattern=_DNS_LABEL, max_len=63,
                           allowed="a Kubernetes namespace name (lowercase DNS label)")
    if namespace in namespaces.RESERVED:
        problems.bad(top.key_path("trainingNamespace"), namespace,
                     f"is a namespace the cluster's system or operators own; not one of {', '.join(namespaces.RESERVED)}")
        namespace = None
    versions = _versions(top.section("versions"), version)
    prices = _prices(top.section("prices"))
    tags = top.string_map("tags", key_pattern=r"(?!aws:)[\w .:/=+@-]{1,128}",
                          key_what="a valid AWS tag key (1-128 characters, not starting with aws:)")

    network = _network(top.section("network"))
    system_nodes = _system_nodes(top.section("systemNodes"))
    pools, declared_pools = _pools(top, problems)
    if "gpuPools" in unreadable:
        declared_pools = None
    storage = _storage(top.section("storage"))
    jobs = _jobs(top, problems, pools, declared_pools, prices)

    return StackConfig(
        project=project, stack=stack, region=region, cluster_name=cluster_name or "",
        kubernetes_version=version, admin_principal_arns=admins, public_access_cidrs=cidrs,
        gpu_availability_zone=gpu_az, network=network, system_nodes=system_nodes,
        gpu_pools=pools, storage=storage, jobs=jobs, versions=versions, training_namespace=namespace or "training",
        prices=prices, tags=tags, deployer_in_vpc=bool(in_vpc),
    )


def _versions(sec: Section, kubernetes_version: str) -> VersionPins:
    """The pinned AMI release and add-on versions: required, each matching the cluster's version."""
    upgrade = "run `python -m bootstrap upgrade --stack <stack> --write` to resolve and pin them"
    p = sec.problems
    ami = sec.string("amiReleaseVersion", pattern=_AMI_RELEASE,
                     allowed="an EKS AMI release version such as 1.35.6-20260714")
    if ami is None and not sec.has("amiReleaseVersion"):
        p.add(sec.key_path("amiReleaseVersion"), f"is required (the AL2023 AMI release of every node group); {upgrade}")
    elif ami is not None and not ami.startswith(f"{kubernetes_version}."):
        p.bad(sec.key_path("amiReleaseVersion"), ami,
              f"must be a release of Kubernetes {kubernetes_version} (kubernetesVersion); {upgrade}")
    addons_sec = sec.section("addons")
    addons = {}
    for name in ADDONS:
        value = addons_sec.string(name, pattern=_ADDON_VERSION, allowed="an EKS add-on version such as v1.20.4-eksbuild.1")
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


def _pools(top: Section, problems: Problems) -> tuple[tuple[GpuPoolConfig, ...], set[str] | None]:
    """The valid pools, and every name declared (None when gpuPools itself is unreadable).

    Jobs on a declared but invalid pool are not reported again: one mistake, one message.
    """
    declared: set[str] | None = set()
    raw = top.raw.get("gpuPools")
    if raw is not None and not isinstance(raw, list):
        declared = None
    pools = []
    for path, item in top.items("gpuPools"):
        if isinstance(item, dict) and isinstance(item.get("name"), str) and declared is not None:
            declared.add(item["name"])
        pool = _pool(Section(item, path, problems))
        if pool is not None:
            pools.append((path, pool))
    unique(problems, [(f"{p}.name", pool.name) for p, pool in pools], "pool name")
    return tuple(pool for _, pool in pools), declared


def _pool(sec: Section) -> GpuPoolConfig | None:
    p = sec.problems
    name = sec.string("name", required=True, pattern=_DNS_LABEL, max_len=32,
                      allowed="a lowercase DNS label of at most 32 characters")
    itype = sec.string("instanceType", required=True, allowed="a GPU instance type")
    instance = None
    if itype is not None:
        if itype not in catalog.CATALOG:
            p.bad(sec.key_path("instanceType"), itype, f"allowed GPU types: {', '.join(catalog.GPU_TYPES)}")
        elif not catalog.get(itype).is_gpu:
            p.bad(sec.key_path("instanceType"), itype,
                  f"is not a GPU instance type; allowed: {', '.join(catalog.GPU_TYPES)}")
        else:
            instance = catalog.get(itype)
    min_nodes = sec.integer("minNodes", 0, minimum=0, maximum=MAX_NODES_PER_MANAGED_NODE_GROUP)
    max_nodes = sec.integer("maxNodes", required=True, minimum=1, maximum=MAX_NODES_PER_MANAGED_NODE_GROUP)
    desired = sec.integer("desiredNodes", min_nodes, minimum=0, maximum=MAX_NODES_PER_MANAGED_NODE_GROUP)
    if None not in (min_nodes, max_nodes) and min_nodes > max_nodes:
        p.add(sec.key_path("maxNodes"), f"got {max_nodes}; must be >= minNodes ({min_nodes})")
    elif None not in (min_nodes, max_nodes, desired) and not min_nodes <= desired <= max_nodes:
        p.add(sec.key_path("desiredNodes"),
              f"got {desired}; must be from minNodes ({min_nodes}) to maxNodes ({max_nodes})")

    capacity_type = sec.enum("capacityType", CAPACITY_TYPES, "ON_DEMAND")
    reservation = sec.string("capacityReservationId", pattern=_RESERVATION_ID,
                             allowed="a capacity reservation id, cr- and 17 hex digits")
    if capacity_type == "CAPACITY_BLOCK" and reservation is None and not sec.has("capacityReservationId"):
        p.add(sec.key_path("capacityReservationId"),
              "is required when capacityType is CAPACITY_BLOCK (the Capacity Block's reservation id, cr-...)")
    if capacity_type == "SPOT" and reservation is not None:
        p.bad(sec.key_path("capacityReservationId"), reservation,
              "must not be set with capacityType SPOT (reservations are on-demand or Capacity Blocks)")

    efa = sec.enum("efa", EFA_MODES, "auto")
    if instance is not None and efa == "required" and not instance.efa_supported:
        p.add(sec.key_path("efa"), f"got 'required', but {instance.name} has no EFA; use auto or disabled, "
                                   "or an EFA type such as p5.48xlarge")
    placement = sec.enum("placementGroup", PLACEMENT_MODES, "auto")
    efa_on = instance is not None and instance.efa_supported and efa != "disabled"
    if placement == "cluster" and instance is not None and not efa_on:
        p.add(sec.key_path("placementGroup"),
              f"got 'cluster', but the pool has no EFA ({instance.name}, efa {efa}); use auto or none")
    root = sec.integer("rootVolumeGiB", 200, minimum=50, maximum=16384)
    raid0 = sec.boolean("localNvmeRaid0", True)
    fabric_test = sec.boolean("fabricTest", False)
    if fabric_test and instance is not None:
        if not efa_on:
            p.add(sec.key_path("fabricTest"), f"needs an EFA pool; {instance.name} with efa {efa} has none")
        elif max_nodes is not None and max_nodes < 2:
            p.add(sec.key_path("fabricTest"), f"needs maxNodes >= 2 to test the fabric (maxNodes is {max_nodes})")
    labels = sec.string_map("labels", key_pattern=_K8S_LABEL_KEY, key_what="a Kubernetes label key",
                            value_check=lambda v: None if re.fullmatch(_K8S_LABEL_VALUE, v)
                            else "must be a Kubernetes label value (at most 63 alphanumerics, -, _ or .)")
    idle = sec.integer("idleMinutes", IDLE_MINUTES_DEFAULT, minimum=1, maximum=IDLE_MINUTES_MAX)
    sec.finish()
    if None in (name, instance, min_nodes, max_nodes, desired, capacity_type, efa, placement, root):
        return None
    return GpuPoolConfig(
        name=name, instance_type=instance.name, min_nodes=min_nodes, desired_nodes=desired,
        max_nodes=max_nodes, capacity_type=capacity_type, capacity_reservation_id=reservation,
        efa=efa, placement_group=placement, root_volume_gib=root, local_nvme_raid0=bool(raid0),
        fabric_test=bool(fabric_test), labels=labels, idle_minutes=idle or IDLE_MINUTES_DEFAULT,
    )


def _storage(sec: Section) -> StorageConfig:
    d = StorageConfig()
    fsx = _fsx(sec.section("fsx"))
    dataset = sec.string("datasetPrefix", d.dataset_prefix, pattern=_S3_PREFIX,
                         allowed="an S3 key prefix such as datasets/ (no leading /, ending in /)")
    checkpoint = sec.string("checkpointPrefix", d.checkpoint_prefix, pattern=_S3_PREFIX,
                            allowed="an S3 key prefix such as checkpoints/ (no leading /, ending in /)")
    if dataset and checkpoint and (dataset.startswith(checkpoint) or checkpoint.startswith(dataset)):
        sec.problems.bad(sec.key_path("checkpointPrefix"), checkpoint,
                         f"must not overlap datasetPrefix {dataset!r} (one S3 link each)")
    retain = sec.boolean("retainOnDestroy", d.retain_on_destroy)
    target = sec.number("readTargetMBpsPerGpu", d.read_target_mbps_per_gpu, minimum=0)
    s3_link = sec.boolean("s3Link", d.s3_link)
    if s3_link is not False and (fsx.backup_retention_days or fsx.final_backup_on_delete):
        # FSx Lustre User Guide, "Working with backups": backups are for persistent
        # file systems not linked to an S3 data repository; S3 is the durable copy.
        key = "backupRetentionDays" if fsx.backup_retention_days else "finalBackupOnDelete"
        sec.problems.add(f"{sec.key_path('fsx')}.{key}",
                         "FSx cannot back up a file system linked to S3 (the versioned bucket is the durable "
                         "copy); remove the backup settings or set storage.s3Link: false")
    sec.finish()
    return StorageConfig(fsx=fsx, s3_link=s3_link is not False, dataset_prefix=dataset or d.dataset_prefix,
                         checkpoint_prefix=checkpoint or d.checkpoint_prefix,
                         retain_on_destroy=d.retain_on_destroy if retain is None else retain,
                         read_target_mbps_per_gpu=d.read_target_mbps_per_gpu if target is None else target)


def _fsx(sec: Section) -> FsxConfig:
    p = sec.problems
    d = FsxConfig()
    kind = sec.enum("deploymentType", FSX_DEPLOYMENT_TYPES, d.deployment_type)
    persistent = kind == "PERSISTENT_2"
    capacity = sec.integer("storageCapacityGiB", d.storage_capacity_gib, minimum=1200, maximum=FSX_MAX_CAPACITY_GIB)
    if capacity is not None and capacity not in (1200, 2400) and capacity % 2400:
        p.bad(sec.key_path("storageCapacityGiB"), capacity, "allowed: 1200, 2400, or a multiple of 2400")
        capacity = None

    throughput = None
    if sec.has("throughputPerTiB") and not persistent:
        p.bad(sec.key_path("throughputPerTiB"), sec.raw["throughputPerTiB"],
              f"applies to PERSISTENT_2 only; {kind} has a fixed 200 MB/s/TiB, remove the key")
        sec.skip("throughputPerTiB")
    elif persistent:
        throughput = sec.integer("throughputPerTiB", 250)
        if throughput is not None and throughput not in FSX_PERSISTENT_2_THROUGHPUT:
            p.bad(sec.key_path("throughputPerTiB"), throughput,
                  f"allowed: {', '.join(map(str, FSX_PERSISTENT_2_THROUGHPUT))} (MB/s/TiB)")
            throughput = None

    efa = sec.boolean("efaEnabled", False)
    if efa and not persistent:
        p.bad(sec.key_path("efaEnabled"), True, f"EFA-enabled FSx needs deploymentType PERSISTENT_2, not {kind}")
    metadata_iops = None
    if sec.has("metadataIops") and not persistent:
        p.bad(sec.key_path("metadataIops"), sec.raw["metadataIops"], "applies to PERSISTENT_2 only")
        sec.skip("metadataIops")
    else:
        metadata_iops = sec.integer("metadataIops")
        if metadata_iops is not None and metadata_iops not in FSX_METADATA_IOPS:
            p.bad(sec.key_path("metadataIops"), metadata_iops,
                  "allowed: 1500, 3000, 6000, 12000 or a multiple of 12000 up to 192000 (omit for AUTOMATIC)")
            metadata_iops = None

    retention = sec.integer("backupRetentionDays", 0, minimum=0, maximum=90)
    final_backup = sec.boolean("finalBackupOnDelete", False)
    if not persistent:
        if retention:
            p.bad(sec.key_path("backupRetentionDays"), retention, "backups need PERSISTENT_2; use 0 or omit")
        if final_backup:
            p.bad(sec.key_path("finalBackupOnDelete"), True, "backups need PERSISTENT_2; use false or omit")
    sec.finish()
    return FsxConfig(
        deployment_type=kind or d.deployment_type, storage_capacity_gib=capacity or d.storage_capacity_gib,
        throughput_per_tib=throughput, efa_enabled=bool(efa) and persistent, metadata_iops=metadata_iops,
        backup_retention_days=retention or 0, final_backup_on_delete=bool(final_backup) and persistent,
    )


def _jobs(top: Section, problems: Problems, pools: tuple[GpuPoolConfig, ...],
          declared_pools: set[str] | None, prices: dict[str, float]) -> tuple[JobConfig, ...]:
    by_name = {p.name: p for p in pools}
    jobs = []
    for path, item in top.items("jobs"):
        job = _job(Section(item, path, problems), by_name, declared_pools)
        if job is not None:
            jobs.append((path, job))
    unique(problems, [(f"{p}.name", job.name) for p, job in jobs], "job name")
    from components.spec.jobsizing import fit_problem
    from components.spec.teardown import MIN_DEADLINE_SECONDS, cost_deadline_seconds, job_price_per_hour

    for path, job in jobs:
        pool = by_name[job.pool]
        if job.model is not None and (reason := fit_problem(job, pool)):
            problems.add(f"{path}.model", reason)
        seconds = cost_deadline_seconds(job, pool, prices)
        if seconds is not None and seconds < MIN_DEADLINE_SECONDS:
            problems.bad(f"{path}.maxCostUsd", job.max_cost_usd,
                         f"buys {seconds} s of {job.nodes} x {pool.instance_type} "
                         f"(${job_price_per_hour(job, pool, prices):,.2f}/h); at least "
                         f"{MIN_DEADLINE_SECONDS // 60} minutes' worth is needed")
    return tuple(job for _, job in jobs)


def _job(sec: Section, pools: dict[str, GpuPoolConfig], declared_pools: set[str] | None) -> JobConfig | None:
    p = sec.problems
    # Pods are named <job>-launcher / <job>-worker-<n>: keep room under 63.
    name = sec.string("name", required=True, pattern=_DNS_LABEL, max_len=40,
                      allowed="a lowercase DNS label of at most 40 characters")
    pool_name = sec.string("pool", required=True, allowed="the name of a gpuPools entry")
    pool = pools.get(pool_name) if pool_name else None
    if pool_name and pool is None and declared_pools is not None and pool_name not in declared_pools:
        p.bad(sec.key_path("pool"), pool_name,
              f"no such pool; pools: {', '.join(pools) or '(none defined)'}")
    nodes = sec.integer("nodes", required=True, minimum=1)
    if pool is not None and nodes is not None and nodes > pool.max_nodes:
        p.add(sec.key_path("nodes"), f"got {nodes}; pool {pool.name!r} has maxNodes {pool.max_nodes}")
    launcher = sec.enum("launcher", LAUNCHERS, required=True)
    image = sec.string("image", required=True, pattern=r"[^\s:@]+(:[\w][\w.-]{0,127}|@sha256:[0-9a-f]{64})",
                       allowed="a container image pinned to a tag or digest (repo/name:tag)")
    if image and (image.endswith(":latest")):
        p.bad(sec.key_path("image"), image, "pin a version tag or digest, not latest")
    command = sec.string_list("command")
    if not command and sec.has("command"):
        p.add(sec.key_path("command"), "must be a non-empty list of strings")
    elif not sec.has("command"):
        p.add(sec.key_path("command"), "is required (the training command as a list, e.g. [python, train.py])")
    env = sec.string_map("env", key_pattern=_ENV_NAME, key_what="an environment variable name")
    gpus = sec.integer("gpusPerNode", minimum=1)
    if pool is not None and gpus is not None and gpus > pool.instance.gpu_count:
        p.add(sec.key_path("gpusPerNode"),
              f"got {gpus}; {pool.instance_type} has {pool.instance.gpu_count} GPUs per node")
    mount = sec.string("mountPath", "/fsx", pattern=r"/[A-Za-z0-9._/-]*", allowed="an absolute path")
    restarts = sec.integer("maxRestarts", 3, minimum=0, maximum=100)
    if launcher == "mpirun" and sec.has("maxRestarts"):
        p.add(sec.key_path("maxRestarts"), "applies to launcher torchrun (the TrainJob's JobSet restarts); "
                                           "an MPIJob retries with runPolicy.backoffLimit")
    max_cost = sec.number("maxCostUsd", minimum=0, exclusive_minimum=True)
    if launcher == "torchrun" and isinstance(sec.raw.get("runPolicy"), dict):
        for key in ("cleanPodPolicy", "backoffLimit", "ttlSecondsAfterFinished"):
            if key in sec.raw["runPolicy"]:
                p.add(f"{sec.key_path('runPolicy')}.{key}",
                      "applies to launcher mpirun (MPIJob) only; a torchrun TrainJob restarts with maxRestarts "
                      "and its pods end with it")
    run_policy = _run_policy(sec.section("runPolicy"))
    model = _model(sec.section("model")) if sec.has("model") else None
    sec.skip("model")
    sec.finish()
    if None in (name, pool, nodes, launcher, image) or not command:
        return None
    return JobConfig(name=name, pool=pool.name, nodes=nodes, launcher=launcher, image=image,
                     command=command, env=env, gpus_per_node=gpus, model=model, run_policy=run_policy,
                     max_restarts=restarts, mount_path=mount or "/fsx", max_cost_usd=max_cost)


def _run_policy(sec: Section) -> RunPolicyConfig:
    d = RunPolicyConfig()
    clean = sec.enum("cleanPodPolicy", CLEAN_POD_POLICIES, d.clean_pod_policy)
    ttl = sec.integer("ttlSecondsAfterFinished", minimum=0)
    deadline = sec.integer("activeDeadlineSeconds", minimum=1)
    backoff = sec.integer("backoffLimit", d.backoff_limit, minimum=0, maximum=100)
    sec.finish()
    return RunPolicyConfig(clean_pod_policy=clean or d.clean_pod_policy,
                           ttl_seconds_after_finished=ttl,
                           active_deadline_seconds=deadline,
                           backoff_limit=d.backoff_limit if backoff is None else backoff)


def parse_count(value: Any) -> float | None:
    """7e9, "7B", "1.5T" -> float; None when unreadable (components.sizing parses)."""
    from components.spec.sizing import parse_quantity

    if isinstance(value, bool):
        return None
    try:
        return parse_quantity(value)
    except (ValueError, TypeError):
        return None


def _model(sec: Section) -> ModelConfig | None:
    p = sec.problems
    d = ModelConfig(params=0)
    values = {}
    for key in ("params", "tokens"):
        raw = sec.value(key)
        if raw is None:
            values[key] = None
            continue
        n = parse_count(raw)
        if n is None or n <= 0:
            p.bad(sec.key_path(key), raw, "must be a positive count such as 7e9 or 7B")
        values[key] = n
    if values["params"] is None and not sec.has("params"):
        p.add(sec.key_path("params"), "is required in model (the parameter count, e.g. 7B)")
    stage = sec.integer("zeroStage", d.zero_stage, minimum=0, maximum=3)
    tp = sec.integer("tp", 1, minimum=1, maximum=64)
    pp = sec.integer("pp", 1, minimum=1, maximum=512)
    mfu = sec.number("mfu", d.mfu, minimum=0, maximum=1, exclusive_minimum=True)
    recompute = sec.boolean("recompute", False)
    sec.finish()
    if values["params"] is None or None in (stage, tp, pp):
        return None
    return ModelConfig(params=values["params"], tokens=values["tokens"], zero_stage=stage, tp=tp, pp=pp,
                       mfu=mfu, recompute=bool(recompute))


__all__ = [
    "ConfigError", "StackConfig", "GpuPoolConfig", "JobConfig", "NetworkConfig", "StorageConfig",
    "FsxConfig", "SystemNodesConfig", "ModelConfig", "RunPolicyConfig", "parse", "parse_count", "show",
]


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
