"""The pre-step check in a multi-node job's own start (pure): the wrapped command, its env, the code it runs.

Where: a step in the job's start, not a Kueue AdmissionCheck: admission happens before the job's nodes are
known (with atomic scale-up, Kueue's topology assignment comes after the checks), and only the job's own pods,
on exactly its nodes, in its own image (its NCCL, aws-ofi-nccl and libfabric), measure what the job will get.
Only jobs of 2 or more nodes on a pool with `checks_before_start` (preStepCheck and EFA) under mpirun or
torchrun: single-node jobs, `ps` jobs and other pools render exactly as before.

- torchrun (TrainJob): each node runs `python3 -m gpucluster_goodput.precheck torchrun` (the ranks under
  torchrun with Trainer's PET_* variables, on the port after the job's), then `exec`s the job's command.
- mpirun (MPIJob): the launcher runs the check's own mpirun (the job's flags and env, the check's program on
  MASTER_PORT + 1) under `python3 -m gpucluster_goodput.precheck mpirun`, then `exec`s the job's mpirun.
The code is components/core/goodput/, shipped as the package gpucluster_goodput in the ConfigMap
CODE_CONFIG_MAP of the job's namespace (components/kubernetes/queue.py creates it in each training namespace),
mounted whole at CODE_ROOT/gpucluster_goodput: no per-file items, so a file added to the package changes no job
object (a changed spec replaces a running job) and a job submitted before `pulumi up` finds what is there.
PYTHONPATH is set for the check's processes only: the job's command keeps the image's environment.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from components.core.config import GpuPoolConfig, JobConfig
from components.core.config.jobs import PRE_STEP_CODE_DIR
from components.core.goodput import names, precheck
from components.core.hardware import efa, nccl

GOODPUT_DIR = Path(__file__).resolve().parents[1] / "goodput"
CODE_CONFIG_MAP = "gpucluster-goodput-code"
CODE_VOLUME = "gpucluster-goodput-code"
PACKAGE = "gpucluster_goodput"
CODE_ROOT = PRE_STEP_CODE_DIR  # PYTHONPATH of the check; the package is the directory below it
CODE_MOUNT = {"name": CODE_VOLUME, "mountPath": f"{CODE_ROOT}/{PACKAGE}", "readOnly": True}
LAUNCHERS = ("mpirun", "torchrun")
PROGRAM = "gpucluster-pre-step"  # the wrapper's $0, as ps and error messages show it
# The node's name for the verdict (the controller quarantines nodes by it): the downward API gives it as env
# only (Kubernetes docs, "Downward API": spec.nodeName is available through environment variables, not volumes).
NODE_NAME_ENV = {"name": precheck.NODE_NAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
RANK_PROGRAM = ("python3", "-m", precheck.MODULE, "rank")
DEFAULT_MASTER_PORT = "29500"

# PID 1 ignores SIGTERM without a handler: the trap ends the pod at once during the check (the check runs in the
# background so that `wait` returns to it); the kernel then kills the check with the container's init. `exec`
# makes the job's own command PID 1, as without the check. An image without python3 skips the check.
_SCRIPT = """trap 'exit 143' TERM INT
if command -v python3 >/dev/null 2>&1; then
  PYTHONPATH={root}${{PYTHONPATH:+:$PYTHONPATH}} {pool_env}={pool} python3 -m {module} {args} &
  wait $!
  code=$?
  case $code in
    0) ;;
    {failed}|143) exit $code ;;
    *) echo "gpucluster pre-step check: ended with $code (its own fault): the job runs anyway" >&2 ;;
  esac
else
  echo "gpucluster pre-step check: skipped: no python3 in the image" >&2
