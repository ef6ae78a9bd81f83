"""What the teams scenarios (test_j_teams.py) share: prod's pool and teams, their jobs as `submit` renders them, the
teams' Workloads sampled, the reclaim situation (vision borrowing the whole pool, language taking its guarantee
back), and a fake Prometheus for the spend the budget and doctor read.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from bootstrap import stackfile
from bootstrap.jobs import render
from components.core import versions
from components.core.observability import spend
from tests import http_fake

from .conftest import Local, jsonpath
from .test_b_gangs import condition, running

TEAMS = ("vision", "language")
NAMESPACES = ("training", *TEAMS)
POOL = "h100"
GPUS_PER_NODE = 8  # p5.48xlarge
POOL_NODES = 16
GUARANTEED_NODES = 4  # each team's, Pulumi.prod.yaml
WORKLOADS = "workloads.kueue.x-k8s.io"
TRAINJOBS = "trainjobs.trainer.kubeflow.org"
# Every kind a job of ours is (or makes): what a test ends before it starts.
JOB_KINDS = f"{TRAINJOBS},mpijobs.kubeflow.org,jobsets.jobset.x-k8s.io,jobs.batch"


def cluster_queue(team: str) -> str:
    return f"gpucluster-team-{team}"


def path_of(team: str) -> str:
    """Kueue's name for a ClusterQueue in preemption messages: /<cohort>/<queue> (preemption.go buildCQPath)."""
    return f"/gpucluster/{cluster_queue(team)}"


# --- jobs -----------------------------------------------------------------------------------------------------


def entry(name: str, team: str, nodes: int = 1, priority: str | None = None) -> dict:
    """A job file's one entry, as a team member writes it for `bootstrap submit --file`."""
    return {"name": name, "pool": POOL, "nodes": nodes, "launcher": "torchrun", "image": versions.DLC_PYTORCH_IMAGE,
            "command": ["python", "-c", "print(1)"], "team": team, **({"priorityClass": priority} if priority else {})}


def rendered(*entries: dict) -> list[render.Submission]:
    """Each job as `submit` renders it, the stack loaded once for all of them."""
    cfg, _, _ = stackfile.load_stack("prod", standins=True, overrides={"gpucluster:jobs": list(entries)})
    subs = [render.build(cfg, i, from_file=True) for i in range(len(entries))]
    for sub, job in zip(subs, entries):
        assert (sub.namespace, sub.manifest["metadata"]["namespace"]) == (job["team"], job["team"]), \
            f"submit renders team {job['team']}'s job {job['name']} into namespace {sub.namespace}"
    return subs


def submit(local: Local, subs: list[render.Submission], what: str) -> None:
    """Create the jobs and the torchrun runtime they name, as `submit` does (as an admin)."""
    runtimes = {s.runtime["metadata"]["name"]: s.runtime for s in subs if s.runtime is not None}
    local.apply([*runtimes.values(), *(s.manifest for s in subs)], what)


def names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{i:02d}" for i in range(count)]


def job_pods(local: Local, namespace: str) -> list[dict]:
    """The pods of jobs (owned by a batch Job), not the namespace's other pods (TensorBoard's)."""
    return [p for p in local.pods(namespace)
            if any(o["kind"] == "Job" for o in p["metadata"].get("ownerReferences", []))]


def finish(local: Local, namespace: str, pods: list[dict]) -> None:
    """End the pods with exit code 0: KWOK's stage for the annotation (local/kwok-stages.yaml)."""
    if pods:
        local.kubectl("annotate", "pod", *(p["metadata"]["name"] for p in pods), "-n", namespace, "--overwrite",
                      "gpucluster.io/kwok-exit=0")


def clear(local: Local) -> None:
    """End every job in the training and team namespaces and wait until Kueue holds no quota for any."""
    for namespace in NAMESPACES:
        local.kubectl("delete", JOB_KINDS, "--all", "-n", namespace, "--cascade=background", "--wait=false",
                      "--ignore-not-found")
    local.wait(lambda: not [w for w in local.get(WORKLOADS)["items"] if w["metadata"]["namespace"] in NAMESPACES]
               and not [p for ns in NAMESPACES for p in job_pods(local, ns)],
               "the jobs earlier tests left, their Workloads and pods to go", timeout=120)


def env_of(pod: dict) -> dict[str, str]:
    return {e["name"]: e.get("value") for c in pod["spec"]["containers"] for e in c.get("env", [])}


