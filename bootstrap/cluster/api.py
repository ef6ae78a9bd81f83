"""The cluster's API through the `kubernetes` client, as plain dicts (what the API server sends).

Every call goes through `ApiClient.call_api` with the raw response kept
(`_preload_content=False`), so objects are the API server's JSON, the same
in a live run, a doctor bundle and a recorded test response. Errors become
KubeError (the API said no) or ClusterUnreachable (no answer).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from bootstrap.cluster.kinds import Kind

AUTH = ["BearerToken"]  # the client fills it from the kubeconfig (token or exec plugin)
REQUEST_TIMEOUT_SECONDS = 30
SELF_SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


class ClusterUnreachable(Exception):
    """No answer from the API server (endpoint, network, credentials plugin)."""


class NotDeployed(ClusterUnreachable):
    """The stack has no cluster yet: its state has no `kubeconfig` output (never deployed, or destroyed)."""


class KubeError(Exception):
    """The API server refused: status and its message."""

    def __init__(self, status: int, reason: str, message: str):
        super().__init__(f"{status} {reason}: {message}")
        self.status, self.reason, self.message = status, reason, message

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409


def _kube_error(exc: Any) -> KubeError:
    message = exc.reason or ""
    try:
        message = json.loads(exc.body or "{}").get("message") or message
    except (ValueError, AttributeError):
        pass
    return KubeError(int(exc.status or 0), str(exc.reason or ""), str(message))


class Kube:
    """A few verbs over any Kind; `api_client` is a kubernetes.client.ApiClient."""

    def __init__(self, api_client: Any):
        self.api_client = api_client

    def _call(self, method: str, path: str, query: dict[str, Any] | None = None, body: Any = None,
              stream: bool = False, timeout: float | None = REQUEST_TIMEOUT_SECONDS) -> Any:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        try:
            response = self.api_client.call_api(
                path, method, query_params=list((query or {}).items()), header_params=headers, body=body,
                auth_settings=AUTH, _preload_content=False, _return_http_data_only=True,
                _request_timeout=None if stream else timeout)
        except ApiException as exc:
            raise _kube_error(exc) from None
        except (HTTPError, OSError) as exc:
            raise ClusterUnreachable(f"{self.api_client.configuration.host}: {exc}") from None
        if stream:
            return response
        data = response.data
        return json.loads(data) if data else {}

    # -- objects ------------------------------------------------------------------------

    def list(self, kind: Kind, namespace: str | None = None, selector: str | None = None,
             field_selector: str | None = None) -> list[dict[str, Any]]:
        query: dict[str, Any] = {}
        if selector:
            query["labelSelector"] = selector
        if field_selector:
            query["fieldSelector"] = field_selector
        items = self._call("GET", kind.path(namespace), query).get("items") or []
        for item in items:  # list items carry no kind/apiVersion; bundles and rules want them
            item.setdefault("kind", kind.kind)
            item.setdefault("apiVersion", kind.api_version)
        return items

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            return self._call("GET", kind.path(namespace, name))
        except KubeError as err:
            if err.not_found:
                return None
            raise

    def create(self, kind: Kind, manifest: dict[str, Any]) -> dict[str, Any]:
        namespace = manifest.get("metadata", {}).get("namespace")
        return self._call("POST", kind.path(namespace), body=manifest)

    def delete(self, kind: Kind, name: str, namespace: str | None = None,
               propagation: str = "Foreground") -> bool:
        """Delete, its dependents too (Foreground: the owner goes once its pods are gone); False if it was gone."""
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        try:
            self._call("DELETE", kind.path(namespace, name), body=body)
        except KubeError as err:
            if err.not_found:
                return False
            raise
        return True

    def may(self, verb: str, group: str, resource: str, namespace: str | None = None) -> bool:
        """Whether the caller may `verb` `resource` (a SelfSubjectAccessReview, authorization.k8s.io/v1: every
        authenticated user may create one, Kubernetes' system:basic-user ClusterRole); its status.allowed."""
        attributes = {"verb": verb, "group": group, "resource": resource, **({"namespace": namespace} if namespace
                                                                             else {})}
        review = self._call("POST", SELF_SUBJECT_ACCESS_REVIEWS, body={
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes}})
        return (review.get("status") or {}).get("allowed") is True

    # -- logs -----------------------------------------------------------------------------

    def pod_log(self, name: str, namespace: str, container: str | None = None,
                tail_lines: int | None = None, previous: bool = False) -> str:
        from bootstrap.cluster.kinds import POD

        query: dict[str, Any] = {}
        if container:
            query["container"] = container
        if tail_lines is not None:
            query["tailLines"] = tail_lines
        if previous:
            query["previous"] = "true"
        response = self._call("GET", POD.path(namespace, name) + "/log", query, stream=True)
        try:
            return response.data.decode("utf-8", errors="replace")
        finally:
            response.release_conn()

    def follow_log(self, name: str, namespace: str, container: str | None = None,
                   tail_lines: int | None = None) -> Iterator[str]:
        """The pod's log lines as they come (`follow=true`), until the container ends or the caller stops."""
        from bootstrap.cluster.kinds import POD

        query: dict[str, Any] = {"follow": "true"}
        if container:
            query["container"] = container
        if tail_lines is not None:
            query["tailLines"] = tail_lines
        response = self._call("GET", POD.path(namespace, name) + "/log", query, stream=True)
        pending = b""
        try:
            for chunk in response.stream(4096, decode_content=True):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    yield line.decode("utf-8", errors="replace")
            if pending:
                yield pending.decode("utf-8", errors="replace")
        finally:
            response.release_conn()
