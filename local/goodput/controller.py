"""Run the goodput controller the stack renders as a local process: its code, its identity, its config.

What the pod would get, on 127.0.0.1: the package from the rendered code ConfigMap laid out as
<state>/goodput/gpucluster_goodput/ (PYTHONPATH, as the pod's mount), a token of the rendered ServiceAccount
(TokenRequest, `kubectl create token`), so the rendered RBAC is what the API server judges its every call by,
and the rendered config ConfigMap, read from the cluster every pass. Prometheus does not run locally: a test
serves GET /api/v1/alerts (tests/http_fake.py) and restarts the controller with its URL
(GPUCLUSTER_GOODPUT_PROMETHEUS_URL); without one the controller says it cannot reach the stack's URL and acts
on the pre-step check alone. `local apply` restarts it, so a changed package runs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from components.core.goodput import controller
from components.core.observability import goodput_agent as agent
from components.core.placement import prestep
from local import controlplane, kubectl, processes
from local.controlplane import HOST, PORTS

NAME = "goodput"  # the process's name in the registry and its log: <state>/logs/goodput.log
TOKEN_HOURS = 48  # longer than any session: the token is not rotated here
PROJECT_DIR = Path(__file__).resolve().parents[2]


def folder(state: Path) -> Path:
    return state / "goodput"


def url() -> str:
    return f"http://{HOST}:{PORTS.goodput}"


def _rendered(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any] | None:
    return next((o for o in objects if o.get("kind") == kind and o["metadata"]["name"] == name
                 and o["metadata"].get("namespace") == agent.NAMESPACE), None)


def lay_out(state: Path, code: dict[str, Any]) -> Path:
    """The code ConfigMap's files as the pod's mount shows them: <folder>/gpucluster_goodput/<key>."""
    package = folder(state) / prestep.PACKAGE
    package.mkdir(parents=True, exist_ok=True)
    for old in package.glob("*.py"):
        old.unlink()
    for key, text in code["data"].items():
        (package / key).write_text(text)
    return package


def _spec_path(state: Path) -> Path:
    return folder(state) / "spec.json"


def start(state: Path, stack_objects: list[dict[str, Any]], out=print) -> bool:
    """(Re)start the controller the stack renders with its code as rendered now; False when it renders none."""
    code = _rendered(stack_objects, "ConfigMap", prestep.CODE_CONFIG_MAP)
    if code is None or _rendered(stack_objects, "Deployment", agent.NAME) is None:
        processes.stop(state, names=[NAME])
        out("  not started: the goodput controller (the stack renders none: observability is off)")
        return False
    lay_out(state, code)
    spec = json.loads(_spec_path(state).read_text()) if _spec_path(state).is_file() else {}
    _spec_path(state).write_text(json.dumps({"prometheusUrl": spec.get("prometheusUrl")}))
    out("starting the goodput controller (components/core/goodput/controller.py) as "
        f"{agent.NAMESPACE}/{agent.NAME}, /metrics on {url()}")
    restart(state)
    return True


def restart(state: Path, prometheus_url: str | None = "keep") -> None:
    """Stop it, then start it again (with another Prometheus URL unless "keep"); wait for its first pass."""
    spec_file = _spec_path(state)
    spec = json.loads(spec_file.read_text())
    if prometheus_url != "keep":
        spec["prometheusUrl"] = prometheus_url
        spec_file.write_text(json.dumps(spec))
    processes.stop(state, names=[NAME])
    token = folder(state) / "token"
    token.write_text(kubectl.run(state, "create", "token", agent.NAME, "-n", agent.NAMESPACE,
                                 f"--duration={TOKEN_HOURS}h").strip())
    token.chmod(0o600)
    env = {"PYTHONPATH": str(folder(state)), "PYTHONDONTWRITEBYTECODE": "1",
           controller.PROMETHEUS_ENV: spec.get("prometheusUrl") or ""}
    # Every path in the command line names the state folder: `local down` finds the process by it.
    processes.start(state, NAME, [
        sys.executable, "-m", f"{prestep.PACKAGE}.controller", "--config", f"{agent.NAMESPACE}/{agent.CONFIG_MAP}",
        "--bind", HOST, "--port", str(PORTS.goodput), "--server", controlplane.server_url(),
        "--ca-file", str(state / "pki" / "ca.crt"), "--token-file", str(token)], env=env, cwd=folder(state))
    processes.wait_until(lambda: processes.http_ok(f"{url()}/healthz"), "the goodput controller's first pass", 60,
                         state, NAME)


def metrics() -> str:
    """Its /metrics, as Prometheus would scrape it."""
    import urllib.request

    with urllib.request.urlopen(f"{url()}/metrics", timeout=5) as response:
        return response.read().decode()

