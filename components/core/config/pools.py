"""gpucluster:gpuPools: one GpuPoolConfig per entry, its type checked against the catalog."""

from collections.abc import Callable, Iterator
from typing import Annotated, ClassVar

from pydantic import Field

from components.core.config.base import Bool, Choice, Int, Model, Text, rule
from components.core.config.describe import DefaultText
from components.core.config.text.patterns import OUR_LABEL_KEYS
from components.core.config.values import DNS_LABEL, K8S_LABEL_KEY, K8S_LABEL_VALUE, RESERVATION_ID
from components.core.hardware import catalog
from components.core.hardware.topology import topology_without_atomic_problem
from components.core.problems import show

# https://docs.aws.amazon.com/eks/latest/userguide/service-quotas.html
MAX_NODES_PER_MANAGED_NODE_GROUP = 450

CAPACITY_TYPES = ("ON_DEMAND", "SPOT", "CAPACITY_BLOCK")
EFA_MODES = ("auto", "required", "disabled")
PLACEMENT_MODES = ("auto", "cluster", "none")
TOPOLOGY_MODES = ("auto", "off")
REMEDIATION_MODES = ("off", "dry-run", "on")  # components.core.goodput.names.MODES

IDLE_MINUTES_DEFAULT = 3
IDLE_MINUTES_MAX = 60


def _gpu_type_problem(name: str) -> str | None:
    if name not in catalog.CATALOG:
        return f"allowed GPU types: {', '.join(catalog.GPU_TYPES)}"
    if not catalog.get(name).is_gpu:
        return f"is not a GPU instance type; allowed: {', '.join(catalog.GPU_TYPES)}"
    return None


NodeCount = Int(ge=0, le=MAX_NODES_PER_MANAGED_NODE_GROUP)
GpuType = Text(allowed="a GPU instance type", short="catalog GPU type: " + ", ".join(catalog.GPU_TYPES),
               check=_gpu_type_problem, suggest=catalog.GPU_TYPES)
LabelKey = Text(K8S_LABEL_KEY, "a Kubernetes label key", short="label key")
# A GPU pool's node labels may not be the program's own, nor in a domain kubelet may not set
# (components.core.limits refuses them, saying which).
GpuLabelKey = Text(K8S_LABEL_KEY, "a Kubernetes label key", short="label key", json_only=True,
                   json_pattern=OUR_LABEL_KEYS + K8S_LABEL_KEY)
LabelValue = Text(K8S_LABEL_VALUE, "a Kubernetes label value (at most 63 alphanumerics, -, _ or .)",
                  short="label value")


class _PoolFacts:
    """What every pool (GPU or CPU) derives from its fields instance_type, extra_instance_types and
    capacity_type (not annotated here: pydantic would take them for fields of this base)."""

    @property
    def instance(self) -> catalog.InstanceType:
        return catalog.get(self.instance_type)

    @property
    def instance_types(self) -> tuple[str, ...]:
        """Every type the node group may launch: instanceType first."""
        return (self.instance_type, *self.extra_instance_types)

    @property
    def is_spot(self) -> bool:
        return self.capacity_type == "SPOT"

    def _extra_type_problems(self, others: str, mismatch: Callable[[catalog.InstanceType, catalog.InstanceType],
                                                                    str | None]) -> Iterator[tuple[str, str]]:
        """extraInstanceTypes: SPOT only, no repeats, and none that `mismatch` (first, other) explains away."""
        if self.extra_instance_types and self.capacity_type != "SPOT":
            yield "extraInstanceTypes", (f"applies to capacityType SPOT only (got {self.capacity_type}): {others} "
                                         "runs one type")
            return
        for i, name in enumerate(self.extra_instance_types):
            if name == self.instance_type or name in self.extra_instance_types[:i]:
                yield f"extraInstanceTypes[{i}]", f"got {show(name)}; a repeat (of instanceType or an earlier entry)"
            elif (why := mismatch(self.instance, catalog.get(name))) is not None:
                yield f"extraInstanceTypes[{i}]", f"got {show(name)}; {why}"


def _gpu_mismatch(first: catalog.InstanceType, other: catalog.InstanceType) -> str | None:
    differs = [what for what, a, b in (
        ("GPU count", first.gpu_count, other.gpu_count),
        ("EFA interfaces", first.max_efa_interfaces, other.max_efa_interfaces),
        ("EFA network cards", first.efa_cards, other.efa_cards)) if a != b]
    if other.vcpus < first.vcpus or other.memory_gib < first.memory_gib:
        differs.append("fewer vCPUs or less memory")
    if not differs:
        return None
    return (f"it differs from {first.name} in {', '.join(differs)}: a job sized for one would not fit the other "
            "(a pool never mixes layouts)")


