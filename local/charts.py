"""Render the charts the stack installs with helm, from their sources at the pinned tags.

A chart that lives inside a Go module the proxy serves is taken from that
module's zip (Kueue, Kubeflow Trainer with JobSet and LeaderWorkerSet as
its dependencies). The others cannot be had that way (UNAVAILABLE says
why); the stack's objects that need them are applied without them.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.core import versions as product
from local import build, versions


@dataclass(frozen=True)
class ChartSource:
    module: versions.GoProgram | versions.GoModule
    path: str  # the chart folder inside the module
    dependencies: tuple[tuple[str, versions.GoProgram | versions.GoModule, str], ...] = ()


# Keyed by the `chart` of the stack's helm Release.
SOURCES = {
    product.KUEUE_CHART: ChartSource(versions.KUEUE, "charts/kueue"),
    product.TRAINER_CHART: ChartSource(versions.TRAINER, "charts/kubeflow-trainer", (
        ("jobset", versions.JOBSET, "charts/jobset"), ("lws", versions.LWS, "charts/lws"))),
}

# Charts no Go module the proxy serves carries, and why. Their releases are not rendered locally.
UNAVAILABLE = {
    product.CLUSTER_AUTOSCALER_CHART: "k8s.io/autoscaler/cluster-autoscaler is not served by the Go module proxy "
                                      "(every version and pseudo-version refused), and the chart lives outside "
                                      "that module anyway (charts/cluster-autoscaler at the repository root)",
    product.NVIDIA_CHART: "github.com/NVIDIA/k8s-device-plugin v0.20.0 is not served by the Go module proxy",
    product.DCGM_CHART: "github.com/NVIDIA/dcgm-exporter is not served by the Go module proxy",
    product.KPS_CHART: "prometheus-community/helm-charts is no Go module; its CRDs come from the Prometheus "
                       "Operator module instead",
    product.EFA_CHART: "aws/eks-charts is no Go module",
}


class ChartError(RuntimeError):
    pass


def _module_dir(module: versions.GoProgram | versions.GoModule) -> Path:
    if isinstance(module, versions.GoProgram):
        return build.module_dir(module)
    return build.module_dir(versions.GoProgram(module.name, module.module, "", module.version, ""))


def _copy(source: Path, target: Path) -> None:
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)
    for path in [target, *target.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def assemble(source: ChartSource, work: Path) -> Path:
    """The chart folder with its dependencies under charts/, as `helm dependency build` would leave it."""
    chart = work / Path(source.path).name
    _copy(_module_dir(source.module) / source.path, chart)
    for name, module, path in source.dependencies:
        _copy(_module_dir(module) / path, chart / "charts" / name)
    return chart


def render(release: dict[str, Any], work: Path) -> list[dict[str, Any]]:
    """`helm template` of one stack Release (its inputs from the plan) into objects."""
    inputs = release["inputs"]
    source = SOURCES.get(inputs["chart"])
    if source is None:
        raise ChartError(f"{inputs['chart']}: {UNAVAILABLE.get(inputs['chart'], 'no source known')}")
    work.mkdir(parents=True, exist_ok=True)
    chart = assemble(source, work)
    values = work / f"{inputs['name']}-values.yaml"
    values.write_text(yaml.safe_dump(inputs.get("values") or {}))
    kube_version = versions.KUBERNETES_VERSION
    cmd = [str(build.binary("helm")), "template", inputs["name"], str(chart), "--namespace", inputs["namespace"],
           "--values", str(values), "--include-crds", "--kube-version", kube_version]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise ChartError(f"helm template {inputs['name']} ({inputs['chart']} {inputs['version']}): {done.stderr}")
    objects = [o for o in yaml.safe_load_all(done.stdout) if o]
    for obj in objects:
        if obj.get("kind") not in CLUSTER_SCOPED:
            obj.setdefault("metadata", {}).setdefault("namespace", inputs["namespace"])
    return objects


CLUSTER_SCOPED = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
                  "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "APIService",
                  "PriorityClass", "StorageClass", "PersistentVolume", "ClusterTrainingRuntime",
                  "ResourceFlavor", "ClusterQueue", "WorkloadPriorityClass", "Topology", "AdmissionCheck",
                  "FlowSchema", "PriorityLevelConfiguration", "ValidatingAdmissionPolicy",
                  "ValidatingAdmissionPolicyBinding", "Cohort", "ProvisioningRequestConfig"}


def prometheus_crds() -> list[Path]:
    """The Prometheus Operator's CRD files at the version kube-prometheus-stack ships (YAML 1.1 that
    PyYAML cannot read: `- =` in an enum; kubectl applies the files as they are)."""
    folder = _module_dir(versions.PROMETHEUS_OPERATOR) / "example" / "prometheus-operator-crd"
    return sorted(folder.glob("*.yaml"))
