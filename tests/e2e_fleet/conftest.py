"""The fleet's e2e tier: a manager and two workers, three local control planes (local/fleet.py), real Kueue MultiKueue.

`make e2e-fleet` runs it with GPUCLUSTER_E2E=1 (`make test` never collects it; .ci/run runs it after `make e2e`).
The tests share one fleet and run in file order: each starts from what the one before left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from local import controlplane, kubectl, processes
from local.fleet import members as fleet
from tests.conftest import ROOT
from tests.waiting import wait_for

STATE = ROOT / ".local-fleet-e2e"
MANAGER, EAST, WEST = "fleet", "fleet-east", "fleet-west"
NAMESPACE = "training"


@dataclass
class Fleet:
    root: Path
    kubeconfig: Path

    def kubectl(self, member: str, *args: str, stdin: str | None = None, check: bool = True) -> str:
        return kubectl.run(self.root / member, *args, stdin=stdin, check=check)

    def get(self, member: str, kind: str, name: str | None = None, namespace: str | None = None) -> Any:
        return kubectl.get(self.root / member, kind, name, namespace)

    def apply(self, member: str, objects: list[dict[str, Any]], what: str = "test objects") -> None:
        kubectl.apply(self.root / member, objects, what)

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """`python -m bootstrap <args> --kubeconfig <the fleet's>`, as a user runs it with a context per stack."""
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        return subprocess.run([sys.executable, "-m", "bootstrap", *args, "--kubeconfig", str(self.kubeconfig)],
                              cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)

    def wait(self, check: Callable[[], Any], what: str, timeout: float = 120, interval: float = 1.0) -> Any:
        return wait_for(check, what, timeout, interval)

    def workload(self, member: str, job: str) -> dict[str, Any] | None:
        items = self.get(member, "workloads", namespace=NAMESPACE)["items"]
        return next((w for w in items if w["metadata"]["name"].startswith(f"trainjob-{job}-")), None)

    def pods(self, member: str, job: str) -> list[dict[str, Any]]:
        return kubectl.get(self.root / member, "pods", namespace=NAMESPACE,
                           selector=f"jobset.sigs.k8s.io/jobset-name={job}")["items"]

    def running(self, member: str, job: str, count: int) -> list[dict[str, Any]] | None:
        pods = [p for p in self.pods(member, job) if p["status"].get("phase") == "Running"]
        return pods if len(pods) == count else None

    def stop(self, member: str) -> list[str]:
        return processes.stop(self.root / member)

    def server(self, member: str) -> str:
        return json.loads(json.dumps(self.kubeconfig_of(member)))["clusters"][0]["cluster"]["server"]

    def kubeconfig_of(self, member: str) -> dict[str, Any]:
        import yaml

        return yaml.safe_load(controlplane.kubeconfig_path(self.root / member).read_text())


def job_file(folder: Path, name: str, nodes: int = 2) -> str:
    """A job file for the workers' h100 pool (both name it alike)."""
    from components.core import versions

    path = folder / f"{name}.yaml"
    path.write_text(json.dumps({"name": name, "pool": "h100", "nodes": nodes, "launcher": "torchrun",
                                "image": versions.DLC_PYTORCH_IMAGE, "command": ["python", "-c", "print(1)"]}))
    return str(path)


@pytest.fixture(scope="session")
def the_fleet():
    os.environ["GPUCLUSTER_LOCAL_FLEET_STATE"] = str(STATE)
    fleet.down(STATE, out=lambda *_: None)  # whatever an interrupted run left
    try:
        kubeconfig = fleet.up(MANAGER, STATE)
        yield Fleet(STATE, kubeconfig)
    finally:
        fleet.down(STATE)
