"""checkov on every Kubernetes object we render, both stacks: no failed check but those tests/checkov-skips.yaml lists.

The objects are what `python -m bootstrap plan --stack <stack> --out DIR` writes to DIR/k8s/*.yaml: every
plain object the program registers. What the Helm releases install is not there (the offline plan renders no
chart); their values are held to the same settings in tests/test_hardening.py.

checkov cannot share ./venv (requirements-checkov.txt says why): the first run makes its own virtualenv from
that file's exact pins (about 40 s from PyPI) in ~/.cache/gpucluster-checkov (XDG_CACHE_HOME), named by the
file's hash, so a fresh clone or a new ./venv reuses it and a changed pin makes a new one (as the local control
plane's Go builds are cached).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import plan_out

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "requirements-checkov.txt"
SKIPS = ROOT / "tests" / "checkov-skips.yaml"
STACKS = ("dev", "prod")
WORKLOADS = ("Deployment", "DaemonSet", "StatefulSet", "Job", "CronJob", "Pod")


def pinned_version() -> str:
    (version,) = re.findall(r"^checkov==(\S+)$", REQUIREMENTS.read_text(), re.M)
    return version


def skips() -> list[dict[str, Any]]:
    return yaml.safe_load(SKIPS.read_text())


def checkov_python() -> Path:
    """The checkov virtualenv's Python, (re)made when requirements-checkov.txt changed."""
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpucluster-checkov"
    venv = cache / f"checkov-{pinned_version()}-{digest[:12]}"
    python, marker = venv / "bin" / "python", venv / ".installed"
    if marker.exists() and marker.read_text() == digest and python.exists():
        return python
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # Every package is pinned (a freeze): nothing to resolve; no byte-compiling (most of botocore is never imported).
    install = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                              "--no-deps", "--no-compile", "-r", str(REQUIREMENTS)],
                             capture_output=True, text=True, timeout=900)
    assert install.returncode == 0, f"installing {REQUIREMENTS.name} failed:\n{install.stdout}\n{install.stderr}"
    marker.write_text(digest)
    return python


def run_all(commands: list[list[str]], **kwargs) -> list[subprocess.CompletedProcess]:
    """The commands at once (two cores: both stacks' checkov runs go in parallel)."""
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)
             for c in commands]
    done = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=300)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr))
    return done


@pytest.fixture(scope="module")
def reports() -> dict[str, dict[str, Any]]:
    """checkov's JSON report of each stack's plan --out k8s/ directory (run once for the module)."""
    python = checkov_python()
    out = {stack: plan_out(stack) for stack in STACKS}
    for stack in STACKS:
        assert any((out[stack] / "k8s").glob("*.yaml")), stack
    # No Prisma Cloud look-ups: the checks ship with checkov (--skip-download; BC_SKIP_MAPPING for the guidelines).
    env = {**os.environ, "BC_SKIP_MAPPING": "TRUE"}
    runs = run_all([[str(python), "-m", "checkov.main", "--directory", str(out[stack] / "k8s"),
                     "--framework", "kubernetes", "--skip-download", "--output", "json"] for stack in STACKS],
                   env=env)
    reports = {}
    for stack, done in zip(STACKS, runs):
        # checkov exits 1 when a check fails; anything else is an error of its own.
        assert done.returncode in (0, 1), f"checkov on {stack}:\n{done.stderr}"
        reports[stack] = json.loads(done.stdout)
    return reports


def failures(report: dict[str, Any]) -> set[tuple[str, str]]:
    return {(f["check_id"], f["resource"]) for f in report["results"]["failed_checks"]}


def skipped(check: str, resource: str) -> bool:
    return any(s["check"] == check and (s["resources"] == "all" or resource in s["resources"]) for s in skips())


def test_checkov_is_the_pinned_version_and_parses_everything(reports):
    for stack, report in reports.items():
        assert report["summary"]["checkov_version"] == pinned_version(), stack
        assert report["summary"]["parsing_errors"] == 0, stack
    checked = {stack: {c["resource"] for c in r["results"]["passed_checks"] + r["results"]["failed_checks"]}
               for stack, r in reports.items()}
    assert {"Deployment.mpi-operator.mpi-operator", "Deployment.training.tensorboard"} <= checked["dev"]
    assert {"Deployment.mpi-operator.mpi-operator", "Deployment.training.tensorboard",
            "DaemonSet.monitoring.efa-counters"} <= checked["prod"]


def test_no_failed_check_but_the_listed_skips(reports):
    unlisted = {stack: sorted(f for f in failures(r) if not skipped(*f)) for stack, r in reports.items()}
    assert unlisted == {stack: [] for stack in STACKS}


def test_every_skip_has_a_reason_and_still_matches_a_failure(reports):
    failed = set().union(*(failures(r) for r in reports.values()))
    names = {f["check_id"]: f["check_name"] for r in reports.values() for f in r["results"]["failed_checks"]}
    for skip in skips():
        assert set(skip) == {"check", "name", "resources", "reason"}, skip
        assert names.get(skip["check"]) == skip["name"], skip["check"]
        assert len(skip["reason"].split()) >= 15, f"{skip['check']}: say why"
        targets = {res for check, res in failed if check == skip["check"]}
        assert targets, f"{skip['check']} fails nowhere any more: drop it from {SKIPS.name}"
        if skip["resources"] != "all":
            assert set(skip["resources"]) <= targets, f"{skip['check']}: {set(skip['resources']) - targets} pass"
    assert len({s["check"] for s in skips()}) == len(skips()), "one entry per check"


def test_a_skip_for_all_covers_only_workloads(reports):
    # `all` may not hide a check failing on a NetworkPolicy, a Service or RBAC: those must pass.
    failed = set().union(*(failures(r) for r in reports.values()))
    blanket = {s["check"] for s in skips() if s["resources"] == "all"}
    assert {res.split(".")[0] for check, res in failed if check in blanket} <= set(WORKLOADS)


def test_every_pod_is_covered_by_a_network_policy(reports):
    # CKV2_K8S_6: each pod template is selected by a NetworkPolicy of its namespace.
    for stack, report in reports.items():
        passed = {c["resource"].split(".")[1] + "/" + c["resource"].split(".")[2]
                  for c in report["results"]["passed_checks"] if c["check_id"] == "CKV2_K8S_6"}
        expected = {"mpi-operator/mpi-operator", "training/tensorboard"}
        if stack == "prod":
            expected.add("monitoring/efa-counters")
        assert passed >= expected, stack
        assert not [f for f in report["results"]["failed_checks"] if f["check_id"] == "CKV2_K8S_6"], stack
