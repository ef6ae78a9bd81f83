"""One exit-code rule for every verb (README "Every verb keeps one rule"): 0 all well, 1 a problem found, 2 could
not run; a closed pipe ends it quietly. Verb by verb through the CLI's entry, bootstrap.__main__.run (in process;
a subprocess only for the closed pipe and the README's first-deploy lines), each case with its code and message.

Covered where the verb is tested, not repeated here: plan's config problems, policy violations and unreadable
stack files (test_plan.py), diff's unreadable input (test_diff.py), backend's refusals and bad arguments
(test_backend.py), preflight's failed checks (test_preflight.py), size's bad input (test_sizing.py), nccl-report's
FAIL and missing file (test_nccl_report.py), status's failed job, submit's and cancel's refusals (test_jobs.py),
doctor's causes and unreadable bundle (test_doctor.py), validate's failed stage (test_validate.py), destroy's and
pause's refusals and failed `pulumi up` (test_teardown_cli.py).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

import bootstrap.__main__ as cli
from bootstrap import stackfile
from bootstrap.account.identity import cannot_reach_aws
from tests.conftest import ROOT

NO_CREDENTIALS = "Unable to locate credentials"
# Three problems of values, all reported; the config itself is not checked until they are fixed.
MISREAD = ("config:\n  aws:region: us-east-1\n  gpucluster:clusterName: 010\n"
           "  gpucluster:kubernetesVersion: 2026-12-05\n  gpucluster:clusterName: gpu\n")
MISREAD_PROBLEMS = [
    "  - gpucluster:clusterName: got 010, which the Pulumi CLI reads as the number 8 (YAML 1.1 octal, hex or "
    "binary); quote it (\"010\") to keep the text, or write 8",
    "  - gpucluster:kubernetesVersion: got 2026-12-05, which the Pulumi CLI turns into Go's date text "
    "(\"2026-12-05 00:00:00 +0000 UTC\"); quote it (\"2026-12-05\")",
    "  - line 5: mapping key 'gpucluster:clusterName' already defined at line 3 (the Pulumi CLI refuses a repeated "
    "key)",
]
DEPLOYED = ("  gpucluster:adminPrincipalArns: [arn:aws:iam::210987654321:role/Admin]\n"  # what `pulumi up` needs
            "  gpucluster:publicAccessCidrs: [52.94.76.10/32]\n")
STACK_FILES = {"ok": (ROOT / "Pulumi.dev.yaml").read_text().rstrip("\n") + "\n" + DEPLOYED, "misread": MISREAD,
               "broken": "config: {a: [\n",
               "noregion": "config:\n  gpucluster:clusterName: gpu\n"}
# Every verb that reads a stack, as it is called with one (S).
STACK_VERBS = [["plan", "--stack", "S"], ["preflight", "--stack", "S"], ["upgrade", "--stack", "S"],
               ["destroy", "--stack", "S", "--yes"], ["pause", "--stack", "S", "--no-up"],
               ["resume", "--stack", "S", "--no-up"], ["submit", "--stack", "S", "job"], ["status", "--stack", "S"],
               ["logs", "job", "--stack", "S"], ["cancel", "job", "--stack", "S"], ["report", "job", "--stack", "S"],
               ["doctor", "--stack", "S"],
               ["validate", "--stack", "S"]]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `python -m bootstrap ARGV`, in process."""
    try:
        code = cli.run(list(argv))
    except SystemExit as exit_:  # argparse's usage errors, as the process would end
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """Nothing leaves this machine: a name lookup or a connection beyond loopback fails the test."""
    attempts = []
    local = ("127.0.0.1", "::1", "localhost")
    real_lookup, real_connect = socket.getaddrinfo, socket.socket.connect

    def lookup(host, *args, **kwargs):
        if host not in local:
            attempts.append(host)
            raise OSError(f"no network in this test: {host}")
        return real_lookup(host, *args, **kwargs)

    def connect(sock, address):
        if sock.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in local:
            attempts.append(address)
            raise OSError(f"no network in this test: {address}")
        return real_connect(sock, address)

    monkeypatch.setattr(socket, "getaddrinfo", lookup)
    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.delenv("GPUCLUSTER_DEBUG", raising=False)
    yield
    assert attempts == [], "a verb tried the network"


