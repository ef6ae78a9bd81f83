"""The e2e tier: the stack's cluster half on the local control plane (local/), one stack at a time.

`make e2e` builds the control plane (cached) and runs these with GPUCLUSTER_E2E=1;
`make test` never collects them. A test asks for `cluster("dev")`; switching stacks
stops the running one first, and the session ends with nothing left running.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from local import cluster as local_cluster
from local import controlplane, kubectl
from tests.conftest import ROOT  # noqa: E402  (the repository)
from tests.waiting import wait_for

STATE = ROOT / ".local-cluster-e2e"


@dataclass
class Local:
    """A running local cluster of one stack and the ways the tests read and drive it."""

    stack: str
    state: Path
    rendered: local_cluster.Rendered

    @property
    def kubeconfig(self) -> Path:
        return controlplane.kubeconfig_path(self.state)

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        return kubectl.run(self.state, *args, stdin=stdin, check=check)

    def get(self, kind: str, name: str | None = None, namespace: str | None = None,
            selector: str | None = None) -> Any:
        return kubectl.get(self.state, kind, name, namespace, selector)

    def apply(self, objects: list[dict[str, Any]], what: str = "test objects") -> None:
        kubectl.apply(self.state, objects, what)

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """`python -m bootstrap <args>` against this cluster, as a user runs it."""
        return subprocess.run([sys.executable, "-m", "bootstrap", *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=timeout, env={**_env(), "KUBECONFIG": str(self.kubeconfig)})

    def wait(self, check: Callable[[], Any], what: str, timeout: float = 90, interval: float = 1.0) -> Any:
        return wait_for(check, what, timeout, interval)

    def pods(self, namespace: str, selector: str | None = None) -> list[dict[str, Any]]:
        return self.get("pods", namespace=namespace, selector=selector)["items"]


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}


class Clusters:
    def __init__(self) -> None:
        self.current: Local | None = None

    def __call__(self, stack: str) -> Local:
        if self.current is not None and self.current.stack == stack:
            return self.current
        self.stop()
        self.current = Local(stack, STATE, local_cluster.up(stack, STATE, out=print))
        return self.current

    def stop(self) -> None:
        local_cluster.down(STATE, quiet=True)
        self.current = None


@pytest.fixture(scope="session")
def cluster():
    clusters = Clusters()
    clusters.stop()  # whatever an interrupted run left
    yield clusters
    clusters.stop()


def job_file(folder: Path, name: str, nodes: int = 1) -> str:
    """A job file `submit --file` takes: a torchrun job on dev's pool."""
    from components.core import versions

    path = folder / f"{name}.yaml"
    path.write_text(json.dumps({"name": name, "pool": "dev", "nodes": nodes, "launcher": "torchrun",
                                "image": versions.DLC_PYTORCH_IMAGE, "command": ["python", "-c", "print(1)"]}))
    return str(path)


def jsonpath(obj: Any, *path: str | int, default: Any = None) -> Any:
    for key in path:
        try:
            obj = obj[key]
        except (KeyError, IndexError, TypeError):
            return default
    return obj


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=1)[:4000]


STACK_ORDER = ("dev", "prod")


def _stack_of(item) -> str:
    params = getattr(getattr(item, "callspec", None), "params", {})
    if "stack" in params:
        return params["stack"]
    marker = item.get_closest_marker("stack")
    assert marker is not None, f"{item.nodeid}: say its stack with @pytest.mark.stack(...) or a stack parameter"
    return marker.args[0]


def pytest_configure(config):
    config.addinivalue_line("markers", "stack(name): the stack the test's local cluster runs")


def pytest_collection_modifyitems(items):
    """One cluster per stack: every dev test, then every prod test (each file's order kept)."""
    items.sort(key=lambda item: STACK_ORDER.index(_stack_of(item)))
