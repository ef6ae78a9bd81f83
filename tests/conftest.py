"""Shared fixtures: run the program (or one component) under Pulumi mocks."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The end-to-end tier needs the local control plane (`make e2e`); `make test` stays offline and quick.
collect_ignore = [] if os.environ.get("GPUCLUSTER_E2E") == "1" else ["e2e", "e2e_fleet"]

from bootstrap import stackfile  # noqa: E402
from bootstrap.offline import mocks  # noqa: E402
from components.core import config  # noqa: E402
from components.core.stack_config import parse as parse_stack  # noqa: E402


def stack_raw(stack: str = "dev", overrides: dict[str, Any] | None = None,
              drop: tuple[str, ...] = (), standins: bool = True) -> dict[str, str]:
    """A stack's raw engine config, with keys replaced (`gpucluster:jobs` -> value) or dropped.

    With `standins`, the keys only a deployer can know are filled as the
    offline plan fills them (bootstrap.stackfile.PLAN_STANDINS).
    """
    raw = stackfile.read_stack_config(stack, overrides=overrides)
    for key in drop:
        raw.pop(key, None)
    if standins:
        raw, _ = stackfile.with_plan_standins(raw)
    return raw


def stack_config(stack: str = "dev", overrides: dict[str, Any] | None = None) -> config.StackConfig:
    return parse_stack(stack_raw(stack, overrides), "gpucluster", stack)


_RUNS: dict[str, mocks.Recording] = {}
_RUN_PROGRAM = mocks.run_program  # the real one: plan() puts shared_run in its place for the CLI's call


def shared_run(raw: dict[str, Any], stack: str, **options: Any) -> mocks.Recording:
    """mocks.run_program(raw, stack, **options), once per session for the same inputs.

    A mock run costs about a second and many modules (and the in-process plans) read the same stacks: they
    share one run. Callers read the Recording and never change it, and do not patch the mocks or the
    environment first (run_stack runs afresh for those).
    """
    if "program" in options:
        return _RUN_PROGRAM(raw, stack, **options)
    defaults = {"project": "gpucluster", "region": None, "secret_keys": ()}
    given = sorted((k, str(v)) for k, v in options.items() if v != defaults.get(k, object()) and v != [])
    key = json.dumps([stack, raw, given], sort_keys=True, default=str)
    if key not in _RUNS:
        _RUNS[key] = _RUN_PROGRAM(raw, stack, **options)
    return _RUNS[key]


def recording(stack: str = "dev", overrides: dict[str, Any] | None = None) -> mocks.Recording:
    """The whole program's run for a stack and overrides, shared (see shared_run)."""
    return shared_run(stack_raw(stack, overrides), stack)


_PLANS: dict[tuple[str, ...], subprocess.CompletedProcess] = {}
_PLAN_OUT = Path(tempfile.mkdtemp(prefix="gpucluster-plan-out-"))


def plan(*args: str) -> subprocess.CompletedProcess:
    """`python -m bootstrap plan ARGS` through the CLI's entry (its exit-code rule, its messages), in this
    process: a fresh one costs two seconds of imports, and the README's commands already run the plan in
    fresh processes, which tests/test_readme.py compares with these. A plan of a shipped stack is
    deterministic: one run per ARGS serves the session (not with --out or --stack-file)."""
    import io

    from bootstrap import __main__ as cli

    if args in _PLANS:
        return _PLANS[args]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            _patched(mocks, "run_program", shared_run):
        code = cli.run(["plan", *args])
    done = subprocess.CompletedProcess(["plan", *args], code, out.getvalue(), err.getvalue())
    if not any(a in ("--stack-file", "--out") for a in args):
        _PLANS[args] = done
    return done


@contextlib.contextmanager
def _patched(owner: Any, name: str, value: Any):
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


def plan_out(stack: str) -> Path:
    """What `plan --stack STACK --json --out DIR` wrote (resources.json, k8s/*.yaml), once per session."""
    out = _PLAN_OUT / stack
    if not (out / "resources.json").exists():
        done = plan("--stack", stack, "--json", "--out", str(out))
        assert done.returncode == 0, f"plan --stack {stack} --out failed:\n{done.stderr}"
    return out


@pytest.fixture
def run_stack() -> Callable[..., mocks.Recording]:
    """Run __main__.py for a stack (optionally with config overrides) under mocks, afresh: for tests that
    change the mocks or the environment first (recording() shares the runs of those that do not)."""

    def run(stack: str = "dev", overrides: dict[str, Any] | None = None) -> mocks.Recording:
        return mocks.run_program(stack_raw(stack, overrides), stack)

    return run


@pytest.fixture
def run_mocked() -> Callable[..., mocks.Recording]:
    """Run any callable (e.g. one component) under mocks with a stack's config set."""

    def run(program: Callable[[], Any], stack: str = "dev",
            overrides: dict[str, Any] | None = None) -> mocks.Recording:
        return mocks.run_program(stack_raw(stack, overrides), stack, program=program)

    return run


# The AWS-managed policies our code attaches (bootstrap backend's preview role). moto holds all ~1,300 when
# asked, at 1.6 s a test to build and reset; a policy missing here fails the attach (NoSuchEntity): add it.
MANAGED_POLICIES_USED = ("ReadOnlyAccess",)


@pytest.fixture
def moto_account(monkeypatch):
    """An emulated AWS account (moto) with the AWS-managed policies we attach, and no profile of the machine's."""
    from moto import mock_aws
    from moto.iam import models as iam_models

    every = json.loads(iam_models.aws_managed_policies_data)
    monkeypatch.setattr(iam_models, "aws_managed_policies_data",
                        json.dumps({name: every[name] for name in MANAGED_POLICIES_USED}))
    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")):
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        yield


@pytest.fixture
def moto_ecr(monkeypatch):
    """The account's ECR in us-east-1, emulated (moto)."""
    import boto3
    from moto import mock_aws

    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(key, value)
    with mock_aws():
        yield boto3.client("ecr", region_name="us-east-1")


# The files that take longest (their module fixtures run plans, checkov, moto), measured with --durations=0:
# first in the collection, so that with --no-loadscope-reorder xdist hands them out first and no worker
# starts one while the other has nothing left. A file missing here only runs later.
SLOW_FIRST = ("test_readme.py", "test_checkov.py", "test_backend.py", "test_system_zone.py", "test_preflight.py",
              "test_schema_agreement.py", "test_network_cluster.py", "test_teardown.py", "test_node_restarts.py",
              "test_jobs.py", "test_first_contact.py", "test_partitions.py", "test_observability.py")


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file keeps its order


def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker more than the cores. The README's commands and the first-contact scripts leave a
    worker waiting on its children or on a clock; a third worker on two cores fills those waits (121 s -> 112 s
    here)."""
    return (os.cpu_count() or 1) + 1


def pytest_sessionfinish(session, exitstatus):
    import shutil

    shutil.rmtree(_PLAN_OUT, ignore_errors=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A skipped test is a failed one: everything a test needs is in the repository (tests/upstream)."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"{item.nodeid} skipped ({report.longrepr}); tests must run on a fresh clone, not skip"


def prod_started(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Overrides that make prod's opt-in example jobs start with `pulumi up` (startOnUp: true), for the tests
    of what a job becomes; `extra` overrides merged in."""
    from components.core.config.text import stack_yaml

    jobs = stack_yaml.parse((ROOT / "Pulumi.prod.yaml").read_text(), "gpucluster").config["gpucluster:jobs"]
    return {"gpucluster:jobs": [{**job, "startOnUp": True} for job in jobs], **(extra or {})}