@pytest.fixture
def no_credentials(tmp_path_factory, monkeypatch) -> dict[str, str]:
    """An environment where boto3 finds no credentials and asks no metadata service; returned for subprocesses."""
    empty = tmp_path_factory.mktemp("aws") / "empty"
    empty.write_text("")
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    for key, value in (("AWS_CONFIG_FILE", str(empty)), ("AWS_SHARED_CREDENTIALS_FILE", str(empty)),
                       ("AWS_EC2_METADATA_DISABLED", "true")):
        monkeypatch.setenv(key, value)
    return dict(os.environ)


@pytest.fixture
def stacks(tmp_path, monkeypatch):
    """Stacks ok, misread, broken and noregion, in a folder of their own (the project's stack files stay untouched)."""
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    for name, text in STACK_FILES.items():
        (tmp_path / f"Pulumi.{name}.yaml").write_text(text)
    real = stackfile.stack_path

    def stack_path(stack, project_dir=stackfile.PROJECT_DIR):
        return tmp_path / f"Pulumi.{stack}.yaml" if stack in STACK_FILES else real(stack, project_dir)

    monkeypatch.setattr(stackfile, "stack_path", stack_path)
    monkeypatch.setenv("PATH", str(tmp_path))  # no pulumi CLI: no backend is ever asked
    return tmp_path


@pytest.fixture
def no_cluster(tmp_path, monkeypatch):
    """A kubeconfig whose API server is 127.0.0.1:1, where nothing listens."""
    path = tmp_path / "kubeconfig"
    path.write_text("apiVersion: v1\nkind: Config\ncurrent-context: nowhere\n"
                    "clusters: [{name: nowhere, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                    "users: [{name: nobody, user: {token: x}}]\n"
                    "contexts: [{name: nowhere, context: {cluster: nowhere, user: nobody}}]\n")
    monkeypatch.setenv("KUBECONFIG", str(path))


class FakeAws:
    """boto3.Session's stand-in: STS answers `arn`; every call to a service in `refuse` gets AWS's error `code`."""

    def __init__(self, arn: str = "arn:aws:iam::210987654321:user/alice", refuse: tuple[str, ...] = (),
                 code: str = "AccessDenied"):
        self.arn, self.refuse, self.code = arn, refuse, code

    def __call__(self, **_):
        return self

    def client(self, service: str, **_):
        return _FakeClient(self, service)


class _FakeClient:
    def __init__(self, aws: FakeAws, service: str):
        self.aws, self.service = aws, service

    def __getattr__(self, operation: str):
        def call(**_):
            if self.service in self.aws.refuse:
                raise ClientError({"Error": {"Code": self.aws.code, "Message": "refused"}}, operation)
            if operation == "get_caller_identity":
                return {"Arn": self.aws.arn, "Account": "210987654321", "UserId": "AIDA"}
            raise AssertionError(f"{self.service}.{operation} was not expected")
        return call


# -- no credentials: could not run (2) -----------------------------------------------------------------------------


