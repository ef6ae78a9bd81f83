"""j. Teams on prod (issue 29): the h100 pool shared by two teams through the real Kueue v0.19.2.

prod's teams (Pulumi.prod.yaml): vision and language, each guaranteed 4 of the 16 p5.48xlarge nodes (32 GPUs),
equal weights, no borrowing or lending limits; the training namespace's ClusterQueue keeps the other 8. The three
ClusterQueues share the cohort `gpucluster`, with Kueue's fair sharing on and preemption {reclaimWithinCohort: Any,
withinClusterQueue: Never} (components/core/kube/teams.py). A team's job is rendered as `bootstrap submit --file`
renders it (bootstrap/jobs/render.py) in this process and applied by the harness: two dozen CLI processes would
take longer than the scenarios; the budget and doctor scenarios run `submit`, `status` and `doctor` themselves, as a
user does, with the spend from a fake Prometheus on 127.0.0.1 (--prometheus-url; the local control plane runs no
Prometheus). Each test first ends the jobs earlier prod tests left (the fabric test too), so the whole pool is idle.
Shared helpers: teams_support.py.

KWOK plays the nodes: a pod runs until a test annotates it (finish), and no training process ever runs.
"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bootstrap.doctor.kueue import rules_unevaluated
from bootstrap.jobs import budget
from bootstrap.verbs.jobs import common
from components.core.observability import spend
from local.kubectl import KubectlError

from .conftest import Local, jsonpath
from .teams_support import (
    GPUS_PER_NODE,
    GUARANTEED_NODES,
    POOL,
    POOL_NODES,
    TEAMS,
    TRAINJOBS,
    WORKLOADS,
    FakePrometheus,
    Snapshot,
    age,
    clear,
    cluster_queue,
    dumps_conditions,
    entry,
    env_of,
    finish,
    gpu_seconds,
    gpu_seconds_from_conditions,
    job_file,
    job_of,
    job_pods,
    names,
    path_of,
    preempted,
    reclaim,
    rendered,
    sampled,
    snapshot,
    submit,
    wait_requeued,
)
from .test_b_gangs import condition, node_labels, running

CHECKPOINT_ENV = ("GPUCLUSTER_JOB", "GPUCLUSTER_CHECKPOINT_DIR")  # what a resumed job finds its checkpoint by
HOLD_SECONDS = 15  # how long each fair-share round's jobs run before they are ended
ALICE = ("--as", "alice", "--as-group", "gpucluster:team:vision")  # a member of vision, impersonated


def round_over(ending: dict[str, set[str]]):
    """The round's jobs are done, and the waiting ones run: all of them, or as many as the pool holds."""
    return lambda s: (all(ending[t] <= s.finished[t] for t in TEAMS) and s.ready
                      and (not any(s.pending.values()) or sum(map(s.gpus, TEAMS)) == POOL_NODES * GPUS_PER_NODE))


# --- 1. fair share ----------------------------------------------------------------------------------------------


