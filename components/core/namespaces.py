"""The Kubernetes namespaces the program owns (jobs must live elsewhere)."""

KUBE_SYSTEM = "kube-system"  # device plugins, cluster-autoscaler
MPI_OPERATOR = "mpi-operator"  # kubeflow/mpi-operator deploy/v2beta1/mpi-operator.yaml
TRAINER = "kubeflow-system"  # Kubeflow Trainer v2 chart (and its JobSet dependency)
KUEUE = "kueue-system"  # Kueue chart

# Namespaces a training namespace must not be: ours, Kubernetes' own, and
# `kubeflow`, where other Kubeflow installs (training-operator v1) live.
RESERVED_PREFIX = "kube-"  # Kubernetes' own (kube-system, kube-public, kube-node-lease, and any to come)
RESERVED = ("default", KUBE_SYSTEM, "kube-public", "kube-node-lease", MPI_OPERATOR, TRAINER, KUEUE, "kubeflow")
