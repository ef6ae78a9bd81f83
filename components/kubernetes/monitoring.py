"""Monitoring: kube-prometheus-stack and dcgm-exporter, EFA counters, dashboards, alerts, TensorBoard, AMP.

Values and manifests are pure functions in components.core.observability;
this component wires them: a gp3 StorageClass for Prometheus's volume,
Pod Identity roles (Grafana: CloudWatch reads for FSx; Prometheus:
aps:RemoteWrite when remoteWrite is amp; Alertmanager: sns:Publish when a
topic is set), a random Grafana admin password, the releases and objects.
Everything that needs the Prometheus Operator's CRDs waits for the release
(`crds_ready`): the monitors and rules, ours and the other components'
(Kueue's and the autoscaler's are ours, their charts' own off), and
dcgm-exporter, whose chart renders its ServiceMonitor. No other chart waits
for the metrics stack.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import pulumi_random as random

from components.aws import iam
from components.core import versions as v
from components.core.config import StackConfig
from components.core.kube import network_policy
from components.core.observability import alerts, dashboards, efa_exporter, tensorboard
from components.core.observability import prometheus_stack as ps
from components.core.planning.metrics_footprint import footprint
from components.core.teams import access as team_access
from components.kubernetes.objects import KubernetesObject

# Grafana's CloudWatch data source reads metrics only (Grafana docs, "AWS CloudWatch data source",
# IAM policy); neither action supports resource-level permissions.
CLOUDWATCH_READ_ACTIONS = ("cloudwatch:GetMetricData", "cloudwatch:ListMetrics")


def allow(actions: Sequence[str], resource: pulumi.Input[str]) -> pulumi.Output[str]:
    return pulumi.Output.from_input(resource).apply(lambda arn: json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": list(actions), "Resource": arn}]}))


def efa_counters_ingress() -> dict:
    """The EFA counters' NetworkPolicy: Prometheus to node-exporter's port, nothing else in."""
    return network_policy.scrape_only("efa-counters-ingress", ps.NAMESPACE, {"app.kubernetes.io/name": efa_exporter.NAME},
                                      efa_exporter.PORT, ps.NAMESPACE)


@dataclass(frozen=True)
class MonitoringArgs:
    config: StackConfig
    cluster: pulumi.Input[str]  # the EKS cluster's name output
    provider: k8s.Provider
    file_system_id: pulumi.Input[str]
    claim_name: str  # the FSx claim in the training namespace (TensorBoard)
    claim: pulumi.Resource  # what creates it: only TensorBoard waits for the file system
    training_namespace: pulumi.Resource
    # gpucluster:teams' namespaces by team (Cluster.team_namespaces): their jobs' metrics are scraped too.
    team_namespaces: Mapping[str, pulumi.Resource] = field(default_factory=dict)
    # The system nodes, the EBS CSI add-on and the Pod Identity agent (and the image cache, when there is one).
    depends_on: Sequence[pulumi.Resource] = field(default_factory=tuple)
    image_cache: str | None = None  # ImageCache.base: busybox (the EFA counters) is pulled through it


class Monitoring(pulumi.ComponentResource):
    """The metrics stack on the system nodes, exporters on the GPU pools, three dashboards and the alerts."""

    crds_ready: list[pulumi.Resource]  # what a ServiceMonitor, PodMonitor or PrometheusRule must wait for
    remote_write_url: pulumi.Output[str] | None

    def __init__(self, name: str, args: MonitoringArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpucluster:index:Monitoring", name, None, opts)
        cfg, obs = args.config, args.config.observability
        tags = cfg.tags
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=list(args.depends_on))
        fp = footprint(cfg)
        if not fp.holds_retention:
            pulumi.log.warn(f"observability: {obs.retention_days} days of metrics at every pool's maxNodes need about "
                            f"{fp.needed_gib} GiB, the volume is {fp.volume_gib} GiB: Prometheus will keep fewer days "
                            "(size-based retention); set observability.volumeGiB before the first `pulumi up`")

        namespace = k8s.core.v1.Namespace(f"{name}-ns", metadata={
            "name": ps.NAMESPACE, "labels": {"app.kubernetes.io/part-of": "gpucluster"}}, opts=k8s_opts)
        self.namespace = namespace  # the metrics namespace: the goodput controller lives there too
        in_ns = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[namespace])
        storage_class = k8s.storage.v1.StorageClass(
            f"{name}-gp3", metadata={"name": ps.STORAGE_CLASS}, provisioner="ebs.csi.aws.com",
            parameters={"type": "gp3", "encrypted": "true"}, volume_binding_mode="WaitForFirstConsumer",
            reclaim_policy="Delete", allow_volume_expansion=True, opts=k8s_opts)

        cluster_arn = iam.cluster_arn(args.cluster, region=cfg.region)

        def pod_role(role: str, service_account: str, policy: pulumi.Input[str]) -> aws.eks.PodIdentityAssociation:
            r, _ = iam.service_role(f"{name}-{role}-role", iam.POD_IDENTITY, [], tags, self, cluster_arn=cluster_arn,
                                    namespace=ps.NAMESPACE, service_account=service_account)
            attached = aws.iam.RolePolicy(f"{name}-{role}-role-policy", role=r.name, policy=policy,
                                          opts=pulumi.ResourceOptions(parent=self))
            return aws.eks.PodIdentityAssociation(
                f"{name}-{role}-pod-identity", cluster_name=args.cluster, namespace=ps.NAMESPACE,
                service_account=service_account, role_arn=r.arn, tags=tags,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[attached]))

        associations = [pod_role("grafana", ps.GRAFANA_SERVICE_ACCOUNT, allow(CLOUDWATCH_READ_ACTIONS, "*"))]
        self.remote_write_url = None
        if obs.remote_write == "amp":
            workspace = aws.amp.Workspace(f"{name}-amp", alias=cfg.cluster_name, tags=tags,
                                          opts=pulumi.ResourceOptions(parent=self))
            associations.append(pod_role("prometheus", ps.PROMETHEUS_SERVICE_ACCOUNT,
                                         allow(["aps:RemoteWrite"], workspace.arn)))
            self.remote_write_url = workspace.prometheus_endpoint.apply(lambda e: f"{e.rstrip('/')}/api/v1/remote_write")
        if obs.alert_sns_topic_arn:
            associations.append(pod_role("alertmanager", ps.ALERTMANAGER_SERVICE_ACCOUNT,
                                         allow(["sns:Publish"], obs.alert_sns_topic_arn)))

        password = random.RandomPassword(f"{name}-grafana-password", length=32, special=False,
                                         opts=pulumi.ResourceOptions(parent=self))
        secrets = [k8s.core.v1.Secret(f"{name}-grafana-admin", metadata={
            "name": ps.GRAFANA_ADMIN_SECRET, "namespace": ps.NAMESPACE}, type="Opaque",
            string_data={"admin-user": "admin", "admin-password": password.result}, opts=in_ns)]
        slack = cfg.alert_slack_webhook_url is not None
        if slack:
            secrets.append(k8s.core.v1.Secret(f"{name}-alert-receivers", metadata={
                "name": ps.ALERTMANAGER_SECRET, "namespace": ps.NAMESPACE}, type="Opaque",
                string_data={ps.SLACK_URL_KEY: pulumi.Output.secret(
                    cfg.alert_slack_webhook_url.get_secret_value())}, opts=in_ns))
        slack_file = f"/etc/alertmanager/secrets/{ps.ALERTMANAGER_SECRET}/{ps.SLACK_URL_KEY}" if slack else None
        am_config = alerts.alertmanager_config(obs.alert_sns_topic_arn, slack_file)

        values = pulumi.Output.from_input(self.remote_write_url).apply(
            lambda url: ps.kube_prometheus_stack_values(fp, cfg.cluster_name, cfg.region, am_config, url, slack))
        stack = k8s.helm.v3.Release(
            f"{name}-stack", name=ps.RELEASE, chart=v.KPS_CHART, version=v.KPS_CHART_VERSION,
            repository_opts={"repo": v.KPS_CHART_REPO}, namespace=ps.NAMESPACE, values=values,
            # Its node-exporter DaemonSet waits for every node, GPU nodes joining in the same run included.
            timeout=ps.HELM_TIMEOUT_SECONDS,
            # The operator's CRDs are large; Helm installs them from the chart's crds/ on the first install.
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider,
                                        depends_on=[namespace, storage_class, *secrets, *associations,
                                                    *args.depends_on]))
        self.crds_ready = [stack]
        after_stack = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[stack])
        # Needed: the chart renders its ServiceMonitor (serviceMonitor.enabled), which Helm cannot install before
        # the CRD. It ends the plan's critical path ("Time to ready"); no job or controller waits for it.
        k8s.helm.v3.Release(
            f"{name}-dcgm-exporter", name=ps.DCGM_RELEASE, chart=v.DCGM_CHART, version=v.DCGM_CHART_VERSION,
            repository_opts={"repo": v.DCGM_CHART_REPO}, namespace=ps.NAMESPACE, values=ps.dcgm_values(),
            opts=after_stack)

        if any(p.efa_enabled for p in cfg.gpu_pools):
            script = KubernetesObject(f"{name}-efa-counters-script", efa_exporter.config_map(ps.NAMESPACE), in_ns)
            KubernetesObject(f"{name}-efa-counters", efa_exporter.daemon_set(ps.NAMESPACE, args.image_cache),
                             pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[script]))
            KubernetesObject(f"{name}-efa-counters-monitor", efa_exporter.pod_monitor(ps.NAMESPACE), after_stack)
            # Only Prometheus reaches the counters; the rest of the namespace is the charts' and has no policy.
            KubernetesObject(f"{name}-efa-counters-netpol", efa_counters_ingress(), in_ns)
        KubernetesObject(f"{name}-rules", alerts.prometheus_rule(cfg, ps.NAMESPACE), after_stack)
        KubernetesObject(f"{name}-job-metrics", alerts.job_pod_monitor(cfg.training_namespace),
                         pulumi.ResourceOptions(parent=self, provider=args.provider,
                                                depends_on=[stack, args.training_namespace]))
        if cfg.teams:
            # Members read spend (status --team, submit's budget check) through the API server's proxy.
            reader = KubernetesObject(f"{name}-spend-reader", team_access.spend_reader_role(
                ps.NAMESPACE, ps.PROMETHEUS_SERVICE, ps.PROMETHEUS_PORT_NAME), in_ns)
            KubernetesObject(f"{name}-spend-reader-binding", team_access.spend_reader_binding(ps.NAMESPACE, cfg.teams),
                             pulumi.ResourceOptions.merge(in_ns, pulumi.ResourceOptions(depends_on=[reader])))
        for team, namespace in args.team_namespaces.items():
            KubernetesObject(f"{name}-team-{team}-job-metrics", alerts.job_pod_monitor(team),
                             pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[stack, namespace]))

        boards = pulumi.Output.from_input(args.file_system_id).apply(
            lambda fs_id: dashboards.dashboards(cfg, fs_id, cfg.region))
        for key in dashboards.dashboard_keys(cfg):
            k8s.core.v1.ConfigMap(
                f"{name}-{key.removesuffix('.json')}", metadata=dashboards.config_map_metadata(key, ps.NAMESPACE,
                                                                                             ps.DASHBOARD_LABEL),
                data=boards.apply(lambda b, key=key: {key: dashboards.render(b[key])}), opts=in_ns)

        if obs.tensorboard:
            board_opts = pulumi.ResourceOptions(parent=self, provider=args.provider,
                                                depends_on=[args.training_namespace, args.claim,
                                                            *args.depends_on])
            KubernetesObject(f"{name}-tensorboard", tensorboard.deployment(cfg.training_namespace, args.claim_name),
                             board_opts)
            KubernetesObject(f"{name}-tensorboard-svc", tensorboard.service(cfg.training_namespace), board_opts)

        self.footprint = fp
        self.register_outputs({"namespace": ps.NAMESPACE, "prometheusVolumeGiB": fp.volume_gib,
                               "remoteWriteUrl": self.remote_write_url})
