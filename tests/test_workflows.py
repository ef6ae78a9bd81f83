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
    ("promote-prod.yml", "resolve"): {"contents": "read", "actions": "read"},
    ("promote-prod.yml", "preview"): {"contents": "read", "id-token": "write"},
    ("promote-prod.yml", "up"): {"contents": "read", "id-token": "write"},
}
PROMOTE = WORKFLOWS / "promote-prod.yml"
PROMOTED_SHA = "${{ needs.resolve.outputs.sha }}"
README = WORKFLOWS.parent.parent / "README.md"


def load(path: Path) -> dict:
    # PyYAML reads the key `on` as True.
    return {("on" if k is True else k): v for k, v in yaml.safe_load(path.read_text()).items()}


def steps(path: Path):
    for job_id, job in load(path)["jobs"].items():
        for step in job.get("steps", []):
            yield job_id, step


def test_the_workflows_exist():
    assert [p.name for p in FILES] == ["deploy-dev.yml", "preview-comment.yml", "preview.yml", "promote-prod.yml"]


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


# Promotion to prod (promote-prod.yml): the commit dev deployed from main, or a tag by hand, previewed with
# the policy pack, approved in the `prod` environment, deployed by SHA.


def pulumi_step(job: str) -> dict:
    (step,) = [s for s in load(PROMOTE)["jobs"][job]["steps"] if s.get("uses", "").startswith("pulumi/actions@")]
    return step


def test_the_same_action_is_pinned_to_the_same_commit_everywhere():
    pins: dict[str, set[str]] = {}
    for path in FILES:
        for _, step in steps(path):
            if "uses" in step:
                action, sha = step["uses"].split("@")
                pins.setdefault(action, set()).add(sha)
    assert {action: shas for action, shas in pins.items() if len(shas) > 1} == {}
    # The promotion brings no action the other workflows do not already use (and pin).
    others = {s["uses"] for path in FILES if path != PROMOTE for _, s in steps(path) if "uses" in s}
    assert {s["uses"] for _, s in steps(PROMOTE) if "uses" in s} <= others


def test_promotion_is_triggered_by_deploy_devs_success_on_main_or_by_hand():
    workflow = load(PROMOTE)
    assert set(workflow["on"]) == {"workflow_run", "workflow_dispatch"}
    assert workflow["on"]["workflow_run"] == {
        "workflows": [load(WORKFLOWS / "deploy-dev.yml")["name"]], "types": ["completed"], "branches": ["main"]}
    assert workflow["on"]["workflow_dispatch"]["inputs"] == {"tag": {
        "description": "Tag to promote to prod (must exist and be reachable from main)", "required": True,
        "type": "string"}}
    condition = " ".join(workflow["jobs"]["resolve"]["if"].split())
    for clause in ("github.event.workflow_run.conclusion == 'success'", "github.event.workflow_run.event == 'push'",
                   "github.event.workflow_run.head_branch == 'main'",
                   "github.event.workflow_run.head_repository.full_name == github.repository",
                   "(github.event_name == 'workflow_dispatch' && github.ref == 'refs/heads/main')"):
        assert clause in condition, clause
    # Nothing runs unless resolve found the commit: every other job needs it.
    for job_id, job in workflow["jobs"].items():
        if job_id != "resolve":
            assert "resolve" in ([job["needs"]] if isinstance(job["needs"], str) else job["needs"]), job_id
    # The dev run concludes success with its job skipped (no deploy role): resolve asks for the job itself.
    script = workflow["jobs"]["resolve"]["steps"][1]["run"]
    assert f'select(.name == "{load(WORKFLOWS / "deploy-dev.yml")["jobs"]["up"]["name"]}")' in script
    # workflow_run is a dangerous trigger; the exception is stated where it is taken.
    trigger_line = next(line for line in PROMOTE.read_text().splitlines() if line.startswith("  workflow_run:"))
    assert "# zizmor: ignore[dangerous-triggers] -- head is main after a push" in trigger_line


def test_promotions_never_overlap_and_are_never_cancelled_half_way():
    assert load(PROMOTE)["concurrency"] == {"group": "deploy-prod", "cancel-in-progress": False}


