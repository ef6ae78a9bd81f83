"""Config contract: the stacks parse; every bad input is reported with path, value and what is allowed."""

from __future__ import annotations

import copy

import pytest
from pydantic import ValidationError

from components.core import config
from components.core.config import ConfigError
from components.core.stack_config import parse as parse_stack
from tests.conftest import stack_config, stack_raw

DEV_POOL = {"name": "dev", "instanceType": "g6e.xlarge", "minNodes": 0, "maxNodes": 2}
P5_POOL = {"name": "h100", "instanceType": "p5.48xlarge", "minNodes": 0, "maxNodes": 4}
JOB = {"name": "train", "pool": "h100", "nodes": 2, "launcher": "mpirun", "image": "repo/train:1.0",
       "command": ["python", "train.py"]}


def problems(overrides: dict, stack: str = "dev", drop: tuple[str, ...] = (), standins: bool = True) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_stack(stack_raw(stack, overrides, drop, standins=standins), "gpucluster", stack)
    return [str(p) for p in info.value.problems]


def test_dev_stack_parses_into_frozen_dataclasses():
    cfg = stack_config("dev")
    assert cfg.cluster_name == "gpucluster-dev"
    assert cfg.region == "us-east-1"
    assert cfg.kubernetes_version == "1.35"
    assert cfg.network == config.NetworkConfig(cidr="10.10.0.0/16", nat_gateways="single", az_count=2)
    assert cfg.system_nodes == config.SystemNodesConfig(instance_type="m7i.large", count=2, disk_size_gib=50)
    (pool,) = cfg.gpu_pools
    assert (pool.name, pool.instance_type, pool.min_nodes, pool.initial_nodes, pool.max_nodes) == \
        ("dev", "g6e.xlarge", 0, 0, 2)
    assert pool.efa_enabled is False and pool.uses_placement_group is False
    assert cfg.storage.fsx.deployment_type == "SCRATCH_2" and cfg.storage.retain_on_destroy is False
    assert cfg.jobs[0].launcher == "torchrun"
    with pytest.raises(ValidationError, match="frozen"):
        cfg.cluster_name = "other"


def test_prod_stack_parses():
    cfg = stack_config("prod")
    assert cfg.network.nat_gateways == "perAz" and cfg.network.az_count == 3
    (pool,) = cfg.gpu_pools
    assert pool.instance_type == "p5.48xlarge" and pool.max_nodes == 16
    assert pool.efa_enabled and pool.uses_placement_group and pool.fabric_test
    fsx = cfg.storage.fsx
    assert (fsx.deployment_type, fsx.storage_capacity_gib, fsx.throughput_per_tib) == ("PERSISTENT_2", 48000, 500)
    assert fsx.backup_retention_days == 0 and cfg.storage.s3_link  # S3-linked: the bucket is the copy
    assert fsx.aggregate_throughput_mbps == 24000  # 48 TiB (FSx counts 1,000 GiB a TiB) x 500
    assert [j.name for j in cfg.jobs] == ["llama-70b", "gpt-pretrain"]
    assert cfg.jobs[0].model.params == 70e9 and cfg.jobs[0].model.tokens == 300e9


def test_defaults_apply_when_keys_are_absent():
    cfg = stack_config("dev", {"gpucluster:network": {}, "gpucluster:systemNodes": {}})
    assert cfg.network == config.NetworkConfig()
    assert cfg.system_nodes == config.SystemNodesConfig()
    assert cfg.training_namespace == "training"


def test_all_problems_are_reported_at_once():
    found = problems({
        "gpucluster:kubernetesVersion": "1.20",
        "gpucluster:network": {"cidr": "10.0.0.0/33", "natGateways": "double"},
        "gpucluster:gpuPools": [{**P5_POOL, "maxNodes": -1}],
    })
    assert found == [
        "gpucluster:kubernetesVersion: got '1.20'; allowed: 1.32, 1.33, 1.34, 1.35, 1.36",
        "gpucluster:network.cidr: got '10.0.0.0/33'; must be an IPv4 CIDR block such as 10.0.0.0/16 "
        "('33' is not a valid netmask)",
        "gpucluster:network.natGateways: got 'double'; allowed: single, perAz",
        "gpucluster:gpuPools[0].maxNodes: got -1; must be an integer from 1 to 450",
        "gpucluster:jobs[0].pool: got 'dev'; no such pool; pools: (none defined)",
    ]


