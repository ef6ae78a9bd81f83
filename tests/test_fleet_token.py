"""The token rotator (components.core.fleet_token) against two fake API servers, a manager and a worker, that
authenticate bearer tokens as an API server does: a bound token is valid only while its anchor Secret exists.
The worker refuses every read of its gpucluster-fleet Secrets, as the token Role does (create and delete only)."""

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
from components.core.fleet_token import client, names, rotate, seed
from tests.conftest import ROOT

SECRETS = "/api/v1/namespaces/{}/secrets"
WORKER_SECRETS = SECRETS.format(names.FLEET_NAMESPACE)
TOKEN_PATH = f"/api/v1/namespaces/{names.FLEET_NAMESPACE}/serviceaccounts/{names.SERVICE_ACCOUNT}/token"


class FakeApi:
    def __init__(self, tokens: dict[str, str], unreadable: str | None = None):
        self.objects: dict[str, dict] = {}  # path -> object
        self.tokens = {t: (user, None) for t, user in tokens.items()}  # token -> (username, bound anchor uid)
        self.fail: dict[tuple[str, str], int] = {}
        self.review_user: str | None = None  # a SelfSubjectReview answering someone else
        self.max_seconds: int | None = None  # --service-account-max-token-expiration
        self.unreadable = unreadable  # a collection no GET may read (its objects nor its list)
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
        if self.unreadable and method == "GET" and path.startswith(self.unreadable):
            return 403, {"kind": "Status", "message": f"{user} cannot get or list secrets here"}
        if path == seed.SELF_SUBJECT_REVIEW:  # review_user: for the rotated tokens only
            who = self.review_user if "tok-" in (auth or "") and self.review_user else user
            return 201, {**body, "status": {"userInfo": {"username": who}}}
        if path == TOKEN_PATH and method == "POST":
            ref = body["spec"]["boundObjectRef"]
            anchor = self.objects.get(f"{WORKER_SECRETS}/{ref['name']}")
            if anchor is None or anchor["metadata"]["uid"] != ref["uid"]:
                return 404, {"kind": "Status", "message": "bound object not found"}
            token = f"tok-{ref['name']}"
            self.tokens[token] = (names.USERNAME, ref["uid"])
            life = min(body["spec"]["expirationSeconds"], self.max_seconds or 10**9)
            return 201, {**body, "status": {"token": token, "expirationTimestamp": rotate.rfc3339(
                names.anchor_time(ref["name"]) + life)}}
        if path in {SECRETS.format(ns) for ns in ("kueue-system", names.FLEET_NAMESPACE)}:
            if method == "POST":
                if f"{path}/{body['metadata']['name']}" in self.objects:
                    return 409, {"kind": "Status", "message": "already exists"}
                return 201, self.add(path, body)
            return 200, {"kind": "SecretList", "items": [o for p, o in self.objects.items()
                                                          if p.rsplit("/", 1)[0] == path]}
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
        # A short poll: shutdown() waits for the loop to see it (0.5 s by default, per server per test).
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
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
SEED_PATH = f"{SECRETS.format('kueue-system')}/{names.seed_name('east')}"
STALE = names.anchor_name(500)


def put_kubeconfig(manager: FakeApi, path: str, server: str, token: str, annotations: dict | None = None) -> None:
    text = json.dumps(kubeconfig("east", server, token))
    manager.add(SECRETS.format("kueue-system"), {"kind": "Secret", "metadata": {
        "name": path.rsplit("/", 1)[1], **({"annotations": annotations} if annotations else {})},
        "data": {"kubeconfig": base64.b64encode(text.encode()).decode()}})


@pytest.fixture
def fleet():
    """The manager's Secret and its seed hold the bootstrap token, as the first `up` writes them; an anchor
    no annotation names (a cleanup that failed) is on the worker."""
    manager = FakeApi({"admin": "admin"}).start()
    worker = FakeApi({"bootstrap": names.USERNAME}, unreadable=WORKER_SECRETS).start()
    worker.add(WORKER_SECRETS, {"kind": "Secret", "metadata": {"name": names.BOOTSTRAP_SECRET}})
    stale = worker.add(WORKER_SECRETS, {"kind": "Secret", "metadata": {"name": STALE}})
    worker.tokens["tok-stale"] = (names.USERNAME, stale["metadata"]["uid"])
    put_kubeconfig(manager, SECRET_PATH, worker.url, "bootstrap")
    put_kubeconfig(manager, SEED_PATH, worker.url, "bootstrap")
    yield manager, worker
    manager.stop()
    worker.stop()


