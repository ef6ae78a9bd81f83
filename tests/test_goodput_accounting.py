"""The goodput accounting (components/core/goodput/accounting.py, steps.py): the step lines, the events in the
objects the API server sends, the record the controller keeps, and the breakdown that adds up to the wall clock.

Two runs with one restart each, in the shapes the pinned operators write: a TrainJob whose straggler node the
controller replaced (tests/goodput_scenario.py: JobSet's restart-attempt label) and an MPIJob whose worker the MPI
Operator re-created while mpirun restarted in its launcher (no attempt label: the pod's name and the step numbers
tell). Every expected number is worked out by hand from the times in the objects.
"""

from __future__ import annotations

import importlib.util
import json
import re

import pytest

from components.core.goodput import accounting, events, names, steps
from components.core.kube import launcher
from tests import goodput_scenario as run
from tests.conftest import ROOT, stack_config

WALL = 2815  # tests/goodput_scenario.py: created at 0, nodes last seen at 2815


def account(moments=run.MOMENTS, extra: tuple[dict, ...] = ()) -> dict:
    """The record the controller keeps, one merge per moment it looked."""
    record = None
    for moment in moments:
        record = accounting.merge(record, [*accounting.observe(*run.observed(moment)), *extra], run.trainjob(moment))
    return record


# -- step lines ---------------------------------------------------------------------------------------------


def test_step_and_checkpoint_lines_are_read_behind_any_prefix_and_garbage_is_skipped():
    t = 1796466096.5
    lines = [
        "2026-12-05T10:21:36.500000000Z gpucluster-step step=12 time=1796466096.500",  # kubectl logs --timestamps
        "[rank0]:gpucluster-step step=13 time=1796466097.250",  # torchrun --tee
        "[1,0]<stdout>:gpucluster-checkpoint step=13 start=1796466097.300 end=1796466117.800",  # mpirun --tag-output
        "[default0]:gpucluster-step step=14 time=1796466127",
        "gpucluster-step step=15 time=8123.456",  # time.perf_counter(), not Unix seconds
        "gpucluster-step step=x time=1796466096.5", "gpucluster-step step=16 time=1796466096.5abc",
        "gpucluster-checkpoint step=20 start=1796466200 end=1796466100",  # ends before it starts
        "step 10 loss 4.81", "", "\x1b[31mgarbage\x1b[0m gpucluster-step",
    ]
    assert steps.parse(lines) == [
        {"type": "step", "step": 12, "at": t}, {"type": "step", "step": 13, "at": 1796466097.25},
        {"type": "checkpoint", "step": 13, "start": 1796466097.3, "end": 1796466117.8},
        {"type": "step", "step": 14, "at": 1796466127.0}]
    assert steps.parse("\n".join(lines)) == steps.parse(lines)  # a whole log as one text too
    assert steps.step_line(12, t) == "gpucluster-step step=12 time=1796466096.500"
    assert steps.checkpoint_line(13, 1796466097.3, 1796466117.75) == (
        "gpucluster-checkpoint step=13 start=1796466097.300 end=1796466117.750")


def documented_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith('print(f"gpucluster-')]


def test_the_two_documented_lines_and_the_example_print_what_the_parser_reads():
    spec = importlib.util.spec_from_file_location("train_synthetic", ROOT / "examples" / "train_synthetic.py")
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    assert documented_lines(train.__doc__) == documented_lines(steps.__doc__) and len(documented_lines(steps.__doc__)) == 2

    class Clock:
        @staticmethod
        def time() -> float:
            return 1796466117.75

    printed = [eval(line.removeprefix("print(").removesuffix(", flush=True)"),  # noqa: S307 (our own docstring)
                    {"step": 40, "began": 1796466097.3, "time": Clock}) for line in documented_lines(steps.__doc__)]
    expected = [{"type": "step", "step": 40, "at": 1796466117.75},
                {"type": "checkpoint", "step": 40, "start": 1796466097.3, "end": 1796466117.75}]
    assert steps.parse(printed) == expected
    assert steps.parse([train.step_line(40, 1796466117.75), train.checkpoint_line(40, 1796466097.3, 1796466117.75)]) \
        == expected


# -- the TrainJob with one restart --------------------------------------------------------------------------


