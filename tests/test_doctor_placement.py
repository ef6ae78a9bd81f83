"""doctor's placement causes (issue 30): a job waiting for all of its nodes (its ProvisioningRequest, Kueue's retries,
the second pass) and a job that cannot fit in one network domain; variations of the bundles
tests/data/doctor/waiting-for-all-nodes and network-domain (their READMEs cite every format), --collect of them,
and a cluster without the autoscaler's CRD read as before."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from bootstrap.cluster import kinds
from bootstrap.doctor import causes
from bootstrap.doctor.bundle import KINDS, PLACEMENT_KINDS, Bundle, BundleError, read_bundle, write_bundle
from bootstrap.doctor.kueue import collect_placement, rules_placement, rules_provisioning
from bootstrap.verbs.jobs import doctor
from components.core.hardware import topology as hw
from components.core.placement import provisioning
from components.core.placement import topology as ptopo
from components.core.teams import queues as teams
from tests.conftest import ROOT, stack_config
from tests.kube_fake import FakeKube
from tests.test_doctor import DATA

WAIT, DOMAIN = "waiting-for-all-nodes", "network-domain"
WL = "trainjob-pretrain-5c1e2"
CHECK = "gpucluster-atomic-scale-up"
PR = f"{WL}-{CHECK}-1"
NOT_FOUND = "Capacity is not found, CA will try to find it later."
NOT_FIT = ('couldn\'t assign flavors to pod set node: topology "gpucluster-network-3" allows to fit only 3 out of 4 '
           'pod(s). Total nodes: 16; excluded: resource "cpu": 12')
CAPACITY = ("If EC2 lacks p5.48xlarge capacity: another zone (gpucluster:gpuAvailabilityZone), reserved capacity "
            "(gpuPools[].capacityType CAPACITY_BLOCK or capacityReservationId) or fewer nodes (jobs[].nodes); "
            "gpuPools[].atomicScaleUp: false admits the job on quota alone, and then its nodes join one by one and a "
            "partial set bills while it waits for the rest")
HOLD = ("Kueue has reserved the job's quota but creates none of its pods until cluster-autoscaler can add all 4 nodes at "
        "once (a ProvisioningRequest of class best-effort-atomic-scale-up, all or nothing)")
IDLE = ": no node is started for the job, so none bills, while it waits"
RETRIES = ("When a request fails, Kueue asks again up to 5 times (60 s later, doubling to at most 120 s) and then "
           "deactivates the job")
# On AWS Provisioned=True is a raised Auto Scaling group, not nodes (no AtomicIncreaseSize), and a p5 node may take
# components.core.kube.autoscaling.MAX_NODE_PROVISION_MINUTES to be Ready: a first booking expiry is normal.
JOIN = ("Provisioned=True means cluster-autoscaler has raised the pool's Auto Scaling group, not that the nodes are "
        "there: they may take up to 25 min to become Ready")
BOOKING = ("Kueue did not place the job in the 10 min cluster-autoscaler booked its nodes for it. On a first attempt "
           f"from zero that is normal: {JOIN}, and the next attempt finds them booting or Ready. If it recurs once "
           "they are Ready: with a required placement they may not share one network domain (placement: {policy: "
           "preferred}, or a broader layer)")
DOMAINS = ("pool h100: 16 nodes in 3 topology.k8s.aws/network-node-layer-3 domains: nn-1f8b3d6a2c9e5074b: 3 of 8 free; "
           "nn-3d7a1c5e9b2f6480d: 1 of 2 free; nn-2a5c8e1b4d7f903c6: 0 of 6 free")
PLACE_FIX = (" Wait for the jobs in a domain to end; or run it with placement: {policy: preferred} (Kueue packs the pods "
             "as close as the free nodes allow and spreads them only when it must); or require a broader layer, "
             "placement: {policy: required, layer: 2} (layer 1 is the broadest); or give it fewer nodes (jobs[].nodes)")


def load(case: str) -> Bundle:
    return read_bundle(DATA / case)


def workload(bundle: Bundle) -> dict:
    (wl,) = bundle.of("Workload")
    return wl


def conditions(bundle: Bundle, *drop: str) -> list:
    wl = workload(bundle)
    wl["status"]["conditions"] = [c for c in wl["status"]["conditions"] if c["type"] not in drop]
    return wl["status"]["conditions"]


def cond(ctype: str, status: str, reason: str, message: str, at: str) -> dict:
    return {"type": ctype, "status": status, "reason": reason, "message": message, "lastTransitionTime": at}


def diagnose(bundle: Bundle) -> list:
    return causes.diagnose(bundle)


def texts(finding) -> list[tuple[str, str, str]]:
    return [(e.source, e.where, e.text) for e in finding.evidence]


# -- the names and numbers are the program's ------------------------------------------------------------


def test_doctor_reads_the_check_and_its_retries_as_the_program_writes_them():
    assert rules_provisioning.CHECK == provisioning.NAME == CHECK
    assert provisioning.admission_check()["metadata"]["name"] == CHECK
    strategy = provisioning.provisioning_request_config()["spec"]["retryStrategy"]
    assert (rules_provisioning.BACKOFF_LIMIT, rules_provisioning.BACKOFF_BASE, rules_provisioning.BACKOFF_MAX) == (
        strategy["backoffLimitCount"], strategy["backoffBaseSeconds"], strategy["backoffMaxSeconds"]) == (5, 60, 120)
    from components.core.kube import autoscaling

    assert autoscaling.MAX_NODE_PROVISION_MINUTES == 25 and "up to 25 min to become Ready" in rules_provisioning.JOIN
    assert rules_provisioning.ATTEMPTS == 6  # the first request and 5 retries (controller.go: attempt <= limit)
    assert rules_placement.REQUIRED == ptopo.REQUIRED_ANNOTATION == "kueue.x-k8s.io/podset-required-topology"
    assert rules_placement.PREFERRED == ptopo.PREFERRED_ANNOTATION == "kueue.x-k8s.io/podset-preferred-topology"
    assert rules_placement.LAYER.fullmatch(hw.layer_label(3)).group(1) == "3"
    assert (collect_placement.PROVISIONING_REQUEST.path("training") ==
            "/apis/autoscaling.x-k8s.io/v1/namespaces/training/provisioningrequests")
    assert collect_placement.TOPOLOGY.path("training") == "/apis/kueue.x-k8s.io/v1beta2/topologies"


def test_the_bundles_queue_and_topology_are_what_the_program_renders_for_prod():
    cfg = stack_config("prod")
    rendered = teams.training_cluster_queue(cfg.gpu_pools, cfg.system_nodes, cfg.training_namespace, cfg.teams)
    for case in (WAIT, DOMAIN):
        (served,) = load(case).of("ClusterQueue")
        assert served["spec"] == rendered["spec"], case
        assert served["spec"]["admissionChecksStrategy"]["admissionChecks"] == [{"name": CHECK,
                                                                                 "onFlavors": ["pool-h100"]}]
    (topology,) = load(DOMAIN).of("Topology")
    assert topology["spec"] == ptopo.topology(3)["spec"] and topology["metadata"]["name"] == ptopo.topology_name(3)


def test_both_causes_are_registered_with_their_sources():
    assert set(causes.CAUSES) >= {WAIT, DOMAIN}
    assert "tas_flavor_snapshot.go" in causes.CAUSES[DOMAIN][1]
    assert "cluster-autoscaler 1.35.2" in causes.CAUSES[WAIT][1]
    names = [getattr(rule, "__name__", "") for rule in causes.RULES]
    assert names.index("network_domain") < names.index("waiting_for_quota") < names.index("waiting_for_all_nodes")
    for case in (WAIT, DOMAIN):
        readme = (DATA / case / "README.md").read_text()
        assert "## Sources of every message format" in readme and readme.count("\n- ") >= 4, case


def test_the_modules_stay_small():
    for path in Path(rules_placement.__file__).parent.glob("*.py"):
        assert len(path.read_text().splitlines()) < 300, path.name


# -- waiting for all of its nodes -----------------------------------------------------------------------


def report(capsys, monkeypatch, case: str) -> list[str]:
    monkeypatch.chdir(ROOT)
    assert doctor.main(["--from", f"tests/data/doctor/{case}"]) == 1
    return capsys.readouterr().out.splitlines()


def test_the_report_of_a_job_waiting_for_all_of_its_nodes(capsys, monkeypatch):
    assert report(capsys, monkeypatch, WAIT) == [
        "doctor: job pretrain in namespace training: 1 cause found", "",
        f"1. [{WAIT}] Workload {WL} waits for all 4 nodes of pool h100 (attempt 1 of 6): cluster-autoscaler has not "
        "found capacity for them",
        f"   condition: ProvisioningRequest/{PR}, 2026-12-05T10:21:03Z",
        f"     Provisioned=False reason CapacityIsNotFound: {NOT_FOUND}",
        f"   condition: ProvisioningRequest/{PR}, 2026-12-05T10:20:12Z",
        "     Accepted=True reason Accepted: ProvisioningRequest is accepted by ClusterAutoscaler",
        f"   status: Workload/{WL}, 2026-12-05T10:20:01Z",
        f"     admission check {CHECK} Pending: {NOT_FOUND}",
        "   fix: Kueue has reserved the job's quota but creates none of its pods until cluster-autoscaler can",
        "   add all 4 nodes at once (a ProvisioningRequest of class best-effort-atomic-scale-up, all or",
        "   nothing): no node is started for the job, so none bills, while it waits (Kueue asked 24 min ago);",
        "   cluster-autoscaler finds no capacity while the pool's group cannot grow by all of them at once",
        "   (it is at gpuPools[].maxNodes, or in backoff after EC2 refused a launch); it tries again by",
        "   itself after 1 min, doubling to 10 min, and fails the request only 7 days after it was made. When",
        "   a request fails, Kueue asks again up to 5 times (60 s later, doubling to at most 120 s) and then",
        "   deactivates the job. If EC2 lacks p5.48xlarge capacity: another zone",
        "   (gpucluster:gpuAvailabilityZone), reserved capacity (gpuPools[].capacityType CAPACITY_BLOCK or",
        "   capacityReservationId) or fewer nodes (jobs[].nodes); gpuPools[].atomicScaleUp: false admits the",
        "   job on quota alone, and then its nodes join one by one and a partial set bills while it waits for",
        "   the rest", "",
        "Read from the bundle in tests/data/doctor/waiting-for-all-nodes/, collected 2026-12-05T10:45:00Z: 2",
        "Events, 1 Node, 1 TrainJob, 1 Workload, 1 ClusterQueue; 0 container logs; Auto Scaling activities",
        "skipped: no AWS credentials."]
    bundle = load(WAIT)
    (finding,) = diagnose(bundle)
    assert finding.fix == (
        f"{HOLD}{IDLE} (Kueue asked 24 min ago); cluster-autoscaler finds no capacity while the pool's group cannot grow by "
        "all of them at once (it is at gpuPools[].maxNodes, or in backoff after EC2 refused a launch); it tries again "
        "by itself after 1 min, doubling to 10 min, and fails the request only 7 days after it was made. "
        f"{RETRIES}. {CAPACITY}")
    assert finding.details == {"workload": WL, "pool": "h100", "nodes": 4, "attempt": 1, "attempts": 6,
                               "provisioningRequest": PR, "state": "waiting"}


def _without_requests(bundle: Bundle) -> None:
    del bundle.objects["ProvisioningRequest"]


def _requests_gone(bundle: Bundle) -> None:
    bundle.objects["ProvisioningRequest"] = []


@pytest.mark.parametrize("change, said", [
    (_without_requests, "the bundle holds no ProvisioningRequests (a cluster without the autoscaling.x-k8s.io/v1 CRD "
                        "serves none)"),
    (_requests_gone, f"its ProvisioningRequest {PR} is gone"),
])
def test_without_its_provisioning_request_the_workload_s_check_still_says_it_waits(change, said):
    bundle = load(WAIT)
    change(bundle)
    (finding,) = diagnose(bundle)
    assert finding.title == f"Workload {WL} waits for all 4 nodes of pool h100 (attempt 1 of 6)"
    assert texts(finding) == [("status", f"Workload/{WL}", f"admission check {CHECK} Pending: {NOT_FOUND}")]
    assert finding.fix == (f"{HOLD}{IDLE}; {said}; `kubectl get provisioningrequest -n training -o yaml` shows "
                           f"cluster-autoscaler's answer. {RETRIES}. {CAPACITY}")
    assert finding.details["provisioningRequest"] is None


def test_a_failed_request_is_not_a_capacity_wait():
    bundle = load(WAIT)
    bundle.of("ProvisioningRequest")[0]["status"]["conditions"].append(
        cond("Failed", "True", "Expired", "ProvisioningRequest is expired", "2026-12-05T10:44:00Z"))
    (finding,) = diagnose(bundle)
    assert finding.title == (f"Workload {WL} waits for all 4 nodes of pool h100 (attempt 1 of 6): cluster-autoscaler "
                             "ended the request (Failed, Expired)")
    assert texts(finding)[0] == ("condition", f"ProvisioningRequest/{PR}",
                                 "Failed=True reason Expired: ProvisioningRequest is expired")
    assert finding.fix == (f"{HOLD}{IDLE} (Kueue asked 24 min ago); Kueue asks again after a backoff. {RETRIES}. "
                           f"{CAPACITY}")


def test_the_last_attempt_failing_says_kueue_deactivates_the_job():
    bundle = load(WAIT)
    request = bundle.of("ProvisioningRequest")[0]
    request["metadata"]["name"] = f"{WL}-{CHECK}-6"
    request["status"]["conditions"].append(
        cond("Failed", "True", "FailedToCreatePods", "no pod template", "2026-12-05T10:44:00Z"))
    workload(bundle)["status"]["admissionChecks"][0]["retryCount"] = 5
    (finding,) = diagnose(bundle)
    assert finding.title.startswith(f"Workload {WL} waits for all 4 nodes of pool h100 (attempt 6 of 6)")
    assert "that was its last chance: Kueue deactivates the job." in finding.fix


@pytest.mark.parametrize("conds, title, now", [
    ([cond("Accepted", "True", "Accepted", "ProvisioningRequest is accepted by ClusterAutoscaler",
           "2026-12-05T10:20:12Z")], "cluster-autoscaler accepted the request",
     f"{IDLE} (Kueue asked 24 min ago); it has not decided on a scale-up yet"),
    ([], "cluster-autoscaler has not read the request yet", f"{IDLE} (Kueue asked 24 min ago); it reads one request a loop"),
    # Asked for is not there: the nodes boot, and bill, until they are Ready.
    ([cond("Provisioned", "True", "CapacityIsProvisioned", "Capacity is found in the cluster", "2026-12-05T10:44:00Z")],
     "cluster-autoscaler has asked for them (Provisioned)",
     f" (Kueue asked 24 min ago); {JOIN}; Kueue marks its check Ready next and places the job once they are. "),
    ([cond("Provisioned", "False", "FailedToCheckCapacity", "Failed to check pre-existing capacity in the cluster",
           "2026-12-05T10:44:00Z")], "cluster-autoscaler has not provisioned them (FailedToCheckCapacity)",
     f"{IDLE} (Kueue asked 24 min ago); cluster-autoscaler finds no capacity"),
])
def test_each_answer_of_the_autoscaler_is_said(conds, title, now):
    bundle = load(WAIT)
    bundle.of("ProvisioningRequest")[0]["status"]["conditions"] = conds
    (finding,) = diagnose(bundle)
    assert finding.title == f"Workload {WL} waits for all 4 nodes of pool h100 (attempt 1 of 6): {title}"
    assert finding.fix.startswith(HOLD + now)


def test_a_later_attempt_does_not_say_nothing_bills():
    # Nodes an earlier attempt got (its booking ran out) stay until this request books them or they idle out.
    bundle = load(WAIT)
    bundle.of("ProvisioningRequest")[0]["metadata"]["name"] = f"{WL}-{CHECK}-2"
    (finding,) = diagnose(bundle)
    assert finding.title.startswith(f"Workload {WL} waits for all 4 nodes of pool h100 (attempt 2 of 6)")
    assert finding.fix.startswith(
        f"{HOLD}: no node is started for the job while it waits, but nodes an earlier attempt got bill until this one "
        "books them or they idle out (gpuPools[].idleMinutes) (Kueue asked 24 min ago); ")
    assert "none bills" not in finding.fix


def test_a_one_node_job_waits_for_its_node():
    bundle = load(WAIT)
    bundle.of("ProvisioningRequest")[0]["spec"]["podSets"][0]["count"] = 1
    (finding,) = diagnose(bundle)
    assert finding.title.startswith(f"Workload {WL} waits for its node of pool h100 (attempt 1 of 6)")
    assert "until cluster-autoscaler can add its node at once" in finding.fix and finding.details["nodes"] == 1


RETRY = ('Evicted due to AdmissionCheck in Retry state: "gpucluster-atomic-scale-up" (Retrying after failure: '
         'ProvisioningRequest is expired)')


def retrying(bundle: Bundle, message: str = RETRY) -> Bundle:
    """After attempt 2 failed: Kueue evicted the Workload (its quota released), reset the check with retryCount 2 and
    deleted the request (CleanupProvisioningRequestsOnEviction); it requeues the job at requeueAt."""
    bundle.objects["ProvisioningRequest"] = []
    wl = workload(bundle)
    conditions(bundle, "QuotaReserved", "Admitted").extend([
        cond("Evicted", "True", "AdmissionCheck", message, "2026-12-05T10:41:00Z"),
        cond("QuotaReserved", "False", "Pending", message, "2026-12-05T10:41:01Z")])
    wl["status"]["admissionChecks"] = [{"name": CHECK, "state": "Pending", "retryCount": 2, "requeueAfterSeconds": 120,
                                        "message": "Reset to Pending after eviction. Previously: Retry",
                                        "lastTransitionTime": "2026-12-05T10:41:00Z"}]
    wl["status"]["requeueState"] = {"count": 2, "requeueAt": "2026-12-05T10:43:00Z"}
    del wl["status"]["admission"]
    created = copy.deepcopy(bundle.of("Event")[1])
    created.update(message=f'Created ProvisioningRequest: "{WL}-{CHECK}-2"', lastTimestamp="2026-12-05T10:30:00Z")
    bundle.objects["Event"].append(created)
    return bundle


def test_between_attempts_it_says_which_failed_when_kueue_asks_again_and_how_many_are_left():
    (finding,) = diagnose(retrying(load(WAIT)))
    assert finding.title == (f"Workload {WL} waits to ask again for all 4 nodes of pool h100: attempt 2 of 6 failed, "
                             "Kueue retries at 2026-12-05T10:43:00Z")
    assert texts(finding) == [
        ("condition", f"Workload/{WL}", f"Evicted=True reason AdmissionCheck: {RETRY}"),
        ("status", f"Workload/{WL}", f"admission check {CHECK} Pending: Reset to Pending after eviction. Previously: "
                                     "Retry (retryCount 2, requeueAfterSeconds 120)"),
        ("event", f"Workload/{WL} (from kueue-provisioning-request-controller)",
         f'Normal ProvisioningRequestCreated: Created ProvisioningRequest: "{WL}-{CHECK}-2"')]
    assert finding.fix == (
        "cluster-autoscaler could not provision attempt 2 (ProvisioningRequest is expired). Kueue released the job's "
        "quota and deleted the request; no node was added for it. Kueue asks again 120 s after the failure (60 s after "
        f"the first, doubling to at most 120 s), 4 attempt(s) left before it deactivates the job. {CAPACITY}")
    assert finding.details == {"workload": WL, "pool": "h100", "nodes": 4, "attempt": 2, "attempts": 6,
                               "requeueAt": "2026-12-05T10:43:00Z", "state": "retrying"}


def test_a_booking_that_ran_out_is_not_blamed_on_capacity():
    expired = RETRY.replace("Retrying after failure: ProvisioningRequest is expired",
                            "Retrying after booking expired: Capacity reservation time is expired")
    (finding,) = diagnose(retrying(load(WAIT), expired))
    assert finding.fix.startswith("The nodes of attempt 2 were booked for the job, and the booking ran out (Capacity "
                                  "reservation time is expired). Kueue released the job's quota and deleted the "
                                  "request; its nodes are no longer booked for it, and cluster-autoscaler removes them "
                                  "after gpuPools[].idleMinutes idle unless another job takes them.")
    assert finding.fix.endswith(BOOKING) and "EC2 lacks" not in finding.fix


REJECTED = ('The workload is deactivated due to AdmissionCheck in Rejected state: "gpucluster-atomic-scale-up" '
            '(ProvisioningRequest is expired)')


def exhausted(bundle: Bundle) -> Bundle:
    """After the 6th attempt failed: the check Rejected, the Workload deactivated (workload_controller.go)."""
    retrying(bundle)
    wl = workload(bundle)
    wl["spec"]["active"] = False
    conditions(bundle, "Evicted").append(cond("Evicted", "True", "DeactivatedDueToAdmissionCheck", REJECTED,
                                              "2026-12-05T10:44:00Z"))
    wl["status"]["admissionChecks"] = [{"name": CHECK, "state": "Pending", "lastTransitionTime": "2026-12-05T10:44:00Z",
                                        "message": "Reset to Pending after eviction. Previously: Rejected"}]
    del wl["status"]["requeueState"]
    sixth = copy.deepcopy(bundle.of("Event")[-1])
    sixth.update(message=f'Created ProvisioningRequest: "{WL}-{CHECK}-6"', lastTimestamp="2026-12-05T10:35:00Z")
    rejected = copy.deepcopy(sixth)
    rejected.update(reason="AdmissionCheckRejected", type="Warning", lastTimestamp="2026-12-05T10:44:00Z",
                    message='Deactivated due to AdmissionCheck in Rejected state: "gpucluster-atomic-scale-up" '
                            '(ProvisioningRequest is expired)', source={"component": "kueue-workload-controller"})
    bundle.objects["Event"] += [sixth, rejected]
    return bundle


def test_retries_exhausted_the_job_is_deactivated_and_doctor_says_how_to_start_it_again():
    (finding,) = diagnose(exhausted(load(WAIT)))
    assert finding.title == (f"Workload {WL} was deactivated: Kueue gave up on getting all 4 nodes of pool h100 after "
                             "6 attempts")
    assert texts(finding) == [
        ("condition", f"Workload/{WL}", f"Evicted=True reason DeactivatedDueToAdmissionCheck: {REJECTED}"),
        ("status", f"Workload/{WL}", f"admission check {CHECK} Pending: Reset to Pending after eviction. Previously: "
                                     "Rejected"),
        ("event", f"Workload/{WL} (from kueue-workload-controller)", 'Warning AdmissionCheckRejected: Deactivated due to '
         'AdmissionCheck in Rejected state: "gpucluster-atomic-scale-up" (ProvisioningRequest is expired)')]
    assert finding.fix == (
        f"Kueue gave up (ProvisioningRequest is expired) and will not ask again; no node was added for it. {CAPACITY}. "
        f"Then start it again: `kubectl patch workload -n training {WL} --type merge -p "
        "'{\"spec\":{\"active\":true}}'`")
    assert finding.details["state"] == "deactivated" and finding.details["attempt"] == 6


def test_a_rejected_check_before_kueue_deactivates_is_already_the_end():
    bundle = load(WAIT)
    check = workload(bundle)["status"]["admissionChecks"][0]
    check.update(state="Rejected", message="CapacityRevoked: the nodes are gone")
    (finding,) = diagnose(bundle)
    assert finding.details["state"] == "deactivated" and finding.details["attempt"] == 1
    assert finding.title == (f"Workload {WL} was deactivated: Kueue gave up on getting all 4 nodes of pool h100 after "
                             "1 attempt")


def test_with_its_nodes_provisioned_kueue_places_the_job_on_a_second_pass():
    bundle = load(DOMAIN)
    bundle.objects["Event"] = [e for e in bundle.events if e["reason"] != "SecondPassFailed"]
    (finding,) = diagnose(bundle)
    assert finding.cause == WAIT
    assert finding.title == (f"Workload {WL}: cluster-autoscaler has asked for all 4 nodes of pool h100; Kueue places "
                             "it on the network topology once they are Ready (its second pass)")
    assert texts(finding) == [
        ("condition", f"ProvisioningRequest/{PR}", "Provisioned=True reason CapacityIsProvisioned: Capacity is found "
                                                   "in the cluster"),
        ("condition", f"Workload/{WL}", "Admitted=False reason PendingDelayedTopologyRequests: There are pending "
                                        "delayed topology requests"),
        ("status", f"Workload/{WL}", "pod set node: delayedTopologyRequest Pending, no topologyAssignment")]
    assert finding.fix == (
        f"{JOIN}. Kueue places the job on the network topology once all 4 nodes are Ready with GPUs. If that is longer "
        "than the 10-min booking (normal for p5 from zero), Kueue asks again, once or twice, and a retry finds the "
        "booting nodes: nothing to do. If it lasts once they are Ready, they may not fit the job's placement; doctor "
        "says so (network-domain) once Kueue reports it")


def test_an_admitted_or_finished_job_or_one_without_the_check_is_not_waiting():
    for field, value in (("Admitted", "True"), ("Finished", "True")):
        bundle = load(WAIT)
        conditions(bundle, field).append(cond(field, value, field, "", "2026-12-05T10:44:00Z"))
        assert rules_provisioning.waiting_for_all_nodes(bundle) == [], field
    bundle = load(WAIT)
    workload(bundle)["status"]["admissionChecks"][0]["name"] = "another-check"
    assert rules_provisioning.waiting_for_all_nodes(bundle) == []
    bundle = load(WAIT)
    workload(bundle)["spec"]["active"] = False  # deactivated for another reason: not this rule's
    assert rules_provisioning.waiting_for_all_nodes(bundle) == []


@pytest.mark.parametrize("path, value", [
    (("status", "admissionChecks"), "garbage"), (("status", "admissionChecks"), [None, 3]),
    (("spec", "podSets"), None), (("status", "requeueState"), "soon"), (("status", "admission"), [])])
def test_odd_fields_never_crash(path, value):
    bundle = retrying(load(WAIT))
    target = workload(bundle)
    target[path[0]][path[1]] = value
    bundle.of("Event")[-1]["message"] = 42
    for rule in (rules_provisioning.waiting_for_all_nodes, rules_placement.network_domain):
        rule(bundle)


# -- cannot fit in one network domain --------------------------------------------------------------------


def test_the_report_of_a_job_that_cannot_fit_in_one_network_domain(capsys, monkeypatch):
    assert report(capsys, monkeypatch, DOMAIN) == [
        "doctor: job pretrain in namespace training: 1 cause found", "",
        f"1. [{DOMAIN}] Workload {WL} cannot fit in one network domain: its 4 pods must share one "
        "topology.k8s.aws/network-node-layer-3 domain, and the roomiest has room for 3",
        f"   event: Workload/{WL} (from kueue-admission), 2026-12-05T10:39:30Z",
        f"     Warning SecondPassFailed: {NOT_FIT}",
        f"   status: Workload/{WL}, no time recorded",
        "     pod set node: 4 pods, kueue.x-k8s.io/podset-required-topology topology.k8s.aws/network-node-layer-3",
        "   status: Nodes of pool h100, no time recorded",
        f"     {DOMAINS}",
        "   fix: The job requires all 4 pods in one topology.k8s.aws/network-node-layer-3 domain",
        "   (jobs[].placement policy required; the pod set's kueue.x-k8s.io/podset-required-topology), and",
        "   Kueue finds room for 3 at most in any one now (nn-1f8b3d6a2c9e5074b: 3 of its 8 nodes free). Of",
        "   the 16 nodes Kueue counted, 12 have no room left for one pod. The nodes cluster-autoscaler",
        "   provisioned for the job are booked for it until 10:40:12Z; if Kueue cannot place it by then, the",
        "   request expires and Kueue asks again (5 times, then it deactivates the job). Wait for the jobs in",
        "   a domain to end; or run it with placement: {policy: preferred} (Kueue packs the pods as close as",
        "   the free nodes allow and spreads them only when it must); or require a broader layer, placement:",
        "   {policy: required, layer: 2} (layer 1 is the broadest); or give it fewer nodes (jobs[].nodes)", "",
        "Read from the bundle in tests/data/doctor/network-domain/, collected 2026-12-05T10:39:45Z: 4 Events,",
        "17 Nodes, 1 TrainJob, 1 Workload, 1 ClusterQueue; 0 container logs; Auto Scaling activities skipped:",
        "no AWS credentials."]
    (finding,) = diagnose(load(DOMAIN))
    assert finding.fix == (
        "The job requires all 4 pods in one topology.k8s.aws/network-node-layer-3 domain (jobs[].placement policy "
        "required; the pod set's kueue.x-k8s.io/podset-required-topology), and Kueue finds room for 3 at most in any "
        "one now (nn-1f8b3d6a2c9e5074b: 3 of its 8 nodes free). Of the 16 nodes Kueue counted, 12 have no room left "
        "for one pod. The nodes cluster-autoscaler provisioned for the job are booked for it until 10:40:12Z; if Kueue "
        "cannot place it by then, the request expires and Kueue asks again (5 times, then it deactivates the job)."
        + PLACE_FIX)
    assert finding.details == {
        "workload": WL, "podSet": "node", "pods": 4, "fit": 3, "policy": "required",
        "level": "topology.k8s.aws/network-node-layer-3", "topology": "gpucluster-network-3", "pass": "second",
        "excluded": 'resource "cpu": 12',
        "domains": [{"domain": "nn-1f8b3d6a2c9e5074b", "nodes": 8, "free": 3},
                    {"domain": "nn-3d7a1c5e9b2f6480d", "nodes": 2, "free": 1},
                    {"domain": "nn-2a5c8e1b4d7f903c6", "nodes": 6, "free": 0}]}


SYSTEM_REASON = ("insufficient quota for cpu in flavor system, previously considered podsets requests (0) + current "
                 "podset request (614400m) > maximum capacity (12)")


def first_pass(bundle: Bundle, reason: str) -> Bundle:
    """A pool without atomicScaleUp: no check, no request; the TAS reason is the QuotaReserved message, after the
    system flavor's (the flavor assigner sorts a pod set's reasons)."""
    del bundle.objects["ProvisioningRequest"]
    wl = workload(bundle)
    del wl["status"]["admissionChecks"], wl["status"]["admission"]
    wl["status"]["conditions"] = [cond("QuotaReserved", "False", "Pending", "couldn't assign flavors to pod set node: "
                                       f"{SYSTEM_REASON}, {reason}", "2026-12-05T10:30:01Z")]
    bundle.objects["Event"] = []
    return bundle


def test_on_a_pool_without_atomic_scale_up_the_quota_message_says_it_and_waiting_for_quota_does_not():
    reason = NOT_FIT.split(": ", 1)[1]
    bundle = first_pass(load(DOMAIN), reason)
    (finding,) = diagnose(bundle)
    assert finding.cause == DOMAIN and finding.details["pass"] == "first"
    assert texts(finding)[0] == ("condition", f"Workload/{WL}", "QuotaReserved=False reason Pending: couldn't assign "
                                                                 f"flavors to pod set node: {SYSTEM_REASON}, {reason}")
    assert finding.fix == (
        "The job requires all 4 pods in one topology.k8s.aws/network-node-layer-3 domain (jobs[].placement policy "
        "required; the pod set's kueue.x-k8s.io/podset-required-topology), and Kueue finds room for 3 at most in any "
        "one now (nn-1f8b3d6a2c9e5074b: 3 of its 8 nodes free). Of the 16 nodes Kueue counted, 12 have no room left "
        "for one pod." + PLACE_FIX)
    # the same Workload without this rule: waiting-for-quota would have read the message as a quota wait
    from bootstrap.doctor.kueue import rules_queue
    assert [f.cause for f in rules_queue.waiting_for_quota(bundle)] == ["waiting-for-quota"]


def preferred(bundle: Bundle) -> Bundle:
    pod_set = workload(bundle)["spec"]["podSets"][0]
    pod_set["topologyRequest"]["preferred"] = pod_set["topologyRequest"].pop("required")
    notes = pod_set["template"]["metadata"]["annotations"]
    notes[ptopo.PREFERRED_ANNOTATION] = notes.pop(ptopo.REQUIRED_ANNOTATION)
    bundle.extra["gpusInUse"]["nodes"]["ip-10-0-71-17.ec2.internal"] = 8.0  # one new node taken: 3 free in all
    return bundle


def test_without_the_required_annotation_it_is_the_pool_that_lacks_room():
    bundle = preferred(load(DOMAIN))
    (finding,) = diagnose(bundle)
    assert finding.title == (f"Workload {WL} does not fit on the network topology: room for 3 of its 4 pods on pool "
                             "h100")
    assert texts(finding)[1:] == [
        ("status", f"Workload/{WL}", "pod set node: 4 pods, kueue.x-k8s.io/podset-preferred-topology "
                                     "topology.k8s.aws/network-node-layer-3"),
        ("status", "Nodes of pool h100", "pool h100: 16 nodes, 3 free")]
    assert finding.fix.startswith("The job's pods prefer one topology.k8s.aws/network-node-layer-3 domain but may "
                                  "spread, yet Kueue finds room for only 3 of 4 on pool h100 (3 of its 16 nodes free).")
    assert finding.fix.endswith("It starts when running jobs free enough nodes; or give it fewer nodes (jobs[].nodes)")
    assert "placement: {policy: preferred}" not in finding.fix and finding.details["policy"] == "preferred"


def test_without_any_annotation_the_job_may_spread_anywhere():
    bundle = preferred(load(DOMAIN))
    pod_set = workload(bundle)["spec"]["podSets"][0]
    del pod_set["topologyRequest"]["preferred"], pod_set["template"]["metadata"]["annotations"][ptopo.PREFERRED_ANNOTATION]
    (finding,) = diagnose(bundle)
    assert texts(finding)[1] == ("status", f"Workload/{WL}", "pod set node: 4 pods, no topology annotation")
    assert finding.fix.startswith("The job's pods may spread over its domains, yet Kueue finds room for only 3 of 4")
    assert finding.details["policy"] == "none" and finding.details["level"] is None


def test_a_pool_with_no_node_at_the_level_says_kueue_places_only_on_nodes_that_exist():
    bundle = first_pass(load(DOMAIN), "no topology domains at level: topology.k8s.aws/network-node-layer-3")
    bundle.objects["Node"] = [n for n in bundle.of("Node") if n["metadata"]["labels"].get("gpucluster.io/pool") != "h100"]
    del bundle.extra["gpusInUse"]
    (finding,) = diagnose(bundle)
    assert finding.title == (f"Workload {WL} cannot be placed on the network topology: no node of pool h100 has "
                             "topology.k8s.aws/network-node-layer-3")
    assert texts(finding)[2] == ("status", "Nodes of pool h100", "pool h100: no nodes")
    assert finding.fix == (
        "Kueue found no topology.k8s.aws/network-node-layer-3 domain among pool h100's nodes. Kueue places pods only "
        "on nodes that exist, and pool h100 has 0: with gpuPools[].atomicScaleUp the job's ProvisioningRequest adds its "
        "nodes before Kueue places it; without it nothing adds nodes for a job Kueue has not admitted. Or run the job "
        "with placement: {policy: none}")


def test_none_fits_and_the_new_nodes_have_not_joined_yet():
    bundle = load(DOMAIN)
    event = next(e for e in bundle.events if e["reason"] == "SecondPassFailed")
    event["message"] = ('couldn\'t assign flavors to pod set node: topology "gpucluster-network-3" doesn\'t allow to '
                        'fit any of 4 pod(s). Total nodes: 3; excluded: resource "cpu": 3')
    bundle.objects["Node"] = bundle.of("Node")[:4]  # the system node and three busy ones
    (finding,) = diagnose(bundle)
    assert finding.title.endswith("and the roomiest has room for 0")
    assert (" Of the 3 nodes Kueue counted, 3 have no room left for one pod. Kueue places pods only on nodes that "
            "exist, and pool h100 has 3: the nodes cluster-autoscaler asked for may not have joined yet (a node with "
            "EFA takes up to 25 min).") in finding.fix


def test_what_runs_on_the_nodes_unread_gives_their_count_only():
    bundle = load(DOMAIN)
    del bundle.extra["gpusInUse"]
    (finding,) = diagnose(bundle)
    assert texts(finding)[2][2] == ("pool h100: 16 nodes in 3 topology.k8s.aws/network-node-layer-3 domains: "
                                    "nn-1f8b3d6a2c9e5074b: 8; nn-2a5c8e1b4d7f903c6: 6; nn-3d7a1c5e9b2f6480d: 2 "
                                    "(what runs on them was not read)")
    assert "Kueue finds room for 3 at most in any one now." in finding.fix and finding.details["domains"] is None


def test_the_broader_layer_comes_from_the_topology_and_layer_1_has_none():
    bundle = load(DOMAIN)
    topology = bundle.of("Topology")[0]
    del topology["spec"]["levels"][1]  # a topology of layers 1 and 3: the one above 3 is 1
    assert "placement: {policy: required, layer: 1}" in diagnose(bundle)[0].fix
    bundle = load(DOMAIN)
    for ps in workload(bundle)["spec"]["podSets"]:
        ps["topologyRequest"]["required"] = hw.layer_label(1)
    assert "broader layer" not in diagnose(bundle)[0].fix


def test_a_second_pass_failure_from_an_earlier_attempt_is_not_today_s():
    bundle = load(DOMAIN)
    reserved = next(c for c in workload(bundle)["status"]["conditions"] if c["type"] == "QuotaReserved")
    reserved["lastTransitionTime"] = "2026-12-05T10:39:40Z"  # reserved again after the event
    (finding,) = diagnose(bundle)
    assert finding.cause == WAIT and finding.details["state"] == "placing"


def test_messages_kueue_writes_are_parsed():
    parse = rules_placement.parse
    assert parse(NOT_FIT) == {"podSet": "node", "topology": "gpucluster-network-3", "pods": 4, "fit": 3, "unit": "pod",
                              "total": 16, "excluded": 'resource "cpu": 12'}
    slices = parse('couldn\'t assign flavors to pod set workers: topology "t" doesn\'t allow to fit any of 2 slice(s). '
                   "Pending the preemption of 1 workload(s)")
    assert slices == {"podSet": "workers", "topology": "t", "pods": 2, "fit": 0, "unit": "slice", "total": None,
                      "excluded": None}
    two = parse("couldn't assign flavors to pod set launcher: insufficient unused quota for cpu in flavor system, 1 more "
                'needed; couldn\'t assign flavors to pod set worker: topology "t" allows to fit only 1 out of 2 pod(s). '
                'Total nodes: 5; excluded: nodeSelector: 2, taint "x": 1')
    assert (two["podSet"], two["fit"], two["excluded"]) == ("worker", 1, 'nodeSelector: 2, taint "x": 1')
    assert parse("couldn't assign flavors to pod set worker: insufficient unused quota for nvidia.com/gpu in flavor "
                 "pool-h100, 8 more needed") is None


def test_the_bundles_of_other_causes_name_what_they_named_before():
    for case in ("waiting-for-quota", "local-waiting-for-quota", "waiting-for-nodes", "team-over-share",
                 "local-team-over-share-set-aside", "pods-ready-timeout", "healthy"):
        bundle = load(case)
        assert rules_placement.network_domain(bundle) == rules_provisioning.waiting_for_all_nodes(bundle) == [], case
        assert not (set(PLACEMENT_KINDS) & set(bundle.objects)), case


# -- the bundle and --collect -----------------------------------------------------------------------------


def test_placement_kinds_are_read_and_written_but_kinds_doctor_does_not_read_are_refused(tmp_path):
    assert KINDS == ("Pod", "Event", "Node", "MPIJob", "TrainJob", "JobSet", "Workload", "ClusterQueue")
    bundle = load(DOMAIN)
    back = read_bundle(write_bundle(bundle, tmp_path / "b"))
    assert back.of("ProvisioningRequest") == bundle.of("ProvisioningRequest") and back.of("Topology")
    assert back.extra["gpusInUse"] == bundle.extra["gpusInUse"]
    (tmp_path / "b" / "objects" / "PodTemplate.json").write_text("[]")
    with pytest.raises(BundleError, match="objects/PodTemplate.json: not a kind doctor reads .*ProvisioningRequest, "
                                          "Topology"):
        read_bundle(tmp_path / "b")


@pytest.fixture
def served_kinds(monkeypatch):
    """The fake API server serves the placement kinds (a cluster with the autoscaler's CRD)."""
    for kind in (collect_placement.PROVISIONING_REQUEST, collect_placement.TOPOLOGY):
        monkeypatch.setitem(kinds.BY_KIND, kind.kind, kind)


def _collect(capsys, tmp_path, fake: FakeKube, job: str = "pretrain") -> tuple[int, dict]:
    fake.start()
    try:
        code = doctor.main([job, "--kubeconfig", fake.write_kubeconfig(tmp_path / "kc"), "--collect",
                            str(tmp_path / "b"), "--json"])
    finally:
        fake.stop()
    return code, json.loads(capsys.readouterr().out)


def _objects(bundle: Bundle, *skip: str) -> list[dict]:
    return [json.loads(json.dumps(o)) for kind, items in bundle.objects.items() if kind not in skip for o in items]


def _running(node: str, index: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"other-{index}", "namespace": "language"},
            "spec": {"nodeName": node, "containers": [{"name": "node", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]},
            "status": {"phase": "Running"}}


def test_collect_reads_the_request_the_topology_and_what_runs_on_the_pool_and_reads_back_the_same(
        capsys, tmp_path, served_kinds):
    source = load(DOMAIN)
    other = copy.deepcopy(source.of("ProvisioningRequest")[0])
    other["metadata"].update(name="someone-else-1", ownerReferences=[{"uid": "not-ours"}])
    fake = FakeKube([*_objects(source), other])
    busy = [n for n, gpus in source.extra["gpusInUse"]["nodes"].items() if gpus]
    fake.collections["/api/v1/pods"] = {f"other-{i}": _running(n, i) for i, n in enumerate(busy)}
    fake.collections["/api/v1/pods"]["done"] = {**_running(busy[0], 99), "status": {"phase": "Succeeded"}}
    code, live = _collect(capsys, tmp_path, fake)
    back = read_bundle(tmp_path / "b")
    assert code == 1 and [f["cause"] for f in live["findings"]] == [DOMAIN]
    assert live["findings"] == [f.as_json() for f in causes.diagnose(back)] == [
        f.as_json() for f in causes.diagnose(source)]
    assert [p["metadata"]["name"] for p in back.of("ProvisioningRequest")] == [PR]
    assert [t["metadata"]["name"] for t in back.of("Topology")] == ["gpucluster-network-3"]
    assert back.extra["gpusInUse"] == {"read": "GPU requests of the 12 running or pending pods of the cluster",
                                       "nodes": source.extra["gpusInUse"]["nodes"]}
    pods = [r for r in fake.requests if r.path == "/api/v1/pods"]
    assert [r.query["fieldSelector"] for r in pods] == ["status.phase!=Succeeded,status.phase!=Failed"]
    assert live["read"]["notes"] == []


def test_collect_of_a_job_waiting_for_its_nodes_reads_its_request_only(capsys, tmp_path, served_kinds):
    source = load(WAIT)
    code, live = _collect(capsys, tmp_path, FakeKube(_objects(source)))
    back = read_bundle(tmp_path / "b")
    assert [f["cause"] for f in live["findings"]] == [WAIT] and code == 1
    assert live["findings"] == [f.as_json() for f in causes.diagnose(back)]
    (read,), (made,) = causes.diagnose(back), causes.diagnose(source)
    assert (read.title, read.evidence, read.details) == (made.title, made.evidence, made.details)  # collected now:
    assert "(Kueue asked " in read.fix  # its age differs
    assert "Topology" not in back.objects and "gpusInUse" not in back.extra


def test_a_cluster_without_the_autoscaler_s_crd_notes_it_and_says_what_the_workload_does(capsys, tmp_path):
    source = load(WAIT)
    code, live = _collect(capsys, tmp_path, FakeKube(_objects(source, "ProvisioningRequest")))
    assert code == 1 and [f["cause"] for f in live["findings"]] == [WAIT]
    assert live["read"]["notes"] == ["ProvisioningRequest: not served by the cluster (its CRD is not installed)"]
    assert live["findings"][0]["details"]["provisioningRequest"] is None
    assert not (tmp_path / "b" / "objects" / "ProvisioningRequest.json").exists()


@pytest.mark.parametrize("case, job", [("waiting-for-quota", "llama"), ("waiting-for-nodes", "llama"),
                                       ("healthy", "llama")])
def test_a_job_waiting_on_neither_is_collected_as_before(capsys, tmp_path, case, job):
    source = load(case)
    fake = FakeKube(_objects(source))
    code, live = _collect(capsys, tmp_path, fake, source.job or job)
    assert not [r for r in fake.requests if r.path.endswith(("/provisioningrequests", "/topologies"))
                or r.path == "/api/v1/pods"]
    assert live["read"]["notes"] == [] and not (tmp_path / "b" / "objects" / "Topology.json").exists()
    meta = json.loads((tmp_path / "b" / "bundle.json").read_text())
    assert "gpusInUse" not in meta
    assert [f["cause"] for f in live["findings"]] == [f.cause for f in causes.diagnose(source)]
