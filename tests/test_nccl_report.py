"""nccl-report on realistic nccl-tests 2.x logs (tests/data/nccl)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bootstrap.verbs import nccl_report

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
