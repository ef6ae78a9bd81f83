"""The whole stack: every gpucluster:* key (StackKeys), and what the program knows besides (StackConfig).

StackKeys is the contract the stack file is written against: the JSON
Schema and the README's configuration reference are generated from it.
Its rules relate the sections (a job's pool, pins that match the
Kubernetes version); the engine layer (engine.py) hands it the raw keys.
"""

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, WithJsonSchema, model_validator

from components.core import namespaces
from components.core.config.base import Bool, Choice, Model, Number, Text, given, problem, rule
from components.core.config.cluster import (
    DEFAULT_KUBERNETES_VERSION,
    UPGRADE_HINT,
    FleetConfig,
    KubernetesVersion,
    NetworkConfig,
    SystemNodesConfig,
    VersionPins,
    stack_name,
)
from components.core.config.describe import Allowed, DefaultText, Missing, field_slot, missing_message
from components.core.config.jobs import SPOT_GRACE_MAX_SECONDS, JobConfig, _env_value
from components.core.config.observability import SLACK_WEBHOOK_KEY, ObservabilityConfig, SlackWebhook
from components.core.config.pools import CpuPoolConfig, GpuPoolConfig
from components.core.config.storage import StorageConfig
from components.core.config.teams import TEAMS_MAX, TeamConfig
from components.core.config.teams import budget_problems as team_budget_problems
from components.core.config.teams import job_problems as team_job_problems
from components.core.config.teams import member_problems as team_member_problems
from components.core.config.teams import stack_problems as team_problems
from components.core.config.text.patterns import POLICY_ARN, PRINCIPAL_ARN, PUBLIC_CIDR, escape
from components.core.config.values import (
    AWS_TAG_KEY,
    AZ_NAME,
    CLUSTER_NAME,
    DNS_LABEL,
    PUBLIC_ACCESS_CIDRS_MAX,
    ROLE_MANAGED_POLICIES_MAX,
    check_policy_arn,
    check_principal_arn,
    check_public_cidr,
    cidr_list_problems,
    policy_list_problems,
    with_prefix_length,
)
from components.core.hardware import catalog, topology
from components.core.hardware.partitions import partition_of
from components.core.hardware.zones import ZONE_ID_PATTERN
from components.core.problems import show

NAMESPACE = "gpucluster"
# Config namespaces a stack may use: ours, and the providers' own.
KNOWN_NAMESPACES = (NAMESPACE, "aws", "kubernetes", "random", "pulumi")

# ECR User Guide, "Sync an upstream registry with an Amazon ECR private registry", considerations:
# creating pull through cache rules is not supported in these regions.
NO_PULL_THROUGH_CACHE = ("cn-north-1", "cn-northwest-1", "us-gov-east-1", "us-gov-west-1")

# gpucluster:pauseMode -> the ClusterQueue's stopPolicy (Kueue v0.19.2 CRD,
# ClusterQueueSpec.stopPolicy): finish lets admitted jobs run to the end,
# drain evicts them (their pods get SIGTERM and their grace period).
PAUSE_MODES = {"finish": "Hold", "drain": "HoldAndDrain"}

# AWS tag values: at most 256 characters (Tagging AWS resources, "Tag naming limits and requirements").
TAG_VALUE_MAX = 256


def _not_reserved(namespace: str) -> str | None:
    if namespace in namespaces.RESERVED or namespace.startswith(namespaces.RESERVED_PREFIX):
        return (f"is a namespace the cluster's system or operators own; not {namespaces.RESERVED_PREFIX}* or one of "
                f"{', '.join(namespaces.RESERVED)}")
    return None


# What trainingNamespace may not be, for editors (_not_reserved says why).
NOT_RESERVED = (f"(?!{escape(namespaces.RESERVED_PREFIX)})"
                f"(?!(?:{'|'.join(escape(n) for n in namespaces.RESERVED)})$)")


def _known_type(name: str) -> str:
    if name not in catalog.CATALOG:
        raise problem(f"key {show(name)} is not a catalog instance type; known: {', '.join(catalog.CATALOG)}")
    return name


