"""The goodput controller's passes (components/core/goodput/controller.py, records.py, metrics_text.py, kubeapi.py)
against a fake API server over HTTP (tests/kube_fake.py, with merge patches and conditional writes) and a fake
Prometheus (tests/http_fake.py): what it reads, writes and serves; and the shipped package run as the pod runs it,
on the standard library alone."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from components.core.goodput import accounting, controller, kubeapi, metrics_text, names, records
from components.core.goodput import precheck_verdict as pv
from components.core.observability import goodput_agent as agent
from components.core.observability import goodput_alerts
from components.core.placement import prestep
from tests import http_fake
from tests.conftest import stack_config
from tests.kube_fake import FakeKube, Request

NOW = 1_796_033_400.0  # 2026-11-30T10:10:00Z: the job was created at 10:00, its pods started at 10:02
BAD, GOOD, SPARE = "ip-10-0-65-10.ec2.internal", "ip-10-0-65-11.ec2.internal", "ip-10-0-65-12.ec2.internal"
CONFIG_REF = f"{agent.NAMESPACE}/{agent.CONFIG_MAP}"


class Kube(FakeKube):
    """FakeKube and what the controller also does: JSON merge patches (RFC 7386) and PUT, both conditional on
    metadata.resourceVersion when given (409 otherwise, as the API server answers), names from generateName, and
    watches that end at once."""

    def handle(self, method, path, query, body):
        if query.get("watch") == "true":
            return 200, ""
        collection, _, name = path.rpartition("/")
        if method == "POST" and not body["metadata"].get("name"):
            body["metadata"]["name"] = body["metadata"]["generateName"] + str(len(self.requests))
        if method not in ("PATCH", "PUT"):
            return super().handle(method, path, query, body)
        self.requests.append(Request(method, path, query, body))
        stored = self.collections.get(collection, {}).get(name)
        if stored is None:
            return self._status(404, "NotFound", f'"{name}" not found')
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != stored["metadata"]["resourceVersion"]:
            return self._status(409, "Conflict", "the object has been modified")
        updated = merge(stored, body) if method == "PATCH" else body
        updated["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 1)
        self.collections[collection][name] = updated
        return 200, updated


def merge(target, patch):
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge(out.get(key), value)
    return out


def node(name: str) -> dict:
    return {"kind": "Node", "metadata": {"name": name, "labels": {"gpucluster.io/pool": "h100"},
                                         "creationTimestamp": "2026-11-30T10:00:00Z"},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]}}


def job_pod(name: str, on: str, index: int, message: str | None = None) -> dict:
    labels = {"gpucluster.io/job": "llm", "jobset.sigs.k8s.io/jobset-name": "llm",
              "jobset.sigs.k8s.io/restart-attempt": "0", "batch.kubernetes.io/job-completion-index": str(index)}
    status = {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True",
                                                  "lastTransitionTime": "2026-11-30T10:01:00Z"}],
              "containerStatuses": [{"name": "node", "state": {"running": {"startedAt": "2026-11-30T10:02:00Z"}}}]}
    if message is not None:
        status["phase"] = "Failed"
        status["containerStatuses"][0]["state"] = {"terminated": {
            "exitCode": names.PRE_STEP_EXIT_CODE, "message": message, "startedAt": "2026-11-30T10:02:00Z",
            "finishedAt": "2026-11-30T10:02:05Z"}}
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "training", "labels": labels,
                                        "creationTimestamp": "2026-11-30T10:01:00Z"},
            "spec": {"nodeName": on, "containers": [{"name": "node", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]},
            "status": status}


def trainjob() -> dict:
    return {"kind": "TrainJob", "metadata": {"name": "llm", "namespace": "training",
                                             "labels": {"gpucluster.io/pool": "h100"},
                                             "creationTimestamp": "2026-11-30T10:00:00Z"},
            "spec": {"trainer": {"numNodes": 2, "numProcPerNode": 8,
                                 "resourcesPerNode": {"limits": {"nvidia.com/gpu": "8"}}}}}


def config_map(mode: str = "on") -> dict:
    obj = agent.config_map(stack_config("prod"))
    data = json.loads(obj["data"][controller.CONFIG_KEY])
    data["pools"]["h100"] = mode
    return {**obj, "data": {controller.CONFIG_KEY: json.dumps(data)}}


def check_failed_on(failed: str, passed: str) -> str:
    return pv.message({failed: pv.verdict("fail", "efa-missing", "0 of 32 EFA devices"),
                       passed: pv.verdict("pass", "ok", "32 EFA devices, 8 GPUs")}, None, 487.0, 3.1)


@pytest.fixture
def kube():
    fake = Kube([node(BAD), node(GOOD), node(SPARE), trainjob(), config_map(),
                 job_pod("llm-node-0-0-a", GOOD, 0, check_failed_on(BAD, GOOD)), job_pod("llm-node-0-1-b", BAD, 1)])
    fake.logs[("training", "llm-node-0-0-a", None)] = "\n".join(
        f"[rank0]: gpucluster-step step={i} time={1796033000 + i}.000" for i in range(1, 6))
    fake.start()
    yield fake
    fake.stop()


NO_PROMETHEUS = "http://127.0.0.1:9"  # refused at once (the config's in-cluster name does not resolve here)


def make(kube: Kube, prometheus: str = NO_PROMETHEUS) -> controller.Controller:
    return controller.Controller(kubeapi.Client(kube.url), CONFIG_REF, prometheus, watch=False)


def events(kube: Kube) -> list[dict]:
    return kube.objects("Event")


def test_a_failed_pre_step_check_quarantines_the_node_restarts_the_job_and_records_it_once(kube):
    ctl = make(kube)
    ctl.pass_once(NOW)
    bad = kube.collections["/api/v1/nodes"][BAD]
    assert bad["spec"]["unschedulable"] is True
    assert bad["spec"]["taints"][-1] == {"key": "gpucluster.io/quarantine", "value": "pre-step-check",
                                         "effect": "NoSchedule", "timeAdded": "2026-11-30T10:10:00Z"}
    evidence = json.loads(bad["metadata"]["annotations"][names.EVIDENCE_ANNOTATION])
    assert evidence["evidence"]["verdict"]["reason"] == "efa-missing"
    assert "llm-node-0-1-b" not in kube.collections["/api/v1/namespaces/training/pods"]  # its pod on BAD
    assert "llm-node-0-0-a" in kube.collections["/api/v1/namespaces/training/pods"]
    assert kube.collections["/api/v1/nodes"][GOOD]["spec"].get("unschedulable") is None
    job = kube.collections["/apis/trainer.kubeflow.org/v1alpha1/namespaces/training/trainjobs"]["llm"]
    (record,) = json.loads(job["metadata"]["annotations"][names.REMEDIATIONS_ANNOTATION])
    assert (record["node"], record["reason"], record["action"], record["mode"]) == (BAD, "pre-step-check",
                                                                                    "quarantined", "on")
    (event,) = events(kube)
    assert (event["reason"], event["involvedObject"]["kind"], event["metadata"]["namespace"]) == (
        "NodeQuarantined", "TrainJob", "training")
    # The next passes see the same failed pod and the same verdict: nothing more is done.
    ctl.pass_once(NOW + 10)
    ctl.pass_once(NOW + 20)
    assert len(events(kube)) == 1
    assert len(json.loads(kube.collections["/apis/trainer.kubeflow.org/v1alpha1/namespaces/training/trainjobs"][
        "llm"]["metadata"]["annotations"][names.REMEDIATIONS_ANNOTATION])) == 1
    text = ctl.metrics.text()
    assert 'gpucluster_goodput_remediations_total{reason="pre-step-check",action="quarantined"} 1.0' in text


def test_the_watch_wakes_the_controller_for_a_pod_the_check_failed_once(kube):
    ctl = make(kube)
    failed = kube.collections["/api/v1/namespaces/training/pods"]["llm-node-0-0-a"]
    healthy = kube.collections["/api/v1/namespaces/training/pods"]["llm-node-0-1-b"]
    watch = controller.PodWatch(ctl.api, "training", ctl.ended, ctl.lock, ctl.wake)
    watch.keep(healthy)
    assert not ctl.wake.is_set() and ctl.ended == {}
    watch.keep(failed)
    assert ctl.wake.is_set() and list(ctl.ended) == [failed["metadata"]["uid"]]
    ctl.wake.clear()
    watch.keep(failed)  # the same pod again (MODIFIED, DELETED): already due
    assert not ctl.wake.is_set()


def test_dry_run_from_the_config_map_records_the_alert_and_leaves_the_node_schedulable(kube):
    kube.collections["/api/v1/namespaces/monitoring/configmaps"][agent.CONFIG_MAP] = config_map("dry-run")
    kube.collections["/api/v1/namespaces/training/pods"]["llm-node-0-0-a"] = job_pod("llm-node-0-0-a", GOOD, 0)
    alert = {"labels": {"alertname": goodput_alerts.STRAGGLER, "node": BAD, "namespace": "training",
                        "gpucluster_job": "llm", "signal": "gpu-utilisation"}, "state": "firing",
             "activeAt": "2026-11-30T17:20:00Z", "value": "35", "annotations": {"summary": "slow"}}
    prometheus = http_fake.serve(lambda path, q: (200, {"status": "success", "data": {"alerts": [alert]}})
                                 if path == "/api/v1/alerts" else (404, {}))
    try:
        make(kube, prometheus.url).pass_once(NOW)
    finally:
        http_fake.stop(prometheus)
    bad = kube.collections["/api/v1/nodes"][BAD]
    assert "unschedulable" not in bad["spec"] and len(bad["spec"]["taints"]) == 1
    assert "llm-node-0-1-b" in kube.collections["/api/v1/namespaces/training/pods"]
    job = kube.collections["/apis/trainer.kubeflow.org/v1alpha1/namespaces/training/trainjobs"]["llm"]
    (record,) = json.loads(job["metadata"]["annotations"][names.REMEDIATIONS_ANNOTATION])
    assert (record["action"], record["mode"], record["evidence"]["alert"]) == ("would-quarantine", "dry-run",
                                                                             "JobStraggler")
    assert [e["reason"] for e in events(kube)] == ["NodeWouldBeQuarantined"]


def test_a_node_changed_between_the_list_and_the_patch_is_patched_as_it_is_then(kube):
    ctl = make(kube)
    real = ctl.api.list

    def stale(where, *args):  # the node list is read, then something else updates the node
        found = real(where, *args)
        if where == "/api/v1/nodes":
            stored = kube.collections["/api/v1/nodes"][BAD]
            stored["metadata"]["labels"]["touched"] = "yes"
            stored["metadata"]["resourceVersion"] = "5"
        return found
    ctl.api.list = stale
    ctl.pass_once(NOW)
    bad = kube.collections["/api/v1/nodes"][BAD]
    assert bad["spec"]["unschedulable"] is True and bad["metadata"]["labels"]["touched"] == "yes"
    patches = [q for q in kube.requests if q.method == "PATCH" and q.path == f"/api/v1/nodes/{BAD}"]
    assert [p.body["metadata"]["resourceVersion"] for p in patches] == ["1", "5"]


def test_the_record_is_kept_in_a_config_map_and_written_again_only_when_it_changes(kube):
    kube.collections["/api/v1/namespaces/training/pods"]["llm-node-0-0-a"] = job_pod("llm-node-0-0-a", GOOD, 0)
    ctl = make(kube)
    ctl.pass_once(NOW)
    where = "/api/v1/namespaces/training/configmaps"
    stored = kube.collections[where][names.RECORD_PREFIX + "llm"]
    record = json.loads(stored["data"][names.RECORD_KEY])
    assert (record["kind"], record["gpus"], record["gpu_hour_usd"]) == ("TrainJob", 16, round(
        stack_config("prod").price("p5.48xlarge") / 8, 6))
    assert max(e["step"] for e in record["events"] if e["type"] == "step") == 5  # rank 0's newest line
    assert stored["metadata"]["labels"] == {"app.kubernetes.io/part-of": "gpucluster", "gpucluster.io/job": "llm"}
    version = stored["metadata"]["resourceVersion"]
    ctl.pass_once(NOW + 10)  # nothing happened: no write
    assert kube.collections[where][names.RECORD_PREFIX + "llm"]["metadata"]["resourceVersion"] == version
    kube.logs[("training", "llm-node-0-0-a", None)] += "\n[rank0]: gpucluster-step step=6 time=1796033006.000"
    ctl.pass_once(NOW + 20)
    stored = kube.collections[where][names.RECORD_PREFIX + "llm"]
    assert stored["metadata"]["resourceVersion"] != version
    breakdown = accounting.breakdown(json.loads(stored["data"][names.RECORD_KEY]), NOW + 20)
    text = ctl.metrics.text()
    for phase in names.PHASES:
        assert (f'gpucluster_job_gpu_seconds{{namespace="training",gpucluster_job="llm",phase="{phase}"}} '
                f'{float(breakdown["gpu_seconds"][phase])!r}') in text
    assert f'gpucluster_job_goodput_ratio{{namespace="training",gpucluster_job="llm"}} {breakdown["goodput"]!r}' \
        in text


def test_a_record_never_takes_the_name_or_place_of_another_config_map(kube, capsys):
    # A job named "code": its record is gpucluster-goodput-job-code, never the check's gpucluster-goodput-code.
    assert names.RECORD_PREFIX + "code" != prestep.CODE_CONFIG_MAP
    # A ConfigMap already at a record's name that is not that job's record is left alone, and says so.
    where = "/api/v1/namespaces/training/configmaps"
    kube.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": names.RECORD_PREFIX + "llm",
                                                                    "namespace": "training"}, "data": {"mine": "1"}})
    ctl = make(kube)
    ctl.pass_once(NOW)
    assert kube.collections[where][names.RECORD_PREFIX + "llm"]["data"] == {"mine": "1"}
    assert not [q for q in kube.requests if q.method == "PUT" and q.path.startswith(where)]
    said = capsys.readouterr().out
    assert ("ConfigMap training/gpucluster-goodput-job-llm is not a record of job llm (no gpucluster.io/job=llm "
            "label): left alone, the job is not accounted") in said and "Traceback" not in said


def record_map(job: str, gone_since: str | None = None, name: str | None = None, label: str | None = None,
               kind: str = "TrainJob") -> dict:
    meta = {"name": name or names.RECORD_PREFIX + job, "namespace": "training",
            "labels": {"app.kubernetes.io/part-of": "gpucluster", "gpucluster.io/job": label or job}}
    if gone_since is not None:
        meta["annotations"] = {names.RECORD_GONE_ANNOTATION: gone_since}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
            "data": {names.RECORD_KEY: json.dumps({"kind": kind, "name": job})}}


def test_a_record_is_deleted_once_its_job_has_been_gone_for_the_retention_and_no_other(kube, capsys):
    where = "/api/v1/namespaces/training/configmaps"
    days = 90
    long_ago = "2026-01-01T00:00:00Z"
    kube.fail[("GET", "/apis/kubeflow.org/v2beta1/namespaces/training/mpijobs")] = (404, "the server could not find "
                                                                                    "the requested resource")
    kube.add(record_map("gone-long", "2026-09-01T10:10:00Z"))  # gone 90 days at NOW
    kube.add(record_map("gone-recently", "2026-09-01T10:10:01Z"))  # 1 s short of the 90 days
    kube.add(record_map("gone-now"))  # not marked yet: gone from this sweep on
    kube.add(record_map("llm", long_ago))  # marked, but the job is there: this pass rewrites it
    kube.add(record_map("other", long_ago, name="gpucluster-goodput-job-x"))  # name and label disagree
    kube.add(record_map("mpi", long_ago, kind="MPIJob"))  # its kind's list failed: nothing known of its job
    unlabelled = record_map("bare", long_ago)
    del unlabelled["metadata"]["labels"]["app.kubernetes.io/part-of"]  # not written by the controller
    kube.add(unlabelled)
    kube.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "user-settings", "namespace": "training"}})
    ctl = make(kube)
    assert ctl.config().record_retention_days == days  # prod's default, as rendered
    ctl.pass_once(NOW)
    stored = kube.collections[where]
    assert set(stored) == {names.RECORD_PREFIX + x for x in ("gone-recently", "gone-now", "llm", "x", "mpi", "bare")
                           } | {"user-settings"}
    gone = names.RECORD_GONE_ANNOTATION
    assert stored[names.RECORD_PREFIX + "gone-now"]["metadata"]["annotations"] == {gone: "2026-11-30T10:10:00Z"}
    assert gone not in (stored[names.RECORD_PREFIX + "llm"]["metadata"].get("annotations") or {})
    for untouched in ("x", "mpi", "bare"):
        assert stored[names.RECORD_PREFIX + untouched]["metadata"]["annotations"] == {gone: long_ago}
    said = capsys.readouterr().out
    for line in (f"record training/{names.RECORD_PREFIX}gone-long: deleted, its job gone for {days} days",
                 f"record training/{names.RECORD_PREFIX}gone-now: its job is gone; the record is deleted in {days} "
                 "days unless the job comes back",
                 "kubeflow.org/v2beta1 mpijobs: not served (404); their jobs are not accounted"):
        assert line in said
    lists = [q for q in kube.requests if q.method == "GET" and q.path == where]
    assert [q.query.get("labelSelector") for q in lists] == ["gpucluster.io/job,app.kubernetes.io/part-of=gpucluster"]
    ctl.pass_once(NOW + 10)  # within the hour: not looked at again
    assert len([q for q in kube.requests if q.method == "GET" and q.path == where]) == 1
    # A record marked while its job was there (a list that missed it) and not rewritten since: the mark goes.
    kube.collections[where][names.RECORD_PREFIX + "llm"]["metadata"]["annotations"] = {gone: "2026-11-30T10:10:00Z"}
    ctl.pass_once(NOW + records.SWEEP_SECONDS)  # an hour on: gone-recently is past its 90 days, gone-now is not
    assert set(kube.collections[where]) == {names.RECORD_PREFIX + x for x in ("gone-now", "llm", "x", "mpi", "bare")
                                            } | {"user-settings"}
    assert not kube.collections[where][names.RECORD_PREFIX + "llm"]["metadata"].get("annotations")
    assert f"record training/{names.RECORD_PREFIX}llm: its job is back; the record is kept" in capsys.readouterr().out


def test_the_sweep_writes_only_the_version_it_listed_and_goes_on_past_a_namespace_it_cannot_list(kube):
    where = "/api/v1/namespaces/training/configmaps"
    kube.add(record_map("gone-long", "2026-01-01T00:00:00Z"))
    kube.add(record_map("gone-now"))
    kube.fail[("GET", "/api/v1/namespaces/vision/configmaps")] = (403, "configmaps is forbidden")

    class Racing(kubeapi.Client):
        """Each record is rewritten (the accounting's write) between the sweep's list and its writes."""

        def list(self, path, label_selector=None, field_selector=None):
            items = super().list(path, label_selector, field_selector)
            for config_map in kube.collections.get(path, {}).values():
                config_map["metadata"]["resourceVersion"] = str(int(config_map["metadata"]["resourceVersion"]) + 1)
            return items

    said = records.Books(Racing(kube.url), accounting).sweep(("vision", "training"), set(), {"TrainJob"}, NOW, 90)
    # Nothing said of training's: the record rewritten since the list is left to the next sweep (409), quietly.
    assert said == ["records in vision: not swept: GET /api/v1/namespaces/vision/configmaps: 403 configmaps is "
                    "forbidden"]
    assert set(kube.collections[where]) >= {names.RECORD_PREFIX + "gone-long", names.RECORD_PREFIX + "gone-now"}
    assert "annotations" not in kube.collections[where][names.RECORD_PREFIX + "gone-now"]["metadata"]
    deletes = [q for q in kube.requests if q.method == "DELETE"]
    assert [q.body["preconditions"]["uid"] for q in deletes] == [
        kube.collections[where][names.RECORD_PREFIX + "gone-long"]["metadata"]["uid"]]


def test_the_sweep_counts_from_when_the_job_went_and_forgets_it_when_the_job_is_back():
    now = 100 * 86400.0  # day 100 of 1970
    maps = [record_map("a", "1970-01-11T00:00:00Z"), record_map("b"), record_map("c", "1970-03-27T00:00:00Z"),
            record_map("d", "1970-01-11T00:00:00Z"), record_map("e", "yesterday"), record_map("f")]

    def plan(live, days, kinds=frozenset({"TrainJob"})):
        return {what: [c["metadata"]["name"] for c in found]
                for what, found in records.sweep_plan(maps, live, set(kinds), now, days).items()}
    assert plan({"d", "f"}, 90) == {
        "mark": [names.RECORD_PREFIX + "b", names.RECORD_PREFIX + "e"],  # e's mark unreadable: gone from now
        "unmark": [names.RECORD_PREFIX + "d"], "delete": [names.RECORD_PREFIX + "a"]}  # a: day 10, 90 days ago
    assert plan(set(), 90.5)["delete"] == []
    assert plan(set(), 15)["delete"] == [names.RECORD_PREFIX + x for x in "acd"]
    assert plan(set(), 15, {"MPIJob"}) == {"mark": [], "unmark": [], "delete": []}  # TrainJobs not listed
    maps[0]["data"][names.RECORD_KEY] = "not JSON"  # a record of no kind that can be read: left alone
    assert plan(set(), 15)["delete"] == [names.RECORD_PREFIX + x for x in "cd"]


def test_the_config_names_every_mode_and_the_prometheus_override_wins():
    cfg = controller.Config.parse(json.dumps({"pools": {"h100": "on"}, "prometheusUrl": "http://kps:9090"}), "http://x")
    assert (cfg.prometheus_url, cfg.interval_seconds, cfg.log_tail_lines) == ("http://x", 10.0, 200)
    with pytest.raises(ValueError, match="modes must be one of off, dry-run, on; got {'h100': 'yes'}"):
        controller.Config.parse(json.dumps({"pools": {"h100": "yes"}}))


def test_rank_zero_is_the_launcher_node_0_or_the_chief():
    def p(**labels):
        return {"metadata": {"name": "/".join(labels.values()), "labels": labels}}
    pods = [p(**{"training.kubeflow.org/job-role": "launcher"}), p(**{"training.kubeflow.org/job-role": "worker"})]
    assert [(x["metadata"]["name"], c) for x, c in records.rank_zero("MPIJob", pods)] == [("launcher", "launcher")]
    indexed = [p(**{"batch.kubernetes.io/job-completion-index": "0", "jobset.sigs.k8s.io/replicatedjob-name": r})
               for r in ("chief", "ps", "worker")]
    assert [x["metadata"]["name"] for x, _ in records.rank_zero("JobSet", indexed)] == ["0/chief"]
    assert len(records.rank_zero("TrainJob", indexed)) == 3 and records.rank_zero("TrainJob", pods) == []


# -- /metrics and /healthz ---------------------------------------------------------------------------------


def test_metrics_and_health_over_http():
    metrics = metrics_text.Metrics()
    server = metrics_text.serve(metrics, "127.0.0.1", 0)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(urllib.error.HTTPError) as unhealthy:
            urllib.request.urlopen(f"{base}/healthz", timeout=5)
        assert unhealthy.value.code == 503  # no pass yet
        metrics.jobs([("team-a", 'odd"job', {"gpu_seconds": {"training": 80}, "goodput": 0.5})])
        metrics.remediated("xid", "quarantined")
        metrics.passed(time.time(), 10)
        assert urllib.request.urlopen(f"{base}/healthz", timeout=5).status == 200
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as response:
            assert response.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
            text = response.read().decode()
    finally:
        server.shutdown()
    assert '# TYPE gpucluster_job_gpu_seconds gauge' in text
    assert 'gpucluster_job_gpu_seconds{namespace="team-a",gpucluster_job="odd\\"job",phase="training"} 80.0' in text
    assert 'gpucluster_job_gpu_seconds{namespace="team-a",gpucluster_job="odd\\"job",phase="queued"} 0.0' in text
    assert 'gpucluster_job_goodput_ratio{namespace="team-a",gpucluster_job="odd\\"job"} 0.5' in text
    assert 'gpucluster_goodput_remediations_total{reason="xid",action="quarantined"} 1.0' in text
    assert not metrics.healthy(time.time() + 61)  # three 10 s passes, and at least a minute


# -- the client ----------------------------------------------------------------------------------------------


class Recorded(http.server.BaseHTTPRequestHandler):
    """Answers from `answers` by path; keeps each request's Authorization header."""

    answers: dict = {}
    seen: list = []

    def do_GET(self):
        Recorded.seen.append(self.headers.get("Authorization"))
        code, body = Recorded.answers.get(self.path.split("?")[0], (404, {"kind": "Status", "message": "no"}))
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def recorded():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorded)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()  # shutdown() waits a poll
    Recorded.seen.clear()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_the_client_reads_the_token_for_every_request_and_turns_refusals_into_api_errors(tmp_path, recorded):
    token = tmp_path / "token"
    token.write_text("first\n")
    Recorded.answers = {"/api/v1/nodes": (200, {"items": [{"metadata": {"name": "n1"}}]}),
                        "/api/v1/nodes/gone": (404, {"kind": "Status", "message": 'nodes "gone" not found'}),
                        "/api/v1/secrets": (403, {"kind": "Status", "message": "forbidden: no"})}
    client = kubeapi.Client(recorded, token_file=str(token))
    assert client.list("/api/v1/nodes") == [{"metadata": {"name": "n1"}}]
    token.write_text("rotated")  # the kubelet rotates a projected token in place
    assert client.get("/api/v1/nodes/gone") is None
    with pytest.raises(kubeapi.ApiError) as refused:
        client.get("/api/v1/secrets")
    assert refused.value.status == 403 and str(refused.value) == "GET /api/v1/secrets: 403 forbidden: no"
    assert Recorded.seen == ["Bearer first", "Bearer rotated", "Bearer rotated"]


