"""A fleet manager's MultiKueue objects (pure): per worker a kubeconfig Secret (Kueue's, the rotator's after its
creation), its seed Secret (the program's) and a MultiKueueCluster, one MultiKueueConfig of them all and the
AdmissionCheck its queues run, and Kueue's `multiKueue` configuration.

Field names are Kueue v0.19.2's v1beta2 API (apis/kueue/v1beta2/multikueue_types.go, admissioncheck_types.go;
apis/config/v1beta2/configuration_types.go MultiKueue). A job queued on the manager gets spec.managedBy
`kueue.x-k8s.io/multikueue` from Kueue's webhook when its ClusterQueue runs a MultiKueue check
(pkg/controller/jobframework/defaults.go ApplyDefaultForManagedBy, called by the jobset, trainjob and mpijob
webhooks; CanDefaultManagedBy needs the MultiKueue feature gate, beta and on since v0.9), so the manager's own
JobSet, Trainer and MPI Operator controllers leave it alone and it runs on the worker MultiKueue picks. Those
webhooks and controllers need the kinds' CRDs on the manager: the Operators component installs them on every
stack, the manager included.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from components.core.config import StackConfig
from components.core.fleet import names
from components.core.kube import queueing

if TYPE_CHECKING:
    from components.core.fleet.workers import FleetMember

LABELS = {"app.kubernetes.io/part-of": "gpucluster", "app.kubernetes.io/component": "fleet"}
# A label value (Kueue validates origin with IsLabelValue: pkg/config/validation.go validateMultiKueue).
LABEL_VALUE_MAX = 63


def enabled(cfg: StackConfig) -> bool:
    return cfg.fleet is not None and cfg.fleet.role == "manager"


def origin(cluster_name: str) -> str:
    """The manager's mark on what it creates on a worker (label kueue.x-k8s.io/multikueue-origin; Kueue's
    garbage collector deletes a worker's objects of this origin that the manager no longer has): from the
    manager's cluster name, stable, a label value; two managers of one worker would need distinct ones."""
    value = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"gpucluster-{cluster_name}").strip("-_.")
    if len(value) > LABEL_VALUE_MAX:
        value = f"{value[:LABEL_VALUE_MAX - 9].rstrip('-_.')}-{hashlib.sha256(value.encode()).hexdigest()[:8]}"
    return value


def multi_kueue(cfg: StackConfig) -> dict[str, Any] | None:
    """Kueue's Configuration `multiKueue` section on a manager (None elsewhere): its dispatcher, how long a lost
    worker's jobs stay admitted there, and its origin. Defaults otherwise (gcInterval 1m: defaults.go)."""
    if not enabled(cfg):
        return None
    fleet = cfg.fleet
    return {"dispatcherName": names.DISPATCHERS[fleet.dispatcher],
            "workerLostTimeout": f"{fleet.worker_lost_minutes}m",
            "origin": origin(cfg.cluster_name)}


def kubeconfig(cluster: str, access: Mapping[str, str]) -> str:
    """A worker's kubeconfig for Kueue (JSON, which its clientcmd.Load reads): cluster, user and context all
    named `cluster`, the CA inline and a bearer token. Kueue v0.19.2 refuses tokenFile, a CA file,
    insecure-skip-tls-verify, basic auth, exec and auth-provider plugins
    (pkg/controller/admissionchecks/multikueue/multikueuecluster.go validateKubeconfig, validateRestConfig)."""
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": cluster,
        "clusters": [{"name": cluster, "cluster": {"server": access["server"],
                                                   "certificate-authority-data": access["certificateAuthorityData"]}}],
        "users": [{"name": cluster, "user": {"token": access["token"]}}],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": cluster}}],
    }, indent=1)


def _kubeconfig_secret(name: str, kubeconfig_text: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": names.MANAGER_NAMESPACE, "labels": dict(LABELS)},
            "data": {names.KUBECONFIG_KEY: base64.b64encode(kubeconfig_text.encode()).decode()}}


def kubeconfig_secret(cluster: str, kubeconfig_text: str) -> dict[str, Any]:
    """The Secret Kueue reads the worker's kubeconfig from (key `kubeconfig`, in its namespace). After its
    creation the rotator (components.core.fleet_token) owns its data: the component ignores changes to it."""
    return _kubeconfig_secret(names.secret_name(cluster), kubeconfig_text)


def seed_secret(cluster: str, kubeconfig_text: str) -> dict[str, Any]:
    """The same kubeconfig (the worker's `fleetAccess`: server, CA, bootstrap token) in the program's own Secret,
    `gpucluster-fleet-<cluster>-seed`, rewritten at every `up` (no ignored changes): the rotator reseeds the
    kubeconfig Secret from it when the worker was re-created or its token is refused. Kueue never reads it."""
    return _kubeconfig_secret(names.seed_name(cluster), kubeconfig_text)


def multikueue_cluster(cluster: str) -> dict[str, Any]:
    return {"apiVersion": queueing.API_VERSION, "kind": "MultiKueueCluster",
            "metadata": {"name": cluster, "labels": dict(LABELS)},
            "spec": {"clusterSource": {"kubeConfig": {"location": names.secret_name(cluster),
                                                      "locationType": "Secret"}}}}


def multikueue_config(members: Sequence[FleetMember]) -> dict[str, Any]:
    """The workers in `fleet.workers` order (the incremental dispatcher's order)."""
    return {"apiVersion": queueing.API_VERSION, "kind": "MultiKueueConfig",
            "metadata": {"name": names.MULTIKUEUE_CONFIG, "labels": dict(LABELS)},
            "spec": {"clusters": [m.cluster for m in members]}}


def admission_check() -> dict[str, Any]:
    return {"apiVersion": queueing.API_VERSION, "kind": "AdmissionCheck",
            "metadata": {"name": names.ADMISSION_CHECK, "labels": dict(LABELS)},
            "spec": {"controllerName": names.MULTIKUEUE_CONTROLLER,
                     "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig",
                                    "name": names.MULTIKUEUE_CONFIG}}}


def check_strategy() -> dict[str, Any]:
    """A manager ClusterQueue's admissionChecksStrategy: the MultiKueue check on every flavor (Kueue marks a
    queue inactive when it is limited to flavors: ClusterQueueActiveReasonMultiKueueAdmissionCheckAppliedPerFlavor,
    or beside a ProvisioningRequest check: ...MultiKueueWithProvisioningRequest; apis/kueue/v1beta2
    clusterqueue_types.go)."""
    return {"admissionChecks": [{"name": names.ADMISSION_CHECK}]}
