"""One rotation of the manager's token for one worker, fail-safe: until the new token is proven and written,
the manager's kubeconfig is left as it was (and a half-made anchor is deleted, revoking what was issued).

1. read the kubeconfig Secret on the manager, and its seed (seed.py): rotate from the kubeconfig's token, or
   reseed from the seed's when the worker was re-created or that token is refused (`reseeded` in the report);
2. with it, on the worker: create the anchor Secret `gpucluster-multikueue-<now>-<random>` in `gpucluster-fleet`;
3. TokenRequest for the ServiceAccount `gpucluster-multikueue`, bound to the anchor (kind Secret, name, uid),
   living `lifetime_seconds` (authentication.k8s.io/v1 TokenRequest; POST .../serviceaccounts/<name>/token);
4. prove the new token: a SelfSubjectReview (authentication.k8s.io/v1) must answer the service account's user;
5. write it into the manager's kubeconfig (PUT at the read resourceVersion: a concurrent change fails it), the
   Secret's annotations naming the new anchor (current) and the one it replaces (previous);
6. delete the anchor that was previous before this rotation (two rotations old), revoking its token. The one
   just replaced lives until the next rotation: Kueue reloads the Secret asynchronously, and revoking that
   token at once could make the worker look lost for a moment. So after rotations 1, 2, 3 the first rotated
   token dies at the third. Only anchor names are ever deleted, never the bootstrap Secret.

The worker's tokens may create and delete Secrets in `gpucluster-fleet`, not read or list them (the bootstrap
Secret there never expires): which anchors exist is what the manager's annotations say.

A granted life under half the requested one (the API server's --service-account-max-token-expiration capped
it) is an error (exit 1: the next run may find the token expired), though the new token is still written: it
outlives the old one.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from datetime import datetime
from typing import Any

from . import client, names, seed
from .client import kubeapi

TOKEN_REQUEST = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest"}


def rfc3339(unix_seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(unix_seconds))


def unix(timestamp: str) -> float | None:
    """A metav1.Time (RFC 3339, `Z`) in unix seconds; None when it is not one."""
    try:
        return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    except (AttributeError, ValueError):
        return None


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
    user = seed.whoami(worker)
    if user != names.USERNAME:
        raise RuntimeError(f"the new token is {user!r}, not {names.USERNAME}")


def _anchor(name: str | None) -> str | None:
    """An annotation's anchor name, or None: anything else (the bootstrap Secret's name) is never deleted."""
    if not name or name == names.BOOTSTRAP_SECRET or names.anchor_time(name) is None:
        return None
    return name


def _read_seed(manager_api: kubeapi.Client, namespace: str, cluster: str, warnings: list[str]
               ) -> dict[str, Any] | None:
    """The seed's kubeconfig; None (and a warning) when there is none or it cannot be read: rotating from the
    kubeconfig's token still works, only reseeding does not."""
    name = names.seed_name(cluster)
    try:
        found = manager_api.get(_secret_path(namespace, name))
        if found is not None:
            return _kubeconfig_of(found)
        warnings.append(f"no seed Secret {namespace}/{name}: a re-created worker or a refused token cannot be "
                        "reseeded")
    except (kubeapi.ApiError, client.KubeconfigError, ValueError) as err:
        warnings.append(f"the seed Secret {namespace}/{name} is unusable ({err}): rotating without it")
    return None


def _capped(granted: str | None, now: int, lifetime_seconds: int, warnings: list[str]) -> str | None:
    """The error when the API server granted under half the requested life; a warning for a smaller cut."""
    at = unix(granted) if granted else None
    if at is None:
        warnings.append(f"the TokenRequest's expirationTimestamp {granted!r} is not a time: not checked")
        return None
    if at < now + lifetime_seconds / 2:
        return (f"the API server capped the token's life (--service-account-max-token-expiration): it expires at "
                f"{granted}, before {rfc3339(now + lifetime_seconds / 2)} (half the {lifetime_seconds}s asked), so "
                "the next run may find it expired; it is written all the same (it outlives the old one): raise the "
                "cap or lower fleet.tokenRotationHours")
    if at < now + lifetime_seconds - 60:
        warnings.append(f"the API server capped the token's life: it expires at {granted}, not "
                        f"{rfc3339(now + lifetime_seconds)} (--service-account-max-token-expiration)")
    return None


