"""Which pod holds what `logs` shows, and the lines of one rank (pure).

- MPIJob: mpirun runs in the launcher and prints every rank's output, each
  line tagged `[<job>,<rank>]<stdout>:` (`--tag-output`, components.core.kube.
  launcher.mpirun_command): the launcher's log, filtered by the tag for a rank.
- TrainJob: each node's pod runs torchrun for that node's ranks; the pod
  of node k is the one with batch.kubernetes.io/job-completion-index k
  (Trainer's JobSet runs one Indexed Job of numNodes pods), and rank r
  is on node r // numProcPerNode.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

MPI_ROLE = "training.kubeflow.org/job-role"  # mpi-operator v0.8 v2beta1 JobRoleLabel
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"  # label and annotation (Kubernetes 1.28+)
TAG = re.compile(r"^\[\d+,(\d+)\]<std(?:out|err)>:")


class NoPod(Exception):
    """The job has no pod to read yet (queued, or its nodes are still coming); the message says which."""


@dataclass(frozen=True)
class Source:
    pod: str
    container: str | None
    rank: int | None  # filter the launcher's lines to this rank (MPIJob)
    note: str  # what the user reads: whose output this is


def _index(pod: dict[str, Any]) -> int | None:
    meta = pod["metadata"]
    value = (meta.get("labels") or {}).get(COMPLETION_INDEX) or (meta.get("annotations") or {}).get(COMPLETION_INDEX)
    return int(value) if value is not None and str(value).isdigit() else None


def _newest(pods: list[dict[str, Any]]) -> dict[str, Any]:
    return max(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "")


def source(job: dict[str, Any], pods: list[dict[str, Any]], rank: int | None) -> Source:
    name = job["metadata"]["name"]
    if job["kind"] == "MPIJob":
        launchers = [p for p in pods if (p["metadata"].get("labels") or {}).get(MPI_ROLE) == "launcher"]
        if not launchers:
            raise NoPod(f"{name} has no launcher pod yet: the MPI Operator starts it once every worker is ready "
                        "(`python -m bootstrap status` says whether it is queued or waiting for nodes)")
        note = "mpirun in the launcher: every rank" if rank is None else f"rank {rank}'s lines of mpirun's output"
        return Source(_newest(launchers)["metadata"]["name"], "launcher", rank, note)
    if job["kind"] == "JobSet":  # `launcher: ps`: the chief runs the training loop; --rank N is worker N
        role, index = ("chief", 0) if rank is None else ("worker", rank)
        pods = [p for p in pods if (p["metadata"].get("labels") or {}).get(
            "jobset.sigs.k8s.io/replicatedjob-name") == role and _index(p) == index]
        if not pods:
            raise NoPod(f"{name} has no {role} {index} pod yet (queued, or its nodes are still being added)")
        return Source(_newest(pods)["metadata"]["name"], None, None,
                      "the chief (the training loop)" if rank is None else f"worker {rank}")
    per_node = int((job.get("spec") or {}).get("trainer", {}).get("numProcPerNode") or 1)
    node = 0 if rank is None else rank // per_node
    candidates = [p for p in pods if _index(p) == node]
    if not candidates:
        raise NoPod(f"{name} has no pod for node {node} yet (queued, or its nodes are still being added)")
    note = (f"node {node}'s torchrun (ranks {node * per_node}-{node * per_node + per_node - 1})"
            if rank is not None else "node 0's torchrun (rank 0 and its node's other ranks)")
    return Source(_newest(candidates)["metadata"]["name"], None, None, note)


def only_rank(lines: Iterable[str], rank: int | None) -> Iterator[str]:
    """The lines of one rank of a tagged mpirun output (every line when `rank` is None)."""
    for line in lines:
        if rank is None or (match := TAG.match(line)) and int(match[1]) == rank:
            yield line