def token_in(manager: FakeApi) -> str:
    secret = manager.objects[SECRET_PATH]
    return client.token_of(json.loads(base64.b64decode(secret["data"]["kubeconfig"])), "east")


def server_in(manager: FakeApi) -> str:
    return client.entry(json.loads(base64.b64decode(manager.objects[SECRET_PATH]["data"]["kubeconfig"])))[0]["server"]


def run(manager: FakeApi, now: float, lifetime: int = 7200) -> dict:
    with client.connect(kubeconfig("manager", manager.url, "admin")) as api:
        return rotate.rotate(api, "east", SECRET, lifetime, now, unique="")


def valid(worker: FakeApi, token: str) -> bool:
    return worker._user(f"Bearer {token}") == names.USERNAME


def anchor(seconds: int) -> str:
    return names.anchor_name(seconds)


def test_a_rotation_revokes_the_token_two_rotations_old_and_keeps_the_one_it_replaces(fleet):
    manager, worker = fleet
    first = run(manager, 1000.7)
    assert first == {"cluster": "east", "secret": f"kueue-system/{SECRET}", "ok": True, "reseeded": False,
                     "reseedReason": None, "anchor": anchor(1000), "previousAnchor": None,
                     "expiresAt": rotate.rfc3339(1000 + 7200), "deletedAnchors": [], "error": None, "warnings": []}
    assert token_in(manager) == f"tok-{anchor(1000)}"
    assert manager.objects[SECRET_PATH]["metadata"]["annotations"] == {
        names.ROTATED_AT_ANNOTATION: "1970-01-01T00:16:40Z", names.ANCHOR_ANNOTATION: anchor(1000),
        names.EXPIRES_AT_ANNOTATION: rotate.rfc3339(8200)}
    made = worker.objects[f"{WORKER_SECRETS}/{anchor(1000)}"]
    assert made["metadata"]["labels"] == {names.ANCHOR_LABEL: "true", "app.kubernetes.io/part-of": "gpucluster"}
    reports, validity = [], {}  # after each rotation, which rotated tokens still work
    for seconds in (2000, 3000, 4000):
        reports.append(run(manager, seconds))
        validity[seconds] = [valid(worker, f"tok-{anchor(t)}") for t in (1000, 2000, 3000, 4000) if t <= seconds]
    assert [(r["ok"], r["anchor"], r["previousAnchor"], r["deletedAnchors"], r["error"]) for r in reports] == [
        (True, anchor(2000), anchor(1000), [], None),
        (True, anchor(3000), anchor(2000), [anchor(1000)], None),  # token 1 revoked at rotation 3
        (True, anchor(4000), anchor(3000), [anchor(2000)], None)]  # token 2 at rotation 4
    assert validity == {2000: [True, True], 3000: [False, True, True], 4000: [False, False, True, True]}
    annotations = manager.objects[SECRET_PATH]["metadata"]["annotations"]
    assert (annotations[names.ANCHOR_ANNOTATION], annotations[names.PREVIOUS_ANCHOR_ANNOTATION]) == (
        anchor(4000), anchor(3000))
    assert token_in(manager) == f"tok-{anchor(4000)}"
    assert valid(worker, "bootstrap") and valid(worker, "tok-stale")  # never deleted: no annotation names it
    assert sorted(p.rsplit("/", 1)[1] for p in worker.objects) == sorted(
        [names.BOOTSTRAP_SECRET, STALE, anchor(3000), anchor(4000)])
    # It never read a Secret of the worker's namespace: the fake refuses those reads, as the token Role does.
    assert not [r for r in worker.requests if r[0] == "GET"]