def rotate(manager_api: kubeapi.Client, worker_cluster: str, secret_name: str, lifetime_seconds: int,
           now: float, namespace: str = names.MANAGER_NAMESPACE, unique: str | None = None) -> dict[str, Any]:
    """Rotate one worker's token; the report: {cluster, secret, ok, reseeded, reseedReason, anchor,
    previousAnchor, expiresAt, deletedAnchors, error, warnings}. `ok`: the new token is written; `error`: the
    run failed (exit 1), before the write (the Secret untouched) or after it (a capped life, a failed delete).
    Never raises for an API or kubeconfig error."""
    seconds = int(now)
    report: dict[str, Any] = {"cluster": worker_cluster, "secret": f"{namespace}/{secret_name}", "ok": False,
                              "reseeded": False, "reseedReason": None, "anchor": None, "previousAnchor": None,
                              "expiresAt": None, "deletedAnchors": [], "error": None, "warnings": []}
    if lifetime_seconds < names.MIN_LIFETIME_SECONDS:
        report["error"] = f"lifetime {lifetime_seconds}s is under the API's minimum {names.MIN_LIFETIME_SECONDS}s"
        return report
    step = "read the manager's Secret"
    anchor_made = False
    capped = None
    config: dict[str, Any] = {}
    anchor = names.anchor_name(seconds, secrets.token_hex(3) if unique is None else unique)
    try:
        secret = manager_api.get(_secret_path(namespace, secret_name))
        if secret is None:
            raise RuntimeError("not found")
        live = _kubeconfig_of(secret)
        step = "check the current token (SelfSubjectReview), or the seed's"
        config, why = seed.choose(live, _read_seed(manager_api, namespace, worker_cluster, report["warnings"]),
                                  worker_cluster)
        report.update(reseeded=why is not None, reseedReason=why)
        annotations = dict(secret["metadata"].get("annotations") or {})
        replaced = _anchor(annotations.get(names.ANCHOR_ANNOTATION))  # kept until the next rotation
        expired = _anchor(annotations.get(names.PREVIOUS_ANCHOR_ANNOTATION))  # revoked by this one
        with client.connect(config, worker_cluster) as worker:
            step = f"create the anchor {names.FLEET_NAMESPACE}/{anchor} on the worker"
            made = worker.create(_secret_path(names.FLEET_NAMESPACE), {
                "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": anchor, "labels": {names.ANCHOR_LABEL: "true",
                                                        "app.kubernetes.io/part-of": "gpucluster"}}})
            anchor_made = True
            step = "request a token"
            status = _request_token(worker, made, lifetime_seconds)
            granted = status.get("expirationTimestamp")
            report["expiresAt"] = granted
            capped = _capped(granted, seconds, lifetime_seconds, report["warnings"])
            with client.connect(config, worker_cluster, token=status["token"]) as fresh:
                step = "prove the new token (SelfSubjectReview)"
                _prove(fresh)
                step = "write the new token into the manager's Secret"
                annotations.pop(names.PREVIOUS_ANCHOR_ANNOTATION, None)
                annotations.update({names.ROTATED_AT_ANNOTATION: rfc3339(seconds), names.ANCHOR_ANNOTATION: anchor,
                                    **({names.PREVIOUS_ANCHOR_ANNOTATION: replaced} if replaced else {}),
                                    **({names.EXPIRES_AT_ANNOTATION: granted} if granted else {})})
                secret["metadata"]["annotations"] = annotations
                text = json.dumps(client.with_token(config, status["token"], worker_cluster), indent=1)
                secret["data"] = {**secret["data"], names.KUBECONFIG_KEY: base64.b64encode(text.encode()).decode()}
                manager_api.replace(_secret_path(namespace, secret_name), secret)  # metadata.resourceVersion kept
                anchor_made = False  # in use now: never deleted below
                report.update(ok=True, anchor=anchor, previousAnchor=replaced)
                if expired and expired not in (anchor, replaced):
                    step = f"delete the anchor {expired} (revoking the token two rotations old)"
                    if fresh.delete(_secret_path(names.FLEET_NAMESPACE, expired)):  # gone already (404): fine
                        report["deletedAnchors"].append(expired)
    except (kubeapi.ApiError, client.KubeconfigError, RuntimeError, OSError, ValueError) as err:
        report["error"] = f"{step}: {err}"
        if anchor_made:  # issued but never written: revoke it
            try:
                with client.connect(config, worker_cluster) as worker:
                    worker.delete(_secret_path(names.FLEET_NAMESPACE, anchor))
            except (kubeapi.ApiError, client.KubeconfigError, OSError) as cleanup:
                report["warnings"].append(f"the unused anchor {anchor} is left on the worker: {cleanup}")
    if report["ok"] and capped:
        report["error"] = f"{report['error']}; {capped}" if report["error"] else capped
    return report


def fleet_secrets(manager_api: kubeapi.Client, namespace: str = names.MANAGER_NAMESPACE) -> list[str]:
    """Every fleet kubeconfig Secret on the manager, not their seeds (needs `list` on Secrets: an operator's, not
    the CronJob's, which names them)."""
    found = {s["metadata"]["name"] for s in manager_api.list(_secret_path(namespace))
             if s["metadata"]["name"].startswith(names.SECRET_PREFIX)}
    return sorted(n for n in found if not (n.endswith(names.SEED_SUFFIX) and n[:-len(names.SEED_SUFFIX)] in found))
