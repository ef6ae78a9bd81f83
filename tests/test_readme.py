"""README.md as tests: its offline commands run as written, and what it quotes of the code is the code's.

Every command of every bash block is classified below (RULES): run here, in
a copy of the repository under a random folder name (tests/readme_blocks.py),
run in the e2e tier, or why it cannot run offline. A command no rule
classifies fails, naming its README line. The quotes (XIDs, doctor's causes
and report, the torchrun runtime's name, versions, plan and submit output)
are compared with what the code says or prints.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import NamedTuple

import pytest
import yaml

from bootstrap.doctor import causes
from bootstrap.offline import benchmark
from bootstrap.verbs.jobs import doctor, submit
from components.core.goodput import steps
from components.core.kube import trainer
from components.core.observability import alerts
from tests import readme_blocks as rb
from tests import test_doctor
from tests.conftest import ROOT, plan, plan_out, stack_config, stack_raw
from tests.kube_fake import FakeKube
from tests.test_jobs import after_pulumi_up, kueue, workload

SUITE, E2E = "runs here", "runs in the e2e tier (tests/e2e/test_readme_benchmark.py): 7 fresh processes, ~25 s"
AWS = "cannot run offline: needs AWS credentials (the Pulumi CLI: the S3 state backend and the account)"
CLUSTER = "cannot run offline: needs a cluster (EKS, or the local control plane's)"
GITHUB = "cannot run offline: needs GitHub (gh, git push)"
SYNOPSIS = "not runnable as written: a usage synopsis with placeholders ([--json], S, JOB)"
SELF = "is the test suite itself"
LOCAL = "the local control plane: the e2e tier starts it as `make local` does (tests/e2e/conftest.py)"


class Rule(NamedTuple):
    pattern: str  # matched (re.match) against the command without its trailing comment
    where: str
    exit: int = 0  # for SUITE: the exit code the README promises


RULES = (
    Rule(r"make test$", SELF),
    Rule(r"make plan$", SUITE),
    Rule(r"make local$", LOCAL),
    Rule(r"export KUBECONFIG=\$PWD/\.local-cluster/kubeconfig$", LOCAL),
    Rule(r"gh |git tag .* && git push ", GITHUB),
    Rule(r"pulumi |\w+=\$\(.*\) && pulumi ", AWS),
    Rule(r".*(\[--|--[\w-]+ [A-Z]( |$)|\(JOB \|)", SYNOPSIS),
    Rule(r"venv/bin/python -m bootstrap plan --stack (prod --out plan-out|dev --json)$", SUITE),
    # the plan diff: one script, as its commands share $here and $base
    Rule(r"here=\$PWD base=\$\(mktemp -d\)/base$", SUITE),
    Rule(r'git worktree add --quiet --detach "\$base" main$', SUITE),
    Rule(r'\(cd "\$base" && "\$here/venv/bin/python" -m bootstrap plan --stack prod --json\) > base\.json$', SUITE),
    Rule(r"venv/bin/python -m bootstrap plan --stack prod --json > head\.json$", SUITE),
    Rule(r"venv/bin/python -m bootstrap diff base\.json head\.json$", SUITE),
    Rule(r'git worktree remove "\$base" && rmdir "\$\{base%/base\}"$', SUITE),
    Rule(r"venv/bin/python -m bootstrap doctor --from bundle/ --json$", SUITE, exit=1),  # 1: a cause found
    Rule(r"venv/bin/python -m bootstrap\.offline\.benchmark$", E2E),
    Rule(r"venv/bin/python -m bootstrap (backend|whoami|preflight|upgrade|pause|resume|destroy) ", AWS),
    Rule(r"venv/bin/python -m bootstrap (submit|status|logs|cancel|report|validate|doctor --stack) |kubectl ", CLUSTER),
)
ASSIGNMENT = re.compile(r"^\w+=")
DOCTOR_DATA = ROOT / "tests" / "data" / "doctor"


def rule_of(command: rb.Command) -> Rule | None:
    return next((rule for rule in RULES if re.match(rule.pattern, command.bare, re.S)), None)


def commands_where(where: str) -> list[rb.Command]:
    return [c for c in rb.bash_commands() if (rule := rule_of(c)) and rule.where == where]


def find(pattern: str) -> rb.Command:
    (command,) = [c for c in commands_where(SUITE) if re.match(pattern, c.bare)]
    return command


def test_every_bash_command_is_classified_by_one_rule_and_every_rule_is_used():
    commands = rb.bash_commands()
    unclassified = [f"README.md:{c.line}: {c.bare.splitlines()[0]}" for c in commands if rule_of(c) is None]
    assert not unclassified, "classify these in tests/test_readme.py RULES:\n" + "\n".join(unclassified)
    unused = [rule.pattern for rule in RULES if not any(rule_of(c) == rule for c in commands)]
    assert not unused, f"rules no README command matches any more: {unused}"


def doctor_example_bundle() -> str:
    """The bundle the README's doctor report is of (named in the sentence before it)."""
    return re.search(r"the bundle tests/data/doctor/([\w-]+)\)", rb.section("When a job fails")).group(1)


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    folder = rb.fresh_clone(tmp_path_factory.mktemp("readme"))
    assert folder.name not in ("gpucluster", "main")
    # `doctor --from bundle/` reads what the README's line before it (`--collect bundle/`) writes
    shutil.copytree(DOCTOR_DATA / doctor_example_bundle(), folder / "bundle")
    return folder