def test_message_renders_count_and_one_line_per_problem():
    with pytest.raises(ConfigError) as info:
        parse_stack(stack_raw("dev", {"gpucluster:kubernetesVersion": "1.20", "gpucluster:bogus": "x"}))
    text = info.value.render()
    assert text.splitlines()[0] == "gpucluster: 2 configuration problems:"
    assert "  - gpucluster:bogus: unknown key; known keys:" in text


BAD_CASES = [
    # (overrides, expected message) — one problem each.
    ({"gpucluster:kubernetesVersion": "1.30"},
     "gpucluster:kubernetesVersion: got '1.30'; allowed: 1.32, 1.33, 1.34, 1.35, 1.36"),
    # YAML reads 1.30 as 1.3: the message must give back what was meant.
    ({"gpucluster:kubernetesVersion": 1.30},
     "gpucluster:kubernetesVersion: got '1.3'; quote the version (\"1.30\") so YAML keeps it a string; "
     "allowed: 1.32, 1.33, 1.34, 1.35, 1.36"),
    ({"gpucluster:clusterNmae": "x"}, "gpucluster:clusterNmae: unknown key; known keys:"),
    ({"gpucluster:network": {"cidr": "10.0.0.0/16", "natGateway": "single"}},
     "gpucluster:network.natGateway: unknown key; known keys: azCount, cidr, natGateways"),
    ({"gpucluster:network": {"cidr": "8.8.0.0/16"}},
     "gpucluster:network.cidr: got '8.8.0.0/16'; must be a private range"),
    ({"gpucluster:network": {"cidr": "10.0.0.0/24"}},
     "gpucluster:network.cidr: got '10.0.0.0/24'; prefix length must be from /16 to /20"),
    ({"gpucluster:network": {"azCount": 1}},
     "gpucluster:network.azCount: got 1; must be an integer from 2 to 6"),
    ({"gpucluster:adminPrincipalArns": ["arn:aws:iam::1234:role/Admin"]},
     "gpucluster:adminPrincipalArns[0]: got 'arn:aws:iam::1234:role/Admin'; must be an IAM role or user ARN"),
    ({"gpucluster:publicAccessCidrs": ["52.94.76.5/24"]},
     "gpucluster:publicAccessCidrs[0]: got '52.94.76.5/24'; has host bits set: the network is 52.94.76.0/24, "
     "the address alone 52.94.76.5/32"),
    ({"gpucluster:gpuAvailabilityZone": "us-west-2a"},
     "gpucluster:gpuAvailabilityZone: got 'us-west-2a'; must be a zone of aws:region 'us-east-1'"),
    ({"gpucluster:systemNodes": {"instanceType": "p5.48xlarge"}},
     "gpucluster:systemNodes.instanceType: got 'p5.48xlarge'; allowed: m7i.large, m7i.xlarge, m7i.2xlarge"),
    ({"gpucluster:systemNodes": {"count": "two"}},
     "gpucluster:systemNodes.count: got 'two'; must be an integer from 1 to 20"),
    ({"gpucluster:gpuPools": [{**DEV_POOL, "instanceType": "m7i.xlarge"}]},
     "gpucluster:gpuPools[0].instanceType: got 'm7i.xlarge'; is not a GPU instance type; allowed: p4d.24xlarge"),
    ({"gpucluster:gpuPools": [{**DEV_POOL, "instanceType": "p9.96xlarge"}]},
     "gpucluster:gpuPools[0].instanceType: got 'p9.96xlarge'; allowed GPU types: p4d.24xlarge"),
    ({"gpucluster:gpuPools": [{**DEV_POOL, "minNodes": 3, "maxNodes": 2}]},
     "gpucluster:gpuPools[0].maxNodes: got 2; must be >= minNodes (3)"),
    ({"gpucluster:gpuPools": [{**DEV_POOL, "desiredNodes": 5}]},
     "gpucluster:gpuPools[0].desiredNodes: got 5; must be from minNodes (0) to maxNodes (2)"),
    ({"gpucluster:gpuPools": [DEV_POOL, DEV_POOL]},
     "gpucluster:gpuPools[1].name: duplicate pool name 'dev' (first at gpucluster:gpuPools[0].name)"),
    ({"gpucluster:gpuPools": [{**DEV_POOL, "name": "Dev_Pool"}], "gpucluster:jobs": []},
     "gpucluster:gpuPools[0].name: got 'Dev_Pool'; must be a lowercase DNS label of at most 32 characters"),
    ({"gpucluster:gpuPools": [{**DEV_POOL, "capacityType": "RESERVED"}]},
     "gpucluster:gpuPools[0].capacityType: got 'RESERVED'; allowed: ON_DEMAND, SPOT, CAPACITY_BLOCK"),
    ({"gpucluster:gpuPools": [{**P5_POOL, "capacityType": "CAPACITY_BLOCK"}],
      "gpucluster:jobs": []},
     "gpucluster:gpuPools[0].capacityReservationId: is required when capacityType is CAPACITY_BLOCK"),
    ({"gpucluster:gpuPools": [{**P5_POOL, "capacityReservationId": "cr-123"}], "gpucluster:jobs": []},
     "gpucluster:gpuPools[0].capacityReservationId: got 'cr-123'; must be a capacity reservation id"),
    ({"gpucluster:gpuPools": [{**P5_POOL, "capacityType": "SPOT", "capacityReservationId": "cr-0123456789abcdef0"}],
      "gpucluster:jobs": []},
     "gpucluster:gpuPools[0].capacityReservationId: got 'cr-0123456789abcdef0'; must not be set with capacityType SPOT"),
    ({"gpucluster:gpuPools": [{**DEV_POOL, "efa": "required"}]},
     "gpucluster:gpuPools[0].efa: got 'required', but g6e.xlarge has no EFA"),
    ({"gpucluster:gpuPools": [{**DEV_POOL, "placementGroup": "cluster"}]},
     "gpucluster:gpuPools[0].placementGroup: got 'cluster', but the pool has no EFA"),
    ({"gpucluster:gpuPools": [{**DEV_POOL, "fabricTest": True}]},
     "gpucluster:gpuPools[0].fabricTest: needs an EFA pool; g6e.xlarge with efa auto has none"),
    ({"gpucluster:gpuPools": [{**P5_POOL, "maxNodes": 1, "fabricTest": True}], "gpucluster:jobs": []},
     "gpucluster:gpuPools[0].fabricTest: needs maxNodes >= 2 to test the fabric (maxNodes is 1)"),
    ({"gpucluster:gpuPools": [{**DEV_POOL, "labels": {"team": "a b"}}]},
     "gpucluster:gpuPools[0].labels.team: got 'a b'; must be a Kubernetes label value"),
    ({"gpucluster:gpuPools": "h100"}, "gpucluster:gpuPools: got 'h100'; must be structured YAML (a list or mapping)"),
    ({"gpucluster:gpuPools": {"name": "h100"}}, "gpucluster:gpuPools: got {'name': 'h100'}; must be a list"),
    ({"gpucluster:storage": {"fsx": {"storageCapacityGiB": 3000}}},
     "gpucluster:storage.fsx.storageCapacityGiB: got 3000; allowed: 1200, 2400, or a multiple of 2400"),
    ({"gpucluster:storage": {"fsx": {"deploymentType": "PERSISTENT_2", "storageCapacityGiB": 2400,
                                     "throughputPerTiB": 333}}},
     "gpucluster:storage.fsx.throughputPerTiB: got 333; allowed: 125, 250, 500, 1000 (MB/s/TiB)"),
    ({"gpucluster:storage": {"fsx": {"deploymentType": "SCRATCH_2", "throughputPerTiB": 250}}},
     "gpucluster:storage.fsx.throughputPerTiB: got 250; applies to PERSISTENT_2 only; SCRATCH_2 has a fixed "
     "200 MB/s/TiB, remove the key"),
    ({"gpucluster:storage": {"fsx": {"deploymentType": "SCRATCH_2", "efaEnabled": True}}},
     "gpucluster:storage.fsx.efaEnabled: got true; EFA-enabled FSx needs deploymentType PERSISTENT_2, not SCRATCH_2"),
    ({"gpucluster:storage": {"fsx": {"deploymentType": "SCRATCH_1"}}},
     "gpucluster:storage.fsx.deploymentType: got 'SCRATCH_1'; allowed: SCRATCH_2, PERSISTENT_2"),
    ({"gpucluster:storage": {"fsx": {"deploymentType": "PERSISTENT_2", "storageCapacityGiB": 2400,
                                     "backupRetentionDays": 7}}},
     "gpucluster:storage.fsx.backupRetentionDays: FSx cannot back up a file system linked to S3 (the versioned "
     "bucket is the durable copy); remove the backup settings or set storage.s3Link: false"),
    ({"gpucluster:storage": {"fsx": {"deploymentType": "SCRATCH_2", "backupRetentionDays": 7}, "s3Link": False}},
     "gpucluster:storage.fsx.backupRetentionDays: got 7; backups need PERSISTENT_2; use 0 or omit"),
    ({"gpucluster:storage": {"datasetPrefix": "/data/"}},
     "gpucluster:storage.datasetPrefix: got '/data/'; must be an S3 key prefix such as datasets/"),
    ({"gpucluster:storage": {"datasetPrefix": "data"}},
     "gpucluster:storage.datasetPrefix: got 'data'; must be an S3 key prefix such as datasets/"),
    ({"gpucluster:storage": {"checkpointPrefix": "datasets/ckpt/"}},
     "gpucluster:storage.checkpointPrefix: got 'datasets/ckpt/'; must not overlap datasetPrefix 'datasets/'"),
    ({"gpucluster:jobs": [{**JOB, "pool": "dev", "gpusPerNode": 4}]},
     "gpucluster:jobs[0].gpusPerNode: got 4; g6e.xlarge has 1 GPUs per node"),
    ({"gpucluster:jobs": [{**JOB, "pool": "dev", "nodes": 3}]},
     "gpucluster:jobs[0].nodes: got 3; pool 'dev' has maxNodes 2"),
    ({"gpucluster:jobs": [{**JOB, "pool": "nope"}]},
     "gpucluster:jobs[0].pool: got 'nope'; no such pool; pools: dev"),
    ({"gpucluster:jobs": [{**JOB, "pool": "dev", "nodes": 1, "launcher": "horovodrun"}]},
     "gpucluster:jobs[0].launcher: got 'horovodrun'; allowed: mpirun, torchrun"),
    ({"gpucluster:jobs": [{**JOB, "pool": "dev", "nodes": 1, "image": "repo/train:latest"}]},
     "gpucluster:jobs[0].image: got 'repo/train:latest'; is tagged latest: pin a version tag or digest"),
    ({"gpucluster:jobs": [{**JOB, "pool": "dev", "nodes": 1, "image": "repo/train"}]},
     "gpucluster:jobs[0].image: got 'repo/train'; is not pinned: give a version tag (repo:1.2.0) or a digest"),
    ({"gpucluster:jobs": [{**JOB, "pool": "dev", "nodes": 1, "env": {"1BAD": "x"}}]},
     "gpucluster:jobs[0].env.1BAD: key '1BAD' is not an environment variable name"),
    ({"gpucluster:jobs": [{k: v for k, v in JOB.items() if k != "command"} | {"pool": "dev", "nodes": 1}]},
     "gpucluster:jobs[0].command: is required"),
    ({"gpucluster:jobs": [{**JOB, "pool": "dev", "nodes": 1, "runPolicy": {"cleanPodPolicy": "Some"}}]},
     "gpucluster:jobs[0].runPolicy.cleanPodPolicy: got 'Some'; allowed: None, Running, All"),
    ({"gpucluster:jobs": [{**JOB, "pool": "dev", "nodes": 1, "model": {"params": "lots"}}]},
     "gpucluster:jobs[0].model.params: got 'lots'; must be a positive count such as 7e9 or 7B"),
    ({"gpucluster:prices": {"p5.48xlarge": -1}},
     "gpucluster:prices.p5.48xlarge: got -1; must be a number > 0"),
    # An unbounded cost bound would overflow the deadline it buys (YAML's .inf, or the engine's "inf").
    ({"gpucluster:jobs": [{**JOB, "pool": "dev", "nodes": 1, "maxCostUsd": float("inf")}]},
     "gpucluster:jobs[0].maxCostUsd: got inf; must be a number > 0"),
    ({"gpucluster:jobs": [{**JOB, "pool": "dev", "nodes": 1, "maxCostUsd": "inf"}]},
     "gpucluster:jobs[0].maxCostUsd: got 'inf'; must be a number > 0"),
    ({"gpucluster:prices": {"p7.48xlarge": 10}},
     "gpucluster:prices.p7.48xlarge: key 'p7.48xlarge' is not a catalog instance type; known: p4d.24xlarge"),
    ({"gpucluster:tags": {"aws:owner": "me"}},
     "gpucluster:tags.aws:owner: key 'aws:owner' is not a valid AWS tag key"),
]