# --- what Kueue admitted, sampled -------------------------------------------------------------------------------


def job_of(wl: dict) -> str:
    return next(o["name"] for o in wl["metadata"].get("ownerReferences", []) if o["kind"] == "TrainJob")


def gpus_of(wl: dict) -> int:
    """GPUs the Workload holds quota for (Kueue's own count: status.admission.podSetAssignments[].resourceUsage)."""
    return sum(int(ps.get("resourceUsage", {}).get("nvidia.com/gpu", "0"))
               for ps in jsonpath(wl, "status", "admission", "podSetAssignments", default=[]))


@dataclass
class Snapshot:
    """The teams' Workloads at one moment: admitted (holding quota, not finished), pending, finished."""

    at: float  # time.monotonic()
    wall: float  # time.time(), to compare with the API server's condition timestamps
    workloads: list[dict]
    admitted: dict[str, dict[str, int]] = field(default_factory=dict)  # team -> {job: GPUs}
    pending: dict[str, set[str]] = field(default_factory=dict)
    finished: dict[str, set[str]] = field(default_factory=dict)
    ready: bool = True  # every admitted Workload has PodsReady=True

    def gpus(self, team: str) -> int:
        return sum(self.admitted[team].values())

    def nodes(self, team: str) -> int:
        return self.gpus(team) // GPUS_PER_NODE

    def workload(self, team: str, job: str) -> dict:
        return next(w for w in self.workloads if w["metadata"]["namespace"] == team and job_of(w) == job)


def snapshot(local: Local) -> Snapshot:
    items = [w for w in local.get(WORKLOADS)["items"] if w["metadata"]["namespace"] in TEAMS]
    snap = Snapshot(time.monotonic(), time.time(), items, {t: {} for t in TEAMS}, {t: set() for t in TEAMS},
                    {t: set() for t in TEAMS})
    for wl in items:
        team, job = wl["metadata"]["namespace"], job_of(wl)
        if condition(wl, "Finished"):
            snap.finished[team].add(job)
        elif condition(wl, "Admitted"):
            snap.admitted[team][job] = gpus_of(wl)
            snap.ready = snap.ready and condition(wl, "PodsReady")
        else:
            snap.pending[team].add(job)
    return snap


def gpu_seconds(samples: list[Snapshot], team: str) -> float:
    """What the team held between samples (each sample's GPUs until the next sample)."""
    return sum(a.gpus(team) * (b.at - a.at) for a, b in zip(samples, samples[1:]))


def _timestamp(wl: dict, kind: str) -> float | None:
    stamp = next((c["lastTransitionTime"] for c in jsonpath(wl, "status", "conditions", default=[])
                  if c["type"] == kind and c["status"] == "True"), None)
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() if stamp else None


def gpu_seconds_from_conditions(final: Snapshot, team: str, start: float, end: float) -> float:
    """The same from Kueue's condition times (whole seconds): each finished Workload's Admitted -> Finished,
    clipped to [start, end] (wall clock). Its last admission only: fine once nothing is preempted any more."""
    total = 0.0
    for wl in final.workloads:
        admitted, done = _timestamp(wl, "Admitted"), _timestamp(wl, "Finished")
        if wl["metadata"]["namespace"] == team and admitted is not None and done is not None:
            total += max(0.0, min(done, end) - max(admitted, start)) * GPUS_PER_NODE * int(
                jsonpath(wl, "spec", "podSets", 0, "count", default=1))
    return total


def sampled(local: Local, samples: list[Snapshot], done) -> object:
    """A check for local.wait that records every snapshot it takes."""
    def check():
        snap = snapshot(local)
        samples.append(snap)
        return done(snap) and snap
    return check


def age(wl: dict) -> float:
    """Seconds since the API server created the Workload (its clock is this machine's)."""
    return time.time() - datetime.fromisoformat(wl["metadata"]["creationTimestamp"].replace("Z", "+00:00")).timestamp()


def preempted(wl: dict) -> dict | None:
    return next((c for c in jsonpath(wl, "status", "conditions", default=[])
                 if c["type"] == "Preempted" and c["status"] == "True"), None)



def dumps_conditions(wl: dict) -> str:
    return json.dumps(jsonpath(wl, "status", "conditions", default=[]), indent=1)