def test_a_run_with_one_restart_adds_up_to_its_wall_clock_exactly():
    found = accounting.breakdown(account(), run.unix(2900))
    assert found["phases"] == run.EXPECTED
    assert sum(found["phases"].values()) == found["wall_clock_seconds"] == WALL
    assert (found["created"], found["finished"], found["end"], found["outcome"]) == (
        "2026-12-05T10:00:00Z", "2026-12-05T10:36:55Z", "2026-12-05T10:46:55Z", "Succeeded")
    assert (found["nodes"], found["gpus_per_node"], found["gpus"]) == (2, 8, 16)
    assert found["gpu_seconds"] == {phase: 16 * s for phase, s in run.EXPECTED.items()}
    assert found["paid_gpu_seconds"] == 16 * (WALL - 300)  # queued is not paid: the pool scales from zero
    assert found["goodput"] == round(796 / 2515, 6) == 0.316501
    assert (found["steps"], found["restarts"], found["step_lines"]) == (80, 1, True)
    assert found["failures"] == [{"at": "2026-12-05T10:21:36Z", "reason": "remediation: straggler on node-b"}]
    assert found["cost_usd"] is None and found["cost_per_useful_step_usd"] is None  # no price in the record


def test_the_breakdown_does_not_need_the_controller_to_see_the_pods_go():
    """Between two looks, JobSet replaced the gang: the restart-attempt label and the remediation record tell."""
    assert accounting.breakdown(account((1295, 2220, 2815, 2875)), run.unix(2900))["phases"] == run.EXPECTED


def test_lost_work_is_the_partial_step_the_restart_and_the_recomputed_steps():
    found = accounting.breakdown(account(), run.unix(2900))
    # Step 50 at 1291, the failure at 1296, step 30's checkpoint resumed: steps 31-50 again until 1870.
    assert found["phases"]["lost_to_restarts"] == 1870 - 1291
    # Before the failure, the steps counted as training; the recomputed ones did not count twice.
    assert found["phases"]["training"] == (1291 - 780 - 20) + (2215 - 1870 - 40)


def test_a_running_job_is_accounted_up_to_now():
    record = account((1295,))
    found = accounting.breakdown(record, run.unix(1295))
    assert found["phases"] == {"queued": 300, "scaling_up": 240, "pulling_image": 120, "initialising": 120,
                               "training": 1295 - 780 - 20, "checkpointing": 20, "lost_to_restarts": 0, "idle_tail": 0}
    assert (found["finished"], found["end"], found["restarts"]) == (None, "2026-12-05T10:21:35Z", 0)


def test_cost_per_useful_step_at_the_pool_s_price():
    pool = {"type": "pool", "gpu_hour_usd": run.GPU_HOUR_USD, "bills_while_queued": False}
    found = accounting.breakdown(account(extra=(pool,)), run.unix(2900))
    paid_hours = 16 * 2515 / 3600
    assert found["gpu_hour_usd"] == 6.88
    assert found["cost_usd"] == round(paid_hours * 6.88, 2) == 76.9
    assert found["cost_per_useful_step_usd"] == round(paid_hours * 6.88 / 80, 6) == 0.961289


def test_a_pool_whose_nodes_bill_while_queued_pays_for_the_wait_and_has_no_idle_tail():
    pool = {"type": "pool", "gpu_hour_usd": run.GPU_HOUR_USD, "bills_while_queued": True}
    found = accounting.breakdown(account(extra=(pool,)), run.unix(2900))
    assert found["phases"] == {**run.EXPECTED, "idle_tail": 0}  # the nodes are the pool's: they stay
    assert found["wall_clock_seconds"] == 2215 and found["paid_gpu_seconds"] == 16 * 2215
    assert found["goodput"] == round(796 / 2215, 6)


def test_without_step_lines_training_is_while_the_containers_ran_and_lost_is_until_they_start_again(monkeypatch):
    monkeypatch.setattr(run, "logs", lambda moment: {})
    found = accounting.breakdown(account(), run.unix(2900))
    assert found["phases"] == {"queued": 300, "scaling_up": 240, "pulling_image": 120, "initialising": 0,
                               "training": (1296 - 660) + (2215 - 1560), "checkpointing": 0,
                               "lost_to_restarts": 1560 - 1296, "idle_tail": 600}
    assert sum(found["phases"].values()) == WALL
    assert (found["step_lines"], found["steps"], found["restarts"]) == (False, None, 1)


# -- the record ---------------------------------------------------------------------------------------------