@pytest.mark.parametrize("overrides,expected", BAD_CASES, ids=[m.split(":", 2)[1][:40] for _, m in BAD_CASES])
def test_bad_config_is_reported_with_path_value_and_allowed(overrides, expected):
    found = problems(copy.deepcopy(overrides))
    assert len(found) == 1, found
    assert found[0].startswith(expected), found[0]


def test_missing_region_is_reported():
    assert problems({}, drop=("aws:region",)) == [
        "aws:region: got null; must be set to an AWS region that has EKS, such as us-east-1"]


def test_a_region_that_does_not_exist_is_a_config_error():
    (found,) = problems({"aws:region": "us-east-7"})
    assert found.startswith("aws:region: got 'us-east-7'; not a region with EKS; regions: af-south-1, ")
    assert "us-east-1" in found and "cn-north-1" in found and "us-gov-west-1" in found


# -- what a real account checks (issue 9) -------------------------------------


def test_the_shipped_stacks_leave_only_the_deployers_keys_unset():
    # Raw, as the Pulumi CLI would pass them: the two keys the README says to set, nothing else.
    for stack in ("dev", "prod"):
        found = problems({}, stack=stack, standins=False)
        assert [f.split(":")[1] for f in found] == ["adminPrincipalArns", "publicAccessCidrs"], found
        assert found[0].startswith("gpucluster:adminPrincipalArns: is required")
        assert "python -m bootstrap whoami" in found[0]