@pytest.fixture(scope="module")
def ran(clone):
    """Every SUITE command, as written, through bash, all at once (the plans are CPU-bound, one per core):
    {README line: CompletedProcess}. A block whose commands share shell variables runs as one script."""
    scripts = {}
    for block in rb.blocks():
        commands = rb.commands(block) if block.lang == "bash" else []
        here = [c for c in commands if rule_of(c) and rule_of(c).where == SUITE]
        if any(ASSIGNMENT.match(c.bare) for c in here):
            assert here == commands, f"README.md:{block.line}: a script of which only part runs offline"
            scripts[commands[0].line] = block.text
        else:
            scripts.update((c.line, c.text) for c in here)
    scripts[0] = 'venv/bin/python -c "import sys, bootstrap; print(sys.prefix, bootstrap.__file__)"'
    tmpdir = clone.parent / "tmp"  # where the plan diff's `mktemp -d` goes
    tmpdir.mkdir()
    with ThreadPoolExecutor(len(scripts)) as pool:
        futures = {line: pool.submit(rb.run_script, text, clone, tmpdir=tmpdir) for line, text in scripts.items()}
        return {line: future.result() for line, future in futures.items()}


def test_the_offline_commands_exit_as_the_readme_says(ran, clone):
    for line, result in sorted(ran.items()):
        command = next((c for c in commands_where(SUITE) if c.line == line), None)
        expected = rule_of(command).exit if command else 0
        assert result.returncode == expected and "Traceback" not in result.stderr, (
            f"README.md:{line}: exit {result.returncode}, not {expected}\n{result.stderr[-3000:]}")
    # the copy's venv is a link to this checkout's; the code that ran is the copy's
    prefix, module = ran[0].stdout.split()
    assert prefix == str(clone / "venv") and module == str(clone / "bootstrap" / "__init__.py")


def test_make_plan_prints_the_dev_plan(ran):
    assert "gpucluster plan: stack dev " in ran[find("make plan").line].stdout


def test_plan_out_writes_resources_and_manifests_and_prints_what_the_readme_quotes(ran, clone):
    out = ran[find(r".*--out plan-out").line].stdout
    assert json.loads((clone / "plan-out" / "resources.json").read_text())
    assert len(list((clone / "plan-out" / "k8s").glob("*.yaml"))) > 20
    text = " ".join(rb.section("Set up (no AWS account needed)").split())
    quote = re.search(r'It says what `pulumi up` starts at once \("([^"]+)"\)', text).group(1)
    assert f"`pulumi up` starts at once: {quote}\n" in out, "README, Set up: the plan line it quotes"


def test_the_readme_s_plans_are_byte_for_byte_this_process_s(ran, clone):
    """Two processes (hash seeds, import order, another folder): the README's commands and this test's plan
    print and write the same bytes, so a plan diff shows only real changes."""
    assert ran[find("make plan").line].stdout.endswith(plan("--stack", "dev").stdout)
    assert ran[find(r".*--stack dev --json$").line].stdout == plan("--stack", "dev", "--json").stdout
    assert (clone / "head.json").read_text() == plan("--stack", "prod", "--json").stdout
    ours, theirs = plan_out("prod"), clone / "plan-out"
    files = sorted(p.relative_to(ours) for p in ours.rglob("*") if p.is_file())
    assert files and files == sorted(p.relative_to(theirs) for p in theirs.rglob("*") if p.is_file())
    for name in files:
        assert (ours / name).read_bytes() == (theirs / name).read_bytes(), name


