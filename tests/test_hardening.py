"""Hardened workloads: the securityContext, resources and probes of what we render, and of every chart's values.

Objects we render are checked as rendered (and by checkov, tests/test_checkov.py). Charts are not rendered
offline, so their values are merged over the vendored chart defaults the way Helm merges them
(tests/test_charts.py) and the effective settings are checked: what we set, and what we rely on the
chart's defaults for.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest

from components.core.kube import autoscaling, hardening, mpi_operator, queueing, trainer
from components.core.kube.nodepool import SYSTEM_NODE_LABEL
from components.core.observability import efa_exporter, tensorboard
from components.core.observability import prometheus_stack as ps
from components.kubernetes import device_plugins
from tests import k8s
from tests.conftest import recording as shared_recording
from tests.conftest import stack_config
from tests.test_charts import chart_defaults, chart_name, merged

RESTRICTED = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}
RUNTIME_DEFAULT = {"type": "RuntimeDefault"}


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["template"]["spec"]


def assert_restricted_container(container: dict[str, Any]) -> None:
    assert container["securityContext"] == RESTRICTED, container["name"]
    resources = container["resources"]
    assert set(resources["requests"]) == {"cpu", "memory"} and set(resources["limits"]) == {"memory"}
    assert "livenessProbe" in container and "readinessProbe" in container, container["name"]


# -- what we render ------------------------------------------------------------------------------------------


def test_hardening_vocabulary():
    assert hardening.container_security_context() == RESTRICTED
    assert hardening.pod_security_context() == {"runAsNonRoot": True, "seccompProfile": RUNTIME_DEFAULT}
    assert hardening.pod_security_context(65532) == {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                                                     "seccompProfile": RUNTIME_DEFAULT}
    # Fresh dicts every call: a caller may add keys without touching the next one's.
    assert hardening.container_security_context() is not hardening.container_security_context()


def test_mpi_operator_runs_as_distroless_nonroot_read_only():
    (deployment,) = [o for o in mpi_operator.mpi_operator_objects() if o["kind"] == "Deployment"]
    pod = pod_spec(deployment)
    # The image's USER is root (gcr.io/distroless/base-debian12:latest): the UID is ours, distroless's nonroot.
    assert pod["securityContext"] == {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                                      "seccompProfile": RUNTIME_DEFAULT}
    (container,) = pod["containers"]
    assert_restricted_container(container)
    assert container["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert pod["volumes"] == [{"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}}]
    # It is the API's client: its token stays (tests/checkov-skips.yaml, CKV_K8S_38).
    assert "automountServiceAccountToken" not in pod and pod["serviceAccountName"] == "mpi-operator"
    k8s.validate_core(deployment, "1.35")


def test_tensorboard_runs_as_nobody_read_only_with_both_probes():
    deployment = tensorboard.deployment("training", "fsx")
    pod = pod_spec(deployment)
    assert pod["securityContext"] == {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
                                      "seccompProfile": RUNTIME_DEFAULT}
    assert pod["automountServiceAccountToken"] is False
    (container,) = pod["containers"]
    assert_restricted_container(container)
    # TensorBoard writes its .tensorboard-info under the temp directory (tensorboard/manager.py).
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert {"name": "HOME", "value": "/tmp"} in container["env"]
    assert {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}} in pod["volumes"]
    for probe in (container["livenessProbe"], container["readinessProbe"]):
        assert probe["httpGet"] == {"path": "/", "port": 6006}
    assert container["livenessProbe"]["failureThreshold"] * container["livenessProbe"]["periodSeconds"] >= 300
    k8s.validate_core(deployment, "1.35")


def test_efa_counters_run_as_nobody_read_only_with_probes():
    daemon_set = efa_exporter.daemon_set("monitoring")
    pod = pod_spec(daemon_set)
    assert pod["securityContext"] == {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
                                      "seccompProfile": RUNTIME_DEFAULT}
    assert pod["automountServiceAccountToken"] is False
    collector, exporter = pod["containers"]
    for container in (collector, exporter):
        assert_restricted_container(container)
    assert exporter["livenessProbe"]["httpGet"] == exporter["readinessProbe"]["httpGet"] == {"path": "/", "port": 9100}
    # The host's /sys is read, never written.
    assert {"name": "sys", "mountPath": "/host/sys", "readOnly": True} in collector["volumeMounts"]
    k8s.validate_core(daemon_set, "1.35")


def probe_passes(probe: dict[str, Any], textfile: str) -> bool:
    command = [c.replace(efa_exporter.TEXTFILE_DIR, textfile) for c in probe["exec"]["command"]]
    assert command[0] == "/bin/sh"
    return subprocess.run([shutil.which("sh"), *command[1:]], timeout=10,
                          env={"PATH": "/usr/bin:/bin"}).returncode == 0


def test_the_collector_s_probes_follow_its_file(tmp_path):
    (tmp_path / "sys").mkdir()
    live, ready = efa_exporter.COLLECTOR_LIVENESS, efa_exporter.COLLECTOR_READINESS
    assert not probe_passes(ready, str(tmp_path)) and not probe_passes(live, str(tmp_path))
    script = tmp_path / "collect.sh"
    script.write_text(efa_exporter.COLLECT_SCRIPT)
    subprocess.run([shutil.which("sh"), str(script)], check=True, timeout=30, env={
        "SYSFS_ROOT": str(tmp_path / "sys"), "TEXTFILE_DIR": str(tmp_path), "ONCE": "1", "PATH": "/usr/bin:/bin"})
    assert probe_passes(ready, str(tmp_path)) and probe_passes(live, str(tmp_path))
    # A collector that stopped rewriting it (for longer than STALE_AFTER_MINUTES) is restarted.
    subprocess.run(["touch", "-d", "10 minutes ago", str(tmp_path / "efa.prom")], check=True)
    assert probe_passes(ready, str(tmp_path)) and not probe_passes(live, str(tmp_path))


def test_training_pods_are_left_as_they_are():
    # Changing a job's pod template replaces the running job: workers keep IPC_LOCK and get no probe.
    from components.core.kube import launcher

    cfg = stack_config("prod")
    pool = cfg.gpu_pools[0]
    job = launcher.nccl_test_mpijob(pool, "training")
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    assert worker["containers"][0]["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
    assert "securityContext" not in worker
    assert not {"livenessProbe", "readinessProbe"} & set(worker["containers"][0])


# -- the charts' values --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def effective() -> dict[str, dict[str, Any]]:
    """chart name -> our values of the prod stack merged over the chart's defaults."""

    recording = shared_recording("prod")
    out = {}
    for release in recording.of_type("kubernetes:helm.sh/v3:Release"):
        name = chart_name(release.inputs["chart"])
        defaults = chart_defaults(name, release.inputs["version"], release.inputs["values"], pass_through=False)
        out[name] = merged(defaults, release.inputs["values"])
    return out