def test_private_only_endpoint_needs_the_deployer_in_the_vpc():
    admin = {"gpucluster:adminPrincipalArns": ["arn:aws:iam::210987654321:role/Admin"]}
    found = problems({**admin, "gpucluster:publicAccessCidrs": []}, standins=False)
    assert found == [
        "gpucluster:publicAccessCidrs: is empty, so the API endpoint would be private-only and unreachable from "
        "where pulumi runs: every Kubernetes resource, and `pulumi destroy`, would fail; list the public CIDR you "
        "deploy from (your address: `curl -s https://checkip.amazonaws.com`, as a /32), or set "
        "gpucluster:deployerInVpc: true when pulumi runs inside the VPC"]
    raw = stack_raw("dev", {**admin, "gpucluster:publicAccessCidrs": [], "gpucluster:deployerInVpc": True},
                    standins=False)
    cfg = parse_stack(raw, "gpucluster", "dev")
    assert cfg.public_access_cidrs == () and cfg.deployer_in_vpc is True


@pytest.mark.parametrize("cidr", ["192.0.2.0/24", "198.51.100.7/32", "203.0.113.0/24", "203.0.0.0/16"])
def test_documentation_ranges_are_rejected(cidr):
    (found,) = problems({"gpucluster:publicAccessCidrs": [cidr]})
    assert found.startswith(f"gpucluster:publicAccessCidrs[0]: got '{cidr}'; is a documentation-only range "
                            "(RFC 5737) that EKS rejects")


