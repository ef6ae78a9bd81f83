"""gpucluster:jobs: each training job, its launcher, its model (for sizing) and its bounds.

Whether a job fits its pool is the stack's rule (components.core.config.stack);
whether its model fits and what its cost bound buys are planning's
(components.core.planning.checks).
"""

import math
import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, WithJsonSchema

from components.core.config.base import Bool, Choice, Int, Model, Number, Text, problem, rule
from components.core.config.describe import Allowed, DefaultText, Missing
from components.core.config.text.patterns import SCRIPT_PATH, mount_path_pattern
from components.core.config.values import (
    DNS_LABEL,
    ENV_NAME,
    IMAGE_PINNED_PATTERN,
    image_problem,
    mount_path_problem,
    parse_quantity,
)
from components.core.hardware import topology
from components.core.problems import show

LAUNCHERS = ("mpirun", "torchrun", "ps")
# mpirun jobs' framework presets (components.core.hardware.frameworks).
FRAMEWORKS = ("pytorch", "horovod", "tensorflow")
# The guide's parameter-server ports: 12345-12355 open between PS and workers.
PS_PORTS = (12345, 12355)
CLEAN_POD_POLICIES = ("None", "Running", "All")
# Kueue WorkloadPriorityClasses a job may name (components.core.kube.queueing.PRIORITY_CLASSES).
PRIORITY_CLASSES = ("gpucluster-high", "gpucluster-training", "gpucluster-low")
TRAINING_PRIORITY = "gpucluster-training"

# jobs[].terminationGracePeriodSeconds: how long a worker has between SIGTERM
# and SIGKILL when it is drained, preempted or its job deleted. Unset, pods
# keep Kubernetes' default (PodSpec terminationGracePeriodSeconds, 30 s) and
# the job's spec stays as it was, so upgrading gpucluster replaces no running job.
KUBERNETES_DEFAULT_GRACE_SECONDS = 30
GRACE_PERIOD_MAX_SECONDS = 3600
# On a Spot pool: EC2 warns two minutes before it reclaims the instance (EC2 User Guide, "Spot Instance
# interruption notices"), and EKS's drain starts within that window ("Managed node groups", Spot), so
# the checkpoint must land well inside it. 90 s leaves the drain half a minute: our margin, not AWS's.
SPOT_GRACE_MAX_SECONDS = 90

# Files of this repository a job runs (jobs[].scripts), mounted read-only from a ConfigMap of the job.
SCRIPTS_DIR = "/opt/gpucluster/scripts"
PROJECT_DIR = Path(__file__).resolve().parents[3]
# A ConfigMap holds at most 1 MiB (Kubernetes: "ConfigMap ... cannot exceed 1 MiB"), keys and metadata included.
SCRIPTS_MAX_BYTES = 900 * 1024
CONFIG_MAP_KEY = r"[-._a-zA-Z0-9]+"
# Paths a job's mountPath must stay off: our /dev/shm and scripts volumes, and what the container's system uses.
# The goodput package the pre-step check runs (components.core.placement.prestep mounts it there).
PRE_STEP_CODE_DIR = "/opt/gpucluster/goodput"
MOUNTED_BY_US = ("/dev/shm", SCRIPTS_DIR, PRE_STEP_CODE_DIR)
SYSTEM_PATHS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/sbin", "/sys", "/usr", "/var/run",
                "/run")
_COUNT_TEXT = "a positive count such as 7e9 or 7B"


def parse_count(value: Any) -> float | None:
    """7e9, "7B", "1.5T" -> float; None when unreadable."""
    if isinstance(value, bool):
        return None
    try:
        return parse_quantity(value)
    except (ValueError, TypeError):
        return None


# A count's text: positive (a nonzero digit), and short enough (a 30-digit mantissa, a two-digit exponent)
# that it never rounds to 0 or overflows.
COUNT_TEXT = (r"^\s*(?=[0-9.]*[1-9])(?=[0-9.]{1,30}(?:[eE\sKMBGTkmbgt]|$))[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]{1,2})?"
              r"\s*[KMBGTkmbgt]?\s*$")


def _count(value: Any) -> float:
    n = parse_count(value) if not isinstance(value, str) or re.search(COUNT_TEXT, value) else None
    if n is None or not 0 < n < math.inf:
        raise problem(f"got {show(value)}; must be {_COUNT_TEXT}")
    return n


# A parameter or token count: a number, or a string with a K/M/B/T suffix.
Count = Annotated[float, BeforeValidator(_count), Allowed(_COUNT_TEXT, short="count (`70B`, `7e9`)"),
                  WithJsonSchema({"anyOf": [{"type": "number", "exclusiveMinimum": 0},
                                            {"type": "string", "pattern": COUNT_TEXT}]})]


