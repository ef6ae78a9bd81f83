"""The token rotator (components.core.fleet_token) against two fake API servers, a manager and a worker, that
authenticate bearer tokens as an API server does: a bound token is valid only while its anchor Secret exists."""

from __future__ import annotations

import ast
import base64
import json
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from components.core.fleet import rotator
from components.core.fleet_token import __main__ as cli
from components.core.fleet_token import client, names, rotate
from tests.conftest import ROOT

SECRETS = "/api/v1/namespaces/{}/secrets"
WORKER_SECRETS = SECRETS.format(names.FLEET_NAMESPACE)


class FakeApi:
    def __init__(self, tokens: dict[str, str]):
        self.objects: dict[str, dict] = {}  # path -> object
        self.tokens = {t: (user, None) for t, user in tokens.items()}  # token -> (username, bound anchor uid)
        self.fail: dict[tuple[str, str], int] = {}
        self.review_user: str | None = None  # a SelfSubjectReview answering someone else
        self.requests: list[tuple[str, str]] = []
        self._uid = 0
        self._server: ThreadingHTTPServer | None = None

    def add(self, collection: str, obj: dict) -> dict:
        self._uid += 1
        obj["metadata"].update(uid=f"uid-{self._uid}", resourceVersion="1")
        self.objects[f"{collection}/{obj['metadata']['name']}"] = obj
        return obj

    def _user(self, auth: str | None) -> str | None:
        user, bound = self.tokens.get((auth or "").removeprefix("Bearer "), (None, None))
        if bound is not None and not any(o["metadata"]["uid"] == bound for o in self.objects.values()):
            return None  # its anchor is gone: revoked
        return user

    def handle(self, method: str, path: str, query: dict, auth: str | None, body):
        self.requests.append((method, path))
        user = self._user(auth)
        if user is None:
            return 401, {"kind": "Status", "message": "Unauthorized"}
        if (method, path) in self.fail:
            return self.fail[(method, path)], {"kind": "Status", "message": "refused by the test"}
        if path == "/apis/authentication.k8s.io/v1/selfsubjectreviews":
            return 201, {**body, "status": {"userInfo": {"username": self.review_user or user}}}
        if path.endswith("/token") and method == "POST":
            ref = body["spec"]["boundObjectRef"]
            anchor = self.objects.get(f"{WORKER_SECRETS}/{ref['name']}")
            if anchor is None or anchor["metadata"]["uid"] != ref["uid"]:
                return 404, {"kind": "Status", "message": "bound object not found"}
            token = f"tok-{ref['name']}"
            self.tokens[token] = (names.USERNAME, ref["uid"])
            return 201, {**body, "status": {"token": token, "expirationTimestamp": rotate.rfc3339(
                names.anchor_time(ref["name"]) + body["spec"]["expirationSeconds"])}}
        if path in {SECRETS.format(ns) for ns in ("kueue-system", names.FLEET_NAMESPACE)}:
            if method == "POST":
                if f"{path}/{body['metadata']['name']}" in self.objects:
                    return 409, {"kind": "Status", "message": "already exists"}
                return 201, self.add(path, body)
            items = [o for p, o in self.objects.items() if p.rsplit("/", 1)[0] == path]
            if "labelSelector" in query:
                key, value = query["labelSelector"].split("=")
                items = [o for o in items if (o["metadata"].get("labels") or {}).get(key) == value]
            return 200, {"kind": "SecretList", "items": items}
        if path not in self.objects:
            return 404, {"kind": "Status", "message": "not found"}
        if method == "GET":
            return 200, self.objects[path]
        if method == "DELETE":
            del self.objects[path]
            return 200, {"kind": "Status", "status": "Success"}
        if method == "PUT":
            if body["metadata"]["resourceVersion"] != self.objects[path]["metadata"]["resourceVersion"]:
                return 409, {"kind": "Status", "message": "conflict"}
            body["metadata"]["resourceVersion"] = str(int(body["metadata"]["resourceVersion"]) + 1)
            self.objects[path] = body
            return 200, body
        return 405, {"kind": "Status", "message": method}

    def start(self) -> FakeApi:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self):
                url = urlparse(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                code, payload = fake.handle(self.command, url.path, {k: v[-1] for k, v in parse_qs(url.query).items()},
                                            self.headers.get("Authorization"), body)
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def kubeconfig(name: str, server: str, token: str) -> dict:
    return {"apiVersion": "v1", "kind": "Config", "current-context": name,
            "clusters": [{"name": name, "cluster": {"server": server}}],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}]}


