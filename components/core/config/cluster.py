"""The cluster's own keys: its Kubernetes version, the VPC, the system node group, the pinned versions; and its
place in a fleet of clusters (gpucluster:fleet, below)."""

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, WithJsonSchema

from components.core import versions
from components.core.config.base import Choice, Int, Model, Number, Text, given, problem, rule
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


# -- gpucluster:fleet ---------------------------------------------------------------
# gpucluster:fleet: this stack in a fleet of clusters behind one queue (Kueue MultiKueue).
#
# A manager stack lists its workers by stack reference; each worker names its
# manager. Jobs submitted to the manager (`bootstrap submit --fleet`) wait in
# its queue and run on the first worker whose own queue admits them. What the
# manager renders is components.core.fleet's; the plan of both sides is
# components.core.planning.fleet's. A stack without `fleet` is an island, as before.

ROLES = ("manager", "worker")
# Kueue v0.19.2 apis/config/v1beta2/configuration_types.go: MultiKueueDispatcherModeAllAtOnce and
# MultiKueueDispatcherModeIncremental; the config key takes the part after the slash's prefix. Incremental
# nominates 3 workers at a time (pkg/controller/workloaddispatcher/incrementaldispatcher.go DefaultStepSize) in
# the MultiKueueConfig's order (feature gate MultiKueueIncrementalDispatcherRespectConfigOrder, beta and on by
# default in 0.19: pkg/features/kube_features.go).
DISPATCHERS = ("all-at-once", "incremental")
DISPATCHER_NAMES = {d: f"kueue.x-k8s.io/multikueue-dispatcher-{d}" for d in DISPATCHERS}
DATA_MODES = ("shared-bucket", "replicated")
# Pulumi stack references: `stack`, `org/stack` or `org/project/stack` (Pulumi docs, "Stack references");
# each part a Pulumi name: letters, digits, `-`, `_`, `.`.
STACK_REF = r"([A-Za-z0-9_.-]+/){0,2}[A-Za-z0-9_.-]+"
# Kueue v0.19.2 MultiKueueConfigSpec.Clusters: +kubebuilder:validation:MaxItems=20 (apis/kueue/v1beta2/multikueue_types.go).
WORKERS_MAX = 20
WORKER_LOST_MINUTES_DEFAULT = 15  # Kueue's default multiKueue.workerLostTimeout (apis/config/v1beta2 defaults.go)
# TokenRequest refuses expirationSeconds under 600 (k8s.io/api authentication/v1 TokenRequestSpec); the token
# lives two rotation periods, so a missed rotation leaves a whole period to notice.
ROTATION_HOURS_DEFAULT = 6

StackRef = Text(STACK_REF, "a Pulumi stack reference: `stack`, `org/stack` or `org/project/stack`",
                short="stack reference", max_length=300)


def stack_name(reference: str) -> str:
    """The stack's own name in a reference (`org/gpucluster/prod` -> `prod`): its stack file is Pulumi.<name>.yaml."""
    return reference.rsplit("/", 1)[-1]


class FleetWorker(Model):
    """A worker cluster of the fleet: another stack of this program."""

    stack: StackRef = Field(description="the worker's stack reference; its stack file (`Pulumi.<stack>.yaml` in "
                                        "this folder) gives its region and pools, its `fleetAccess` output the "
                                        "manager's credentials for it; no two workers of one stack name")


class FleetData(Model):
    """Where jobs' data and checkpoints live so that a job can run, and resume, in any worker's region."""

    mode: Choice(*DATA_MODES) = Field(
        "shared-bucket", description="the plan's data layout (the program creates neither the shared bucket nor "
                                     "the replication; README, A fleet of clusters): `shared-bucket`: one bucket "
                                     "all workers read and write (jobs in other regions pay inter-region transfer "
                                     "on every read and checkpoint); `replicated`: S3 Replication copies "
                                     "`fleet.data.bucketRegion`'s bucket to each worker region (each GiB written "
                                     "crosses once per other region); the manager's plan shows the transfer cost "
                                     "of either (manager only)")
    bucket_region: Annotated[Text(r"[a-z]{2}(-gov)?-[a-z]+-\d", "an AWS region such as us-east-1", short="region")
                             | None, DefaultText("the manager's `aws:region`")] = Field(
        None, description="the region of the bucket jobs read their data from and write checkpoints to (manager "
                          "only)")
    dataset_gib: Number(ge=0) = Field(
        0, description="GiB of training data a job reads at its start, for the plan's inter-region transfer cost "
                       "(manager only)")


class FleetConfig(Model):
    """This stack's place in a fleet: the manager (its workers) or a worker (its manager)."""

    role: Choice(*ROLES) = Field(description="`manager`: runs the fleet's queue (Kueue MultiKueue) and sends jobs to "
                                             "`fleet.workers`; `worker`: an ordinary cluster that also runs the "
                                             "jobs its `fleet.manager` sends")
    workers: tuple[FleetWorker, ...] = Field(
        (), json_schema_extra={"maxItems": WORKERS_MAX},
        description=f"the manager's workers, at least one, at most {WORKERS_MAX}, no repeats; a worker's pools and "
                    "namespaces are mirrored in the manager's queues (manager only)")
    manager: StackRef | None = Field(None, description="the manager's stack reference: required when `fleet.role` is "
                                                       "`worker`, refused on a manager")
    dispatcher: Choice(*DISPATCHERS) = Field(
        "all-at-once", description="how the manager picks a worker: a copy of the job to every worker, the first "
                                   "to admit it runs it (`all-at-once`); or up to 3 workers at a time, in the order "
                                   "of `fleet.workers` (`incremental`) (manager only)")
    worker_lost_minutes: Int(ge=1, le=1440) = Field(
        WORKER_LOST_MINUTES_DEFAULT, description="how long the manager waits for a worker it lost before it "
                                                 "requeues the jobs admitted there (manager only)")
    token_rotation_hours: Int(ge=1, le=24) = Field(
        ROTATION_HOURS_DEFAULT, description="the manager's token for each worker is renewed this often and lives "
                                            "twice as long, at most 48 h (an API server may cap a token's life; "
                                            "the rotator fails loudly when it does) (manager only)")
    data: FleetData = Field(default_factory=FleetData, description="where jobs' data and checkpoints live (manager "
                                                                   "only)")

    @rule("role", "workers", "manager")
    def _sides(self):
        if self.role == "manager":
            if not self.workers:
                yield "workers", "is empty; a manager lists at least one worker (`fleet.workers[].stack`)"
            if self.manager is not None:
                yield "manager", f"got {show(self.manager)}; only a worker names its manager (`fleet.role: worker`)"
            seen: set[str] = set()
            for i, worker in enumerate(self.workers):
                if worker is None:  # refused by its own check, reported there
                    continue
                name = stack_name(worker.stack)
                if name in seen:
                    yield f"workers[{i}].stack", f"got {show(worker.stack)}; stack {name!r} is listed twice"
                seen.add(name)
        else:
            if self.manager is None:
                yield "manager", "is missing; a worker names its manager's stack reference (`fleet.manager`)"
            if self.workers:
                yield "workers", "is given; only a manager lists workers (`fleet.role: manager`)"