def at(values: dict[str, Any], path: str) -> Any:
    for key in path.split("."):
        values = values[key]
    return values


# (chart, pod securityContext path or None, container securityContext path or None)
HARDENED = [
    ("cluster-autoscaler", "securityContext", "containerSecurityContext"),
    ("kueue", "controllerManager.manager.podSecurityContext", "controllerManager.manager.containerSecurityContext"),
    ("kubeflow-trainer", None, "manager.securityContext"),
    ("kubeflow-trainer", "jobset.controller.podSecurityContext", "jobset.controller.securityContext"),
    ("kube-prometheus-stack", "prometheusOperator.securityContext", "prometheusOperator.containerSecurityContext"),
    ("kube-prometheus-stack", "prometheusOperator.admissionWebhooks.patch.securityContext",
     "prometheusOperator.admissionWebhooks.createSecretJob.securityContext"),
    ("kube-prometheus-stack", None, "prometheusOperator.admissionWebhooks.patchWebhookJob.securityContext"),
    ("kube-prometheus-stack", "kube-state-metrics.securityContext", "kube-state-metrics.containerSecurityContext"),
    ("kube-prometheus-stack", "prometheus-node-exporter.securityContext",
     "prometheus-node-exporter.containerSecurityContext"),
    # Prometheus' and Alertmanager's containers are the operator's to build (read-only, drop ALL).
    ("kube-prometheus-stack", "prometheus.prometheusSpec.securityContext", None),
    ("kube-prometheus-stack", "alertmanager.alertmanagerSpec.securityContext", None),
]


@pytest.mark.parametrize(("chart", "pod_path", "container_path"), HARDENED,
                         ids=[f"{c}:{p or q}" for c, p, q in HARDENED])
def test_charts_run_non_root_read_only_without_capabilities(effective, chart, pod_path, container_path):
    values = effective[chart]
    if pod_path:
        pod = at(values, pod_path)
        assert pod["runAsNonRoot"] is True and pod["seccompProfile"] == RUNTIME_DEFAULT
        assert pod.get("runAsUser", 1000) >= 1000
    if container_path:
        container = at(values, container_path)
        assert {k: container[k] for k in RESTRICTED} == RESTRICTED
        assert "add" not in container["capabilities"] and not container.get("privileged")
        if not pod_path:  # the Trainer chart has no pod-level key: its container carries both
            assert chart != "kubeflow-trainer" or (container["runAsNonRoot"] is True
                                                   and container["seccompProfile"] == RUNTIME_DEFAULT)