def _script_problem(path: str) -> str | None:
    """A script a job ships: a file of this repository, by its path from the repository's root."""
    if path.startswith("/") or ".." in Path(path).parts:
        return "must be a path inside this repository, from its root (examples/train_synthetic.py)"
    file = PROJECT_DIR / path
    if not file.is_file():
        return f"is not a file of this repository ({PROJECT_DIR})"
    if not re.fullmatch(CONFIG_MAP_KEY, file.name):
        return "has a file name a ConfigMap key cannot be (letters, digits, -, _ and . only)"
    return None


def script_files(paths: tuple[str, ...]) -> dict[str, str]:
    """{file name: text} of a job's scripts, as its ConfigMap holds them."""
    return {Path(p).name: (PROJECT_DIR / p).read_text(encoding="utf-8") for p in paths}


def _mount_path_problem(path: str) -> str | None:
    if reason := mount_path_problem(path, MOUNTED_BY_US):
        return reason
    normal = "/" + "/".join(p for p in path.split("/") if p)
    system = next((s for s in SYSTEM_PATHS if normal == s or normal.startswith(s + "/")), None)
    if system is not None:
        return f"is under {system}, which the container's system uses; mount the file system elsewhere (/fsx)"
    return None


def _env_value(value: Any) -> Any:
    # YAML reads `NCCL_NTHREADS: 4` as a number; the container gets its text.
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


Image = Text(allowed="a container image reference pinned to a tag or digest ([registry[:port]/]repository:tag or "
                     "@sha256:...)", short="image pinned to a tag or digest", check=image_problem,
             json_pattern=IMAGE_PINNED_PATTERN)
EnvName = Text(ENV_NAME, "an environment variable name", short="variable name")
# YAML numbers are written as their text, so editors accept them too.
# A value may be a secret (`pulumi config set --secret --path 'gpucluster:jobs[0].env.X'` writes
# {secure: ...}; the engine hands the program its plaintext, which the job gets from a Secret).
EnvValue = Annotated[str, BeforeValidator(_env_value), WithJsonSchema({"anyOf": [
    {"type": ["string", "number"]},
    {"type": "object", "properties": {"secure": {"type": "string"}}, "required": ["secure"],
     "additionalProperties": False}]})]


class ModelConfig(Model):
    """What the sizing checks need to know about a job's model."""

    params: Annotated[Count, Missing("is required in model (the parameter count, e.g. 7B)")] = Field(
        description="parameters; with `model` the plan sizes the job and a job that cannot fit is an error")
    tokens: Count | None = Field(None, description="training tokens (time and cost)")
    zero_stage: Int(ge=0, le=3) = Field(3, description="ZeRO stage")
    tp: Int(ge=1, le=64) = Field(1, description="tensor parallel degree")
    pp: Int(ge=1, le=512) = Field(1, description="pipeline parallel degree")
    mfu: Number(gt=0, le=1) | None = Field(0.4, description="model FLOPs utilisation for the time estimate")
    recompute: Bool = Field(False, description="activation recomputation (8 instead of 6 FLOPs per param and token)")


class RunPolicyConfig(Model):
    """When a job stops and what it leaves behind."""

    clean_pod_policy: Choice(*CLEAN_POD_POLICIES) = Field(
        "Running", description="`launcher: mpirun` only: pods removed when the job ends")
    ttl_seconds_after_finished: Int(ge=0) | None = Field(
        None, description="`launcher: mpirun` only: delete the job object this long after it ends; unset by default "
                          "because "
                          "Pulumi owns the object (a TTL-deleted job is re-created, and re-run, by the next `pulumi up "
                          "--refresh`)")
    active_deadline_seconds: Int(ge=1) | None = Field(
        None, description="hard limit on the run time (both launchers, and Kueue's max-exec-time)")
    backoff_limit: Int(ge=0, le=100) = Field(3, description="`launcher: mpirun` only: retries before the job fails")


class CheckpointConfig(Model):
    """How often the job checkpoints and how big one is: the plan's goodput model (the job does the checkpointing)."""

    every_minutes: Int(ge=1, le=1440) = Field(30, description="minutes between checkpoints (work since the last one "
                                                             "is lost on a restart)")
    size_gib: Annotated[Number(gt=0) | None,
                        DefaultText("the model's parameters x 14 bytes (bf16 weights, fp32 master weights and "
                                    "Adam moments); unknown without `model`")] = Field(
        None, description="one checkpoint's size in GiB (its write time at the FSx throughput)")


PLACEMENT_POLICIES = ("preferred", "required", "none")