def _cpu_mismatch(first: catalog.InstanceType, other: catalog.InstanceType) -> str | None:
    if other.vcpus >= first.vcpus and other.memory_gib >= first.memory_gib:
        return None
    return f"it has fewer vCPUs or less memory than {first.name}: a parameter server sized for one would not fit"


class GpuPoolConfig(_PoolFacts, Model):
    """One GPU node pool: a managed node group in the GPU zone, its EFA fabric and its scaling."""

    name: Text(DNS_LABEL, "a lowercase DNS label of at most 32 characters", short="DNS label, at most 32",
               max_length=32) = Field(description="pool name (node label `gpucluster.io/pool`), unique among "
                                                  "`gpuPools[].name` and `cpuPools[].name`")
    instance_type: GpuType = Field(description="the pool's instance type")
    min_nodes: NodeCount = Field(0, description="0 lets the autoscaler scale the pool to zero")
    desired_nodes: Annotated[NodeCount | None, DefaultText("`minNodes`")] = Field(
        None, description="initial size only, from `minNodes` to `maxNodes`: later `pulumi up` runs leave it to the "
                          "autoscaler")
    max_nodes: Int(ge=1, le=MAX_NODES_PER_MANAGED_NODE_GROUP) = Field(
        description="upper bound, at least `minNodes` (managed node group quota 450)")
    capacity_type: Choice(*CAPACITY_TYPES) = Field("ON_DEMAND", description="purchase option")
    capacity_reservation_id: Text(RESERVATION_ID, "a capacity reservation id, cr- and 17 hex digits",
                                  short="`cr-` + 17 hex") | None = Field(
        None, description="ODCR or Capacity Block to target; required when `capacityType` is `CAPACITY_BLOCK`, not "
                          "with `SPOT`; a "
                          "reservation bills whether used or not, so the plan counts it at minimum scale (a Capacity "
                          "Block's own count; an ODCR's is assumed maxNodes)")
    efa: Choice(*EFA_MODES) = Field("auto", description="`auto`: every EFA interface the `instanceType` has; `required` "
                                                        "fails "
                                                        "on types without EFA")
    placement_group: Choice(*PLACEMENT_MODES) = Field(
        "auto", description="`auto`: a cluster placement group when `efa` is on, none when a `capacityReservationId` "
                            "fixes placement; `cluster` needs both EFA and no reservation")
    atomic_scale_up: Bool = Field(
        True, description="Kueue admits a job on this pool only once cluster-autoscaler has all of its nodes (a "
                          "ProvisioningRequest of class best-effort-atomic-scale-up), so no partial set of nodes "
                          "bills while a job waits for the rest; `false`: admit on quota, nodes arrive one by one; "
                          "on a pool that scales (minNodes < maxNodes) of an instanceType EKS labels, `false` needs "
                          "`topology: off`")
    topology: Choice(*TOPOLOGY_MODES) = Field(
        "auto", description="`auto`: a Kueue topology over the EC2 network layers EKS labels the pool's nodes with "
                            "(g6e, p4d, p4de, p5, p5e, p5en: 3; p6-b200, p6-b300: 4), so jobs can ask to be placed "
                            "close (`jobs[].placement`); none for other types; refused in a Region where EC2 "
                            "describes no topology (its 'Prerequisites for Amazon EC2 topology'); `off`: no "
                            "topology, required there and with "
                            "`atomicScaleUp` false on a pool that scales (Kueue places by topology only onto nodes "
                            "that exist); Kueue cannot take a topology off a deployed pool (README, How jobs run)")
    pre_step_check: Bool = Field(
        True, description="a job of 2 or more nodes on this pool first runs a short all_reduce across exactly its "
                          "nodes (under a minute), judged against the type's expected bus bandwidth; with "
                          "`remediation: on` a node that fails is quarantined and the job restarts without it, "
                          "otherwise the check only reports (README, Goodput); applies when `efa` is on")
    remediation: Choice(*REMEDIATION_MODES) = Field(
        "off", description="what the goodput controller does with a node of this pool that a pre-step check or an "
                           "alert (NCCL on sockets, a straggler, a fatal XID) blames: `on` quarantines it (taint, "
                           "cordon) and deletes the job's pod on it so the gang restarts from its newest checkpoint on "
                           "a replacement; `dry-run` only records what it would do on the job; `dry-run` and `on` need "
                           "`observability.enabled`")
    root_volume_gib: Int(ge=50, le=16384) = Field(200, description="encrypted gp3 root volume")
    local_nvme_raid0: Bool = Field(True, description="assemble instance-store NVMe as RAID0 (nodeadm) where the "
                                                     "type has it")
    fabric_test: Bool = Field(False, description="add an nccl-tests all_reduce MPIJob over 2 nodes (`efa` on, on an "
                                                 "`instanceType` with EFA; `maxNodes` >= 2); no job may take its name")
    labels: dict[GpuLabelKey, LabelValue] = Field(
        default_factory=dict, description="extra node labels (also advertised to the autoscaler for scale from zero); "
                                          "not the program's own (gpucluster.io, k8s.amazonaws.com/accelerator, and "
                                          "vpc.amazonaws.com/efa.present when `efa` is on), nor kubernetes.io or k8s.io "
                                          "ones but under kubelet.kubernetes.io/ and node.kubernetes.io/")
    idle_minutes: Int(ge=1, le=IDLE_MINUTES_MAX) = Field(
        IDLE_MINUTES_DEFAULT, description="an idle node of the pool is removed after this long (the autoscaler's "
                                          "per-group `scaledownunneededtime`); it stops billing about this plus drain "
                                          "and termination after its job ends")
    extra_instance_types: tuple[GpuType, ...] = Field(
        (), description="`capacityType: SPOT` only: more types the node group may launch when the first has no Spot "
                        "capacity; "
                        "each with the same GPU count, EFA layout and at least the vCPUs and memory of "
                        "instanceType (p5.48xlarge with p5e.48xlarge; p4d with p4de), so every job fits every node; each "
                        "offered in the GPU zone")

    is_cpu: ClassVar[bool] = False

    @property
    def initial_nodes(self) -> int:
        """The node group's desired size at creation."""
        return self.min_nodes if self.desired_nodes is None else self.desired_nodes

    @property
    def efa_enabled(self) -> bool:
        return self.efa != "disabled" and self.instance.efa_supported

    @property
    def checks_before_start(self) -> bool:
        """Multi-node jobs on the pool run the pre-step check (it judges EFA bus bandwidth)."""
        return self.pre_step_check and self.efa_enabled

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

    # -- rules -----------------------------------------------------------------

    @rule("min_nodes", "max_nodes", "desired_nodes")
    def _sizes(self):
        if self.min_nodes > self.max_nodes:
            yield "maxNodes", f"got {self.max_nodes}; must be >= minNodes ({self.min_nodes})"
        elif self.desired_nodes is not None and not self.min_nodes <= self.desired_nodes <= self.max_nodes:
            yield "desiredNodes", (f"got {self.desired_nodes}; must be from minNodes ({self.min_nodes}) to maxNodes "
                                   f"({self.max_nodes})")

    @rule("capacity_type", "capacity_reservation_id")
    def _reservation(self):
        if self.capacity_type == "CAPACITY_BLOCK" and self.capacity_reservation_id is None:
            yield "capacityReservationId", ("is required when capacityType is CAPACITY_BLOCK (the Capacity Block's "
                                            "reservation id, cr-...)")
        if self.capacity_type == "SPOT" and self.capacity_reservation_id is not None:
            yield "capacityReservationId", (f"got {show(self.capacity_reservation_id)}; must not be set with "
                                            "capacityType SPOT (reservations are on-demand or Capacity Blocks)")

    @rule("atomic_scale_up", "topology", "instance_type", "min_nodes", "max_nodes")
    def _topology_needs_atomic_admission(self):
        found = topology_without_atomic_problem(self.instance_type, self.topology, self.atomic_scale_up,
                                                self.min_nodes == self.max_nodes)
        if found is not None:
            yield "atomicScaleUp", found

    @rule("capacity_type", "instance_type", "extra_instance_types")
    def _spot_types(self):
        yield from self._extra_type_problems("an on-demand or reserved pool", _gpu_mismatch)

    @rule("placement_group", "capacity_reservation_id")
    def _placement_with_reservation(self):
        # A reservation fixes where instances go; a cluster placement group on top of it fails to
        # launch (eksctl #7949, terraform-aws-eks #3699): `auto` already leaves it off.
        if self.placement_group == "cluster" and self.capacity_reservation_id is not None:
            yield "placementGroup", (f"got 'cluster' with capacityReservationId {self.capacity_reservation_id}: "
                                     "instances of a reservation cannot launch into a placement group of ours; use "
                                     "auto (none with a reservation) or none")

    @rule("instance_type", "efa", "placement_group", "fabric_test", "max_nodes")
    def _fabric(self):
        itype = self.instance
        if self.efa == "required" and not itype.efa_supported:
            yield "efa", (f"got 'required', but {itype.name} has no EFA; use auto or disabled, or an EFA type such "
                          "as p5.48xlarge")
        if self.placement_group == "cluster" and not self.efa_enabled:
            yield "placementGroup", f"got 'cluster', but the pool has no EFA ({itype.name}, efa {self.efa}); use auto or none"
        if self.fabric_test and not self.efa_enabled:
            yield "fabricTest", f"needs an EFA pool; {itype.name} with efa {self.efa} has none"
        elif self.fabric_test and self.max_nodes < 2:
            yield "fabricTest", f"needs maxNodes >= 2 to test the fabric (maxNodes is {self.max_nodes})"