def test_plan_json_is_one_object(ran):
    report = json.loads(ran[find(r".*--stack dev --json$").line].stdout)
    assert report["stack"] == "dev" and report["resources"]


def test_the_plan_diff_recipe_prints_nothing_for_the_same_commit_and_leaves_no_worktree(ran, clone):
    result = ran[find(r"here=").line]
    assert result.stdout == ""  # `bootstrap diff` of identical plans
    assert (clone / "base.json").read_text() == (clone / "head.json").read_text()
    assert rb.git("worktree", "list", "--porcelain", cwd=clone).count("worktree ") == 1
    assert list((clone.parent / "tmp").iterdir()) == []  # the base's folder is gone too


def test_doctor_from_a_bundle_json(ran):
    report = json.loads(ran[find(r".*doctor --from").line].stdout)
    assert [f["cause"] for f in report["findings"]] == [doctor_example_bundle()]


def test_the_doctor_report_shown_is_doctor_s_report_of_that_bundle(clone, capsys, monkeypatch):
    monkeypatch.chdir(clone)
    assert doctor.main(["--from", "bundle/"]) == 1
    shown = rb.block_in("When a job fails", "").text
    assert capsys.readouterr().out == shown, "README, When a job fails: the report block"


def test_the_doctor_causes_the_readme_lists_are_the_registry_s():
    listed = " ".join(rb.section("When a job fails").split("`doctor --help` lists them:")[1].split("\n\n")[1].split())
    words = {  # cause id -> how the README's list names it
        "waiting-for-quota": "waiting for quota", "queue-inactive": "a held queue",
        "pods-ready-timeout": "pods not ready in time", "waiting-for-nodes": "waiting for nodes",
        "node-group-at-max-size": "a group at maxNodes", "no-node-group-fits": "no group whose nodes fit the pods",
        "insufficient-capacity": "no EC2 capacity", "ec2-vcpu-quota": "a vCPU quota", "image-pull": "image pulls",
        "oom-killed": "OOMKilled", "cuda-oom": "CUDA out of memory", "nccl-watchdog-timeout": "NCCL watchdog timeout",
        "nccl-socket-fallback": "NCCL on sockets instead of EFA", "efa-not-allocatable": "EFA devices or GPUs missing",
        "gpu-not-allocatable": "EFA devices or GPUs missing", "gpu-xid": "GPU XIDs",
        "node-hardware-unhealthy": "the agent's hardware conditions", "node-not-ready": "a node not Ready",
        "loss-nan": "a NaN loss", "loss-spike": "a loss spike", "checkpoint-dominates": "checkpoint writes that dominate",
        "deadline-exceeded": "a deadline or cost bound that ended the job",
        "max-execution-time": "a deadline or cost bound that ended the job", "spot-interruption": "a Spot interruption",
        "job-failed": "a failed job with each failed container's last error line",
        "team-over-share": "a team's job over its guarantee waiting to borrow",
        "team-preempted": "a team's job preempted to give back lent GPUs",
        "team-budget-reached": "a team at its monthly budget",
        "waiting-for-all-nodes": "a job waiting for all N nodes of its atomic scale-up",
        "network-domain": "a job that cannot fit in one network domain",
        "created-before-topology": "a job queued before its pool got a network topology",
        "pre-step-check-failed": "a pre-step check that failed",
        "node-quarantined": "a node the goodput controller quarantined",
    }
    assert sorted(words) == sorted(causes.CAUSES), "a new cause: name it in README's list and here"
    assert [w for w in words.values() if w not in listed] == []


def test_the_bundle_counts_the_readme_gives():
    assert "`tests/data/doctor/` holds one bundle per cause" in " ".join(rb.section("When a job fails").split())
    causes_with_a_bundle = {c for found, _ in test_doctor.EXPECTED.values() for c in found}
    assert causes_with_a_bundle == set(causes.CAUSES)
    tests = " ".join(rb.section("Tests").split())
    total, healthy, captured = re.search(r"`doctor` on (\d+) cited bundles \(one per cause, (\w+) healthy runs, "
                                         r"(\w+) captured on the local control plane\)", tests).groups()
    bundles = [p for p in DOCTOR_DATA.iterdir() if (p / "bundle.json").exists()]
    numbers = {"one": 1, "two": 2, "three": 3, "four": 4}
    assert int(total) == len(bundles) == len(causes.CAUSES) + numbers[healthy] + numbers[captured]
    assert (numbers[healthy], numbers[captured]) == (len(test_doctor.HEALTHY), len(test_doctor.CAPTURED))


