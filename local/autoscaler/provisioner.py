"""A stand-in for cluster-autoscaler's ProvisioningRequest processing on the local control plane (never on EKS).

cluster-autoscaler cannot be built here (the Go module proxy refuses
k8s.io/autoscaler/cluster-autoscaler), so this process plays its
ProvisioningRequest part for the classes Kueue uses, with CA 1.35's rules
(local/autoscaler/rules.py), against KWOK nodes shaped as EKS registers them
(local/nodes.py). `local up` starts it (`python -m local.autoscaler
<state>/provisioner.json`, logging to <state>/logs/provisioner.log),
`local down` stops it; with no ProvisioningRequest and no node of its own it
lists ProvisioningRequests and nodes once a second and writes nothing.

Its contract with tests (all in kube-system):
- ConfigMap gpucluster-local-capacity, data {<pool>: "<nodes EC2 will give>"}:
  a pool's node group may hold at most min(that, maxNodes) nodes (absent:
  maxNodes), as the kwok cloud provider's max size limits CA's node groups;
- ConfigMap gpucluster-local-provisioner, data in seconds (absent: CA's):
  bookingSeconds (600), retryInitialSeconds (60), retryMaxSeconds (600),
  idleSeconds (the pool's idleMinutes), nodeDelaySeconds (0: nodes are
  created when Provisioned=True is written; CA on AWS writes it when the
  Auto Scaling group's desired capacity is set, minutes before they register);
- nodes it creates carry PROVISIONED_FOR_ANNOTATION (<namespace>/<request>);
  it deletes those (only those) once they have had no pod and no booking for
  idleSeconds. Tests make room for a scale-up by deleting nodes of the pool
  (`kubectl delete node -l eks.amazonaws.com/nodegroup=<cluster>-<pool>`).
"""

from __future__ import annotations

import datetime
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import requests
import yaml

from local import build, controlplane, nodes, processes, versions
from local.autoscaler import rules as ca

CAPACITY_CONFIGMAP = "gpucluster-local-capacity"
SETTINGS_CONFIGMAP = "gpucluster-local-provisioner"
NAMESPACE = "kube-system"
PROVISIONED_FOR_ANNOTATION = "gpucluster.io/local-provisioned-for"
PR_PATH = "/apis/autoscaling.x-k8s.io/v1/provisioningrequests"
CRD_NAME = "provisioningrequests.autoscaling.x-k8s.io"
CRD_FILE = "config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml"
SETTINGS = {"bookingSeconds": ca.BOOKING_SECONDS, "retryInitialSeconds": ca.RETRY_INITIAL_SECONDS,
            "retryMaxSeconds": ca.RETRY_MAX_SECONDS, "nodeDelaySeconds": 0}
PROJECT_DIR = Path(__file__).resolve().parents[2]
LOOP_SECONDS = 1.0  # CA's --scan-interval is 10 s; a tenth of it keeps the e2e tier quick


