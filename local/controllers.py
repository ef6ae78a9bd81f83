"""Kueue, JobSet, Kubeflow Trainer and the MPI Operator as local processes, configured as the stack renders them.

Each manager's configuration is the one its chart (or, for the MPI
Operator, our own Deployment) renders from the stack's values, with only
what running outside a pod changes: the kubeconfig, 127.0.0.1 ports, our
webhook certificate instead of the charts' in-cluster certificate
rotation (whose certificates name only <service>.<namespace>.svc), no
leader election, no metrics listener. The webhook configurations the
charts render are registered with their clientConfig rewritten to
https://127.0.0.1:<port><path> and our CA (rewrite_webhooks).
"""

from __future__ import annotations

import base64
import copy
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from local import build, controlplane, processes
from local.controlplane import HOST, PORTS


@dataclass(frozen=True)
class Manager:
    name: str
    binary: str
    webhook_port: int | None
    health_port: int
    # The chart Service its webhook configurations name (rewritten to the local port).
    webhook_services: tuple[str, ...] = ()


KUEUE = Manager("kueue", "kueue", PORTS.kueue_webhook, PORTS.kueue_health, ("kueue-webhook-service",))
JOBSET = Manager("jobset", "jobset", PORTS.jobset_webhook, PORTS.jobset_health, ("jobset-webhook-service",))
TRAINER = Manager("trainer", "trainer-controller-manager", PORTS.trainer_webhook, PORTS.trainer_health,
                  ("kubeflow-trainer-controller-manager",))
# No webhook; its health endpoint is fixed at :8080 on every interface (cmd/mpi-operator/app/server.go).
MPI_OPERATOR = Manager("mpi-operator", "mpi-operator", None, 8080)
MANAGERS = (JOBSET, TRAINER, MPI_OPERATOR, KUEUE)


def managers() -> tuple[Manager, ...]:
    """The managers this cluster runs: MANAGERS less those controlplane.without() names (the fleet's clusters
    run no MPI Operator; the fleet e2e runs TrainJobs)."""
    return tuple(m for m in MANAGERS if m.name not in controlplane.without())

# Kueue v0.19.2 reads its metrics certificate from this fixed path whenever its internal
# certificate management is off (cmd/kueue/main.go), whatever metrics.bindAddress says.
KUEUE_METRICS_CERTS = Path("/etc/kueue/metrics/certs")


class ManagerError(RuntimeError):
    pass


def _find(objects: list[dict[str, Any]], kind: str, name_suffix: str) -> dict[str, Any]:
    for obj in objects:
        if obj.get("kind") == kind and obj["metadata"]["name"].endswith(name_suffix):
            return obj
    raise ManagerError(f"the rendered chart has no {kind} named *{name_suffix}")


def _container_args(deployment: dict[str, Any]) -> list[str]:
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return [*container.get("command", [])[1:], *container.get("args", [])]


def _local_serving(config: dict[str, Any], manager: Manager, cert_dir: Path | None) -> dict[str, Any]:
    config = copy.deepcopy(config)
    config["webhook"] = {**config.get("webhook", {}), "host": HOST, "port": manager.webhook_port,
                         **({"certDir": str(cert_dir)} if cert_dir else {})}
    config["health"] = {**config.get("health", {}), "healthProbeBindAddress": f"{HOST}:{manager.health_port}"}
    config["metrics"] = {**config.get("metrics", {}), "bindAddress": "0"}
    config["leaderElection"] = {**config.get("leaderElection", {}), "leaderElect": False}
    return config


def kueue_config(chart_objects: list[dict[str, Any]], cert_dir: Path) -> tuple[dict[str, Any], list[str]]:
    """Kueue's Configuration from the chart's manager ConfigMap, and the Deployment's other flags."""
    configmap = _find(chart_objects, "ConfigMap", "-manager-config")
    config = yaml.safe_load(configmap["data"]["controller_manager_config.yaml"])
    config = _local_serving(config, KUEUE, cert_dir)
    config["internalCertManagement"] = {"enable": False}
    args = [a for a in _container_args(_find(chart_objects, "Deployment", "-controller-manager"))
            if not a.startswith("--config")]
    gates = dict(config.get("featureGates") or {})
    flags = []
    for arg in args:
        if arg.startswith("--feature-gates="):
            for pair in arg.split("=", 1)[1].split(","):
                key, _, value = pair.partition("=")
                gates[key] = value.lower() == "true"
        else:
            flags.append(arg)
    # The visibility API server is an aggregated API: we register no APIService for it (an
    # unavailable one breaks discovery for every client), so the manager need not serve it.
    gates["VisibilityOnDemand"] = False
    config["featureGates"] = gates
    return config, flags


def jobset_config(chart_objects: list[dict[str, Any]], cert_dir: Path) -> tuple[dict[str, Any], list[str]]:
    configmap = _find(chart_objects, "ConfigMap", "jobset-controller-config")
    config = yaml.safe_load(next(iter(configmap["data"].values())))
    config = _local_serving(config, JOBSET, cert_dir)
    config["internalCertManagement"] = {"enable": False}
    flags = [a for a in _container_args(_find(chart_objects, "Deployment", "jobset-controller"))
             if not a.startswith(("--config", "--leader-elect", "--health-probe", "--metrics-bind"))]
    return config, [*flags, "--leader-elect=false", f"--health-probe-bind-address={HOST}:{JOBSET.health_port}",
                    "--metrics-bind-address=0"]