@pytest.mark.parametrize("cidr", ["10.0.0.0/8", "192.168.1.0/24", "127.0.0.1/32", "169.254.0.0/16"])
def test_private_and_reserved_ranges_are_rejected(cidr):
    (found,) = problems({"gpucluster:publicAccessCidrs": [cidr]})
    assert "is not a public range" in found


@pytest.mark.parametrize("arn", ["arn:aws:iam::123456789012:role/Admin", "arn:aws:iam::111122223333:user/me"])
def test_documentation_example_accounts_are_rejected(arn):
    (found,) = problems({"gpucluster:adminPrincipalArns": [arn]})
    assert found.endswith("an AWS documentation example account; use a role of your own account")


def test_principals_of_other_accounts_are_valid():
    # STANDARD access entries take principals of other accounts (EKS User Guide, "Create access entries").
    arns = ["arn:aws:iam::210987654321:role/Admin", "arn:aws:iam::345678901234:role/team/ci/Deployer"]
    assert stack_config("dev", {"gpucluster:adminPrincipalArns": arns}).admin_principal_arns == tuple(arns)


def test_an_assumed_role_session_arn_names_whoami():
    (found,) = problems({"gpucluster:adminPrincipalArns": ["arn:aws:sts::210987654321:assumed-role/Admin/me"]})
    assert "is a session (assumed-role) ARN" in found and "bootstrap whoami" in found