def test_the_record_is_small_json_merging_again_changes_nothing_and_the_input_is_left_alone():
    record = account()
    text = json.dumps(record, sort_keys=True)
    assert len(text) < 4000
    assert {k: record[k] for k in ("version", "namespace", "name", "kind", "uid", "nodes", "gpus")} == {
        "version": 1, "namespace": "training", "name": "llama", "kind": "TrainJob", "uid": run.UID, "nodes": 2,
        "gpus": 16}
    again = accounting.merge(record, accounting.observe(*run.observed(2875)), run.trainjob(2875))
    assert json.dumps(again, sort_keys=True) == text == json.dumps(record, sort_keys=True)
    # Only the first and last step line of each attempt and the recovery point are kept, every checkpoint.
    kept = [(e["step"], round(e["at"] - run.T0)) for e in record["events"] if e["type"] == "step"]
    assert kept == [(1, 780), (50, 1291), (31, 1680), (50, 1870), (80, 2191)]
    assert [e["step"] for e in record["events"] if e["type"] == "checkpoint"] == [30, 60, 80]


def test_a_record_of_another_job_of_the_same_name_is_started_afresh():
    record = account((1295,))
    job = run.trainjob(1295)
    job["metadata"]["uid"] = "another"
    fresh = accounting.merge(record, [], job)
    assert fresh["uid"] == "another" and fresh["events"] == []


def long_run_events(days: int = 3) -> list[list[dict]]:
    """A step a second for `days`, a 60 s checkpoint every 1,800 steps, a failure every day (back to the last
    checkpoint, 300 s to come back), in batches of ten minutes of events as the controller would see them."""
    t0, batches, batch = run.T0, [], [{"type": "created", "at": run.T0}, {"type": "admitted", "at": run.T0}]

    def pods(attempt: int, at: float) -> list[dict]:
        return [{"type": "pod", "uid": f"{attempt}-{i}", "pod": f"p-{attempt}-{i}", "attempt": attempt, "node": "n",
                 "gpu": True, "created": at, "scheduled": at, "started": at + 100, "starts": [at + 100],
                 "ended": None} for i in (0, 1)]

    batch += pods(0, t0 + 100)
    now, step, last_checkpoint = t0 + 600, 0, 0
    for day in range(days):
        end_of_day = t0 + 86400 * (day + 1)
        while now < end_of_day:
            step += 1
            now += 1
            batch.append({"type": "step", "step": step, "at": now})
            if step % 1800 == 0:
                batch.append({"type": "checkpoint", "step": step, "start": now, "end": now + 60})
                now += 60
                last_checkpoint = step
            if len(batch) >= 600:
                batches.append(batch)
                batch = []
        batch.append({"type": "failure", "at": now + 0.5, "uid": f"pod-{day}", "reason": "pod: node exited 1"})
        batch += pods(day + 1, now + 10)
        now += 300
        step = last_checkpoint
    return [*batches, batch]


def test_a_long_run_s_record_stays_small_and_its_breakdown_is_the_one_of_every_line(monkeypatch):
    job = run.trainjob(1295)
    record = None
    for batch in long_run_events():
        record = accounting.merge(record, batch, job)
    assert len(json.dumps(record)) < 300_000  # a ConfigMap holds 1 MiB
    assert sum(e["type"] == "step" for e in record["events"]) <= 4 * 3 + 4
    now = run.T0 + 3 * 86400 + 600
    thinned = accounting.breakdown(record, now)
    monkeypatch.setattr(accounting.step_lines, "keep", lambda found, failures, slack: found)
    everything = accounting.merge(None, [e for batch in long_run_events() for e in batch], job)
    assert sum(e["type"] == "step" for e in everything["events"]) > 200_000
    assert thinned == accounting.breakdown(everything, now)
    assert thinned["restarts"] == 3 and sum(thinned["phases"].values()) == thinned["wall_clock_seconds"]


def test_old_checkpoints_are_folded_into_a_total_once_the_record_holds_too_many(monkeypatch):
    monkeypatch.setattr(accounting, "MAX_CHECKPOINTS", 2)
    job = run.trainjob(1295)
    events = [{"type": "created", "at": run.T0}, {"type": "admitted", "at": run.T0},
              {"type": "step", "step": 1, "at": run.T0 + 10}]
    events += [{"type": "checkpoint", "step": 1, "start": run.T0 + 100 * k, "end": run.T0 + 100 * k + 30}
               for k in range(1, 5)]
    record = accounting.merge(None, events, job)
    assert record["folded_checkpoints"] == {"count": 2, "seconds": 60.0, "until": run.T0 + 200}
    again = accounting.merge(record, events, job)  # a log read again: the folded ones are not counted twice
    assert again["folded_checkpoints"] == record["folded_checkpoints"]
    found = accounting.breakdown(again, run.T0 + 1000)
    assert found["phases"]["checkpointing"] == 4 * 30 and found["phases"]["training"] == 990 - 120


