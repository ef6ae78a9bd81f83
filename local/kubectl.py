"""kubectl, built with the control plane, as the harness's one way to write to the cluster.

Everything is applied server-side (`kubectl apply --server-side`), so the
API server's schema, CEL rules, defaulting and the operators' admission
webhooks judge each object exactly as they would on EKS.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from local import build, controlplane

FIELD_MANAGER = "gpucluster-local"


class KubectlError(RuntimeError):
    pass


def run(state: Path, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 300) -> str:
    cmd = [str(build.binary("kubectl")), "--kubeconfig", str(controlplane.kubeconfig_path(state)), *args]
    done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise KubectlError(f"kubectl {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def name_of(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata", {})
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('kind')} {where}{meta.get('name')}"


def apply(state: Path, objects: Iterable[dict[str, Any]], what: str) -> None:
    """Apply objects server-side in one call; a refusal names the objects and the API server's reason."""
    objects = list(objects)
    if not objects:
        return
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=state, delete=False) as handle:
        yaml.safe_dump_all(objects, handle, sort_keys=False)
        path = handle.name
    try:
        run(state, "apply", "--server-side", "--force-conflicts", f"--field-manager={FIELD_MANAGER}", "-f", path)
    except KubectlError as err:
        raise KubectlError(f"applying {what} ({len(objects)} objects) was refused:\n{err}") from None
    finally:
        Path(path).unlink(missing_ok=True)


def apply_files(state: Path, paths: Iterable[Path], what: str) -> None:
    args = [arg for path in paths for arg in ("-f", str(path))]
    try:
        run(state, "apply", "--server-side", "--force-conflicts", f"--field-manager={FIELD_MANAGER}", *args)
    except KubectlError as err:
        raise KubectlError(f"applying {what} was refused:\n{err}") from None


def get(state: Path, kind: str, name: str | None = None, namespace: str | None = None,
        selector: str | None = None) -> Any:
    args = ["get", kind, *([name] if name else []), "-o", "json"]
    if namespace:
        args += ["-n", namespace]
    elif not name:
        args += ["--all-namespaces"]
    if selector:
        args += ["-l", selector]
    return json.loads(run(state, *args))


def wait(state: Path, what: str, condition: str, timeout: int = 120, namespace: str | None = None,
         extra: tuple[str, ...] = ()) -> None:
    args = ["wait", what, *extra, f"--for={condition}", f"--timeout={timeout}s"]
    if namespace:
        args += ["-n", namespace]
    run(state, *args, timeout=timeout + 30)
