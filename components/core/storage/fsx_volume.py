"""The file system as Kubernetes sees it: the CSI driver's policy, the static PV and its claim (pure).

aws-fsx-csi-driver static provisioning (examples/kubernetes/static_provisioning):
driver fsx.csi.aws.com, volumeHandle = the file system id, volumeAttributes
dnsname and mountname.
"""

from __future__ import annotations

import json

CSI_ADDON = "aws-fsx-csi-driver"
CSI_DRIVER = "fsx.csi.aws.com"
# The add-on's controller service account (EKS User Guide, "Use high-performance
# app storage with Amazon FSx for Lustre", fsx-csi-create).
CSI_CONTROLLER_SA = "fsx-csi-controller-sa"
CLAIM_NAME = "fsx"
# Lustre flock gives POSIX locks across clients (aws-fsx-csi-driver static
# provisioning example, examples/kubernetes/static_provisioning).
MOUNT_OPTIONS = ("flock",)


def csi_policy() -> str:
    """What the controller of a statically provisioned volume may call.

    A static PV is mounted by the node plugin with the Lustre client and
    needs no AWS call; the controller only creates, deletes and resizes
    dynamically provisioned file systems, which we never ask it to. The
    AmazonFSxFullAccess policy the EKS guide names would let any pod with
    this service account create or delete every file system in the
    account; read-only describe is all that is left to allow (volume
    validation looks the file system up).
    """
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": ["fsx:DescribeFileSystems"], "Resource": "*"}],
    })


def persistent_volume(namespace: str, capacity_gib: int, file_system_id: str, dns_name: str,
                      mount_name: str) -> dict:
    """Spec of the static PV (aws-fsx-csi-driver, static provisioning)."""
    return {
        "capacity": {"storage": f"{capacity_gib}Gi"},
        "volumeMode": "Filesystem",
        "accessModes": ["ReadWriteMany"],
        # The file system's life cycle belongs to Pulumi, not to the claim.
        "persistentVolumeReclaimPolicy": "Retain",
        "storageClassName": "",
        "mountOptions": list(MOUNT_OPTIONS),
        # Reserved for our claim: no other claim can bind it.
        "claimRef": {"namespace": namespace, "name": CLAIM_NAME},
        "csi": {
            "driver": CSI_DRIVER,
            "volumeHandle": file_system_id,
            "volumeAttributes": {"dnsname": dns_name, "mountname": mount_name},
        },
    }


# What the claim requests: constant and small. A statically bound claim cannot
# be resized, so a request that followed the file system's capacity would make
# every FSx resize a rejected PVC patch; binding needs only request <= the PV's capacity.
CLAIM_REQUEST = "1Gi"


def pv_name(namespace: str, file_system_id: str) -> str:
    """Named after the file system: a new file system gets a new PV (its CSI source is immutable),
    created before the old one is deleted."""
    return f"{namespace}-fsx-{file_system_id}"


def persistent_volume_claim(volume_name: str) -> dict:
    return {
        "accessModes": ["ReadWriteMany"],
        # "" turns off dynamic provisioning; volumeName binds to our PV.
        "storageClassName": "",
        "volumeName": volume_name,
        "resources": {"requests": {"storage": CLAIM_REQUEST}},
    }
