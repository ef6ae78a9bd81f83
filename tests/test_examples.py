"""examples/train_synthetic.py, the script the shipped examples run: the parts that need no PyTorch.

Its training loop needs PyTorch and was run by hand (README, "Examples");
here: ranks under both launchers, which checkpoint a run resumes from, and
the metrics the job dashboard reads.
"""

from __future__ import annotations

import importlib.util
import urllib.request

import pytest

from components.core.observability import metrics
from tests.conftest import ROOT

SPEC = importlib.util.spec_from_file_location("train_synthetic", ROOT / "examples" / "train_synthetic.py")
train = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(train)


@pytest.mark.parametrize(("env", "expected"), [
    ({"RANK": "9", "WORLD_SIZE": "16", "LOCAL_RANK": "1"}, (9, 16, 1)),  # torchrun
    ({"OMPI_COMM_WORLD_RANK": "9", "OMPI_COMM_WORLD_SIZE": "16", "OMPI_COMM_WORLD_LOCAL_RANK": "1"}, (9, 16, 1)),
    ({}, (0, 1, 0)),
])
def test_ranks_under_either_launcher(env, expected):
    assert train.ranks(env) == expected


def test_a_run_resumes_from_its_newest_complete_checkpoint(tmp_path):
    env = {"GPUCLUSTER_CHECKPOINT_DIR": str(tmp_path), "GPUCLUSTER_JOB": "gpt"}
    root = train.checkpoint_root(env)
    assert root == tmp_path / "gpt"
    assert train.newest_checkpoint(root) is None
    for step in (100, 900, 1000):
        (root / f"step-{step}").mkdir(parents=True)
        (root / f"step-{step}" / "state.pt").write_bytes(b"x")
    (root / ".tmp-step-1100").mkdir()  # being written when the node went: never resumed from
    (root / ".tmp-step-1100" / "state.pt").write_bytes(b"x")
    (root / "step-1200").mkdir()  # no state.pt: incomplete
    assert train.newest_checkpoint(root) == root / "step-1000"
    assert train.checkpoint_root({}) is None


def test_metrics_are_the_job_dashboard_s_served_over_http():
    values = {"gpucluster_job_tokens_per_second": 123456.0, "gpucluster_job_step_seconds": 0.5,
              "gpucluster_job_loss": 2.25, "gpucluster_job_steps_total": 1234567}
    assert set(values) == set(metrics.JOB_METRICS)
    text = train.metrics_text(values)
    assert text.splitlines() == ["# TYPE gpucluster_job_tokens_per_second gauge",
                                 "gpucluster_job_tokens_per_second 123456",
                                 "# TYPE gpucluster_job_step_seconds gauge", "gpucluster_job_step_seconds 0.5",
                                 "# TYPE gpucluster_job_loss gauge", "gpucluster_job_loss 2.25",
                                 # A counter, whole: 6 significant digits would round it (goodput_alerts' no progress)
                                 "# TYPE gpucluster_job_steps_total counter", "gpucluster_job_steps_total 1234567"]
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    train.serve_metrics(port, values)
    values["gpucluster_job_loss"] = 2.0  # the server reads the live values
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:  # noqa: S310
        assert response.headers["Content-Type"].startswith("text/plain")
        assert "gpucluster_job_loss 2\n" in response.read().decode()


def test_the_arguments_have_working_defaults():
    args = train.parse_args(["--steps", "5"])
    assert (args.steps, args.checkpoint_every, args.seq_len) == (5, 200, 1024)
