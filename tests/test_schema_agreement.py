"""The editors' JSON Schema and the program agree on every key, both ways (issue 28).

For every leaf key of the schema file (the README's reference rows), values are derived from the schema
and, the other way, from the model it is generated from, plus PROBES, the values the rules turn on that
neither derivation reaches (tests/schema_agreement_values.py). Each value is put into one rich, valid
stack, at every place the key has in it (each job, each pool), and judged by the schema and by the
program's validation, in-process (tests/schema_agreement_stack.py). They must agree:

- a value the schema accepts, the program accepts; the one excuse is a rule a JSON Schema cannot state:
  one between keys (CROSS_KEY: the problem is at the key, or at a key depending on it), or one of a single
  value no pattern states (VALUE_RULES); the key's schema description must name the other key, or the rule;
- a value the schema refuses, the program refuses, naming the key's path.

The first test derives from the schema, the second from the model: a drift on either side fails one.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from components.core.config import docs
from components.core.problems import Problem
from tests.schema_agreement_stack import (
    BASE,
    WEBHOOK,
    Secret,
    for_file,
    known_values,
    placements,
    program_problems,
    put,
    schema_accepts,
    secret_values,
    top_level_texts,
)
from tests.schema_agreement_values import (
    NS,
    Leaf,
    describe,
    model_values,
    schema_keys,
    schema_values,
    section_values,
)

LEAVES, SECTIONS = schema_keys()

# Rules between keys: key -> the keys its acceptance depends on (README rows, or aws:region). The program may
# refuse a value the schema accepts with a problem at the key or at one of these (or at a key listing it), and
# the key's schema description must name each of them.
CROSS_KEY: dict[str, tuple[str, ...]] = {
    "kubernetesVersion": ("versions.amiReleaseVersion", "versions.addons"),
    "versions.amiReleaseVersion": ("kubernetesVersion",),
    "versions.addons": ("kubernetesVersion",),
    "adminPrincipalArns": ("aws:region",),
    "jobPolicyArns": ("aws:region",),
    "publicAccessCidrs": ("deployerInVpc",),
    "gpuAvailabilityZone": ("aws:region",),
    "imageCache": ("aws:region",),
    # The system pods on the system nodes (components.core.system_nodes).
    "systemNodes": ("systemNodes.count", "systemNodes.instanceType", "observability", "jobs[].launcher",
                    "gpuPools[].fabricTest", "gpuPools[].maxNodes"),
    "gpuPools[].name": ("cpuPools[].name",),
    "gpuPools[].maxNodes": ("gpuPools[].minNodes",),
    "gpuPools[].desiredNodes": ("gpuPools[].minNodes", "gpuPools[].maxNodes"),
    "gpuPools[].capacityReservationId": ("gpuPools[].capacityType",),
    "gpuPools[].efa": ("gpuPools[].instanceType",),
    "gpuPools[].placementGroup": ("gpuPools[].efa", "gpuPools[].capacityReservationId"),
    "gpuPools[].fabricTest": ("gpuPools[].efa", "gpuPools[].instanceType", "gpuPools[].maxNodes"),
    "gpuPools[].extraInstanceTypes": ("gpuPools[].capacityType", "gpuPools[].instanceType"),
    "cpuPools[].name": ("gpuPools[].name",),
    "cpuPools[].maxNodes": ("cpuPools[].minNodes",),
    "cpuPools[].extraInstanceTypes": ("cpuPools[].capacityType", "cpuPools[].instanceType"),
    "storage.fsx.throughputPerTiB": ("storage.fsx.deploymentType",),
    "storage.fsx.efaEnabled": ("storage.fsx.deploymentType",),
    "storage.fsx.metadataIops": ("storage.fsx.deploymentType",),
    "storage.fsx.backupRetentionDays": ("storage.fsx.deploymentType", "storage.s3Link"),
    "storage.fsx.finalBackupOnDelete": ("storage.fsx.deploymentType", "storage.s3Link"),
    "storage.checkpointPrefix": ("storage.datasetPrefix",),
    "storage.s3Link": ("teams",),
    "observability.enabled": ("teams[].monthlyBudgetUsd", "gpuPools[].remediation"),
    "gpuPools[].remediation": ("observability.enabled",),
    "observability.retentionDays": ("teams[].monthlyBudgetUsd",),
    "storage.retainOnDestroy": ("storage.bucketName",),
    "tags": ("gpuPools[].labels", "cpuPools[].labels"),
    "gpuPools[].labels": ("gpuPools[].efa",),
    "jobs[].name": ("gpuPools[].fabricTest",),
    "jobs[].pool": ("gpuPools[].name",),
    "jobs[].nodes": ("gpuPools[].maxNodes",),
    "jobs[].gpusPerNode": ("gpuPools[].instanceType",),
    "jobs[].model": ("jobs[].nodes", "gpuPools[].instanceType"),
    "jobs[].runPolicy.cleanPodPolicy": ("jobs[].launcher",),
    "jobs[].runPolicy.ttlSecondsAfterFinished": ("jobs[].launcher",),
    "jobs[].runPolicy.backoffLimit": ("jobs[].launcher",),
    "jobs[].maxRestarts": ("jobs[].launcher",),
    "jobs[].maxCostUsd": ("jobs[].nodes", "prices"),
    "jobs[].framework": ("jobs[].launcher",),
    "jobs[].psReplicas": ("jobs[].launcher", "cpuPools[].maxNodes"),
    "jobs[].psPool": ("jobs[].launcher", "cpuPools[].name"),
    "jobs[].psPort": ("jobs[].launcher",),
    "jobs[].terminationGracePeriodSeconds": ("gpuPools[].capacityType",),
    "jobs[].team": ("teams[].name",),
    "gpuPools[].atomicScaleUp": ("gpuPools[].topology", "gpuPools[].instanceType", "gpuPools[].minNodes",
                                 "gpuPools[].maxNodes"),
    "jobs[].placement": ("gpuPools[].topology", "gpuPools[].instanceType"),
    "jobs[].placement.layer": ("jobs[].placement.policy", "gpuPools[].instanceType"),
    "jobs[].priorityClass": ("jobs[].team", "teams[].priorityClasses"),
    # The teams as a whole: their guarantees on a pool fit in it (a problem at `teams`).
    "teams": ("gpuPools[].maxNodes",),
    "teams[].name": ("trainingNamespace",),
    "teams[].members": ("adminPrincipalArns",),
    "teams[].pools.<pool>": ("gpuPools[].name",),
    "teams[].pools.<pool>.guaranteedGpus": ("teams[].pools.<pool>.guaranteedShare", "gpuPools[].instanceType"),
    "teams[].pools.<pool>.guaranteedShare": ("teams[].pools.<pool>.guaranteedGpus", "gpuPools[].maxNodes"),
    "teams[].pools.<pool>.borrowLimitGpus": ("gpuPools[].instanceType",),
    "teams[].pools.<pool>.lendLimitGpus": ("teams[].pools.<pool>.guaranteedGpus", "teams[].pools.<pool>.guaranteedShare",
                                           "gpuPools[].maxNodes", "gpuPools[].instanceType"),
    # A fleet's two sides (components.core.config.cluster): a manager lists workers, a worker names its manager.
    "fleet": ("fleet.workers", "fleet.manager"),
    "fleet.role": ("fleet.workers", "fleet.manager"),
    "fleet.manager": ("fleet.role",),
}
# Rules of one value that no JSON Schema pattern states exactly: key -> the words its description says them in.
VALUE_RULES: dict[str, tuple[str, ...]] = {
    # Host bits and the ranges of blocks wider than /32 (components.core.config.text.patterns.PUBLIC_CIDR).
    "publicAccessCidrs": ("public", "no host bits", "no repeats or overlaps"),
    # A file of the repository, and the ConfigMap's size.
    "jobs[].scripts": ("files of this repository", "no two of the same file name", "900 KiB"),
    # A secret's plaintext is the program's to see: the file holds ciphertext.
    "alertSlackWebhookUrl": ("Slack incoming webhook", "--secret"),
    # Two references to one stack name (`fleet-east`, `org/gpucluster/fleet-east`) are one worker listed twice.
    "fleet.workers[].stack": ("no two workers of one stack name",),
}

# Values neither derivation reaches that the rules turn on: reserved names and domains, host bits, repeats.
_IMAGE = "public.ecr.aws/deep-learning-containers/pytorch"
PROBES: dict[str, list[Any]] = {
    "trainingNamespace": ["kube-system", "kube-x", "default", "kubeflow", "kubeflowx", "mpi-operator", "team-a"],
    "jobs[].mountPath": ["/dev/shm", "/dev/shm/x", "/dev/shmx", "/opt", "/opt/", "/opt/gpucluster", "/opt/data",
                         "/opt/gpucluster/scripts/x", "/var//run", "/var/runx", "/fsx/../etc", "/./fsx", "//", "/fsx/",
                         "/data//x", "/...", "/.hidden", "/sys", "/usr/local/x", "/run/x", "/fsx x"],
    "storage.bucketName": ["xn--abc", "sthree-a", "amzn-s3-demo-x", "abc-s3alias", "abc--ol-s3", "a.mrap", "a..b",
                           "192.168.1.1", "999.1.1.1", "1.2.3", "ab", "a" * 63, "a" * 64, "Abc", "my.bucket", "-ab",
                           "ab-", "my-bucket-1"],
    "network.cidr": ["10.0.0.0/16", "10.0.1.0/16", "10.0.16.0/20", "10.0.8.0/20", "10.0.128.0/17", "10.0.64.0/17",
                     "172.16.0.0/12", "172.31.0.0/16", "192.168.0.0/16", "100.64.0.0/16", "100.128.0.0/16",
                     "10.0.0.0/016", "10.0.0.0/255.255.0.0", "8.8.0.0/16", "10.0.0.0/21", "010.0.0.0/16"],
    "publicAccessCidrs": [["8.8.8.8"], [" 8.8.8.8 "], ["8.8.8.0/24"], ["8.8.8.8/24"], ["10.0.0.1"], ["192.0.2.1"],
                          ["100.64.0.1"], ["192.0.0.8"], ["192.0.0.170"], ["0.0.0.0/0"], ["1.0.0.0/8"],
                          ["1.2.3.4", "1.2.3.4/32"], ["1.2.3.0/24", "1.2.3.4"], ["224.0.0.1"], ["1.2.3.4/33"],
                          [f"1.2.3.{i}" for i in range(41)]],
    "adminPrincipalArns": [["arn:aws:iam::123456789012:role/Admin"], ["arn:aws:sts::210987654321:assumed-role/A/me"],
                           ["arn:aws-cn:iam::210987654321:role/x"], ["arn:aws:iam::210987654321:role/a/b/c"],
                           ["arn:aws:iam::210987654321:user/me"], ["arn:aws:iam::210987654321:group/g"],
                           ["arn:aws:iam::21098765432:role/x"], ["arn:aws:iam::210987654321:role/é"]],
    "jobPolicyArns": [["arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess"], ["arn:aws:iam::210987654321:policy/x/y"],
                      ["arn:aws-us-gov:iam::aws:policy/x"], ["arn:aws:iam::aws:role/x"],
                      [f"arn:aws:iam::aws:policy/p{i}" for i in range(11)]],
    "gpuPools[].labels": [{"gpucluster.io/pool": "x"}, {"a.gpucluster.io/x": "x"}, {"kubernetes.io/arch": "x"},
                          {"node.kubernetes.io/x": "y"}, {"kubelet.kubernetes.io/x": "y"}, {"x.k8s.io/y": "z"},
                          {"k8s.amazonaws.com/accelerator": "x"}, {"vpc.amazonaws.com/efa.present": "x"},
                          {"example.com/team": "a"}, {"team": ""}, {"team": "a b"}],
    "cpuPools[].labels": [{"example.com/team": "a"}, {"team": "a" * 63}, {"team": "a" * 64}],
    "jobs[].image": [f"{_IMAGE}:latest", _IMAGE, "Repo/train:1", f"repo@sha256:{'a' * 64}", f"repo@sha256:{'a' * 63}",
                     "localhost:5000/x:1", f"x:1@sha256:{'a' * 64}", f"{'a' * 256}:1", "repo:1.0", "repo:"],
    "jobs[].scripts": [["examples/train_synthetic.py"], ["/etc/passwd"], ["../x"], ["examples/"], ["README.md"],
                       ["examples//train_synthetic.py"]],
    "tags": [{"Name": "x"}, {"aws:x": "y"}, {"team": "a" * 256}, {"team": "a" * 257}, {"a" * 128: "x"},
             {"a" * 129: "x"}, {f"k{i}": "v" for i in range(60)}],
    "gpuAvailabilityZone": ["us-east-1a", "use1-az6", "us-west-2a", "us-gov-west-1a"],
    "jobs[].name": ["nccl-tests-h100", "llama-70b"],
    "versions.amiReleaseVersion": ["1.35.1-20250101", "1.34.1-20250101"],
    "storage.datasetPrefix": ["checkpoints/", "checkpoints/a/", "data/", "a/b/"],
    "jobs[].pool": ["h100", "ps", "nope"],
    "jobs[].psPool": ["ps", "h100"],
    "alertSlackWebhookUrl": [WEBHOOK, Secret("https://example.com/x"), Secret(WEBHOOK)],
}


# -- judging ----------------------------------------------------------------------------------------


ROWS = {leaf.key for leaf in LEAVES}
# Maps of sections, by where they are: teams[].pools -> <pool>.
MAPS = dict(re.match(r"(.+?)\.(<[^>]+>)", row).groups() for row in ROWS if ".<" in row)


def row_of(path: str) -> str:
    """A problem's key path as its README row (gpucluster:jobs[1].env.X -> jobs[].env,
    gpucluster:teams[0].pools.h100.lendLimitGpus -> teams[].pools.<pool>.lendLimitGpus), or as the section it
    is about (gpucluster:jobs[0].model -> jobs[].model)."""
    key = re.sub(r"\[\d+\]", "[]", path.removeprefix(NS))
    for where, entry in MAPS.items():
        key = re.sub(rf"^{re.escape(where)}\.[^.]+", f"{where}.{entry}", key)
    while key not in ROWS and not any(row.startswith(f"{key}.") for row in ROWS):
        shorter = re.sub(r"(\.[^.\[\]]+|\[\])$", "", key)
        if shorter == key:
            break
        key = shorter
    return key


def excused(leaf: Leaf, problem: Problem) -> bool:
    """Whether the program may refuse a value the schema accepts with `problem`: a rule between keys that
    CROSS_KEY lists (the problem at the key or the section holding it, or at a key depending on it), or a
    rule of the key's value that VALUE_RULES lists."""
    if re.match(r"is required(?! when| with)", problem.message):
        return False  # what JSON Schema's `required` says, not a rule between keys
    row = row_of(problem.path)
    if row == leaf.key or leaf.key.startswith((f"{row}.", f"{row}[].")) or row.startswith(f"{leaf.key}."):
        return row in CROSS_KEY or row in VALUE_RULES  # about the key, a section holding it, or a key of it
    return any(leaf.key == other or f"{leaf.key}.".startswith(f"{other}.") or other.startswith(f"{leaf.key}.")
               for other in CROSS_KEY.get(row, ())) or row in CROSS_KEY.get(leaf.key, ())