SECRET = names.secret_name("east")
SECRET_PATH = f"{SECRETS.format('kueue-system')}/{SECRET}"


@pytest.fixture
def fleet():
    manager = FakeApi({"admin": "admin"}).start()
    worker = FakeApi({"bootstrap": names.USERNAME}).start()
    worker.add(WORKER_SECRETS, {"kind": "Secret", "metadata": {"name": names.BOOTSTRAP_SECRET}})
    stale = worker.add(WORKER_SECRETS, {"kind": "Secret", "metadata": {
        "name": names.anchor_name(500), "labels": {names.ANCHOR_LABEL: "true"}}})
    worker.tokens["tok-stale"] = (names.USERNAME, stale["metadata"]["uid"])
    text = json.dumps(kubeconfig("east", worker.url, "bootstrap"))
    manager.add(SECRETS.format("kueue-system"), {"kind": "Secret", "metadata": {"name": SECRET}, "data": {
        "kubeconfig": base64.b64encode(text.encode()).decode()}})
    yield manager, worker
    manager.stop()
    worker.stop()


def token_in(manager: FakeApi) -> str:
    secret = manager.objects[SECRET_PATH]
    return client.token_of(json.loads(base64.b64decode(secret["data"]["kubeconfig"])), "east")


def run(manager: FakeApi, now: float, lifetime: int = 7200) -> dict:
    with client.connect(kubeconfig("manager", manager.url, "admin")) as api:
        return rotate.rotate(api, "east", SECRET, lifetime, now, unique="")


def test_a_rotation_binds_a_new_token_to_a_new_anchor_writes_it_and_revokes_the_older(fleet):
    manager, worker = fleet
    report = run(manager, 1000.7)
    assert report == {"cluster": "east", "secret": f"kueue-system/{SECRET}", "ok": True,
                      "anchor": "gpucluster-multikueue-1000", "expiresAt": rotate.rfc3339(1000 + 7200),
                      "deletedAnchors": ["gpucluster-multikueue-500"], "error": None, "warnings": []}
    assert token_in(manager) == "tok-gpucluster-multikueue-1000"
    annotations = manager.objects[SECRET_PATH]["metadata"]["annotations"]
    assert annotations == {names.ROTATED_AT_ANNOTATION: "1970-01-01T00:16:40Z",
                           names.ANCHOR_ANNOTATION: "gpucluster-multikueue-1000",
                           names.EXPIRES_AT_ANNOTATION: rotate.rfc3339(8200)}
    anchors = sorted(p.rsplit("/", 1)[1] for p in worker.objects)
    assert anchors == ["gpucluster-multikueue-1000", names.BOOTSTRAP_SECRET]  # the bootstrap token kept
    assert worker._user("Bearer tok-stale") is None and worker._user("Bearer bootstrap") == names.USERNAME
    anchor = worker.objects[f"{WORKER_SECRETS}/gpucluster-multikueue-1000"]
    assert anchor["metadata"]["labels"] == {names.ANCHOR_LABEL: "true", "app.kubernetes.io/part-of": "gpucluster"}
    # The next rotation uses the rotated token and revokes it.
    again = run(manager, 2000)
    assert again["ok"] and again["deletedAnchors"] == ["gpucluster-multikueue-1000"]
    assert worker._user("Bearer tok-gpucluster-multikueue-1000") is None
    assert token_in(manager) == "tok-gpucluster-multikueue-2000"


def test_two_rotations_in_one_second_each_get_their_own_anchor(fleet):
    # The local fleet's e2e rotated twice within a second: the second anchor's name was taken (409).
    manager, worker = fleet
    with client.connect(kubeconfig("manager", manager.url, "admin")) as api:
        first = rotate.rotate(api, "east", SECRET, 7200, 3000.1)
        second = rotate.rotate(api, "east", SECRET, 7200, 3000.9)
    assert first["ok"] and second["ok"], (first, second)
    assert first["anchor"] != second["anchor"] and second["deletedAnchors"] == [first["anchor"]]
    assert re.fullmatch(r"gpucluster-multikueue-3000-[0-9a-f]{6}", second["anchor"]), second
    assert worker._user(f"Bearer tok-{first['anchor']}") is None
    assert token_in(manager) == f"tok-{second['anchor']}"


