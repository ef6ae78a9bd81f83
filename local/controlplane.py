"""etcd, kube-apiserver, kube-controller-manager and kube-scheduler on 127.0.0.1.

One state folder holds everything: pki/, etcd/, logs/, the admin kubeconfig
and the process registry. Ports are fixed (Ports) so a second `up` finds
the first; nothing listens beyond the loopback address. A fleet runs
several clusters side by side (local/fleet.py): each process of one is
given its own state folder and $GPUCLUSTER_LOCAL_PORT_OFFSET, added to every port.
"""

from __future__ import annotations

import base64
import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from local import build, pki, processes


@dataclass(frozen=True)
class Ports:
    """Every port the local cluster uses, all on 127.0.0.1."""

    apiserver: int = 16443
    etcd: int = 16379
    etcd_peer: int = 16380
    controller_manager: int = 16257
    scheduler: int = 16259
    kwok: int = 16247
    kueue_webhook: int = 16501
    jobset_webhook: int = 16502
    trainer_webhook: int = 16503
    kueue_health: int = 16511
    jobset_health: int = 16512
    trainer_health: int = 16513
    goodput: int = 16520  # the goodput controller's /metrics and /healthz (local/goodput)

    def shifted(self, offset: int) -> Ports:
        return dataclasses.replace(self, **{name: port + offset for name, port in vars(self).items()})


PORT_OFFSET_ENV = "GPUCLUSTER_LOCAL_PORT_OFFSET"
# Managers a cluster runs without (local/controllers.py): a fleet's clusters share the machine, and the MPI
# Operator's fixed :8080 allows one of it (local/fleet.py leaves it out of every fleet cluster).
WITHOUT_ENV = "GPUCLUSTER_LOCAL_WITHOUT"
PORTS = Ports().shifted(int(os.environ.get(PORT_OFFSET_ENV) or 0))
HOST = "127.0.0.1"


def without() -> set[str]:
    """The managers named in $GPUCLUSTER_LOCAL_WITHOUT (comma-separated)."""
    return {n.strip() for n in (os.environ.get(WITHOUT_ENV) or "").split(",") if n.strip()}


def server_url() -> str:
    return f"https://{HOST}:{PORTS.apiserver}"


def kubeconfig_path(state: Path) -> Path:
    return state / "kubeconfig"


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def write_kubeconfig(state: Path, keys: pki.Pki, context: str) -> Path:
    """An admin kubeconfig (system:masters client certificate) for the harness, the CLI and the user."""
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": context, "cluster": {"server": server_url(),
                                                    "certificate-authority-data": _b64(keys.ca_cert)}}],
        "users": [{"name": f"{context}-admin", "user": {"client-certificate-data": _b64(keys.path("admin.crt")),
                                                        "client-key-data": _b64(keys.path("admin.key"))}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": f"{context}-admin"}}],
    }
    path = kubeconfig_path(state)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


def _etcd(state: Path) -> list[str]:
    client = f"http://{HOST}:{PORTS.etcd}"
    peer = f"http://{HOST}:{PORTS.etcd_peer}"
    return [str(build.binary("etcd")), "--name", "local", "--data-dir", str(state / "etcd"),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"local={peer}", "--listen-metrics-urls", "",
            # A throwaway test cluster: no fsync, small WAL snapshots, a 2 GiB ceiling.
            "--unsafe-no-fsync", "--snapshot-count", "10000", "--quota-backend-bytes", str(2 << 30),
            "--log-level", "warn"]


def _apiserver(state: Path, keys: pki.Pki) -> list[str]:
    return [str(build.binary("kube-apiserver")),
            "--etcd-servers", f"http://{HOST}:{PORTS.etcd}",
            "--bind-address", HOST, "--advertise-address", HOST, "--secure-port", str(PORTS.apiserver),
            "--tls-cert-file", str(keys.path("apiserver.crt")), "--tls-private-key-file", str(keys.path("apiserver.key")),
            "--client-ca-file", str(keys.ca_cert),
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file", str(keys.path("sa.pub")),
            "--service-account-signing-key-file", str(keys.path("sa.key")),
            "--service-cluster-ip-range", pki.SERVICE_CIDR,
            # RBAC as on EKS, so roles we render are judged; the admin certificate is system:masters.
            "--authorization-mode", "Node,RBAC", "--allow-privileged=true",
            "--profiling=false", "--endpoint-reconciler-type", "none",
            # Logs and exec go to a node's kubelet: KWOK's server, at the node's ExternalDNS address
            # 127.0.0.1 (local/nodes.py). Nodes keep their EKS-shaped 10.x InternalIP, which nothing dials.
            "--kubelet-preferred-address-types=ExternalDNS",
            "--v", "1"]


def _controller_manager(state: Path, keys: pki.Pki) -> list[str]:
    kubeconfig = str(kubeconfig_path(state))
    return [str(build.binary("kube-controller-manager")), "--kubeconfig", kubeconfig,
            "--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig,
            "--bind-address", HOST, "--secure-port", str(PORTS.controller_manager),
            "--leader-elect=false", "--use-service-account-credentials=false",
            "--service-account-private-key-file", str(keys.path("sa.key")), "--root-ca-file", str(keys.ca_cert),
            "--cluster-name", "gpucluster-local", "--profiling=false", "--v", "1"]


def _scheduler(state: Path) -> list[str]:
    kubeconfig = str(kubeconfig_path(state))
    return [str(build.binary("kube-scheduler")), "--kubeconfig", kubeconfig,
            "--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig,
            "--bind-address", HOST, "--secure-port", str(PORTS.scheduler), "--leader-elect=false",
            "--profiling=false", "--v", "1"]


def check_ports_free() -> None:
    """Every port must be free: a second local cluster (`make local` beside `make e2e`) would clash."""
    import socket

    fixed = [] if "mpi-operator" in without() else [("mpi_operator_fixed_health", 8080)]
    for name, port in [*vars(PORTS).items(), *fixed]:
        with socket.socket() as probe:
            # A port a stopped cluster left in TIME_WAIT is free; only a listener makes the bind fail.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((HOST, port))
            except OSError:
                raise processes.LocalClusterError(
                    f"port {port} ({name}) on {HOST} is in use: is another local cluster running? "
                    "`make local-down` stops the one `make local` started") from None


def start(state: Path, context: str) -> Path:
    """Start etcd, the API server, the controller manager and the scheduler; return the kubeconfig."""
    check_ports_free()
    keys = pki.generate(state / "pki")
    kubeconfig = write_kubeconfig(state, keys, context)
    processes.start(state, "etcd", _etcd(state))
    processes.wait_until(lambda: processes.http_ok(f"http://{HOST}:{PORTS.etcd}/health"), "etcd", 60,
                         state, "etcd")
    processes.start(state, "kube-apiserver", _apiserver(state, keys))
    processes.wait_until(lambda: processes.https_ok(f"{server_url()}/readyz", keys.ca_cert, keys.path("admin.crt"),
                                                    keys.path("admin.key")),
                         "kube-apiserver /readyz", 120, state, "kube-apiserver")
    processes.start(state, "kube-controller-manager", _controller_manager(state, keys))
    processes.start(state, "kube-scheduler", _scheduler(state))
    return kubeconfig
