"""doctor's team causes (issue 29): a job over its team's guarantee waiting to borrow (whom it waits on), a job
preempted so its lender gets its GPUs back (which team, requeued), a team at its monthly budget; variations of the
bundles tests/data/doctor/team-*, and a stack without teams diagnosed as before."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from bootstrap.doctor import causes, collect
from bootstrap.doctor.bundle import Bundle, read_bundle
from bootstrap.doctor.findings import condition
from bootstrap.doctor.kueue import cohort, rules_teams
from bootstrap.verbs.jobs import doctor
from components.core.config.teams import TeamConfig
from components.core.kube import queueing
from components.core.teams import queues as teams
from tests.conftest import stack_config
from tests.kube_fake import FakeKube
from tests.test_doctor import DATA

OVER, PREEMPTED, BUDGET = "team-over-share", "team-preempted", "team-budget-reached"
VISION, LANGUAGE, TRAINING = "gpucluster-team-vision", "gpucluster-team-language", "gpucluster"
GPU = "nvidia.com/gpu"
PREEMPTION = ("Preempted to accommodate a workload (UID: e81f6c2d-4a9b-4e07-93d5-1c6b8a2f0d79, JobUID: "
              "6c3a9e1f-0b7d-4258-a4e6-2d9f8c1b5e03) due to reclamation within the cohort; preemptor path: "
              "/gpucluster/gpucluster-team-language; preemptee path: /gpucluster/gpucluster-team-vision")


def load(case: str) -> Bundle:
    return read_bundle(DATA / case)


def queue(bundle: Bundle, cq_name: str) -> dict:
    return next(cq for cq in bundle.of("ClusterQueue") if cq["metadata"]["name"] == cq_name)


def gpu_row(cq: dict, where: str = "spec") -> dict:
    flavors = (cq["spec"]["resourceGroups"][0]["flavors"] if where == "spec" else cq["status"][where])
    pool = next(f for f in flavors if f["name"] == "pool-h100")
    return next(r for r in pool["resources"] if r["name"] == "nvidia.com/gpu")


def set_usage(cq: dict, total: str, borrowed: str) -> None:
    for key in ("flavorsReservation", "flavorsUsage"):
        gpu_row(cq, key).update(total=total, borrowed=borrowed)


def workload(bundle: Bundle) -> dict:
    (wl,) = bundle.of("Workload")
    return wl


def cond(bundle: Bundle, ctype: str) -> dict:
    return condition(workload(bundle), ctype)


def diagnose(bundle: Bundle) -> list:
    return causes.diagnose(bundle)


# -- the bundles are the prod stack's queues --------------------------------------------------------


def test_the_bundles_queues_are_what_the_program_renders_for_the_prod_teams():
    cfg = stack_config("prod")
    rendered = {TRAINING: teams.training_cluster_queue(cfg.gpu_pools, cfg.system_nodes, cfg.training_namespace,
                                                       cfg.teams)}
    for team in cfg.teams:
        rendered[teams.cluster_queue_name(team)] = teams.team_cluster_queue(team, cfg.gpu_pools, cfg.system_nodes)
    for case in (OVER, PREEMPTED, BUDGET):
        served = {cq["metadata"]["name"]: cq["spec"] for cq in load(case).of("ClusterQueue")}
        assert served == {name: cq["spec"] for name, cq in rendered.items()}, case


def test_doctor_reads_queue_names_as_the_program_writes_them():
    vision = TeamConfig(name="vision")
    assert teams.cluster_queue_name(vision) == cohort.TEAM_QUEUE_PREFIX + "vision" == VISION
    assert cohort.team_of(VISION) == "vision" and cohort.team_of(TRAINING) is None
    pool = SimpleNamespace(name="h100")
    assert queueing.flavor_name(pool) == cohort.FLAVOR_PREFIX + "h100" and cohort.pool_of("pool-h100") == "h100"
    assert {cq["spec"]["cohortName"] for cq in load(OVER).of("ClusterQueue")} == {teams.COHORT}


@pytest.mark.parametrize("text, number", [("32", 32), ("614400m", 614.4), ("16Gi", 16 * 2 ** 30), ("1.5k", 1500),
                                          (8, 8), ("", None), ("8 GPUs", None), (None, None), (True, None)])
def test_quantities(text, number):
    assert cohort.quantity(text) == number


# -- over its share, waiting to borrow --------------------------------------------------------------


def test_over_share_says_the_guarantee_what_is_borrowed_what_the_job_needs_and_whom_it_waits_on():
    (finding,) = diagnose(load(OVER))
    assert finding.cause == OVER
    assert finding.title == ("Workload trainjob-detector-7b2d9 waits to borrow: team vision uses 32 of its 32 "
                             "guaranteed GPUs of pool-h100 (+16 borrowed) and the job needs 16 more")
    assert finding.details == {
        "queue": VISION, "flavor": "pool-h100", "guaranteed": 32, "using": 48, "borrowed": 16, "borrowingLimit": None,
        "request": 16, "moreNeeded": 16, "maximum": None,
        "heldBy": "the training namespace (training): 48 of its 64 guaranteed; team language: 32 of its 32 guaranteed",
        "holders": [{"queue": TRAINING, "using": 48, "borrowed": 0}, {"queue": LANGUAGE, "using": 32, "borrowed": 0}]}
    assert finding.fix.startswith("the job asks 16 GPUs, past team vision's guarantee, and the cohort has none idle "
                                  "to lend (it has no borrowing limit). The GPUs of pool-h100 are held by the "
                                  "training namespace (training): 48 of its 64 guaranteed; team language: 32 of its "
                                  "32 guaranteed.")
    assert "raise teams[].pools.h100.guaranteedGpus" in finding.fix
    assert [(e.source, e.where, e.text) for e in finding.evidence[1:]] == [
        ("status", f"ClusterQueue/{VISION}", "pool-h100 nvidia.com/gpu: reserved 48, borrowed 16; nominalQuota 32"),
        ("status", f"ClusterQueue/{TRAINING}", "pool-h100 nvidia.com/gpu: reserved 48, borrowed 0; nominalQuota 64"),
        ("status", f"ClusterQueue/{LANGUAGE}", "pool-h100 nvidia.com/gpu: reserved 32, borrowed 0; nominalQuota 32")]
    assert finding.evidence[0].text.startswith("QuotaReserved=False reason Pending: couldn't assign flavors to pod set "
                                               "node: insufficient quota for cpu in flavor system")


def test_at_its_borrowing_limit_the_team_waits_for_its_own_jobs():
    bundle = load(OVER)
    gpu_row(queue(bundle, VISION))["borrowingLimit"] = "16"
    (finding,) = diagnose(bundle)
    assert finding.cause == OVER and finding.details["borrowingLimit"] == 16
    assert finding.fix == ("team vision may borrow at most 16 GPUs of pool-h100 past its guarantee and borrows 16: the "
                           "job starts when team vision's own jobs free 16 GPUs, or raise "
                           "teams[].pools.h100.borrowLimitGpus")


def test_a_job_past_what_the_team_can_ever_hold():
    bundle = load(OVER)
    gpu_row(queue(bundle, VISION))["borrowingLimit"] = "16"
    set_usage(queue(bundle, VISION), "32", "0")
    cond(bundle, "QuotaReserved")["message"] = (
        "couldn't assign flavors to pod set node: insufficient quota for nvidia.com/gpu in flavor pool-h100, "
        "previously considered podsets requests (0) + current podset request (64) > maximum capacity (48), "
        "insufficient quota for nvidia.com/gpu in flavor system, previously considered podsets requests (0) + current "
        "podset request (64) > maximum capacity (0)")
    workload(bundle)["status"]["resourceRequests"][0]["resources"]["nvidia.com/gpu"] = "64"
    (finding,) = diagnose(bundle)
    assert finding.title == ("Workload trainjob-detector-7b2d9 asks 64 GPUs of pool-h100, more than team vision can "
                             "ever hold there (48)")
    assert finding.fix.startswith("team vision is guaranteed 32 GPUs of pool-h100 and its borrowing limit is 16 GPUs: "
                                  "the most it can hold is 48, so Kueue never admits this job. Lower jobs[].nodes")
    assert finding.details["maximum"] == 48 and finding.details["moreNeeded"] is None


def test_a_team_without_a_guarantee_on_the_pool_borrows_only():
    bundle = load(OVER)
    gpu_row(queue(bundle, VISION))["nominalQuota"] = "0"
    (finding,) = diagnose(bundle)
    assert finding.title == ("Workload trainjob-detector-7b2d9 waits to borrow: team vision has no guarantee on "
                             "pool-h100 and borrows 16 GPUs and the job needs 16 more")


def test_some_idle_gpus_and_a_preemption_under_way_are_said():
    bundle = load(OVER)
    reserved = cond(bundle, "QuotaReserved")
    reserved["message"] = reserved["message"].replace("nvidia.com/gpu in flavor pool-h100, 16 more needed",
                                                      "nvidia.com/gpu in flavor pool-h100, 8 more needed")
    reserved["message"] += ". Pending the preemption of 1 workload(s)"
    (finding,) = diagnose(bundle)
    assert "and the cohort has only 8 idle to lend" in finding.fix
    assert "Kueue is preempting 1 workload(s) for it." in finding.fix


def test_the_training_namespace_over_its_share_is_named_so():
    bundle = load(OVER)
    wl = workload(bundle)
    wl["metadata"]["namespace"] = "training"
    set_usage(queue(bundle, TRAINING), "64", "0")
    (finding,) = diagnose(bundle)
    assert finding.title.startswith("Workload trainjob-detector-7b2d9 waits to borrow: the training namespace "
                                    "(training) uses 64 of its 64 guaranteed GPUs")
    assert "raise gpuPools[].maxNodes" in finding.fix and "teams[].pools" not in finding.fix
    assert finding.details["heldBy"] == ("team vision: 32 of its 32 guaranteed + 16 borrowed; team language: 32 of "
                                         "its 32 guaranteed")


def test_within_its_guarantee_it_is_the_plain_wait_for_quota():
    # 16 used + 16 asked = its 32: Kueue reclaims what vision lent; no borrowing to explain.
    bundle = load(OVER)
    set_usage(queue(bundle, VISION), "16", "0")
    assert [f.cause for f in diagnose(bundle)] == ["waiting-for-quota"]


def _no_cohort(b: Bundle) -> None:
    for cq in b.of("ClusterQueue"):
        del cq["spec"]["cohortName"]


def _no_queues(b: Bundle) -> None:  # a team member's bundle: its Role cannot read ClusterQueues
    del b.objects["ClusterQueue"]


def _no_status(b: Bundle) -> None:
    for cq in b.of("ClusterQueue"):
        del cq["status"]


def _empty_spec(b: Bundle) -> None:
    for cq in b.of("ClusterQueue"):
        cq["spec"] = {"cohortName": "gpucluster"}


def _no_requests(b: Bundle) -> None:
    del workload(b)["status"]["resourceRequests"]


def _bad_quantities(b: Bundle) -> None:
    for cq in b.of("ClusterQueue"):
        for key in ("flavorsReservation", "flavorsUsage"):
            gpu_row(cq, key).update(total="lots", borrowed=None)


def _other_flavor(b: Bundle) -> None:
    reserved = cond(b, "QuotaReserved")
    reserved["message"] = reserved["message"].replace("pool-h100", "pool-a100")


@pytest.mark.parametrize("change, expected", [
    (_no_cohort, ["waiting-for-quota"]),  # a stack without teams: as before
    (_no_queues, ["waiting-for-quota"]),
    (_no_status, ["waiting-for-quota"]),
    (_bad_quantities, ["waiting-for-quota"]),
    (_other_flavor, ["waiting-for-quota"]),
    (_empty_spec, [OVER]),  # no quota row: guaranteed 0
    (_no_requests, [OVER]),  # the request is not needed when the queue is at its guarantee
])
def test_missing_or_odd_fields_never_crash_and_fall_back(change, expected):
    bundle = load(OVER)
    change(bundle)
    assert [f.cause for f in diagnose(bundle)] == expected


def test_the_bundles_without_teams_name_what_they_named_before():
    for case in ("waiting-for-quota", "local-waiting-for-quota", "queue-held", "healthy"):
        bundle = load(case)
        assert rules_teams.team_over_share(bundle) == rules_teams.team_preempted(bundle) == []
        assert rules_teams.team_budget_reached(bundle) == [] and bundle.teams == {}


# -- set aside unevaluated: no QuotaReserved, the wait inferred -------------------------------------

SET_ASIDE = "local-team-over-share-set-aside"  # captured: the real Kueue set a 1-node job aside
NOTE = ("Kueue has written no QuotaReserved condition on the Workload in the 2700 s since its creation: it has not "
        "evaluated the job because an equivalent one (the same pod sets and priority) failed to fit, and sets such "
        "jobs aside until its cohort's usage changes (SchedulingEquivalenceHashing, on by default since Kueue v0.18: "
        "pkg/cache/queue/cluster_queue.go PushOrUpdate). doctor inferred the wait from the job's pod sets and the "
        "ClusterQueues' quota and usage")


def set_aside(bundle: Bundle) -> Bundle:
    """The bundle's Workload as Kueue leaves one it set aside: no QuotaReserved condition and no resourceRequests
    (only the scheduler writes them), its pod set's template the one the real Kueue stored for a prod job."""
    wl = workload(bundle)
    wl["status"] = {"conditions": [c for c in wl["status"]["conditions"] if c["type"] != "QuotaReserved"]}
    template = workload(load(SET_ASIDE))["spec"]["podSets"][0]["template"]
    wl["spec"]["podSets"][0]["template"] = copy.deepcopy(template)
    return bundle


