"""nccl-report on realistic nccl-tests 2.x logs (tests/data/nccl)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bootstrap.verbs import nccl_report
from bootstrap.verbs.jobs import fabric_test
from components.core.kube import launcher
from tests.conftest import stack_config
from tests.kube_fake import FakeKube
from tests.test_fabric_domains import S1, A, B, C, node, prod_nodes

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data" / "nccl"
P5_LOG = DATA / "p5_efa_2node.log"  # 2x p5.48xlarge, EFA, mpirun --tag-output prefixes
P4DE_LOG = DATA / "p4de_2node.log"  # 2x p4de.24xlarge, EFA, srun -l prefixes
SOCKET_LOG = DATA / "socket_fallback.log"  # 2x p5.48xlarge without aws-ofi-nccl
WRONG_LOG = DATA / "p4d_wrong.log"  # 2x p4d.24xlarge with #wrong values

HEADER = """\
# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1
#
# Using devices
#  Rank  0 Group  0 Pid   1001 on node-a device  0 [0x10] NVIDIA A100-SXM4-40GB
#  Rank  1 Group  0 Pid   1002 on node-b device  0 [0x10] NVIDIA A100-SXM4-40GB
"""


def run_json(capsys, *argv: str) -> tuple[int, dict]:
    code = nccl_report.main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_healthy_p5_run_passes(capsys):
    code, report = run_json(capsys, str(P5_LOG), "--instance-type", "p5.48xlarge")
    assert code == 0
    assert report["verdict"] == "PASS" and report["reasons"] == []
    assert report["peak_busbw_gbps"] == 489.22  # out-of-place at 16 GiB
    assert report["peak_size_bytes"] == 17179869184 and report["peak_size"] == "16 GiB"
    assert report["avg_busbw_gbps"] == 132.433
    assert report["transport"] == "OFI/EFA"
    assert report["ranks"] == 16 and report["nodes"] == 2
    assert report["rows"] == 32 and report["wrong"] == 0
    assert report["expected_busbw_gbps"] == 487.0 and report["expected_size"] == "16 GiB"
    assert report["expected_is_estimate"] is False
    assert report["pass_threshold_gbps"] == 389.6


def test_healthy_p5_run_human_output(capsys):
    assert nccl_report.main([str(P5_LOG), "--instance-type", "p5.48xlarge"]) == 0
    out = capsys.readouterr().out
    assert "Peak busbw:  489.22 GB/s at 16 GiB" in out
    assert "Avg busbw:   132.433 GB/s" in out
    assert "Transport:   OFI/EFA" in out
    assert "Ranks:       16 on 2 node(s)" in out
    assert "Expected:    487 GB/s at 16 GiB for 2x p5.48xlarge; pass at >= 389.6 GB/s" in out
    assert "Verdict:     PASS" in out


def test_without_instance_type_only_transport_is_judged(capsys):
    code, report = run_json(capsys, str(P5_LOG))
    assert code == 0 and report["verdict"] == "PASS"
    assert report["expected_busbw_gbps"] is None and report["pass_threshold_gbps"] is None
    assert "no --instance-type: bus bandwidth not judged" in report["notes"]


def test_p4de_run_passes_at_78(capsys):
    code, report = run_json(capsys, str(P4DE_LOG), "--instance-type", "p4de.24xlarge")
    assert code == 0 and report["verdict"] == "PASS"
    assert report["peak_busbw_gbps"] == 78.2 and report["peak_size"] == "2 GiB"
    assert report["avg_busbw_gbps"] == 18.2299
    assert report["transport"] == "OFI/EFA"  # "Using network AWS Libfabric"
    assert report["ranks"] == 16 and report["nodes"] == 2
    assert report["expected_busbw_gbps"] == 78.0


def test_p4de_run_fails_against_p5_expectation(capsys):
    code, report = run_json(capsys, str(P4DE_LOG), "--instance-type", "p5.48xlarge")
    assert code == 1 and report["verdict"] == "FAIL"
    assert report["reasons"] == [
        "peak bus bandwidth 78.2 GB/s is below 80% of the 487 GB/s expected for 2x p5.48xlarge at "
        "16 GiB (389.6 GB/s)"]
    assert "the run stopped at 2 GiB; the reference is measured at 16 GiB (nccl-tests -e)" in report["notes"]


def test_socket_fallback_fails(capsys):
    code, report = run_json(capsys, str(SOCKET_LOG), "--instance-type", "p5.48xlarge")
    assert code == 1 and report["verdict"] == "FAIL"
    assert report["transport"] == "Socket (fallback!)"
    assert report["peak_busbw_gbps"] == 9.14 and report["peak_size"] == "2 GiB"
    assert len(report["reasons"]) == 2
    assert report["reasons"][0].startswith("NCCL used TCP sockets (NET/Socket), not EFA")
    assert report["reasons"][1].startswith("peak bus bandwidth 9.1 GB/s is below 80%")


def test_socket_fallback_fails_without_instance_type(capsys):
    code, report = run_json(capsys, str(SOCKET_LOG))
    assert code == 1 and report["transport"] == "Socket (fallback!)"
    assert len(report["reasons"]) == 1


def test_wrong_values_fail_even_at_full_bandwidth(capsys):
    code, report = run_json(capsys, str(WRONG_LOG), "--instance-type", "p4d.24xlarge")
    assert code == 1 and report["verdict"] == "FAIL"
    assert report["peak_busbw_gbps"] == 77.05 and report["peak_busbw_gbps"] >= report["pass_threshold_gbps"]
    # 512 + (1024 + 2048) + 4096 + 2 x 8192 + 2 x 16384 wrong elements in 5 sizes
    assert report["wrong"] == 56832
    assert report["reasons"] == [
        "#wrong: 56832 wrong values in 5 message sizes (corrupt results: suspect a GPU, NVLink or EFA "
        "device; run dcgmi diag on the nodes)"]


def test_no_data_rows_fails(tmp_path, capsys):
    log = tmp_path / "empty.log"
    log.write_text(HEADER + "node-a:1001:1001 [0] NCCL INFO Using network Libfabric\n")
    code, report = run_json(capsys, str(log), "--instance-type", "p5.48xlarge")
    assert code == 1
    assert report["peak_busbw_gbps"] is None and report["peak_size_bytes"] is None
    assert report["reasons"][0].startswith("no nccl-tests data rows found")


def test_timestamps_legacy_rows_and_unchecked_runs(tmp_path, capsys):
    # kubectl logs --timestamps prefixes; a 12-column row of nccl-tests before the root column;
    # N/A in #wrong (run with -c 0) is not an error; no NCCL_DEBUG lines: transport unknown.
    log = tmp_path / "legacy.log"
    log.write_text(HEADER + (
        "2025-06-01T10:00:00.123456Z     1048576        262144     float     sum    123.2    8.51   "
        "15.95      0    121.3    8.64   16.21      0\n"
        "2025-06-01T10:00:00.223456Z     2097152        524288     float     sum      -1    147.2   14.24   "
        "26.70    N/A    147.1   14.25   26.72    N/A\n"
        "2025-06-01T10:00:00.323456Z # Avg bus bandwidth    : 21.395\n"))
    code, report = run_json(capsys, str(log))
    assert code == 0
    assert report["rows"] == 2 and report["peak_busbw_gbps"] == 26.72 and report["peak_size"] == "2 MiB"
    assert report["avg_busbw_gbps"] == 21.395 and report["wrong"] == 0
    assert report["transport"] == "unknown" and report["nodes"] == 2


def test_ofi_warnings_do_not_hide_a_socket_fallback(tmp_path, capsys):
    log = tmp_path / "fallback.log"
    log.write_text(HEADER + (
        "node-a:1001:1009 [0] nccl_net_ofi_init:1415 NCCL WARN NET/OFI aws-ofi-nccl initialization failed\n"
        "node-a:1001:1009 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.5<0>\n"
        "node-a:1001:1009 [0] NCCL INFO Using network Socket\n"
        "        1024           256     float     sum      -1    300.0    0.00    0.01      0    300.0    0.00"
        "    0.01      0\n"))
    code, report = run_json(capsys, str(log))
    assert code == 1 and report["transport"] == "Socket (fallback!)"


def test_socket_probe_lines_do_not_hide_ofi(tmp_path, capsys):
    # Without "Using network" or channel lines, NET/OFI INFO lines win over NET/Socket probes.
    log = tmp_path / "probe.log"
    log.write_text(HEADER + (
        "node-a:1001:1009 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.5<0>\n"
        "node-a:1001:1009 [0] NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)\n"
        "        1024           256     float     sum      -1    300.0    0.00    0.01      0    300.0    0.00"
        "    0.01      0\n"))
    assert run_json(capsys, str(log))[1]["transport"] == "OFI/EFA"


def test_sockets_are_expected_on_types_without_efa(capsys):
    code, report = run_json(capsys, str(SOCKET_LOG), "--instance-type", "g6e.xlarge")
    assert code == 0 and report["transport"] == "Socket"
    assert report["expected_busbw_gbps"] is None
    assert "g6e.xlarge has no EFA: no bus bandwidth reference" in report["notes"]


def test_estimated_reference_is_flagged(capsys):
    code, report = run_json(capsys, str(P5_LOG), "--instance-type", "p6-b300.48xlarge")
    assert code == 1  # 489 < 0.8 x 974
    assert report["expected_busbw_gbps"] == 974.0 and report["expected_is_estimate"] is True
    assert any(note.startswith("expected bandwidth is an estimate") for note in report["notes"])


def test_json_has_the_contract_fields(capsys):
    _, report = run_json(capsys, str(P5_LOG), "--instance-type", "p5.48xlarge")
    assert {"peak_busbw_gbps", "peak_size_bytes", "avg_busbw_gbps", "transport", "expected_busbw_gbps",
            "verdict", "reasons"} <= set(report)


def test_unreadable_file_exits_2(tmp_path, capsys):
    assert nccl_report.main([str(tmp_path / "missing.log")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "nccl-report: error: cannot read" in captured.err and "Traceback" not in captured.err


def test_unknown_instance_type_exits_2(capsys):
    assert nccl_report.main([str(P5_LOG), "--instance-type", "p9.huge"]) == 2
    err = capsys.readouterr().err
    assert "--instance-type: got p9.huge; known: p4d.24xlarge" in err


@pytest.mark.parametrize("argv", [[], ["a.log", "--bogus"]])
def test_bad_arguments_exit_2(argv, capsys):
    assert nccl_report.main(argv) == 2
    assert "usage:" in capsys.readouterr().err


def test_python_m_bootstrap_nccl_report():
    ok = subprocess.run([sys.executable, "-m", "bootstrap", "nccl-report", str(P5_LOG), "--instance-type",
                         "p5.48xlarge", "--json"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["verdict"] == "PASS"
    bad = subprocess.run([sys.executable, "-m", "bootstrap", "nccl-report", str(SOCKET_LOG)],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "Socket (fallback!)" in bad.stdout


# -- --stack: a pool's fabric tests on the cluster, compared by network domain (issue 30) ----------------------------

# The fabric-test verb's runs on tests/kube_fake.py's API server (tests/test_fabric_domains.py has the nodes:
# blocks A with 4 Ready nodes, B with 3, C with 1, one node not labelled yet); each test then finishes with a
# launcher log: the p5 run above, or the same run with every bandwidth scaled.
ROW = re.compile(r"^(\[1,0\]<stdout>:\s*\d+\s+\d+\s+float\s+sum\s+-?\d+)((?:\s+\S+){8})$")


def scaled(text: str, factor: float) -> str:
    """The log with algbw and busbw (out-of-place and in-place) of every row times `factor`, to 2 decimals."""
    out = []
    for line in text.splitlines():
        if match := ROW.match(line):
            cols = match.group(2).split()
            for i in (1, 2, 5, 6):
                cols[i] = f"{float(cols[i]) * factor:.2f}"
            line = match.group(1) + "  " + "  ".join(cols)
        out.append(line)
    return "\n".join(out) + "\n"


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    server = FakeKube().start()
    monkeypatch.setenv("KUBECONFIG", server.write_kubeconfig(tmp_path / "kubeconfig"))
    yield server
    server.stop()


def submit(fake: FakeKube, nodes: list[dict], capsys) -> None:
    for obj in nodes:
        fake.add(obj)
    assert fabric_test.main(["--stack", "prod"]) == 0
    capsys.readouterr()


def finish(fake: FakeKube, name: str, log: str, outcome: str = "Succeeded") -> None:
    (job,) = [j for j in fake.objects("MPIJob") if j["metadata"]["name"] == name]
    job["status"] = {"conditions": [{"type": "Created", "status": "True"}, {"type": outcome, "status": "True"}]}
    pod = f"{name}-launcher-7xk2p"
    fake.add({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": "training", "labels": {
        "gpucluster.io/job": name, "training.kubeflow.org/job-role": "launcher"}}, "status": {"phase": outcome}})
    fake.logs[("training", pod, "launcher")] = log


def report_lines(capsys, *argv: str) -> tuple[int, list[str]]:
    code = nccl_report.main(["--stack", "prod", *argv])
    return code, capsys.readouterr().out.splitlines()


def test_domains_side_by_side_and_one_15_percent_below_the_best_flagged(cluster, capsys):
    submit(cluster, prod_nodes(), capsys)
    p5 = P5_LOG.read_text()
    finish(cluster, "nccl-tests-h100-be2d5c16", p5)  # block A: 489.22 GB/s at 16 GiB
    finish(cluster, "nccl-tests-h100-96cf3d0a", scaled(p5, 0.85))  # block B: 415.84
    finish(cluster, "nccl-tests-h100-across", scaled(p5, 0.95))  # A to B: 464.76
    code, lines = report_lines(capsys, "--pool", "h100")
    assert code == 1
    assert lines == [
        "nccl-tests all_reduce by network domain: pool h100, 2x p5.48xlarge per test, domains of "
        "topology.k8s.aws/network-node-layer-3",
        "Expected:    487 GB/s at 16 GiB for 2x p5.48xlarge; pass at >= 389.6 GB/s",
        "DOMAIN                                       NODES  TEST                      SIZE    BUSBW GB/s  VERDICT   "
        "VS BEST",
        "nn-3c9a41f07be2d5c16                         4      nccl-tests-h100-be2d5c16  16 GiB  489.22      PASS      "
        "best",
        "nn-8e04b7a2196cf3d0a                         3      nccl-tests-h100-96cf3d0a  16 GiB  415.84      PASS      "
        "-15.0% (flagged)",
        "nn-3c9a41f07be2d5c16 + nn-8e04b7a2196cf3d0a  4+3    nccl-tests-h100-across    16 GiB  464.76      PASS      "
        "-5.0%",
        "nn-d15f6e0c3a8b47e29                         1      -                         -       -           untested  -",
        "Spread:      15.0% between the best domain, nn-3c9a41f07be2d5c16 (489.22 GB/s), and the worst, "
        "nn-8e04b7a2196cf3d0a (415.84 GB/s); flagged beyond 10%",
        "Across:      464.76 GB/s between two domains against 489.22 GB/s within the best one (-5.0%)",
        "Unlabeled:   ip-10-1-3-41: no topology.k8s.aws/network-node-layer-3 label when the tests were submitted, "
        "untested",
        "Verdict:     FAIL",
        "  - domain nn-8e04b7a2196cf3d0a is 15.0% below the best, nn-3c9a41f07be2d5c16 (489.22 GB/s): more than 10%, "
        "a slower network node or a slow node in it; run fabric-test again to confirm, then check its nodes (doctor, "
        "dcgmi diag) or cordon them"]


def test_domains_within_10_percent_pass(cluster, capsys):
    submit(cluster, prod_nodes(), capsys)
    p5 = P5_LOG.read_text()
    finish(cluster, "nccl-tests-h100-be2d5c16", scaled(p5, 0.95))  # 464.76
    finish(cluster, "nccl-tests-h100-96cf3d0a", p5)  # 489.22: B is the best now
    finish(cluster, "nccl-tests-h100-across", scaled(p5, 0.9))  # 440.30: across is not flagged, only compared
    code, lines = report_lines(capsys, "--json")
    table = json.loads("\n".join(lines))
    assert code == 0 and table["verdict"] == "PASS" and table["reasons"] == []
    assert [(r["test"], r["domains"], r["nodes"], r["busbw_gbps"], r["below_best_pct"], r["flagged"], r["verdict"])
            for r in table["tests"]] == [
        ("nccl-tests-h100-be2d5c16", [A], [4], 464.76, 5.0, False, "PASS"),
        ("nccl-tests-h100-96cf3d0a", [B], [3], 489.22, 0.0, False, "PASS"),
        ("nccl-tests-h100-across", [A, B], [4, 3], 440.3, 10.0, False, "PASS")]
    assert table["best"] == {"domain": B, "busbw_gbps": 489.22}
    assert table["worst"] == {"domain": A, "busbw_gbps": 464.76}
    assert table["spread_pct"] == 5.0 and table["flag_below_best_pct"] == 10.0
    assert table["untested"] == {C: ["ip-10-1-2-31"]} and table["unlabeled"] == ["ip-10-1-3-41"]
    assert (table["layer"], table["label"]) == (3, "topology.k8s.aws/network-node-layer-3")


def test_a_failed_test_and_unfinished_ones_fail_the_comparison(cluster, capsys):
    submit(cluster, prod_nodes(), capsys)
    finish(cluster, "nccl-tests-h100-be2d5c16", SOCKET_LOG.read_text(), "Failed")
    # B's test still runs: its workers' nodes say where, even without its record.
    (b_job,) = [j for j in cluster.objects("MPIJob") if j["metadata"]["name"] == "nccl-tests-h100-96cf3d0a"]
    b_job["metadata"]["annotations"]["gpucluster.io/fabric-test"] = json.dumps({"layer": 3})
    for i, host in enumerate(("ip-10-1-1-22", "ip-10-1-1-23")):
        cluster.add({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"nccl-tests-h100-96cf3d0a-worker-{i}", "namespace": "training", "labels": {
                "gpucluster.io/job": "nccl-tests-h100-96cf3d0a", "training.kubeflow.org/job-role": "worker"}},
            "spec": {"nodeName": host}, "status": {"phase": "Running"}})
    code, lines = report_lines(capsys)
    assert code == 1
    assert lines[3:6] == [
        "nn-3c9a41f07be2d5c16                         4      nccl-tests-h100-be2d5c16  4 GiB  9.08        FAIL          best",
        "nn-8e04b7a2196cf3d0a                         ?      nccl-tests-h100-96cf3d0a  -      -           not finished  -",
        "nn-3c9a41f07be2d5c16 + nn-8e04b7a2196cf3d0a  4+3    nccl-tests-h100-across    -      -           not finished  -"]
    reasons = lines[lines.index("Verdict:     FAIL") + 1:]
    assert reasons[0].startswith("  - nccl-tests-h100-be2d5c16 (nn-3c9a41f07be2d5c16) FAIL: the job failed; NCCL used "
                                 "TCP sockets (NET/Socket), not EFA")
    assert reasons[1:] == [
        "  - nccl-tests-h100-96cf3d0a (nn-8e04b7a2196cf3d0a) has not finished: run this again when it has",
        "  - nccl-tests-h100-across (nn-3c9a41f07be2d5c16 + nn-8e04b7a2196cf3d0a) has not finished: run this again "
        "when it has"]


def test_one_test_prints_the_single_report_unchanged(cluster, capsys):
    one_block = [node(f"ip-10-1-0-1{i}", A, S1) for i in range(1, 4)]
    submit(cluster, one_block, capsys)
    finish(cluster, "nccl-tests-h100-be2d5c16", P5_LOG.read_text())
    code, lines = report_lines(capsys)
    assert nccl_report.main([str(P5_LOG), "--instance-type", "p5.48xlarge"]) == code == 0
    single = capsys.readouterr().out.splitlines()
    assert lines[0] == "nccl-tests all_reduce report: training/nccl-tests-h100-be2d5c16"
    assert lines[1:] == single[1:] and single[0] == f"nccl-tests all_reduce report: {P5_LOG}"


def test_without_a_fabric_test_run_the_stack_s_own_fabric_test_is_read(cluster, capsys):
    cluster.add(launcher.nccl_test_mpijob(stack_config("prod").pool("h100"), "training"))
    finish(cluster, "nccl-tests-h100", P4DE_LOG.read_text())
    code, lines = report_lines(capsys)
    assert code == 1  # p4de's 78 GB/s against p5's 487
    assert lines[0] == "nccl-tests all_reduce report: training/nccl-tests-h100"
    assert "Verdict:     FAIL" in lines


def test_no_fabric_tests_exit_2(cluster, capsys):
    assert nccl_report.main(["--stack", "prod"]) == 2
    assert capsys.readouterr().err == ("nccl-report: error: no fabric tests of pool h100 in training: run `python -m "
                                       "bootstrap fabric-test --stack prod --pool h100` first\n")


@pytest.mark.parametrize(("argv", "message"), [
    (["--stack", "prod", "--instance-type", "p5.48xlarge"], "--instance-type: with --stack the pool's type is judged"),
    (["a.log", "--stack", "prod"], "give a LOGFILE, or --stack for a pool's fabric tests on the cluster")])
def test_a_log_file_or_a_stack_not_both(argv, message, capsys):
    assert nccl_report.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: python -m bootstrap nccl-report") and err.endswith(f"error: {message}\n")
