"""The offline plan CLI: real program, mock runtime, parsed output."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from bootstrap import stackfile
from tests.conftest import ROOT, plan, plan_out

# Every stack file a test writes carries the shipped pins and the keys only a deployer knows.
PINS = stackfile.stack_versions(ROOT / "Pulumi.dev.yaml")
DEPLOYER = {"gpucluster:adminPrincipalArns": ["arn:aws:iam::210987654321:role/Admin"],
            "gpucluster:publicAccessCidrs": ["52.94.76.10/32"]}


def write_stack(path, config: dict) -> None:
    path.write_text(yaml.safe_dump({"config": {"aws:region": "us-east-1", "gpucluster:versions": PINS,
                                               **DEPLOYER, **config}}))


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
        "instanceTypes": ["g6e.xlarge"], "interruptible": False,
    }
    assert r["cpuPools"] == []
    cost = r["cost"]
    assert cost["minPerHour"] == pytest.approx(sum(x["minPerHour"] for x in cost["lines"]), abs=1e-3)
    # min: control plane 0.10 + 1 NAT 0.045 + 2 x m7i.large 0.2016 + FSx 1200 GiB SCRATCH_2
    # + Prometheus's 100 GiB gp3 volume at $0.08/GB-month
    fsx = 1200 * 0.140 / 730
    ebs = 100 * 1.073741824 * 0.08 / 730
    # + the NAT gateway's public IPv4 address and the system nodes' 2 x 50 GiB gp3 root volumes.
    ipv4, roots = 0.005, 2 * 50 * 1.073741824 * 0.08 / 730
    assert cost["minPerHour"] == pytest.approx(0.10 + 0.045 + 0.2016 + fsx + ebs + ipv4 + roots, abs=1e-4)
    assert cost["minPerMonth"] == round(cost["minPerHour"] * 730, 2)
    assert cost["notIncluded"][0].startswith("data transfer: NAT gateway processing ($0.045/GB)")
    # 2 x g6e.xlarge at maxNodes, with their 200 GiB root volumes.
    assert cost["maxPerHour"] == pytest.approx(cost["minPerHour"] + 2 * 1.861 + 2 * 200 * 1.073741824 * 0.08 / 730,
                                               abs=1e-3)


def test_prod_plan_human_output_and_speed():
    result = plan("--stack", "prod")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "gpucluster plan: stack prod (us-east-1, GPU zone us-east-1" in out
    assert ("h100: p5.48xlarge (8x H100), 0-16 nodes (up to 128 GPUs), 32 EFA, 3200 Gbps, "
            "placement: cluster placement group, ON_DEMAND, $0.00/h at min, $880.64/h at max") in out
    assert "total at maximum scale:" in out and "kubeconfig: [secret]" in out
    assert "+ aws:eks/cluster:Cluster gpucluster-prod-eks  name=gpucluster-prod version=1.35" in out


def test_the_plan_lists_the_monitoring_pieces_their_cost_and_how_to_reach_them(dev_report):
    m = dev_report["monitoring"]
    assert m["charts"] == {"kube-prometheus-stack": "88.5.3", "dcgm-exporter": "4.8.2"}
    assert m["prometheus"]["volumeGiB"] == 100 and m["prometheus"]["retentionDays"] == 15
    assert m["costPerHour"] == {"ebs": round(100 * 1.073741824 * 0.08 / 730, 4), "amp": 0.0}
    assert (m["gpuExporterPools"], m["efaCounterPools"]) == (["dev"], [])
    assert "EFA counters" not in m["scraped"] and "MPI Operator" in m["scraped"]
    assert m["dashboards"] == ["gpucluster-cluster", "gpucluster-job", "gpucluster-node-health"]
    assert m["portForward"]["grafana"] == "kubectl -n monitoring port-forward svc/kps-grafana 3000:80"
    assert m["portForward"]["tensorboard"] == "kubectl -n training port-forward svc/tensorboard 6006:6006"
    assert m["receivers"] == [] and m["remoteWrite"] == "none"


def test_plan_text_monitoring_section_and_off(tmp_path):
    out = plan("--stack", "prod").stdout
    section = out.split("\nMonitoring (README \"Watch a job\")\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert section[0].startswith("  kube-prometheus-stack 88.5.3 on the system nodes: Prometheus (32 d on a 100 GiB "
                                 "gp3 volume, $0.0118/h;")
    assert section[1] == "  dcgm-exporter 4.8.2 on GPU pools: h100; EFA counters on: h100"
    assert "  remote write: off" in section
    write_stack(tmp_path / "Pulumi.off.yaml", {
        "gpucluster:gpuPools": [{"name": "dev", "instanceType": "g6e.xlarge", "maxNodes": 1}],
        "gpucluster:observability": {"enabled": False}})
    result = plan("--stack", "off", "--stack-file", str(tmp_path / "Pulumi.off.yaml"))
    assert result.returncode == 0, result.stderr
    assert "\nMonitoring: off (gpucluster:observability.enabled: false)\n" in result.stdout


def test_prod_examples_are_opt_in_and_the_plan_says_what_up_starts_now():
    report = json.loads(plan("--stack", "prod", "--json").stdout)
    jobs = {j["name"]: j for j in report["jobs"]}
    assert (jobs["llama-70b"]["startOnUp"], jobs["gpt-pretrain"]["startOnUp"]) == (False, False)
    assert report["startsNow"] == {"jobs": [{"job": "nccl-tests-h100", "nodes": 2, "instanceType": "p5.48xlarge",
                                             "perHour": 110.08}], "perHour": 110.08}
    out = plan("--stack", "prod").stdout
    assert "  `pulumi up` starts at once: 2 x p5.48xlarge (nccl-tests-h100): $110.08/h while they run" in out
    assert "gpt-pretrain: mpirun on h100, 2 nodes, 16 GPUs; queue training/gpu, priority gpucluster-training, " \
           "starts with `python -m bootstrap submit` (startOnUp: false)" in out


def test_prod_plan_json_sizing_and_time():
    result = plan("--stack", "prod", "--json")
    report = json.loads(result.stdout)
    jobs = {j["name"]: j for j in report["jobs"]}
    sizing = jobs["llama-70b"]["sizing"]
    # 70e9 params, tp 8, ZeRO-3 over 16 data-parallel ranks: 16 B x 70e9 / 8 / 16 = 8.75 GB per GPU.
    assert sizing["model_state_gb_per_gpu"] == pytest.approx(8.75)
    assert sizing["fits"] is True
    assert jobs["gpt-pretrain"]["sizing"] is None
    assert "seconds" not in report  # a timing would make two plans of one stack differ


def test_prod_plan_queues_the_jobs_in_order_with_their_deadlines(tmp_path):
    # prod's examples as if they started with `pulumi up` (shipped opt-in): the queue's order with all three.
    started = tmp_path / "Pulumi.prod.yaml"
    started.write_text((ROOT / "Pulumi.prod.yaml").read_text().replace("startOnUp: false", "startOnUp: true"))
    report = json.loads(plan("--stack", "prod", "--json", "--stack-file", str(started)).stdout)
    jobs = {j["name"]: j for j in report["jobs"]}
    assert list(jobs) == ["nccl-tests-h100", "llama-70b", "gpt-pretrain"]
    assert {j["queue"] for j in jobs.values()} == {"training/gpu"}
    # 16 + 2 + 2 nodes on a 16-node pool: the fabric test first (higher priority), gpt-pretrain beside it,
    # llama-70b once all 16 nodes are free, instead of a deadlock of half-started jobs.
    assert (jobs["nccl-tests-h100"]["startOrder"], jobs["nccl-tests-h100"]["startsAfter"]) == (1, [])
    assert (jobs["gpt-pretrain"]["startOrder"], jobs["gpt-pretrain"]["startsAfter"]) == (2, [])
    assert (jobs["llama-70b"]["startOrder"], jobs["llama-70b"]["startsAfter"]) == (3, ["nccl-tests-h100",
                                                                                         "gpt-pretrain"])
    assert jobs["nccl-tests-h100"]["priority"] == "gpucluster-fabric-test"
    llama = jobs["llama-70b"]["teardown"]
    assert (llama["deadlineSeconds"], llama["deadlineFrom"]) == (3628800, "activeDeadlineSeconds")
    # 16 x $55.04/h over 42 days, plus the idle tail of idleMinutes 5 + 2.
    assert llama["worstCaseCostUsd"] == pytest.approx(16 * 55.04 * (1008 + 7 / 60), abs=0.01)
    gpt = jobs["gpt-pretrain"]["teardown"]
    assert (gpt["deadlineSeconds"], gpt["deadlineFrom"]) == (int(5000 / (2 * 55.04) * 3600), "maxCostUsd")
    assert gpt["idleRemovalMinutes"] == 7 and gpt["cleanPodPolicy"] == "Running"


def test_plan_names_the_stand_ins_and_the_zone_ids():
    report = json.loads(plan("--stack", "dev", "--json").stdout)
    assert report["standIns"] == {"gpucluster:adminPrincipalArns": ["arn:aws:iam::000000000000:role/gpucluster-admin"],
                                  "gpucluster:publicAccessCidrs": ["1.1.1.1/32"]}
    assert report["zones"] == [{"name": "us-east-1a", "zoneId": "use1-az6", "gpu": True, "cluster": True},
                               {"name": "us-east-1b", "zoneId": "use1-az1", "gpu": False, "cluster": True}]
    ready = report["timeToReady"]
    # The critical path through the program's dependencies (tests/test_time_to_ready.py): within its bound.
    assert (ready["criticalPathMinutes"], ready["boundMinutes"], ready["ratio"], ready["unneededWaits"]) == (21, 21, 1, [])
    assert [(s["name"].removeprefix("gpucluster-dev-"), s["minutes"], s["finishMinutes"])
            for s in ready["criticalPath"]] == [
        ("eks", 9, 9), ("eks-pod-identity-agent", 1, 10), ("system-nodes", 4, 14), ("aws-ebs-csi-driver", 1, 15),
        ("monitoring-stack", 5, 20), ("monitoring-dcgm-exporter", 1, 21)]
    assert {k: ready[k] for k in ("eksMinutes", "storageMinutes", "s3Link")} == {
        "eksMinutes": 9, "storageMinutes": 17,
        "s3Link": "one data repository association (the bucket at /), created after the file system"}
    text = plan("--stack", "dev").stdout
    assert "  ~21 min; with only the waits each step needs ~21 min (ratio 1.00). Critical path:" in text
    assert "    by 20 min  gpucluster-dev-monitoring-stack +5: Prometheus' and Alertmanager's volumes" in text
    assert "Not set in the stack (set before `pulumi up`; the plan stands in for them)" in text
    assert "  us-east-1a = use1-az6: GPU pools and FSx, cluster subnets" in text


def test_out_dir_writes_resources_and_kubernetes_yaml():
    tmp_path = plan_out("dev")
    resources = json.loads((tmp_path / "resources.json").read_text())
    assert {r["type"] for r in resources} >= {"aws:eks/cluster:Cluster", "aws:ec2/vpc:Vpc"}
    files = sorted(p.name for p in (tmp_path / "k8s").glob("*.yaml"))
    assert "namespace-training.yaml" in files
    ns = yaml.safe_load((tmp_path / "k8s" / "namespace-training.yaml").read_text())
    assert ns["kind"] == "Namespace" and ns["metadata"]["name"] == "training"


def test_bad_stack_prints_every_problem_without_traceback(tmp_path):
    bad = tmp_path / "Pulumi.bad.yaml"
    write_stack(bad, {
        "gpucluster:kubernetesVersion": "1.20",
        "gpucluster:gpuPools": [{"name": "a", "instanceType": "p5.48xlarge", "minNodes": 3, "maxNodes": 2}],
        "gpucluster:typo": 1,
    })
    result = plan("--stack", "bad", "--stack-file", str(bad))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        "gpucluster: 3 configuration problems:",
        "  - gpucluster:kubernetesVersion: got '1.20'; allowed: 1.32, 1.33, 1.34, 1.35, 1.36",
        "  - gpucluster:gpuPools[0].maxNodes: got 2; must be >= minNodes (3)",
        "  - gpucluster:typo: unknown key; known keys: adminPrincipalArns, alertSlackWebhookUrl, clusterName, "
        "cpuPools, deployerInVpc, fleet, gpuAvailabilityZone, gpuPools, imageCache, jobPolicyArns, jobs, kubernetesVersion, "
        "network, observability, pauseMode, paused, prices, publicAccessCidrs, storage, systemNodes, tags, teams, "
        "trainingNamespace, versions",
    ]
    assert result.stdout == ""


def test_missing_stack_is_a_clean_error():
    result = plan("--stack", "nope")
    assert result.returncode == 2
    assert result.stderr.strip() == ("gpucluster: no stack 'nope': Pulumi.nope.yaml not found; stacks: dev, fleet, "
                                     "fleet-east, fleet-west, prod")


def test_bad_config_registers_nothing():
    from bootstrap.offline import mocks
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
    from bootstrap.offline import mocks
    from tests.conftest import stack_raw

    # AWS's offerings as shipped in moto: p6-b200.48xlarge only in us-east-1c.
    pools = [{"name": "b200", "instanceType": "p6-b200.48xlarge", "maxNodes": 2}]
    raw = stack_raw("dev", {"gpucluster:gpuAvailabilityZone": "us-east-1a", "gpucluster:gpuPools": pools,
                            "gpucluster:jobs": []})
    with pytest.raises(Exception) as info:
        mocks.run_program(raw, "dev")
    assert ("gpucluster:gpuAvailabilityZone: got 'us-east-1a' (use1-az6), which does not offer p6-b200.48xlarge; "
            "zones offering it: us-east-1c (use1-az2)") in str(info.value)
    assert info.value.recording.resources == []


def test_plan_warns_when_fsx_throughput_per_gpu_is_below_target(tmp_path):
    stack = tmp_path / "Pulumi.thin.yaml"
    write_stack(stack, {
        "gpucluster:gpuPools": [{"name": "h100", "instanceType": "p5.48xlarge", "maxNodes": 4}],
        "gpucluster:storage": {"fsx": {"deploymentType": "SCRATCH_2", "storageCapacityGiB": 1200}},
    })
    result = plan("--stack", "thin", "--stack-file", str(stack))
    assert result.returncode == 0, result.stderr
    # 32 GPUs x 100 MB/s = 3,200 MB/s; 1.2 TiB SCRATCH_2 gives 240 MB/s; 3,200 / 200 = 16 TiB -> 16,800 GiB.
    assert "  FSx for Lustre SCRATCH_2 1200 GiB: aggregate 240 MB/s for up to 32 GPUs" in result.stdout
    assert ("  WARNING: FSx SCRATCH_2 1200 GiB reads 240 MB/s, below the 3,200 MB/s that 32 GPUs x 100 MB/s "
            "need; raise storageCapacityGiB to 16800") in result.stdout


# -- clean errors, never a traceback ---------------------------------------------------


def test_out_onto_an_existing_file_is_a_clean_error(tmp_path):
    target = tmp_path / "plan.txt"
    target.write_text("keep me")
    result = plan("--stack", "dev", "--out", str(target))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == f"gpucluster: --out {target}: exists and is not a directory"
    assert target.read_text() == "keep me"


@pytest.mark.parametrize(("content", "message"), [
    (None, "is a directory, not a stack file"),
    (b"config:\n  aws:region: \xff\xfe\n", "not UTF-8 text (invalid start byte at byte 22)"),
    (b"- just\n- a list\n", "must be a YAML mapping, got list"),
    (b"config: [1, 2]\n", "`config:` must be a mapping of keys to values"),
    (b"config: {a: [\n", "not valid YAML"),
])
def test_bad_stack_files_are_clean_errors(tmp_path, content, message):
    path = tmp_path / "Pulumi.x.yaml"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    result = plan("--stack", "x", "--stack-file", str(path))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith(f"gpucluster: {path}: {message}")


def test_a_region_without_offline_data_is_a_clean_error(tmp_path):
    # ap-east-2 exists (EKS has it), but moto ships no instance offerings for it.
    path = tmp_path / "Pulumi.far.yaml"
    write_stack(path, {"aws:region": "ap-east-2"})
    result = plan("--stack", "far", "--stack-file", str(path))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip() == ("gpucluster: the offline plan has no instance-type offerings for ap-east-2 "
                                     "(moto's data lacks it)")


def test_an_unknown_region_is_a_config_error(tmp_path):
    path = tmp_path / "Pulumi.nowhere.yaml"
    write_stack(path, {"aws:region": "us-nowhere-1"})
    result = plan("--stack", "nowhere", "--stack-file", str(path))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[1].startswith("  - aws:region: got 'us-nowhere-1'; not a region with EKS")


def test_costs_say_what_they_assume(tmp_path):
    path = tmp_path / "Pulumi.mixed.yaml"
    write_stack(path, {"aws:region": "us-west-2", "gpucluster:gpuPools": [
        {"name": "block", "instanceType": "p5.48xlarge", "maxNodes": 4, "capacityType": "CAPACITY_BLOCK",
         "capacityReservationId": "cr-0123456789abcdef0"},
        {"name": "spot", "instanceType": "p4d.24xlarge", "maxNodes": 2, "capacityType": "SPOT"}]})
    report = json.loads(plan("--stack", "mixed", "--stack-file", str(path), "--json").stdout)
    lines = {x["item"].split(" ")[2]: x for x in report["cost"]["lines"] if x["item"].startswith("GPU pool")}
    block, spot = lines["block"], lines["spot"]
    # The mocks' Capacity Block holds 2 instances: billed at minimum scale whether used or not.
    assert block["minPerHour"] == pytest.approx(2 * 55.04) and block["maxPerHour"] == pytest.approx(4 * 55.04)
    assert "reservation of 2 billed whether used or not" in block["item"]
    assert "Capacity Block price is set at purchase" in block["item"]
    assert spot["minPerHour"] == 0 and "SPOT: on-demand rate shown, an upper bound" in spot["item"]
    assert "us-east-1 list price; us-west-2 may differ, set gpucluster:prices" in spot["item"]


def test_zone_data_read_from_moto_s_files_is_what_moto_itself_serves():
    # The offline plan reads moto's zone table as data instead of importing
    # moto.ec2.models (half a second); it must match what moto's backend holds.
    from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend

    from bootstrap.offline import aws_data

    checked = 0
    for region, zones in RegionsAndZonesBackend.zones.items():
        try:
            ours = aws_data.moto_zones(region)
        except aws_data.PlanDataError:
            assert not aws_data._offerings_path(region).exists(), region
            continue
        assert ours == [(z.name, z.zone_id) for z in zones if z.zone_type == "availability-zone"], region
        checked += 1
    assert checked >= 20
    assert aws_data.moto_zones("us-east-1")[0] == ("us-east-1a", "use1-az6")
