"""The stack config's vocabulary: every typed section as a frozen dataclass, and the values allowed.

Pure data; components/spec/config/stack.py and its section parsers build
these from the raw stack config.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from components.spec import catalog

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

DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
CLUSTER_NAME = r"[0-9A-Za-z][A-Za-z0-9_-]*"  # EKS CreateCluster name pattern
RESERVATION_ID = r"cr-[0-9a-f]{17}"
ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
S3_PREFIX = r"[A-Za-z0-9!_.*'()-]+(/[A-Za-z0-9!_.*'()-]+)*/"
AZ_NAME = r"[a-z]{2}(-gov)?-[a-z]+-\d[a-z]"
K8S_LABEL_KEY = r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
K8S_LABEL_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?"

# Top-level keys whose values are structured (JSON from the engine).
STRUCTURED_KEYS = {
    "adminPrincipalArns", "publicAccessCidrs", "network", "systemNodes", "gpuPools",
    "storage", "jobs", "prices", "tags", "versions",
}
# Config namespaces a stack may use: ours, and the providers' own.
KNOWN_NAMESPACES = (NAMESPACE, "aws", "kubernetes", "random", "pulumi")

# The EKS managed add-ons the program installs; each is pinned per stack
# (gpucluster:versions.addons) so a later `pulumi up` never moves one.
ADDONS = ("vpc-cni", "kube-proxy", "eks-pod-identity-agent", "coredns", "eks-node-monitoring-agent",
          "aws-fsx-csi-driver")
ADDON_VERSION = r"v\d+\.\d+\.\d+(-[a-z0-9]+)*-eksbuild\.\d+"  # v1.20.4-eksbuild.1
# AL2023 AMI release of a managed node group: <Kubernetes x.y.z>-<build date>
# (EKS API NodeGroup.releaseVersion; the SSM .../recommended/release_version parameter).
AMI_RELEASE = r"\d+\.\d+\.\d+-\d{8}"

IDLE_MINUTES_DEFAULT = 3
IDLE_MINUTES_MAX = 60

# gpucluster:pauseMode -> the ClusterQueue's stopPolicy (Kueue v0.19.2 CRD,
# ClusterQueueSpec.stopPolicy): finish lets admitted jobs run to the end,
# drain evicts them (their pods get SIGTERM and their grace period).
PAUSE_MODES = {"finish": "Hold", "drain": "HoldAndDrain"}

# jobs[].terminationGracePeriodSeconds: how long a worker has between SIGTERM
# and SIGKILL when it is drained, preempted or its job deleted. Unset, pods
# keep Kubernetes' default (PodSpec terminationGracePeriodSeconds, 30 s) and
# the job's spec stays as it was, so upgrading gpucluster replaces no running job.
KUBERNETES_DEFAULT_GRACE_SECONDS = 30
GRACE_PERIOD_MAX_SECONDS = 3600

# storage.exportTimeoutMinutes: how long destroy waits for the export to S3
# before it gives up and keeps the file system.
EXPORT_TIMEOUT_DEFAULT_MINUTES = 60
EXPORT_TIMEOUT_MAX_MINUTES = 24 * 60


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
    # An existing bucket to use instead of creating one (the one a previous
    # destroy kept): the stack neither creates nor deletes it.
    bucket_name: str | None = None
    export_timeout_minutes: int = EXPORT_TIMEOUT_DEFAULT_MINUTES

    @property
    def adopts_bucket(self) -> bool:
        return self.bucket_name is not None


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
    termination_grace_period_seconds: int | None = None  # None: Kubernetes' default (30 s)


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
    paused: bool = False  # the ClusterQueue holds and the GPU pools may scale to zero
    pause_mode: str = "finish"  # PAUSE_MODES

    @property
    def stop_policy(self) -> str:
        """The ClusterQueue's stopPolicy: None while running, Hold or HoldAndDrain while paused."""
        return PAUSE_MODES[self.pause_mode] if self.paused else "None"

    def pool(self, name: str) -> GpuPoolConfig:
        return next(p for p in self.gpu_pools if p.name == name)

    def price(self, instance_type: str) -> float:
        return catalog.price(instance_type, self.prices)
