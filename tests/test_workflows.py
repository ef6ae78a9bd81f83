"""The GitHub workflows: valid against GitHub's schema, no high-severity zizmor finding, least privilege."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

WORKFLOWS = Path(__file__).resolve().parent.parent / ".github" / "workflows"
FILES = sorted(WORKFLOWS.glob("*.yml"))
BIN = Path(sys.executable).parent
# What each job may do, and nothing more.
PERMISSIONS = {
    ("preview.yml", "plan-diff"): {"contents": "read"},
    ("preview.yml", "pulumi-preview"): {"contents": "read", "id-token": "write", "pull-requests": "write"},
    ("preview-comment.yml", "comment"): {"actions": "read", "pull-requests": "write"},
    ("deploy-dev.yml", "up"): {"contents": "read", "id-token": "write"},
}


def load(path: Path) -> dict:
    # PyYAML reads the key `on` as True.
    return {("on" if k is True else k): v for k, v in yaml.safe_load(path.read_text()).items()}


def steps(path: Path):
    for job_id, job in load(path)["jobs"].items():
        for step in job.get("steps", []):
            yield job_id, step


def test_the_three_workflows_exist():
    assert [p.name for p in FILES] == ["deploy-dev.yml", "preview-comment.yml", "preview.yml"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_valid_against_githubs_workflow_schema(path):
    # check-jsonschema's vendored copy of SchemaStore's github-workflow schema: no network.
    result = subprocess.run([str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(path)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_zizmor_finds_nothing_high():
    result = subprocess.run([str(BIN / "zizmor"), "--offline", "--format", "json", str(WORKFLOWS)],
                            capture_output=True, text=True)
    findings = json.loads(result.stdout)
    severe = [f for f in findings if f["determinations"]["severity"] in ("High", "Medium")]
    assert severe == [], json.dumps(severe, indent=1)[:2000]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_commit_with_its_version(path):
    lines = [line for line in path.read_text().splitlines() if re.match(r"\s*(- )?uses:", line)]
    assert lines
    for line in lines:
        assert re.search(r"uses: [\w.-]+/[\w.-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$", line), line


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_least_privilege_per_job_and_none_at_the_top(path):
    workflow = load(path)
    assert workflow["permissions"] == {}
    for job_id, job in workflow["jobs"].items():
        assert job["permissions"] == PERMISSIONS[(path.name, job_id)], job_id


def test_no_pull_request_target_and_no_expressions_in_scripts():
    for path in FILES:
        assert "pull_request_target" not in load(path)["on"]
        for _, step in steps(path):
            assert "${{" not in step.get("run", ""), (path.name, step.get("name"))


def test_checkouts_keep_no_credentials_and_the_comment_job_checks_out_nothing():
    for path in FILES:
        for job_id, step in steps(path):
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, (path.name, job_id)
    assert not any(s.get("uses", "").startswith("actions/checkout@") for _, s in steps(WORKFLOWS / "preview-comment.yml"))


def test_the_cloud_preview_runs_for_this_repositorys_branches_only():
    job = load(WORKFLOWS / "preview.yml")["jobs"]["pulumi-preview"]
    assert "github.event.pull_request.head.repo.full_name == github.repository" in job["if"]
    (preview,) = [s for s in job["steps"] if s.get("uses", "").startswith("pulumi/actions@")]
    assert preview["with"]["command"] == "preview" and preview["with"]["comment-on-pr"] is True
    assert preview["with"]["cloud-url"] == "${{ vars.PULUMI_BACKEND_URL }}"
    # Resource hooks need CLI 3.182 or newer (pulumi/pulumi 3.182.0 release notes).
    major, minor, _ = (int(n) for n in preview["with"]["pulumi-version"].split("."))
    assert (major, minor) >= (3, 182)


def test_the_comment_job_only_trusts_a_numeric_pr_whose_head_is_the_runs():
    script = next(s["run"] for _, s in steps(WORKFLOWS / "preview-comment.yml") if "run" in s)
    assert "*[!0-9]*) echo \"pr-number is not a number\"; exit 1" in script
    assert "--jq .head.sha)\" = \"$HEAD_SHA\"" in script
    trigger = load(WORKFLOWS / "preview-comment.yml")["on"]["workflow_run"]
    assert trigger == {"workflows": ["preview"], "types": ["completed"]}


def test_deploys_never_overlap_and_wait_for_the_environment():
    workflow = load(WORKFLOWS / "deploy-dev.yml")
    assert workflow["concurrency"] == {"group": "deploy-dev", "cancel-in-progress": False}
    assert workflow["jobs"]["up"]["environment"] == "dev"
    assert workflow["on"] == {"push": {"branches": ["main"]}}
