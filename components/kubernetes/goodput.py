"""GoodputController: our remediation and accounting controller on the system nodes (with the metrics stack).

The objects are pure functions in components.core.observability.goodput_agent; this component registers
them: its code and config ConfigMaps, ServiceAccount and RBAC (a RoleBinding in each training namespace,
after that namespace), the Deployment, its Service and NetworkPolicy, and the ServiceMonitor once the
Prometheus Operator's CRDs exist (Monitoring.crds_ready).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.core.config import StackConfig
from components.core.observability import goodput_agent as agent
from components.kubernetes.objects import KubernetesObject


@dataclass(frozen=True)
class GoodputControllerArgs:
    config: StackConfig
    provider: k8s.Provider
    training_namespace: pulumi.Resource
    # gpucluster:teams' namespaces by team (Cluster.team_namespaces): their jobs are remediated and accounted too.
    team_namespaces: Mapping[str, pulumi.Resource] = field(default_factory=dict)
    # The metrics namespace (Monitoring creates it) and the system nodes the pod runs on.
    depends_on: Sequence[pulumi.Resource] = field(default_factory=tuple)
    metrics_crds: Sequence[pulumi.Resource] = field(default_factory=tuple)  # Monitoring.crds_ready


def _resource_name(name: str, obj: dict) -> str:
    meta = obj["metadata"]
    where = f"{meta['namespace']}-" if meta.get("namespace") and meta["namespace"] != agent.NAMESPACE else ""
    return f"{name}-{obj['kind'].lower()}-{where}{meta['name']}"


class GoodputController(pulumi.ComponentResource):
    """The goodput controller: quarantines blamed nodes per pool mode, keeps each job's GPU-second record."""

    def __init__(self, name: str, args: GoodputControllerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpucluster:index:GoodputController", name, None, opts)
        cfg = args.config
        in_namespace = {cfg.training_namespace: args.training_namespace, **{
            t.namespace: args.team_namespaces[t.name] for t in cfg.teams if t.name in args.team_namespaces}}
        base = list(args.depends_on)
        registered: list[pulumi.Resource] = []
        for obj in agent.objects(cfg):
            namespace = obj["metadata"].get("namespace")
            waits = base + ([in_namespace[namespace]] if namespace in in_namespace else [])
            if obj["kind"] == "Deployment":
                waits += registered  # its code, config, account and rights first
            registered.append(KubernetesObject(_resource_name(name, obj), obj, pulumi.ResourceOptions(
                parent=self, provider=args.provider, depends_on=waits)))
        if args.metrics_crds:
            monitor = agent.service_monitor()
            KubernetesObject(_resource_name(name, monitor), monitor, pulumi.ResourceOptions(
                parent=self, provider=args.provider, depends_on=[*base, *args.metrics_crds]))
        self.register_outputs({"namespace": agent.NAMESPACE, "image": agent.PYTHON_IMAGE,
                               "remediation": {p.name: p.remediation for p in cfg.gpu_pools}})