# -- what is live -------------------------------------------------------------------------------------------


def test_observe_reads_deletion_exit_codes_restarts_in_place_and_skips_an_earlier_job_s_pod():
    job = run.trainjob(1295)
    deleted = run.pod(1, 0, "node-b", 1325, 301, 540, 660, deleted=1296)
    checked = run.pod(0, 0, "node-a", 1295, 301, 480, 600)
    checked["status"]["containerStatuses"][0].update(restartCount=1, lastState={"terminated": {
        "exitCode": names.PRE_STEP_EXIT_CODE, "startedAt": run.iso(600), "finishedAt": run.iso(640)}})
    earlier = run.pod(0, 0, "node-a", 1295, -900, -800, -700)
    earlier["metadata"].update(name="llama-node-0-0-zzzzz", uid="old", creationTimestamp=run.iso(-1000))
    events = accounting.observe(run.unix(1330), job, None, [deleted, checked, earlier], run.nodes(1330), {})
    failures = [(round(e["at"] - run.T0), e["reason"]) for e in events if e["type"] == "failure"]
    assert failures == [(1296, "llama-node-0-1-abcde: deleted"),  # deletionTimestamp less its grace period
                        (640, "llama-node-0-0-abcde: node exited 86 (the pre-step check)")]
    pods = {e["pod"]: e for e in events if e["type"] == "pod"}
    assert set(pods) == {"llama-node-0-1-abcde", "llama-node-0-0-abcde"}
    assert pods["llama-node-0-0-abcde"]["starts"] == [run.unix(600)]
    assert [e["node"] for e in events if e["type"] == "node"] == ["node-b", "node-a"]
    assert events[0] == {"type": "observed", "at": run.unix(1330), "nodes": ["node-a", "node-b", "system-1"]}


def test_a_pod_failed_without_a_container_ending_fails_once_at_its_condition_s_time():
    """The kubelet evicted it (node pressure), or the scheduler preempted it: phase Failed, a DisruptionTarget."""
    evicted = run.pod(1, 0, "node-b", 1295, 301, 540, 660)
    evicted["status"].update(phase="Failed", reason="Evicted", containerStatuses=[])
    evicted["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True",
                                            "reason": "TerminationByKubelet", "lastTransitionTime": run.iso(1200)})
    job = run.trainjob(1295)
    record = None
    for moment in (1300, 1310):
        record = accounting.merge(record, accounting.observe(run.unix(moment), job, None, [evicted], None, {}), job)
    assert [(round(e["at"] - run.T0), e["reason"]) for e in record["events"] if e["type"] == "failure"] == [
        (1200, "llama-node-0-1-abcde: Evicted")]


def test_a_dry_run_record_is_no_failure():
    job = run.trainjob(1325)
    job["metadata"]["annotations"][names.REMEDIATIONS_ANNOTATION] = json.dumps([{
        "at": run.iso(1296), "node": "node-b", "reason": "straggler", "action": names.ACTION_WOULD_QUARANTINE,
        "mode": names.MODE_DRY_RUN, "evidence": {}}])
    assert not [e for e in accounting.observe(run.unix(1330), job, None, [], None, {}) if e["type"] == "failure"]
    job["metadata"]["annotations"][names.REMEDIATIONS_ANNOTATION] = "{not json"
    assert accounting.remediations(job) == []


def test_pods_are_selected_by_the_labels_the_operators_set():
    assert accounting.job_pod_selector("MPIJob", "gpt") == "training.kubeflow.org/job-name=gpt"
    assert accounting.job_pod_selector("TrainJob", "llama") == "jobset.sigs.k8s.io/jobset-name=llama"
    assert accounting.job_pod_selector("JobSet", "tf-ps") == "jobset.sigs.k8s.io/jobset-name=tf-ps"
    with pytest.raises(ValueError, match="no pods known for kind 'Job'"):
        accounting.job_pod_selector("Job", "x")
    # What the e2e tier sees on the local control plane (tests/e2e/test_d_launchers.py, test_e_failures.py).
    e2e = (ROOT / "tests" / "e2e" / "test_d_launchers.py").read_text() + \
        (ROOT / "tests" / "e2e" / "test_e_failures.py").read_text()
    for label in (events.MPIJOB_NAME_LABEL, events.JOBSET_NAME_LABEL, events.RESTART_ATTEMPT_LABEL):
        assert label in e2e


