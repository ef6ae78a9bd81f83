"""The metrics stack's EBS volumes, which the cluster's deletion would otherwise leave billing.

Prometheus keeps its data on a gp3 volume the EBS CSI driver created for
its claim in the `monitoring` namespace. On `pulumi destroy` the claim goes
with the namespace, but the driver deletes a volume asynchronously, and it
is itself deleted (the add-on) minutes later: a volume it had not deleted
yet, or one still attached to a node then, stays `available` and bills.
Before the EKS cluster is deleted (after every node group), this deletes
the detached volumes the driver created for this cluster's `monitoring`
claims, and only those: the driver tags each with our cluster tag (the
add-on's controller.extraVolumeTags) and with the claim's namespace
(`kubernetes.io/created-for/pvc/namespace`, from the external-provisioner's
--extra-create-metadata, on by default in the driver's chart).
"""

from __future__ import annotations

from collections.abc import Callable

CLUSTER_TAG = "gpucluster:cluster"  # every volume the cluster's EBS CSI driver creates carries it
CLAIM_NAMESPACE_TAG = "kubernetes.io/created-for/pvc/namespace"
METRICS_NAMESPACE = "monitoring"  # components.core.observability.prometheus_stack.NAMESPACE


def metrics_volumes(ec2, cluster_name: str) -> tuple[list[str], list[str]]:
    """(detached, still attached) volume IDs of the cluster's `monitoring` claims."""
    pages = ec2.get_paginator("describe_volumes").paginate(Filters=[
        {"Name": f"tag:{CLUSTER_TAG}", "Values": [cluster_name]},
        {"Name": f"tag:{CLAIM_NAMESPACE_TAG}", "Values": [METRICS_NAMESPACE]},
    ])
    volumes = [v for page in pages for v in page["Volumes"]]
    detached = sorted(v["VolumeId"] for v in volumes if v["State"] == "available")
    attached = sorted(v["VolumeId"] for v in volumes if v["State"] == "in-use")
    return detached, attached


def release_metrics_volumes(ec2, cluster_name: str, log: Callable[[str], None] = print) -> list[str]:
    """Delete the detached metrics volumes of the cluster; say which stay (attached); return the deleted IDs."""
    detached, attached = metrics_volumes(ec2, cluster_name)
    deleted = []
    for volume_id in detached:
        try:
            ec2.delete_volume(VolumeId=volume_id)
        except Exception as err:  # the driver deleted it meanwhile: what we wanted
            if (getattr(err, "response", None) or {}).get("Error", {}).get("Code") != "InvalidVolume.NotFound":
                raise
        deleted.append(volume_id)
        log(f"{cluster_name}: deleted {volume_id}, the metrics volume the EBS CSI driver left")
    for volume_id in attached:
        log(f"{cluster_name}: {volume_id} (metrics) is still attached and stays; delete it once detached: "
            f"aws ec2 delete-volume --volume-id {volume_id}")
    return deleted
