"""What `submit` creates: the manifest the stack would render for a job, and what it needs in the cluster.

A job of the stack (`startOnUp: false`) renders as `pulumi up` would render
it (components.core.kube.launcher: the same NCCL/EFA preset, queue,
deadline, cost bound, labels); its ConfigMap of scripts and Secret of
secret env values exist already, `pulumi up` made them. A job file holds
one entry shaped like `gpucluster:jobs[]`, validated against the stack
(its pool, nodes, model) by the same parser; its scripts' ConfigMap and,
for torchrun, a missing runtime are created by `submit` itself.

A team's job (its own `team:`, or `submit --team`) renders into the team's
namespace (cfg.namespace_of), queued at its own priority class, which the
stack's rules already hold to the team's priorityClasses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bootstrap import stackfile
from components.core.config import GpuPoolConfig, JobConfig, StackConfig
from components.core.config.jobs import script_files
from components.core.config.text import stack_yaml
from components.core.kube import launcher, trainer, workers
from components.core.planning import teardown
from components.core.storage.fsx_volume import CLAIM_NAME

# Who made an object: pulumi-kubernetes labels what it creates `managed-by: pulumi`; ours say `gpucluster`.
MANAGED_BY = "app.kubernetes.io/managed-by"
SUBMITTED = "gpucluster"
PULUMI = "pulumi"
JOB_FILE_MAX_BYTES = 256 * 1024


class SubmitError(Exception):
    """The job cannot be submitted as asked; the message says why and what to do."""

    exit_code = 2  # could not run (README: every verb's rule)


class Refused(SubmitError):
    """Submitting would break a rule of the stack (a team's budget): a problem found."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Submission:
    job: JobConfig
    pool: GpuPoolConfig
    namespace: str
    manifest: dict[str, Any]
    runtime: dict[str, Any] | None  # the ClusterTrainingRuntime a TrainJob names (created if missing)
    config_map: dict[str, Any] | None  # a job file's scripts (a stack job's come with `pulumi up`)
    secret: frozenset[str]  # env names the job takes from its Secret (made by `pulumi up`)
    deadline_seconds: int | None
    price_per_hour: float  # nodes x the pool's price (and a ps job's parameter servers)
    node_price_per_hour: float  # one node of the pool: what a team's budget counts, per node

    @property
    def team(self) -> str | None:
        return self.job.team

    @property
    def kind(self) -> str:
        return self.manifest["kind"]

    @property
    def name(self) -> str:
        return self.manifest["metadata"]["name"]


def _mark(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"].setdefault("labels", {})[MANAGED_BY] = SUBMITTED
    return obj


def build(cfg: StackConfig, index: int, from_file: bool, image_cache: str | None = None) -> Submission:
    job = cfg.jobs[index]
    pool = cfg.pool(job.pool)
    namespace = cfg.namespace_of(job)
    secret = cfg.secret_env(index)
    manifest = _mark(launcher.job_manifest(job, pool, launcher.JobContext(
        namespace, CLAIM_NAME, cfg.storage, cfg.prices, cfg.cpu_pools, image_cache), secret))
    runtime = None
    if job.launcher == "torchrun":
        runtime = _mark(trainer.runtime(pool, job.max_restarts, CLAIM_NAME, job.mount_path,
                                        job.termination_grace_period_seconds, image_cache))
    config_map = None
    if from_file and job.scripts:
        config_map = _mark({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": workers.scripts_config_map_name(job.name), "namespace": namespace,
            "labels": workers.labels(job.name, pool)}, "data": script_files(job.scripts)})
    return Submission(job, pool, namespace, manifest, runtime, config_map, secret,
                      teardown.deadline_seconds(job, pool, cfg.prices, cfg.ps_pool_of(job)),
                      teardown.job_price_per_hour(job, pool, cfg.prices, cfg.ps_pool_of(job)),
                      cfg.price(pool.instance_type))


def _check_team(cfg: StackConfig, team: str | None) -> None:
    if team is not None and team not in {t.name for t in cfg.teams}:
        raise SubmitError(f"no team {team!r} in stack {cfg.stack}; its teams: "
                          f"{', '.join(t.name for t in cfg.teams) or '(none)'}")


def from_stack(cfg: StackConfig, name: str, image_cache: str | None = None, team: str | None = None) -> Submission:
    """A job of the stack by name; one `pulumi up` starts itself is refused (Pulumi owns that object).

    `team`: the job must be that team's already (its Secret and scripts are where `pulumi up` put them)."""
    _check_team(cfg, team)
    names = [j.name for j in cfg.jobs]
    if name not in names:
        raise SubmitError(f"no job {name!r} in stack {cfg.stack}; its jobs: {', '.join(names) or '(none)'}; "
                          "or give a job file with --file")
    index = names.index(name)
    if team is not None and cfg.jobs[index].team != team:
        raise SubmitError(f"job {name!r} is not team {team}'s: it runs in namespace "
                          f"{cfg.namespace_of(cfg.jobs[index])} (gpucluster:jobs[{index}].team: "
                          f"{cfg.jobs[index].team or 'none'}); set its team and `pulumi up`, or submit it as a job "
                          f"file with --team {team}")
    if cfg.jobs[index].start_on_up:
        raise SubmitError(f"job {name!r} is started by `pulumi up` (startOnUp: true), which owns it: submitting it "
                          f"too would fight Pulumi; set gpucluster:jobs[{index}].startOnUp: false (then `pulumi "
                          "up` leaves it to submit) or submit a job file")
    return build(cfg, index, from_file=False, image_cache=image_cache)


def from_file(stack: str, path: Path, stack_file: Path | None = None, image_cache: str | None = None,
              team: str | None = None) -> Submission:
    """A job file (one `gpucluster:jobs[]` entry, YAML) checked against the stack as if it were one of its jobs;
    `team` sets its `team:` (a file naming another is refused)."""
    entry = read_job_file(path)
    base, _, _ = stackfile.load_stack(stack, stack_file=stack_file, standins=True)
    if team is not None:
        _check_team(base, team)
        if entry.get("team") not in (None, team):
            raise SubmitError(f"{path}: its team is {entry['team']!r}, not --team {team}; give one of them")
        entry["team"] = team
    cfg, _, _ = stackfile.load_stack(stack, stack_file=stack_file, standins=True,
                                     overrides={"gpucluster:jobs": [entry]})
    if cfg.jobs[0].name in {j.name for j in base.jobs}:
        raise SubmitError(f"{path}: job name {cfg.jobs[0].name!r} is a job of stack {stack}; give this one its own "
                          f"name (submit the stack's with `submit --stack {stack} {cfg.jobs[0].name}`)")
    return build(cfg, 0, from_file=True, image_cache=image_cache)


def read_job_file(path: Path) -> dict[str, Any]:
    try:
        data = path.read_bytes()
    except OSError as err:
        raise SubmitError(f"{path}: cannot be read ({err.strerror or err})") from None
    if len(data) > JOB_FILE_MAX_BYTES:
        raise SubmitError(f"{path}: over {JOB_FILE_MAX_BYTES:,} bytes; a job file is one job")
    try:
        entry = stack_yaml.parse_value(data.decode("utf-8"), str(path))
    except UnicodeDecodeError:
        raise SubmitError(f"{path}: not UTF-8 text") from None
    except stack_yaml.StackYamlError as err:
        raise SubmitError(str(err)) from None
    if not isinstance(entry, dict):
        raise SubmitError(f"{path}: must be one job, a mapping like an entry of gpucluster:jobs "
                          "(name, pool, nodes, launcher, image, command, ...)")
    if stack_yaml.is_secure(entry) or any(stack_yaml.is_secure(v) for v in (entry.get("env") or {}).values()):
        raise SubmitError(f"{path}: secret values cannot be read from a job file; put the job in the stack "
                          "(startOnUp: false) and set them with `pulumi config set --secret --path`")
    return json.loads(json.dumps(entry))
