"""The goodput controller: every pass (intervalSeconds, 10 by default) it reads its config, acts on blamed nodes
(remediation.py) and keeps each job's GPU-second record (accounting.py); /metrics and /healthz over HTTP.

    python3 -m gpucluster_goodput.controller [--config NAMESPACE/NAME] [--port 8080] [--bind 0.0.0.0]

Standard library only (it runs on a stock Python image with this package mounted from a ConfigMap). The config
is read from its ConfigMap every pass (a change applies at the next pass, no restart): JSON under CONFIG_KEY,
rendered by components/core/observability/goodput_agent.py:
    {"pools": {<pool>: "off"|"dry-run"|"on"}, "namespaces": [...], "prometheusUrl": "http://...",
     "alerts": {<alert name>: <reason>}, "intervalSeconds": 10, "logTailLines": 200,
     "poolTerms": {<pool>: {"nodeHourUsd", "gpusPerNode", "billsWhileQueued", "idleMinutes", "maxNodes"}},
     "recordRetentionDays": 90}
GPUCLUSTER_GOODPUT_PROMETHEUS_URL overrides prometheusUrl (the local control plane has no Prometheus).

A pod watch per training namespace keeps every pod that ended with the pre-step check's exit code until a pass
has read it: a JobSet's restart deletes the failed pods within seconds, sooner than the next pass.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import traceback
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from . import kubeapi, metrics_text, names, records, remediation
from .kubeapi import path
from .remediation import Job

CONFIG_KEY = "config.json"
CONFIG_ENV = "GPUCLUSTER_GOODPUT_CONFIG"  # <namespace>/<name> of the config ConfigMap
PROMETHEUS_ENV = "GPUCLUSTER_GOODPUT_PROMETHEUS_URL"
PORT = 8080
PROMETHEUS_TIMEOUT_SECONDS = 10
# The job kinds, their API (the versions the pinned operators serve: bootstrap/cluster/kinds.py) and their
# order of precedence: a TrainJob's JobSet has the TrainJob's name, and the TrainJob is the user's object.
JOB_APIS = {"TrainJob": ("trainer.kubeflow.org/v1alpha1", "trainjobs"),
            "MPIJob": ("kubeflow.org/v2beta1", "mpijobs"),
            "JobSet": ("jobset.x-k8s.io/v1alpha2", "jobsets")}


def log(text: str) -> None:
    print(f"{remediation.rfc3339(time.time())} {text}", flush=True)


@dataclass(frozen=True)
class Config:
    pools: dict[str, str]
    namespaces: tuple[str, ...]
    prometheus_url: str
    alerts: dict[str, str]
    interval_seconds: float = 10.0
    log_tail_lines: int = 200
    # pool -> {"nodeHourUsd", "gpusPerNode", "billsWhileQueued"}: a job's cost per GPU-hour is its node's price
    # over the GPUs it uses on the node (a job pays for whole nodes), as `bootstrap report` computes it.
    terms: dict[str, dict[str, Any]] = field(default_factory=dict)
    record_retention_days: float = 90.0

    @classmethod
    def parse(cls, text: str, prometheus_override: str | None = None) -> Config:
        raw = json.loads(text)
        pools = {str(k): str(v) for k, v in (raw.get("pools") or {}).items()}
        bad = {k: v for k, v in pools.items() if v not in names.MODES}
        if bad:
            raise ValueError(f"pools: modes must be one of {', '.join(names.MODES)}; got {bad}")
        return cls(pools, tuple(raw.get("namespaces") or ()), prometheus_override or raw.get("prometheusUrl") or "",
                   {str(k): str(v) for k, v in (raw.get("alerts") or {}).items()},
                   float(raw.get("intervalSeconds") or 10), int(raw.get("logTailLines") or 200),
                   dict(raw.get("poolTerms") or {}), float(raw.get("recordRetentionDays") or 90))

    def pool_event(self, job: dict[str, Any], gpus_per_node: int) -> dict[str, Any] | None:
        """accounting.merge's {"type": "pool"} event for the job's pool (its gpucluster.io/pool label)."""
        terms = self.terms.get((job["metadata"].get("labels") or {}).get(remediation.POOL_LABEL) or "")
        per_node = gpus_per_node or int((terms or {}).get("gpusPerNode") or 0)
        if not terms or not per_node or terms.get("nodeHourUsd") is None:
            return None
        return {"type": "pool", "gpu_hour_usd": round(float(terms["nodeHourUsd"]) / per_node, 6),
                "bills_while_queued": bool(terms.get("billsWhileQueued"))}


def owner_trainjob(obj: dict[str, Any]) -> bool:
    return any(o.get("kind") == "TrainJob" for o in obj["metadata"].get("ownerReferences") or [])


class PodWatch(threading.Thread):
    """Keeps the job pods of one namespace that ended with the pre-step check's exit code (last version seen)."""

    def __init__(self, api: kubeapi.Client, namespace: str, found: dict[str, dict[str, Any]], lock: threading.Lock,
                 wake: threading.Event | None = None):
        super().__init__(name=f"watch-{namespace}", daemon=True)
        self.api, self.namespace, self.found, self.lock = api, namespace, found, lock
        self.wake = wake or threading.Event()

    def keep(self, pod: dict[str, Any]) -> None:
        """Keep a pod the check failed and wake the controller at once: the job's gang restarts within a second
        or two, and each restart the bad node is not yet tainted for lands on it again and spends one of the
        job's restarts."""
        if remediation.pre_step_signals(pod):
            with self.lock:
                new = pod["metadata"]["uid"] not in self.found
                self.found[pod["metadata"]["uid"]] = pod
            if new:
                self.wake.set()

    def run(self) -> None:
        pods = path("v1", "pods", self.namespace)
        while True:
            try:
                listed = self.api.call("GET", pods, query={"labelSelector": remediation.JOB_LABEL})
                for pod in listed.get("items") or []:
                    self.keep(pod)
                version = listed["metadata"]["resourceVersion"]
                while True:
                    began = time.monotonic()
                    for kind, pod in self.api.watch(pods, version, remediation.JOB_LABEL):
                        version = pod.get("metadata", {}).get("resourceVersion") or version
                        if kind in ("ADDED", "MODIFIED", "DELETED"):
                            self.keep(pod)
                    if time.monotonic() - began < 1:  # a proxy that ends watches at once: no busy loop
                        time.sleep(1)
            except Exception as err:  # noqa: BLE001 - 410 Gone, a dropped connection: list again shortly
                log(f"pod watch in {self.namespace}: {err}; listing again")
                time.sleep(5)