@pytest.mark.parametrize(("name", "expected"), [("gpt-pretrain", (2, 8)), ("llama-70b", (16, 8))])
def test_a_job_s_gpus_are_its_nodes_times_the_gpus_it_asks_for_on_each(name, expected):
    cfg = stack_config("prod")
    job = next(j for j in cfg.jobs if j.name == name)
    manifest = launcher.job_manifest(job, cfg.pool(job.pool), launcher.JobContext("training", "fsx", cfg.storage,
                                                                                  cfg.prices))
    assert accounting.job_gpus(manifest) == expected


def test_a_parameter_server_jobset_counts_its_gpu_workers_only():
    from tests.test_parameter_server import OVERRIDES

    cfg = stack_config("dev", OVERRIDES)
    (job,) = cfg.jobs
    jobset = launcher.job_manifest(job, cfg.pool("a100"), launcher.JobContext(
        "training", "fsx", cfg.storage, cfg.prices, cfg.cpu_pools))
    assert accounting.job_gpus(jobset) == (2, 8)  # 2 p4d.24xlarge workers; the chief and the 2 servers: none


# -- an MPIJob: a worker re-created, mpirun restarted in its launcher -----------------------------------------

MPI_UID = "0b5d8a52-0000-4000-8000-00000000000a"


def mpijob(moment: int) -> dict:
    cfg = stack_config("prod")
    job = next(j for j in cfg.jobs if j.name == "gpt-pretrain")
    manifest = launcher.job_manifest(job, cfg.pool(job.pool), launcher.JobContext("training", "fsx", cfg.storage,
                                                                                  cfg.prices))
    manifest["metadata"].update(uid=MPI_UID, creationTimestamp=run.iso(0), annotations={})
    if moment >= 598:
        manifest["metadata"]["annotations"][names.REMEDIATIONS_ANNOTATION] = json.dumps([{
            "at": run.iso(595), "node": "node-y", "reason": names.REASON_NCCL_ON_SOCKETS,
            "action": names.ACTION_QUARANTINED, "mode": names.MODE_ON, "evidence": {}}])
    if moment >= 1200:  # mpi-operator v0.8.2: Succeeded, status.completionTime
        manifest["status"] = {"completionTime": run.iso(1200), "conditions": [
            {"type": "Succeeded", "status": "True", "lastTransitionTime": run.iso(1200)}]}
    return manifest


def mpi_pod(name: str, uid: str, role: str, node: str, created: int, scheduled: int, state: dict,
            gpus: int, deleted: int | None = None, last: dict | None = None) -> dict:
    meta = {"name": name, "uid": uid, "namespace": "training", "creationTimestamp": run.iso(created),
            "labels": {events.MPIJOB_NAME_LABEL: "gpt-pretrain", "training.kubeflow.org/job-role": role}}
    if deleted is not None:
        meta.update(deletionTimestamp=run.iso(deleted + 30), deletionGracePeriodSeconds=30)
    status = {"name": role, "restartCount": 1 if last else 0, "state": state, **({"lastState": last} if last else {})}
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {"requests": {"cpu": "250m"}}
    return {"kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node, "containers": [{"name": role, "resources": resources}]},
            "status": {"conditions": [{"type": "PodScheduled", "status": "True",
                                       "lastTransitionTime": run.iso(scheduled)}], "containerStatuses": [status]}}


def running(started: int) -> dict:
    return {"running": {"startedAt": run.iso(started)}}


