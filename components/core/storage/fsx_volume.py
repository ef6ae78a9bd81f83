"""The file system as Kubernetes sees it: the CSI driver's policy, the static PVs and their claims (pure).

aws-fsx-csi-driver static provisioning (examples/kubernetes/static_provisioning):
driver fsx.csi.aws.com, volumeHandle = the file system id, volumeAttributes
dnsname and mountname. The training namespace's claim mounts the whole file
system; a team namespace's claim, of the same name (job templates unchanged),
mounts only the team's directory. PVs sharing a volumeHandle are mounted
apart: the driver's node service has no NodeStageVolume (node.go, nodeCaps
empty), so kubelet publishes each pod's volume on its own.
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
    created before the old one is deleted; and after its claim's namespace: the training namespace's
    and each team's are distinct PVs (namespaces are unique, and no team takes the training one)."""
    return f"{namespace}-fsx-{file_system_id}"


def subdirectory_mount_name(mount_name: str, directory: str) -> str:
    """The volumeAttributes mountname that mounts only `directory` ("/teams/<team>") of the file system.

    aws-fsx-csi-driver v1.9.0 (the add-on's v1.9.0-eksbuild.1), pkg/driver/node.go NodePublishVolume:
    the mount source is `fmt.Sprintf("%s@tcp:/%s", dnsname, mountname)`, mounted as type lustre, so
    "<mountname>/teams/<team>" is the Lustre fileset (subdirectory) mount of FSx Lustre User Guide,
    "Mounting specific filesets": `mount -t lustre <dns_name>@tcp:/<mountname>/team1/dataset1 /fsx`.
    The directory must exist: the metadata server resolves the fileset one name at a time and fails
    the mount on a missing one (lustre-release 2.15, lustre/mdt/mdt_handler.c mdt_lookup_fileset,
    answering the client's MDS_GET_ROOT in llite_lib.c client_common_fill_super); the team's
    directory marker makes it (components.core.storage.team_data.directory_marker_key). A pod spec
    cannot name another source: the driver's CSIDriver (chart templates/csidriver.yaml at v1.9.0)
    declares no volumeLifecycleModes, so Persistent only (no inline volume), PVs are cluster-scoped,
    and each PV's claimRef names the one claim it binds. A privileged container could still mount the
    root itself ("no constraints preventing a client from remounting the file system using a
    different fileset", same guide page): that is the namespace's admission rules' to refuse.
    """
    return f"{mount_name}{directory}"


def persistent_volume_claim(volume_name: str) -> dict:
    return {
        "accessModes": ["ReadWriteMany"],
        # "" turns off dynamic provisioning; volumeName binds to our PV.
        "storageClassName": "",
        "volumeName": volume_name,
        "resources": {"requests": {"storage": CLAIM_REQUEST}},
    }