@pytest.mark.stack("prod")
def test_two_teams_with_equal_weights_submitting_equal_work_get_equal_gpu_time(cluster):
    """vision takes 12 nodes first (its 4 and 8 borrowed); language then submits as much: fair sharing preempts
    vision's borrowed jobs until each team holds 8 nodes (4 guaranteed + half of the training queue's idle 8). From
    there the pods end in rounds: each team's GPU-seconds are equal within one job's size (8 GPUs) times a round."""
    local = cluster("prod")
    clear(local)
    jobs = {"vision": names("vision-fair", 12), "language": names("language-fair", 12)}
    subs = {team: rendered(*(entry(n, team) for n in jobs[team])) for team in TEAMS}

    submit(local, subs["vision"], "vision's 12 jobs")
    local.wait(lambda: (s := snapshot(local)).nodes("vision") == 12 and s.ready and s,
               "vision's 12 jobs to run (4 nodes of its own, 8 borrowed)", timeout=120)

    submitted = time.monotonic()
    transient: list[Snapshot] = []
    submit(local, subs["language"], "language's 12 jobs")
    converged = local.wait(sampled(local, transient, lambda s: (s.nodes("vision"), s.nodes("language")) == (8, 8)
                                   and len(s.pending["vision"]) == len(s.pending["language"]) == 4 and s.ready),
                           "Kueue to converge to 8 nodes for each team", timeout=150)
    print(f"\nfair share: converged to 8 + 8 nodes {converged.at - submitted:.1f} s after language submitted")
    # Language reached 8 by fair-sharing preemption of vision's borrowed jobs, never below vision's guarantee.
    assert min(s.nodes("vision") for s in transient) >= 8
    victims = [w for w in converged.workloads if w["metadata"]["namespace"] == "vision" and preempted(w)]
    assert len(victims) == 4, [job_of(w) for w in victims]
    for wl in victims:
        reason = preempted(wl)
        # language borrows past its 4 nodes to reach 8: the fair-sharing strategies, not reclamation.
        assert reason["reason"] == "InCohortFairSharing", reason
        assert f"preemptor path: {path_of('language')}; preemptee path: {path_of('vision')}" in reason["message"]

    # Rounds: end every admitted job's pods, then wait until they are done and the waiting jobs run.
    samples = [converged]
    rounds = []
    while sum(map(len, samples[-1].finished.values())) < 24:
        # Each round's jobs run a while, sampled: a job's GPU-time is then mostly its run, not the seconds Kueue
        # and the controllers take to admit and start it, which vary from job to job.
        hold = time.monotonic() + HOLD_SECONDS
        while time.monotonic() < hold:
            samples.append(snapshot(local))
            time.sleep(0.5)
        start = time.monotonic()
        ending = {t: set(samples[-1].admitted[t]) for t in TEAMS}
        for team in TEAMS:
            finish(local, team, [p for p in running(job_pods(local, team))
                                 if p["metadata"]["labels"].get("gpucluster.io/job") in ending[team]])
        local.wait(sampled(local, samples, round_over(ending)),
                   f"round {len(rounds) + 1}: its jobs to finish and the waiting ones to run", timeout=90, interval=0.5)
        rounds.append(time.monotonic() - start)

    used = {t: gpu_seconds(samples, t) for t in TEAMS}
    by_conditions = {t: gpu_seconds_from_conditions(samples[-1], t, converged.wall, samples[-1].wall) for t in TEAMS}
    with_transient = {t: gpu_seconds(transient, t) + used[t] for t in TEAMS}
    # One job's size: its 8 GPUs for as long as one ran (held, then ended within the longest round).
    tolerance = GPUS_PER_NODE * (HOLD_SECONDS + max(rounds))
    print(f"fair share: {len(rounds)} rounds of {', '.join(f'{r:.1f}' for r in rounds)} s, {len(samples)} samples")
    print("fair share: GPU-seconds from convergence on: " + ", ".join(f"{t} {used[t]:.0f}" for t in TEAMS)
          + f"; difference {abs(used['vision'] - used['language']):.0f}, allowed {tolerance:.0f} (one job: 8 GPUs "
          "for its run)")
    print("fair share: the same from the Workloads' Admitted/Finished times: "
          + ", ".join(f"{t} {by_conditions[t]:.0f}" for t in TEAMS))
    print("fair share: from language's submission (vision held 12 nodes until Kueue converged): "
          + ", ".join(f"{t} {with_transient[t]:.0f}" for t in TEAMS))
    assert abs(used["vision"] - used["language"]) <= tolerance, used
    assert samples[-1].finished == {t: set(jobs[t]) for t in TEAMS}


# --- 2. reclaim -------------------------------------------------------------------------------------------------