def test_two_rotations_in_one_second_each_get_their_own_anchor(fleet):
    # The local fleet's e2e rotated twice within a second: the second anchor's name was taken (409).
    manager, worker = fleet
    with client.connect(kubeconfig("manager", manager.url, "admin")) as api:
        reports = [rotate.rotate(api, "east", SECRET, 7200, 3000 + i / 10) for i in range(3)]
    assert all(r["ok"] for r in reports), reports
    first, second, third = (r["anchor"] for r in reports)
    assert len({first, second, third}) == 3 and re.fullmatch(r"gpucluster-multikueue-3000-[0-9a-f]{6}", second)
    assert reports[1]["previousAnchor"] == first and reports[1]["deletedAnchors"] == []
    assert reports[2]["deletedAnchors"] == [first] and not valid(worker, f"tok-{first}")
    assert token_in(manager) == f"tok-{third}"


@pytest.mark.parametrize("failing", ["token", "review", "write"])
def test_a_failed_rotation_leaves_the_manager_s_secret_and_revokes_what_it_issued(fleet, failing):
    manager, worker = fleet
    run(manager, 800)
    run(manager, 900)
    before = json.loads(json.dumps(manager.objects[SECRET_PATH]))
    if failing == "token":
        worker.fail[("POST", TOKEN_PATH)] = 403
    elif failing == "review":
        worker.review_user = "system:anonymous"
    else:
        manager.fail[("PUT", SECRET_PATH)] = 409
    report = run(manager, 1000)
    assert report["ok"] is False and report["anchor"] is None and report["deletedAnchors"] == []
    assert {"token": "request a token", "review": "prove the new token",
            "write": "write the new token"}[failing] in report["error"]
    assert manager.objects[SECRET_PATH] == before
    assert f"{WORKER_SECRETS}/{anchor(1000)}" not in worker.objects  # issued, never used: revoked
    assert valid(worker, f"tok-{anchor(800)}") and valid(worker, f"tok-{anchor(900)}")  # neither touched


def test_a_failed_revocation_is_an_error_after_the_write_and_the_bootstrap_is_never_deleted(fleet):
    manager, worker = fleet
    run(manager, 1000)
    run(manager, 2000)
    worker.fail[("DELETE", f"{WORKER_SECRETS}/{anchor(1000)}")] = 500
    report = run(manager, 3000)
    assert report["ok"] is True and token_in(manager) == f"tok-{anchor(3000)}"
    assert report["error"].startswith(f"delete the anchor {anchor(1000)}") and report["deletedAnchors"] == []
    # An annotation naming the bootstrap Secret (edited by hand) never gets it deleted.
    secret = manager.objects[SECRET_PATH]
    secret["metadata"]["annotations"][names.PREVIOUS_ANCHOR_ANNOTATION] = names.BOOTSTRAP_SECRET
    assert run(manager, 4000)["deletedAnchors"] == [] and valid(worker, "bootstrap")


def test_a_re_created_worker_is_reseeded_from_the_seed(fleet):
    manager, new = fleet
    old = FakeApi({"bootstrap": names.USERNAME}).start()  # the worker before: the kubeconfig still points there
    old.stop()
    manager.objects.pop(SECRET_PATH)
    put_kubeconfig(manager, SECRET_PATH, old.url, "tok-gone", {names.ANCHOR_ANNOTATION: anchor(700)})
    report = run(manager, 1000)
    assert report["ok"] and report["reseeded"] is True and "server or CA differs" in report["reseedReason"]
    assert report["anchor"] == anchor(1000) and report["previousAnchor"] == anchor(700), report
    assert server_in(manager) == new.url and token_in(manager) == f"tok-{anchor(1000)}"
    again = run(manager, 2000)  # now the kubeconfig is the seed's worker's; the old anchor is not there (404)
    assert (again["ok"], again["reseeded"], again["deletedAnchors"], again["error"]) == (True, False, [], None)


def test_a_refused_token_is_reseeded_from_the_seed_and_its_anchor_revoked_later(fleet):
    manager, worker = fleet
    run(manager, 1000)
    run(manager, 2000)
    worker.tokens.pop(f"tok-{anchor(2000)}")  # expired: the API server refuses it (401)
    report = run(manager, 3000)
    assert (report["ok"], report["reseeded"], report["previousAnchor"], report["deletedAnchors"]) == (
        True, True, anchor(2000), [anchor(1000)])
    assert report["reseedReason"] == "the kubeconfig's token is refused (401); the seed's works"
    assert token_in(manager) == f"tok-{anchor(3000)}" and valid(worker, f"tok-{anchor(3000)}")
    assert run(manager, 4000)["deletedAnchors"] == [anchor(2000)]


