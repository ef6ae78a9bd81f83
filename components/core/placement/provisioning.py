"""Atomic scale-up: Kueue's ProvisioningRequest admission check on the GPU pools that ask for it (pure).

A GPU pool with `atomicScaleUp` puts its flavor under one AdmissionCheck (every ClusterQueue holding it names the
check on that flavor, admissionChecksStrategy). Kueue then reserves quota, writes a ProvisioningRequest of class
best-effort-atomic-scale-up for the job's GPU pod sets, and admits the job only once cluster-autoscaler says it
has got them all (Provisioned=True); a failed or expired request is retried as the config's retryStrategy says.

Kueue v0.19.2, kueue.x-k8s.io/v1beta2 (apis/kueue/v1beta2/provisioningrequestconfig_types.go,
admissioncheck_types.go, clusterqueue_types.go; CRDs tests/upstream/crds/kueue.x-k8s.io_*.yaml). The class is
cluster-autoscaler's (apis/provisioningrequest/autoscaling.x-k8s.io/v1/types.go at cluster-autoscaler-1.35.2,
ProvisioningClassBestEffortAtomicScaleUp). On AWS the autoscaler plans the scale-up whole but raises the Auto
Scaling group's desired size like any other (no AtomicIncreaseSize there): EC2 may still launch fewer.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

API_VERSION = "kueue.x-k8s.io/v1beta2"
# The ProvisioningRequestConfig and the AdmissionCheck share the name (both cluster-scoped).
NAME = "gpucluster-atomic-scale-up"
PROVISIONING_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
# provisioningrequestconfig_types.go ProvisioningRequestControllerName: the controller Kueue runs for these checks.
CONTROLLER_NAME = "kueue.x-k8s.io/provisioning-request"
# Only pod sets asking for GPUs go into the request (managedResources): an MPIJob's launcher or a chief on the
# system nodes is not the autoscaler's to provision, and a job asking for no GPU needs no request at all.
MANAGED_RESOURCES = ("nvidia.com/gpu",)
# A request that fails (or whose booking expires before admission) is retried after 1 minute, then every 2
# (base x 2^(n-1), capped at 120 s), 5 times, then the workload is deactivated for a person to look at. The cap
# is short on purpose: cluster-autoscaler books a request's capacity for 10 minutes (processors/provreq/
# processor.go defaultReservationTime, not configurable) and a p5 node may take longer than that to become
# Ready, which Kueue's topology pass waits for; the retry then finds the booted nodes still there (they idle
# out after the pool's idleMinutes, 3 by default) instead of starting cold. Capacity the autoscaler cannot find
# yet (Provisioned=False) is not a failure: it keeps retrying on its own (1 minute doubling to 10).
RETRY_STRATEGY = {"backoffLimitCount": 5, "backoffBaseSeconds": 60, "backoffMaxSeconds": 120}

# The ProvisioningRequest CRD: cluster-autoscaler's, vendored (components/manifests/README.md); its chart installs
# none. Kueue v0.19.2 and the autoscaler (1.32 to 1.36) read and write its v1.
CRD_NAME = "provisioningrequests.autoscaling.x-k8s.io"
CRD_FILE = Path(__file__).resolve().parents[2] / "manifests" / "autoscaling.x-k8s.io_provisioningrequests.yaml"
# On the Kueue manager's pod while any pool is atomic: Kueue sets up its provisioning controller only if the CRD
# is served when it starts (cmd/kueue/main.go ServerSupportsProvisioningRequest), so turning atomic scale-up on
# for a running Kueue must restart it; a changed pod annotation does.
KUEUE_POD_ANNOTATIONS = {"gpucluster.io/provisioning-requests": "enabled"}


def atomic_pools(pools: Sequence[Any]) -> list[Any]:
    """The GPU pools whose jobs are admitted only once all their nodes are provisioned."""
    return [p for p in pools if not getattr(p, "is_cpu", False) and getattr(p, "atomic_scale_up", False)]


def replacement_warnings(pools: Sequence[Any], layers_of: Any, recovery: str) -> list[str]:
    """Atomic pools without a topology whose pods get re-created while their job runs (a Spot reclaim, the goodput
    controller's quarantine): Kueue writes the request's name on the job's pods (provisioning/controller.go
    podSetUpdates, autoscaling.x-k8s.io/consume-provisioning-request) and cluster-autoscaler adds no node for a pod
    that carries it (processors/provreq/pods_filter.go at cluster-autoscaler-1.35.2), so a re-created pod waits for
    Kueue's pods-ready recovery timeout, which requeues the job. With a topology Kueue swaps the node at once, or
    requeues the job and asks anew (TASFailedNodeReplacement, TASFailedNodeReplacementFailFast)."""
    out = []
    for pool in atomic_pools(pools):
        causes = [c for c, on in (("Spot reclaims", getattr(pool, "is_spot", False)),
                                  ("the goodput controller's quarantines", getattr(pool, "remediation", "off") == "on"))
                  if on]
        if causes and layers_of(pool) == 0:
            out.append(f"pool {pool.name}: atomicScaleUp with no topology: after {' and '.join(causes)}, a job's "
                       "re-created pod gets no new node (cluster-autoscaler leaves pods that consume a "
                       f"ProvisioningRequest to it) and waits {recovery} for Kueue to requeue the job; set "
                       "atomicScaleUp: false to have the autoscaler replace nodes as they go")
    return out


def block_admission_warnings(pools: Sequence[Any]) -> list[str]:
    """Pools that admit on quota beside an atomic one: Kueue's waitForPodsReady.blockAdmission is off for the whole
    cluster whenever an admission check exists (kube/queueing.py kueue_config says why), so their multi-node jobs
    lose the one-half-started-job-at-a-time guard and each may hold part of its nodes while it waits."""
    gpu = [p for p in pools if not getattr(p, "is_cpu", False)]
    atomic = atomic_pools(gpu)
    quota = [p.name for p in gpu if p not in atomic and p.max_nodes > 1]
    if not atomic or not quota:
        return []
    return [f"pool{'s' if len(quota) > 1 else ''} {', '.join(quota)} admit{'' if len(quota) > 1 else 's'} on quota "
            f"while {', '.join(p.name for p in atomic)} scale{'' if len(atomic) > 1 else 's'} up atomically: "
            "Kueue's blockAdmission is then off for the whole cluster (it would stall the atomic pools' admission), "
            "so several jobs there may each hold part of their nodes while they wait for the rest"]


def needed(pools: Sequence[Any]) -> bool:
    return bool(atomic_pools(pools))


def provisioning_request_config() -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "ProvisioningRequestConfig", "metadata": {"name": NAME},
            "spec": {"provisioningClassName": PROVISIONING_CLASS, "managedResources": list(MANAGED_RESOURCES),
                     "retryStrategy": dict(RETRY_STRATEGY)}}


def admission_check() -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "AdmissionCheck", "metadata": {"name": NAME},
            "spec": {"controllerName": CONTROLLER_NAME,
                     "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig",
                                    "name": NAME}}}


def admission_checks_strategy(flavors: Sequence[str]) -> dict[str, Any] | None:
    """A ClusterQueue's spec.admissionChecksStrategy: the check on these flavors only (the atomic pools'), so a
    job on the system nodes or another pool is admitted on quota as before; None when there are none.

    Per flavor, not the queue-wide list: v1beta2 has only admissionChecksStrategy (v1beta1's spec.admissionChecks
    is gone), and an empty onFlavors would run the check for every workload of the queue."""
    if not flavors:
        return None
    return {"admissionChecks": [{"name": NAME, "onFlavors": list(flavors)}]}


@functools.cache
def _crd_json() -> str:
    return json.dumps(yaml.safe_load(CRD_FILE.read_text()))


def crd() -> dict[str, Any]:
    """The vendored CRD as a fresh dict."""
    return json.loads(_crd_json())


def kueue_objects(pools: Sequence[Any]) -> list[dict[str, Any]]:
    """The config, then the check naming it; none when no pool is atomic."""
    return [provisioning_request_config(), admission_check()] if needed(pools) else []
