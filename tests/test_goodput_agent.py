"""The goodput controller's objects (components/core/observability/goodput_agent.py) and their component
(components/kubernetes/goodput.py): its config per stack, least-privilege rights, a hardened pod on the system
nodes that runs the shipped package, and a scrape that keeps the jobs' own labels."""

from __future__ import annotations

import hashlib
import json

import pulumi
import pulumi_kubernetes as k8s_sdk

from components.core.goodput import controller
from components.core.kube import nodepool
from components.core.observability import goodput_agent as agent
from components.core.observability import prometheus_stack as ps
from components.core.placement import prestep
from components.kubernetes.goodput import GoodputController, GoodputControllerArgs
from tests import k8s
from tests.conftest import stack_config
from tests.test_charts import chart_defaults
from tests.test_hardening import RUNTIME_DEFAULT, assert_restricted_container


def by_kind(objects: list[dict], kind: str) -> list[dict]:
    return [o for o in objects if o["kind"] == kind]


def test_prod_remediates_h100_dev_leaves_its_pool_off_and_both_read_their_namespaces_and_alerts():
    prod = json.loads(agent.config_map(stack_config("prod"))["data"]["config.json"])
    assert prod["pools"] == {"h100": "on"} and prod["namespaces"] == ["training", "vision", "language"]
    assert prod["alerts"] == {"NcclOnSockets": "nccl-on-sockets", "JobStraggler": "straggler",
                              "JobGpuXidNeedsNodeReplacement": "xid"}
    assert (prod["intervalSeconds"], prod["logTailLines"], prod["recordRetentionDays"]) == (10, 200, 90)
    dev_cfg = stack_config("dev")
    dev = json.loads(agent.config_map(dev_cfg)["data"]["config.json"])
    assert dev["pools"] == {"dev": "off"} and dev["namespaces"] == ["training"]
    # What a node costs, for the cost per useful step (`bootstrap report` computes the same).
    assert dev["poolTerms"] == {"dev": {"nodeHourUsd": dev_cfg.price("g6e.xlarge"), "gpusPerNode": 1,
                                        "billsWhileQueued": False, "idleMinutes": 3,
                                        "maxNodes": 2}}
    # The controller reads exactly that.
    parsed = controller.Config.parse(json.dumps(prod))
    assert parsed.pools == {"h100": "on"} and parsed.namespaces == ("training", "vision", "language")
    assert agent.enabled(stack_config("prod")) and not agent.enabled(
        stack_config("dev", {"gpucluster:observability": {"enabled": False}}))


def test_the_prometheus_url_is_kube_prometheus_stack_s_service_and_port():
    assert agent.PROMETHEUS_URL == "http://kps-prometheus.monitoring.svc:9090"
    chart = chart_defaults("kube-prometheus-stack", "88.5.3", pass_through=False)
    assert chart["prometheus"]["service"]["port"] == agent.PROMETHEUS_PORT
    assert ps.PROMETHEUS_SERVICE == "kps-prometheus"  # templates/prometheus/service.yaml: <fullname>-prometheus