def capacity_configmap(capacities: dict[str, int]) -> dict[str, Any]:
    """The ConfigMap that tells the stand-in how many nodes EC2 will give each pool."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CAPACITY_CONFIGMAP, "namespace": NAMESPACE},
            "data": {pool: str(n) for pool, n in capacities.items()}}


def settings_configmap(**seconds: float) -> dict[str, Any]:
    unknown = set(seconds) - {*SETTINGS, "idleSeconds"}
    if unknown:
        raise ValueError(f"unknown provisioner settings: {sorted(unknown)}")
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": SETTINGS_CONFIGMAP, "namespace": NAMESPACE},
            "data": {k: str(v) for k, v in seconds.items()}}


class Api:
    """The few REST calls the stand-in makes, as the admin (system:masters) client certificate."""

    def __init__(self, state: Path):
        pki = state / "pki"
        self.session = requests.Session()
        self.session.trust_env = False  # $REQUESTS_CA_BUNDLE would win over our CA; no proxy for 127.0.0.1 either
        self.session.cert = (str(pki / "admin.crt"), str(pki / "admin.key"))
        self.session.verify = str(pki / "ca.crt")
        self.base = controlplane.server_url()

    def call(self, method: str, path: str, body: Any = None, patch: bool = False) -> Any:
        headers = {"Content-Type": "application/merge-patch+json"} if patch else {}
        response = self.session.request(method, self.base + path, json=body, headers=headers, timeout=30)
        if response.status_code == 404 and method in ("GET", "DELETE"):
            return None
        response.raise_for_status()
        return response.json()

    def items(self, path: str) -> list[dict[str, Any]]:
        return (self.call("GET", path) or {}).get("items", [])


def _log(message: str) -> None:
    print(f"{datetime.datetime.now(datetime.UTC):%Y-%m-%dT%H:%M:%S}Z {message}", flush=True)


def _name(pr: dict[str, Any]) -> str:
    return f"{pr['metadata']['namespace']}/{pr['metadata']['name']}"


def _pr_path(pr: dict[str, Any]) -> str:
    meta = pr["metadata"]
    return f"/apis/autoscaling.x-k8s.io/v1/namespaces/{meta['namespace']}/provisioningrequests/{meta['name']}"


def _conditions(pr: dict[str, Any]) -> list[dict[str, Any]]:
    return (pr.get("status") or {}).get("conditions") or []


def _ready(node: dict[str, Any]) -> bool:
    return not node["metadata"].get("deletionTimestamp") and not node["spec"].get("unschedulable")


class Provisioner:
    def __init__(self, state: Path, spec: dict[str, Any], api: Api | None = None, cfg: Any = None):
        if cfg is None:
            from bootstrap import stackfile

            cfg, _, _ = stackfile.load_stack(spec["stack"], PROJECT_DIR, standins=True)
        self.state, self.spec, self.api, self.cfg = state, spec, api or Api(state), cfg
        self.groups = nodes.node_groups(self.cfg)
        self.pools = {p.name: p for p in (*self.cfg.gpu_pools, *self.cfg.cpu_pools)}
        self.backoff: dict[str, float] = {}  # request uid -> seconds before its next attempt (injector.go)
        self.pending: list[tuple[float, dict[str, Any]]] = []  # (when, node) still to be created
        self.busy_at: dict[str, float] = {}  # our node -> when it last had a pod or a booking

    # -- what the cluster holds ------------------------------------------------------------------------------------

    def settings(self) -> tuple[dict[str, float], dict[str, int]]:
        got = self.api.call("GET", f"/api/v1/namespaces/{NAMESPACE}/configmaps/{SETTINGS_CONFIGMAP}") or {}
        settings = {**SETTINGS, **{k: float(v) for k, v in (got.get("data") or {}).items()}}
        cap = self.api.call("GET", f"/api/v1/namespaces/{NAMESPACE}/configmaps/{CAPACITY_CONFIGMAP}") or {}
        return settings, {k: int(v) for k, v in (cap.get("data") or {}).items()}

    def _group_of(self, node: dict[str, Any]) -> str | None:
        value = node["metadata"].get("labels", {}).get(nodes.NODEGROUP_LABEL, "")
        prefix = f"{self.spec['clusterName']}-"
        return value[len(prefix):] if value.startswith(prefix) else None

    def _new_node(self, group_index: int, index: int) -> dict[str, Any]:
        return nodes.node(self.cfg, self.groups[group_index], group_index, index, self.spec["zone"],
                          self.spec["zoneId"], self.spec["clusterName"], self.spec["kubeletPort"])

    def model(self, node_list: list[dict[str, Any]], pods: list[dict[str, Any]], capacity: dict[str, int]
              ) -> tuple[list[ca.NodeRoom], list[ca.Group]]:
        """Every schedulable node's room after its bound pods, and each node group's shape, size and limit."""
        rooms = {}
        for node in [*node_list, *(n for _, n in self.pending)]:
            if _ready(node):
                rooms[node["metadata"]["name"]] = ca.NodeRoom(
                    node["metadata"]["name"], node["metadata"].get("labels", {}), node["spec"].get("taints", []),
                    ca.quantities(node["status"].get("allocatable")))
        for pod in pods:
            room = rooms.get(pod["spec"].get("nodeName", ""))
            if room is not None and pod["status"].get("phase") not in ("Succeeded", "Failed"):
                ca.take(room.free, ca.pod_requests(pod["spec"]))
        groups = []
        for i, group in enumerate(self.groups):
            size = sum(1 for n in [*node_list, *(n for _, n in self.pending)]
                       if self._group_of(n) == group.name and not n["metadata"].get("deletionTimestamp"))
            shape = self._new_node(i, 0)
            groups.append(ca.Group(group.name, shape["metadata"]["labels"], shape["spec"]["taints"],
                                   ca.quantities(shape["status"]["allocatable"]), size,
                                   min(capacity.get(group.name, group.max_nodes), group.max_nodes)))
        return sorted(rooms.values(), key=lambda r: r.name), groups

    # -- one pass ----------------------------------------------------------------------------------------------------

    def pass_once(self, now: float) -> None:
        prs = [p for p in self.api.items(PR_PATH)
               if p["spec"].get("provisioningClassName") in (ca.BEST_EFFORT_ATOMIC, ca.CHECK_CAPACITY)]
        prs.sort(key=lambda p: (p["metadata"]["creationTimestamp"], _name(p)))
        node_list = self.api.items("/api/v1/nodes")
        if not prs and not self.pending and not any(
                PROVISIONED_FOR_ANNOTATION in n["metadata"].get("annotations", {}) for n in node_list):
            return  # nothing of ours: the other tests' clusters see one list of each per second, no write
        settings, capacity = self.settings()
        when = datetime.datetime.fromtimestamp(now, datetime.UTC)
        for i, pr in enumerate(prs):  # processor.go refresh
            expired = ca.expiry(_conditions(pr), pr["metadata"]["creationTimestamp"], when, settings["bookingSeconds"])
            if expired:
                prs[i] = self.write(pr, expired[0], "True", expired[1], when)
        if self.create_due(now):
            node_list = self.api.items("/api/v1/nodes")
        pods = self.api.items("/api/v1/pods")
        templates = {(t["metadata"]["namespace"], t["metadata"]["name"]): t
                     for t in self.api.items("/api/v1/podtemplates")}
        rooms, groups = self.model(node_list, pods, capacity)
        consumed: dict[str, int] = {}
        for pod in pods:
            claim = pod["metadata"].get("annotations", {}).get(ca.CONSUME_ANNOTATION)
            if claim and pod["spec"].get("nodeName") and pod["status"].get("phase") not in ("Succeeded", "Failed"):
                key = f"{pod['metadata']['namespace']}/{claim}"
                consumed[key] = consumed.get(key, 0) + 1
        before = {r.name: dict(r.free) for r in rooms}
        for pr in prs:  # processor.go bookCapacity: a booked request's pods hold their room (those not yet bound)
            if ca.booked(_conditions(pr)):
                ca.place(ca.pods_of(self.pod_sets(pr, templates) or [])[consumed.get(_name(pr), 0):], rooms)
        held = {r.name for r in rooms if r.free != before[r.name]}  # booked pods keep these from scale-down
        for pr in prs:  # injector.go GetPodsFromNextRequest: one request per loop
            backoff = self.backoff.get(pr["metadata"]["uid"], settings["retryInitialSeconds"])
            if ca.due_for_attempt(_conditions(pr), when, backoff):
                self.attempt(pr, templates, node_list, rooms, groups, settings, now)
                break
        self.scale_down(node_list, pods, held, settings, now)

    def pod_sets(self, pr: dict[str, Any], templates: dict) -> list[tuple[dict[str, Any], int]] | None:
        namespace = pr["metadata"]["namespace"]
        found = [templates.get((namespace, ps["podTemplateRef"]["name"])) for ps in pr["spec"]["podSets"]]
        if any(t is None for t in found):
            return None
        return [(t["template"].get("spec", {}), ps["count"]) for t, ps in zip(found, pr["spec"]["podSets"])]

    def attempt(self, pr: dict[str, Any], templates: dict, node_list: list[dict[str, Any]], rooms: list[ca.NodeRoom],
                groups: list[ca.Group], settings: dict[str, float], now: float) -> None:
        when = datetime.datetime.fromtimestamp(now, datetime.UTC)
        uid = pr["metadata"]["uid"]
        if ca.find(_conditions(pr), ca.PROVISIONED) is not None:  # a retry: the next one waits twice as long
            self.backoff[uid] = ca.next_backoff(self.backoff.get(uid), settings["retryInitialSeconds"],
                                                settings["retryMaxSeconds"])
        pod_sets = self.pod_sets(pr, templates)
        if pod_sets is None:
            message = ca.missing_templates([ps["podTemplateRef"]["name"] for ps in pr["spec"]["podSets"]],
                                           [name for ns, name in templates if ns == pr["metadata"]["namespace"]])
            _log(f"{_name(pr)}: {message}")
            self.write(pr, ca.FAILED, "True", (ca.FAILED_TO_CREATE_PODS, message or ""), when)
            return
        pr = self.write(pr, ca.ACCEPTED, "True", ca.ACCEPTED_CONDITION, when)
        cls = pr["spec"]["provisioningClassName"]
        decision = ca.decide(cls, ca.pods_of(pod_sets), rooms, groups)
        _log(f"{_name(pr)} ({cls}, {sum(c for _, c in pod_sets)} pods): {decision.why}")
        if decision.scale_up:
            self.scale_up(pr, decision, node_list, settings, now)
        kind, status, reason = ca.outcome(cls, decision, pr["spec"].get("parameters") or {})
        self.write(pr, kind, status, reason, when)

    def write(self, pr: dict[str, Any], kind: str, status: str, reason: tuple[str, str],
              when: datetime.datetime) -> dict[str, Any]:
        conditions = ca.with_condition(_conditions(pr), kind, status, reason, when,
                                       pr["metadata"].get("generation", 1))
        _log(f"{_name(pr)}: {kind}={status} {reason[0]}: {reason[1]}")
        return self.api.call("PATCH", _pr_path(pr) + "/status", {"status": {"conditions": conditions}}, patch=True)

    # -- nodes ---------------------------------------------------------------------------------------------------------

    def scale_up(self, pr: dict[str, Any], decision: ca.Decision, node_list: list[dict[str, Any]],
                 settings: dict[str, float], now: float) -> None:
        """All the nodes at once, each at the lowest index of its group no node holds (names stay unique)."""
        group_index = next(i for i, g in enumerate(self.groups) if g.name == decision.group)
        taken = {nodes.node_index(n)[1] for n in [*node_list, *(n for _, n in self.pending)]
                 if self._group_of(n) == decision.group}
        free = (i for i in range(10_000) if i not in taken)
        for index in [next(free) for _ in range(decision.new_nodes)]:
            node = self._new_node(group_index, index)
            node["metadata"]["annotations"][PROVISIONED_FOR_ANNOTATION] = _name(pr)
            self.pending.append((now + settings["nodeDelaySeconds"], node))
        self.create_due(now)

    def create_due(self, now: float) -> bool:
        """Create the nodes whose time has come; whether there were any."""
        due = [n for when, n in self.pending if when <= now]
        self.pending = [(w, n) for w, n in self.pending if w > now]
        for node in due:
            self.api.call("POST", "/api/v1/nodes", node)
            labels = node["metadata"]["labels"]
            layers = " ".join(f"{k.rsplit('-', 1)[1]}={v}" for k, v in labels.items()
                              if k.startswith("topology.k8s.aws/network-node-layer-"))
            _log(f"created node {node['metadata']['name']} ({self._group_of(node)}; layers {layers or 'none'}) "
                 f"for {node['metadata']['annotations'][PROVISIONED_FOR_ANNOTATION]}")
        return bool(due)

    def scale_down(self, node_list: list[dict[str, Any]], pods: list[dict[str, Any]], held: set[str],
                   settings: dict[str, float], now: float) -> None:
        """Our nodes with no pod and no live booking for the pool's idleMinutes (or idleSeconds) go."""
        # A DaemonSet's pods run on every node and go with it: they keep no node (CA's scale-down drains around them).
        running = {p["spec"].get("nodeName") for p in pods if p["status"].get("phase") not in ("Succeeded", "Failed")
                   and not any(o.get("kind") == "DaemonSet" for o in p["metadata"].get("ownerReferences", []))}
        for node in node_list:
            name, owner = node["metadata"]["name"], node["metadata"].get("annotations", {}).get(PROVISIONED_FOR_ANNOTATION)
            if owner is None or node["metadata"].get("deletionTimestamp"):
                continue
            if name in running or name in held or name not in self.busy_at:
                self.busy_at[name] = now
                continue
            idle = settings.get("idleSeconds") or self.pools[self._group_of(node) or ""].idle_minutes * 60
            if now - self.busy_at[name] >= idle:
                self.api.call("DELETE", f"/api/v1/nodes/{name}")
                self.busy_at.pop(name)
                _log(f"deleted node {name}: no pod and no booking for {idle:.0f} s (created for {owner})")