@pytest.mark.parametrize("namespace", ["default", "kube-system", "kubeflow", "kubeflow-system", "kueue-system",
                                       "mpi-operator", "kube-public"])
def test_training_namespace_cannot_be_one_the_program_owns(namespace):
    (found,) = problems({"gpucluster:trainingNamespace": namespace})
    assert found.startswith(f"gpucluster:trainingNamespace: got '{namespace}'; is a namespace the cluster's system "
                            "or operators own")


def test_keys_without_a_namespace_or_in_an_unknown_one_are_unknown():
    found = problems({"clusterName": "x", "gpuclster:clusterName": "y"})
    assert found == [
        "clusterName: unknown key: stack config keys carry a namespace; did you mean gpucluster:clusterName?",
        "gpuclster:clusterName: unknown namespace 'gpuclster'; this program reads gpucluster:* and the providers' "
        "keys (aws, kubernetes, random, pulumi)"]


def test_gpu_zone_by_id_or_name():
    assert stack_config("dev", {"gpucluster:gpuAvailabilityZone": "use1-az6"}).gpu_availability_zone == "use1-az6"
    (found,) = problems({"gpucluster:gpuAvailabilityZone": "useast1"})
    assert "an availability zone name such as us-east-1a or a zone ID such as use1-az6" in found


def test_versions_are_pinned_per_stack():
    cfg = stack_config("prod")
    assert cfg.versions.ami_release_version == "1.35.6-20260714"
    assert set(cfg.versions.addons) == set(config.ADDONS)
    found = problems({"gpucluster:versions": {"amiReleaseVersion": "1.34.2-20251120",
                                              "addons": {"kube-proxy": "v1.34.6-eksbuild.2", "coredns": "latest"}}})
    assert "gpucluster:versions.amiReleaseVersion: got '1.34.2-20251120'; must be a release of Kubernetes 1.35 " \
           "(kubernetesVersion); run `python -m bootstrap upgrade --stack <stack> --write` to resolve and pin them" in found
    assert "gpucluster:versions.addons.vpc-cni: is required (the pinned vpc-cni add-on version); run `python -m " \
           "bootstrap upgrade --stack <stack> --write` to resolve and pin them" in found
    assert any(f.startswith("gpucluster:versions.addons.kube-proxy: got 'v1.34.6-eksbuild.2'; must be a kube-proxy "
                            "of Kubernetes 1.35") for f in found)
    assert any(f.startswith("gpucluster:versions.addons.coredns: got 'latest'; must be an EKS add-on version")
               for f in found)