def mpi_look(moment: int) -> tuple:
    """(now, job, workload, pods, nodes, logs) of the MPIJob at a moment."""
    crash = {"terminated": {"exitCode": 1, "startedAt": run.iso(330), "finishedAt": run.iso(597)}}
    pods = {
        592: [mpi_pod("gpt-pretrain-worker-0", "w0", "worker", "node-x", 61, 200, running(300), 8),
              mpi_pod("gpt-pretrain-worker-1", "w1", "worker", "node-y", 61, 210, running(310), 8),
              mpi_pod("gpt-pretrain-launcher-q7x2m", "l", "launcher", "system-1", 320, 321, running(330), 0)],
        598: [mpi_pod("gpt-pretrain-worker-0", "w0", "worker", "node-x", 61, 200, running(300), 8),
              mpi_pod("gpt-pretrain-worker-1", "w1", "worker", "node-y", 61, 210, running(310), 8, deleted=595),
              mpi_pod("gpt-pretrain-launcher-q7x2m", "l", "launcher", "system-1", 320, 321,
                      {"waiting": {"reason": "CrashLoopBackOff"}}, 0, last=crash)],
        1000: [mpi_pod("gpt-pretrain-worker-0", "w0", "worker", "node-x", 61, 200, running(300), 8),
               mpi_pod("gpt-pretrain-worker-1", "w1b", "worker", "node-z", 600, 760, running(790), 8),
               mpi_pod("gpt-pretrain-launcher-q7x2m", "l", "launcher", "system-1", 320, 321, running(800), 0,
                       last=crash)],
    }
    steps_before = [(k, 400 + 10 * (k - 1)) for k in range(1, 21)]
    steps_after = [(k, 900 + 10 * (k - 1)) for k in range(1, 31)]
    shown = {592: steps_before, 598: [], 1000: steps_after[:11], 1300: steps_after}.get(moment, [])
    log = "".join(f"[1,0]<stdout>:{steps.step_line(k, run.unix(s))}\n" for k, s in shown)
    nodes = [run.node("system-1", -86400)] + [run.node(n, 100) for n in ("node-x", "node-y", "node-z")
                                              if {"node-x": moment < 1560, "node-y": moment < 900,
                                                  "node-z": 700 < moment < 1560}[n]]
    workload = run.workload(0)
    workload["status"]["conditions"] = [{**c, "lastTransitionTime": run.iso(60)} for c in
                                        workload["status"]["conditions"]]
    return (run.unix(moment), mpijob(moment), workload, pods.get(moment, []), nodes,
            {"gpt-pretrain-launcher-q7x2m": log} if log else {})


def test_an_mpijob_whose_worker_was_recreated_and_whose_launcher_restarted_in_place():
    record = None
    for moment in (592, 598, 1000, 1300, 1500, 1560):
        record = accounting.merge(record, accounting.observe(*mpi_look(moment)), mpijob(moment))
    found = accounting.breakdown(record, run.unix(1600))
    # Scheduled when the last GPU worker was (210), started when the launcher was (330), the first step at 400;
    # step 20 at 590, then from step 1 again (no checkpoint) until step 20 at 1090; Succeeded at 1200; the GPU
    # nodes last seen at 1500 (the launcher's system node stays, and is not the job's).
    assert found["phases"] == {"queued": 60, "scaling_up": 150, "pulling_image": 120, "initialising": 70,
                               "training": (590 - 400) + (1200 - 1090), "checkpointing": 0,
                               "lost_to_restarts": 1090 - 590, "idle_tail": 300}
    assert sum(found["phases"].values()) == found["wall_clock_seconds"] == 1500
    assert (found["gpus"], found["steps"], found["restarts"]) == (16, 30, 1)
    assert found["failures"] == [{"at": "2026-12-05T10:09:55Z", "reason": "remediation: nccl-on-sockets on node-y"}]
    reasons = {why for _, why in accounting._failure_times(accounting._by_type(record["events"]))}
    assert {"gpt-pretrain-worker-1 re-created", "step 1 after step 20: restarted",
            "gpt-pretrain-launcher-q7x2m: launcher exited 1"} <= reasons


def test_an_eviction_puts_the_job_back_in_the_queue_and_the_wait_is_not_paid():
    job = run.trainjob(1295)
    t = run.T0

    def pods(attempt: int, created: int, ended: int | None) -> list[dict]:
        return [{"type": "pod", "uid": f"{attempt}-{i}", "pod": f"p-{attempt}-{i}", "attempt": attempt,
                 "node": f"n{attempt}{i}", "gpu": True, "created": t + created, "scheduled": t + created + 50 * i,
                 "started": t + created + 100, "starts": [t + created + 100], "ended": ended and t + ended}
                for i in (0, 1)]

    events = [{"type": "created", "at": t}, {"type": "quota_reserved", "at": t + 100}, *pods(0, 100, 520),
              *({"type": "step", "step": k, "at": t + 300 + 10 * k} for k in range(1, 11)),
              {"type": "evicted", "at": t + 500, "reason": "Preempted"},
              {"type": "quota_reserved", "at": t + 2000}, *pods(1, 2000, None),
              *({"type": "step", "step": k, "at": t + 2300 + 10 * k} for k in range(5, 21))]
    found = accounting.breakdown(accounting.merge(None, events, job), t + 2500)
    # Step 10 at 400; preempted at 500, its pod ended at 520: queued again until 2000; back at step 10 at 2400.
    assert found["phases"] == {"queued": 100 + (2000 - 520), "scaling_up": 50, "pulling_image": 50,
                               "initialising": 110, "training": (400 - 310) + (2500 - 2400), "checkpointing": 0,
                               "lost_to_restarts": (520 - 400) + (2400 - 2000), "idle_tail": 0}
    assert sum(found["phases"].values()) == 2500 and found["restarts"] == 1
    assert found["failures"] == [{"at": "2026-12-05T10:08:20Z", "reason": "evicted (Preempted)"}]