def test_the_alerts_the_readme_lists_are_the_rules():
    text = " ".join(rb.section("Watch a job").split("**Alerts**")[1].split("\n\n")[0].split())
    rules = {r["alert"]: r for r in alerts.alert_rules(stack_config("dev"))}
    fatal = [int(x) for x in re.findall(r"DCGM_FI_DEV_XID_ERRORS == (\d+)", rules["GpuXidNeedsNodeReplacement"]["expr"])]
    listed = re.search(r"GPU XIDs that mean the node must be replaced \(([\d, ]+):", text).group(1)
    assert [int(x) for x in listed.split(", ")] == fatal, "README, Watch a job: the XIDs of the alert rule"
    assert f"under {alerts.IDLE_GPU_PERCENT} % busy for {alerts.IDLE_MINUTES} minutes" in text
    assert f"past {alerts.DEADLINE_SHARE:.0%} of its deadline".replace("%", " %") in text


def test_the_torchrun_runtime_name_is_described_as_the_code_builds_it():
    text = " ".join(rb.section("Launchers").split())
    template = re.search(r"ClusterTrainingRuntime `(gpucluster-torch-[^`]+)`", text).group(1)
    assert "first 6 hex digits of its SHA-256" in text and "`-g<grace>` when `terminationGracePeriodSeconds`" in text
    pool = stack_config("prod").pool("h100")
    for restarts, mount, grace in ((3, "/fsx", None), (10, "/fsx", 120), (0, "/data", None), (5, "/mnt/x", 30)):
        expected = (template.replace("<pool>", pool.name).replace("<maxRestarts>", str(restarts))
                    .replace("[-m<hash>]", "" if mount == "/fsx" else f"-m{hashlib.sha256(mount.encode()).hexdigest()[:6]}")
                    .replace("[-g<grace>]", "" if grace is None else f"-g{grace}"))
        assert trainer.runtime_name(pool, restarts, mount, grace) == expected


def test_every_version_the_readme_states_is_pinned_or_explained():
    pins = rb.pins()
    facts = {  # not ours to pin: facts about other software, or examples
        "0.28.1": "Horovod's last release (README, framework: horovod); no pin installs Horovod",
        "1.34.41": "the first botocore with EKS Pod Identity credentials (EKS User Guide)",
        "2.15.0": "the first AWS CLI v2 with EKS Pod Identity credentials (EKS User Guide)",
        "1.4.0": "an example release tag (Promote a tag by hand)",
        "1.2.0": "an example image tag (registry.internal:5000/ml/train:1.2.0)",
    }
    unpinned = []
    for number, line in enumerate(rb.README.read_text().splitlines(), 1):
        for version in re.findall(r"(?<![\w.])v?(\d+\.\d+\.\d+)(?!\.?\d)", line):
            if version not in facts and not re.search(rf"(?<![\d.])v?{re.escape(version)}(?!\d)", pins):
                unpinned.append(f"README.md:{number}: {version}")
    assert not unpinned, "versions no pin has (a bumped pin?); fix the README or explain them in `facts`"
    used = {v for v in facts if re.search(rf"(?<![\w.])v?{re.escape(v)}(?!\.?\d)", rb.README.read_text())}
    assert used == set(facts), f"facts the README no longer states: {set(facts) - used}"