EXCUSES: list[str] | None = None  # set to a list to see what was excused


def names(problem: Problem, path: str) -> bool:
    return problem.path == path or problem.path.startswith((f"{path}.", f"{path}["))


@dataclass
class Verdicts:
    cases: int = 0  # (value, place) pairs judged
    excused: int = 0  # of them, refused by the program for a rule of CROSS_KEY or VALUE_RULES
    failures: list[str] = field(default_factory=list)


def agree(leaf: Leaf, values: list[Any], verdicts: Verdicts) -> None:
    for value in _unique(values):
        for n, (path, where) in enumerate(placements(leaf)):
            document = put(where, value)
            schema_ok = schema_accepts(document, where[0])
            if not schema_ok and n:
                break  # a value the schema refuses is refused for itself: its first place says it
            verdicts.cases += 1
            problems = program_problems(document, where[0])
            shown = f"{path} = {value!r}"[:160]
            if schema_ok and problems:
                if all(excused(leaf, p) for p in problems):
                    verdicts.excused += 1
                    if EXCUSES is not None:
                        EXCUSES.append(f"{shown}: " + "; ".join(str(p)[:150] for p in problems))
                else:
                    verdicts.failures.append(f"schema accepts, program refuses: {shown}: "
                                             + "; ".join(str(p)[:200] for p in problems))
            elif not schema_ok and not problems:
                verdicts.failures.append(f"program accepts, schema refuses: {shown}")
            elif not schema_ok and not any(names(p, path) for p in problems):
                verdicts.failures.append(f"both refuse, but the program not naming {path}: {shown}: "
                                         + "; ".join(str(p)[:200] for p in problems))