class PlacementConfig(Model):
    """How close the job's nodes sit in the network."""

    policy: Choice(*PLACEMENT_POLICIES) | None = Field(
        None, description="`preferred`: Kueue places the job's nodes in as few network domains of the `layer` as it "
                          "can; `required`: all within one, or the job waits; `none`: anywhere in the pool. Unset: "
                          "`preferred` for a job of 2 or more nodes on a pool with a network topology "
                          "(`gpuPools[].topology`), `none` otherwise")
    layer: Int(ge=1, le=topology.MAX_LAYERS) | None = Field(
        None, description="the EC2 network layer the domain is taken at, topology.k8s.aws/network-node-layer-<layer>: "
                          "1 the broadest, the last layer of the pool's `gpuPools[].instanceType` (3, or 4 on p6) the "
                          "closest; with policy preferred or required. Unset: the closest")

    @rule("policy", "layer")
    def _layer_needs_a_policy(self):
        if self.layer is not None and self.policy == "none":
            yield "layer", f"got {self.layer} with policy 'none': a layer applies to policy preferred or required"


class JobConfig(Model):
    """One training job: an MPIJob (mpirun) or a TrainJob (torchrun) on a GPU pool, queued in Kueue."""

    # Pods are named <job>-launcher / <job>-worker-<n>: keep room under 63.
    name: Text(DNS_LABEL, "a lowercase DNS label of at most 40 characters", short="DNS label, at most 40",
               max_length=40) = Field(description="job name, unique among the jobs, and not that of a pool's fabric "
                                                  "test (`gpuPools[].fabricTest`)")
    pool: Text(DNS_LABEL, "the name of a gpuPools entry", short="pool name", max_length=32) = Field(
        description="where the workers run: a `gpuPools[].name`")
    nodes: Int(ge=1) = Field(description="worker nodes; at most the pool's `gpuPools[].maxNodes` (jobs that together "
                                         "exceed it queue), and, with `model`, enough for it to fit")
    launcher: Choice(*LAUNCHERS) = Field(description="`mpirun`: an MPIJob v2beta1 (MPI Operator); `torchrun`: a "
                                                     "TrainJob v1alpha1 (Kubeflow Trainer v2); `ps`: TensorFlow "
                                                     "parameter servers, a JobSet v1alpha2 of chief, ps and "
                                                     "workers; `maxRestarts`, `runPolicy`, `framework` and `psPool` "
                                                     "apply to some launchers only")
    image: Image = Field(description="training image (needs aws-ofi-nccl for EFA); `:latest` is refused")
    command: Annotated[tuple[str, ...], Field(min_length=1),
                       Missing("is required (the training command as a list, e.g. [python, train.py])")] = Field(
        description="the training command (`[python, train.py, ...]`)")
    env: dict[EnvName, EnvValue] = Field(
        default_factory=dict, description="environment over the NCCL/EFA preset (`\"\"` removes a preset variable; for "
                                          "torchrun it sets it empty, as Trainer cannot unset a runtime's variable)")
    gpus_per_node: Annotated[Int(ge=1) | None, DefaultText("all GPUs of the type")] = Field(
        None, description="GPUs per worker; at most the GPUs of the pool's `gpuPools[].instanceType`")
    model: ModelConfig | None = Field(None, description="the model, for the plan's sizing, time and cost: it must fit "
                                                        "the job's `nodes` of the pool's `gpuPools[].instanceType`, "
                                                        "tp x pp dividing their GPUs")
    run_policy: RunPolicyConfig = Field(default_factory=RunPolicyConfig, description="run bounds and cleanup")
    max_restarts: Int(ge=0, le=100) = Field(
        3, description="`launcher` torchrun or ps only: whole-gang restarts (the runtime's JobSet "
                       "`failurePolicy.maxRestarts`)")
    mount_path: Text(allowed="an absolute path off the container's system paths", short="absolute path",
                     check=_mount_path_problem, json_pattern=mount_path_pattern(MOUNTED_BY_US, SYSTEM_PATHS)) = Field(
        "/fsx", description="where the FSx claim is mounted")
    max_cost_usd: Number(gt=0) | None = Field(
        None, description="a cost bound: the run time it buys at `nodes` x the pool's price (`prices`, or the "
                          "catalog's) becomes the deadline (with activeDeadlineSeconds, the shorter wins); must buy at "
                          "least 10 minutes")
    metrics_port: Int(ge=1024, le=65535) | None = Field(
        None, description="a port the job's workers serve Prometheus metrics on (gpucluster_job_tokens_per_second, "
                          "gpucluster_job_step_seconds, gpucluster_job_loss): scraped, and drawn on the job dashboard; "
                          "the workers get it as GPUCLUSTER_METRICS_PORT")
    framework: Choice(*FRAMEWORKS) = Field(
        "pytorch", description="`launcher: mpirun` only: `horovod` or `tensorflow` add the Horovod knobs that still "
                               "apply "
                               "(README, Launchers)")
    ps_replicas: Int(ge=1, le=64) = Field(
        1, description="`launcher: ps` only: parameter server pods, one per node of the `psPool`, so at most its "
                       "`cpuPools[].maxNodes`")
    ps_pool: Text(DNS_LABEL, "the name of a cpuPools entry", short="CPU pool name", max_length=32) | None = Field(
        None, description="`launcher: ps` only (required): the CPU pool the parameter servers run on, a "
                          "`cpuPools[].name`, one per node (the chief runs on the system nodes)")
    ps_port: Int(ge=PS_PORTS[0], le=PS_PORTS[1]) = Field(
        PS_PORTS[0], description="`launcher: ps` only: the port every task serves gRPC on (the guide's 12345-12355)")
    placement: PlacementConfig | None = Field(
        None, description="how close in the EC2 network its nodes sit (Kueue topology-aware scheduling); preferred or "
                          "required needs a pool with a network topology (`gpuPools[].topology` auto on a "
                          "`gpuPools[].instanceType` EKS labels); unset: preferred in one domain of the closest layer "
                          "for 2 or more nodes on such a pool")
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig,
                                         description="its checkpoint interval and size, for the plan's goodput model")
    team: Text(DNS_LABEL, "the name of a teams entry", short="team name", max_length=24) | None = Field(
        None, description="the team whose namespace, queue, storage, job role and budget the job uses (a "
                          "`teams[].name`); none: the training namespace")
    priority_class: Choice(*PRIORITY_CLASSES) = Field(
        TRAINING_PRIORITY, description="its Kueue priority class: orders its queue and, when lent GPUs are "
                                           "reclaimed, a lower one is preempted first; a team's job one of "
                                           "`teams[].priorityClasses`")
    start_on_up: Bool = Field(
        True, description="`false`: `pulumi up` does not start the job; `python -m bootstrap submit --stack <stack> "
                          "<job>` does, as often as you like (its runtime and Secret are still set up)")
    scripts: tuple[Text(allowed="a file of this repository, by its path from the root", short="repository file",
                        check=_script_problem, json_pattern=SCRIPT_PATH), ...] = Field(
        (), description=f"files of this repository the job runs, mounted read-only at {SCRIPTS_DIR}/<file name> "
                        "(GPUCLUSTER_SCRIPTS_DIR) from a ConfigMap of the job; no two of the same file name; together "
                        "at most 900 KiB")
    termination_grace_period_seconds: Annotated[Int(ge=0, le=GRACE_PERIOD_MAX_SECONDS) | None,
                                                DefaultText("unset: Kubernetes' 30 s")] = Field(
        None, description="SIGTERM to SIGKILL when a worker is drained, evicted or deleted: the time to write a "
                          "checkpoint (torchrun then waits this long for its processes, less 5 s); at most 90 on a "
                          "pool whose `gpuPools[].capacityType` is SPOT (two minutes' notice); unset leaves the job's "
                          "spec as before, so upgrading gpucluster "
                          "replaces no running job")

    @rule("scripts")
    def _scripts_fit(self):
        names = [Path(p).name for p in self.scripts]
        for i, name in enumerate(names):
            if name in names[:i]:
                yield f"scripts[{i}]", f"repeats the file name {name!r} (each is mounted by its name)"
        size = sum(len(text.encode()) for text in script_files(self.scripts).values()) if len(set(names)) == len(
            names) else 0
        if size > SCRIPTS_MAX_BYTES:
            yield "scripts", f"hold {size:,} bytes; a ConfigMap holds at most {SCRIPTS_MAX_BYTES:,} of them (1 MiB)"

    @rule("launcher")
    def _launcher_keys(self, given: dict[str, Any]):
        # Keys of another launcher would be ignored: say so instead.
        if self.launcher == "mpirun" and given.get("maxRestarts", given.get("max_restarts")) is not None:
            yield "maxRestarts", ("applies to launchers torchrun and ps (the JobSet restarts the gang); an MPIJob "
                                  "retries with runPolicy.backoffLimit")
        run_policy = given.get("runPolicy", given.get("run_policy"))
        if self.launcher != "mpirun" and isinstance(run_policy, dict):
            for key in ("cleanPodPolicy", "backoffLimit", "ttlSecondsAfterFinished"):
                if key in run_policy:
                    yield f"runPolicy.{key}", (f"applies to launcher mpirun (MPIJob) only; a {self.launcher} job "
                                               "restarts with maxRestarts and its pods end with it")
        if self.launcher != "mpirun" and given.get("framework") is not None:
            yield "framework", "applies to launcher mpirun (Horovod and TensorFlow run under mpirun)"
        for key in ("psReplicas", "psPool", "psPort"):
            if self.launcher != "ps" and given.get(key) is not None:
                yield key, f"applies to launcher ps only (a {self.launcher} job has no parameter servers)"
        if self.launcher == "ps" and self.ps_pool is None:
            yield "psPool", "is required with launcher ps: the cpuPools entry the parameter servers run on"