@pytest.mark.parametrize(("argv", "message"), [
    (["whoami"], f"gpucluster: cannot tell who you are: {NO_CREDENTIALS}"),
    (["backend", "--bucket", "acme-pulumi-state", "--region", "us-east-1"], f"gpucluster: cannot reach AWS: "
                                                                           f"{NO_CREDENTIALS}"),
    (["upgrade", "--stack", "dev"], re.compile(rf"gpucluster: cannot resolve the versions for Kubernetes 1\.\d+: "
                                               rf"{NO_CREDENTIALS}")),
    (["preflight", "--stack", "dev"], "gpucluster: the account could not be checked: are AWS credentials set "
                                      "(`aws sts get-caller-identity`)?"),
], ids=["whoami", "backend", "upgrade", "preflight"])
def test_without_credentials_a_verb_could_not_run(no_credentials, capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2
    line = err.rstrip("\n")
    assert "\n" not in line and (message.fullmatch(line) if isinstance(message, re.Pattern) else line == message)
    if argv[0] == "preflight":  # the deploy-time keys are still listed; the account was not checked
        assert "UNKNOWN identity: NoCredentialsError" in out and "PASS" not in out
    else:
        assert out == ""


@pytest.mark.parametrize(("argv", "aws", "expected", "message"), [
    # Credentials that do not authenticate: could not run.
    (["whoami"], FakeAws(refuse=("sts",), code="ExpiredToken"), 2, "gpucluster: cannot tell who you are: "),
    (["backend", "--bucket", "acme-pulumi-state", "--region", "us-east-1"],
     FakeAws(refuse=("sts",), code="ExpiredToken"), 2, "gpucluster: cannot reach AWS: "),
    (["backend", "--bucket", "acme-pulumi-state", "--region", "us-east-1"],  # expired between two calls
     FakeAws(refuse=("s3",), code="ExpiredToken"), 2, "gpucluster: cannot reach AWS: "),
    (["upgrade", "--stack", "dev"], FakeAws(refuse=("ssm",), code="ExpiredTokenException"), 2,
     "gpucluster: cannot resolve the versions for Kubernetes "),
    # AWS answers about the account: a problem found (whoami's one call cannot be denied: any error, 2).
    (["whoami"], FakeAws(refuse=("sts",)), 2, "gpucluster: cannot tell who you are: "),
    (["whoami"], FakeAws(arn="arn:aws:iam::210987654321:root"), 1,
     "gpucluster: arn:aws:iam::210987654321:root is the account's root user"),
    (["backend", "--bucket", "acme-pulumi-state", "--region", "us-east-1"], FakeAws(refuse=("s3",)), 1,
     "gpucluster: s3://acme-pulumi-state exists but belongs to another account"),
    (["upgrade", "--stack", "dev"], FakeAws(refuse=("ssm",), code="AccessDeniedException"), 1,
     "gpucluster: cannot resolve the versions for Kubernetes "),
], ids=["whoami-expired", "backend-expired", "backend-expired-later", "upgrade-expired", "whoami-denied",
        "whoami-root", "backend-denied", "upgrade-denied"])
def test_aws_errors_by_what_they_say(monkeypatch, capsys, argv, aws, expected, message):
    import boto3

    monkeypatch.setattr(boto3, "Session", aws)
    code, out, err = run(capsys, *argv)
    assert (code, out) == (expected, "")
    assert err.startswith(message) and err.count("\n") == 1, err


def test_whoami_all_well_prints_the_arn_alone(monkeypatch, capsys):
    import boto3

    monkeypatch.setattr(boto3, "Session", FakeAws())
    assert run(capsys, "whoami") == (0, "arn:aws:iam::210987654321:user/alice\n", "")


def test_what_cannot_reach_aws_is_told_from_what_aws_answers():
    def client_error(code: str) -> ClientError:
        return ClientError({"Error": {"Code": code, "Message": ""}}, "Call")

    assert cannot_reach_aws(NoCredentialsError()) and cannot_reach_aws(EndpointConnectionError(endpoint_url="x"))
    assert cannot_reach_aws(client_error("ExpiredToken")) and cannot_reach_aws(client_error("InvalidClientTokenId"))
    assert not cannot_reach_aws(client_error("AccessDenied")) and not cannot_reach_aws(client_error("ParameterNotFound"))


# -- the stack file: a bad stack is a problem found (1), an unreadable one could not run (2) ----------------------


@pytest.mark.parametrize("argv", STACK_VERBS, ids=lambda argv: argv[0])
def test_a_misread_stack_is_a_bad_stack_with_every_problem(stacks, capsys, argv):
    code, out, err = run(capsys, *(a.replace("S", "misread") if a == "S" else a for a in argv))
    assert code == 1
    lines = err.splitlines()
    assert lines[0] == (f"gpucluster: {stacks / 'Pulumi.misread.yaml'}: 3 problems reading the stack file (the "
                        "config is checked once they are fixed):")
    assert lines[1:4] == MISREAD_PROBLEMS
    assert (stacks / "Pulumi.misread.yaml").read_text() == MISREAD  # pause and resume wrote nothing


@pytest.mark.parametrize("argv", STACK_VERBS, ids=lambda argv: argv[0])
def test_an_unreadable_stack_file_could_not_run(stacks, capsys, argv):
    code, out, err = run(capsys, *(a.replace("S", "broken") if a == "S" else a for a in argv))
    assert code == 2
    assert err == (f"gpucluster: {stacks / 'Pulumi.broken.yaml'}: not valid YAML: line 2, column 1: did not find "
                   "expected node content (while parsing a flow node from line 2)\n")


def test_upgrade_of_a_stack_without_a_region_is_a_problem_found(stacks, capsys):
    assert run(capsys, "upgrade", "--stack", "noregion") == (1, "", "gpucluster: Pulumi.noregion.yaml sets no "
                                                                    "aws:region\n")


# -- no Pulumi CLI, no cluster: could not run (2) ------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["destroy", "--stack", "ok", "--yes"], ["pause", "--stack", "ok"],
                                  ["resume", "--stack", "ok"]], ids=lambda argv: argv[0])
