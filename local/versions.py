"""What the local control plane builds: each upstream program, its Go module and version.

Every version is one the product pins (components/core/versions.py) or the
one the Kubernetes minor of our stacks implies; all are served by the Go
module proxy, and every build is `go build` inside the upstream module as
Go downloads it, with its own go.mod and go.sum, except the control plane,
which k8s.io/kubernetes can only be built as through a module of ours
(local/modules/kube: its staging modules replaced by their v0.35 releases).
"""

from __future__ import annotations

from dataclasses import dataclass

from components.core import versions as product

# The Kubernetes minor both shipped stacks pin (gpucluster:kubernetesVersion "1.35"); v1.35.8 is
# the newest 1.35 patch the Go module proxy serves (2026-08-20; v1.35.9 and later are refused).
KUBERNETES_VERSION = "v1.35.8"
# k8s.io/kubernetes v1.35.8's go.mod requires go.etcd.io/etcd/server/v3 v3.6.5: the etcd release
# this Kubernetes is built and tested against.
ETCD_VERSION = "v3.6.5"


@dataclass(frozen=True)
class GoProgram:
    """One upstream program: the package `sub` of `module` at `version` builds `binary`."""

    name: str
    module: str
    sub: str
    version: str
    binary: str

    @property
    def package(self) -> str:
        return f"{self.module}/{self.sub}" if self.sub else self.module


# Built inside their modules. Their charts come from the same module zips.
KWOK = GoProgram("kwok", "sigs.k8s.io/kwok", "cmd/kwok", "v0.8.0", "kwok")
KUEUE = GoProgram("kueue", "sigs.k8s.io/kueue", "cmd/kueue", product.KUEUE_IMAGE_TAG, "kueue")
JOBSET = GoProgram("jobset", "sigs.k8s.io/jobset", "", product.JOBSET_IMAGE_TAG, "jobset")
TRAINER = GoProgram("trainer", "github.com/kubeflow/trainer/v2", "cmd/trainer-controller-manager",
                    product.TRAINER_IMAGE_TAG, "trainer-controller-manager")
MPI_OPERATOR = GoProgram("mpi-operator", "github.com/kubeflow/mpi-operator", "cmd/mpi-operator",
                         product.MPI_OPERATOR_VERSION, "mpi-operator")
# helm v4 renders the v2 charts we pin (apiVersion v2) as helm v3 does.
HELM = GoProgram("helm", "helm.sh/helm/v4", "cmd/helm", "v4.3.2", "helm")

# promtool of the Prometheus kube-prometheus-stack 88.5.3 runs (v3.14.0: its Go module is v0.314.0, Prometheus
# v3's module versions being v0.3xx.y): the e2e tier evaluates our recording rules and alerts with it.
PROMTOOL = GoProgram("promtool", "github.com/prometheus/prometheus", "cmd/promtool", "v0.314.0", "promtool")

INSTALLED = (KWOK, KUEUE, JOBSET, TRAINER, MPI_OPERATOR, HELM, PROMTOOL)

# The control plane, from local/modules/kube (go.mod pins KUBERNETES_VERSION and etcd through it).
CONTROL_PLANE_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd")


@dataclass(frozen=True)
class GoModule:
    """A module downloaded for its files only (charts, CRDs), never built."""

    name: str
    module: str
    version: str


# Kubeflow Trainer's chart depends on LeaderWorkerSet's (charts/kubeflow-trainer/Chart.yaml: lws 0.8.0,
# installed only with dataCache.enabled); helm wants every dependency present to render.
LWS = GoModule("lws", "sigs.k8s.io/lws", "v0.8.0")
# The Prometheus Operator CRDs (ServiceMonitor, PodMonitor, PrometheusRule) at the operator version
# kube-prometheus-stack 88.5.3 ships (its Chart.yaml appVersion v0.93.1), from
# example/prometheus-operator-crd/ in the module.
PROMETHEUS_OPERATOR = GoModule("prometheus-operator", "github.com/prometheus-operator/prometheus-operator", "v0.93.1")
# The ProvisioningRequest API at the version Kueue v0.19.2's go.mod requires: its CRD (config/crd/) is served before
# Kueue starts, which sets up its provisioning admission check only when the API is there (cmd/kueue/main.go);
# local/autoscaler/provisioner.py plays cluster-autoscaler's part.
PROVISIONING_REQUEST_API = GoModule("provisioning-request-api", "k8s.io/autoscaler/cluster-autoscaler/apis",
                                    "v0.0.0-20240830133931-adfbe7e45277")
