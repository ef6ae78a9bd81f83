"""The fleet's contract: every name the two sides, the rotator, the CLI and the local e2e agree on.

The worker- and rotator-side names are components.core.fleet_token.names' (that package ships into the
cluster); the rest are Kubernetes-side names of the manager's objects.
"""

from __future__ import annotations

from components.core.config.cluster import DISPATCHER_NAMES
from components.core.fleet_token.names import (  # noqa: F401 - re-exported: the fleet's whole contract here
    ANCHOR_ANNOTATION,
    ANCHOR_LABEL,
    ANCHOR_PREFIX,
    BOOTSTRAP_SECRET,
    EXPIRES_AT_ANNOTATION,
    FLEET_NAMESPACE,
    KUBECONFIG_KEY,
    MANAGER_NAMESPACE,
    MIN_LIFETIME_SECONDS,
    PACKAGE,
    PREVIOUS_ANCHOR_ANNOTATION,
    ROTATED_AT_ANNOTATION,
    SECRET_PREFIX,
    SEED_SUFFIX,
    SERVICE_ACCOUNT,
    USERNAME,
    anchor_name,
    cluster_of,
    secret_name,
    seed_name,
)

# -- worker -----------------------------------------------------------------------------------------------
# What MultiKueue does on the worker: reads everywhere (a ClusterRole and its ClusterRoleBinding), writes in the
# namespaces the worker queues jobs in (a ClusterRole and a RoleBinding of that name in each).
READ_ROLE = f"{SERVICE_ACCOUNT}-read"
WRITE_ROLE = f"{SERVICE_ACCOUNT}-write"
TOKEN_ROLE = f"{SERVICE_ACCOUNT}-token"  # Role + RoleBinding in FLEET_NAMESPACE: its own tokens and anchors
ACCESS_OUTPUT = "fleetAccess"  # the worker's stack output: {server, certificateAuthorityData, token}, secret

# -- manager ----------------------------------------------------------------------------------------------
ADMISSION_CHECK = "gpucluster-fleet"
MULTIKUEUE_CONFIG = "gpucluster-fleet"
# Kueue v0.19.2 apis/kueue/v1beta2/multikueue_types.go MultiKueueControllerName.
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
MANAGED_BY = MULTIKUEUE_CONTROLLER  # what Kueue sets a dispatched job's spec.managedBy to on the manager
DISPATCHERS = DISPATCHER_NAMES

# -- the rotator (on the manager) -------------------------------------------------------------------------
ROTATOR = "gpucluster-fleet-token-rotator"  # CronJob, ServiceAccount, Role, RoleBinding
ROTATOR_CODE = "gpucluster-fleet-token-code"  # ConfigMap: the package gpucluster_fleet_token