class Controller:
    def __init__(self, api: kubeapi.Client, config_ref: str, prometheus_override: str | None = None,
                 accounting: Any = None, watch: bool = True):
        self.api, self.prometheus_override, self.watch = api, prometheus_override, watch
        self.config_namespace, _, self.config_name = config_ref.partition("/")
        if accounting is None:
            from . import accounting
        self.books = records.Books(api, accounting)
        self.lock = threading.Lock()
        self.ended: dict[str, dict[str, Any]] = {}  # pod uid -> a pod that ended with the check's exit code
        self.wake = threading.Event()  # a pass is due now (a pod the check failed, or SIGTERM)
        self.watches: dict[str, PodWatch] = {}
        self.metrics = metrics_text.Metrics()
        self.said: set[str] = set()  # log lines said once (a skip repeats every pass)
        self.prometheus_error: str | None = None
        self.swept_at = -float("inf")
        self.listed_kinds: set[str] = set()

    def say_once(self, text: str) -> None:
        if text not in self.said:
            self.said.add(text)
            log(text)

    def config(self) -> Config:
        found = self.api.get(path("v1", "configmaps", self.config_namespace, self.config_name))
        if found is None:
            raise RuntimeError(f"ConfigMap {self.config_namespace}/{self.config_name} not found")
        return Config.parse((found.get("data") or {})[CONFIG_KEY], self.prometheus_override)

    def alerts(self, cfg: Config) -> list[remediation.Signal]:
        if not cfg.prometheus_url or not cfg.alerts:
            return []
        url = cfg.prometheus_url.rstrip("/") + "/api/v1/alerts"
        try:
            with urllib.request.urlopen(url, timeout=PROMETHEUS_TIMEOUT_SECONDS) as response:
                answer = json.loads(response.read())
        except Exception as err:  # noqa: BLE001 - Prometheus away: the pre-step check and accounting go on
            if str(err) != self.prometheus_error:
                log(f"alerts: GET {url} failed ({err}); acting on the pre-step check only until it answers")
            self.prometheus_error = str(err)
            return []
        if self.prometheus_error is not None:
            log(f"alerts: GET {url} answers again")
        self.prometheus_error = None
        return remediation.alert_signals(answer, cfg.alerts)

    def jobs(self, namespaces: tuple[str, ...]) -> dict[tuple[str, str], Job]:
        """The jobs of every kind; self.listed_kinds: the kinds whose API answered (a 404 says nothing of jobs)."""
        found: dict[tuple[str, str], Job] = {}
        self.listed_kinds = set(JOB_APIS)
        for kind, (api_version, plural) in JOB_APIS.items():
            for namespace in namespaces:
                try:
                    items = self.api.list(path(api_version, plural, namespace))
                except kubeapi.ApiError as err:
                    if err.status != 404:  # 404: the operator's CRD is not installed (or not at this version)
                        raise
                    self.say_once(f"{api_version} {plural}: not served (404); their jobs are not accounted")
                    self.listed_kinds.discard(kind)
                    items = []
                for obj in items:
                    key = (namespace, obj["metadata"]["name"])
                    if key not in found and not (kind == "JobSet" and owner_trainjob(obj)):
                        found[key] = Job(kind, namespace, obj["metadata"]["name"], obj)
        return found

    def pass_once(self, now: float | None = None) -> Config:
        now = time.time() if now is None else now
        cfg = self.config()
        for namespace in cfg.namespaces if self.watch else ():
            if namespace not in self.watches:
                self.watches[namespace] = PodWatch(self.api, namespace, self.ended, self.lock, self.wake)
                self.watches[namespace].start()
        nodes = self.api.list("/api/v1/nodes")
        jobs = self.jobs(cfg.namespaces)
        pods = [p for ns in cfg.namespaces for p in self.api.list(path("v1", "pods", ns), remediation.JOB_LABEL)]
        with self.lock:
            ended = dict(self.ended)
        signals = [s for p in [*pods, *ended.values()] for s in remediation.pre_step_signals(p)]
        signals += self.alerts(cfg)
        max_nodes = {pool: int(t.get("maxNodes") or 0) for pool, t in cfg.terms.items()}
        actions, skips = remediation.decide(signals, jobs, nodes, pods, cfg.pools, now, max_nodes)
        for skip in skips:
            if not skip.quiet:
                self.say_once(f"{skip.signal.source}: not acting on {skip.signal.node} for "
                              f"{skip.signal.namespace}/{skip.signal.job}: {skip.why}")
        by_name = {n["metadata"]["name"]: n for n in nodes}
        failed = False
        for action in actions:
            try:
                self.act(action, by_name[action.signal.node], now)
            except (kubeapi.ApiError, OSError) as err:  # the next pass tries again: nothing is recorded yet
                failed = True
                log(f"{action.job.kind} {action.job.namespace}/{action.job.name}: acting on {action.signal.node} "
                    f"failed: {err}")
        if not failed:  # a pod a JobSet deleted is seen once more, until what it says is done
            with self.lock:
                for uid in ended:
                    self.ended.pop(uid, None)
        self.account(cfg, jobs, pods, nodes, now)
        if now - self.swept_at >= records.SWEEP_SECONDS:
            self.swept_at = now
            for line in self.books.sweep(cfg.namespaces, set(jobs), self.listed_kinds, now,
                                         cfg.record_retention_days):
                log(line)
        self.metrics.passed(now, cfg.interval_seconds)
        return cfg

    def account(self, cfg: Config, jobs: dict[tuple[str, str], Job], pods: list[dict[str, Any]],
                nodes: list[dict[str, Any]], now: float) -> None:
        workloads = {ns: self.books.workloads(ns) for ns in cfg.namespaces}
        seen = []
        for (namespace, name), job in sorted(jobs.items()):
            try:
                seen.append((namespace, name, self.books.job(cfg, job, pods, workloads[namespace], nodes, now)))
            except records.NotARecord as err:
                self.say_once(str(err))
            except Exception:  # noqa: BLE001 - one job's odd record must not stop the others' accounting
                self.say_once(f"accounting {job.kind} {namespace}/{name} failed:\n{traceback.format_exc()}")
        self.metrics.jobs(seen)

    # -- acting -----------------------------------------------------------------------------------------------

    def act(self, action: remediation.Action, node: dict[str, Any], now: float) -> None:
        s, job = action.signal, action.job
        api_version, plural = JOB_APIS[job.kind]
        if action.quarantine_node:
            self.patch_retrying(f"/api/v1/nodes/{s.node}", node, lambda fresh: None if remediation.quarantined(fresh)
                                else remediation.node_patch(fresh, action))
        for pod in action.delete_pods:
            self.api.delete(path("v1", "pods", s.namespace, pod))
        self.patch_retrying(path(api_version, plural, job.namespace, job.name), job.obj,
                            lambda fresh: remediation.job_patch(fresh, action.record))
        self.api.create(path("v1", "events", job.namespace), remediation.event(job, action, now, api_version))
        self.metrics.remediated(s.reason, action.action)
        log(f"{job.kind} {job.namespace}/{job.name}: {remediation.message(action)}")

    def patch_retrying(self, where: str, obj: dict[str, Any], build) -> None:
        """A conditional merge patch (resourceVersion); on a conflict, once more against the object as it is."""
        for attempt in range(2):
            patch = build(obj)
            if patch is None:
                return
            try:
                self.api.merge_patch(where, patch)
                return
            except kubeapi.ApiError as err:
                if err.status != 409 or attempt:
                    raise
                obj = self.api.get(where) or {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m gpucluster_goodput.controller", description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=os.environ.get(CONFIG_ENV), help="NAMESPACE/NAME of the config ConfigMap")
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--bind", default="0.0.0.0")
    # Outside a pod (the local control plane): the API server and how to authenticate (default: the env).
    for flag, env in (("--server", kubeapi.SERVER_ENV), ("--ca-file", kubeapi.CA_ENV),
                      ("--token-file", kubeapi.TOKEN_ENV), ("--cert-file", kubeapi.CERT_ENV),
                      ("--key-file", kubeapi.KEY_ENV)):
        parser.add_argument(flag, default=os.environ.get(env), help=f"default: ${env}")
    args = parser.parse_args(argv)
    if not args.config or "/" not in args.config:
        parser.error(f"--config NAMESPACE/NAME (or {CONFIG_ENV}) is required")
    explicit = {kubeapi.SERVER_ENV: args.server, kubeapi.CA_ENV: args.ca_file, kubeapi.TOKEN_ENV: args.token_file,
                kubeapi.CERT_ENV: args.cert_file, kubeapi.KEY_ENV: args.key_file}
    api = kubeapi.Client.from_env({**os.environ, **{k: v for k, v in explicit.items() if v}})
    controller = Controller(api, args.config, os.environ.get(PROMETHEUS_ENV) or None)
    stop = threading.Event()

    def terminate(*_: Any) -> None:
        stop.set()
        controller.wake.set()

    signal.signal(signal.SIGTERM, terminate)
    server = metrics_text.serve(controller.metrics, args.bind, args.port)
    log(f"serving /metrics and /healthz on {args.bind}:{args.port}; config {args.config}")
    interval = 10.0
    while not stop.is_set():
        controller.wake.clear()  # a pod found during the pass wakes the next one at once
        try:
            interval = controller.pass_once().interval_seconds
        except Exception:  # noqa: BLE001 - the API server restarting, a CRD missing: say why, try again
            log(f"pass failed:\n{traceback.format_exc()}")
        controller.wake.wait(interval)
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
