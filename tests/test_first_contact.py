"""First contacts from a brand-new pod retry for a bounded time (aws-network-policy-agent #345: a new pod's first
flows may be dropped): the scripts our pods run, executed here with a fake `ssh` and a local TCP listener."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest

from components.core.config import JobConfig
from components.core.kube import launcher, network_policy, parameter_server, validation
from tests.conftest import stack_config


def fake_ssh(folder: Path, failures: dict[str, int]) -> Path:
    """An `ssh` that fails `failures[host]` times for a host, then succeeds; each call is logged."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    for host, n in failures.items():
        (folder / f"left-{host}").write_text(str(n))
    ssh = bin_dir / "ssh"
    ssh.write_text(f"""#!/bin/sh
for last; do :; done
for arg; do case $arg in *.svc) host=$arg;; esac; done
echo "$*" >> {folder}/calls
left=$(cat {folder}/left-$host 2>/dev/null || echo 0)
if [ "$left" -gt 0 ]; then echo $((left - 1)) > {folder}/left-$host; exit 255; fi
exit 0
""")
    ssh.chmod(ssh.stat().st_mode | stat.S_IEXEC)
    return bin_dir


def run_ssh_first_contact(tmp_path: Path, failures: dict[str, int], seconds: int,
                          line: str = "{host} slots=8") -> subprocess.CompletedProcess:
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("".join(line.format(host=h) + "\n" for h in failures))
    bin_dir = fake_ssh(tmp_path, failures)
    command = network_policy.ssh_first_contact(["echo", "mpirun ran", "with", "its args"], seconds=seconds)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OMPI_MCA_orte_default_hostfile": str(hostfile)}
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)


def test_mpirun_starts_once_every_worker_answers_ssh(tmp_path, monkeypatch):
    monkeypatch.setattr(network_policy, "RETRY_SECONDS", 0)
    hosts = {"job-worker-0.job.training.svc": 0, "job-worker-1.job.training.svc": 2}
    done = run_ssh_first_contact(tmp_path, hosts, seconds=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "mpirun ran with its args\n"  # exec'd with its argv intact
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls == ["-o BatchMode=yes -o ConnectTimeout=5 job-worker-0.job.training.svc true"] + [
        "-o BatchMode=yes -o ConnectTimeout=5 job-worker-1.job.training.svc true"] * 3


def test_an_intel_mpi_hostfile_names_the_same_hosts(tmp_path, monkeypatch):
    monkeypatch.setattr(network_policy, "RETRY_SECONDS", 0)
    done = run_ssh_first_contact(tmp_path, {"job-worker-0.job.training.svc": 1}, seconds=30, line="{host}:8")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "calls").read_text().splitlines() == [
        "-o BatchMode=yes -o ConnectTimeout=5 job-worker-0.job.training.svc true"] * 2


def test_a_delete_stops_the_wait_at_once(tmp_path):
    """SIGTERM to the waiting script (PID 1 in the pod, where nothing handles it by default) ends it."""
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("job-worker-0.job.training.svc slots=8\n")
    bin_dir = fake_ssh(tmp_path, {"job-worker-0.job.training.svc": 10_000})
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OMPI_MCA_orte_default_hostfile": str(hostfile)}
    waiting = subprocess.Popen(network_policy.ssh_first_contact(["true"], seconds=60), env=env)
    time.sleep(1)
    waiting.terminate()
    assert waiting.wait(timeout=10) == 143
    assert "trap 'exit 143' TERM INT" in network_policy.tcp_first_contact(["a:1"])[2]


def test_a_worker_that_never_answers_fails_the_launcher_within_the_bound(tmp_path, monkeypatch):
    hosts = {"job-worker-0.job.training.svc": 10_000}
    started = time.monotonic()
    done = run_ssh_first_contact(tmp_path, hosts, seconds=3)
    assert done.returncode == 1 and done.stdout == ""  # mpirun never ran
    assert done.stderr.strip() == ("gpucluster: job-worker-0.job.training.svc did not answer ssh within 3 s (its "
                                   "sshd, or a NetworkPolicy: DENY lines in "
                                   "/var/log/aws-routed-eni/network-policy-agent.log on its node)")
    assert time.monotonic() - started < 3 + network_policy.RETRY_SECONDS + 2


def test_every_mpijob_launcher_makes_its_first_contact_so():
    cfg = stack_config("prod")
    pool = cfg.pool("h100")
    for manifest in (launcher.nccl_test_mpijob(pool, "training"), validation.mpijob("two-node", pool, "training", "fsx")):
        (container,) = manifest["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"]
        assert container["command"][:4] == network_policy.ssh_first_contact([])
        assert network_policy.FIRST_CONTACT_SECONDS == 300 and "+ 300 ))" in container["command"][2]


@pytest.fixture
def listener():
    """A TCP port that starts accepting after 2 s (a peer, or a path, that is not there yet)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)

    def serve():
        time.sleep(2)
        server.bind(("127.0.0.1", port))
        server.listen()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield port
    thread.join()
    server.close()


def test_the_chief_connects_once_every_task_accepts(listener, monkeypatch):
    monkeypatch.setattr(network_policy, "RETRY_SECONDS", 1)
    done = subprocess.run(network_policy.tcp_first_contact([f"127.0.0.1:{listener}"], seconds=30),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_a_task_that_never_accepts_fails_the_chief_s_init_within_the_bound():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]  # bound, never listening: refused
    started = time.monotonic()
    done = subprocess.run(network_policy.tcp_first_contact([f"127.0.0.1:{closed}"], seconds=2),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip() == (f"gpucluster: 127.0.0.1:{closed} did not accept a connection within 2 s (its "
                                   "server, or a NetworkPolicy: DENY lines in "
                                   "/var/log/aws-routed-eni/network-policy-agent.log on its node)")
    assert time.monotonic() - started < 2 + network_policy.RETRY_SECONDS + 2


def test_the_ps_chief_waits_for_every_parameter_server_and_worker():
    cfg = stack_config("prod")
    job = JobConfig(name="tf-ps", pool="h100", nodes=2, launcher="ps", image="repo/tf:2.16",
                    command=("python", "train.py"), ps_pool="ps", ps_replicas=2)
    ps_pool = cfg.gpu_pools[0]  # any pool stands in for the CPU pool here: the addresses do not depend on it
    manifest = parameter_server.jobset(job, cfg.pool("h100"), ps_pool, "training", None, None, None)
    chief = next(r for r in manifest["spec"]["replicatedJobs"] if r["name"] == "chief")
    (init,) = chief["template"]["spec"]["template"]["spec"]["initContainers"]
    tasks = parameter_server.addresses(job, "training")
    assert init["image"] == "repo/tf:2.16"
    assert init["command"] == network_policy.tcp_first_contact([*tasks["ps"], *tasks["worker"]])
    assert "tf-ps-ps-0-1.tf-ps.training.svc:" in init["command"][2] and "tf-ps-worker-0-1" in init["command"][2]
    assert "tf-ps-chief" not in init["command"][2]


def test_validate_s_tcp_probe_retries_before_it_says_closed():
    probe = validation.tcp_probe("validate-h100-2node", "training")
    assert f"for attempt in $(seq {validation.PROBE_ATTEMPTS})" in probe and validation.PROBE_ATTEMPTS == 15
