"""A Kubernetes API server for tests: recorded objects served over HTTP on 127.0.0.1 to the real client.

The `kubernetes` client talks to it as to any API server (paths, list
envelopes, Status errors, label and field selectors, pod logs, foreground
deletion of dependents), so the CLI's requests and its parsing of the
answers are tested without a cluster. Objects are JSON as an API server
sends them (tests/data/kube/...); every request is recorded.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from bootstrap.cluster.kinds import BY_KIND, Kind

_uids = itertools.count(1)


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: Any


def _labels_match(labels: dict[str, str], selector: str) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if m := re.fullmatch(r"([^!=\s]+)\s*(==|=|!=)\s*(\S*)", term):
            key, op, value = m.groups()
            if (labels.get(key) == value) != (op != "!="):
                return False
        elif m := re.fullmatch(r"([^\s]+)\s+(in|notin)\s+\(([^)]*)\)", term):
            key, op, values = m.groups()
            if (labels.get(key) in {v.strip() for v in values.split(",")}) != (op == "in"):
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def _field(obj: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def _fields_match(obj: dict[str, Any], selector: str) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        key, op, value = re.fullmatch(r"([^!=]+)(==|=|!=)(.*)", term).groups()
        if (str(_field(obj, key) or "") == value) != (op != "!="):
            return False
    return True


class FakeKube:
    """Objects by collection path; `logs[(namespace, pod, container or None)]` is a pod's log text."""

    def __init__(self, objects: Iterable[dict[str, Any]] = (), serves: Iterable[Kind] = ()):
        # The kinds the CLI speaks (kinds.BY_KIND, as a test may have extended it) and `serves`: kinds the cluster
        # has CRDs for that the CLI only reads or deletes.
        self.serves = {k.kind: k for k in serves}
        self.collections: dict[str, dict[str, dict[str, Any]]] = {}
        self.logs: dict[tuple[str, str, str | None], str] = {}
        self.requests: list[Request] = []
        self.fail: dict[tuple[str, str], tuple[int, str]] = {}  # (method, path) -> (status, message)
        # What a controller does when an object is created (Kueue making a job's Workload, say).
        self.on_create: list = []
        # Whom the API server authorizes (a SelfSubjectAccessReview's spec.resourceAttributes -> allowed): by
        # default the kubeconfig's user is an admin, who may do anything.
        self.authorize = lambda attributes: True
        for obj in objects:
            self.add(obj)
        self._server: ThreadingHTTPServer | None = None

    # -- state --------------------------------------------------------------------------

    def served(self) -> dict[str, Kind]:
        return {**BY_KIND, **self.serves}

    def kind_of(self, obj: dict[str, Any]) -> Kind:
        return self.served()[obj["kind"]]

    def add(self, obj: dict[str, Any]) -> dict[str, Any]:
        kind = self.kind_of(obj)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", f"00000000-0000-0000-0000-{next(_uids):012d}")
        meta.setdefault("creationTimestamp", "2026-12-05T10:00:00Z")
        meta.setdefault("resourceVersion", "1")
        obj.setdefault("apiVersion", kind.api_version)
        self.collections.setdefault(kind.path(meta.get("namespace")), {})[meta["name"]] = obj
        return obj

    def objects(self, kind: str) -> list[dict[str, Any]]:
        return [o for coll in self.collections.values() for o in coll.values() if o["kind"] == kind]

    def _delete_dependents(self, uid: str) -> None:
        for coll in self.collections.values():
            for name, obj in list(coll.items()):
                if any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or []):
                    del coll[name]
                    self._delete_dependents(obj["metadata"]["uid"])

    # -- HTTP ---------------------------------------------------------------------------

    def _status(self, code: int, reason: str, message: str) -> tuple[int, dict[str, Any]]:
        return code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
                      "reason": reason, "code": code}

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        self.requests.append(Request(method, path, query, body))
        if (method, path) in self.fail:
            code, message = self.fail[(method, path)]
            return self._status(code, "Forbidden" if code == 403 else "InternalError", message)
        if path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews" and method == "POST":
            allowed = bool(self.authorize(body["spec"]["resourceAttributes"]))
            return 201, {**body, "metadata": {}, "status": {"allowed": allowed, **({"reason": "RBAC: allowed"}
                                                                                   if allowed else {})}}
        if path.endswith("/log") and method == "GET":
            parts = path.split("/")  # /api/v1/namespaces/<ns>/pods/<name>/log
            namespace, pod = parts[4], parts[6]
            if pod not in self.collections.get(f"/api/v1/namespaces/{namespace}/pods", {}):
                return self._status(404, "NotFound", f'pods "{pod}" not found')
            text = self.logs.get((namespace, pod, query.get("container")), self.logs.get((namespace, pod, None), ""))
            if "tailLines" in query:
                text = "".join(text.splitlines(keepends=True)[-int(query["tailLines"]):])
            return 200, text
        collection, _, name = path.rpartition("/")
        if path in self.collections or (method in ("GET", "POST") and collection not in self.collections
                                        and name in {k.plural for k in self.served().values()}):
            items = list(self.collections.get(path, {}).values())
            if method == "GET" and path not in self.collections:  # a namespaced kind listed across namespaces
                items = next((self.objects(k.kind) for k in self.served().values() if k.namespaced and
                              k.path() == path), items)
            if method == "POST":
                meta = body.get("metadata", {})
                if meta.get("name") in self.collections.get(path, {}):
                    return self._status(409, "AlreadyExists", f'{body["kind"]} "{meta.get("name")}" already exists')
                created = self.add(json.loads(json.dumps(body)))
                for react in self.on_create:
                    react(self, created)
                return 201, created
            if "labelSelector" in query:
                items = [o for o in items if _labels_match(o["metadata"].get("labels") or {}, query["labelSelector"])]
            if "fieldSelector" in query:
                items = [o for o in items if _fields_match(o, query["fieldSelector"])]
            kind = next((k.kind for k in self.served().values() if path.endswith("/" + k.plural)), "")
            return 200, {"kind": f"{kind}List", "apiVersion": "v1", "metadata": {"resourceVersion": "1"},
                         "items": items}
        coll = self.collections.get(collection, {})
        if name not in coll:
            return self._status(404, "NotFound", f'"{name}" not found')
        if method == "GET":
            return 200, coll[name]
        if method == "DELETE":
            wanted = (body or {}).get("preconditions") or {}  # DeleteOptions: 409 Conflict when they do not hold
            if any(coll[name]["metadata"].get(k) != v for k, v in wanted.items()):
                return self._status(409, "Conflict", f"Precondition failed: {wanted}")
            obj = coll.pop(name)
            self._delete_dependents(obj["metadata"]["uid"])
            return 200, {"kind": "Status", "apiVersion": "v1", "status": "Success"}
        return self._status(405, "MethodNotAllowed", method)

    def start(self) -> FakeKube:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self):
                url = urlparse(self.path)
                query = {k: v[-1] for k, v in parse_qs(url.query).items()}
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                code, payload = fake.handle(self.command, url.path, query, body)
                data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "text/plain" if isinstance(payload, str) else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = _serve

            def log_message(self, *args):  # quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # A short poll: shutdown() waits for the loop to see it (0.5 s by default, per server per test).
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> FakeKube:  # `with fake.start():` stops the server however the block ends
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def kubeconfig(self) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Config", "current-context": "fake",
                "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                "users": [{"name": "fake", "user": {"token": "fake-token"}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}]}

    def write_kubeconfig(self, path) -> str:
        path.write_text(json.dumps(self.kubeconfig()))
        return str(path)

    def client(self):
        from kubernetes import config

        from bootstrap.cluster.api import Kube

        return Kube(config.new_client_from_config_dict(self.kubeconfig()))