def test_without_the_pulumi_cli_destroy_pause_and_resume_could_not_run(stacks, capsys, argv):
    code, _, err = run(capsys, *argv)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("gpucluster: the Pulumi CLI (3.182.0 or newer) is not on PATH")


@pytest.mark.parametrize(("argv", "prefix"), [
    (["status"], "python -m bootstrap status: error: cannot reach the cluster"),
    (["logs", "job"], "python -m bootstrap logs: error: cannot reach the cluster"),
    (["cancel", "job"], "python -m bootstrap cancel: error: cannot reach the cluster"),
    (["doctor"], "doctor: error: cannot read the cluster"),
    (["doctor", "job"], "doctor: error: cannot read the cluster"),
    (["validate", "--stack", "dev"], "python -m bootstrap validate: error: cannot reach the cluster"),
    (["submit", "--stack", "prod", "gpt-pretrain"], "python -m bootstrap submit: error: cannot reach the cluster"),
], ids=["status", "logs", "cancel", "doctor", "doctor-job", "validate", "submit"])
def test_without_a_cluster_a_job_verb_could_not_run(no_cluster, capsys, argv, prefix):
    code, _, err = run(capsys, *argv)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"{prefix}: https://127.0.0.1:1: ")


# -- other files a verb reads ---------------------------------------------------------------------------------------


def test_unreadable_input_files_could_not_run(tmp_path, capsys):
    assert run(capsys, "nccl-report", str(tmp_path)) == (
        2, "", f"nccl-report: error: cannot read {tmp_path}: Is a directory\n")
    assert run(capsys, "submit", "--stack", "prod", "--file", str(tmp_path / "job.yaml")) == (
        2, "", f"python -m bootstrap submit: error: {tmp_path / 'job.yaml'}: cannot be read (No such file or "
               "directory)\n")


def test_bad_usage_could_not_run(capsys):
    assert run(capsys, "nope")[0] == 2
    assert run(capsys)[0] == 2
    code, _, err = run(capsys, "resume")
    assert code == 2 and "the following arguments are required: --stack" in err


# -- what no verb expected ------------------------------------------------------------------------------------------


