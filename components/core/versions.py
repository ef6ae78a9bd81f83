"""Every upstream version the program installs, pinned, with where it was read.

Charts and images are pinned here, in code, so a later `pulumi up` after
an upstream release changes nothing; the EKS add-ons and the AMI release,
which AWS publishes per Kubernetes version, are pinned per stack
(gpucluster:versions, written by `python -m bootstrap upgrade`).
"""

from __future__ import annotations

# cluster-autoscaler: chart 9.59.0 (kubernetes/autoscaler tag
# cluster-autoscaler-chart-9.59.0, cluster-autoscaler/charts/cluster-autoscaler/Chart.yaml:
# version 9.59.0, appVersion 1.35.0; the newest chart, also in the gh-pages index.yaml).
CLUSTER_AUTOSCALER_CHART_REPO = "https://kubernetes.github.io/autoscaler"
CLUSTER_AUTOSCALER_CHART = "cluster-autoscaler"
CLUSTER_AUTOSCALER_CHART_VERSION = "9.59.0"
CLUSTER_AUTOSCALER_IMAGE = "registry.k8s.io/autoscaling/cluster-autoscaler"
# The autoscaler's minor must equal the cluster's (cluster-autoscaler/README.md:
# "use the latest Cluster Autoscaler release that corresponds to the minor
# version of Kubernetes"): the newest patch tag of each minor in kubernetes/autoscaler
# (cluster-autoscaler-1.32.7 ... cluster-autoscaler-1.36.1, 2026-07-22).
CLUSTER_AUTOSCALER_IMAGE_TAGS = {
    "1.32": "v1.32.7",
    "1.33": "v1.33.6",
    "1.34": "v1.34.5",
    "1.35": "v1.35.2",
    "1.36": "v1.36.1",
}

# Kueue v0.19.2 (kubernetes-sigs/kueue tag v0.19.2, charts/kueue/Chart.yaml and
# README.md: `helm install kueue oci://registry.k8s.io/kueue/charts/kueue --version="0.19.2"`;
# hack/helm-chart-package.sh sets the image to registry.k8s.io/kueue/kueue:v0.19.2).
KUEUE_CHART = "oci://registry.k8s.io/kueue/charts/kueue"
KUEUE_CHART_VERSION = "0.19.2"
KUEUE_IMAGE = "registry.k8s.io/kueue/kueue"
KUEUE_IMAGE_TAG = "v0.19.2"

# Kubeflow Trainer v2.3.0 (kubeflow/trainer tag v2.3.0, charts/kubeflow-trainer/Chart.yaml
# version 2.3.0 with the jobset 0.12.0 dependency; CHANGELOG/CHANGELOG-2.3.md installs
# oci://ghcr.io/kubeflow/charts/kubeflow-trainer --version 2.3.0). The manager image tag
# is "v" + the chart version (templates/_helpers.tpl trainer.defaultImageTag).
TRAINER_CHART = "oci://ghcr.io/kubeflow/charts/kubeflow-trainer"
TRAINER_CHART_VERSION = "2.3.0"
TRAINER_IMAGE_REGISTRY = "ghcr.io"
TRAINER_IMAGE_REPOSITORY = "kubeflow/trainer/trainer-controller-manager"
TRAINER_IMAGE_TAG = "v2.3.0"
# JobSet v0.12.0, the chart dependency (kubernetes-sigs/jobset hack/helm-chart-package.sh
# sets registry.k8s.io/jobset/jobset:<tag> in the released chart).
JOBSET_IMAGE = "registry.k8s.io/jobset/jobset"
JOBSET_IMAGE_TAG = "v0.12.0"

# Kubeflow MPI Operator v0.8.2, the newest v0.8.x (release-0.8 RELEASE.md: v0.8.2 ships
# v0.8.1's fixes, among them #810, terminating launchers no longer re-created; Kueue
# v0.19.2's go.mod builds against it). Images are tagged like the release without "v"
# (deploy/v2beta1/mpi-operator.yaml at v0.8.0: mpioperator/mpi-operator:0.8.0). The
# MPIJob CRD is byte-identical from v0.8.0 to v0.8.2 (blob e7c24a6a), so the vendored
# v0.8.0 file is v0.8.2's.
MPI_OPERATOR_VERSION = "v0.8.2"
MPI_OPERATOR_IMAGE = f"mpioperator/mpi-operator:{MPI_OPERATOR_VERSION.removeprefix('v')}"