def test_a_refused_token_with_a_refused_seed_is_an_error_and_touches_nothing(fleet):
    manager, worker = fleet
    worker.tokens.pop("bootstrap")  # the seed's token, and the kubeconfig's: both refused
    before = json.loads(json.dumps(manager.objects[SECRET_PATH]))
    report = run(manager, 1000)
    assert report["ok"] is False and report["reseeded"] is False
    assert report["error"] == ("check the current token (SelfSubjectReview), or the seed's: the kubeconfig's token is "
                               "refused (401), and the seed's is refused (401)")
    assert manager.objects[SECRET_PATH] == before
    assert not [r for r in worker.requests if r[0] in ("POST", "DELETE") and r[1] != seed.SELF_SUBJECT_REVIEW]


def test_without_a_seed_the_rotation_runs_and_says_it_cannot_reseed(fleet):
    manager, worker = fleet
    manager.objects.pop(SEED_PATH)  # the local fleet writes no seed
    report = run(manager, 1000)
    assert report["ok"] and report["error"] is None
    assert report["warnings"] == [f"no seed Secret kueue-system/{names.seed_name('east')}: a re-created worker or "
                                  "a refused token cannot be reseeded"]
    worker.tokens.pop(f"tok-{anchor(1000)}")
    assert "there is no seed Secret to reseed from" in run(manager, 2000)["error"]


def test_the_unreachable_and_the_moved_are_told_apart_without_a_request():
    gone = FakeApi({}).start()
    gone.stop()
    assert seed.refusal(kubeconfig("east", gone.url, "t"), "east").startswith("cannot reach the worker")
    live = kubeconfig("east", gone.url, "t")
    moved = kubeconfig("east", gone.url, "u")
    moved["clusters"][0]["cluster"]["certificate-authority-data"] = "Q0E="  # same server, a new CA
    assert seed.choose(live, moved, "east") == (moved, "the seed's server or CA differs from the kubeconfig's "
                                                       "(the worker was re-created or moved)")


@pytest.mark.parametrize(("cap", "error"), [(3000, True), (5000, False)])
def test_a_capped_token_life_is_an_error_under_half_and_the_token_is_written(fleet, cap, error, tmp_path, capsys):
    manager, worker = fleet
    worker.max_seconds = cap
    report = run(manager, 1000)
    assert report["ok"] is True and token_in(manager) == f"tok-{anchor(1000)}"  # newer than the old one
    assert report["expiresAt"] == rotate.rfc3339(1000 + cap)
    if error:
        assert report["error"].startswith("the API server capped the token's life") and report["warnings"] == []
        assert "it is written all the same" in report["error"] and rotate.rfc3339(1000 + 3600) in report["error"]
    else:
        assert report["error"] is None and "capped" in report["warnings"][0]
    path = tmp_path / "manager.kubeconfig"
    path.write_text(json.dumps(kubeconfig("manager", manager.url, "admin")))
    assert cli.main(["--kubeconfig", str(path), "--secret", SECRET, "--lifetime-seconds", "7200"]) == int(error)


def test_a_missing_secret_or_a_short_lifetime_is_reported_not_raised(fleet):
    manager, _ = fleet
    with client.connect(kubeconfig("manager", manager.url, "admin")) as api:
        missing = rotate.rotate(api, "west", names.secret_name("west"), 7200, 1000)
        short = rotate.rotate(api, "east", SECRET, 599, 1000)
    assert missing["ok"] is False and "read the manager's Secret" in missing["error"]
    assert short["ok"] is False and "600" in short["error"]


def test_the_cli_rotates_every_fleet_secret_of_the_manager_not_the_seeds(fleet, tmp_path, capsys):
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
    assert names.seed_name("east") == "gpucluster-fleet-east-seed" and names.SEED_SUFFIX == "-seed"
    assert names.PREVIOUS_ANCHOR_ANNOTATION == "gpucluster.io/token-previous-anchor"
    assert rotate.unix("1970-01-01T00:16:40Z") == 1000 and rotate.unix("soon") is None
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