CatalogType = Annotated[str, AfterValidator(_known_type)]
# Name is the program's on every resource (components.core.limits refuses it, saying so).
TagKey = Text(AWS_TAG_KEY, "a valid AWS tag key (1-128 characters, not starting with aws:)", short="AWS tag key",
              json_pattern=f"(?!Name$){AWS_TAG_KEY}", json_only=True)
TagValue = Annotated[Text(allowed=f"an AWS tag value (at most {TAG_VALUE_MAX} characters)", short="tag value",
                          max_length=TAG_VALUE_MAX), BeforeValidator(_env_value), WithJsonSchema(
    {"anyOf": [{"type": "string", "maxLength": TAG_VALUE_MAX}, {"type": "number"}]})]



def entries(items: tuple[Any, ...]) -> list[tuple[int, Any]]:
    """(index, entry) of a list section, skipping the entries that did not parse (None)."""
    return [(i, x) for i, x in enumerate(items) if x is not None]


class StackKeys(Model):
    """Every gpucluster:* key of a stack file."""

    cluster_name: Annotated[Text(CLUSTER_NAME, "an EKS cluster name: letters, digits, - and _, starting with a letter "
                                 "or digit", short="EKS cluster name", max_length=100) | None,
                            DefaultText("`gpucluster-<stack>`")] = Field(
        None, description="EKS cluster name (letters, digits, `-`, `_`; at most 100)")
    kubernetes_version: KubernetesVersion = Field(
        DEFAULT_KUBERNETES_VERSION,
        description="1.32-1.36; 1.35 and 1.36 are in standard support, older ones in (6x priced) extended support. "
                    "`versions.amiReleaseVersion` and the kube-proxy of `versions.addons` are of it. Quote it.")
    admin_principal_arns: Annotated[
        tuple[Text(allowed="an IAM ARN", short="IAM role/user ARN", check=check_principal_arn,
                   json_pattern=PRINCIPAL_ARN), ...],
        Missing("is required: the IAM roles or users given cluster admin, the one you deploy with first "
                "(`python -m bootstrap whoami` prints it)")] = Field(
        json_schema_extra={"minItems": 1},
        description="the cluster's admins (access entries with `AmazonEKSClusterAdminPolicy`), exactly these; the "
                    "deployer's first (`python -m bootstrap whoami`); other accounts are fine, session ARNs and AWS's "
                    "documentation accounts are not; each in the partition of `aws:region`")
    public_access_cidrs: tuple[Annotated[Text(allowed="a public CIDR block", short="public CIDR",
                                              check=check_public_cidr, json_pattern=PUBLIC_CIDR),
                                         BeforeValidator(with_prefix_length)], ...] = Field(
        (), json_schema_extra={"maxItems": PUBLIC_ACCESS_CIDRS_MAX, "uniqueItems": True},
        description="public CIDRs allowed to the API endpoint, including where pulumi runs (an address alone is its "
                    f"/32; no host bits); required unless `deployerInVpc`; at most {PUBLIC_ACCESS_CIDRS_MAX}, no "
                    "repeats or overlaps")
    deployer_in_vpc: Bool = Field(
        False, description="pulumi runs inside the VPC (or a connected network): allows a private-only endpoint")
    gpu_availability_zone: Annotated[
        Text(f"{AZ_NAME}|{ZONE_ID_PATTERN}", "an availability zone name such as us-east-1a or a zone ID such as "
             "use1-az6", short="zone name or zone ID") | None,
        DefaultText("first zone offering every pool's type (one EKS accepts, if any)")] = Field(
        None, description="the one zone of all GPU pools and the file system, e.g. `us-east-1a` or `use1-az6`; a zone "
                          "name of `aws:region`")
    training_namespace: Text(DNS_LABEL, "a Kubernetes namespace name (lowercase DNS label)", short="namespace name",
                             max_length=63, check=_not_reserved, json_pattern=NOT_RESERVED + DNS_LABEL) = Field(
        "training", description="namespace of jobs, the FSx claim and the LocalQueue; not `kube-*` nor one the "
                                "program owns (" + ", ".join(namespaces.RESERVED) + ")")
    paused: Bool = Field(False, description="hold the queue and let every GPU pool scale to 0 (`bootstrap pause`/"
                                            "`resume` set it)")
    pause_mode: Choice(*PAUSE_MODES) = Field(
        "finish", description="while paused: admitted jobs run to the end (Kueue `stopPolicy: Hold`), or are evicted "
                              "now (`HoldAndDrain`)")
    versions: VersionPins = Field(description="pinned AMI release and EKS add-on versions")
    prices: dict[Annotated[CatalogType, Allowed("a catalog instance type", short="instance type"),
                           WithJsonSchema({"type": "string", "enum": list(catalog.CATALOG)})],
                 Number(gt=0)] = Field(
        default_factory=dict,
        description="USD/hour per instance type, over the catalog's (your discount, a Capacity Block's rate, a spot "
                    "estimate); catalog prices are us-east-1's (p6: us-west-2's), and the plan says so for other "
                    "regions")
    tags: dict[TagKey, TagValue] = Field(
        default_factory=dict, description="extra AWS tags on every resource that takes tags; not `Name` (the "
                                          "program's); with the program's own at most 50 on a resource, and a pool's "
                                          "`gpuPools[].labels` and `cpuPools[].labels` are tags of its Auto Scaling "
                                          "group too")
    network: NetworkConfig = Field(default_factory=NetworkConfig, description="the VPC")
    system_nodes: SystemNodesConfig = Field(
        default_factory=SystemNodesConfig,
        description="the system node group: `systemNodes.count` x `systemNodes.instanceType` must hold the system pods "
                    "(add-ons, operators, a launcher per mpirun `jobs[].launcher` and `gpuPools[].fabricTest`, a chief "
                    "per ps job, and with `observability` the metrics stack, which grows with `gpuPools[].maxNodes`)")
    gpu_pools: tuple[GpuPoolConfig, ...] = Field((), description="the GPU node pools")
    cpu_pools: tuple[CpuPoolConfig, ...] = Field(
        (), description="CPU node pools in the GPU zone (parameter servers), scaled from zero like the GPU pools")
    storage: StorageConfig = Field(default_factory=StorageConfig, description="the bucket and the file system")
    jobs: tuple[JobConfig, ...] = Field((), description="training jobs the stack runs")
    image_cache: Bool = Field(
        True, description="an ECR pull-through cache for public.ecr.aws: nodes pull public ECR images (the Deep "
                          "Learning Containers, jobs' public.ecr.aws images) from the account's registry in the "
                          "region, through the S3 endpoint; `false` pulls them from public ECR through NAT; must be "
                          "`false` where ECR has no pull-through cache (`aws:region` " + ", ".join(NO_PULL_THROUGH_CACHE)
                          + ")")
    job_policy_arns: tuple[Text(allowed="an IAM managed policy ARN", short="IAM policy ARN",
                                check=check_policy_arn, json_pattern=POLICY_ARN), ...] = Field(
        (), json_schema_extra={"maxItems": ROLE_MANAGED_POLICIES_MAX, "uniqueItems": True},
        description="IAM managed policies for the jobs' role, besides read and write on the stack's bucket, which it "
                    "always has (EKS Pod Identity on the training namespace's `default` service account); at most "
                    f"{ROLE_MANAGED_POLICIES_MAX}, no repeats, each in the partition of `aws:region`")
    teams: tuple[TeamConfig, ...] = Field(
        (), json_schema_extra={"maxItems": TEAMS_MAX},
        description="teams sharing the cluster: per team a namespace, a Kueue queue in one cohort with a guaranteed "
                    "share of each pool it may lend and borrow past, fair sharing by weight, access for its members "
                    f"and a monthly budget (README, Teams); at most {TEAMS_MAX}, their guarantees on a pool adding up "
                    "to at most its `gpuPools[].maxNodes`; none: one queue, first come first served")
    observability: ObservabilityConfig = Field(
        default_factory=ObservabilityConfig, description="metrics, dashboards, alerts and TensorBoard")
    fleet: Annotated[FleetConfig | None, DefaultText("none: the cluster is not in a fleet")] = Field(
        None, description="this stack in a fleet of clusters behind one queue (Kueue MultiKueue; README, A fleet of "
                          "clusters): the manager lists its workers (`fleet.workers`), a worker names its manager (`fleet.manager`)")
    alert_slack_webhook_url: Annotated[SlackWebhook | None, DefaultText("none")] = Field(
        None, alias=SLACK_WEBHOOK_KEY,
        description="a Slack incoming webhook Alertmanager posts firing alerts to; a secret: `pulumi config set "
                    f"--secret {NAMESPACE}:{SLACK_WEBHOOK_KEY} <url>`")

    # -- rules -----------------------------------------------------------------

    @rule("admin_principal_arns")
    def _someone_administers(self):
        # Nobody else gets access: the Kubernetes provider acts as the deployer,
        # who must be listed (EKS access entries; bootstrap_cluster_creator_admin is off).
        if not self.admin_principal_arns:
            yield "adminPrincipalArns", missing_message(field_slot(StackKeys.model_fields["admin_principal_arns"]))

    @rule("public_access_cidrs", "deployer_in_vpc")
    def _endpoint_reachable(self):
        # The Kubernetes provider runs where `pulumi up` runs (EKS User Guide,
        # "Cluster API server endpoint": a private endpoint is reachable from the VPC only).
        if not self.public_access_cidrs and not self.deployer_in_vpc:
            yield "publicAccessCidrs", (
                "is empty, so the API endpoint would be private-only and unreachable from where pulumi runs: every "
                "Kubernetes resource, and `pulumi destroy`, would fail; list the public CIDR you deploy from (your "
                "address: `curl -s https://checkip.amazonaws.com`, as a /32), or set "
                f"{NAMESPACE}:deployerInVpc: true when pulumi runs inside the VPC")

    @rule("public_access_cidrs")
    def _cidr_list(self):
        for index, reason in cidr_list_problems(self.public_access_cidrs):
            yield ("publicAccessCidrs" if index < 0 else f"publicAccessCidrs[{index}]"), reason

    @rule("job_policy_arns")
    def _job_policies(self):
        for index, reason in policy_list_problems(self.job_policy_arns):
            yield ("jobPolicyArns" if index < 0 else f"jobPolicyArns[{index}]"), reason

    @rule("versions.ami_release_version", "kubernetes_version")
    def _ami_matches_kubernetes(self):
        version, ami = self.kubernetes_version, self.versions.ami_release_version
        if not ami.startswith(f"{version}."):
            yield "versions.amiReleaseVersion", (f"got {show(ami)}; must be a release of Kubernetes {version} "
                                                 f"(kubernetesVersion); {UPGRADE_HINT}")

    @rule("versions.addons", "kubernetes_version")
    def _kube_proxy_matches_kubernetes(self):
        version, proxy = self.kubernetes_version, self.versions.addons.get("kube-proxy")
        if proxy is not None and not proxy.startswith(f"v{version}."):
            # kube-proxy follows the control plane's minor (EKS User Guide, managing-kube-proxy).
            yield "versions.addons.kube-proxy", (f"got {show(proxy)}; must be a kube-proxy of Kubernetes {version}; "
                                                 f"{UPGRADE_HINT}")

    @rule("gpu_pools", "cpu_pools", "jobs")
    def _unique_names(self):
        # Pools share one name space: the node label and the Kueue flavor are named after them.
        for sections, what in ((("gpuPools", "cpuPools"), "pool"), (("jobs",), "job")):
            seen: dict[str, str] = {}
            for section in sections:
                field = {"gpuPools": "gpu_pools", "cpuPools": "cpu_pools", "jobs": "jobs"}[section]
                for i, entry in entries(getattr(self, field)):
                    if entry.name in seen:
                        yield f"{section}[{i}].name", (f"duplicate {what} name {show(entry.name)} (first at "
                                                       f"{NAMESPACE}:{seen[entry.name]}.name)")
                    else:
                        seen[entry.name] = f"{section}[{i}]"

    @rule("gpu_pools", "cpu_pools", "jobs")
    def _jobs_fit_their_pools(self, given_keys: dict[str, Any]):
        pools = {p.name: p for _, p in entries(self.gpu_pools)}
        cpu_pools = {p.name: p for _, p in entries(self.cpu_pools)}
        declared = _declared_names(given(given_keys, StackKeys, "gpu_pools"))
        declared_cpu = _declared_names(given(given_keys, StackKeys, "cpu_pools"))
        for i, job in entries(self.jobs):
            pool = pools.get(job.pool)
            if pool is None:
                # A job on a declared pool that has its own problems is not reported again.
                if declared is not None and job.pool not in declared:
                    yield f"jobs[{i}].pool", (f"got {show(job.pool)}; no such pool; pools: "
                                              f"{', '.join(pools) or '(none defined)'}")
                continue
            if job.nodes > pool.max_nodes:
                yield f"jobs[{i}].nodes", f"got {job.nodes}; pool {pool.name!r} has maxNodes {pool.max_nodes}"
            cpu = cpu_pools.get(job.ps_pool) if job.launcher == "ps" and job.ps_pool is not None else None
            if job.launcher == "ps" and job.ps_pool is not None and cpu is None:
                if declared_cpu is None or job.ps_pool not in declared_cpu:
                    yield f"jobs[{i}].psPool", (f"got {show(job.ps_pool)}; no such CPU pool; cpuPools: "
                                                f"{', '.join(cpu_pools) or '(none defined)'}")
            elif cpu is not None and job.ps_replicas > cpu.max_nodes:
                yield f"jobs[{i}].psReplicas", (f"got {job.ps_replicas}; one per node, and CPU pool "
                                                f"{cpu.name!r} has maxNodes {cpu.max_nodes}")
            gpus = pool.instance.gpu_count
            if job.gpus_per_node is not None and job.gpus_per_node > gpus:
                yield f"jobs[{i}].gpusPerNode", (f"got {job.gpus_per_node}; {pool.instance_type} has {gpus} GPUs "
                                                 "per node")
            spot = [p.name for p in (pool, cpu) if p is not None and p.capacity_type == "SPOT"]
            grace = job.termination_grace_period_seconds
            if spot and grace is not None and grace > SPOT_GRACE_MAX_SECONDS:
                yield f"jobs[{i}].terminationGracePeriodSeconds", (
                    f"got {grace}; pool {spot[0]!r} is SPOT, and EC2 gives a Spot node two minutes' notice, of "
                    f"which the drain takes a part: at most {SPOT_GRACE_MAX_SECONDS} (checkpoint more often "
                    "instead)")

    @rule("gpu_pools", "jobs")
    def _placements(self):
        pools = {p.name: p for _, p in entries(self.gpu_pools)}
        for i, job in entries(self.jobs):
            pool = pools.get(job.pool)  # a job on an unknown pool is reported by _jobs_fit_their_pools
            if pool is not None and job.placement is not None:
                found = topology.placement_problem(job.placement.policy, job.placement.layer, pool.instance_type,
                                                   pool.topology)
                if found is not None:
                    yield f"jobs[{i}].placement{found[0]}", f"{found[1]} (pool {pool.name!r})"

    @rule("teams", "gpu_pools", "training_namespace")
    def _teams_fit(self, given_keys: dict[str, Any]):
        pools = {p.name: p for _, p in entries(self.gpu_pools)}
        declared = _declared_names(given(given_keys, StackKeys, "gpu_pools"))
        yield from team_problems(self.teams, pools, namespaces.RESERVED, self.training_namespace, declared)

    @rule("teams", "storage.s3_link")
    def _teams_need_the_link(self):
        # A team's FSx directory is its prefix of the bucket, made by the link importing a marker object
        # (components.core.storage.team_data); without the link nothing would create it.
        if self.teams and not self.storage.s3_link:
            yield "storage.s3Link", ("is false, but gpucluster:teams needs it: each team's directory on the file "
                                     "system (/teams/<name>) is its S3 prefix teams/<name>/, brought in by the link")

    @rule("teams", "observability.enabled", "observability.retention_days")
    def _budgets_need_a_month_of_metrics(self):
        yield from team_budget_problems(self.teams, self.observability.enabled, self.observability.retention_days)

    @rule("gpu_pools", "observability.enabled")
    def _remediation_reads_alerts(self):
        # The controller acts on Prometheus' alerts; without the metrics stack it would wait for none.
        if self.observability.enabled:
            return
        for i, pool in entries(self.gpu_pools):
            if pool.remediation != "off":
                yield f"gpuPools[{i}].remediation", (f"got {pool.remediation!r}, but observability.enabled is false: "
                                                     "the controller acts on Prometheus' alerts; use off, or enable "
                                                     "observability")

    @rule("teams", "admin_principal_arns")
    def _team_members(self):
        yield from team_member_problems(self.teams, self.admin_principal_arns)

    @rule("teams", "jobs")
    def _jobs_of_teams(self, given_keys: dict[str, Any]):
        yield from team_job_problems(self.teams, self.jobs, _declared_names(given(given_keys, StackKeys, "teams")))

    def team(self, name: str):
        return next(t for t in self.teams if t.name == name)

    def namespace_of(self, job: JobConfig) -> str:
        """Where a job runs: its team's namespace, or the training namespace."""
        return self.team(job.team).namespace if job.team is not None else self.training_namespace

    def pool(self, name: str) -> GpuPoolConfig:
        return next(p for p in self.gpu_pools if p.name == name)

    def cpu_pool(self, name: str) -> CpuPoolConfig:
        return next(p for p in self.cpu_pools if p.name == name)

    def ps_pool_of(self, job: JobConfig) -> CpuPoolConfig | None:
        """A parameter-server job's CPU pool (None for the other launchers, or one not declared)."""
        if job.launcher != "ps" or job.ps_pool is None:
            return None
        return next((p for _, p in entries(self.cpu_pools) if p.name == job.ps_pool), None)

    @property
    def all_pools(self) -> tuple[GpuPoolConfig | CpuPoolConfig, ...]:
        return (*self.gpu_pools, *self.cpu_pools)

    def price(self, instance_type: str) -> float:
        return catalog.price(instance_type, self.prices)

    @property
    def stop_policy(self) -> str:
        """The ClusterQueue's stopPolicy: None while running, Hold or HoldAndDrain while paused."""
        return PAUSE_MODES[self.pause_mode] if self.paused else "None"


