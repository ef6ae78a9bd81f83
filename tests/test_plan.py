"""The offline plan CLI: real program, mock runtime, parsed output."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from tests.conftest import ROOT


def plan(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bootstrap", "plan", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def dev_report():
    result = plan("--stack", "dev", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_dev_plan_report(dev_report):
    r = dev_report
    assert r["stack"] == "dev" and r["region"] == "us-east-1"
    assert r["countsByType"]["aws:eks/cluster:Cluster"] == 1
    assert r["countsByType"]["aws:ec2/subnet:Subnet"] == 4
    assert r["resourceCount"] == sum(r["countsByType"].values())
    assert r["outputs"]["kubeconfig"] == "[secret]"
    (pool,) = r["gpuPools"]
    assert pool == {
        "name": "dev", "instanceType": "g6e.xlarge", "gpuModel": "L40S", "gpusPerNode": 1, "minNodes": 0,
        "maxNodes": 2, "gpusMax": 2, "efaInterfaces": 0, "networkGbps": None, "placement": "none",
        "capacityType": "ON_DEMAND", "pricePerNodeHour": 1.861, "costPerHourMin": 0.0, "costPerHourMax": 3.72,
    }
    cost = r["cost"]
    assert cost["minPerHour"] == pytest.approx(sum(x["minPerHour"] for x in cost["lines"]), abs=1e-3)
    # min: control plane 0.10 + 1 NAT 0.045 + 2 x m7i.large 0.2016 + FSx 1200 GiB SCRATCH_2
    fsx = 1200 * 0.140 / 730
    assert cost["minPerHour"] == pytest.approx(0.10 + 0.045 + 0.2016 + fsx, abs=1e-3)
    assert cost["maxPerHour"] == pytest.approx(cost["minPerHour"] + 2 * 1.861, abs=1e-3)


def test_prod_plan_human_output_and_speed():
    result = plan("--stack", "prod")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "gpucluster plan: stack prod (us-east-1, GPU zone us-east-1" in out
    assert ("h100: p5.48xlarge (8x H100), 0-16 nodes (up to 128 GPUs), 32 EFA, 3200 Gbps, "
            "placement: cluster placement group, ON_DEMAND, $0.00/h at min, $880.64/h at max") in out
    assert "total at maximum scale:" in out and "kubeconfig: [secret]" in out
    assert "+ aws:eks/cluster:Cluster gpucluster-prod-eks  name=gpucluster-prod version=1.35" in out


def test_prod_plan_json_sizing_and_time():
    result = plan("--stack", "prod", "--json")
    report = json.loads(result.stdout)
    jobs = {j["name"]: j for j in report["jobs"]}
    sizing = jobs["llama-70b"]["sizing"]
    # 70e9 params, tp 8, ZeRO-3 over 16 data-parallel ranks: 16 B x 70e9 / 8 / 16 = 8.75 GB per GPU.
    assert sizing["model_state_gb_per_gpu"] == pytest.approx(8.75)
    assert sizing["fits"] is True
    assert jobs["gpt-pretrain"]["sizing"] is None
    assert report["seconds"] < 30


def test_out_dir_writes_resources_and_kubernetes_yaml(tmp_path):
    result = plan("--stack", "dev", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    resources = json.loads((tmp_path / "resources.json").read_text())
    assert {r["type"] for r in resources} >= {"aws:eks/cluster:Cluster", "aws:ec2/vpc:Vpc"}
    files = sorted(p.name for p in (tmp_path / "k8s").glob("*.yaml"))
    assert "namespace-training.yaml" in files
    ns = yaml.safe_load((tmp_path / "k8s" / "namespace-training.yaml").read_text())
    assert ns["kind"] == "Namespace" and ns["metadata"]["name"] == "training"


def test_bad_stack_prints_every_problem_without_traceback(tmp_path):
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text(yaml.safe_dump({"config": {
        "aws:region": "us-east-1",
        "gpucluster:kubernetesVersion": "1.20",
        "gpucluster:gpuPools": [{"name": "a", "instanceType": "p5.48xlarge", "minNodes": 3, "maxNodes": 2}],
        "gpucluster:typo": 1,
    }}))
    result = plan("--stack", "bad", "--stack-file", str(bad))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        "gpucluster: 3 configuration problems:",
        "  - gpucluster:kubernetesVersion: got '1.20'; allowed: 1.32, 1.33, 1.34, 1.35, 1.36",
        "  - gpucluster:gpuPools[0].maxNodes: got 2; must be >= minNodes (3)",
        "  - gpucluster:typo: unknown key; known keys: adminPrincipalArns, clusterName, gpuAvailabilityZone, "
        "gpuPools, jobs, kubernetesVersion, network, prices, publicAccessCidrs, storage, systemNodes, tags, "
        "trainingNamespace",
    ]
    assert result.stdout == ""


def test_missing_stack_is_a_clean_error():
    result = plan("--stack", "nope")
    assert result.returncode == 2
    assert result.stderr.strip() == "gpucluster: no stack 'nope': Pulumi.nope.yaml not found; stacks: dev, prod"


def test_bad_config_registers_nothing():
    from bootstrap import mocks
    from tests.conftest import stack_raw

    raw = stack_raw("dev", {"gpucluster:network": {"cidr": "bogus"}})
    with pytest.raises(Exception) as info:
        mocks.run_program(raw, "dev")
    assert type(info.value).__name__ == "RunError"
    assert "gpucluster:network.cidr: got 'bogus'" in str(info.value)
    assert info.value.recording.resources == []


def test_cli_usage():
    result = subprocess.run([sys.executable, "-m", "bootstrap"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2 and "verbs:" in result.stdout


def test_zone_without_the_pool_type_fails_before_any_resource():
    from bootstrap import mocks
    from tests.conftest import stack_raw

    # AWS's offerings as shipped in moto: p6-b200.48xlarge only in us-east-1c.
    pools = [{"name": "b200", "instanceType": "p6-b200.48xlarge", "maxNodes": 2}]
    raw = stack_raw("dev", {"gpucluster:gpuAvailabilityZone": "us-east-1a", "gpucluster:gpuPools": pools,
                            "gpucluster:jobs": []})
    with pytest.raises(Exception) as info:
        mocks.run_program(raw, "dev")
    assert ("gpucluster:gpuAvailabilityZone: got 'us-east-1a', which does not offer p6-b200.48xlarge; "
            "zones offering it: us-east-1c") in str(info.value)
    assert info.value.recording.resources == []


def test_plan_warns_when_fsx_throughput_per_gpu_is_below_target(tmp_path):
    stack = tmp_path / "Pulumi.thin.yaml"
    stack.write_text(yaml.safe_dump({"config": {
        "aws:region": "us-east-1",
        "gpucluster:gpuPools": [{"name": "h100", "instanceType": "p5.48xlarge", "maxNodes": 4}],
        "gpucluster:storage": {"fsx": {"deploymentType": "SCRATCH_2", "storageCapacityGiB": 1200}},
    }}))
    result = plan("--stack", "thin", "--stack-file", str(stack))
    assert result.returncode == 0, result.stderr
    # 32 GPUs x 100 MB/s = 3,200 MB/s; 1.2 TiB SCRATCH_2 gives 240 MB/s; 3,200 / 200 = 16 TiB -> 16,800 GiB.
    assert "  FSx for Lustre SCRATCH_2 1200 GiB: aggregate 240 MB/s for up to 32 GPUs" in result.stdout
    assert ("  WARNING: FSx SCRATCH_2 1200 GiB reads 240 MB/s, below the 3,200 MB/s that 32 GPUs x 100 MB/s "
            "need; raise storageCapacityGiB to 16800") in result.stdout