# Grouped by family: the list has some fifty types.
CPU_TYPES_TEXT = catalog.by_family(catalog.CPU_TYPES)


def _cpu_type_problem(name: str) -> str | None:
    if name not in catalog.CATALOG or catalog.get(name).is_gpu:
        return f"allowed CPU types: {CPU_TYPES_TEXT}"
    return None


CpuType = Text(allowed="a CPU instance type", short="catalog CPU type: " + CPU_TYPES_TEXT,
               check=_cpu_type_problem, suggest=catalog.CPU_TYPES)
CPU_CAPACITY_TYPES = ("ON_DEMAND", "SPOT")


class CpuPoolConfig(_PoolFacts, Model):
    """One CPU node pool in the GPU zone: parameter servers and other CPU work of jobs, scaled from zero."""

    name: Text(DNS_LABEL, "a lowercase DNS label of at most 32 characters", short="DNS label, at most 32",
               max_length=32) = Field(description="pool name (node label `gpucluster.io/pool`), unique among "
                                                  "`gpuPools[].name` and `cpuPools[].name`")
    instance_type: CpuType = Field(description="the pool's instance type; one the GPU zone offers")
    min_nodes: NodeCount = Field(0, description="0 lets the autoscaler scale the pool to zero")
    max_nodes: Int(ge=1, le=MAX_NODES_PER_MANAGED_NODE_GROUP) = Field(description="upper bound, at least `minNodes`")
    capacity_type: Choice(*CPU_CAPACITY_TYPES) = Field("ON_DEMAND", description="purchase option")
    root_volume_gib: Int(ge=20, le=16384) = Field(100, description="encrypted gp3 root volume")
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict, description="extra node labels")
    idle_minutes: Int(ge=1, le=IDLE_MINUTES_MAX) = Field(
        IDLE_MINUTES_DEFAULT, description="an idle node of the pool is removed after this long")
    extra_instance_types: tuple[CpuType, ...] = Field(
        (), description="`capacityType: SPOT` only: more types the node group may launch when the first has no Spot "
                        "capacity, "
                        "each with at least the vCPUs and memory of instanceType (m7i.8xlarge with r7i.8xlarge); like "
                        "instanceType, each must be offered in the GPU zone")

    # What node-pool code asks of any pool: a CPU pool has no EFA, placement group, reservation or
    # instance store of its own, and one instance type.
    efa: ClassVar[str] = "disabled"
    placement_group: ClassVar[str] = "none"
    capacity_reservation_id: ClassVar[None] = None
    local_nvme_raid0: ClassVar[bool] = False
    fabric_test: ClassVar[bool] = False
    desired_nodes: ClassVar[None] = None
    pre_step_check: ClassVar[bool] = False
    remediation: ClassVar[str] = "off"
    is_cpu: ClassVar[bool] = True

    @property
    def initial_nodes(self) -> int:
        return self.min_nodes

    @property
    def efa_enabled(self) -> bool:
        return False

    @property
    def checks_before_start(self) -> bool:
        """Multi-node jobs on the pool run the pre-step check (it judges EFA bus bandwidth)."""
        return self.pre_step_check and self.efa_enabled

    @property
    def uses_placement_group(self) -> bool:
        return False

    @rule("min_nodes", "max_nodes")
    def _sizes(self):
        if self.min_nodes > self.max_nodes:
            yield "maxNodes", f"got {self.max_nodes}; must be >= minNodes ({self.min_nodes})"

    @rule("capacity_type", "instance_type", "extra_instance_types")
    def _spot_types(self):
        yield from self._extra_type_problems("an on-demand pool", _cpu_mismatch)