def test_only_the_deploy_job_holds_prod_credentials_and_it_waits_for_the_prod_environment():
    jobs = load(PROMOTE)["jobs"]
    up = jobs["up"]
    assert up["environment"] == "prod"
    assert up["needs"] == ["resolve", "preview"]
    assert pulumi_step("up")["with"]["command"] == "up" and pulumi_step("up")["with"]["stack-name"] == "prod"
    (creds,) = [s for s in up["steps"] if s.get("uses", "").startswith("aws-actions/configure-aws-credentials@")]
    assert creds["with"]["role-to-assume"] == "${{ vars.PULUMI_PROD_DEPLOY_ROLE_ARN }}"
    # Every other job runs before the approval: no environment, no deploy role, no `up`.
    for job_id, job in jobs.items():
        if job_id != "up":
            assert "environment" not in job, job_id
            assert "PULUMI_PROD_DEPLOY_ROLE_ARN" not in json.dumps(job["steps"]), job_id
            assert '"command": "up"' not in json.dumps(job["steps"]), job_id


def test_the_preview_and_the_deploy_check_out_exactly_the_promoted_sha():
    jobs = load(PROMOTE)["jobs"]
    assert jobs["resolve"]["outputs"]["sha"] == "${{ steps.resolve.outputs.sha }}"
    for job_id in ("preview", "up"):
        job_steps = jobs[job_id]["steps"]
        checkouts = [i for i, s in enumerate(job_steps) if s.get("uses", "").startswith("actions/checkout@")]
        assert len(checkouts) == 1, job_id
        assert job_steps[checkouts[0]]["with"]["ref"] == PROMOTED_SHA, job_id
        verify = job_steps[checkouts[0] + 1]
        assert verify["env"] == {"SHA": PROMOTED_SHA} and verify["run"] == 'test "$(git rev-parse HEAD)" = "$SHA"'
        assert pulumi_step(job_id)["with"]["work-dir"] == "."
    # The tag is read once, by resolve; no job checks out a branch, a tag or the triggering ref.
    text = PROMOTE.read_text()
    assert text.count("inputs.tag") == 2  # run-name and resolve's env
    assert "TAG: ${{ inputs.tag }}" in text
    assert "github.ref_name" not in text and "github.head_ref" not in text


def test_the_prod_preview_runs_the_policy_pack_and_shows_the_diff_to_the_approver():
    preview = pulumi_step("preview")["with"]
    assert preview["command"] == "preview" and preview["stack-name"] == "prod"
    assert preview["policyPacks"] == "policy"
    assert preview["diff"] is True and preview["comment-on-summary"] is True
    assert pulumi_step("up")["with"]["policyPacks"] == "policy"
    # The same CLI as the pull-request previews and the dev deploy.
    dev = next(s for _, s in steps(WORKFLOWS / "deploy-dev.yml") if s.get("uses", "").startswith("pulumi/actions@"))
    assert preview["pulumi-version"] == pulumi_step("up")["with"]["pulumi-version"] == dev["with"]["pulumi-version"]
    job_steps = load(PROMOTE)["jobs"]["preview"]["steps"]
    installs = " ".join(s.get("run", "") for s in job_steps)
    assert "requirements-dev.txt" in installs  # the policy SDK and the offline plan's moto data
    report = next(s for s in job_steps if s.get("name") == "Offline plan diff against the commit prod last deployed")
    assert '>> "$GITHUB_STEP_SUMMARY"' in report["run"] and "bootstrap diff" in report["run"]
    upload = next(s for s in job_steps if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["with"]["name"] == "prod-plan-diff" and upload["with"]["if-no-files-found"] == "error"


def test_promotion_scripts_take_inputs_and_event_data_from_env_only():
    for job_id, step in steps(PROMOTE):
        script = step.get("run", "")
        for needle in ("${{", "inputs.", "github.event."):
            assert needle not in script, (job_id, step.get("name"), needle)
    env = load(PROMOTE)["jobs"]["resolve"]["steps"][1]["env"]
    assert env["TAG"] == "${{ inputs.tag }}" and env["RUN_SHA"] == "${{ github.event.workflow_run.head_sha }}"


def test_zizmor_finds_nothing_in_the_promotion_even_pedantic():
    result = subprocess.run([str(BIN / "zizmor"), "--offline", "--persona", "pedantic", "--format", "json",
                             str(PROMOTE)], capture_output=True, text=True)
    assert json.loads(result.stdout) == [], result.stdout[:2000]


# resolve's script, run for real against a throwaway repository: only a tag on main, or dev's own commit.
def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    root = tmp_path_factory.mktemp("promote")
    origin = root / "origin"
    subprocess.run(["git", "init", "-q", "-b", "main", str(origin)], check=True)
    _git(origin, "commit", "-q", "--allow-empty", "-m", "one")
    _git(origin, "tag", "v1.0.0")
    _git(origin, "commit", "-q", "--allow-empty", "-m", "two")
    _git(origin, "tag", "-a", "v1.1.0", "-m", "annotated")
    _git(origin, "checkout", "-q", "-b", "side")
    _git(origin, "commit", "-q", "--allow-empty", "-m", "never merged")
    _git(origin, "tag", "v9-side")
    _git(origin, "checkout", "-q", "main")
    work = root / "work"
    subprocess.run(["git", "clone", "-q", str(origin), str(work)], check=True)
    _git(work, "fetch", "-q", "--tags")
    gh = root / "bin" / "gh"
    gh.parent.mkdir()
    gh.write_text('#!/bin/sh\necho "$FAKE_DEV_JOB"\n')  # the dev run's `pulumi up (dev)` conclusion
    gh.chmod(0o755)
    return {"work": work, "bin": gh.parent, "main": _git(origin, "rev-parse", "main"),
            "v1.0.0": _git(origin, "rev-parse", "v1.0.0"), "side": _git(origin, "rev-parse", "side")}


def resolve(clone, tmp_path, **env) -> tuple[int, dict]:
    script = load(PROMOTE)["jobs"]["resolve"]["steps"][1]["run"]
    out = tmp_path / "output"
    out.write_text("")
    result = subprocess.run(["bash", "-c", script], cwd=clone["work"], capture_output=True, text=True,
                            env={"PATH": f"{clone['bin']}:/usr/bin:/bin", "GITHUB_OUTPUT": str(out),
                                 "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"), "REPO": "acme/gpu-infra",
                                 "RUN_ID": "1", **env})
    return result.returncode, dict(line.split("=", 1) for line in out.read_text().splitlines())


