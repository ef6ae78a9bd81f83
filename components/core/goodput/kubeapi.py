"""A small Kubernetes API client over urllib: JSON in and out, lists, patches, logs and a pod watch.

Standard library only (this file ships into the cluster). Two ways to reach the API server:
- in a pod: KUBERNETES_SERVICE_HOST/PORT and the service account's token and CA under
  /var/run/secrets/kubernetes.io/serviceaccount (Kubernetes docs, "Accessing the Kubernetes API from a Pod");
  the token is read again for every request: the kubelet rotates the projected token (hourly by default);
- elsewhere (the local control plane's process): GPUCLUSTER_KUBE_SERVER, GPUCLUSTER_KUBE_CA_FILE and either
  GPUCLUSTER_KUBE_TOKEN_FILE or GPUCLUSTER_KUBE_CERT_FILE + GPUCLUSTER_KUBE_KEY_FILE.
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from typing import Any

SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
SERVER_ENV = "GPUCLUSTER_KUBE_SERVER"
CA_ENV = "GPUCLUSTER_KUBE_CA_FILE"
TOKEN_ENV = "GPUCLUSTER_KUBE_TOKEN_FILE"
CERT_ENV = "GPUCLUSTER_KUBE_CERT_FILE"
KEY_ENV = "GPUCLUSTER_KUBE_KEY_FILE"
TIMEOUT_SECONDS = 30
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


def path(api_version: str, plural: str, namespace: str, name: str | None = None) -> str:
    """A namespaced object's (or its collection's) REST path: /api/v1/... for the core group, else /apis/..."""
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    return f"{base}/namespaces/{namespace}/{plural}" + (f"/{name}" if name else "")


class ApiError(Exception):
    """The API server refused a request: its HTTP status and its Status message."""

    def __init__(self, method: str, path: str, status: int, message: str):
        super().__init__(f"{method} {path}: {status} {message}")
        self.status = status


class Client:
    def __init__(self, server: str, ca_file: str | None = None, token_file: str | None = None,
                 cert_file: str | None = None, key_file: str | None = None, timeout: float = TIMEOUT_SECONDS):
        self.server = server.rstrip("/")
        self.token_file, self.timeout = token_file, timeout
        self.context = ssl.create_default_context(cafile=ca_file)
        if cert_file:
            self.context.load_cert_chain(cert_file, key_file)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, service_account: str = SERVICE_ACCOUNT) -> Client:
        """Explicit settings when GPUCLUSTER_KUBE_SERVER is set, else the pod's own service account."""
        env = os.environ if env is None else env
        if env.get(SERVER_ENV):
            return cls(env[SERVER_ENV], env.get(CA_ENV) or None, env.get(TOKEN_ENV) or None,
                       env.get(CERT_ENV) or None, env.get(KEY_ENV) or None)
        host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT", "443")
        if not host:
            raise RuntimeError(f"not in a pod (no KUBERNETES_SERVICE_HOST) and no {SERVER_ENV}: no API server")
        host = f"[{host}]" if ":" in host else host  # an IPv6 cluster's service address
        return cls(f"https://{host}:{port}", f"{service_account}/ca.crt", f"{service_account}/token")

    # -- requests ------------------------------------------------------------------------------------------

    def _request(self, method: str, path: str, body: Any = None, query: Mapping[str, Any] | None = None,
                 content_type: str = "application/json", timeout: float | None = None):
        url = self.server + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", content_type)
        if self.token_file:
            with open(self.token_file) as f:
                request.add_header("Authorization", f"Bearer {f.read().strip()}")
        try:
            return urllib.request.urlopen(request, context=self.context, timeout=timeout or self.timeout)
        except urllib.error.HTTPError as err:
            text = err.read().decode(errors="replace")
            try:
                message = json.loads(text).get("message", text)
            except ValueError:
                message = text
            raise ApiError(method, path, err.code, message[:500]) from None

    def call(self, method: str, path: str, body: Any = None, query: Mapping[str, Any] | None = None,
             content_type: str = "application/json") -> Any:
        with self._request(method, path, body, query, content_type) as response:
            return json.loads(response.read() or b"null")

    def get(self, path: str, **query: Any) -> Any:
        """The object, or None when there is none (404)."""
        try:
            return self.call("GET", path, query=query or None)
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    def list(self, path: str, label_selector: str | None = None, field_selector: str | None = None
             ) -> list[dict[str, Any]]:
        query = {k: v for k, v in (("labelSelector", label_selector), ("fieldSelector", field_selector)) if v}
        return (self.call("GET", path, query=query or None) or {}).get("items") or []

    def create(self, path: str, body: dict[str, Any]) -> Any:
        return self.call("POST", path, body)

    def replace(self, path: str, body: dict[str, Any]) -> Any:
        return self.call("PUT", path, body)

    def merge_patch(self, path: str, body: dict[str, Any]) -> Any:
        return self.call("PATCH", path, body, content_type=MERGE_PATCH)

    def json_patch(self, path: str, operations: list[dict[str, Any]]) -> Any:
        """RFC 6902: a `test` operation first makes the patch conditional (409/422 when it fails)."""
        return self.call("PATCH", path, operations, content_type=JSON_PATCH)

    def delete(self, path: str, preconditions: dict[str, str] | None = None) -> bool:
        """Whether there was something to delete; `preconditions` (uid, resourceVersion): only that version of it
        (409 otherwise)."""
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": preconditions} if preconditions else None
        try:
            self.call("DELETE", path, body)
            return True
        except ApiError as err:
            if err.status == 404:
                return False
            raise

    def log(self, namespace: str, pod: str, container: str | None = None, tail_lines: int | None = None) -> str:
        query: dict[str, Any] = {}
        if container:
            query["container"] = container
        if tail_lines:
            query["tailLines"] = tail_lines
        with self._request("GET", f"/api/v1/namespaces/{namespace}/pods/{pod}/log", query=query) as response:
            return response.read().decode(errors="replace")

    def watch(self, path: str, resource_version: str, label_selector: str | None = None,
              timeout_seconds: int = 300) -> Iterator[tuple[str, dict[str, Any]]]:
        """(type, object) of each change after resource_version, until the server ends the watch
        (timeoutSeconds). An ERROR (410 Gone: the version is too old) raises ApiError: list again."""
        query: dict[str, Any] = {"watch": "true", "resourceVersion": resource_version,
                                 "timeoutSeconds": timeout_seconds, "allowWatchBookmarks": "true"}
        if label_selector:
            query["labelSelector"] = label_selector
        with self._request("GET", path, query=query, timeout=timeout_seconds + 30) as response:
            for line in response:
                if not line.strip():
                    continue
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    raise ApiError("WATCH", path, int(status.get("code") or 500), str(status.get("message")))
                yield event["type"], event["object"]
