"""h. `bootstrap validate` through the real Kueue, MPI Operator and scheduler: it passes on healthy h100 nodes and
fails clearly when the pool's nodes lack their EFA devices.

KWOK plays each launcher: when one runs, it gets the output a healthy stage prints (the recorded nccl-tests runs
tests/test_validate.py uses) and exits 0; the MPI Operator then marks the MPIJob Succeeded and validate judges.
"""

from __future__ import annotations

import json
import threading

import pytest

from local import kwok
from tests.test_validate import ONE_NODE, TWO_NODE

from .test_b_gangs import NAMESPACE, finish, running

LOGS = {"validate-h100-1node": ONE_NODE, "validate-h100-2node": TWO_NODE}


class Launchers(threading.Thread):
    """Give each validate launcher that runs its stage's output, then end it."""

    def __init__(self, local):
        super().__init__(daemon=True)
        self.local, self.done, self.ended = local, threading.Event(), []

    def run(self) -> None:
        while not self.done.wait(1.0):
            for pod in running(self.local.pods(NAMESPACE, "training.kubeflow.org/job-role=launcher")):
                job = pod["metadata"]["labels"].get("training.kubeflow.org/job-name", "")
                name = pod["metadata"]["name"]
                if job in LOGS and name not in self.ended:
                    kwok.pod_logs(self.local.state, NAMESPACE, name, LOGS[job].splitlines())
                    # A real stage runs for minutes; 25 s lets validate's 10 s polls see the workers' nodes.
                    self.local.kubectl("annotate", "pod", name, "-n", NAMESPACE, "--overwrite",
                                       "gpucluster.io/kwok-duration=25s")
                    finish(self.local, [pod])
                    self.ended.append(name)


@pytest.mark.stack("prod")
def test_validate_passes_on_healthy_h100_nodes(cluster):
    local = cluster("prod")
    launchers = Launchers(local)
    launchers.start()
    try:
        done = local.cli("validate", "--stack", "prod", "--pool", "h100", "--json", timeout=300)
    finally:
        launchers.done.set()
    assert done.returncode == 0, done.stdout + done.stderr
    verdicts = json.loads(done.stdout)
    text = json.dumps(verdicts)
    assert text.count('"PASS"') == 2, text
    assert "8/8 GPUs and 32/32 EFA devices allocatable" in text  # read from the real KWOK nodes
    # Each stage's MPIJob is deleted (foreground: its pods first) however the stage ends.
    local.wait(lambda: not [j for j in local.get("mpijobs.kubeflow.org", namespace=NAMESPACE)["items"]
                            if j["metadata"]["name"].startswith("validate-")], "validate's MPIJobs to be gone")


@pytest.mark.stack("prod")
def test_validate_fails_clearly_on_nodes_without_efa(cluster):
    local = cluster("prod")
    try:
        _set_efa(local, "0")
        done = local.cli("validate", "--stack", "prod", "--pool", "h100", "--stage", "one-node", "--timeout", "1",
                         timeout=300)
    finally:
        _set_efa(local, "32")
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "h100 one-node: TIMEOUT" in done.stdout or "h100 one-node: FAIL" in done.stdout, done.stdout
    # The pool is atomic: Kueue creates no pod until cluster-autoscaler can place all of the stage's; no node
    # offers EFA and the group is at maxNodes, so its ProvisioningRequest says so (CA's words, relayed by Kueue).
    assert "admission check gpucluster-atomic-scale-up: Capacity is not found, CA will try to find it later." \
        in done.stdout, done.stdout


def _set_efa(local, count: str) -> None:
    """What the h100 nodes' EFA device plugin reports."""
    for node in local.get("nodes", selector="gpucluster.io/pool=h100")["items"]:
        status = {"allocatable": {"vpc.amazonaws.com/efa": count}, "capacity": {"vpc.amazonaws.com/efa": count}}
        local.kubectl("patch", "node", node["metadata"]["name"], "--subresource=status", "--type=merge",
                      "-p", json.dumps({"status": status}))
