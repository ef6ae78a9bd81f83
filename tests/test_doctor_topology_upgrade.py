"""doctor's created-before-topology: a job queued before its pool got a network topology (the bundle
tests/data/doctor/created-before-topology, its variations, and the rules it keeps quiet)."""

from __future__ import annotations

import copy
import re

from bootstrap.doctor import causes
from bootstrap.doctor.bundle import Bundle, read_bundle
from bootstrap.doctor.kueue import rules_queue, rules_teams, rules_upgrade
from components.core.teams import queues as teams
from tests import k8s
from tests.conftest import stack_config
from tests.test_doctor import DATA

CASE = "created-before-topology"
WL = "trainjob-pretrain-8a3f1"
# Kueue v0.19.2 pkg/scheduler/flavorassigner/tas_flavorassigner.go L200, the format string as written there.
GO_FORMAT = 'Flavor %q supports only TopologyAwareScheduling'
TITLE = (f"Workload {WL} never starts: flavor pool-h100 takes only jobs that ask for a network topology, and its "
         "pod set node asks none")
FIX = ("The job was queued before pool h100 got its network topology (gpuPools[].topology: auto). Kueue fixes a "
       "Workload's pod sets when it makes it, so this one never asks for a topology and never gets pool-h100 (a "
       "queue that also holds a flavor without one, system, implies none). Cancel it and submit it again: "
       "`python -m bootstrap cancel pretrain --stack S`, then `python -m bootstrap submit --stack S pretrain` (a job "
       "file: --file; a team's job: --team T), which renders the topology request. It resumes from its last "
       "checkpoint, if it writes them")


def load() -> Bundle:
    return read_bundle(DATA / CASE)


def _with_workload(bundle: Bundle, change) -> Bundle:
    wl = copy.deepcopy(bundle.of("Workload")[0])
    change(wl)
    objects = {**bundle.objects, "Workload": [wl]}
    return Bundle(**{**bundle.__dict__, "objects": objects})


def test_the_bundle_s_queue_is_the_prod_training_queue_and_its_message_the_kueue_format():
    cfg = stack_config("prod")
    rendered = teams.training_cluster_queue(cfg.gpu_pools, cfg.system_nodes, cfg.training_namespace, cfg.teams)
    (queue,) = load().of("ClusterQueue")
    assert queue["spec"] == rendered["spec"]
    message = load().of("Workload")[0]["status"]["conditions"][0]["message"]
    assert GO_FORMAT.replace("%q", '"pool-h100"') in message
    assert rules_upgrade.ONLY_TAS.fullmatch(GO_FORMAT.replace("%q", '"pool-h100"'))
    # The system flavor's quota in the message is the rendered one (12 CPUs, 48Gi).
    system = {r["name"]: r["nominalQuota"] for r in rendered["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    assert (system["cpu"], system["memory"]) == ("12000m", "48Gi")
    assert "> maximum capacity (12)" in message and "> maximum capacity (48Gi)" in message


def test_doctor_names_only_the_stranded_job_with_its_fix():
    findings = causes.diagnose(load())
    assert [f.cause for f in findings] == [rules_upgrade.CAUSE]
    (finding,) = findings
    assert finding.title == TITLE
    assert finding.fix == FIX
    assert finding.details == {"workload": WL, "job": "pretrain", "podSet": "node", "flavor": "pool-h100",
                               "pool": "h100"}
    assert finding.evidence[0].where == f"Workload/{WL}" and finding.evidence[0].time == "2026-12-05T09:52:10Z"
    assert finding.evidence[1].time == "2026-12-05T09:00:00Z"


def test_without_the_rule_the_system_flavor_s_clauses_read_as_a_quota_wait():
    # What unless_stranded keeps quiet; team-over-share passes over the system flavor's "maximum capacity (0)".
    bundle = load()
    assert [f.cause for f in rules_queue.waiting_for_quota(bundle)] == ["waiting-for-quota"]
    assert rules_upgrade.unless_stranded(rules_queue.waiting_for_quota)(bundle) == []
    assert rules_upgrade.unless_stranded(rules_queue.waiting_for_quota).__name__ == "waiting_for_quota"
    assert rules_teams.team_over_share(bundle) == []


def test_a_job_that_asks_for_a_topology_or_no_longer_waits_is_not_stranded():
    bundle = load()

    def flavor_without_topology(wl):  # the other way round: a pod set that asks for one on a flavor without
        cond = wl["status"]["conditions"][0]
        cond["message"] = cond["message"].replace('Flavor "pool-h100" supports only TopologyAwareScheduling',
                                                  'Flavor "pool-h100" does not support TopologyAwareScheduling')

    def deactivated(wl):
        wl["spec"]["active"] = False

    def finished(wl):
        wl["status"]["conditions"].append({"type": "Finished", "status": "True", "reason": "Succeeded"})

    def admitted(wl):
        wl["status"]["conditions"][0].update(status="True", reason="QuotaReserved", message="Quota reserved")

    for change in (flavor_without_topology, deactivated, finished, admitted):
        assert rules_upgrade.created_before_topology(_with_workload(bundle, change)) == [], change.__name__


def test_the_stranded_pod_set_is_named_when_it_is_not_the_first():
    def two_pod_sets(wl):
        launcher = {"count": 1, "name": "launcher", "template": {"spec": {"nodeSelector": {
            "gpucluster.io/role": "system"}}}}
        wl["spec"]["podSets"].insert(0, launcher)
        cond = wl["status"]["conditions"][0]
        cond["message"] = ("couldn't assign flavors to pod set launcher: insufficient unused quota for cpu in flavor "
                           "system, 1 more needed; " + cond["message"])
    (finding,) = rules_upgrade.created_before_topology(_with_workload(load(), two_pod_sets))
    assert finding.details["podSet"] == "node"
    assert finding.evidence[1].text == ("pod set node: 4 pods on pool h100, no topology request (no kueue.x-k8s.io/"
                                        "podset-required-topology, -preferred-topology or -unconstrained-topology "
                                        "annotation)")


def test_the_cause_is_documented_with_its_sources():
    what, where = causes.CAUSES[rules_upgrade.CAUSE]
    assert "supports only" in what and "tas_flavorassigner.go" in where
    readme = (DATA / CASE / "README.md").read_text()
    assert re.search(r"tas_flavorassigner\.go checkPodSetAndFlavorMatchForTAS L198-201", readme)
    # The CRD rule the cause follows from: a topology stays once set.
    rules = [r["message"] for r in k8s.crd_schema("kueue.x-k8s.io_resourceflavors.yaml", "v1beta2")["properties"][
        "spec"]["x-kubernetes-validations"]]
    assert "topologyName is immutable when topologyName is set" in rules