def trainer_config(chart_objects: list[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    configmap = _find(chart_objects, "ConfigMap", "kubeflow-trainer-config")
    config = yaml.safe_load(next(iter(configmap["data"].values())))
    config = _local_serving(config, TRAINER, None)
    config["webhook"].pop("certDir", None)  # Trainer has none: $TMPDIR/k8s-webhook-server/serving-certs
    config["certManagement"] = {"enable": False}
    config.pop("leaderElection", None)
    flags = [a for a in _container_args(_find(chart_objects, "Deployment", "kubeflow-trainer-controller-manager"))
             if not a.startswith("--config")]
    return config, flags


def mpi_operator_flags(stack_objects: list[dict[str, Any]]) -> list[str]:
    """Our MPI Operator Deployment's flags; its metrics listener (all interfaces) off."""
    deployment = _find(stack_objects, "Deployment", "mpi-operator")
    args = [a for a in _container_args(deployment) if not a.startswith("--monitoring-port")]
    return [*args, "--monitoring-port=0"]


def _install_cert(keys_dir: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(keys_dir / "webhook.crt", target / "tls.crt")
    shutil.copy(keys_dir / "webhook.key", target / "tls.key")


def start(state: Path, chart_objects: list[dict[str, Any]], stack_objects: list[dict[str, Any]]) -> None:
    """Start the four managers and wait until each is healthy (CRDs and namespaces must be applied)."""
    kubeconfig = str(controlplane.kubeconfig_path(state))
    keys = state / "pki"
    work = state / "managers"
    work.mkdir(exist_ok=True)
    certs = work / "webhook-certs"
    _install_cert(keys, certs)

    config, flags = jobset_config(chart_objects, certs)
    (work / "jobset.yaml").write_text(yaml.safe_dump(config))
    processes.start(state, "jobset", [str(build.binary("jobset")), f"--kubeconfig={kubeconfig}",
                                      f"--config={work / 'jobset.yaml'}", *flags])

    config, flags = trainer_config(chart_objects)
    (work / "trainer.yaml").write_text(yaml.safe_dump(config))
    tmp = work / "trainer-tmp"
    _install_cert(keys, tmp / "k8s-webhook-server" / "serving-certs")
    processes.start(state, "trainer", [str(build.binary("trainer-controller-manager")), f"--kubeconfig={kubeconfig}",
                                       f"--config={work / 'trainer.yaml'}", *flags], env={"TMPDIR": str(tmp)})

    if MPI_OPERATOR in managers():
        # --kubeConfig (its spelling) names the state folder, so `stop` finds it; $KUBECONFIG would win anyway.
        processes.start(state, "mpi-operator", [str(build.binary("mpi-operator")), f"--kubeConfig={kubeconfig}",
                                                *mpi_operator_flags(stack_objects)], env={"KUBECONFIG": kubeconfig})

    try:
        _install_cert(keys, KUEUE_METRICS_CERTS)
    except PermissionError:
        raise ManagerError(f"Kueue v0.19.2 reads its metrics certificate from {KUEUE_METRICS_CERTS} (a fixed "
                           "path): run as a user who may write there, or create it writable first") from None
    config, flags = kueue_config(chart_objects, certs)
    if os.environ.get("GPUCLUSTER_LOCAL_KUEUE_LOG_LEVEL"):  # debugging an e2e failure: Kueue's V(3) and up
        flags = [f for f in flags if not f.startswith("--zap-log-level")]
        flags.append(f"--zap-log-level={os.environ['GPUCLUSTER_LOCAL_KUEUE_LOG_LEVEL']}")
    (work / "kueue.yaml").write_text(yaml.safe_dump(config))
    processes.start(state, "kueue", [str(build.binary("kueue")), f"--kubeconfig={kubeconfig}",
                                     f"--config={work / 'kueue.yaml'}", *flags])

    for manager in managers():
        url = f"http://{HOST}:{manager.health_port}/{'healthz' if manager is MPI_OPERATOR else 'readyz'}"
        processes.wait_until(lambda url=url: processes.http_ok(url), f"{manager.name} to be ready", 180,
                             state, manager.name)


def rewrite_webhooks(objects: list[dict[str, Any]], ca_pem: str) -> list[dict[str, Any]]:
    """The charts' webhook configurations (and CRD conversion webhooks) pointed at the local managers."""
    ports = {service: m.webhook_port for m in MANAGERS for service in m.webhook_services}
    ca_bundle = base64.b64encode(ca_pem.encode()).decode()

    def local(client_config: dict[str, Any], where: str) -> dict[str, Any]:
        service = client_config.get("service")
        if not service:
            return client_config
        port = ports.get(service["name"])
        if port is None:
            raise ManagerError(f"{where}: webhook service {service['name']} is served by no local manager")
        return {"url": f"https://{HOST}:{port}{service.get('path', '/')}", "caBundle": ca_bundle}

    out = []
    for obj in objects:
        obj = copy.deepcopy(obj)
        kind = obj.get("kind")
        if kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            for hook in obj.get("webhooks", []):
                hook["clientConfig"] = local(hook["clientConfig"], f"{kind} {obj['metadata']['name']}")
            obj.get("metadata", {}).get("annotations", {}).pop("cert-manager.io/inject-ca-from", None)
        elif kind == "CustomResourceDefinition":
            webhook = (obj["spec"].get("conversion") or {}).get("webhook")
            if webhook and "clientConfig" in webhook:
                webhook["clientConfig"] = local(webhook["clientConfig"], f"CRD {obj['metadata']['name']}")
        out.append(obj)
    return out