def test_a_job_set_aside_gets_the_over_share_kueue_would_have_said():
    (said,) = diagnose(load(OVER))
    (inferred,) = diagnose(set_aside(load(OVER)))
    assert (inferred.cause, inferred.title) == (OVER, said.title)
    assert inferred.details == {**said.details, "inferred": True, "available": 0}
    assert inferred.evidence[1:] == said.evidence[1:]  # the three ClusterQueues' quota and usage
    assert (inferred.evidence[0].where, inferred.evidence[0].text, inferred.evidence[0].time) == (
        "Workload/trainjob-detector-7b2d9", "not admitted, no QuotaReserved condition 2700 s after its creation; pod set "
        "node: 2 x 8 nvidia.com/gpu, nodeSelector gpucluster.io/pool=h100 (flavor pool-h100)", "2026-12-05T10:00:00Z")
    assert inferred.fix == f"{said.fix}. {NOTE}"


def test_the_real_kueue_s_set_aside_job_is_over_share():
    bundle = load(SET_ASIDE)
    assert condition(workload(bundle), "QuotaReserved") is None and "resourceRequests" not in workload(bundle)["status"]
    (finding,) = diagnose(bundle)
    assert finding.title == ("Workload trainjob-vision-one-19f48 waits to borrow: team vision uses 32 of its 32 "
                             "guaranteed GPUs of pool-h100 (+64 borrowed) and the job needs 8 more")
    assert finding.details == {
        "queue": VISION, "flavor": "pool-h100", "guaranteed": 32, "using": 96, "borrowed": 64, "borrowingLimit": None,
        "request": 8, "moreNeeded": 8, "maximum": None, "heldBy": "team language: 32 of its 32 guaranteed",
        "holders": [{"queue": LANGUAGE, "using": 32, "borrowed": 0}], "inferred": True, "available": 0}
    assert "in the 12 s since its creation" in finding.fix