def test_names_and_phases_agree():
    assert re.fullmatch(r"[a-z_]+", "".join(names.PHASES)) and len(names.PHASES) == 8
    assert set(accounting.breakdown(account((1295,)), run.unix(1295))["phases"]) == set(names.PHASES)


# -- the idle tail ------------------------------------------------------------------------------------------

DAY = 86400


def lingering(monkeypatch):
    """node-a and node-c stay after the job (the next job's, a blocked scale-down): they never go."""
    nodes = run.nodes
    monkeypatch.setattr(run, "nodes", lambda moment: nodes(min(moment, 2815)))


def foreign(name: str, node: str, scheduled: int, owner: str | None = None) -> dict:
    """A pod not of the job: the next job's, an earlier job's left behind, a DaemonSet's."""
    meta = {"name": name, "uid": name, "namespace": run.NS, "creationTimestamp": run.iso(scheduled - 60),
            "labels": {"gpucluster.io/job": name.split("-")[0]},
            **({"ownerReferences": [{"kind": owner, "name": "x"}]} if owner else {})}
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": run.iso(scheduled)}]}}


def watched(moments, others=(), extra=()) -> list[dict]:
    """The record after each look, as account() keeps it, with `others` passed to observe()."""
    record, out = None, []
    for moment in moments:
        seen = [accounting.observe(*run.observed(moment), [o for o in others if o["status"]["conditions"][0][
            "lastTransitionTime"] <= run.iso(moment)]), *[list(extra)]]
        record = accounting.merge(record, [e for batch in seen for e in batch], run.trainjob(moment))
        out.append(record)
    return out


def test_a_finished_job_s_tail_stops_at_the_cap_while_its_nodes_live_on_and_the_record_stops_changing(monkeypatch):
    lingering(monkeypatch)
    # The controller's passes: the hour after the end (2215) and a day later.
    moments = (*run.MOMENTS[:4], 2215 + 1800, 2215 + 3590, 2215 + 3610, 2215 + 7200, 2215 + DAY)
    records = watched(moments)
    two_hours, a_day = (accounting.breakdown(records[-1], run.unix(2215 + t)) for t in (7200, DAY))
    assert two_hours == a_day
    assert a_day["phases"] == {**run.EXPECTED, "idle_tail": 60 * accounting.TAIL_CAP_MINUTES} and \
        accounting.TAIL_CAP_MINUTES == 60
    assert sum(a_day["phases"].values()) == a_day["wall_clock_seconds"] == 2215 + 3600
    assert a_day["end"] == "2026-12-05T11:36:55Z"
    assert a_day["goodput"] == round(796 / (2215 + 3600 - 300), 6) == 0.144334
    # Open, the tail runs to now; the first look past the cap closes it and no look after changes the record.
    assert accounting.breakdown(records[4], run.unix(2215 + 1800))["phases"]["idle_tail"] == 1800
    assert records[5] != records[6] == records[7] == records[8]


def test_the_cap_is_the_pool_s_idle_minutes_and_a_margin_when_the_record_knows_them(monkeypatch):
    lingering(monkeypatch)
    pool = {"type": "pool", "gpu_hour_usd": run.GPU_HOUR_USD, "bills_while_queued": False, "idle_minutes": 10}
    record = watched((*run.MOMENTS[:4], 2215 + DAY), extra=(pool,))[-1]
    found = accounting.breakdown(record, run.unix(2215 + DAY))
    assert accounting.TAIL_MARGIN_MINUTES == 2 and record["idle_minutes"] == 10
    assert found["phases"] == {**run.EXPECTED, "idle_tail": 12 * 60}
    assert sum(found["phases"].values()) == found["wall_clock_seconds"] == 2215 + 720


def test_the_next_job_s_pod_on_a_node_of_the_last_attempt_ends_the_tail_when_it_was_scheduled(monkeypatch):
    lingering(monkeypatch)
    others = [foreign("next-node-0-0", "node-a", 2500), foreign("next-node-0-1", "node-c", 2530),
              foreign("earlier-worker-0", "node-a", 400),  # before the job finished: an earlier job's
              foreign("fluentbit-x1", "node-a", 2300, owner="DaemonSet"), foreign("other-0", "node-b", 2260)]
    records = watched((*run.MOMENTS[:3], 2600, 2815, 2215 + DAY), others)
    found = accounting.breakdown(records[-1], run.unix(2215 + DAY))
    # node-b went with the first attempt: another job's pod there says nothing about this one's tail.
    assert found["phases"] == {**run.EXPECTED, "idle_tail": 2500 - 2215}
    assert sum(found["phases"].values()) == found["wall_clock_seconds"] == 2500
    assert records[3] == records[4] == records[5]  # closed at the first look that saw the next job's pod
    assert {e["node"]: e.get("reused") for e in records[-1]["events"] if e["type"] == "node"} == {
        "node-a": run.unix(2500), "node-b": run.unix(2260), "node-c": run.unix(2530)}