def test_a_watch_yields_each_change_and_raises_on_an_error_event(recorded):
    pod = {"metadata": {"name": "p", "resourceVersion": "9"}}
    lines = [{"type": "ADDED", "object": pod}, {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "10"}}},
             {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old resource version"}}]
    Recorded.answers = {"/api/v1/namespaces/training/pods": (200, "\n".join(json.dumps(x) for x in lines) + "\n")}
    seen = []
    with pytest.raises(kubeapi.ApiError) as gone:
        for kind, obj in kubeapi.Client(recorded).watch("/api/v1/namespaces/training/pods", "8", "gpucluster.io/job"):
            seen.append((kind, obj["metadata"]["resourceVersion"]))
    assert seen == [("ADDED", "9"), ("BOOKMARK", "10")] and gone.value.status == 410


def test_in_a_pod_the_client_uses_the_service_account_and_the_service_address(tmp_path):
    from local import pki

    sa = tmp_path / "sa"
    keys = pki.generate(tmp_path / "pki")
    sa.mkdir()
    (sa / "ca.crt").write_text(keys.pem("ca.crt"))
    (sa / "token").write_text("t")
    found = kubeapi.Client.from_env({"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}, str(sa))
    assert (found.server, found.token_file) == ("https://10.96.0.1:443", f"{sa}/token")
    six = kubeapi.Client.from_env({"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}, str(sa))
    assert six.server == "https://[fd00::1]:443"
    explicit = kubeapi.Client.from_env({kubeapi.SERVER_ENV: "http://127.0.0.1:1/", "KUBERNETES_SERVICE_HOST": "x"})
    assert (explicit.server, explicit.token_file) == ("http://127.0.0.1:1", None)
    with pytest.raises(RuntimeError, match="not in a pod"):
        kubeapi.Client.from_env({}, str(sa))


# -- the package as it ships ---------------------------------------------------------------------------------


def shipped(tmp_path: Path) -> Path:
    """The code ConfigMap's files laid out as the pod mounts them (what local/goodput does too)."""
    package = tmp_path / prestep.PACKAGE
    package.mkdir()
    for key, text in agent.code_config_map()["data"].items():
        (package / key).write_text(text)
    return tmp_path


def test_the_shipped_package_runs_on_the_standard_library_alone_and_does_a_pass(tmp_path, kube):
    """python -S: no site-packages at all (the stock image has none of ours); one real pass over HTTP."""
    root = shipped(tmp_path)
    help_text = subprocess.run([sys.executable, "-S", "-m", "gpucluster_goodput.controller", "--help"], cwd=root,
                               capture_output=True, text=True, timeout=60)
    assert help_text.returncode == 0, help_text.stderr
    assert "--config" in help_text.stdout and "--token-file" in help_text.stdout
    (root / "token").write_text("fake-token")
    process = subprocess.Popen([sys.executable, "-S", "-m", "gpucluster_goodput.controller", "--config", CONFIG_REF,
                                "--bind", "127.0.0.1", "--port", "0", "--server", kube.url, "--token-file",
                                str(root / "token")], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not events(kube):
            time.sleep(0.2)
    finally:
        process.terminate()
        out, _ = process.communicate(timeout=30)
    assert [e["reason"] for e in events(kube)] == ["NodeQuarantined"], out
    assert f"TrainJob training/llm: quarantined node {BAD}" in out
    assert kube.collections["/api/v1/nodes"][BAD]["spec"]["unschedulable"] is True
