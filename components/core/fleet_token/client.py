"""Clients of the manager and the workers from kubeconfigs: goodput's kubeapi.Client, its credentials in files.

kubeapi.Client reads its CA, token and client certificate from files (a pod's mounted service account);
a kubeconfig carries them inline (`certificate-authority-data`, `token`, `client-certificate-data`,
`client-key-data`), so `connect` writes them, 0600, into a private temporary directory (the CronJob's /tmp
is a memory-backed emptyDir) that is removed when the client is done.

A kubeconfig is JSON (the manager's Secrets hold JSON: YAML's superset, which Kueue's clientcmd.Load reads);
a kubeconfig file given on the command line may be YAML, read with PyYAML where it is installed (an
operator's machine; the pod uses its own service account).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from typing import Any

try:  # shipped (gpucluster_fleet_token): goodput's kubeapi.py is a file of this package (fleet/rotator.py)
    from . import kubeapi
except ImportError:  # in this repository
    from ..goodput import kubeapi

IN_CLUSTER = "in-cluster"


class KubeconfigError(Exception):
    """A kubeconfig we cannot use: what is missing or wrong in it."""


def parse(text: str) -> dict[str, Any]:
    """A kubeconfig's text: JSON, else YAML when PyYAML is importable."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        import yaml  # noqa: PLC0415 - optional: an operator's machine has it, the pod reads JSON only
    except ImportError:
        raise KubeconfigError("the kubeconfig is not JSON, and PyYAML is not installed to read YAML") from None
    loaded = yaml.safe_load(text)
    if not isinstance(loaded, dict):
        raise KubeconfigError("the kubeconfig is not a mapping")
    return loaded


def _named(config: Mapping[str, Any], section: str, name: str) -> dict[str, Any]:
    for entry in config.get(section) or []:
        if entry.get("name") == name:
            return dict(entry.get(section[:-1]) or {})
    raise KubeconfigError(f"no {section[:-1]} named {name!r}")


def entry(config: Mapping[str, Any], context: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(cluster, user) of `context` (the current context when None; the only one when there is one)."""
    contexts = config.get("contexts") or []
    name = context or config.get("current-context") or (contexts[0]["name"] if len(contexts) == 1 else None)
    if not name:
        raise KubeconfigError("no context given and no current-context")
    ctx = _named(config, "contexts", name)
    return _named(config, "clusters", ctx.get("cluster", "")), _named(config, "users", ctx.get("user", ""))


def token_of(config: Mapping[str, Any], context: str | None = None) -> str:
    token = entry(config, context)[1].get("token")
    if not token:
        raise KubeconfigError(f"context {context!r} has no user token")
    return token


def with_token(config: Mapping[str, Any], token: str, context: str | None = None) -> dict[str, Any]:
    """A copy of the kubeconfig whose context's user has `token`, nothing else of the user changed."""
    copy = json.loads(json.dumps(config))
    contexts = copy.get("contexts") or []
    name = context or copy.get("current-context") or (contexts[0]["name"] if len(contexts) == 1 else None)
    user = next((c["context"]["user"] for c in contexts if c.get("name") == name), None)
    for item in copy.get("users") or []:
        if item.get("name") == user:
            item.setdefault("user", {})["token"] = token
            return copy
    raise KubeconfigError(f"no user for context {name!r}")


def _write(folder: str, name: str, data: bytes) -> str:
    path = os.path.join(folder, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


@contextlib.contextmanager
def connect(config: Mapping[str, Any], context: str | None = None, token: str | None = None
            ) -> Iterator[kubeapi.Client]:
    """A client of the kubeconfig's `context` (or with `token` instead of its user's credentials)."""
    cluster, user = entry(config, context)
    if not cluster.get("server"):
        raise KubeconfigError(f"context {context!r} has no server")
    if cluster.get("insecure-skip-tls-verify"):
        raise KubeconfigError("insecure-skip-tls-verify is not accepted")  # nor by Kueue (validateKubeconfig)
    with tempfile.TemporaryDirectory(prefix="gpucluster-fleet-token-") as folder:
        files: dict[str, str | None] = {"ca_file": cluster.get("certificate-authority")}
        if cluster.get("certificate-authority-data"):
            files["ca_file"] = _write(folder, "ca.crt", base64.b64decode(cluster["certificate-authority-data"]))
        token = token or user.get("token")
        if token:
            files["token_file"] = _write(folder, "token", token.encode())
        elif user.get("client-certificate-data") and user.get("client-key-data"):
            files["cert_file"] = _write(folder, "client.crt", base64.b64decode(user["client-certificate-data"]))
            files["key_file"] = _write(folder, "client.key", base64.b64decode(user["client-key-data"]))
        elif user.get("client-certificate") and user.get("client-key"):
            files.update(cert_file=user["client-certificate"], key_file=user["client-key"])
        else:
            raise KubeconfigError(f"context {context!r}: no token or client certificate (exec plugins are not run)")
        yield kubeapi.Client(cluster["server"], **files)


def manager_client(kubeconfig: str) -> contextlib.AbstractContextManager[kubeapi.Client]:
    """`in-cluster`: the pod's service account; else a kubeconfig file's current context."""
    if kubeconfig == IN_CLUSTER:
        return contextlib.nullcontext(kubeapi.Client.from_env())
    with open(os.path.expanduser(kubeconfig), encoding="utf-8") as f:
        return connect(parse(f.read()))
