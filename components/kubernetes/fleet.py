"""Fleet: this stack's side of a fleet of clusters behind one queue (Kueue MultiKueue; components.core.fleet).

A worker: the manager's ServiceAccount, its rights (Kueue's script's, plus TrainJobs: reads cluster-wide, writes
bound in each job namespace), its token Role, and the bootstrap token, read back from the live Secret into
`access` (the `fleetAccess` output).
A manager: per worker a kubeconfig Secret from the worker's `fleetAccess` (a StackReference; its data the
rotator's after creation), the seed Secret of the same kubeconfig (the program's: rewritten at every `up`, the
rotator reseeds from it) and a MultiKueueCluster; the MultiKueueConfig and AdmissionCheck; the workers' namespaces, flavors, ClusterQueues,
LocalQueues and torchrun runtimes, mirrored; the token rotator's CronJob. Kueue objects after Kueue (`kueue`:
its webhooks refuse them before), and before it on destroy (its finalizers).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.core.config import StackConfig
from components.core.fleet import manager, names, queues, rotator, worker
from components.core.fleet.workers import FleetMember
from components.kubernetes.objects import KubernetesObject


@dataclass(frozen=True)
class FleetArgs:
    config: StackConfig
    provider: k8s.Provider
    members: Sequence[FleetMember] = ()  # the manager's workers (components.core.fleet.workers.load_workers)
    # A worker's own kubeconfig (Cluster.kubeconfig, JSON): its endpoint and CA go into `fleetAccess`.
    kubeconfig: pulumi.Input[str] | None = None
    kueue: Sequence[pulumi.Resource] = ()  # the manager's Kueue release (Queue.release)
    # The namespaces the manager's Cluster already creates (training and teams' namespaces), by name.
    namespaces: Mapping[str, pulumi.Resource] = field(default_factory=dict)
    depends_on: Sequence[pulumi.Resource] = ()  # the system nodes


# Core and batch kinds as pulumi-kubernetes' own resources (their type tokens are kubernetes:core/v1:<Kind>,
# kubernetes:batch/v1:<Kind>); everything else whole (KubernetesObject).
_TYPED = {("v1", "Namespace"): k8s.core.v1.Namespace, ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
          ("v1", "ConfigMap"): k8s.core.v1.ConfigMap, ("batch/v1", "CronJob"): k8s.batch.v1.CronJob}


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def _res_name(name: str, obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{name}-{obj['kind'].lower()}-" + (f"{meta['namespace']}-" if meta.get("namespace") else "") + meta["name"]


def _server_and_ca(kubeconfig: str) -> tuple[str, str]:
    cluster = json.loads(kubeconfig)["clusters"][0]["cluster"]
    return cluster["server"], cluster["certificate-authority-data"]


class Fleet(pulumi.ComponentResource):
    access: pulumi.Output[dict[str, str]] | None  # a worker's `fleetAccess` (secret)

    def __init__(self, name: str, args: FleetArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpucluster:index:Fleet", name, None, opts)
        self.access = None
        cfg = args.config
        self._opts = dict(parent=self, provider=args.provider)
        if worker.enabled(cfg):
            self._worker(name, args)
        elif manager.enabled(cfg):
            self._manager(name, args)
        self.register_outputs({"role": cfg.fleet.role if cfg.fleet else None,
                               "workers": [m.cluster for m in args.members]})

    def _object(self, name: str, obj: dict[str, Any], depends_on: Sequence[pulumi.Resource], **extra
                ) -> pulumi.CustomResource:
        opts = pulumi.ResourceOptions(**self._opts, depends_on=list(depends_on), **extra)
        typed = _TYPED.get((obj["apiVersion"], obj["kind"]))
        if typed is None:
            return KubernetesObject(_res_name(name, obj), obj, opts)
        return typed(_res_name(name, obj), opts=opts,
                     **{_snake(k): v for k, v in obj.items() if k not in ("apiVersion", "kind")})

    def _worker(self, name: str, args: FleetArgs) -> None:
        *objs, secret = worker.objects(args.config)
        made: list[pulumi.Resource] = []
        for obj in objs:  # the namespace first, then its account and the rights that name it
            job_ns = args.namespaces.get(obj["metadata"].get("namespace", ""))  # a write RoleBinding's namespace
            made.append(self._object(name, obj, [*args.depends_on, *made[:1], *([job_ns] if job_ns else [])]))
        bootstrap = k8s.core.v1.Secret(_res_name(name, secret), metadata=secret["metadata"], type=secret["type"],
                                       opts=pulumi.ResourceOptions(**self._opts, depends_on=made))
        # The token is the token controller's, not an input: read from the live Secret once it is there (its id is
        # unknown in a preview before it is created, so the read happens only after the create, whose waitFor
        # annotation held until the token was filled).
        live = k8s.core.v1.Secret.get(f"{name}-bootstrap-token", bootstrap.id,
                                      opts=pulumi.ResourceOptions(**self._opts, depends_on=[bootstrap]))
        token = live.data.apply(lambda data: base64.b64decode((data or {}).get("token") or "").decode())
        self.access = pulumi.Output.secret(pulumi.Output.all(args.kubeconfig, token).apply(
            lambda a: worker.access(*_server_and_ca(a[0]), a[1])))

    def _manager(self, name: str, args: FleetArgs) -> None:
        cfg, members = args.config, args.members
        kueue = list(args.kueue)
        clusters = []
        for member in members:
            ref = pulumi.StackReference(f"{name}-{member.cluster}-stack", stack_name=member.reference,
                                        opts=pulumi.ResourceOptions(parent=self))
            text = ref.require_output(names.ACCESS_OUTPUT).apply(lambda a, c=member.cluster: manager.kubeconfig(c, a))
            data = {names.KUBECONFIG_KEY: pulumi.Output.secret(
                text.apply(lambda t: base64.b64encode(t.encode()).decode()))}
            obj = manager.kubeconfig_secret(member.cluster, "")
            secret = k8s.core.v1.Secret(_res_name(name, obj), metadata=obj["metadata"], type=obj["type"], data=data,
                                        opts=pulumi.ResourceOptions(
                # The rotator owns the token after creation: a later `up` must not put the bootstrap token back
                # (it would still work: the bootstrap token is never revoked) nor show a diff at every rotation.
                # A re-created worker reaches it through the seed below, which the rotator reseeds from.
                **self._opts, depends_on=kueue, ignore_changes=["data", "stringData"]))
            seed = manager.seed_secret(member.cluster, "")
            k8s.core.v1.Secret(_res_name(name, seed), metadata=seed["metadata"], type=seed["type"], data=data,
                               opts=pulumi.ResourceOptions(**self._opts, depends_on=kueue))
            clusters.append(self._object(name, manager.multikueue_cluster(member.cluster), [*kueue, secret]))
        config = self._object(name, manager.multikueue_config(members), [*kueue, *clusters])
        check = self._object(name, manager.admission_check(), [*kueue, config])
        mirrored = queues.manager_queues(cfg, members)
        namespaces = dict(args.namespaces)
        for ns in mirrored.namespaces:
            if ns not in namespaces:
                namespaces[ns] = k8s.core.v1.Namespace(f"{name}-ns-{ns}", metadata={
                    "name": ns, "labels": dict(manager.LABELS)}, opts=pulumi.ResourceOptions(
                        **self._opts, depends_on=list(args.depends_on)))
        networks = [self._object(name, t, kueue) for t in mirrored.topologies]
        flavors = [self._object(name, f, [*kueue, *networks]) for f in mirrored.flavors]
        cqs = {q["metadata"]["name"]: self._object(name, q, [*kueue, check, *flavors])
               for q in mirrored.cluster_queues}
        for lq in mirrored.local_queues:
            self._object(name, lq, [*kueue, cqs[lq["spec"]["clusterQueue"]], namespaces[lq["metadata"]["namespace"]]],
                         replace_on_changes=["spec.clusterQueue"], delete_before_replace=True)
        for rt in mirrored.runtimes:
            self._object(name, rt, [*args.depends_on, *kueue])
        made: list[pulumi.Resource] = []
        for obj in rotator.objects(cfg, members):
            made.append(self._object(name, obj, [*args.depends_on, *kueue, *made]))