def test_an_old_quota_reserved_condition_that_says_nothing_of_quota_is_inferred_past():
    bundle = set_aside(load(OVER))
    old = {"type": "QuotaReserved", "status": "False", "reason": "Pending", "lastTransitionTime": "2026-12-05T10:00:01Z",
           "message": "Workload no longer fits after processing another workload"}  # scheduler.go L477
    workload(bundle)["status"]["conditions"].append(old)
    (finding,) = diagnose(bundle)
    assert finding.cause == OVER and finding.details["inferred"] is True
    assert [e.text for e in finding.evidence[:2]] == [
        "not admitted, no quota message 2700 s after its creation; pod set node: 2 x 8 nvidia.com/gpu, nodeSelector "
        "gpucluster.io/pool=h100 (flavor pool-h100)",
        "QuotaReserved=False reason Pending: Workload no longer fits after processing another workload"]
    assert ("Kueue has not evaluated the Workload since its last QuotaReserved condition, which says nothing of quota: "
            "it has not evaluated the job because an equivalent one") in finding.fix


def test_set_aside_within_its_guarantee_is_the_plain_wait_for_quota():
    # vision holds 16 of its 32 and asks 16: within its guarantee, but the training namespace borrowed the rest.
    bundle = set_aside(load(OVER))
    set_usage(queue(bundle, VISION), "16", "0")
    set_usage(queue(bundle, TRAINING), "80", "16")
    (finding,) = diagnose(bundle)
    assert (finding.cause, finding.title) == ("waiting-for-quota",
                                              "Workload trainjob-detector-7b2d9 waits for quota in the ClusterQueue")
    assert finding.fix.startswith("team vision may take 0 more GPUs of pool-h100 now (at most 128) and the job asks "
                                  "16: other admitted jobs hold the pool's quota; this one starts when they finish")
    assert finding.fix.endswith(NOTE)
    assert finding.details == {"queue": VISION, "flavor": "pool-h100", "request": 16, "maximum": 128,
                               "inferred": True, "available": 0}


