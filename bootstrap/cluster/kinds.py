"""The Kubernetes kinds the CLI reads and writes, and their REST paths.

API versions are the ones the pinned operators serve: MPIJob kubeflow.org/v2beta1
(MPI Operator v0.8.2), TrainJob trainer.kubeflow.org/v1alpha1 (Trainer v2.3.0),
JobSet jobset.x-k8s.io/v1alpha2 (JobSet v0.12.0), Workload, ClusterQueue and
ResourceFlavor kueue.x-k8s.io/v1beta2 (Kueue v0.19.2).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    kind: str
    group: str  # "" for the core group
    version: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name else base


POD = Kind("Pod", "", "v1", "pods")
EVENT = Kind("Event", "", "v1", "events")
NODE = Kind("Node", "", "v1", "nodes", namespaced=False)
SECRET = Kind("Secret", "", "v1", "secrets")
CONFIG_MAP = Kind("ConfigMap", "", "v1", "configmaps")
MPIJOB = Kind("MPIJob", "kubeflow.org", "v2beta1", "mpijobs")
TRAINJOB = Kind("TrainJob", "trainer.kubeflow.org", "v1alpha1", "trainjobs")
JOBSET = Kind("JobSet", "jobset.x-k8s.io", "v1alpha2", "jobsets")
WORKLOAD = Kind("Workload", "kueue.x-k8s.io", "v1beta2", "workloads")
CLUSTER_QUEUE = Kind("ClusterQueue", "kueue.x-k8s.io", "v1beta2", "clusterqueues", namespaced=False)
RESOURCE_FLAVOR = Kind("ResourceFlavor", "kueue.x-k8s.io", "v1beta2", "resourceflavors", namespaced=False)
LOCAL_QUEUE = Kind("LocalQueue", "kueue.x-k8s.io", "v1beta2", "localqueues")
# cluster-autoscaler-1.35.2 apis/config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml: Kueue's requests for nodes.
PROVISIONING_REQUEST = Kind("ProvisioningRequest", "autoscaling.x-k8s.io", "v1", "provisioningrequests")
CLUSTER_TRAINING_RUNTIME = Kind("ClusterTrainingRuntime", "trainer.kubeflow.org", "v1alpha1",
                                "clustertrainingruntimes", namespaced=False)

BY_KIND = {k.kind: k for k in (POD, EVENT, NODE, SECRET, CONFIG_MAP, MPIJOB, TRAINJOB, JOBSET, WORKLOAD,
                                CLUSTER_QUEUE, RESOURCE_FLAVOR, LOCAL_QUEUE, CLUSTER_TRAINING_RUNTIME)}
JOB_KINDS = (MPIJOB, TRAINJOB, JOBSET)


def of(manifest: dict) -> Kind:
    """The Kind of a manifest, by its kind and apiVersion (KeyError when we do not handle it)."""
    kind = BY_KIND[manifest["kind"]]
    if manifest.get("apiVersion") != kind.api_version:
        raise KeyError(f"{manifest['kind']} {manifest.get('apiVersion')} (we speak {kind.api_version})")
    return kind