@pytest.mark.stack("prod")
def test_a_team_within_its_guarantee_reclaims_lent_gpus_and_the_borrowers_jobs_resume(cluster):
    """vision borrows the whole idle pool (16 jobs: its 4 nodes and 12 borrowed); language's 4-node job, within its
    guarantee, takes 4 of them back: 4 of vision's jobs are preempted (InCohortReclamation, by language's queue),
    requeued and not deleted, and run again, from the same checkpoint directory, once language's job ends."""
    local = cluster("prod")
    clear(local)
    reclaimed = reclaim(local, "vision-lent", "language-reclaim")
    samples, after, before = reclaimed.samples, reclaimed.after, reclaimed.before
    # vision never dropped below its guarantee; Kueue took back exactly the 4 nodes language asked for.
    assert min(s.nodes("vision") for s in samples) == POOL_NODES - GUARANTEED_NODES >= GUARANTEED_NODES
    assert after.nodes("vision") == POOL_NODES - GUARANTEED_NODES
    victims = reclaimed.victims
    for job in victims:
        wl = after.workload("vision", job)
        reason = preempted(wl)
        assert reason is not None and reason["reason"] == "InCohortReclamation", dumps_conditions(wl)
        assert "due to reclamation within the cohort; " \
               f"preemptor path: {path_of('language')}; preemptee path: {path_of('vision')}" in reason["message"]
        assert not condition(wl, "QuotaReserved")
    # Requeued, not deleted: the Workloads wait in vision's queue, the TrainJobs are suspended, their pods gone.
    wait_requeued(local, victims)
    for job in victims:
        assert local.get(TRAINJOBS, job, "vision")["spec"]["suspend"] is True
    local.wait(lambda: not [p for p in job_pods(local, "vision") if p["metadata"]["labels"]["gpucluster.io/job"]
                            in victims], "the preempted jobs' pods to go")

    big = local.wait(lambda: len(p := running(job_pods(local, "language"))) == GUARANTEED_NODES and p,
                     "language's 4 pods to run")
    labels = node_labels(local)
    assert len({p["spec"]["nodeName"] for p in big}) == GUARANTEED_NODES
    assert {labels[p["spec"]["nodeName"]]["gpucluster.io/pool"] for p in big} == {POOL}
    assert after.workload("language", "language-reclaim")["status"]["admission"]["clusterQueue"] \
        == cluster_queue("language")

    finish(local, "language", big)
    local.wait(lambda: (s := snapshot(local)).finished["language"] == {"language-reclaim"}
               and s.nodes("vision") == POOL_NODES and s.ready, "vision's preempted jobs to run again", timeout=90)
    resumed = {p["metadata"]["labels"]["gpucluster.io/job"]: p for p in running(job_pods(local, "vision"))}
    for job in victims:
        # New pods, with the env a training script resumes from: the same job name and checkpoint directory
        # (KWOK runs no process, so the resume itself is the script's; examples/train_synthetic.py does it).
        assert resumed[job]["metadata"]["uid"] != before[job]["metadata"]["uid"]
        old, new = env_of(before[job]), env_of(resumed[job])
        assert [new.get(k) for k in CHECKPOINT_ENV] == [old.get(k) for k in CHECKPOINT_ENV] == [
            job, old["GPUCLUSTER_CHECKPOINT_DIR"]], (old, new)
        assert old["GPUCLUSTER_CHECKPOINT_DIR"]
    print(f"\nreclaim: preempted and resumed {', '.join(victims)}; checkpoint directory "
          f"{env_of(resumed[victims[0]])['GPUCLUSTER_CHECKPOINT_DIR']}")
    clear(local)


# --- 3. access --------------------------------------------------------------------------------------------------


def as_alice(local: Local, *args: str, stdin: str | None = None) -> str:
    return local.kubectl(*ALICE, *args, stdin=stdin)


def refused(local: Local, *args: str, stdin: str | None = None, admin: bool = False) -> str:
    with pytest.raises(KubectlError) as err:
        local.kubectl(*(() if admin else ALICE), *args, stdin=stdin)
    return str(err.value)


