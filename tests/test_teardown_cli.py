"""`bootstrap destroy`, `pause` and `resume` against a fake deployed stack (no Pulumi CLI here).

The fake stack's state is the real program's registrations under mocks, in
the shape `pulumi stack export` gives, so the report is read from what a
`pulumi up` of the shipped stacks would leave.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import boto3
import pytest

from bootstrap import stackfile
from bootstrap.deployed import automation, pausing, teardown
from bootstrap.verbs import pause
from components.aws.lookups import DESTROYING_ENV
from components.hooks import SKIP_EXPORT_ENV, bucket_guard
from tests.conftest import recording as shared_recording

DEPLOY_KEYS = {"gpucluster:adminPrincipalArns": ["arn:aws:iam::210987654321:role/Admin"],
               "gpucluster:publicAccessCidrs": ["34.200.10.0/24"]}


def project(tmp_path: Path, stack: str, extra: dict | None = None) -> Path:
    """A copy of the project's Pulumi.yaml and the shipped stack, with the deploy-time keys set."""
    shutil.copy(stackfile.PROJECT_DIR / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    text = (stackfile.PROJECT_DIR / f"Pulumi.{stack}.yaml").read_text()
    for key, value in {**DEPLOY_KEYS, **(extra or {})}.items():
        text = stackfile.set_scalar(text, key, json.dumps(value))
    (tmp_path / f"Pulumi.{stack}.yaml").write_text(text)
    return tmp_path


def state_of(stack: str) -> list[dict]:
    """What `pulumi stack export` would list after `pulumi up` of the stack."""
    rec = shared_recording(stack)
    return copy.deepcopy([  # a copy: the tests change it
        {"urn": r.urn, "type": r.type, "custom": r.custom, "id": r.id, "parent": r.parent, "inputs": r.inputs,
         "outputs": r.outputs, "retainOnDelete": r.retain_on_delete, "protect": r.protect}
        for r in rec.resources])


@pytest.fixture(scope="module")
def prod_state() -> list[dict]:
    return state_of("prod")


@pytest.fixture(scope="module")
def dev_state() -> list[dict]:
    return state_of("dev")


@pytest.fixture(autouse=True)
def ecr(moto_ecr):
    """The account's ECR, emulated: what the destroy sweeps once no node is left."""
    return moto_ecr


def repositories(ecr) -> list[str]:
    return sorted(r["repositoryName"] for r in ecr.describe_repositories()["repositories"])


class FakeStack:
    def __init__(self, resources: list[dict], fail: Exception | None = None,
                 during_destroy: Callable[[], None] | None = None):
        self.name = "fake"
        self.resources = resources
        self.fail = fail
        self.during_destroy = during_destroy  # what happens in the account while Pulumi deletes
        self.calls: list[tuple[str, dict, dict]] = []

    def export_stack(self):
        return SimpleNamespace(deployment={"resources": self.resources})

    def _call(self, verb: str, kwargs: dict):
        env = {k: os.environ[k] for k in (bucket_guard.CONFIRM_ENV, SKIP_EXPORT_ENV, DESTROYING_ENV)
               if k in os.environ}
        self.calls.append((verb, {k: v for k, v in kwargs.items() if k != "on_output"}, env))
        if verb == "destroy" and self.during_destroy is not None:
            self.during_destroy()
        if self.fail and verb in ("destroy", "up"):
            raise self.fail

    def destroy(self, **kwargs):
        self._call("destroy", kwargs)

    def preview(self, **kwargs):
        self._call("preview", kwargs)

    def up(self, **kwargs):
        self._call("up", kwargs)


def destroy_args(stack: str, *flags: str) -> argparse.Namespace:
    return argparse.Namespace(stack=stack, yes="--yes" in flags, delete_bucket_data="--delete-bucket-data" in flags,
                              skip_export="--skip-export" in flags)


def moto_ecr(cfg):
    return boto3.client("ecr", region_name=cfg.region)


def run_destroy(tmp_path, stack, state, *flags, holds=False, ask=None, fake=None, ecr_of=moto_ecr):
    fake = fake or FakeStack(state)
    lines: list[str] = []
    code = teardown.run(destroy_args(stack, *flags), select=lambda name: fake, holds_objects=lambda cfg, b: holds,
                       ask=ask, out=lines.append, project_dir=project(tmp_path, stack), ecr_of=ecr_of)
    return code, "\n".join(lines), fake


def bucket_of(state: list[dict]) -> str:
    return next(r["outputs"]["bucket"] for r in state if r["type"] == "aws:s3/bucket:Bucket")


# -- destroy ---------------------------------------------------------------------------------


def test_prod_destroy_exports_then_destroys_and_prints_the_line_to_adopt_the_kept_bucket(tmp_path, prod_state):
    code, out, fake = run_destroy(tmp_path, "prod", prod_state, "--yes")
    assert code == 0
    bucket = bucket_of(prod_state)
    fs = next(r["id"] for r in prod_state if r["type"] == "aws:fsx/lustreFileSystem:LustreFileSystem")
    steps = out.split("In this order")[1].split("Deleted:")[0]
    # Kubernetes objects, node groups, the export and the file system, the cluster, the network: in that order.
    order = [steps.index(s) for s in ("Kubernetes objects", "node groups", f"export / of {fs} to s3://{bucket}/",
                                      f"file system {fs}", "EKS cluster", "network")]
    assert order == sorted(order)
    assert "(up to 60 min; if it fails or times out, the destroy stops here" in steps
    assert f"s3://{bucket} with every object, version and setting (retainOnDestroy)" in out
    assert "CloudWatch log group /aws/eks/gpucluster-prod/cluster" in out
    assert "pending deletion for 30 days" in out
    assert fake.calls == [("destroy", {"run_program": True, "color": "never"}, {DESTROYING_ENV: "1"})]
    assert out.endswith(f"  pulumi config set --path 'gpucluster:storage.bucketName' {bucket} --stack prod\n"
                        "or in Pulumi.prod.yaml under config:\n"
                        f"  gpucluster:storage:\n    bucketName: {bucket}")


def test_a_deletable_bucket_with_objects_needs_the_flag(tmp_path, dev_state, capsys):
    code, _, fake = run_destroy(tmp_path, "dev", dev_state, "--yes", holds=True)
    assert code == 1 and fake.calls == []
    assert f"s3://{bucket_of(dev_state)} holds objects and storage.retainOnDestroy is false; add " \
           "--delete-bucket-data" in capsys.readouterr().err


def test_the_flag_names_the_bucket_for_the_guard_during_the_destroy_only(tmp_path, dev_state):
    code, out, fake = run_destroy(tmp_path, "dev", dev_state, "--yes", "--delete-bucket-data", holds=True)
    assert code == 0
    assert fake.calls[0][2] == {bucket_guard.CONFIRM_ENV: bucket_of(dev_state), DESTROYING_ENV: "1"}
    assert bucket_guard.CONFIRM_ENV not in os.environ and DESTROYING_ENV not in os.environ
    assert "bucketName" not in out  # nothing kept to adopt


def test_an_empty_deletable_bucket_needs_no_flag(tmp_path, dev_state):
    code, _, fake = run_destroy(tmp_path, "dev", dev_state, "--yes", holds=False)
    assert code == 0 and fake.calls[0][2] == {DESTROYING_ENV: "1"}


def test_skip_export_is_loud_and_reaches_the_hook(tmp_path, prod_state):
    code, out, fake = run_destroy(tmp_path, "prod", prod_state, "--yes", "--skip-export")
    assert code == 0 and fake.calls[0][2] == {SKIP_EXPORT_ENV: "1", DESTROYING_ENV: "1"}
    assert "WARNING: --skip-export: s3://" in out


def test_nothing_happens_without_typing_the_stack_name(tmp_path, prod_state, capsys):
    code, _, fake = run_destroy(tmp_path, "prod", prod_state, ask=lambda prompt: "yes")
    assert code == 1 and fake.calls == []
    assert "not confirmed" in capsys.readouterr().err
    code, _, fake = run_destroy(tmp_path, "prod", prod_state, ask=lambda prompt: "prod")
    assert code == 0 and [c[0] for c in fake.calls] == ["destroy"]


def test_a_failed_destroy_says_the_data_stayed(tmp_path, prod_state, capsys):
    from pulumi.automation import CommandError

    failing = FakeStack(prod_state, fail=CommandError("code: 255\n stderr: error: export task-1 of fs-1 ended FAILED"))
    code, _, _ = run_destroy(tmp_path, "prod", prod_state, "--yes", fake=failing)
    err = capsys.readouterr().err
    assert code == 1
    assert "the destroy stopped: error: export task-1 of fs-1 ended FAILED" in err
    assert "a failed export keeps the file system and its S3 link" in err


def test_an_empty_stack_has_nothing_to_destroy(tmp_path):
    code, out, fake = run_destroy(tmp_path, "prod", [], "--yes")
    assert (code, out, fake.calls) == (0, "stack prod has no resources: nothing to destroy", [])


def test_an_unreachable_stack_is_a_clean_error(tmp_path, capsys):
    def no_cli(name):
        raise automation.AutomationError("the Pulumi CLI (3.182.0 or newer) is not on PATH")

    code = teardown.run(destroy_args("prod", "--yes"), select=no_cli, out=lambda _: None,
                       project_dir=project(tmp_path, "prod"))
    assert code == 2
    assert capsys.readouterr().err == "gpucluster: the Pulumi CLI (3.182.0 or newer) is not on PATH\n"


def test_an_adopted_bucket_is_reported_kept(tmp_path, prod_state):
    lines: list[str] = []
    teardown.run(destroy_args("prod"), select=lambda n: FakeStack(prod_state), ask=lambda p: "no",
                out=lines.append, project_dir=project(tmp_path, "prod", {"gpucluster:storage": {
                    "bucketName": "kept-data", "fsx": {"deploymentType": "SCRATCH_2", "storageCapacityGiB": 1200}}}))
    assert "s3://kept-data, adopted by storage.bucketName: never touched by the stack" in "\n".join(lines)


# -- pause and resume ------------------------------------------------------------------------


def run_pause(tmp_path, paused=True, mode=None, apply=True, ask=None, fake=None):
    root = project(tmp_path, "prod")
    fake = fake or FakeStack([])
    lines: list[str] = []
    # No cluster: the queued jobs' scale-ups pause cancels after its up are tests/test_pause_scaleups.py's.
    code = pausing.run("prod", paused, mode, apply, assume_yes=ask is None, select=lambda name: fake, ask=ask,
                     out=lines.append, project_dir=root, connect=lambda stack, kubeconfig: None,
                     release=lambda kube, namespaces, out: [])
    return code, "\n".join(lines), fake, (root / "Pulumi.prod.yaml").read_text()


def test_pause_writes_the_stack_file_previews_and_applies(tmp_path):
    code, out, fake, text = run_pause(tmp_path, mode="drain")
    assert code == 0
    assert "  gpucluster:paused: true\n" in text and "  gpucluster:pauseMode: drain\n" in text
    assert "# A production training cluster" in text  # the rest of the file, comments included, is kept
    assert [c[0] for c in fake.calls] == ["preview", "up"]
    assert "stopPolicy HoldAndDrain (running jobs are evicted)" in out
    assert "While paused the stack costs about $23.86/hour" in out
    assert "- llama-70b: 120 s (torchrun passes SIGTERM to the training processes and waits for them " \
           "(TORCH_ELASTIC_SHUTDOWN_TIMEOUT=115 s, PyTorch 2.13))" in out
    assert "- gpt-pretrain: 30 s, Kubernetes' default (mpirun passes SIGTERM to the ranks" in out


def test_pause_without_up_only_writes(tmp_path):
    code, out, fake, text = run_pause(tmp_path, apply=False)
    assert code == 0 and fake.calls == []
    assert "gpucluster:paused: true" in text and "pauseMode" not in text.split("gpucluster:paused")[1][:40]
    assert out.endswith("next: pulumi up --stack prod\nthen: python -m bootstrap pause --stack prod "
                        "--release-scale-ups (cancels the scale-ups Kueue asked for jobs that wait)")


def test_resume_sets_paused_false(tmp_path):
    run_pause(tmp_path, apply=False)
    code, out, fake, text = run_pause(tmp_path, paused=False)
    assert code == 0 and "  gpucluster:paused: false\n" in text
    assert text.count("gpucluster:paused:") == 1
    assert [c[0] for c in fake.calls] == ["preview", "up"]


def test_a_declined_pause_leaves_the_stack_alone(tmp_path, capsys):
    code, _, fake, text = run_pause(tmp_path, ask=lambda prompt: "n")
    assert code == 1 and [c[0] for c in fake.calls] == ["preview"]
    assert "not applied; the stack file is written" in capsys.readouterr().err


def test_pause_mode_is_checked_by_argparse(capsys):
    with pytest.raises(SystemExit) as exit_:
        pause.main(["--stack", "prod", "--mode", "stop"])
    assert exit_.value.code == 2
    assert "invalid choice: 'stop'" in capsys.readouterr().err