def test_every_kubernetes_version_has_a_cluster_autoscaler_release(monkeypatch):
    from components.core import versions

    assert set(versions.CLUSTER_AUTOSCALER_IMAGE_TAGS) == set(config.EKS_VERSIONS)
    monkeypatch.delitem(versions.CLUSTER_AUTOSCALER_IMAGE_TAGS, "1.35")
    (found,) = problems({})
    assert found == "gpucluster:kubernetesVersion: got '1.35'; has no cluster-autoscaler release pinned; " \
                    "supported: 1.32, 1.33, 1.34, 1.36"


def test_idle_minutes():
    assert stack_config("dev").gpu_pools[0].idle_minutes == 3
    assert stack_config("prod").gpu_pools[0].idle_minutes == 5
    (found,) = problems({"gpucluster:gpuPools": [{**DEV_POOL, "idleMinutes": 61}]})
    assert found == "gpucluster:gpuPools[0].idleMinutes: got 61; must be an integer from 1 to 60"


def test_max_cost_must_buy_some_minutes():
    (found,) = problems({"gpucluster:jobs": [{**JOB, "pool": "dev", "nodes": 2, "maxCostUsd": 0.5}]})
    assert found == ("gpucluster:jobs[0].maxCostUsd: got 0.5; buys 483 s of 2 x g6e.xlarge ($3.72/h); "
                     "at least 10 minutes' worth is needed")


def test_launcher_specific_keys_are_not_silently_ignored():
    found = problems({"gpucluster:jobs": [
        {**JOB, "pool": "dev", "nodes": 1, "maxRestarts": 5},
        {**JOB, "name": "t", "pool": "dev", "nodes": 1, "launcher": "torchrun",
         "runPolicy": {"backoffLimit": 2, "activeDeadlineSeconds": 600}}]})
    assert found == [
        "gpucluster:jobs[0].maxRestarts: applies to launchers torchrun and ps (the JobSet restarts the gang); an "
        "MPIJob retries with runPolicy.backoffLimit",
        "gpucluster:jobs[1].runPolicy.backoffLimit: applies to launcher mpirun (MPIJob) only; a torchrun job "
        "restarts with maxRestarts and its pods end with it"]


def test_aws_profile_and_assumed_role_reach_the_config():
    cfg = stack_config("dev", {"aws:profile": "ml", "aws:assumeRoles": [
        {"roleArn": "arn:aws:iam::210987654321:role/Outer"}, {"roleArn": "arn:aws:iam::210987654321:role/Deploy"}]})
    assert (cfg.aws_profile, cfg.aws_role_arn) == ("ml", "arn:aws:iam::210987654321:role/Deploy")
    (found,) = problems({"aws:assumeRoles": [{"roleArn": "arn:aws:iam::210987654321:role/D", "externalId": "x"}]})
    assert found.startswith("aws:assumeRoles[0].externalId: the Kubernetes provider authenticates with "
                            "`aws eks get-token --role-arn`, which cannot pass an external ID")


def test_required_pool_and_job_fields():
    found = problems({"gpucluster:gpuPools": [{"name": "x"}], "gpucluster:jobs": [{"name": "j"}]})
    assert "gpucluster:gpuPools[0].instanceType: is required (a GPU instance type)" in found
    assert "gpucluster:gpuPools[0].maxNodes: is required (an integer from 1 to 450)" in found
    assert "gpucluster:jobs[0].pool: is required (the name of a gpuPools entry)" in found
    assert "gpucluster:jobs[0].launcher: is required (one of mpirun, torchrun, ps)" in found