def test_a_file_error_no_verb_caught_could_not_run_and_is_no_bug(monkeypatch, capsys):
    def denied(argv):
        raise PermissionError(13, "Permission denied", "/srv/Pulumi.dev.yaml")

    monkeypatch.setattr(cli, "main", denied)
    assert run(capsys, "pause") == (2, "", "gpucluster: could not run pause: /srv/Pulumi.dev.yaml: Permission "
                                           "denied (GPUCLUSTER_DEBUG=1 prints the traceback)\n")


def test_a_closed_pipe_in_process_is_quiet(monkeypatch, capsys):
    def reader_gone(argv):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(cli, "main", reader_gone)
    assert run(capsys, "plan") == (cli.CLOSED_PIPE, "", "")


def test_plan_into_a_closed_pipe_ends_quietly_as_cat_does(no_credentials):
    # The reader is gone before the first line (`| head -1` after its line is the same write): no message, no
    # traceback, and the end cat or seq have: killed by SIGPIPE (the shell's 141). No credentials: plan needs none.
    proc = subprocess.Popen([sys.executable, "-m", "bootstrap", "plan", "--stack", "dev"], cwd=ROOT,
                            env=no_credentials, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == -signal.SIGPIPE and err == ""


# -- README's first-deploy lines stop when their command fails -----------------------------------------------------


def readme_line(marker: str) -> str:
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    (line,) = [line for block in blocks for line in block.splitlines()
               if marker in line and not line.lstrip().startswith("#")]
    return line


@pytest.mark.parametrize(("marker", "status", "message"), [
    ("adminPrincipalArns[0]", 2, f"gpucluster: cannot tell who you are: {NO_CREDENTIALS}\n"),
    ("publicAccessCidrs[0]", 22, "curl: (22) The requested URL returned error: 503\n"),
], ids=["whoami", "curl"])
def test_a_first_deploy_line_whose_command_fails_writes_nothing(tmp_path, no_credentials, marker, status, message):
    bin_dir = tmp_path / "bin"
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    bin_dir.mkdir()
    scripts = {
        bin_dir / "pulumi": '#!/bin/sh\necho "$@" >> "$PULUMI_CALLS"\n',
        # As curl does when the service answers 503: with -f, a message and exit 22; without, the page and 0.
        bin_dir / "curl": '#!/bin/sh\ncase "$*" in *-f*) echo "curl: (22) The requested URL returned error: 503" '
                          '>&2; exit 22;; esac\necho "<html>Service Unavailable</html>"\n',
        tmp_path / "venv" / "bin" / "python": f'#!/bin/sh\nexec "{sys.executable}" "$@"\n',  # the README's venv
    }
    for path, text in scripts.items():
        path.write_text(text)
        path.chmod(0o755)
    calls = tmp_path / "pulumi-calls"
    env = no_credentials | {"PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHONPATH": str(ROOT), "PULUMI_CALLS": str(calls)}
    done = subprocess.run(["bash", "-c", readme_line(marker)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stderr) == (status, message)
    assert not calls.exists(), f"pulumi was called: {calls.read_text()}"


def test_only_errors_before_aws_answers_count_as_no_aws():
    from botocore import exceptions

    from bootstrap.account.identity import cannot_reach_aws

    assert cannot_reach_aws(exceptions.NoCredentialsError())
    assert cannot_reach_aws(exceptions.EndpointConnectionError(endpoint_url="https://sts.amazonaws.com"))
    assert cannot_reach_aws(exceptions.ClientError({"Error": {"Code": "ExpiredToken"}}, "GetCallerIdentity"))
    # Our mistake or the account's answer: the verb judges it (1), never "could not reach AWS" (2).
    assert not cannot_reach_aws(exceptions.ParamValidationError(report="Bucket: missing"))
    assert not cannot_reach_aws(exceptions.ClientError({"Error": {"Code": "AccessDenied"}}, "GetRole"))
