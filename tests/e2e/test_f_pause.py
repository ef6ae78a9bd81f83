"""f. Pause holds (finish) or drains the queue, resume releases it: the ClusterQueue the program renders for a
stack whose pause verb wrote `paused: true` (and `pauseMode`), applied to the real Kueue."""

from __future__ import annotations

import json

import pytest

from bootstrap import stackfile
from bootstrap.deployed import pausing
from components.core.kube import queueing

from .conftest import Local, job_file
from .test_b_gangs import NAMESPACE, condition, running, workload_of


def _apply_queue(local: Local, paused: bool, mode: str | None = None) -> str:
    """The ClusterQueue as `pulumi up` renders it after `bootstrap pause|resume` wrote the stack file."""
    overrides = {pausing.PAUSED: paused, **({pausing.PAUSE_MODE: mode} if mode else {})}
    cfg, _, _ = stackfile.load_stack(local.stack, standins=True, overrides=overrides)
    queue = queueing.cluster_queue([*cfg.gpu_pools, *cfg.cpu_pools], cfg.system_nodes, cfg.training_namespace,
                                   cfg.stop_policy)
    local.apply([queue], "the ClusterQueue")
    return cfg.stop_policy



@pytest.mark.stack("dev")
def test_pause_holds_new_jobs_drain_evicts_running_ones_resume_admits_them(cluster, tmp_path):
    local = cluster("dev")
    try:
        _pause_and_resume(local, tmp_path)
    finally:  # the next test finds the queue running, whatever happened here
        _apply_queue(local, paused=False)


def _pause_and_resume(local: Local, tmp_path) -> None:
    assert _apply_queue(local, paused=True, mode="finish") == "Hold"
    done = local.cli("submit", "--stack", "dev", "--file", job_file(tmp_path, "held"))
    assert done.returncode == 0, done.stderr
    local.wait(lambda: (w := workload_of(local, "TrainJob", "held")) and "is inactive" in json.dumps(
        w.get("status", {})).lower(), "Kueue to hold the new job (ClusterQueue stopped)")
    assert local.pods(NAMESPACE, "jobset.sigs.k8s.io/jobset-name=held") == []

    assert _apply_queue(local, paused=False) == "None"
    local.wait(lambda: running(local.pods(NAMESPACE, "jobset.sigs.k8s.io/jobset-name=held")),
               "the held job to start on resume")

    assert _apply_queue(local, paused=True, mode="drain") == "HoldAndDrain"
    local.wait(lambda: condition(workload_of(local, "TrainJob", "held"), "Evicted"), "drain to evict the running job")
    local.wait(lambda: not local.pods(NAMESPACE, "jobset.sigs.k8s.io/jobset-name=held"), "its pods to go")

    _apply_queue(local, paused=False)
    local.wait(lambda: running(local.pods(NAMESPACE, "jobset.sigs.k8s.io/jobset-name=held")),
               "the evicted job to start again on resume")
    assert local.cli("cancel", "--stack", "dev", "held").returncode == 0
