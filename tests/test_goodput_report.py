"""`bootstrap report JOB` and the goodput column of `status`, against tests/kube_fake.py's API server: the goodput
controller's record (a ConfigMap) merged with what is live (tests/goodput_scenario.py's TrainJob), the table and
its JSON, a job gone since, an unknown job, and a team member who may not read nodes."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

import bootstrap.__main__ as cli
from bootstrap.jobs import goodput
from bootstrap.verbs.jobs import report, status
from components.core.goodput import accounting, names
from tests import goodput_scenario as run
from tests.conftest import stack_config, stack_raw
from tests.kube_fake import FakeKube

NS = run.NS
POOL = {"type": "pool", "gpu_hour_usd": run.GPU_HOUR_USD, "bills_while_queued": False}


def at(moment: int) -> datetime:
    return datetime.fromtimestamp(run.unix(moment), UTC)


def controller_record(until: int) -> dict:
    """What the controller wrote after its looks up to `until` (with its pool terms, as bootstrap's)."""
    record = None
    for moment in (m for m in run.MOMENTS if m <= until):
        record = accounting.merge(record, [*accounting.observe(*run.observed(moment)), POOL], run.trainjob(moment))
    return record


def record_map(record: dict) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "data": {names.RECORD_KEY: json.dumps(record)},
            "metadata": {"name": goodput.record_name(run.NAME), "namespace": NS,
                         "labels": {"app.kubernetes.io/part-of": "gpucluster"}}}


def live(fake: FakeKube, moment: int, job: bool = True) -> None:
    """The cluster as it is at a moment (the job, its Workload, pods, nodes and node 0's log)."""
    if job:
        fake.add(run.trainjob(moment))
        fake.add(run.workload(moment))
    for obj in run.pods(moment) + run.nodes(moment):
        fake.add(obj)
    for pod, text in run.logs(moment).items():
        fake.logs[(NS, pod, None)] = text


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    fake = FakeKube().start()
    monkeypatch.setenv("KUBECONFIG", fake.write_kubeconfig(tmp_path / "kubeconfig"))
    yield fake
    fake.stop()


def run_verb(capsys, verb, *argv, now):
    code = verb.main(list(argv), now=now)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


REPORT = """\
llama (TrainJob in training): Succeeded; 2 nodes x 8 GPUs = 16 GPUs
from 2026-12-05 10:00:00 UTC to 2026-12-05 10:43:55 UTC: 43m (2,635 s)

PHASE             SECONDS  GPU-HOURS   SHARE
queued                300       1.33   11.4%  not paid
scaling_up            240       1.07    9.1%
pulling_image         120       0.53    4.6%
initialising          120       0.53    4.6%
training              796       3.54   30.2%
checkpointing          60       0.27    2.3%
lost_to_restarts      579       2.57   22.0%
idle_tail             420       1.87   15.9%
total               2,635      11.71  100.0%

goodput 34.1%: 3.54 of 10.38 paid GPU-hours trained the model
cost $71.40 at $6.88 per GPU-hour; 80 useful steps: $0.8925 per useful step
restarts: 1 (2026-12-05 10:21:36 UTC: remediation: straggler on node-b)
remediations (the goodput controller's, on the job):
  2026-12-05T10:21:36Z  quarantined  node-b  straggler  (remediation on)
"""


def test_report_splits_the_paid_gpu_hours_and_adds_up_to_the_wall_clock(cluster, capsys):
    """The controller's record up to 2815 (the nodes still there), the cluster at 2875 (gone): with --stack the
    idle tail stops at prod's idleMinutes (5) plus 2 (420 s after the finish), before the nodes were last seen."""
    live(cluster, 2875)
    cluster.add(record_map(controller_record(2815)))
    code, out, err = run_verb(capsys, report, "--stack", "prod", run.NAME, now=at(2875))
    assert (code, err) == (0, "")
    assert out == REPORT
    code, out, _ = run_verb(capsys, report, "--stack", "prod", run.NAME, "--json", now=at(2875))
    found = json.loads(out)
    assert found["phases"] == {**run.EXPECTED, "idle_tail": 420}
    assert sum(found["phases"].values()) == found["wall_clock_seconds"] == 2635
    assert (found["goodput"], found["steps"], found["restarts"], found["recorded"], found["live"]) == (
        round(796 / 2335, 6), 80, 1, True, True)
    assert found["gpu_hour_usd"] == 6.88 and found["cost_usd"] == 71.4
    assert [r["node"] for r in found["remediations"]] == ["node-b"]


