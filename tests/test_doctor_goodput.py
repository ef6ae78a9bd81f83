"""doctor on the goodput loop's traces: variations of the pre-step-check-failed and node-quarantined bundles."""

from __future__ import annotations

import json

from bootstrap.doctor import causes
from bootstrap.doctor.bundle import read_bundle
from tests.test_doctor import DATA

BAD = "ip-10-0-64-12.ec2.internal"


def _node(bundle, name):
    return next(n for n in bundle.of("Node") if n["metadata"]["name"] == name)


def test_a_failed_check_on_a_quarantined_node_says_the_job_restarts_by_itself():
    [finding] = causes.diagnose(read_bundle(DATA / "pre-step-check-failed"))
    assert finding.title == ("The pre-step check failed on ip-10-0-64-12.ec2.internal (efa-missing: 0 of 32 EFA "
                             "devices under /sys/class/infiniband)")
    assert finding.details == {"nodes": [BAD], "quarantined": [BAD]}
    assert "quarantined it" in finding.fix and "restarts on other nodes by itself" in finding.fix


def test_a_failed_check_with_remediation_off_says_to_cordon_the_node_and_names_the_bandwidth():
    bundle = read_bundle(DATA / "pre-step-check-failed")
    node = _node(bundle, BAD)
    node["spec"]["taints"] = [t for t in node["spec"]["taints"] if t["key"] != "gpucluster.io/quarantine"]
    for pod in bundle.of("Pod"):
        ended = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        verdict = json.loads(ended["message"])
        verdict["gpucluster.io/pre-step-check"]["busbw_gbps"] = 3.1
        verdict["gpucluster.io/pre-step-check"]["nodes"][BAD]["reason"] = "busbw-low"
        ended["message"] = json.dumps(verdict)
    [finding] = causes.diagnose(bundle)
    assert finding.title.endswith("; all_reduce bus bandwidth 3.1 GB/s against 487 GB/s expected")
    assert f"`kubectl cordon {BAD}`" in finding.fix and "gpuPools[].remediation: on" in finding.fix
    assert finding.details["quarantined"] == []


def test_exit_86_without_the_check_s_message_is_not_the_check():
    bundle = read_bundle(DATA / "pre-step-check-failed")
    for pod in bundle.of("Pod"):
        pod["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = "not json"
    assert "pre-step-check-failed" not in [f.cause for f in causes.diagnose(bundle)]


def test_a_passing_check_in_last_state_is_no_finding():
    bundle = read_bundle(DATA / "pre-step-check-failed")
    for pod in bundle.of("Pod"):
        status = pod["status"]["containerStatuses"][0]
        verdict = json.loads(status["state"]["terminated"]["message"])
        verdict["gpucluster.io/pre-step-check"]["nodes"][BAD]["verdict"] = "pass"
        status["lastState"] = {"terminated": {**status["state"]["terminated"], "message": json.dumps(verdict)}}
        status["state"] = {"running": {"startedAt": "2026-12-05T10:04:00Z"}}
        pod["status"]["phase"] = "Running"
    assert "pre-step-check-failed" not in [f.cause for f in causes.diagnose(bundle)]


def test_the_job_s_record_names_what_the_controller_did():
    [finding] = causes.diagnose(read_bundle(DATA / "node-quarantined"))
    assert finding.title == ("The goodput controller quarantined 1 node(s) under the job and restarted it: "
                             "straggler")
    assert [e.text for e in finding.evidence] == [f"quarantined {BAD} (straggler, mode on)"]
    assert finding.evidence[0].time == "2026-12-05T10:41:30Z"


def test_a_dry_run_record_says_nothing_changed():
    bundle = read_bundle(DATA / "node-quarantined")
    job = bundle.of("TrainJob")[0]
    records = json.loads(job["metadata"]["annotations"]["gpucluster.io/remediations"])
    for record in records:
        record.update(action="would-quarantine", mode="dry-run")
    job["metadata"]["annotations"]["gpucluster.io/remediations"] = json.dumps(records)
    [finding] = causes.diagnose(bundle)
    assert finding.title == f"Dry run: the goodput controller would have quarantined {BAD}"
    assert "gpuPools[].remediation: on" in finding.fix


def test_a_malformed_record_is_ignored():
    bundle = read_bundle(DATA / "node-quarantined")
    bundle.of("TrainJob")[0]["metadata"]["annotations"]["gpucluster.io/remediations"] = "{not json"
    assert causes.diagnose(bundle) == []