def test_a_dispatched_tag_on_main_is_promoted_as_its_commit(clone, tmp_path):
    assert resolve(clone, tmp_path, EVENT="workflow_dispatch", TAG="v1.0.0") == (
        0, {"sha": clone["v1.0.0"], "source": "tag v1.0.0"})
    assert resolve(clone, tmp_path, EVENT="workflow_dispatch", TAG="v1.1.0") == (  # annotated: its commit
        0, {"sha": clone["main"], "source": "tag v1.1.0"})


@pytest.mark.parametrize("tag", ["v9-side", "v2.0.0", "main", "", "-v1.0.0", "v1.0.0^", "v1.0.0..main",
                                 "v1.0.0;id", "$(id)", "v1.0.0\nsha=0"])
def test_anything_but_an_existing_tag_reachable_from_main_is_refused(clone, tmp_path, tag):
    code, output = resolve(clone, tmp_path, EVENT="workflow_dispatch", TAG=tag)
    assert code != 0 and output == {}


def test_after_deploy_dev_its_commit_is_promoted_only_if_dev_really_deployed_it(clone, tmp_path):
    run = {"EVENT": "workflow_run", "RUN_SHA": clone["main"]}
    assert resolve(clone, tmp_path, FAKE_DEV_JOB="success", **run) == (0, {"sha": clone["main"], "source": "main"})
    assert resolve(clone, tmp_path, FAKE_DEV_JOB="skipped", **run) == (1, {})
    assert resolve(clone, tmp_path, FAKE_DEV_JOB="success", EVENT="workflow_run", RUN_SHA=clone["side"]) == (1, {})
    assert resolve(clone, tmp_path, FAKE_DEV_JOB="success", EVENT="workflow_run", RUN_SHA="main") == (1, {})


def test_the_readme_says_how_to_promote_and_what_to_configure():
    readme = README.read_text()
    section = readme.split("\n## How a change reaches prod\n", 1)[1].split("\n## ", 1)[0]
    assert readme.index("\n## Pull-request previews\n") < readme.index("\n## How a change reaches prod\n")
    assert "gh workflow run promote-prod.yml --ref main -f tag=" in section
    # Every variable the workflows read is documented.
    used = set(re.findall(r"vars\.([A-Z_]+)", "".join(p.read_text() for p in FILES)))
    assert {v for v in used if f"`{v}`" not in readme} == set()
    for setting in ("Required reviewers", "Prevent self-review", "`main`", "repo:acme/gpu-infra:environment:prod",
                    "repo:acme/gpu-infra:ref:refs/heads/main"):
        assert setting in section, setting