@pytest.mark.parametrize("count, start", [
    (3, "the training namespace (training) may take 16 more GPUs of pool-h100 now (at most 64) and the job asks 24: "
        "other admitted jobs hold the pool's quota"),
    (9, "the training namespace (training) may take 16 more GPUs of pool-h100 now (at most 64) and the job asks 72: "
        "the job asks for more than the pool's whole quota"),
])
def test_set_aside_in_a_queue_without_a_cohort_is_waiting_for_quota(count, start):
    bundle = set_aside(load(OVER))  # a stack without teams: one queue, no cohort, the training namespace's
    _no_cohort(bundle)
    bundle.objects["ClusterQueue"] = [queue(bundle, TRAINING)]
    workload(bundle)["metadata"]["namespace"] = "training"
    workload(bundle)["spec"]["podSets"][0]["count"] = count
    (finding,) = diagnose(bundle)
    assert finding.cause == "waiting-for-quota" and finding.fix.startswith(start)
    assert finding.details["available"] == 16 and finding.details["maximum"] == 64


def test_set_aside_past_what_the_team_can_ever_hold():
    bundle = set_aside(load(OVER))
    gpu_row(queue(bundle, VISION))["borrowingLimit"] = "16"
    workload(bundle)["spec"]["podSets"][0]["count"] = 8
    (finding,) = diagnose(bundle)
    assert finding.title == ("Workload trainjob-detector-7b2d9 asks 64 GPUs of pool-h100, more than team vision can "
                             "ever hold there (48)")
    assert finding.details["maximum"] == 48 and finding.details["moreNeeded"] is None