def crd() -> dict[str, Any]:
    """The ProvisioningRequest CRD from the API module Kueue builds against (identical in schema to CA 1.35.2's)."""
    api = versions.PROVISIONING_REQUEST_API
    module = build.module_dir(versions.GoProgram(api.name, api.module, "", api.version, ""))
    return yaml.safe_load((module / CRD_FILE).read_text())


def spec_path(state: Path) -> Path:
    return state / "provisioner.json"


def start(state: Path, stack: str, zone: str, zone_id: str, cluster_name: str, kubelet_port: int) -> None:
    """Start the stand-in as a child process of the state folder and wait for its first pass."""
    spec_path(state).write_text(json.dumps({"stack": stack, "zone": zone,
                                            "zoneId": zone_id, "clusterName": cluster_name,
                                            "kubeletPort": kubelet_port}, indent=1))
    restart(state)


def restart(state: Path) -> None:
    ready = state / "provisioner.ready"
    ready.unlink(missing_ok=True)
    processes.start(state, "provisioner", [sys.executable, "-m", "local.autoscaler", str(spec_path(state))],
                    cwd=PROJECT_DIR)
    processes.wait_until(ready.exists, "the ProvisioningRequest stand-in's first pass", 60, state, "provisioner")


def main(argv: list[str]) -> int:
    path = Path(argv[0])
    state = path.parent
    provisioner = Provisioner(state, json.loads(path.read_text()))
    _log(f"watching ProvisioningRequests ({ca.BEST_EFFORT_ATOMIC}, {ca.CHECK_CAPACITY}) for stack "
         f"{provisioner.spec['stack']}")
    while True:
        try:
            provisioner.pass_once(time.time())
            (state / "provisioner.ready").touch()
        except requests.RequestException as err:  # the API server starting, a CRD being established
            _log(f"pass failed, retrying: {err}")
        except Exception:  # noqa: BLE001 - a stand-in that dies leaves every later test waiting; say why, go on
            _log(f"pass failed, retrying:\n{traceback.format_exc()}")
        time.sleep(LOOP_SECONDS)

