"""One rotation of the manager's token for one worker, fail-safe: until the new token is proven and written,
the manager's kubeconfig is left as it was (and a half-made anchor is deleted, revoking what was issued).

1. read the kubeconfig Secret on the manager (its current token still works: it was rotated within its life);
2. with it, on the worker: create the anchor Secret `gpucluster-multikueue-<now>-<random>` in `gpucluster-fleet`;
3. TokenRequest for the ServiceAccount `gpucluster-multikueue`, bound to the anchor (kind Secret, name, uid),
   living `lifetime_seconds` (authentication.k8s.io/v1 TokenRequest; POST .../serviceaccounts/<name>/token);
4. prove the new token: a SelfSubjectReview (authentication.k8s.io/v1, GA in Kubernetes 1.28) must answer
   the service account's user name;
5. write it into the manager's kubeconfig (PUT at the read resourceVersion: a concurrent change fails it);
6. delete every older anchor on the worker (never the bootstrap Secret): their tokens die with them.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from typing import Any

from . import client, names
from .client import kubeapi

TOKEN_REQUEST = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest"}
SELF_SUBJECT_REVIEW = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


def rfc3339(unix_seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(unix_seconds))


def _secret_path(namespace: str, name: str | None = None) -> str:
    return kubeapi.path("v1", "secrets", namespace, name)


def _kubeconfig_of(secret: dict[str, Any]) -> dict[str, Any]:
    data = (secret.get("data") or {}).get(names.KUBECONFIG_KEY)
    if not data:
        raise client.KubeconfigError(f"the Secret has no data.{names.KUBECONFIG_KEY}")
    return client.parse(base64.b64decode(data).decode())


def _request_token(worker: kubeapi.Client, anchor: dict[str, Any], lifetime_seconds: int) -> dict[str, Any]:
    path = (kubeapi.path("v1", "serviceaccounts", names.FLEET_NAMESPACE, names.SERVICE_ACCOUNT) + "/token")
    body = {**TOKEN_REQUEST, "spec": {
        "expirationSeconds": lifetime_seconds,
        "boundObjectRef": {"kind": "Secret", "apiVersion": "v1", "name": anchor["metadata"]["name"],
                           "uid": anchor["metadata"]["uid"]}}}
    status = (worker.create(path, body) or {}).get("status") or {}
    if not status.get("token"):
        raise RuntimeError("the TokenRequest answered no token")
    return status


def _prove(worker: kubeapi.Client) -> None:
    review = worker.create(SELF_SUBJECT_REVIEW, {"apiVersion": "authentication.k8s.io/v1",
                                                 "kind": "SelfSubjectReview"})
    user = ((review or {}).get("status") or {}).get("userInfo", {}).get("username")
    if user != names.USERNAME:
        raise RuntimeError(f"the new token is {user!r}, not {names.USERNAME}")


def _older_anchors(worker: kubeapi.Client, current: str) -> list[str]:
    """Every anchor but the one the manager's token is now bound to (the CronJob never runs two at once)."""
    found = worker.list(_secret_path(names.FLEET_NAMESPACE), label_selector=f"{names.ANCHOR_LABEL}=true")
    older = []
    for secret in found:
        name = secret["metadata"]["name"]
        if name not in (names.BOOTSTRAP_SECRET, current) and names.anchor_time(name) is not None:
            older.append(name)
    return sorted(older)


def rotate(manager_api: kubeapi.Client, worker_cluster: str, secret_name: str, lifetime_seconds: int,
           now: float, namespace: str = names.MANAGER_NAMESPACE, unique: str | None = None) -> dict[str, Any]:
    """Rotate one worker's token; the report: {cluster, secret, ok, anchor, expiresAt, deletedAnchors, error,
    warnings}. Never raises for an API or kubeconfig error: `ok` is false and `error` says what failed."""
    seconds = int(now)
    report: dict[str, Any] = {"cluster": worker_cluster, "secret": f"{namespace}/{secret_name}", "ok": False,
                              "anchor": None, "expiresAt": None, "deletedAnchors": [], "error": None,
                              "warnings": []}
    if lifetime_seconds < names.MIN_LIFETIME_SECONDS:
        report["error"] = f"lifetime {lifetime_seconds}s is under the API's minimum {names.MIN_LIFETIME_SECONDS}s"
        return report
    step = "read the manager's Secret"
    anchor_made = False
    anchor = names.anchor_name(seconds, secrets.token_hex(3) if unique is None else unique)
    try:
        secret = manager_api.get(_secret_path(namespace, secret_name))
        if secret is None:
            raise RuntimeError("not found")
        config = _kubeconfig_of(secret)
        with client.connect(config, worker_cluster) as worker:
            step = f"create the anchor {names.FLEET_NAMESPACE}/{anchor} on the worker"
            made = worker.create(_secret_path(names.FLEET_NAMESPACE), {
                "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": anchor, "labels": {names.ANCHOR_LABEL: "true",
                                                        "app.kubernetes.io/part-of": "gpucluster"}}})
            anchor_made = True
            step = "request a token"
            status = _request_token(worker, made, lifetime_seconds)
            report["expiresAt"] = status.get("expirationTimestamp")
            granted = status.get("expirationTimestamp")
            if granted and granted < rfc3339(seconds + lifetime_seconds - 60):
                report["warnings"].append(f"the API server capped the token's life: it expires at {granted}, "
                                          f"not {rfc3339(seconds + lifetime_seconds)} "
                                          "(--service-account-max-token-expiration)")
            with client.connect(config, worker_cluster, token=status["token"]) as fresh:
                step = "prove the new token (SelfSubjectReview)"
                _prove(fresh)
                step = "write the new token into the manager's Secret"
                meta = secret["metadata"]
                meta["annotations"] = {**(meta.get("annotations") or {}),
                                       names.ROTATED_AT_ANNOTATION: rfc3339(seconds),
                                       names.ANCHOR_ANNOTATION: anchor,
                                       **({names.EXPIRES_AT_ANNOTATION: granted} if granted else {})}
                text = json.dumps(client.with_token(config, status["token"], worker_cluster), indent=1)
                secret["data"] = {**secret["data"], names.KUBECONFIG_KEY: base64.b64encode(text.encode()).decode()}
                manager_api.replace(_secret_path(namespace, secret_name), secret)  # metadata.resourceVersion kept
                anchor_made = False  # in use now: never deleted below
                report.update(ok=True, anchor=anchor)
                step = "delete the older anchors (revoking their tokens)"
                for old in _older_anchors(fresh, anchor):
                    fresh.delete(_secret_path(names.FLEET_NAMESPACE, old))
                    report["deletedAnchors"].append(old)
    except (kubeapi.ApiError, client.KubeconfigError, RuntimeError, OSError, ValueError) as err:
        report["error"] = f"{step}: {err}"
        if anchor_made:  # issued but never written: revoke it
            try:
                with client.connect(config, worker_cluster) as worker:
                    worker.delete(_secret_path(names.FLEET_NAMESPACE, anchor))
            except (kubeapi.ApiError, client.KubeconfigError, OSError) as cleanup:
                report["warnings"].append(f"the unused anchor {anchor} is left on the worker: {cleanup}")
    return report


def fleet_secrets(manager_api: kubeapi.Client, namespace: str = names.MANAGER_NAMESPACE) -> list[str]:
    """Every fleet kubeconfig Secret on the manager (needs `list` on Secrets: an operator's, not the CronJob's)."""
    return sorted(s["metadata"]["name"] for s in manager_api.list(_secret_path(namespace))
                  if s["metadata"]["name"].startswith(names.SECRET_PREFIX))