# --- the reclaim situation ----------------------------------------------------------------------------------------


@dataclass
class Reclaimed:
    lent: list[str]  # vision's jobs
    before: dict[str, dict]  # job -> its pod while vision held the whole pool
    samples: list[Snapshot]  # from the full pool to language's job admitted
    after: Snapshot

    @property
    def victims(self) -> list[str]:
        return sorted(self.after.pending["vision"])


def reclaim(local: Local, prefix: str, taker: str) -> Reclaimed:
    """vision borrows the whole idle pool (16 one-node jobs named <prefix>-NN: its 4 nodes and 12 borrowed); then
    language's 4-node job `taker`, within its guarantee, is submitted: waits until it is admitted whole and 4 of
    vision's jobs wait."""
    lent = names(prefix, POOL_NODES)
    submit(local, rendered(*(entry(n, "vision") for n in lent)), "vision's 16 jobs")
    full = local.wait(lambda: (s := snapshot(local)).nodes("vision") == POOL_NODES and s.ready and s,
                      "vision's 16 jobs to run on the whole pool", timeout=150)
    before = {p["metadata"]["labels"]["gpucluster.io/job"]: p for p in running(job_pods(local, "vision"))}
    assert sorted(before) == lent
    samples = [full]
    submit(local, rendered(entry(taker, "language", nodes=GUARANTEED_NODES)), "language's 4-node job")
    after = local.wait(sampled(local, samples, lambda s: s.nodes("language") == GUARANTEED_NODES and s.ready
                               and len(s.pending["vision"]) == 4),
                       "language's job to be admitted whole and 4 of vision's to wait", timeout=90)
    return Reclaimed(lent, before, samples, after)


def wait_requeued(local: Local, jobs: list[str]) -> Snapshot:
    """Until Kueue has requeued the preempted jobs' Workloads (their pods stopped: reconciler.go L583-610)."""
    return local.wait(lambda: all(condition((s := snapshot(local)).workload("vision", j), "Requeued") for j in jobs)
                      and s, "the preempted Workloads to be requeued")


# --- a job file, and the spend Prometheus answers ----------------------------------------------------------------


def job_file(folder: Path, job: dict) -> str:
    """The entry as a file for `submit --file` (JSON is YAML)."""
    path = folder / f"{job['name']}.yaml"
    path.write_text(json.dumps(job))
    return str(path)


class FakePrometheus:
    """Prometheus' HTTP API on 127.0.0.1 as far as bootstrap/jobs/budget.py reads it: GET /api/v1/query?query=&time=
    of the two month-to-date queries (components/core/observability/spend.py month_to_date_queries), answered with an
    instant vector (https://prometheus.io/docs/prometheus/latest/querying/api/#instant-vectors) of the team's spend
    this month in `usd` (the test sets it; None: no series) and `gpu_hours`. `asked`: every query, parsed."""

    QUERY = re.compile(rf'sum_over_time\(({re.escape(spend.TEAM_COST)}|{re.escape(spend.TEAM_GPUS)})'
                       r'\{namespace="([^"]+)"\}\[(\d+)s\]\) / 60')

    def __init__(self, usd: dict[str, float | None], gpu_hours: float = 224.5):
        self.usd, self.gpu_hours = dict(usd), gpu_hours
        self.asked: list[dict] = []
        self.server = None
        self.url = ""

    def answer(self, path: str, params: dict[str, str]) -> tuple[int, dict]:
        match = self.QUERY.fullmatch(params.get("query", ""))
        if path != "/api/v1/query" or not match or "time" not in params:
            self.asked.append({"path": path, **params})
            return 400, {"status": "error", "errorType": "bad_data", "error": f"unexpected {path} {params}"}
        metric, namespace, window = match.groups()
        at = float(params["time"])
        self.asked.append({"metric": metric, "namespace": namespace, "window": int(window), "time": at})
        value = self.usd.get(namespace) if metric == spend.TEAM_COST else self.gpu_hours
        result = [] if self.usd.get(namespace) is None else [{"metric": {"namespace": namespace},
                                                              "value": [at, str(value)]}]
        return 200, {"status": "success", "data": {"resultType": "vector", "result": result}}

    def __enter__(self) -> FakePrometheus:
        self.server = http_fake.serve(self.answer)
        self.url = self.server.url
        return self

    def __exit__(self, *exc) -> None:
        http_fake.stop(self.server)
