"""The guide's staged check of a live pool as MPIJobs (pure): one node first, then two.

- One node: the file system mounted where jobs mount it, a direct-I/O
  write and read of 1 GiB through it, then all_reduce_perf over the node's
  GPUs (NVLink only).
- Two nodes: each worker opens TCP port 22 of the other (the launcher's
  mpirun reaches workers over ssh; the guide's `nc -zv`), then
  all_reduce_perf across both nodes over every EFA device: the fabric test.

Each run is the fabric test's MPIJob (launcher.mpijob_manifest: the pool's
NCCL/EFA preset, the pinned Deep Learning Container with nccl-tests, queued
at the fabric test's priority) with a bash script as the launcher's
command; every line the checks print starts with MARK, so the verb reads
them back out of the launcher's log.
"""

from __future__ import annotations

import shlex
from typing import Any

from components.core import images
from components.core.config import GpuPoolConfig, RunPolicyConfig
from components.core.hardware import nccl
from components.core.kube import launcher, queueing, workers

MARK = "gpucluster-validate"
MOUNT = "/fsx"
PROBE_MIB = 1024
DEADLINE_SECONDS = 1800  # a stage that hangs is stopped (and its nodes given back)
STAGES = ("one-node", "two-node")
PROBE_ATTEMPTS = 15  # at most ~105 s (5 s timeout, 2 s apart) before a port counts as closed


def name(pool: GpuPoolConfig, stage: str) -> str:
    return f"validate-{pool.name}-{'1' if stage == 'one-node' else '2'}node"


def _mpirun(nodes: int, per_node: int, env: dict[str, str], program: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in launcher.mpirun_command(nodes, per_node, env, program))


def fsx_probe() -> str:
    """On the node: is the file system mounted, and how fast is a direct 1 GiB write and read of it."""
    target = f"{MOUNT}/.{MARK}-$(hostname)"
    return (f"if mountpoint -q {MOUNT}; then echo '{MARK} fsx mounted'; "
            f"dd if=/dev/zero of={target} bs=1M count={PROBE_MIB} oflag=direct 2>&1 | tail -n 1 | "
            f"sed 's/^/{MARK} fsx write: /'; "
            f"dd if={target} of=/dev/null bs=1M iflag=direct 2>&1 | tail -n 1 | sed 's/^/{MARK} fsx read: /'; "
            f"rm -f {target}; else echo '{MARK} fsx missing'; fi")


def tcp_probe(job: str, namespace: str, attempts: int = PROBE_ATTEMPTS) -> str:
    """On each of two workers: can it open port 22 of the other (bash's /dev/tcp; no nc needed), retried
    `attempts` times 2 s apart: a new pod's first flows may be dropped (network_policy, first contacts)."""
    peer = f"{job}-worker-$((1 - OMPI_COMM_WORLD_RANK)).{job}.{namespace}.svc"
    return (f"peer={peer}; open=0; for attempt in $(seq {attempts}); do if timeout 5 bash -c \"</dev/tcp/$peer/22\"; "
            f"then open=1; break; fi; sleep 2; done; if [ $open = 1 ]; then echo \"{MARK} tcp $(hostname) -> "
            f"$peer:22 open\"; else echo \"{MARK} tcp $(hostname) -> $peer:22 closed\"; fi")


def script(stage: str, pool: GpuPoolConfig, job: str, namespace: str) -> str:
    gpus = pool.instance.gpu_count
    env = nccl.preset_env(pool.instance_type, pool.efa_enabled)
    if stage == "one-node":
        first = _mpirun(1, 1, {}, ["bash", "-c", fsx_probe()])
        test = _mpirun(1, gpus, env, launcher.ALL_REDUCE_PERF)
    else:
        first = _mpirun(2, 1, {}, ["bash", "-c", tcp_probe(job, namespace)])
        test = _mpirun(2, gpus, env, launcher.ALL_REDUCE_PERF)
    return f"set -o pipefail; {first}; echo '{MARK} nccl-tests'; {test}"


def mpijob(stage: str, pool: GpuPoolConfig, namespace: str, claim_name: str,
           image_cache: str | None = None) -> dict[str, Any]:
    nodes = 1 if stage == "one-node" else 2
    job = name(pool, stage)
    gpus = pool.instance.gpu_count
    mount = MOUNT if stage == "one-node" else None
    image = images.through_cache(launcher.FABRIC_TEST_IMAGE, image_cache)
    worker = workers.worker_container("worker", image, pool, gpus, mount)
    return launcher.mpijob_manifest(
        job, launcher.JobContext(namespace, claim_name if mount else None), pool, nodes, gpus,
        image, ["/bin/bash", "-c", script(stage, pool, job, namespace)], worker,
        claim_name if mount else None, RunPolicyConfig(backoff_limit=0),
        queueing.FABRIC_TEST_PRIORITY, DEADLINE_SECONDS)
