"""A fleet on one machine: the manager and each of its workers a local control plane of its own.

`python -m local up --stack fleet` (a manager's stack) starts every worker
listed in its stack file, then the manager, each by `python -m local up`
with its own state folder under the fleet's and its own block of ports
(controlplane.PORT_OFFSET_ENV), none with the MPI Operator (its health port
is fixed). Then it does what `pulumi up` of the manager does with each
worker's `fleetAccess` output: it writes the worker's kubeconfig (server,
CA, the bootstrap token of the service account the worker rendered) into
the manager's Secret for Kueue. And it writes one kubeconfig with a context
per stack (named as the stack) for the CLI: `--kubeconfig <fleet>/kubeconfig`.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from local import controlplane, kubectl, processes

PROJECT_DIR = Path(__file__).resolve().parents[2]
DEFAULT_STATE = PROJECT_DIR / ".local-fleet"
MEMBER_ENV = "GPUCLUSTER_LOCAL_FLEET_MEMBER"  # set for each member's own `local up`: it is not the fleet's
PORT_BLOCK = 1000  # member i (the manager 0) listens on every port + (i + 1) * PORT_BLOCK

# The names the worker renders and the manager's Secret Kueue reads (components.core.fleet.names).
TOKEN_NAMESPACE = "gpucluster-fleet"
BOOTSTRAP_SECRET = "gpucluster-multikueue-bootstrap"
KUEUE_NAMESPACE = "kueue-system"


def state_dir() -> Path:
    return Path(os.environ.get("GPUCLUSTER_LOCAL_FLEET_STATE") or DEFAULT_STATE).resolve()


def is_manager(stack: str) -> bool:
    """The stack is a fleet's manager (and this process is not one member's own `up`)."""
    if os.environ.get(MEMBER_ENV):
        return False
    return _config(stack).fleet is not None and _config(stack).fleet.role == "manager"


def _config(stack: str) -> Any:
    from bootstrap import stackfile

    return stackfile.load_stack(stack, PROJECT_DIR, standins=True)[0]


def members(manager: str) -> list[str]:
    """The manager first, then its workers in the order it lists them."""
    from components.core.fleet.workers import load_workers

    return [manager, *(m.name for m in load_workers(_config(manager), _config))]


def member_env(index: int, stack: str, root: Path) -> dict[str, str]:
    return {**os.environ, MEMBER_ENV: "1", "GPUCLUSTER_LOCAL_STATE": str(root / stack),
            controlplane.PORT_OFFSET_ENV: str((index + 1) * PORT_BLOCK), controlplane.WITHOUT_ENV: "mpi-operator"}


def up(manager: str, root: Path, out=print) -> Path:
    """Start (or re-apply) every member, give the manager its workers' credentials; the fleet's kubeconfig."""
    stacks = members(manager)
    root.mkdir(parents=True, exist_ok=True)
    (root / "manager").write_text(manager)
    for index, stack in reversed(list(enumerate(stacks))):  # the workers first: the manager dispatches to them
        out(f"--- {stack} ({'manager' if index == 0 else 'worker'}) in {root / stack}")
        done = subprocess.run([sys.executable, "-m", "local", "up", "--stack", stack], cwd=PROJECT_DIR,
                              env=member_env(index, stack, root))
        if done.returncode != 0:
            raise processes.LocalClusterError(f"`local up --stack {stack}` failed (exit {done.returncode})")
    for worker in stacks[1:]:
        grant(root, manager, worker)
        out(f"the manager's Secret for {worker} holds its bootstrap token")
    return write_kubeconfig(root, stacks)


def worker_kubeconfig(root: Path, worker: str, token: str) -> dict[str, Any]:
    """What the manager's program builds from a worker's `fleetAccess`: server, CA data and a bearer token only
    (Kueue v0.19.2 refuses token files, exec plugins and insecure TLS in a MultiKueue kubeconfig)."""
    admin = yaml.safe_load(controlplane.kubeconfig_path(root / worker).read_text())
    cluster = admin["clusters"][0]["cluster"]
    return {"apiVersion": "v1", "kind": "Config", "current-context": worker,
            "clusters": [{"name": worker, "cluster": {"server": cluster["server"],
                                                      "certificate-authority-data":
                                                          cluster["certificate-authority-data"]}}],
            "users": [{"name": worker, "user": {"token": token}}],
            "contexts": [{"name": worker, "context": {"cluster": worker, "user": worker}}]}


def bootstrap_token(root: Path, worker: str) -> str:
    """The token the worker's controller manager wrote into its bootstrap Secret."""
    state = root / worker

    def token() -> str | None:
        secret = kubectl.get(state, "secret", BOOTSTRAP_SECRET, namespace=TOKEN_NAMESPACE)
        value = (secret.get("data") or {}).get("token")
        return base64.b64decode(value).decode() if value else None
    processes.wait_until(lambda: token() is not None, f"{worker}'s {BOOTSTRAP_SECRET} token", 60)
    return token()


def grant(root: Path, manager: str, worker: str) -> None:
    """The manager's kubeconfig Secret for `worker`, as the manager's `pulumi up` writes it."""
    from components.core.fleet.workers import cluster_name

    name = cluster_name(worker)
    config = worker_kubeconfig(root, worker, bootstrap_token(root, worker))
    # Kueue's Secret and the seed Pulumi keeps beside it (the rotator reseeds from it), both as `pulumi up` writes
    # them from the worker's fleetAccess in place of the offline plan's stand-ins.
    secrets = [{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": f"gpucluster-fleet-{name}{suffix}", "namespace": KUEUE_NAMESPACE},
                "stringData": {"kubeconfig": yaml.safe_dump(config, sort_keys=False)}} for suffix in ("", "-seed")]
    kubectl.apply(root / manager, secrets, f"the kubeconfig Secrets for {worker}")


def write_kubeconfig(root: Path, stacks: list[str]) -> Path:
    """One kubeconfig, a context per member named as its stack (admin certificates), the manager's current."""
    merged: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "current-context": stacks[0],
                              "clusters": [], "users": [], "contexts": []}
    for stack in stacks:
        admin = yaml.safe_load(controlplane.kubeconfig_path(root / stack).read_text())
        merged["clusters"].append({"name": stack, "cluster": admin["clusters"][0]["cluster"]})
        merged["users"].append({"name": f"{stack}-admin", "user": admin["users"][0]["user"]})
        merged["contexts"].append({"name": stack, "context": {"cluster": stack, "user": f"{stack}-admin"}})
    path = root / "kubeconfig"
    path.write_text(yaml.safe_dump(merged, sort_keys=False))
    path.chmod(0o600)
    return path


def member_states(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def stop_member(root: Path, stack: str) -> list[str]:
    """Stop one member's processes (a worker lost): its state stays, so `status` of the fleet still lists it."""
    return processes.stop(root / stack)


def down(root: Path, out=print) -> None:
    import shutil

    for state in member_states(root):
        stopped = processes.stop(state)
        out(f"{state.name}: stopped {', '.join(stopped) or 'nothing'}")
    shutil.rmtree(root, ignore_errors=True)
    out(f"deleted {root}")