@pytest.mark.stack("prod")
def test_a_member_runs_jobs_in_their_own_team_namespace_only(cluster):
    """alice (group gpucluster:team:vision, impersonated through the API server) creates and deletes a job in vision;
    RBAC refuses her anything in language and anything cluster-wide; vision's ValidatingAdmissionPolicy refuses her
    a priority class the team may not use and a job that skips the team's queue. An admin may do all of it."""
    local = cluster("prod")
    clear(local)
    mine, high, unqueued, other = rendered(entry("alice-ok", "vision"), entry("alice-high", "vision"),
                                           entry("alice-unqueued", "vision"), entry("admin-language", "language"))
    high.manifest["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "gpucluster-high"
    del unqueued.manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    submit(local, [other], "an admin's job in language")  # and the runtime alice's jobs name
    create = ("create", "-f", "-")

    # Her own team: create, see it queued in vision's ClusterQueue, delete.
    as_alice(local, *create, stdin=json.dumps(mine.manifest))
    wl = local.wait(lambda: (s := snapshot(local)).admitted["vision"] and s.workload("vision", "alice-ok"),
                    "alice's job to be admitted")
    assert wl["spec"]["queueName"] == "gpu" and wl["status"]["admission"]["clusterQueue"] == cluster_queue("vision")
    as_alice(local, "get", "pods", "-n", "vision")
    as_alice(local, "delete", TRAINJOBS, "alice-ok", "-n", "vision", "--cascade=background")
    assert local.get(TRAINJOBS, namespace="vision")["items"] == []

    # Another team's namespace (and the training one): RBAC.
    language = json.loads(json.dumps(mine.manifest))
    language["metadata"]["namespace"] = "language"
    assert ('User "alice" cannot create resource "trainjobs" in API group "trainer.kubeflow.org" in the namespace '
            '"language"') in refused(local, *create, stdin=json.dumps(language))
    assert ('User "alice" cannot delete resource "trainjobs" in API group "trainer.kubeflow.org" in the namespace '
            '"language"') in refused(local, "delete", TRAINJOBS, "admin-language", "-n", "language")
    assert 'User "alice" cannot list resource "pods" in API group "" in the namespace "language"' in refused(
        local, "get", "pods", "-n", "language")
    training = {**language, "metadata": {**language["metadata"], "namespace": "training"}}
    assert 'User "alice" cannot create resource "trainjobs" in API group "trainer.kubeflow.org" in the namespace ' \
           '"training"' in refused(local, *create, stdin=json.dumps(training))
    assert local.get(TRAINJOBS, "admin-language", "language")["metadata"]["name"] == "admin-language"

    # Nothing cluster-wide.
    assert 'User "alice" cannot list resource "nodes" in API group "" at the cluster scope' in refused(
        local, "get", "nodes")
    assert ('User "alice" cannot list resource "clusterqueues" in API group "kueue.x-k8s.io" at the cluster scope'
            in refused(local, "get", "clusterqueues.kueue.x-k8s.io"))

    # Her own namespace, but not as the team agreed: the admission policy, in its words.
    policy = ("ValidatingAdmissionPolicy 'gpucluster-team-jobs-vision' with binding 'gpucluster-team-jobs-vision' "
              "denied request: team vision: ")
    assert policy + "kueue.x-k8s.io/priority-class must be one of gpucluster-training, gpucluster-low" in refused(
        local, *create, stdin=json.dumps(high.manifest))
    assert policy + "a job must carry the label kueue.x-k8s.io/queue-name: gpu (the team's queue)" in refused(
        local, *create, stdin=json.dumps(unqueued.manifest))
    assert local.get(TRAINJOBS, namespace="vision")["items"] == []

    # What `status --team` and `submit` read spend through: the Prometheus proxy, that one and nothing else there.
    assert as_alice(local, "auth", "can-i", "get", "services/kps-prometheus:http-web", "--subresource=proxy",
                    "-n", "monitoring").strip() == "yes"
    assert local.kubectl(*ALICE, "auth", "can-i", "get", "services/kps-grafana:http-web", "--subresource=proxy",
                         "-n", "monitoring", check=False).strip() == "no"

    # A pod in a team's namespace may not reach the node, whoever creates it (the job controller does, for a
    # member's Job): the teams' pod policy, for the admin too.
    privileged = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "escape", "namespace": "vision"},
                  "spec": {"containers": [{"name": "c", "image": "busybox:1.37.0",
                                           "securityContext": {"privileged": True}}]}}
    assert ("ValidatingAdmissionPolicy 'gpucluster-team-pods' with binding 'gpucluster-team-pods' denied request: "
            "a team's pod may not run a privileged container") in refused(
        local, "create", "--dry-run=server", "-f", "-", stdin=json.dumps(privileged), admin=True)
    host = {**privileged, "spec": {"volumes": [{"name": "root", "hostPath": {"path": "/"}}],
                                   "containers": [{"name": "c", "image": "busybox:1.37.0",
                                                   "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}]}}
    denied = refused(local, "create", "--dry-run=server", "-f", "-", stdin=json.dumps(host), admin=True)
    assert "a team's pod may not mount a path of the node (hostPath)" in denied
    # Our own pods pass it: the team jobs of the tests before run their workers (IPC_LOCK, the one allowed).

    # An admin may do all of it (the two outside the policy checked by the API server without being kept).
    for sub in (high, unqueued):
        local.kubectl(*create, "--dry-run=server", stdin=json.dumps(sub.manifest))
    local.kubectl(*create, "--dry-run=server", stdin=json.dumps(training))
    local.kubectl("delete", TRAINJOBS, "admin-language", "-n", "language", "--cascade=background")
    assert local.get("nodes")["items"]
    assert {cluster_queue(t) for t in TEAMS} <= {q["metadata"]["name"] for q in local.get(
        "clusterqueues.kueue.x-k8s.io")["items"]}
    clear(local)


# --- 4. budget --------------------------------------------------------------------------------------------------

# The refusal's and the summary's words: bootstrap/jobs/budget.py Verdict (refusal, warning, summary).
HOW = ("Either lower the job's bound (maxCostUsd, runPolicy.activeDeadlineSeconds) or its nodes, cancel what can "
       "wait, or raise teams[].monthlyBudgetUsd and `pulumi up`, or, as an admin, submit anyway with --over-budget")


def asked_the_month(prometheus: FakePrometheus, since: datetime, start: float, end: float) -> None:
    """The CLI asked for vision's USD and GPU-hours over exactly the seconds from 00:00 UTC on the 1st to its now."""
    assert sorted(a.get("metric", "?") for a in prometheus.asked) == sorted([spend.TEAM_COST, spend.TEAM_GPUS]), \
        prometheus.asked
    for asked in prometheus.asked:
        assert asked["namespace"] == "vision" and start <= asked["time"] <= end, (asked, start, end)
        # the window is whole seconds, truncated; the time has 3 decimals, rounded: up to 1.0005 s between them
        assert 0 <= (asked["time"] - since.timestamp()) - asked["window"] <= 1.001, (asked, since)
    prometheus.asked.clear()


@pytest.mark.stack("prod")
def test_submit_refuses_a_team_job_past_its_budget_and_an_admin_overrides_it(cluster, tmp_path):
    """vision's spend this month (a fake Prometheus on 127.0.0.1, through --prometheus-url) is 149,980 USD of its
    150,000: `submit --team vision` of a one-hour job on one p5.48xlarge (55.04 USD/h, components/core/hardware/
    catalog.py: prod sets no prices) is refused, exit 1, and creates nothing; with --over-budget it is submitted, says so, and Kueue admits it to
    vision's ClusterQueue. With the spend at 12,345.67 USD a job bounded by maxCostUsd is submitted, with what it
    leaves of the budget; `status --team vision` lists both jobs and the month's spend against the budget."""
    local = cluster("prod")
    clear(local)
    over = job_file(tmp_path, {**entry("vision-over", "vision"), "runPolicy": {"activeDeadlineSeconds": 3600}})
    within = job_file(tmp_path, {**entry("vision-within", "vision"), "maxCostUsd": 1000})
    since = budget.month_start(datetime.now(UTC))
    spent = (f"team vision has spent $149,980.00 this month (since {since:%Y-%m-%d} UTC) and job 'vision-over' may "
             "cost up to $55.04 more: $150,035.04, over its monthly budget of $150,000.00")
    with FakePrometheus({"vision": 149980.0, "language": 0.0}) as prometheus:
        args = ("--stack", "prod", "--team", "vision", "--prometheus-url", prometheus.url)
        start = time.time()
        done = local.cli("submit", *args, "--file", over)
        asked_the_month(prometheus, since, start, time.time())
        assert (done.returncode, done.stdout) == (1, ""), done.stderr
        assert done.stderr.splitlines()[-1] == f"python -m bootstrap submit: error: not submitted: {spent}. {HOW}"
        assert local.get(TRAINJOBS, namespace="vision")["items"] == []
        assert [w for w in local.get(WORKLOADS)["items"] if w["metadata"]["namespace"] == "vision"] == []

        done = local.cli("submit", *args, "--file", over, "--over-budget")
        warning = f"OVER BUDGET: submitted anyway (--over-budget): {spent}"
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[0] == warning
        assert f"python -m bootstrap submit: warning: {warning}" in done.stderr.splitlines()
        assert local.get(TRAINJOBS, "vision-over", "vision")["metadata"]["namespace"] == "vision"
        admitted = local.wait(lambda: "vision-over" in (s := snapshot(local)).admitted["vision"] and s,
                              "Kueue to admit the job submitted over the budget")
        assert admitted.workload("vision", "vision-over")["status"]["admission"]["clusterQueue"] \
            == cluster_queue("vision")
        assert admitted.admitted["vision"] == {"vision-over": GPUS_PER_NODE}

        prometheus.usd["vision"] = 12345.67
        prometheus.asked.clear()
        done = local.cli("submit", *args, "--file", within)
        assert done.returncode == 0, done.stderr
        deadline = int(1000 / 55.04 * 3600)  # what maxCostUsd 1000 buys of one node
        first, budget_line = done.stdout.splitlines()[:2]
        assert first == (f"submitted TrainJob vision-within to vision: 1 x p5.48xlarge, $55.04/h while it runs; "
                         f"deadline {common.duration(deadline)}")
        # vision-over still runs: what is left of its one-hour bound at one node's price is committed.
        held = re.fullmatch(r"budget: team vision has spent \$12,345\.67 of \$150,000\.00 this month; committed by 1 "
                            r"unfinished job: \$([\d.]+); this job's worst case \$999\.99 leaves \$([\d,.]+)",
                            budget_line)
        assert held is not None, budget_line
        assert 0 < float(held.group(1)) <= 55.04
        assert abs(float(held.group(2).replace(",", "")) - (150000 - 12345.67 - float(held.group(1)) - 999.99)) < 0.02
        assert "OVER BUDGET" not in done.stdout + done.stderr and len(prometheus.asked) == 2
        # Running, for `status`, is the TrainJob's own word: a ready Job in status.jobsStatus (bootstrap/jobs/state.py).
        local.wait(lambda: (s := snapshot(local)).nodes("vision") == 2 and s.ready and all(
            any(j.get("ready") for j in jsonpath(tj, "status", "jobsStatus", default=[]))
            for tj in local.get(TRAINJOBS, namespace="vision")["items"]), "both of vision's jobs to run")

        done = local.cli("status", *args, "--json")
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert since <= datetime.fromisoformat(report["spend"]["at"]) <= datetime.now(UTC)
    assert sorted((j["name"], j["phase"]) for j in report["jobs"]) == [("vision-over", "Running"),
                                                                     ("vision-within", "Running")]
    # Both still run: what is left of their bounds is committed.
    assert report["committed"]["jobs"] == 2 and 0 < report["committed"]["usd"] <= 55.04 + 999.99
    assert {k: v for k, v in report.items() if k not in ("jobs", "committed")} == {
        "team": "vision", "namespace": "vision", "budgetUsd": 150000.0, "spendUnknown": None,
        "spend": {"usd": 12345.67, "gpuHours": 224.5, "since": since.isoformat(), "at": report["spend"]["at"],
                  "partial": None},
        "usedShare": 0.0823, "leftUsd": 137654.33}
    clear(local)


# --- 5. doctor ---------------------------------------------------------------------------------------------------


def doctor(local: Local, job: str, prometheus: FakePrometheus, bundle: Path) -> list[dict]:
    """`doctor JOB --stack prod --namespace vision --json` (the spend from `prometheus`, the bundle collected into
    `bundle`): its findings, the same when `doctor --from` reads the bundle back."""
    done = local.cli("doctor", job, "--stack", "prod", "--namespace", "vision", "--prometheus-url", prometheus.url,
                     "--collect", str(bundle), "--json")
    assert done.returncode == 1, (done.stdout, done.stderr)  # causes found
    findings = json.loads(done.stdout)["findings"]
    again = local.cli("doctor", "--from", str(bundle), "--json")
    assert again.returncode == 1 and json.loads(again.stdout)["findings"] == findings, again.stdout
    return findings


def waits_for_gpus(wl: dict) -> bool:
    """Kueue's flavor assigner said the Workload waits for the pool's GPUs (QuotaReserved=False, flavorassigner.go)."""
    reserved = next((c for c in jsonpath(wl, "status", "conditions", default=[]) if c["type"] == "QuotaReserved"), {})
    return (reserved.get("status") == "False"
            and "insufficient unused quota for nvidia.com/gpu in flavor pool-h100" in reserved.get("message", ""))


@pytest.mark.stack("prod")
def test_doctor_names_the_team_causes_from_kueue_s_own_messages(cluster, tmp_path):
    """The reclaim situation (vision's 16 jobs on the pool, language's 4-node job takes its guarantee back), then one
    more vision job, of 2 nodes: Kueue v0.19.2 never evaluates a job of the same shape as one that did not fit (its
    SchedulingEquivalenceHashing, Beta and on since v0.18: pkg/cache/queue/cluster_queue.go PushOrUpdate L441-447),
    so a 1-node job gets no QuotaReserved message at all. doctor says of a preempted vision job that team
    language took back the GPUs vision had borrowed (team-preempted); of the new one, that vision is past its
    guarantee and waits to borrow what language holds (team-over-share); of a new 1-node job, set aside with no
    QuotaReserved condition, the same, inferred from its pod set and the ClusterQueues (bootstrap/doctor/
    rules_unevaluated.py); with vision's spend past its budget, that the team has spent it (team-budget-reached).
    Each the same read back from its bundle (`doctor --from`)."""
    local = cluster("prod")
    clear(local)
    reclaimed = reclaim(local, "vision-doc", "language-doc")
    submit(local, rendered(entry("vision-more", "vision", nodes=2)), "one more vision job, of 2 nodes")
    wait_requeued(local, reclaimed.victims)
    # Once requeued, Kueue evaluates one of the victims again (and skips its equals): that one also says why it waits.
    def explained(s: Snapshot) -> bool:
        return (s.pending["vision"] == {*reclaimed.victims, "vision-more"}
                and waits_for_gpus(s.workload("vision", "vision-more"))
                and any(waits_for_gpus(s.workload("vision", j)) for j in reclaimed.victims))

    now = local.wait(lambda: explained(s := snapshot(local)) and s, "Kueue to say why a victim and the extra job wait")
    victim = next(j for j in reclaimed.victims if waits_for_gpus(now.workload("vision", j)))
    waiting = now.workload("vision", "vision-more")
    preemptor = now.workload("language", "language-doc")["metadata"]["uid"]
    held = "team language: 32 of its 32 guaranteed"
    with FakePrometheus({"vision": 12345.67, "language": 0.0}) as prometheus:
        (finding,) = doctor(local, victim, prometheus, tmp_path / "preempted")
        assert (finding["cause"], finding["title"]) == (
            "team-preempted", f"Workload {now.workload('vision', victim)['metadata']['name']} was preempted: team "
                              "language took back GPUs team vision had borrowed"), finding
        assert finding["details"] == {"reason": "InCohortReclamation", "preemptor": cluster_queue("language"),
                                      "preemptee": cluster_queue("vision"), "requeued": True,
                                      "preemptorWorkloadUid": preemptor}
        assert finding["fix"].startswith(
            "team vision ran past its guarantee on GPUs lent by the cohort, and team language asked for them "
            "(reclamation within the cohort). Kueue requeued the job"), finding["fix"]
        assert f"The GPUs of pool-h100 are held now by {held}." in finding["fix"]

        (finding,) = doctor(local, "vision-more", prometheus, tmp_path / "over-share")
        assert (finding["cause"], finding["title"]) == (
            "team-over-share", f"Workload {waiting['metadata']['name']} waits to borrow: team vision uses 32 of its 32 "
                               "guaranteed GPUs of pool-h100 (+64 borrowed) and the job needs 16 more"), finding
        assert finding["details"] == {
            "queue": cluster_queue("vision"), "flavor": "pool-h100", "guaranteed": 32, "using": 96, "borrowed": 64,
            "borrowingLimit": None, "request": 16, "moreNeeded": 16, "maximum": None, "heldBy": held,
            "holders": [{"queue": cluster_queue("language"), "using": 32, "borrowed": 0}]}
        assert finding["fix"].startswith(
            "the job asks 16 GPUs, past team vision's guarantee, and the cohort has none idle to lend (it has no "
            f"borrowing limit). The GPUs of pool-h100 are held by {held}."), finding["fix"]

        # A 1-node job is shaped like the victims, one of which Kueue found did not fit: it is set aside unevaluated.
        submit(local, rendered(entry("vision-one", "vision")), "one more vision job, of 1 node")
        one = local.wait(lambda: next((w for w in snapshot(local).workloads if job_of(w) == "vision-one"
                                       and age(w) > rules_unevaluated.SILENT_AFTER_SECONDS + 1), None),
                         f"vision-one's Workload to be {rules_unevaluated.SILENT_AFTER_SECONDS} s old", timeout=60)
        (finding,) = doctor(local, "vision-one", prometheus, tmp_path / "set-aside")
        assert (finding["cause"], finding["title"]) == (
            "team-over-share", f"Workload {one['metadata']['name']} waits to borrow: team vision uses 32 of its 32 "
                               "guaranteed GPUs of pool-h100 (+64 borrowed) and the job needs 8 more"), finding
        assert finding["details"] == {
            "queue": cluster_queue("vision"), "flavor": "pool-h100", "guaranteed": 32, "using": 96, "borrowed": 64,
            "borrowingLimit": None, "request": 8, "moreNeeded": 8, "maximum": None, "heldBy": held,
            "holders": [{"queue": cluster_queue("language"), "using": 32, "borrowed": 0}], "inferred": True,
            "available": 0}
        assert finding["evidence"][0]["text"].startswith(
            "not admitted, no QuotaReserved condition "), finding["evidence"]  # Kueue never evaluated it
        assert finding["evidence"][0]["text"].endswith(
            "s after its creation; pod set node: 1 x 8 nvidia.com/gpu, nodeSelector gpucluster.io/pool=h100 (flavor "
            "pool-h100)"), finding["evidence"]
        assert finding["fix"].startswith(
            "the job asks 8 GPUs, past team vision's guarantee, and the cohort has none idle to lend (it has no "
            f"borrowing limit). The GPUs of pool-h100 are held by {held}."), finding["fix"]
        assert "failed to fit, and sets such jobs aside until its cohort's usage changes (SchedulingEquivalenceHashing" \
            in finding["fix"]

        prometheus.usd["vision"] = 151872.4
        month = datetime.now(UTC)
        over_share, reached = doctor(local, "vision-more", prometheus, tmp_path / "budget")
    assert (over_share["cause"], reached["cause"]) == ("team-over-share", "team-budget-reached")
    assert reached["title"] == "team vision has spent its monthly budget (151,872 of 150,000 USD)"
    assert reached["details"] == {"team": "vision", "spendUsd": 151872.4, "monthlyBudgetUsd": 150000.0,
                                  "month": f"{month:%Y-%m}"}
    (evidence,) = reached["evidence"]
    assert (evidence["source"], evidence["where"], evidence["text"]) == (
        "metric", f"team vision (Prometheus, since {budget.month_start(month):%Y-%m-%d} 00:00 UTC)",
        f"month-to-date spend 151,872.40 USD of its monthlyBudgetUsd 150,000.00 (101 %), {month:%Y-%m} (UTC)")
    clear(local)