@pytest.mark.parametrize("language, lending, borrowing, room", [
    ("32", None, None, (0, 128)),  # the bundle: every GPU of the cohort held
    ("32", "8", None, (0, 104)),  # language keeps 24 of its 32 to itself
    ("0", None, None, (32, 128)),  # language idle: its 32 lent
    ("0", "8", None, (8, 104)),  # it lends only 8 of them
    ("0", "8", "20", (4, 52)),  # vision borrows 16 and may borrow 20
    ("0", None, "16", (0, 48)),
])
def test_headroom_counts_as_kueue_does(language, lending, borrowing, room):
    bundle = load(OVER)
    set_usage(queue(bundle, LANGUAGE), language, "0")
    if lending:
        gpu_row(queue(bundle, LANGUAGE))["lendingLimit"] = lending
    if borrowing:
        gpu_row(queue(bundle, VISION))["borrowingLimit"] = borrowing
    assert cohort.headroom(bundle, queue(bundle, VISION), "pool-h100") == room


def test_headroom_of_a_queue_alone_and_of_unknown_usage():
    bundle = load(OVER)
    _no_cohort(bundle)
    assert cohort.headroom(bundle, queue(bundle, TRAINING), "pool-h100") == (16, 64)
    assert cohort.headroom(bundle, queue(bundle, VISION), "pool-h100") == (-16, 32)  # over-admitted: as Kueue says
    del queue(bundle, VISION)["status"]
    assert cohort.headroom(bundle, queue(bundle, VISION), "pool-h100") is None
    assert cohort.headroom(bundle, queue(bundle, VISION), "pool-a100") == (0, 0)  # no such flavor: nothing


def test_what_pod_sets_ask_launchers_limits_and_init_containers():
    from bootstrap.doctor.kueue import rules_unevaluated

    def pod_set(name, count, pool, containers, init=()):
        selector = {"gpucluster.io/pool": pool} if pool else {"gpucluster.io/role": "system"}
        return {"name": name, "count": count, "template": {"spec": {
            "nodeSelector": selector, "containers": containers, "initContainers": list(init)}}}

    def gpus(requests=None, limits=None):
        return {"resources": {**({"requests": requests} if requests else {}), **({"limits": limits} if limits else {})}}

    wl = {"spec": {"podSets": [
        pod_set("launcher", 1, None, [gpus({"cpu": "1"})]),
        pod_set("worker", 4, "p5", [gpus(limits={GPU: "8"})]),  # limits stand for requests
        pod_set("eval", 1, "p5", [gpus({GPU: "1"}), gpus({GPU: "1"})], init=[gpus({GPU: "4"})]),  # init: the most
        pod_set("tiny", 2, "g6e", [gpus({GPU: "1"})]),
    ]}}
    assert rules_unevaluated.asks(wl) == [
        {"flavor": "pool-g6e", "request": 2, "podSets": [("tiny", 2, 1)]},
        {"flavor": "pool-p5", "request": 36, "podSets": [("worker", 4, 8), ("eval", 1, 4)]}]



def _young(b: Bundle) -> None:
    b.collected_at = "2026-12-05T10:00:05Z"


def _no_collection_time(b: Bundle) -> None:
    b.collected_at = None


def _fits(b: Bundle) -> None:  # language idle: 32 free in the cohort, the job asks 16
    set_usage(queue(b, LANGUAGE), "0", "0")


def _no_pool(b: Bundle) -> None:
    del workload(b)["spec"]["podSets"][0]["template"]["spec"]["nodeSelector"]


def _no_template(b: Bundle) -> None:
    del workload(b)["spec"]["podSets"][0]["template"]


def _stopped(b: Bundle) -> None:
    condition(queue(b, VISION), "Active").update(status="False", reason="Stopped",
                                                 message="Can't admit new workloads: is stopped.")


def _timed_out(b: Bundle) -> None:
    workload(b)["status"]["conditions"].append({
        "type": "Evicted", "status": "True", "reason": "PodsReadyTimeout",
        "message": "Exceeded the PodsReady timeout vision/trainjob-detector-7b2d9"})


def _inactive(b: Bundle) -> None:
    workload(b)["spec"]["active"] = False


def _admitted(b: Bundle) -> None:
    workload(b)["status"]["admission"] = {"clusterQueue": VISION}


def _blocked(b: Bundle) -> None:
    workload(b)["status"]["conditions"].append({"type": "QuotaReserved", "status": "False", "reason": "Inadmissible",
                                                "message": f"ClusterQueue {VISION} is inactive"})


