"""The manager reads its workers' stack files: each must be a worker of this manager (components.core.fleet.workers)."""

import json

import pytest

from components.core.config.cluster import stack_name
from components.core.fleet.workers import FleetMember, cluster_name, load_workers
from components.core.problems import ConfigError, Problem
from tests.conftest import stack_config


def loader(overrides: dict[str, dict] | None = None):
    def load(name: str):
        return stack_config(name, (overrides or {}).get(name))
    return load


def test_the_example_manager_reads_both_workers_in_order():
    members = load_workers(stack_config("fleet"), loader())
    assert [(m.reference, m.name, m.cluster, m.config.region) for m in members] == [
        ("fleet-east", "fleet-east", "fleet-east", "us-east-1"), ("fleet-west", "fleet-west", "fleet-west", "us-west-2")]
    assert all(isinstance(m, FleetMember) and m.config.fleet.role == "worker" for m in members)


def test_a_worker_or_an_island_has_no_workers_to_read():
    def never(name):
        raise AssertionError(name)
    assert load_workers(stack_config("fleet-east"), never) == ()
    assert load_workers(stack_config("dev"), never) == ()


def test_every_wrong_worker_is_reported_at_once_with_its_key():
    other_manager = {"gpucluster:fleet": json.dumps({"role": "worker", "manager": "org/gpucluster/elsewhere"})}
    manager = stack_config("fleet", {"gpucluster:fleet": json.dumps(
        {"role": "manager", "workers": [{"stack": "org/gpucluster/fleet-east"}, {"stack": "fleet-west"},
                                        {"stack": "dev"}, {"stack": "broken"}]})})

    def load(name):
        if name == "broken":
            raise ConfigError([Problem("Pulumi.broken.yaml", "no such file")])
        return stack_config(name, {"fleet-east": other_manager}.get(name) or ({} if name != "fleet-west" else None))

    with pytest.raises(ConfigError) as err:
        load_workers(manager, load)
    assert [str(p) for p in err.value.problems] == [
        "gpucluster:fleet.workers[0].stack: got 'org/gpucluster/fleet-east'; that worker's gpucluster:fleet.manager "
        "is 'org/gpucluster/elsewhere', not this stack (fleet): set gpucluster:fleet.manager: fleet in "
        "Pulumi.fleet-east.yaml",
        "gpucluster:fleet.workers[2].stack: got 'dev'; that stack is not a worker: set gpucluster:fleet to "
        "{role: worker, manager: fleet} in Pulumi.dev.yaml",
        "gpucluster:fleet.workers[3].stack: got 'broken'; its stack file has 1 problem(s): "
        "Pulumi.broken.yaml: no such file"]


def test_cluster_names_are_dns_labels_of_the_stack_name():
    assert [cluster_name(s) for s in ("fleet-east", "Prod_US.2", "---")] == ["fleet-east", "prod-us-2", "worker"]
    assert stack_name("org/gpucluster/prod") == "prod" and stack_name("prod") == "prod"


def test_a_private_only_worker_is_refused_the_manager_could_not_reach_it():
    private = {"gpucluster:deployerInVpc": "true", "gpucluster:publicAccessCidrs": "[]"}

    def load(name):
        return stack_config(name, private if name == "fleet-east" else None)

    with pytest.raises(ConfigError) as err:
        load_workers(stack_config("fleet"), load)
    assert [str(p) for p in err.value.problems] == [
        "gpucluster:fleet.workers[0].stack: got 'fleet-east'; its API endpoint is private (deployerInVpc, no "
        "publicAccessCidrs), and the manager reaches a worker from its NAT gateways' addresses: add this manager's "
        "`natPublicIps` output (each as /32) to gpucluster:publicAccessCidrs in Pulumi.fleet-east.yaml"]