# NVIDIA device plugin 0.20.0, the newest tag (NVIDIA/k8s-device-plugin v0.20.0,
# deployments/helm/nvidia-device-plugin/Chart.yaml; image nvcr.io/nvidia/k8s-device-plugin:v0.20.0).
NVIDIA_CHART_REPO = "https://nvidia.github.io/k8s-device-plugin"
NVIDIA_CHART = "nvidia-device-plugin"
NVIDIA_CHART_VERSION = "0.20.0"

# AWS EFA device plugin: chart v0.5.29 ships plugin v0.5.20 (aws/eks-charts
# stable/aws-efa-k8s-device-plugin Chart.yaml and gh-pages index.yaml; the chart
# versions carry a "v"). Plugins before v0.5.10 miscount the devices of p6-b200.
EFA_CHART_REPO = "https://aws.github.io/eks-charts"
EFA_CHART = "aws-efa-k8s-device-plugin"
EFA_CHART_VERSION = "v0.5.29"
EFA_PLUGIN_IMAGE_TAG = "v0.5.20"

# AWS Deep Learning Container for PyTorch 2.13, EC2/EKS variant, CUDA 13.3 on
# AL2023 (aws/deep-learning-containers docs/src/data/pytorch/2.13-cuda-ec2.yml:
# tags 2.13.0-cu133-amzn2023 and 2.13-cu133-amzn2023, public registry, GA
# 2026-07-20): EFA 1.49.0 with Open MPI and aws-ofi-nccl, an OpenSSH server,
# and nccl-tests' all_reduce_perf at /usr/local/bin (docs/pytorch/index.md).
# The full patch tag, not the floating 2.13 one.
DLC_PYTORCH_IMAGE = "public.ecr.aws/deep-learning-containers/pytorch:2.13.0-cu133-amzn2023"


def release_version_parameter(kubernetes_version: str) -> str:
    """SSM public parameter with the recommended AL2023 NVIDIA AMI release for a Kubernetes version.

    EKS User Guide, "Retrieve recommended Amazon Linux AMI IDs"; terraform-aws-eks
    modules/eks-managed-node-group reads the same parameter. Read by
    `bootstrap upgrade`, never by the program (the program uses the stack's pin).
    """
    return f"/aws/service/eks/optimized-ami/{kubernetes_version}/amazon-linux-2023/x86_64/nvidia/recommended/release_version"

# kube-prometheus-stack 88.5.3, the newest chart (prometheus-community/helm-charts tag
# kube-prometheus-stack-88.5.3, charts/kube-prometheus-stack/Chart.yaml): Prometheus Operator,
# Prometheus v3.14.0, Alertmanager v0.34.0, Grafana (grafana chart 12.11.1), kube-state-metrics
# (chart 8.4.0, v2.20.0) and node-exporter (chart 4.56.1) with it.
KPS_CHART_REPO = "https://prometheus-community.github.io/helm-charts"
KPS_CHART = "kube-prometheus-stack"
KPS_CHART_VERSION = "88.5.3"

# dcgm-exporter: chart 4.8.2 at NVIDIA/dcgm-exporter tag 4.5.3-4.8.2, the newest (deployment/Chart.yaml;
# image nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless in deployment/values.yaml; the Helm
# repository of the project's README).
DCGM_CHART_REPO = "https://nvidia.github.io/dcgm-exporter/helm-charts"
DCGM_CHART = "dcgm-exporter"
DCGM_CHART_VERSION = "4.8.2"

# The EFA counters pod (components.core.observability.efa_exporter): node-exporter at the
# version kube-prometheus-stack 88.5.3 runs (prometheus-node-exporter chart 4.56.1 appVersion),
# and busybox from the Docker official images' mirror on public ECR.
NODE_EXPORTER_IMAGE = "quay.io/prometheus/node-exporter:v1.12.1"
BUSYBOX_IMAGE = "public.ecr.aws/docker/library/busybox:1.37.0"

# TensorBoard: the TensorFlow CPU image ships it (tensorflow/tensorflow on Docker Hub, tag 2.20.0).
TENSORBOARD_IMAGE = "tensorflow/tensorflow:2.20.0"

# The goodput controller (components.core.observability.goodput_agent): Docker's official Python image
# through ECR Public (as BUSYBOX_IMAGE); a tag docker-library/official-images lists in library/python
# (commit 01732a42: "Tags: 3.13.9-slim-trixie, 3.13-slim-trixie, 3.13.9-slim, 3.13-slim"). Our code
# comes from a ConfigMap; the standard library is all it needs.
PYTHON_IMAGE = "public.ecr.aws/docker/library/python:3.13.9-slim-trixie"