def test_observe_reports_only_foreign_non_daemonset_pods_scheduled_after_the_finish():
    others = [foreign("next-node-0-0", "node-a", 2500), foreign("earlier-worker-0", "node-a", 400),
              foreign("fluentbit-x1", "node-c", 2300, owner="DaemonSet"),
              foreign("kube-proxy-x", "node-c", 2300, owner="Node")]
    mine = run.pods(2600)
    reused = [e for e in accounting.observe(*run.observed(2600), [*others, *mine]) if e["type"] == "reused"]
    assert reused == [{"type": "reused", "node": "node-a", "at": run.unix(2500)}]
    assert not [e for e in accounting.observe(*run.observed(1295), others) if e["type"] == "reused"]


def test_merging_into_a_closed_record_changes_nothing():
    record = account()  # the nodes gone at 2875: closed
    job = run.trainjob(2875)
    later = [*accounting.observe(run.unix(2215 + DAY), job, run.workload(2875), [], [], {},
                                 [foreign("next-node-0-0", "node-a", 2400)]),
             {"type": "pool", "gpu_hour_usd": 1.0, "bills_while_queued": True, "idle_minutes": 5},
             {"type": "failure", "at": run.unix(3000), "uid": "x", "reason": "x: deleted"}]
    again = accounting.merge(record, later, job)
    assert again == record and again is not record
    assert accounting.breakdown(again, run.unix(2215 + DAY))["phases"] == run.EXPECTED


def test_a_failed_pod_re_created_and_started_before_the_gang_restart_is_one_restart_not_two():
    # CI's straggler run: the remediation deletes a pod (15 s), its Job re-creates it and the container starts
    # (16 s) before the JobSet restarts the whole gang as attempt 1 (17 s): one restart.
    job = run.trainjob(1295)
    t = run.T0
    first = [{"type": "pod", "uid": f"0-{i}", "pod": f"p-0-{i}", "attempt": 0, "node": f"n{i}", "gpu": True,
              "created": t + 1, "scheduled": t + 2, "started": t + 3, "starts": [t + 3], "ended": None}
             for i in (0, 1)]
    recreated = {"type": "pod", "uid": "0-1b", "pod": "p-0-1b", "attempt": 0, "node": "n3", "gpu": True,
                 "created": t + 15, "scheduled": t + 15, "started": t + 16, "starts": [t + 16], "ended": t + 17}
    second = [{"type": "pod", "uid": f"1-{i}", "pod": f"p-1-{i}", "attempt": 1, "node": f"n{i}", "gpu": True,
               "created": t + 17, "scheduled": t + 18, "started": t + 19, "starts": [t + 19], "ended": None}
              for i in (0, 3)]
    events = [{"type": "created", "at": t}, {"type": "quota_reserved", "at": t + 1}, *first, recreated, *second,
              *({"type": "step", "step": k, "at": t + 4 + k} for k in range(1, 6)),
              {"type": "failure", "at": t + 15, "reason": "remediation: straggler on n1"},
              *({"type": "step", "step": k, "at": t + 20 + k} for k in range(6, 10))]
    found = accounting.breakdown(accounting.merge(None, events, job), t + 40)
    assert found["restarts"] == 1, found["failures"]
    assert found["failures"] == [{"at": "2026-12-05T10:00:15Z", "reason": "remediation: straggler on n1"}]
    # Two failures 60 s apart, a container started between them: two restarts.
    later = [{"type": "failure", "at": t + 15, "reason": "exited 1"},
             {"type": "pod", "uid": "x", "pod": "x", "attempt": 0, "node": "n9", "gpu": True, "created": t + 20,
              "scheduled": t + 20, "started": t + 21, "starts": [t + 21], "ended": None},
             {"type": "failure", "at": t + 75, "reason": "exited 1"}]
    found = accounting.breakdown(accounting.merge(None, [*events[:3], *later], job), t + 90)
    assert found["restarts"] == 2, found["failures"]
