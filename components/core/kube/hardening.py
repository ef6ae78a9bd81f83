"""The securityContext our own pods run with, and the values charts get for it (pure).

One vocabulary for every Deployment and DaemonSet we render and every chart
whose values allow it (the `restricted` Pod Security Standard's settings):

- the pod: runAsNonRoot with a numeric UID (kubelet refuses runAsNonRoot
  for an image whose USER is root or a name, so the UID is given where the
  image runs as root), and the runtime's default seccomp profile;
- each container: no privilege escalation, every capability dropped, a
  read-only root filesystem (an emptyDir where a program writes).

What cannot run that way is left as its chart ships it, and said where its
values are built: the NVIDIA device plugin (root: it serves the kubelet's
device-plugin socket on a hostPath), the EFA device plugin (privileged,
host network: it opens /dev/infiniband), dcgm-exporter (root with
SYS_ADMIN for the DCGM_FI_PROF_* profiling counters), node-exporter (host
network, PID namespace and root filesystem, read-only). Training pods are
not touched here: their manifests are the jobs', and a change replaces
running jobs (README, "Guardrails").
"""

from __future__ import annotations

from typing import Any

RUNTIME_DEFAULT = {"type": "RuntimeDefault"}

# Distroless images' unprivileged user (gcr.io/distroless: "nonroot", 65532) and the
# traditional `nobody` (65534): both above 10000, clear of host users.
DISTROLESS_NONROOT = 65532
NOBODY = 65534


def pod_security_context(uid: int | None = None) -> dict[str, Any]:
    """runAsNonRoot and RuntimeDefault seccomp; `uid`: run as it (user and group), for images whose USER is root."""
    ctx: dict[str, Any] = {"runAsNonRoot": True}
    if uid is not None:
        ctx.update(runAsUser=uid, runAsGroup=uid)
    ctx["seccompProfile"] = dict(RUNTIME_DEFAULT)
    return ctx


def container_security_context() -> dict[str, Any]:
    """No privilege escalation, no capabilities, nothing written outside the volumes."""
    return {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}


def tmp_volume(name: str = "tmp", size: str = "16Mi") -> tuple[dict[str, Any], dict[str, Any]]:
    """(volume, mount) of a small emptyDir at /tmp, for a read-only root filesystem."""
    return {"name": name, "emptyDir": {"sizeLimit": size}}, {"name": name, "mountPath": "/tmp"}
