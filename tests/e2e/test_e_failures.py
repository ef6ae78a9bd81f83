"""e. Failure: a worker KWOK fails restarts the gang as our runtime's failure policy says; a run deadline (the
label maxCostUsd becomes) ends a job through Kueue."""

from __future__ import annotations

import copy
import json

import pytest

from bootstrap import stackfile
from bootstrap.jobs import render
from components.core.kube import queueing

from .conftest import jsonpath
from .test_b_gangs import NAMESPACE, condition, finish, running, workload_of

SMOKE = "smoke"  # dev's torchrun TrainJob, maxRestarts 3 (its runtime gpucluster-torch-dev-r3)


@pytest.mark.stack("dev")
def test_a_failed_worker_restarts_the_whole_gang_up_to_max_restarts(cluster):
    local = cluster("dev")
    selector = f"jobset.sigs.k8s.io/jobset-name={SMOKE}"
    first = local.wait(lambda: running(local.pods(NAMESPACE, selector)), "the smoke job's pod to run")
    assert first[0]["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == "0"
    finish(local, first, code=1)
    jobset = local.wait(lambda: jsonpath(j := local.get("jobsets.jobset.x-k8s.io", SMOKE, NAMESPACE),
                                         "status", "restarts") == 1 and j, "JobSet to restart the gang")
    assert jobset["spec"]["failurePolicy"]["maxRestarts"] == 3
    again = local.wait(lambda: [p for p in running(local.pods(NAMESPACE, selector))
                                if p["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == "1"],
                       "a new pod of restart attempt 1")
    assert again[0]["metadata"]["uid"] != first[0]["metadata"]["uid"]
    # The job stays admitted through the restart: the gang is restarted in place, not requeued.
    assert condition(workload_of(local, "TrainJob", SMOKE), "Admitted")
    finish(local, again, code=0)
    local.wait(lambda: condition(local.get("trainjobs.trainer.kubeflow.org", SMOKE, NAMESPACE), "Complete"),
               "the smoke TrainJob to complete")


@pytest.mark.stack("dev")
def test_kueue_ends_a_job_at_the_deadline_its_cost_bound_sets(cluster):
    """The label the product derives from maxCostUsd, shortened to 15 s, evicts and deactivates the job."""
    local = cluster("dev")
    cfg, _, _ = stackfile.load_stack("dev", standins=True)
    submission = render.build(cfg, 0, from_file=False)
    manifest = copy.deepcopy(submission.manifest)
    labels = manifest["metadata"]["labels"]
    assert int(labels[queueing.MAX_EXEC_TIME_LABEL]) == submission.deadline_seconds > 0
    manifest["metadata"]["name"] = "smoke-deadline"
    labels[queueing.MAX_EXEC_TIME_LABEL] = "15"
    local.kubectl("create", "-f", "-", stdin=json.dumps(manifest))
    local.wait(lambda: running(local.pods(NAMESPACE, "jobset.sigs.k8s.io/jobset-name=smoke-deadline")),
               "the job to start")
    wl = local.wait(lambda: (w := workload_of(local, "TrainJob", "smoke-deadline")) and w["spec"].get("active") is False
                    and w, "Kueue to deactivate the job at its deadline", timeout=90)
    assert "deactivated due to exceeding the maximum execution time" in json.dumps(wl["status"]["conditions"]).lower()
    local.wait(lambda: not local.pods(NAMESPACE, "jobset.sigs.k8s.io/jobset-name=smoke-deadline"),
               "the job's pods to go")
    local.kubectl("delete", "trainjob", "smoke-deadline", "-n", NAMESPACE)
