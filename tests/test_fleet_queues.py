"""The manager's queues leave waiting and preempting to the workers, and its workers must queue alike."""

import json

import pytest

from components.core.fleet import manager, queues
from components.core.fleet.workers import load_workers
from components.core.kube import queueing
from components.core.problems import ConfigError
from tests.conftest import stack_config


def test_the_manager_s_kueue_neither_waits_for_pods_nor_blocks_admission():
    fleet = stack_config("fleet")
    on_manager = queueing.manager_config("training", multi_kueue=manager.multi_kueue(fleet))
    assert "waitForPodsReady" not in on_manager and on_manager["multiKueue"]["dispatcherName"] == \
        "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
    # A worker (an ordinary cluster) keeps them: there a job's pods do wait on its nodes.
    on_worker = queueing.manager_config("training")
    assert on_worker["waitForPodsReady"]["blockAdmission"] is True and "multiKueue" not in on_worker


def test_the_manager_s_queues_never_preempt():
    members = load_workers(stack_config("fleet"), stack_config)
    [cq] = queues.manager_queues(stack_config("fleet"), members).cluster_queues
    assert cq["spec"]["preemption"] == {"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "Never"},
                                        "withinClusterQueue": "Never"}


@pytest.mark.parametrize("override, says", [
    ({"gpucluster:trainingNamespace": "jobs"}, "('jobs', ())"),
    ({"gpucluster:teams": json.dumps([{"name": "vision", "pools": {"h100": {"guaranteedGpus": 8}}}])},
     "('training', ('vision',))"),
])
def test_workers_that_queue_in_other_namespaces_or_teams_are_refused(override, says):
    def load(name):
        return stack_config(name, override if name == "fleet-west" else None)

    with pytest.raises(ConfigError) as err:
        load_workers(stack_config("fleet"), load)
    [problem] = err.value.problems
    assert problem.path == "gpucluster:fleet.workers[1].stack"
    assert problem.message == (
        f"got 'fleet-west'; its training namespace and teams {says} are not those of fleet-east ('training', ()): "
        "a fleet's workers queue jobs in the same namespaces and teams (gpucluster:trainingNamespace, "
        "gpucluster:teams[].name)")