def _mark(value: Any) -> str:
    return json.dumps(for_file(value), sort_keys=True) + repr(value)[:1] + type(value).__name__


def _unique(values: list[Any]) -> list[Any]:
    seen, out = set(), []
    for value in values:
        mark = _mark(value)
        if mark not in seen:
            seen.add(mark)
            out.append(value)
    return out



# -- the tests ------------------------------------------------------------------------------------


def test_every_key_of_the_reference_has_cases():
    # A key added to the model without cases here fails: the walk covers the schema, whose keys are the rows.
    assert {leaf.key for leaf in LEAVES} == {key for key, *_ in docs.reference_rows()}
    assert all(placements(leaf) for leaf in LEAVES), [leaf.key for leaf in LEAVES if not placements(leaf)]


def test_the_base_stack_is_valid_to_both():
    for key in BASE:
        assert schema_accepts(BASE, key), key
    assert program_problems(BASE, "gpucluster:jobs") == []


def test_cross_key_rules_are_named_in_the_schema():
    known = {"aws:region"}  # every key and section a rule may name (a list of sections by its own key too)
    for leaf in LEAVES:
        parts = leaf.key.split(".")
        known |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
        known |= {".".join(parts[:i]).removesuffix("[]") for i in range(1, len(parts) + 1)}
    missing = []
    for key, others in CROSS_KEY.items():
        assert {key, *others} <= known, (key, others)
        text = describe(key)
        for other in others:
            if not _named(other, key, text):
                missing.append(f"{key}: description does not name {other}: {text!r}")
    for key, words in VALUE_RULES.items():
        missing += [f"{key}: description does not say {w!r}" for w in words if w not in describe(key)]
    assert missing == []