def test_report_of_a_running_job_without_a_record_reads_what_is_live(cluster, capsys):
    live(cluster, 1295)
    code, out, _ = run_verb(capsys, report, run.NAME, "--json", now=at(1295))
    found = json.loads(out)
    assert code == 0 and (found["recorded"], found["live"], found["outcome"]) == (False, True, None)
    assert found["phases"] == {"queued": 300, "scaling_up": 240, "pulling_image": 120, "initialising": 120,
                               "training": 1295 - 780 - 20, "checkpointing": 20, "lost_to_restarts": 0, "idle_tail": 0}
    assert found["cost_usd"] is None  # no --stack: no price
    code, out, _ = run_verb(capsys, report, run.NAME, now=at(1295))
    assert "running; 2 nodes x 8 GPUs = 16 GPUs" in out.splitlines()[0]
    assert "50 useful steps; cost: give --stack for the pool's price" in out


def test_a_job_gone_since_is_reported_from_its_record(cluster, capsys):
    live(cluster, 2875, job=False)
    cluster.add(record_map(controller_record(2875)))
    code, out, _ = run_verb(capsys, report, run.NAME, "--json", now=at(3000))
    found = json.loads(out)
    assert code == 0 and (found["live"], found["recorded"], found["remediations"]) == (False, True, [])
    assert found["phases"] == run.EXPECTED
    code, out, _ = run_verb(capsys, report, run.NAME, now=at(3000))
    assert out.startswith("llama (TrainJob in training): Succeeded (the job is gone: from the goodput controller's "
                          "record); ")


def test_an_unknown_job_is_a_clear_error_and_exit_2(cluster, capsys):
    cluster.add(record_map({"not": "a record"}) | {"data": {names.RECORD_KEY: "{broken"}})
    code, out, err = run_verb(capsys, report, run.NAME, now=at(3000))
    assert (code, out) == (2, "")
    assert err == ("python -m bootstrap report: error: no MPIJob or TrainJob 'llama' in namespace training (`python -m "
                   "bootstrap status` lists them); no goodput record of it either (ConfigMap "
                   "gpucluster-goodput-job-llama)\n")
    assert cli.run(["report", "nope"]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_a_member_who_may_not_read_nodes_still_gets_the_report(cluster, capsys):
    live(cluster, 2875)
    cluster.add(record_map(controller_record(2815)))
    cluster.fail[("GET", "/api/v1/nodes")] = (403, 'nodes is forbidden: User "alice" cannot list resource "nodes"')
    code, out, _ = run_verb(capsys, report, run.NAME, "--json", now=at(2875))
    found = json.loads(out)
    # The record last saw the nodes at 2815, still there: without nodes to read, they count as there until now.
    assert code == 0 and found["phases"] == {**run.EXPECTED, "idle_tail": 2875 - 2215}


def test_without_cluster_the_report_cannot_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    code, _, err = run_verb(capsys, report, run.NAME, now=at(0))
    assert code == 2 and err.startswith("python -m bootstrap report: error: cannot reach the cluster: kubeconfig")


def test_the_pool_terms_are_the_node_s_price_over_the_gpus_the_job_uses():
    assert goodput.pool_terms(stack_config("prod"), run.trainjob(0)) == {
        "type": "pool", "gpu_hour_usd": 6.88, "bills_while_queued": False,  # $55.04 a p5.48xlarge, 8 GPUs
        "idle_minutes": 5}
    assert goodput.pool_terms(None, run.trainjob(0)) is None  # no --stack: no price
    pools = json.loads(stack_raw("prod")["gpucluster:gpuPools"])
    for change in ({"minNodes": 2}, {"capacityReservationId": "cr-0123456789abcdef0"}):
        cfg = stack_config("prod", {"gpucluster:gpuPools": [{**pools[0], **change}, *pools[1:]]})
        assert goodput.pool_terms(cfg, run.trainjob(0))["bills_while_queued"] is True, change


# -- status ---------------------------------------------------------------------------------------------------


def test_status_shows_each_job_s_goodput_from_its_record(cluster, capsys):
    live(cluster, 2875)
    cluster.add(record_map(controller_record(2815)))
    code, out, _ = run_verb(capsys, status, "--stack", "prod", "--json", now=at(2875))
    (row,) = json.loads(out)
    # The record alone (status reads no pods or logs): its nodes were there at 2815, so the tail runs to now.
    assert code == 0 and row["goodput"] == round(796 / (2875 - 300), 6) == 0.309126
    code, out, _ = run_verb(capsys, status, "--stack", "prod", now=at(2875))
    header, line = out.splitlines()
    assert header.split() == ["JOB", "KIND", "PHASE", "POOL", "NODES", "ELAPSED", "COST", "GOODPUT", "DEADLINE",
                              "LEFT"]
    assert line.split()[:2] == ["llama", "TrainJob"] and "30.9%" in line.split()


def test_status_ignores_a_record_of_an_earlier_job_of_the_same_name(cluster, capsys):
    live(cluster, 2875)
    record = controller_record(2815)
    cluster.add(record_map({**record, "uid": "an-earlier-llama"}))
    code, out, _ = run_verb(capsys, status, "--json", now=at(2875))
    assert code == 0 and json.loads(out)[0]["goodput"] is None
