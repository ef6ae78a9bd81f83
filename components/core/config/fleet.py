"""gpucluster:fleet: this stack in a fleet of clusters behind one queue (Kueue MultiKueue).

A manager stack lists its workers by stack reference; each worker names its
manager. Jobs submitted to the manager (`bootstrap submit --fleet`) wait in
its queue and run on the first worker whose own queue admits them. What the
manager renders is components.core.fleet's; the plan of both sides is
components.core.planning.fleet's. A stack without `fleet` is an island, as before.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from components.core.config.base import Choice, Int, Model, Number, Text, rule
from components.core.config.describe import DefaultText
from components.core.problems import show

ROLES = ("manager", "worker")
# Kueue v0.19.2 apis/config/v1beta2/configuration_types.go: MultiKueueDispatcherModeAllAtOnce and
# MultiKueueDispatcherModeIncremental; the config key takes the part after the slash's prefix.
DISPATCHERS = ("all-at-once", "incremental")
DISPATCHER_NAMES = {d: f"kueue.x-k8s.io/multikueue-dispatcher-{d}" for d in DISPATCHERS}
DATA_MODES = ("shared-bucket", "replicated")
# Pulumi stack references: `stack`, `org/stack` or `org/project/stack` (Pulumi docs, "Stack references");
# each part a Pulumi name: letters, digits, `-`, `_`, `.`.
STACK_REF = r"([A-Za-z0-9_.-]+/){0,2}[A-Za-z0-9_.-]+"
WORKERS_MAX = 32
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
                                        "manager's credentials for it")


class FleetData(Model):
    """Where jobs' data and checkpoints live so that a job can run, and resume, in any worker's region."""

    mode: Choice(*DATA_MODES) = Field(
        "shared-bucket", description="`shared-bucket`: one bucket all workers read and write (jobs in other regions "
                                     "pay inter-region transfer on every read and checkpoint); `replicated`: S3 "
                                     "Replication copies `fleet.data.bucketRegion`'s bucket to each worker region "
                                     "(each GiB written crosses once per other region)")
    bucket_region: Annotated[Text(r"[a-z]{2}(-gov)?-[a-z]+-\d", "an AWS region such as us-east-1", short="region")
                             | None, DefaultText("the manager's `aws:region`")] = Field(
        None, description="the region of the bucket jobs read their data from and write checkpoints to")
    dataset_gib: Number(ge=0) = Field(
        0, description="GiB of training data a job reads at its start, for the plan's transfer cost")


class FleetConfig(Model):
    """This stack's place in a fleet: the manager (its workers) or a worker (its manager)."""

    role: Choice(*ROLES) = Field(description="`manager`: runs the fleet's queue (Kueue MultiKueue) and sends jobs to "
                                             "`fleet.workers`; `worker`: an ordinary cluster that also runs the "
                                             "jobs its `fleet.manager` sends")
    workers: tuple[FleetWorker, ...] = Field(
        (), json_schema_extra={"maxItems": WORKERS_MAX},
        description=f"the manager's workers, at least one, at most {WORKERS_MAX}, no repeats; a worker's pools and "
                    "namespaces are mirrored in the manager's queues (manager only)")
    manager: StackRef | None = Field(None, description="the manager's stack reference (worker only, required)")
    dispatcher: Choice(*DISPATCHERS) = Field(
        "all-at-once", description="how the manager picks a worker: a copy of the job to every worker, the first "
                                   "to admit it runs it (`all-at-once`); or up to 3 workers at a time, in the order "
                                   "of `fleet.workers` (`incremental`) (manager only)")
    worker_lost_minutes: Int(ge=1, le=1440) = Field(
        WORKER_LOST_MINUTES_DEFAULT, description="how long the manager waits for a worker it lost before it "
                                                 "requeues the jobs admitted there (manager only)")
    token_rotation_hours: Int(ge=1, le=168) = Field(
        ROTATION_HOURS_DEFAULT, description="the manager's token for each worker is renewed this often and lives "
                                            "twice as long (manager only)")
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
                name = stack_name(worker.stack)
                if name in seen:
                    yield f"workers[{i}].stack", f"got {show(worker.stack)}; stack {name!r} is listed twice"
                seen.add(name)
        else:
            if self.manager is None:
                yield "manager", "is missing; a worker names its manager's stack reference (`fleet.manager`)"
            if self.workers:
                yield "workers", "is given; only a manager lists workers (`fleet.role: manager`)"