def _named(other: str, key: str, text: str) -> bool:
    """`other` as the description may name it: the full key, or relative to a shared section (`maxNodes` of
    another key of the same pool)."""
    if other in text or other.replace("[]", "") in text:
        return True
    section = other.rsplit(".", 1)[0] if "." in other else ""
    if section and key.startswith(section + "."):
        return re.search(rf"\b{re.escape(other.rsplit('.', 1)[1])}\b", text) is not None
    return False


@pytest.fixture(scope="module")
def verdicts():
    found = {"schema": Verdicts(), "model": Verdicts()}
    start = time.monotonic()
    for leaf in LEAVES:
        known = known_values(leaf)
        from_schema = schema_values(leaf.node)
        agree(leaf, from_schema, found["schema"])
        from_model = model_values(leaf.key, known) + PROBES.get(leaf.key, [])
        agree(leaf, from_model + top_level_texts(leaf, from_model) + secret_values(leaf), found["model"])
    for section in SECTIONS:
        agree(section, section_values(section), found["schema"])
    found["seconds"] = time.monotonic() - start
    return found


def test_what_the_schema_accepts_the_program_accepts_and_what_it_refuses_the_program_refuses(verdicts):
    found = verdicts["schema"]
    assert found.cases > 1000
    assert found.failures == [], "\n".join(found.failures[:80])


def test_what_the_program_accepts_the_schema_accepts_and_what_it_refuses_the_schema_refuses(verdicts):
    found = verdicts["model"]
    assert found.cases > 1000
    assert found.failures == [], "\n".join(found.failures[:80])