def test_placement_group_defaults_follow_reservations():
    base = {**P5_POOL}
    plain = stack_config("dev", {"gpucluster:gpuPools": [base], "gpucluster:jobs": []}).gpu_pools[0]
    reserved = stack_config("dev", {"gpucluster:gpuPools": [{**base, "capacityType": "CAPACITY_BLOCK",
                                                             "capacityReservationId": "cr-0123456789abcdef0"}],
                                    "gpucluster:jobs": []}).gpu_pools[0]
    assert plain.uses_placement_group is True
    assert reserved.uses_placement_group is False
    # An explicit one on a reservation would fail to launch: refused, not built.
    with pytest.raises(ConfigError) as err:
        stack_config("dev", {"gpucluster:gpuPools": [{**base, "capacityReservationId": "cr-0123456789abcdef0",
                                                      "placementGroup": "cluster"}], "gpucluster:jobs": []})
    assert "gpucluster:gpuPools[0].placementGroup: got 'cluster' with capacityReservationId cr-0123456789abcdef0" \
        in err.value.render()


def test_parse_count_suffixes():
    assert config.parse_count("70B") == 70e9
    assert config.parse_count("1.5T") == 1.5e12
    assert config.parse_count("13b") == 13e9
    assert config.parse_count(7e9) == 7e9
    assert config.parse_count("lots") is None


P5_JOB = {"name": "big", "pool": "h100", "nodes": 1, "launcher": "torchrun", "image": "repo/train:1.0",
          "command": ["python", "train.py"]}


def test_a_job_whose_model_cannot_fit_names_the_minimum():
    # 70e9 params x 16 B under ZeRO-3 over 8 H100: 140 GB per GPU > 75 % of 80 GiB (64.4 GB).
    # 3 nodes: 16 x 70e9 / 24 = 46.7 GB fits.
    found = problems({"gpucluster:gpuPools": [{**P5_POOL, "maxNodes": 2}],
                      "gpucluster:jobs": [{**P5_JOB, "model": {"params": "70B", "zeroStage": 3}}]})
    assert found == ["gpucluster:jobs[0].model: 140.0 GB of model state per GPU does not fit 64.4 GB usable on "
                     "H100 with 1 node; the minimum is 3 nodes of p5.48xlarge at zeroStage 3 "
                     "(pool 'h100' has maxNodes 2)"]


def test_a_job_that_never_fits_says_what_to_raise():
    found = problems({"gpucluster:gpuPools": [P5_POOL],
                      "gpucluster:jobs": [{**P5_JOB, "model": {"params": "70B", "zeroStage": 0}}]})
    assert found == ["gpucluster:jobs[0].model: 1120.0 GB of model state per GPU does not fit 64.4 GB usable on "
                     "H100 with 1 node; no node count fits at zeroStage 0; raise zeroStage, tp or pp"]


def test_a_job_that_fits_parses():
    cfg = stack_config("dev", {"gpucluster:gpuPools": [P5_POOL],
                               "gpucluster:jobs": [{**P5_JOB, "nodes": 3, "model": {"params": "70B"}}]})
    assert cfg.jobs[0].model == config.ModelConfig(params=70e9)


@pytest.mark.parametrize(("caller", "admin"), [
    ("arn:aws:sts::210987654321:assumed-role/Deployer/me", True),  # session of a listed role, path and all
    ("arn:aws:sts::210987654321:assumed-role/Other/me", False),
    ("arn:aws:sts::345678901234:assumed-role/Deployer/me", False),  # same name, other account
    ("arn:aws:iam::210987654321:user/alice", True),
    ("arn:aws:iam::210987654321:user/bob", False),
])
def test_is_admin_matches_a_role_session_to_its_role_without_iam(caller, admin):
    from components.core.config.values import is_admin

    admins = ["arn:aws:iam::210987654321:role/platform/Deployer", "arn:aws:iam::210987654321:user/alice"]
    assert is_admin(caller, admins) is admin
