"""KWOK: the nodes of the local cluster and the life of the pods on them.

KWOK manages the nodes we create with its annotation (local/nodes.py),
keeps them Ready with node leases, runs every pod bound to them, and
ends a pod when a test annotates it (local/kwok-stages.yaml). Stages
are given in a file, so KWOK's CRDs are not installed.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import yaml

from local import build, controlplane, kubectl, processes, versions
from local.controlplane import HOST, PORTS

OUR_STAGES = Path(__file__).resolve().parent / "kwok-stages.yaml"
# KWOK's own stages (v0.8.0 kustomize/stage/; the top-level stages/ folder is deprecated): nodes
# become Ready and renew leases, pods become Running when bound and go when deleted.
UPSTREAM_STAGES = ("kustomize/stage/node/fast/node-initialize.yaml",
                   "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
                   "kustomize/stage/pod/fast/pod-ready.yaml",
                   "kustomize/stage/pod/fast/pod-delete.yaml")
# Pod IPs: a /16 (KWOK's default /24 runs out past 254 pods without saying so).
POD_CIDR = "10.244.0.0/16"
# As kwokctl runs it: a node lease of 40 s, renewed every 10 s.
NODE_LEASE_SECONDS = 40


# `kubectl logs` of a pod on a KWOK node: the API server asks the node's "kubelet" (KWOK's server),
# which serves the file a Logs object of the pod's name names (kwok v0.8.0 pkg/kwok/server/
# debugging_logs.go; CRI log format), else the catch-all below: empty logs.
LOGS_CRD = "kustomize/crd/bases/kwok.x-k8s.io_logs.yaml"


def _catch_all_logs(state: Path) -> str:
    empty = state / "pod-logs" / "empty.log"
    empty.parent.mkdir(parents=True, exist_ok=True)
    empty.touch()
    return yaml.safe_dump({"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterLogs",
                           "metadata": {"name": "gpucluster-empty"}, "spec": {"logs": [{"logsFile": str(empty)}]}})


def stages_file(state: Path) -> Path:
    module = build.module_dir(versions.KWOK)
    parts = [(module / p).read_text() for p in UPSTREAM_STAGES] + [OUR_STAGES.read_text(), _catch_all_logs(state)]
    path = state / "kwok-stages.yaml"
    path.write_text("\n---\n".join(parts))
    return path


def start(state: Path) -> None:
    kubectl.apply(state, [yaml.safe_load((build.module_dir(versions.KWOK) / LOGS_CRD).read_text())], "KWOK's Logs CRD")
    stages = stages_file(state)
    workdir = state / "kwok"
    workdir.mkdir(exist_ok=True)
    processes.start(state, "kwok", [
        str(build.binary("kwok")), f"--kubeconfig={controlplane.kubeconfig_path(state)}", f"--config={stages}",
        "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
        f"--node-lease-duration-seconds={NODE_LEASE_SECONDS}", f"--cidr={POD_CIDR}",
        f"--server-address={HOST}:{PORTS.kwok}", "--enable-crds=Logs", "-v=WARN"],
        # KWOK reads ~/.kwok/kwok.yaml first whenever it exists; its workdir keeps it to ours.
        env={"KWOK_WORKDIR": str(workdir)})
    processes.wait_until(lambda: processes.http_ok(f"http://{HOST}:{PORTS.kwok}/healthz"), "kwok", 60, state, "kwok")


def pod_logs(state: Path, namespace: str, pod: str, lines: list[str], container: str | None = None) -> dict[str, Any]:
    """Give a pod on a KWOK node these log lines (stdout), as `kubectl logs` will return them."""
    path = state / "pod-logs" / namespace / f"{pod}{'-' + container if container else ''}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    path.write_text("".join(f"{stamp} stdout F {line}\n" for line in lines))
    entry: dict[str, Any] = {"logsFile": str(path)}
    if container:
        entry["containers"] = [container]
    logs = {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Logs",
            "metadata": {"name": pod, "namespace": namespace}, "spec": {"logs": [entry]}}
    kubectl.apply(state, [logs], f"logs of pod {namespace}/{pod}")
    return logs