@pytest.mark.parametrize("failing", ["token", "review", "write"])
def test_a_failed_rotation_leaves_the_manager_s_secret_and_revokes_what_it_issued(fleet, failing):
    manager, worker = fleet
    before = json.loads(json.dumps(manager.objects[SECRET_PATH]))
    if failing == "token":
        worker.fail[("POST", f"/api/v1/namespaces/{names.FLEET_NAMESPACE}/serviceaccounts/"
                             f"{names.SERVICE_ACCOUNT}/token")] = 403
    elif failing == "review":
        worker.review_user = "system:anonymous"
    else:
        manager.fail[("PUT", SECRET_PATH)] = 409
    report = run(manager, 1000)
    assert report["ok"] is False and report["anchor"] is None and report["deletedAnchors"] == []
    assert {"token": "request a token", "review": "prove the new token",
            "write": "write the new token"}[failing] in report["error"]
    assert manager.objects[SECRET_PATH] == before
    assert f"{WORKER_SECRETS}/gpucluster-multikueue-1000" not in worker.objects  # issued, never used: revoked
    assert f"{WORKER_SECRETS}/gpucluster-multikueue-500" in worker.objects  # the older one is not touched


def test_a_missing_secret_or_a_short_lifetime_is_reported_not_raised(fleet):
    manager, _ = fleet
    with client.connect(kubeconfig("manager", manager.url, "admin")) as api:
        missing = rotate.rotate(api, "west", names.secret_name("west"), 7200, 1000)
        short = rotate.rotate(api, "east", SECRET, 599, 1000)
    assert missing["ok"] is False and "read the manager's Secret" in missing["error"]
    assert short["ok"] is False and "600" in short["error"]


def test_the_cli_rotates_every_fleet_secret_of_the_manager(fleet, tmp_path, capsys):
    manager, _ = fleet
    path = tmp_path / "manager.kubeconfig"
    path.write_text(json.dumps(kubeconfig("manager", manager.url, "admin")))
    code = cli.main(["--kubeconfig", str(path), "--namespace", "kueue-system", "--lifetime-seconds", "3600"])
    [line] = capsys.readouterr().out.splitlines()
    assert code == 0 and json.loads(line)["ok"] is True and json.loads(line)["cluster"] == "east"
    manager.objects.pop(SECRET_PATH)
    assert cli.main(["--kubeconfig", str(path), "--secret", SECRET, "--lifetime-seconds", "3600"]) == 1


def test_the_kubeconfig_helpers():
    config = kubeconfig("east", "https://x", "old")
    assert client.token_of(client.with_token(config, "new", "east"), "east") == "new"
    assert client.token_of(config, "east") == "old"  # a copy
    assert names.cluster_of("gpucluster-fleet-fleet-east") == "fleet-east"
    assert names.anchor_time("gpucluster-multikueue-17") == 17 and names.anchor_time(names.BOOTSTRAP_SECRET) is None
    assert names.anchor_time("gpucluster-multikueue-17-a1b2c3") == 17
    with pytest.raises(client.KubeconfigError), client.connect({**config, "clusters": [{"name": "east", "cluster": {
            "server": "https://x", "insecure-skip-tls-verify": True}}]}):
        pass


def test_the_package_imports_only_the_standard_library_and_itself():
    wrong = []
    for path in sorted((ROOT / "components" / "core" / "fleet_token").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                mods = [(a.name, 0) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = [(node.module or "", node.level)]
            else:
                continue
            for module, level in mods:
                root = module.split(".")[0]
                if not level and root not in sys.stdlib_module_names and root not in ("__future__", "yaml"):
                    wrong.append(f"{path.name}: {module}")
    assert wrong == []


def test_the_shipped_package_runs_as_the_cronjob_runs_it(tmp_path):
    """The ConfigMap's files under gpucluster_fleet_token/, python -S (no site-packages: no PyYAML)."""
    package = tmp_path / names.PACKAGE
    package.mkdir()
    for key, text in rotator.code_files().items():
        (package / key).write_text(text)
    done = subprocess.run([sys.executable, "-S", "-m", names.PACKAGE, "--kubeconfig", "in-cluster",
                           "--lifetime-seconds", "1200"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(tmp_path)})
    # Not in a pod: it says so, after importing every module (goodput's kubeapi from its own package).
    assert done.returncode == 1 and "KUBERNETES_SERVICE_HOST" in done.stderr, done.stderr