def _partition_problems(region: str, lists: list[tuple[str, tuple[str, ...]]]) -> list[tuple[str, str]]:
    """ARNs of another partition than the region's, by key path: IAM and EKS refuse them (IAM User Guide, "IAM
    identifiers")."""
    partition = partition_of(region)
    return [(f"{key}[{index}]", f"got {show(arn)}; it is in partition {arn.split(':')[1]}, but aws:region {region} "
                                f"is in {partition}: use arn:{partition}:...")
            for key, arns in lists for index, arn in enumerate(arns) if arn.split(":")[1] != partition]


def _declared_names(raw: Any) -> set[str] | None:
    """Every pool name the stack file declares, valid or not (None when gpuPools is not a list)."""
    if raw is None:
        return set()
    if not isinstance(raw, list):
        return None
    return {item["name"] for item in raw if isinstance(item, dict) and isinstance(item.get("name"), str)}


class StackConfig(StackKeys):
    """The stack's keys and what the program knows besides: project, stack, region and the AWS identity."""

    project: str = NAMESPACE
    stack: str = "dev"
    region: str = "us-east-1"
    aws_profile: str | None = None  # aws:profile, passed to `aws eks get-token`
    aws_role_arn: str | None = None  # the last role of aws:assumeRoles, likewise
    secret_keys: tuple[str, ...] = ()  # the keys the engine holds encrypted (`pulumi config set --secret`)
    # Where they are encrypted: a key (all of it) or a path in it (`gpucluster:jobs[0].env.TOKEN`).
    secret_paths: tuple[str, ...] = ()

    def secret_env(self, index: int) -> frozenset[str]:
        """The env names of jobs[index] set with `pulumi config set --secret --path`: passed as a Secret."""
        job, prefix = self.jobs[index], f"{NAMESPACE}:jobs"
        if prefix in self.secret_paths:  # secret as a whole: every value of its env
            return frozenset(job.env)
        mine = f"{prefix}[{index}].env."
        return frozenset(p.removeprefix(mine) for p in self.secret_paths if p.startswith(mine)) & frozenset(job.env)

    @model_validator(mode="before")
    @classmethod
    def _default_cluster_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and given(data, cls, "cluster_name") is None:
            project, stack = given(data, cls, "project", NAMESPACE), given(data, cls, "stack", "dev")
            return {**data, "clusterName": f"{project}-{stack}"}
        return data

    @rule("gpu_availability_zone", "region")
    def _zone_in_region(self):
        zone, region = self.gpu_availability_zone, self.region
        if zone and region and not re.fullmatch(ZONE_ID_PATTERN, zone) and not zone.startswith(region):
            yield "gpuAvailabilityZone", f"got {show(zone)}; must be a zone of aws:region {region!r}"

    @rule("gpu_pools", "region")
    def _topology_in_region(self):
        for i, pool in entries(self.gpu_pools) if self.region else ():
            if why := topology.region_problem(self.region, pool.instance_type, pool.topology):
                yield f"gpuPools[{i}].topology", why

    @rule("admin_principal_arns", "job_policy_arns", "region")
    def _arns_in_the_region_s_partition(self):
        if not self.region:
            return
        yield from _partition_problems(self.region, [("adminPrincipalArns", self.admin_principal_arns),
                                                     ("jobPolicyArns", self.job_policy_arns)])

    @rule("teams", "region")
    def _team_arns_in_the_region_s_partition(self):
        if self.region:
            yield from _partition_problems(self.region, [
                (f"teams[{i}].{key}", arns) for i, team in entries(self.teams)
                for key, arns in (("members", team.members), ("jobPolicyArns", team.job_policy_arns))])

    @rule("image_cache", "region")
    def _cache_in_region(self):
        if self.image_cache and self.region in NO_PULL_THROUGH_CACHE:
            yield "imageCache", (f"is true (the default), but ECR has no pull-through cache rules in {self.region}; "
                                 f"set {NAMESPACE}:imageCache: false (nodes then pull public images through NAT)")

    @rule("fleet", "stack")
    def _fleet_is_not_itself(self):
        fleet = self.fleet
        if fleet is None:
            return
        for i, worker in enumerate(fleet.workers):
            if worker is not None and stack_name(worker.stack) == self.stack:
                yield f"fleet.workers[{i}].stack", f"got {show(worker.stack)}; that is this stack, the manager"
        if fleet.manager is not None and stack_name(fleet.manager) == self.stack:
            yield "fleet.manager", f"got {show(fleet.manager)}; that is this stack, a worker"

    @rule("alert_slack_webhook_url", "secret_keys")
    def _webhook_is_secret(self):
        # A webhook URL is a credential: anyone holding it can post to the channel.
        key = f"{NAMESPACE}:{SLACK_WEBHOOK_KEY}"
        if self.alert_slack_webhook_url is not None and key not in self.secret_keys:
            yield SLACK_WEBHOOK_KEY, (f"is stored in plain text; remove it and set it as a secret: `pulumi config "
                                      f"rm {key}` then `pulumi config set --secret {key} <url>`")