fi
exec "$@"
"""


def applies(job: JobConfig, pool: GpuPoolConfig) -> bool:
    """Whether the job starts with the check."""
    return job.nodes >= 2 and pool.checks_before_start and job.launcher in LAUNCHERS


def env(pool: GpuPoolConfig) -> dict[str, str]:
    """What the check judges by: every EFA device of the type (the vpc.amazonaws.com/efa count the workers ask
    for) and the type's 2-node all_reduce bus bandwidth (nccl-report's reference)."""
    expected = nccl.expected_busbw_gbps(pool.instance_type)
    if expected is None:
        raise ValueError(f"pool {pool.name}: {pool.instance_type} has no EFA, so no pre-step check")
    return {precheck.EFA_DEVICES_ENV: str(efa.efa_interface_count(pool.instance, pool.efa_enabled)),
            precheck.EXPECTED_GBPS_ENV: f"{expected[0]:g}"}


def wrap(command: list[str], check_args: list[str], pool: str) -> list[str]:
    """`command` after the check (`python3 -m gpucluster_goodput.precheck <check_args>`, told the job's pool:
    whether it enforces), its argv untouched."""
    script = _SCRIPT.format(root=CODE_ROOT, module=precheck.MODULE, args=shlex.join(check_args),
                            failed=names.PRE_STEP_EXIT_CODE, pool_env=precheck.POOL_ENV, pool=shlex.quote(pool))
    return ["/bin/sh", "-c", script, PROGRAM, *command]


def torchrun_command(command: list[str], pool: str) -> list[str]:
    return wrap(command, ["torchrun"], pool)


def rank_env(job_env: dict[str, str], pool: GpuPoolConfig) -> dict[str, str]:
    """The check's mpirun env: the job's (its NCCL and EFA settings), the rendezvous on the port after the
    job's, the check's values and the code's path (ranks started over ssh get only what -x passes)."""
    port = job_env.get("MASTER_PORT", DEFAULT_MASTER_PORT)
    return {**job_env, "MASTER_PORT": str(int(port) + 1) if port.isdigit() else port, "PYTHONPATH": CODE_ROOT,
            **env(pool)}


def mpirun_command(command: list[str], check_mpirun: list[str], pool: str) -> list[str]:
    """The launcher's command: `check_mpirun` (launcher.mpirun_command with rank_env and RANK_PROGRAM) under the
    check's driver, then the job's mpirun."""
    return wrap(command, ["mpirun", *check_mpirun], pool)


def volume() -> dict[str, Any]:
    # optional: a job submitted while the stack had the check, restarted after it no longer does, still starts
    # (the wrapper then finds no module and the job runs).
    return {"name": CODE_VOLUME, "configMap": {"name": CODE_CONFIG_MAP, "defaultMode": 0o444, "optional": True}}


def add_code(pod_spec: dict[str, Any], container: dict[str, Any]) -> None:
    """The code's volume in `pod_spec`, mounted in `container`."""
    pod_spec.setdefault("volumes", []).append(volume())
    container.setdefault("volumeMounts", []).append(dict(CODE_MOUNT))


def code_files() -> dict[str, str]:
    """Every file of components/core/goodput (the package's modules, whoever adds them), read when rendered."""
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(GOODPUT_DIR.iterdir()) if p.is_file()}


def enforced_pools(pools: list[Any] | tuple[Any, ...]) -> list[str]:
    """The GPU pools whose failed check fails the job: remediation `on` (names.ENFORCED_POOLS_FILE says why)."""
    return sorted(p.name for p in pools if not p.is_cpu and p.remediation == names.MODE_ON)


def code_config_map(namespace: str, enforced: list[str] | None = None) -> dict[str, Any]:
    """The package, and with `enforced` (a job namespace's) the pools that fail jobs on a failed check."""
    data = code_files()
    if enforced is not None:
        data[names.ENFORCED_POOLS_FILE] = json.dumps(enforced)
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CODE_CONFIG_MAP, "namespace": namespace,
                         "labels": {"app.kubernetes.io/part-of": "gpucluster"}},
            "data": data}


def needed(pools: list[Any] | tuple[Any, ...]) -> bool:
    """Whether the training namespaces need the code: some GPU pool checks its jobs."""
    return any(getattr(p, "checks_before_start", False) for p in pools)