def test_the_values_we_set_for_it():
    pools = stack_config("prod").gpu_pools
    values = autoscaling.helm_values("c", "us-east-1", "1.35", pools, SYSTEM_NODE_LABEL)
    assert values["securityContext"] == {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                                         "seccompProfile": RUNTIME_DEFAULT}
    assert values["containerSecurityContext"] == RESTRICTED
    manager = queueing.helm_values("training")["controllerManager"]["manager"]
    assert manager["podSecurityContext"] == {"runAsNonRoot": True, "seccompProfile": RUNTIME_DEFAULT}
    assert manager["containerSecurityContext"] == RESTRICTED
    assert trainer.helm_values()["manager"]["securityContext"] == {
        **RESTRICTED, "runAsNonRoot": True, "seccompProfile": RUNTIME_DEFAULT}
    kps = ps.kube_prometheus_stack_values(_footprint(), "c", "us-east-1", {})
    assert kps["prometheusOperator"]["prometheusConfigReloader"] == {"enableProbe": True,
                                                                     "resources": ps.CONFIG_RELOADER_RESOURCES}
    assert kps["prometheusOperator"]["admissionWebhooks"]["patch"]["resources"] == ps.WEBHOOK_JOB_RESOURCES
    assert kps["prometheus-node-exporter"]["securityContext"] == {
        "fsGroup": 65534, "runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
        "seccompProfile": RUNTIME_DEFAULT}
    assert kps["prometheus-node-exporter"]["containerSecurityContext"] == RESTRICTED


def _footprint():
    from components.core.planning.metrics_footprint import footprint

    return footprint(stack_config("prod"))


# Every container the charts run on our nodes has requests (cpu and memory) and a memory limit.
RESOURCES = [
    ("cluster-autoscaler", "resources"),
    ("kueue", "controllerManager.manager.resources"),
    ("kubeflow-trainer", "manager.resources"),
    ("kubeflow-trainer", "jobset.controller.resources"),
    ("kube-prometheus-stack", "prometheusOperator.resources"),
    ("kube-prometheus-stack", "prometheusOperator.admissionWebhooks.patch.resources"),
    ("kube-prometheus-stack", "prometheusOperator.prometheusConfigReloader.resources"),
    ("kube-prometheus-stack", "prometheus.prometheusSpec.resources"),
    ("kube-prometheus-stack", "alertmanager.alertmanagerSpec.resources"),
    ("kube-prometheus-stack", "grafana.resources"),
    ("kube-prometheus-stack", "grafana.sidecar.resources"),
    ("kube-prometheus-stack", "kube-state-metrics.resources"),
    ("kube-prometheus-stack", "prometheus-node-exporter.resources"),
    ("dcgm-exporter", "resources"),
    ("nvidia-device-plugin", "resources"),
    ("aws-efa-k8s-device-plugin", "resources"),
]


@pytest.mark.parametrize(("chart", "path"), RESOURCES, ids=[f"{c}:{p}" for c, p in RESOURCES])
def test_charts_request_and_limit(effective, chart, path):
    resources = at(effective[chart], path)
    assert {"cpu", "memory"} <= set(resources["requests"]), resources
    assert "memory" in resources["limits"], resources


def test_what_stays_privileged_and_why(effective):
    # NVIDIA's plugin: root (the kubelet's socket on a hostPath); securityContext left to the chart's helper,
    # which drops ALL and forbids escalation unless MIG, volume-mounts or CPU-manager mode ask for more.
    nvidia = effective["nvidia-device-plugin"]
    assert nvidia["securityContext"] == {} and nvidia["podSecurityContext"] == {"seccompProfile": RUNTIME_DEFAULT}
    assert nvidia["migStrategy"] is None and nvidia["deviceListStrategy"] is None
    assert nvidia["compatWithCPUManager"] is None
    # EFA's plugin: privileged on the host network (the chart's own settings, not overridden).
    efa = effective["aws-efa-k8s-device-plugin"]
    assert efa["securityContext"]["privileged"] is True
    assert "securityContext" not in device_plugins.efa_values(stack_config("prod").gpu_pools, "us-east-1")
    # dcgm-exporter: root with SYS_ADMIN for the profiling counters we chart, nothing else.
    dcgm = effective["dcgm-exporter"]
    assert dcgm["securityContext"]["capabilities"] == {"add": ["SYS_ADMIN"], "drop": ["ALL"]}
    assert dcgm["securityContext"]["allowPrivilegeEscalation"] is False
    assert any(field.startswith("DCGM_FI_PROF_") for field, _, _ in ps.DCGM_COUNTERS)
    # Grafana: non-root, no capabilities, RuntimeDefault; its root filesystem stays writable.
    grafana = effective["kube-prometheus-stack"]["grafana"]
    assert grafana["securityContext"]["runAsNonRoot"] is True
    assert {k: grafana["containerSecurityContext"][k] for k in ("allowPrivilegeEscalation", "capabilities",
                                                                "seccompProfile")} == {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "seccompProfile": RUNTIME_DEFAULT}
    # node-exporter: the host's network and PID namespace are what it reports on.
    node_exporter = effective["kube-prometheus-stack"]["prometheus-node-exporter"]
    assert node_exporter["hostNetwork"] is True and node_exporter["hostPID"] is True