def test_the_pod_runs_the_shipped_package_as_nobody_read_only_on_the_system_nodes():
    deployment = agent.deployment()
    k8s.validate_core(deployment, "1.35")
    spec = deployment["spec"]
    assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}  # never two acting at once
    pod = spec["template"]["spec"]
    assert pod["nodeSelector"] == nodepool.SYSTEM_NODE_LABEL and pod["serviceAccountName"] == "gpucluster-goodput"
    assert pod["securityContext"] == {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
                                      "seccompProfile": RUNTIME_DEFAULT}
    (container,) = pod["containers"]
    assert_restricted_container(container)
    assert container["image"] == "public.ecr.aws/docker/library/python:3.13.9-slim-trixie"
    assert container["command"] == ["python3", "-m", "gpucluster_goodput.controller", "--port", "8080"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {"GPUCLUSTER_GOODPUT_CONFIG": "monitoring/gpucluster-goodput-config",
                   "PYTHONPATH": "/opt/gpucluster/goodput", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"}
    # python3 -m gpucluster_goodput.controller finds <PYTHONPATH>/gpucluster_goodput/controller.py: the mount.
    mount = next(m for m in container["volumeMounts"] if m["name"] == prestep.CODE_VOLUME)
    assert mount == {"name": "gpucluster-goodput-code", "mountPath": "/opt/gpucluster/goodput/gpucluster_goodput",
                     "readOnly": True}
    volume = next(v for v in pod["volumes"] if v["name"] == prestep.CODE_VOLUME)
    assert volume["configMap"]["name"] == agent.code_config_map()["metadata"]["name"] == "gpucluster-goodput-code"
    code = agent.code_config_map()
    assert code["metadata"]["namespace"] == "monitoring"
    assert {"__init__.py", "controller.py", "kubeapi.py", "remediation.py", "records.py", "metrics_text.py",
            "accounting.py", "steps.py", "names.py"} <= set(code["data"])
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}


def test_a_changed_package_rolls_the_pod(monkeypatch):
    before = agent.deployment()["spec"]["template"]["metadata"]["annotations"]["gpucluster.io/code-sha256"]
    files = prestep.code_files()
    assert before == hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
    monkeypatch.setattr(prestep, "code_files", lambda: {**files, "remediation.py": files["remediation.py"] + "#\n"})
    assert agent.deployment()["spec"]["template"]["metadata"]["annotations"]["gpucluster.io/code-sha256"] != before


def test_rights_are_nodes_cluster_wide_and_the_rest_only_in_the_training_namespaces():
    objects = agent.rbac(stack_config("prod"))
    roles = {o["metadata"]["name"]: o["rules"] for o in by_kind(objects, "ClusterRole")}
    assert roles["gpucluster-goodput"] == [{"apiGroups": [""], "resources": ["nodes"],
                                            "verbs": ["get", "list", "patch"]}]
    assert roles["gpucluster-goodput-jobs"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch", "delete"]},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["configmaps"],
         "verbs": ["get", "list", "create", "update", "patch", "delete"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["list"]},
        {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"], "verbs": ["get", "list", "patch"]},
        {"apiGroups": ["kubeflow.org"], "resources": ["mpijobs"], "verbs": ["get", "list", "patch"]},
        {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["get", "list", "patch"]}]
    (binding,) = by_kind(objects, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == "gpucluster-goodput"
    jobs = [b for b in by_kind(objects, "RoleBinding") if b["roleRef"]["name"] == "gpucluster-goodput-jobs"]
    assert [b["metadata"]["namespace"] for b in jobs] == ["training", "vision", "language"]
    assert all(b["roleRef"]["kind"] == "ClusterRole" for b in jobs)
    (own,) = by_kind(objects, "Role")
    assert own["metadata"]["namespace"] == "monitoring" and own["rules"] == [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": ["gpucluster-goodput-config"]}]
    subjects = {json.dumps(o["subjects"]) for o in objects if "subjects" in o}
    assert subjects == {json.dumps([{"kind": "ServiceAccount", "name": "gpucluster-goodput", "namespace": "monitoring"}])}
    for obj in objects:
        k8s.validate_core(obj, "1.35")


def test_prometheus_scrapes_it_keeping_the_jobs_namespace_label_and_only_prometheus_reaches_it():
    service, monitor = agent.service(), agent.service_monitor()
    (port,) = service["spec"]["ports"]
    container_port = agent.deployment()["spec"]["template"]["spec"]["containers"][0]["ports"][0]
    assert port["name"] == container_port["name"] == "metrics" and port["port"] == container_port["containerPort"]
    (endpoint,) = monitor["spec"]["endpoints"]
    # honorLabels: the metric's own `namespace` (the job's) is kept, not renamed exported_namespace.
    assert endpoint == {"port": "metrics", "path": "/metrics", "honorLabels": True}
    assert monitor["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
    policy = agent.network_policy_ingress()
    assert policy["spec"]["ingress"][0]["ports"] == [{"protocol": "TCP", "port": 8080}]
    assert policy["spec"]["ingress"][0]["from"][0]["podSelector"] == {"matchLabels": {
        "app.kubernetes.io/name": "prometheus"}}
    k8s.validate_core(service, "1.35")


def test_the_component_registers_everything_after_what_it_needs(run_mocked):
    cfg = stack_config("prod")

    def program():
        provider = k8s_sdk.Provider("k8s", kubeconfig="{}")
        training = k8s_sdk.core.v1.Namespace("training", metadata={"name": "training"})
        teams = {t: k8s_sdk.core.v1.Namespace(t, metadata={"name": t}) for t in ("vision", "language")}
        monitoring = pulumi.CustomResource("test:index:Monitoring", "monitoring")
        GoodputController("gp", GoodputControllerArgs(config=cfg, provider=provider, training_namespace=training,
                                                      team_namespaces=teams, depends_on=[monitoring],
                                                      metrics_crds=[monitoring]))
    rec = run_mocked(program, "prod")
    (component,) = rec.of_type("gpucluster:index:GoodputController")
    deployment = rec.named("gp-deployment-gpucluster-goodput")
    for name in ("gp-configmap-gpucluster-goodput-code", "gp-configmap-gpucluster-goodput-config",
                 "gp-serviceaccount-gpucluster-goodput", "gp-clusterrole-gpucluster-goodput-jobs",
                 "gp-rolebinding-vision-gpucluster-goodput"):
        assert rec.depends_on(deployment, rec.named(name)), name
    assert rec.depends_on(rec.named("gp-rolebinding-vision-gpucluster-goodput"), rec.named("vision"))
    assert rec.depends_on(rec.named("gp-rolebinding-training-gpucluster-goodput"), rec.named("training"))
    monitor = rec.named("gp-servicemonitor-gpucluster-goodput")
    assert monitor.type == "kubernetes:monitoring.coreos.com/v1:ServiceMonitor"
    assert rec.depends_on(monitor, rec.named("monitoring"))
    assert component.component_outputs["remediation"] == {"h100": "on"}
    assert len([r for r in rec.resources if r.parent == component.urn]) == len(agent.objects(cfg)) + 1