def _wrong_namespace(b: Bundle) -> None:  # pkg/workload/resources.go L42, under the legacy reason
    workload(b)["status"]["conditions"].append({"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                                "message": "workload namespace doesn't match ClusterQueue selector"})


@pytest.mark.parametrize("change, expected", [
    (_young, []), (_no_collection_time, []), (_fits, []), (_no_pool, []), (_no_template, []),
    (_no_queues, []), (_no_status, []), (_inactive, []), (_admitted, []), (_wrong_namespace, []),
    (_stopped, ["queue-inactive"]), (_blocked, ["queue-inactive"]), (_timed_out, ["pods-ready-timeout"]),
])
def test_set_aside_without_evidence_is_not_a_cause(change, expected):
    bundle = set_aside(load(OVER))
    change(bundle)
    assert [f.cause for f in diagnose(bundle)] == expected


@pytest.mark.parametrize("path, value", [
    (("spec", "podSets"), "node"), (("spec", "podSets"), [None]), (("spec", "podSets", 0, "count"), "2"),
    (("spec", "podSets", 0, "template"), {"spec": None}), (("spec", "podSets", 0, "template", "spec", "containers"),
                                                           [None, {"resources": {"requests": None}}]),
    (("spec", "podSets", 0, "template", "spec", "containers", 0, "resources", "requests", GPU), "eight"),
    (("metadata", "creationTimestamp"), "yesterday"), (("metadata", "creationTimestamp"), 5), (("spec",), None),
])
def test_odd_workload_fields_never_crash_and_name_nothing(path, value):
    bundle = set_aside(load(OVER))
    obj = workload(bundle)
    for key in path[:-1]:
        obj = obj[key]
    obj[path[-1]] = value
    assert diagnose(bundle) == []


def test_a_workload_with_no_status_at_all_is_set_aside_too():
    bundle = set_aside(load(OVER))
    workload(bundle)["status"] = None
    assert [(f.cause, f.details["inferred"]) for f in diagnose(bundle)] == [(OVER, True)]


# -- preempted to give back lent capacity -----------------------------------------------------------


def test_preempted_names_the_team_that_took_its_gpus_back_and_says_it_was_requeued():
    findings = diagnose(load(PREEMPTED))
    assert [f.cause for f in findings] == [PREEMPTED]  # not also waiting-for-quota or team-over-share
    (finding,) = findings
    assert finding.title == ("Workload trainjob-segmenter-e04c1 was preempted: team language took back GPUs team "
                             "vision had borrowed")
    assert finding.details == {"reason": "InCohortReclamation", "preemptor": LANGUAGE, "preemptee": VISION,
                               "requeued": True, "preemptorWorkloadUid": "e81f6c2d-4a9b-4e07-93d5-1c6b8a2f0d79"}
    assert finding.fix.startswith("team vision ran past its guarantee on GPUs lent by the cohort, and team language "
                                  "asked for them (reclamation within the cohort). Kueue requeued the job: it starts "
                                  "again when the cohort has GPUs for it, and it resumes from its last checkpoint")
    assert ("The GPUs of pool-h100 are held now by the training namespace (training): 64 of its 64 guaranteed; team "
            "language: 32 of its 32 guaranteed.") in finding.fix
    assert "teams[].pools.h100.guaranteedGpus" in finding.fix
    assert [e.text.split(":")[0] for e in finding.evidence] == [
        "Preempted=True reason InCohortReclamation", "Requeued=True reason Preempted", "Normal Preempted"]
    assert finding.evidence[2].text.endswith("; preemptor effective priority: 100 (base: 100, boost: 0); preemptee "
                                             "effective priority: 100 (base: 100, boost: 0)")


def test_preempted_by_the_training_namespace():
    bundle = load(PREEMPTED)
    for c in workload(bundle)["status"]["conditions"]:
        c["message"] = c["message"].replace("preemptor path: /gpucluster/gpucluster-team-language",
                                            "preemptor path: /gpucluster/gpucluster")
    (finding,) = diagnose(bundle)
    assert finding.title == ("Workload trainjob-segmenter-e04c1 was preempted: the training namespace (training) took "
                             "back GPUs team vision had borrowed")


def test_preempted_for_fair_sharing():
    bundle = load(PREEMPTED)
    for c in workload(bundle)["status"]["conditions"]:
        c["message"] = c["message"].replace("reclamation within the cohort", "Fair Sharing within the cohort")
    cond(bundle, "Preempted")["reason"] = "InCohortFairSharing"
    (finding,) = diagnose(bundle)
    assert finding.title == ("Workload trainjob-segmenter-e04c1 was preempted for fair sharing: team language had less "
                             "than its share of the cohort's borrowed GPUs, team vision more")
    assert "(Fair Sharing within the cohort)" in finding.fix


def test_before_the_job_stopped_it_is_not_yet_requeued():
    bundle = load(PREEMPTED)
    conditions = workload(bundle)["status"]["conditions"]
    conditions[:] = [c for c in conditions if c["type"] not in ("Requeued", "QuotaReserved", "Admitted")]
    (finding,) = diagnose(bundle)
    assert finding.details["requeued"] is False
    assert "Kueue requeues the job once its pods have stopped" in finding.fix
    assert "held now by" not in finding.fix and "teams[].pools.<pool>.guaranteedGpus" in finding.fix


def test_the_evicted_condition_alone_is_enough():
    bundle = load(PREEMPTED)
    conditions = workload(bundle)["status"]["conditions"]
    conditions[:] = [c for c in conditions if c["type"] != "Preempted"]
    (finding,) = diagnose(bundle)
    assert finding.details["reason"] == "InCohortReclamation" and finding.details["preemptor"] == LANGUAGE
    assert finding.evidence[0].text.startswith("Evicted=True reason Preempted: " + PREEMPTION)


def test_unknown_paths_still_name_a_preemption():
    bundle = load(PREEMPTED)
    for c in workload(bundle)["status"]["conditions"]:
        c["message"] = c["message"].replace("/gpucluster/gpucluster-team-language", "UNKNOWN").replace(
            "/gpucluster/gpucluster-team-vision", "UNKNOWN")
    (finding,) = diagnose(bundle)
    assert finding.title == ("Workload trainjob-segmenter-e04c1 was preempted: another queue of the cohort took back "
                             "GPUs team vision had borrowed")  # its own queue, by its namespace


def _readmitted(b: Bundle) -> None:
    # pkg/workload/workload.go SetQuotaReservation: Preempted and Evicted turn False, "Previously: ...".
    for c in workload(b)["status"]["conditions"]:
        if c["type"] in ("Preempted", "Evicted"):
            c.update(status="False", reason="QuotaReserved", message="Previously: " + c["message"])
        if c["type"] == "QuotaReserved":
            c.update(status="True", reason="QuotaReserved", message=f"Quota reserved in ClusterQueue {VISION}")


def _within_its_queue(b: Bundle) -> None:
    for c in workload(b)["status"]["conditions"]:
        c["message"] = c["message"].replace("reclamation within the cohort", "prioritization in the ClusterQueue")
    cond(b, "Preempted")["reason"] = "InClusterQueue"


def _finished(b: Bundle) -> None:
    workload(b)["status"]["conditions"].append({"type": "Finished", "status": "True", "reason": "Succeeded"})


@pytest.mark.parametrize("change", [_readmitted, _within_its_queue, _finished])
def test_no_cohort_preemption_no_team_preempted(change):
    bundle = load(PREEMPTED)
    change(bundle)
    assert PREEMPTED not in [f.cause for f in diagnose(bundle)]


# -- budget reached ---------------------------------------------------------------------------------


def test_budget_reached_names_the_team_the_spend_and_what_submit_does(capsys):
    code, out = doctor.main(["--from", str(DATA / BUDGET), "--json"]), capsys.readouterr().out
    assert code == 1
    (finding,) = json.loads(out)["findings"]
    assert finding["title"] == "team vision has spent its monthly budget (151,872 of 150,000 USD)"
    assert finding["evidence"] == [{"source": "metric", "where": "team vision (Prometheus, since 2026-12-01 00:00 UTC)",
                                    "time": "2026-12-05T10:45:00Z",
                                    "text": "month-to-date spend 151,872.40 USD of its monthlyBudgetUsd 150,000.00 "
                                            "(101 %), 2026-12 (UTC)"}]
    assert finding["fix"].startswith("`bootstrap submit` refuses the team's jobs whose worst-case cost would pass the "
                                     "budget until the month (UTC) ends, unless an admin overrides it")
    assert finding["details"] == {"team": "vision", "spendUsd": 151872.4, "monthlyBudgetUsd": 150000.0,
                                  "month": "2026-12"}


@pytest.mark.parametrize("facts, found", [
    ({"monthlyBudgetUsd": 150000, "spendUsd": 150000}, True),  # at it
    ({"monthlyBudgetUsd": 150000, "spendUsd": 149999.99}, False),
    ({"monthlyBudgetUsd": 150000, "spendUsd": None, "spend": "not read: Prometheus unreachable"}, False),
    ({"monthlyBudgetUsd": None, "spendUsd": 10}, False),
    ({"monthlyBudgetUsd": "150000", "spendUsd": "200000"}, False),  # not numbers: not a finding, not a crash
    ({"spendUsd": 1}, False),
    ("vision", False),
])
def test_budget_only_when_the_spend_is_known_and_at_or_past_it(facts, found):
    bundle = load(BUDGET)
    bundle.extra["teams"] = {"vision": facts}
    assert [f.cause for f in diagnose(bundle)] == ([BUDGET] if found else [])


def test_a_bundle_with_a_malformed_teams_key_is_read_as_none():
    bundle = load(BUDGET)
    bundle.extra["teams"] = ["vision"]
    assert bundle.teams == {} and rules_teams.team_budget_reached(bundle) == []


# -- collecting a team's facts ----------------------------------------------------------------------

NOW = datetime(2026, 12, 5, 10, 45, tzinfo=UTC)


def test_team_facts_are_the_namespace_team_s_budget_and_spend():
    cfg = stack_config("prod")
    asked = []
    facts = collect.team_facts(cfg, "vision", lambda team: asked.append(team.name) or (151872.404, "Prometheus"), NOW)
    assert facts == {"vision": {"namespace": "vision", "monthlyBudgetUsd": 150000.0, "spendUsd": 151872.4,
                                "month": "2026-12", "spend": "Prometheus"}}
    assert asked == ["vision"]
    assert collect.team_facts(cfg, "training", lambda team: (1.0, "x"), NOW) == {}
    assert collect.team_facts(stack_config("dev"), "training", lambda team: (1.0, "x"), NOW) == {}


def test_team_facts_record_why_the_spend_was_not_read():
    cfg = stack_config("prod")

    def unreachable(team):
        raise ConnectionError("prometheus-operated.monitoring:9090 refused")

    assert collect.team_facts(cfg, "language", unreachable, NOW)["language"]["spend"] == (
        "not read: prometheus-operated.monitoring:9090 refused")
    facts = collect.team_facts(cfg, "language", None, NOW)["language"]
    assert facts["spendUsd"] is None and facts["spend"].startswith("not read")
    no_budget = copy.deepcopy(cfg.teams[0].model_dump())
    assert collect.team_facts(SimpleNamespace(teams=(TeamConfig(**{**no_budget, "monthly_budget_usd": None}),)),
                              "vision", unreachable, NOW) == {}


def _serve(case: str) -> tuple[FakeKube, Bundle]:
    source = read_bundle(DATA / case)
    fake = FakeKube(json.loads(json.dumps(o)) for items in source.objects.values() for o in items)
    return fake.start(), source


@pytest.mark.parametrize("case", [OVER, PREEMPTED])
def test_collect_in_the_team_namespace_reads_back_to_the_same_findings(capsys, tmp_path, case):
    fake, source = _serve(case)
    try:
        code = doctor.main([source.job, "--namespace", "vision", "--kubeconfig",
                            fake.write_kubeconfig(tmp_path / "kc"), "--collect", str(tmp_path / "b"), "--json"])
    finally:
        fake.stop()
    live = json.loads(capsys.readouterr().out)
    back = read_bundle(tmp_path / "b")
    assert code == 1 and [f["cause"] for f in live["findings"]] == [case]
    assert live["findings"] == [f.as_json() for f in causes.diagnose(back)] == [
        f.as_json() for f in causes.diagnose(source)]
    assert {cq["metadata"]["name"] for cq in back.of("ClusterQueue")} == {TRAINING, VISION, LANGUAGE}


def _doctor_with_the_stack(capsys, tmp_path, namespace: str) -> tuple[int, dict, dict, FakeKube]:
    fake, _ = _serve(BUDGET)
    try:
        job = ["tracker"] if namespace == "vision" else []  # its job is in vision; without one, every job
        code = doctor.main([*job, "--stack", "prod", "--namespace", namespace, "--kubeconfig",
                            fake.write_kubeconfig(tmp_path / "kc"), "--collect", str(tmp_path / "b"), "--json"])
    finally:
        fake.stop()
    meta = json.loads((tmp_path / "b" / "bundle.json").read_text())
    return code, json.loads(capsys.readouterr().out), meta, fake


@pytest.fixture
def no_aws(monkeypatch):
    monkeypatch.setattr(collect, "aws_scaling_activities", lambda session, cluster: (None, "skipped: test"))


def test_doctor_with_the_stack_reads_the_team_s_spend_as_status_does(capsys, tmp_path, monkeypatch, no_aws):
    from bootstrap.jobs import budget

    asked = []

    def read(query, namespace, now, retention_days):
        asked.append((namespace, retention_days))
        return budget.Spend(namespace, 151872.404, 1234.5, budget.month_start(now), now)

    monkeypatch.setattr(budget, "read", read)
    code, report, meta, _ = _doctor_with_the_stack(capsys, tmp_path, "vision")
    assert code == 1 and [f["cause"] for f in report["findings"]] == [BUDGET]
    assert asked == [("vision", stack_config("prod").observability.retention_days)]
    month = datetime.now(UTC).strftime("%Y-%m")
    assert meta["teams"] == {"vision": {"namespace": "vision", "monthlyBudgetUsd": 150000.0, "spendUsd": 151872.4,
                                        "month": month, "spend": f"Prometheus, since {month}-01 00:00 UTC"}}
    assert [f.as_json() for f in causes.diagnose(read_bundle(tmp_path / "b"))] == report["findings"]


def test_doctor_with_the_stack_asks_prometheus_through_the_api_server_and_notes_why_it_could_not(capsys, tmp_path,
                                                                                                 no_aws):
    from bootstrap.jobs import budget

    code, report, meta, fake = _doctor_with_the_stack(capsys, tmp_path, "vision")
    assert [r.path for r in fake.requests if "/proxy/" in r.path] == [budget.PROXY_PATH]
    facts = meta["teams"]["vision"]
    assert facts["spendUsd"] is None
    assert facts["spend"].startswith("not read: Prometheus through the API server's proxy to service monitoring/")
    assert BUDGET not in [f["cause"] for f in report["findings"]]


def test_doctor_with_the_stack_in_the_training_namespace_reads_no_spend(capsys, tmp_path, no_aws):
    _, _, meta, fake = _doctor_with_the_stack(capsys, tmp_path, "training")
    assert "teams" not in meta and not [r for r in fake.requests if "/proxy/" in r.path]
