"""The manager's view of its workers: each worker's stack file, read and checked against the manager's.

The manager mirrors its workers' queues and shows their pools and cost, so it
reads their stack files (`Pulumi.<stack>.yaml` beside its own: the workers
are stacks of this program); their credentials come from their `fleetAccess`
output through a StackReference (components.kubernetes.fleet). Reading a
file is the caller's `load` (the program's and the CLI's differ only in
where the file is: ConfigError for a bad one, StackFileError for one it cannot read), so this stays pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from components.core.config import StackConfig
from components.core.config.cluster import stack_name
from components.core.config.text.stack_files import StackFileError
from components.core.problems import ConfigError, Problem, raise_problems, show

KEY = "gpucluster:fleet"


@dataclass(frozen=True)
class FleetMember:
    """A worker of the fleet: its reference as the manager lists it, its stack, its cluster name, its config."""

    reference: str
    name: str  # the stack's own name: its file is Pulumi.<name>.yaml
    cluster: str  # the MultiKueueCluster's name on the manager
    config: StackConfig


def cluster_name(stack: str) -> str:
    """The MultiKueueCluster (and kubeconfig context) name of a worker stack: a DNS-1123 label."""
    label = re.sub(r"[^a-z0-9-]+", "-", stack.lower()).strip("-")[:63].strip("-")
    return label or "worker"


def load_workers(cfg: StackConfig, load: Callable[[str], StackConfig]) -> tuple[FleetMember, ...]:
    """The manager's workers, each checked: readable, valid, `role: worker` of this manager; every problem at
    once (raises ConfigError naming `gpucluster:fleet.workers[i].stack`). () unless cfg is a fleet's manager."""
    fleet = cfg.fleet
    if fleet is None or fleet.role != "manager":
        return ()
    members: list[FleetMember] = []
    problems: list[Problem] = []
    clusters: dict[str, str] = {}
    for i, worker in enumerate(fleet.workers):
        where, name = f"{KEY}.workers[{i}].stack", stack_name(worker.stack)
        try:
            config = load(name)
        except ConfigError as err:
            problems.append(Problem(where, f"got {show(worker.stack)}; its stack file has "
                                           f"{len(err.problems)} problem(s): " + "; ".join(map(str, err.problems))))
            continue
        except StackFileError as err:  # missing or unreadable: the reader's one line
            problems.append(Problem(where, f"got {show(worker.stack)}; {err}"))
            continue
        theirs = config.fleet
        if theirs is None or theirs.role != "worker":
            problems.append(Problem(where, f"got {show(worker.stack)}; that stack is not a worker: set "
                                           f"{KEY} to {{role: worker, manager: {cfg.stack}}} in Pulumi.{name}.yaml"))
            continue
        if stack_name(theirs.manager or "") != cfg.stack:
            problems.append(Problem(where, f"got {show(worker.stack)}; that worker's {KEY}.manager is "
                                           f"{show(theirs.manager)}, not this stack ({cfg.stack}): set "
                                           f"{KEY}.manager: {cfg.stack} in Pulumi.{name}.yaml"))
            continue
        if not config.public_access_cidrs:
            problems.append(Problem(where, f"got {show(worker.stack)}; its API endpoint is private "
                                           "(deployerInVpc, no publicAccessCidrs), and the manager reaches a worker "
                                           "from its NAT gateways' addresses: add this manager's `natPublicIps` "
                                           f"output (each as /32) to gpucluster:publicAccessCidrs in "
                                           f"Pulumi.{name}.yaml"))
            continue
        cluster = cluster_name(name)
        if cluster in clusters:
            problems.append(Problem(where, f"got {show(worker.stack)}; its cluster name {cluster!r} is that of "
                                           f"{clusters[cluster]!r} too; rename one stack"))
            continue
        clusters[cluster] = worker.stack
        members.append(FleetMember(worker.stack, name, cluster, config))
    problems += _same_queues(members, fleet.workers)
    raise_problems(problems)
    return tuple(members)


def queue_names(config: StackConfig) -> tuple[str, tuple[str, ...]]:
    """(training namespace, team names) of a worker: where its jobs queue."""
    return config.training_namespace, tuple(sorted(t.name for t in config.teams))


def _same_queues(members: list[FleetMember], listed: tuple) -> list[Problem]:
    """Every worker queues jobs in the same namespaces: the manager mirrors them with one MultiKueueConfig for
    every queue, so a queue some worker lacks would be offered to a worker that can never admit it."""
    if not members:
        return []
    first = members[0]
    want = queue_names(first.config)
    index = {stack_name(w.stack): i for i, w in enumerate(listed)}
    return [Problem(f"{KEY}.workers[{index[m.name]}].stack",
                    f"got {show(m.reference)}; its training namespace and teams {queue_names(m.config)} are not "
                    f"those of {first.name} {want}: a fleet's workers queue jobs in the same namespaces and teams "
                    "(gpucluster:trainingNamespace, gpucluster:teams[].name)")
            for m in members[1:] if queue_names(m.config) != want]