OTHER_BLOCKS = {  # the first line of each block that is not bash -> what checks it, or why nothing runs it
    "Pulumi.<stack>.yaml": "a diagram of __main__.py's order",
    "components/": "a diagram of the folders (tests/test_structure.py keeps their layers)",
    "starting the control plane in ": "`make local`'s output: the e2e tier's (machine paths, timings)",
    "required 4-node job": "printed by tests/e2e/test_m_placement.py in `make e2e` (a real run: node ids vary)",
    "Quota reserved in ClusterQueue": "Kueue's events and doctor in tests/e2e/test_m_placement.py (a real run)",
    "capacity 3 of 4": "printed by tests/e2e/test_m_placement.py in `make e2e` (a real run, shortened)",
    "preferred 4-node job": "printed by tests/e2e/test_m_placement.py in `make e2e` (a real run: node ids vary)",
    "$ venv/bin/python -m bootstrap status --stack dev": "a session on the local control plane (tests/e2e)",
    "submitted MPIJob gpt-pretrain ": "test_the_submit_output_shown_is_submit_s",
    "doctor: job llama ": "test_the_doctor_report_shown_is_doctor_s_report_of_that_bundle",
    "import os, torch.distributed as dist": "test_the_python_blocks_parse (a fragment: it needs a process group)",
    "gpucluster:cpuPools:": "test_the_parameter_server_example_is_a_valid_addition_to_prod",
    "gpucluster:teams:": "tests/test_readme_teams.py: prod's teams",
    "Teams (Kueue cohort ": "tests/test_readme_teams.py: the prod plan's Teams section",
    "team vision (namespace vision): ": "tests/test_readme_teams.py: `status --team`'s spend line",
    "$ venv/bin/python -m bootstrap report --stack prod straggle": "printed by tests/e2e/test_n_goodput.py in "
                                                                   "`make e2e` (a real run: node names and times vary)",
    'print(f"gpucluster-step ': "test_the_two_step_lines_are_what_the_accounting_reads",
    "# Pulumi.fleet.yaml: the manager lists": "tests/test_fleet_plan.py: each line is in the example stack files",
    "$ venv/bin/python -m bootstrap status --stack fleet": "printed by tests/e2e_fleet/test_fleet.py in `make "
                                                           "e2e-fleet` (a real run: times vary)",
    "Fleet: manager of 2 workers": "tests/test_fleet_plan.py: the fleet plan's own lines",
}


def test_the_two_step_lines_are_what_the_accounting_reads(capsys):
    block = rb.block_in("Goodput: catch the node that slows a job, replace it, count every GPU-hour", "python")
    exec(compile(block.text, "README.md", "exec"), {"time": SimpleNamespace(time=lambda: 1796566312.25),
                                                    "step": 120, "t0": 1796566300.5})
    assert steps.parse(capsys.readouterr().out.splitlines()) == [
        {"type": "step", "step": 120, "at": 1796566312.25},
        {"type": "checkpoint", "step": 120, "start": 1796566300.5, "end": 1796566312.25}]


def test_every_other_block_is_checked_or_says_why_not():
    firsts = [(b.line, b.text.splitlines()[0]) for b in rb.blocks() if b.lang != "bash"]
    assert [f"README.md:{n}: {first}" for n, first in firsts if not first.startswith(tuple(OTHER_BLOCKS))] == []
    assert [key for key in OTHER_BLOCKS if not any(first.startswith(key) for _, first in firsts)] == []


def test_the_python_blocks_parse():
    for block in rb.blocks():
        if block.lang == "python":
            ast.parse(block.text, f"README.md:{block.line}")


def test_the_parameter_server_example_is_a_valid_addition_to_prod():
    example = yaml.safe_load(rb.block_in("Launchers", "yaml").text)
    jobs = json.loads(stack_raw("prod")["gpucluster:jobs"])
    cfg = stack_config("prod", {"gpucluster:cpuPools": example["gpucluster:cpuPools"],
                                "gpucluster:jobs": jobs + example["gpucluster:jobs"]})
    assert [j.name for j in cfg.jobs][-1] == "tf-ps" and [p.name for p in cfg.cpu_pools] == ["ps"]


def test_the_submit_output_shown_is_submit_s(tmp_path, monkeypatch, capsys):
    # README, "Run jobs without pulumi up": prod's gpt-pretrain queued behind the fabric test
    fake = FakeKube().start()
    try:
        fake.on_create.append(kueue)
        after_pulumi_up(fake)
        fabric = fake.add({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
                           "metadata": {"name": "nccl-tests-h100", "namespace": "training"}})
        fake.add(workload(fabric, 1000, "2026-12-05T11:00:00Z"))  # the fabric test's priority, queued first
        monkeypatch.setenv("KUBECONFIG", fake.write_kubeconfig(tmp_path / "kubeconfig"))
        assert submit.main(["--stack", "prod", "gpt-pretrain"], sleep=lambda _: None) == 0
    finally:
        fake.stop()
    assert capsys.readouterr().out == rb.block_in("Run jobs without `pulumi up`", "").text


def test_the_benchmark_quote_is_the_benchmark_s_output_for_its_numbers(monkeypatch, capsys):
    command, quote = rb.benchmark_block()
    numbers = rb.benchmark_numbers(quote)
    asked = []
    monkeypatch.setattr(benchmark, "measure", lambda stack, runs: asked.append((stack, runs)) or numbers)
    assert benchmark.main(command.bare.split()[3:]) == 0
    assert capsys.readouterr().out == quote + "\n"
    assert asked == [("prod", 3)] and "# prod, best of 3 fresh processes each" in command.text
