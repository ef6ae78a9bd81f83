"""The config's documents: the editors' JSON Schema and the README's reference, generated from the one schema."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess

import jsonschema
import pytest
import yaml

from bootstrap import stackfile
from components.core.config import docs
from components.core.problems import ConfigError
from components.core.stack_config import parse as parse_stack
from tests.conftest import stack_raw

STACKS = ("dev", "prod", "fleet", "fleet-east", "fleet-west")


def stack_document(stack: str) -> dict:
    return yaml.safe_load(stackfile.stack_path(stack).read_text())


def _leaves(error: jsonschema.ValidationError):
    """The innermost errors: a top-level key is its value or a secret, so its own errors sit inside anyOf."""
    if not error.context:
        yield error
    for sub in error.context:
        yield from _leaves(sub)


def schema_problems(document: dict) -> list[str]:
    """Where the shipped schema file refuses `document`: `config.<key>...` paths, each once."""
    schema = json.loads(docs.SCHEMA_FILE.read_text())
    validator = jsonschema.Draft202012Validator(schema)
    return sorted({".".join(map(str, leaf.absolute_path))
                   for error in validator.iter_errors(document) for leaf in _leaves(error)})


def test_the_generated_files_are_up_to_date():
    # Fails after a change to the schema until `python -m components.core.config.docs --write` runs.
    assert docs.outdated() == []
    assert docs.main(["--check"]) == 0


def test_check_names_a_stale_readme_and_schema(tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{docs.BEGIN}\n| key | type |\n{docs.END}\n")
    schema = tmp_path / "stack.schema.json"
    assert docs.outdated(readme, schema) == [schema, readme]
    schema.write_text(docs.schema_text())
    readme.write_text(docs.readme_with_reference(readme.read_text()))
    assert docs.outdated(readme, schema) == []
    assert readme.read_text().startswith(f"# x\n\n{docs.BEGIN}\n| key | type | default | meaning |\n")


def test_a_readme_without_the_markers_is_an_error_not_a_rewrite():
    with pytest.raises(ValueError, match="lacks the markers"):
        docs.readme_with_reference("# README without a reference\n")


def test_the_schema_is_a_valid_2020_12_schema():
    schema = json.loads(docs.SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    # Every $ref resolves within the file.
    refs = set(re.findall(r'"\$ref": "#/\$defs/(\w+)"', docs.SCHEMA_FILE.read_text()))
    assert refs and refs <= set(schema["$defs"])


def test_the_schema_speaks_json_schema_not_pydantic():
    text = docs.SCHEMA_FILE.read_text()
    for keyword in ('"ge"', '"gt"', '"le"', '"lt"'):
        assert keyword not in text
    assert text.count('"title"') == 1  # the file's own, none of pydantic's generated ones
    schema = json.loads(text)
    count = schema["$defs"]["SystemNodesConfig"]["properties"]["count"]
    number, text = count["anyOf"]
    assert (number["minimum"], number["maximum"], count["default"]) == (1, 20, 2)
    assert text["type"] == "string"  # the engine's "2", which the program reads as 2


def schema_patterns(node=...) -> list[str]:
    """Every regular expression in the schema: `pattern` values and patternProperties keys."""
    node = json.loads(docs.SCHEMA_FILE.read_text()) if node is ... else node
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern":
                found.append(value)
            if key == "patternProperties":
                found += list(value)
            found += schema_patterns(value)
    elif isinstance(node, list):
        for item in node:
            found += schema_patterns(item)
    return found


def test_patterns_are_ones_editors_can_compile():
    # yaml-language-server evaluates patterns as JavaScript regular expressions:
    # no Python-only syntax (named groups (?P<...>), inline flags, \A, \Z).
    patterns = schema_patterns()
    assert len(patterns) >= 20
    for pattern in patterns:
        assert not re.search(r"\(\?P|\(\?[aiLmsux]|\\A|\\Z", pattern), pattern
    node = shutil.which("node")
    if node is not None:  # this machine and CI have Node.js; compile them as an editor would
        script = ("const ps = JSON.parse(require('fs').readFileSync(0, 'utf8')); const bad = [];"
                  "for (const p of ps) { try { new RegExp(p, 'u'); new RegExp(p); } catch (e) { bad.push(p); } }"
                  "console.log(JSON.stringify(bad));")
        out = subprocess.run([node, "-e", script], input=json.dumps(patterns), capture_output=True, text=True,
                             check=True)
        assert json.loads(out.stdout) == []


@pytest.mark.parametrize("stack", STACKS)
def test_each_shipped_stack_points_its_editor_at_the_schema(stack):
    first_line = stackfile.stack_path(stack).read_text().splitlines()[0]
    assert first_line == "# yaml-language-server: $schema=./components/core/config/stack.schema.json"
    target = stackfile.PROJECT_DIR / first_line.split("$schema=")[1]
    assert target.resolve() == docs.SCHEMA_FILE.resolve()


@pytest.mark.parametrize("stack", STACKS)
def test_each_shipped_stack_passes_the_schema(stack):
    assert schema_problems(stack_document(stack)) == []


# (where in the stack file, the value, the error's path in the schema)
BAD_VALUES = [
    (("gpucluster:systemNodes", "count"), 0, "config.gpucluster:systemNodes.count"),
    # The text of a number keeps its bounds.
    (("gpucluster:systemNodes", "count"), "0", "config.gpucluster:systemNodes.count"),
    (("gpucluster:jobs", 0, "maxCostUsd"), "0", "config.gpucluster:jobs.0.maxCostUsd"),
    (("gpucluster:systemNodes", "instanceType"), "m5.large", "config.gpucluster:systemNodes.instanceType"),
    (("gpucluster:kubernetesVersion",), 1.3, "config.gpucluster:kubernetesVersion"),
    (("gpucluster:network", "natGateways"), "double", "config.gpucluster:network.natGateways"),
    (("gpucluster:network", "cidrBlock"), "10.0.0.0/16", "config.gpucluster:network"),
    (("gpucluster:gpuPools", 0, "instanceType"), "p9.48xlarge", "config.gpucluster:gpuPools.0.instanceType"),
    (("gpucluster:gpuPools", 0, "maxNodes"), 451, "config.gpucluster:gpuPools.0.maxNodes"),
    (("gpucluster:storage", "fsx", "storageCapacityGiB"), 1300, "config.gpucluster:storage.fsx.storageCapacityGiB"),
    (("gpucluster:storage", "fsx", "throughputPerTiB"), 300, "config.gpucluster:storage.fsx.throughputPerTiB"),
    (("gpucluster:jobs", 0, "launcher"), "deepspeed", "config.gpucluster:jobs.0.launcher"),
    (("gpucluster:jobs", 0, "image"), "nvcr.io/nvidia/pytorch", "config.gpucluster:jobs.0.image"),
    (("gpucluster:paused",), "yes", "config.gpucluster:paused"),
    (("gpucluster:versions", "addons", "coredns"), "1.14.3", "config.gpucluster:versions.addons.coredns"),
    (("gpucluster:clusterNmae",), "typo", "config"),
]


def _set(document: dict, where: tuple, value) -> dict:
    out = copy.deepcopy(document)
    node = out["config"]
    for part in where[:-1]:
        node = node[part]
    node[where[-1]] = value
    return out


@pytest.mark.parametrize(("where", "value", "path"), BAD_VALUES, ids=lambda x: str(x))
def test_the_schema_and_the_program_both_refuse_a_bad_value(where, value, path):
    document = _set(stack_document("prod"), where, value)
    assert path in schema_problems(document)
    with pytest.raises(ConfigError):
        parse_stack(stackfile.with_plan_standins(stackfile_raw(document))[0], "gpucluster", "prod")


# The fleet's keys, on the example manager's and worker's stack files.
FLEET_BAD_VALUES = [
    ("fleet", ("gpucluster:fleet", "role"), "leader", "config.gpucluster:fleet.role"),
    ("fleet", ("gpucluster:fleet", "dispatcher"), "round-robin", "config.gpucluster:fleet.dispatcher"),
    ("fleet", ("gpucluster:fleet", "workerLostMinutes"), 0, "config.gpucluster:fleet.workerLostMinutes"),
    ("fleet", ("gpucluster:fleet", "tokenRotationHours"), 169, "config.gpucluster:fleet.tokenRotationHours"),
    ("fleet", ("gpucluster:fleet", "workers", 0, "stack"), "a/b/c/d", "config.gpucluster:fleet.workers.0.stack"),
    ("fleet", ("gpucluster:fleet", "data", "mode"), "mirrored", "config.gpucluster:fleet.data.mode"),
    ("fleet", ("gpucluster:fleet", "data", "bucketRegion"), "east", "config.gpucluster:fleet.data.bucketRegion"),
    ("fleet", ("gpucluster:fleet", "data", "datasetGiB"), -1, "config.gpucluster:fleet.data.datasetGiB"),
    ("fleet-east", ("gpucluster:fleet", "manager"), "fleet manager", "config.gpucluster:fleet.manager"),
]


@pytest.mark.parametrize(("stack", "where", "value", "path"), FLEET_BAD_VALUES, ids=lambda x: str(x))
def test_the_schema_and_the_program_both_refuse_a_bad_fleet_value(stack, where, value, path):
    document = _set(stack_document(stack), where, value)
    assert path in schema_problems(document)
    with pytest.raises(ConfigError) as err:
        parse_stack(stackfile.with_plan_standins(stackfile_raw(document))[0], "gpucluster", stack)
    assert any(p.path == path.removeprefix("config.").replace(".0.", "[0].") for p in err.value.problems)


def stackfile_raw(document: dict) -> dict[str, str]:
    """The engine's view of a stack file document (as stackfile.read_stack_config gives it)."""
    return {key: stackfile._as_engine_string(value) for key, value in document["config"].items()}


def test_the_engine_view_of_a_document_is_the_stack_files():
    # stackfile_raw above reads a document as the stack loader does.
    assert stackfile.with_plan_standins(stackfile_raw(stack_document("prod")))[0] == stack_raw("prod")


# Values the program accepts beyond their YAML type: the engine's strings (`pulumi config set`
# stores a top-level value as text, and decimals under --path), numbers where text is meant.
ACCEPTED = [
    (("gpucluster:paused",), "true"),
    (("gpucluster:storage", "retainOnDestroy"), "false"),
    (("gpucluster:systemNodes", "count"), "3"),
    (("gpucluster:storage", "fsx", "storageCapacityGiB"), "2400"),
    (("gpucluster:jobs", 0, "maxCostUsd"), "5.5"),
    (("gpucluster:prices",), {"g6e.xlarge": "1.9"}),
    (("gpucluster:tags",), {"costCenter": 1234}),
    (("gpucluster:jobs", 0, "env"), {"NCCL_NTHREADS": 4}),
    # A top-level key reaches the program as the text of its YAML value, and "" (or null) leaves it unset;
    # null leaves a nested key unset too.
    (("gpucluster:kubernetesVersion",), 1.35),
    (("gpucluster:trainingNamespace",), 123),
    (("gpucluster:clusterName",), ""),
    (("gpucluster:gpuAvailabilityZone",), None),
    (("gpucluster:jobs", 0, "maxCostUsd"), None),
]


@pytest.mark.parametrize(("where", "value"), ACCEPTED, ids=lambda x: str(x))
def test_what_the_program_accepts_the_schema_accepts(where, value):
    document = _set(stack_document("dev"), where, value)
    parse_stack(stackfile.with_plan_standins(stackfile_raw(document))[0], "gpucluster", "dev")
    assert schema_problems(document) == []


def test_a_secret_top_level_value_passes_the_schema():
    # `pulumi config set --secret gpucluster:clusterName x` writes ciphertext the engine decrypts.
    document = _set(stack_document("dev"), ("gpucluster:clusterName",), {"secure": "v1:abc"})
    assert schema_problems(document) == []
    document = _set(stack_document("dev"), ("gpucluster:clusterName",), {"secret": "v1:abc"})
    assert schema_problems(document) == ["config.gpucluster:clusterName"]


def test_the_slack_webhook_is_a_secret_to_the_schema_the_program_and_the_readme():
    # `pulumi config set --secret` writes ciphertext the CLI decrypts for the program; a URL in plain text is
    # refused by both, and the program says how to set it.
    url = "https://hooks.slack.com/services/T0/B0/abc"
    document = _set(stack_document("dev"), ("gpucluster:alertSlackWebhookUrl",), url)
    assert schema_problems(document) == ["config.gpucluster:alertSlackWebhookUrl"]
    with pytest.raises(ConfigError, match="stored in plain text.*pulumi config set --secret"):
        parse_stack(stackfile.with_plan_standins(stackfile_raw(document))[0], "gpucluster", "dev")
    document = _set(stack_document("dev"), ("gpucluster:alertSlackWebhookUrl",), {"secure": "v1:abc"})
    assert schema_problems(document) == []
    rows = {key: kind for key, kind, *_ in docs.reference_rows()}
    assert rows["alertSlackWebhookUrl"] == "secret (Slack webhook URL)"


def test_a_price_for_an_unknown_type_is_refused_by_both():
    document = _set(stack_document("dev"), ("gpucluster:prices",), {"nosuch.type": 1.9})
    assert schema_problems(document) == ["config.gpucluster:prices"]
    with pytest.raises(ConfigError):
        parse_stack(stackfile.with_plan_standins(stackfile_raw(document))[0], "gpucluster", "dev")


def test_the_providers_keys_pass_and_the_region_is_required():
    document = stack_document("dev")
    document["config"]["aws:profile"] = "training"
    document["config"]["kubernetes:enableServerSideApply"] = "true"
    assert schema_problems(document) == []
    del document["config"]["aws:region"]
    assert schema_problems(document) == ["config"]
    # A Pulumi ESC environment may provide it.
    document["environment"] = ["aws-us-east-1"]
    assert schema_problems(document) == []


def test_the_reference_has_a_row_per_key_with_its_type_and_default():
    rows = {key: (kind, default) for key, kind, default, _ in docs.reference_rows()}
    assert rows["kubernetesVersion"] == ("`1.32` \\| `1.33` \\| `1.34` \\| `1.35` \\| `1.36`", '`"1.35"`')
    assert rows["clusterName"] == ("EKS cluster name", "`gpucluster-<stack>`")
    assert rows["systemNodes.count"] == ("int 1-20", "`2`")
    assert rows["gpuPools[].maxNodes"] == ("int 1-450", "required")
    assert rows["jobs[].model.params"] == ("count (`70B`, `7e9`)", "required in `model`")
    assert rows["jobs[].model.mfu"] == ("number > 0, <= 1", "`0.4`")
    assert rows["storage.readTargetMBpsPerGpu"] == ("number >= 0", "`100`")
    assert rows["publicAccessCidrs"] == ("list of public CIDRs", "`[]`")
    assert rows["storage.fsx.throughputPerTiB"] == ("125 \\| 250 \\| 500 \\| 1000", "`250` (PERSISTENT_2 only)")
    # Sections are walked, not listed as rows of their own.
    assert "storage" not in rows and "storage.fsx" not in rows and "gpuPools" not in rows
    # Every key the schema has is a row (and nothing else is).
    schema = json.loads(docs.SCHEMA_FILE.read_text())
    top = {key.split(":", 1)[1] for key in schema["properties"]["config"]["properties"] if key.startswith("gpucluster:")}
    assert {key.split(".")[0].removesuffix("[]") for key in rows} == top


def test_pulumi_yaml_describes_no_config_of_its_own():
    # The contract is stack.py's alone; Pulumi.yaml's project-level defaults
    # would be a second description (the loader still merges them, as the CLI does).
    project = yaml.safe_load((stackfile.PROJECT_DIR / "Pulumi.yaml").read_text())
    assert "config" not in project
    assert stackfile.project_defaults() == {}


def test_project_level_defaults_are_merged_under_the_stack_as_the_cli_does(tmp_path):
    (tmp_path / "Pulumi.yaml").write_text("name: gpucluster\nruntime: python\nconfig:\n"
                                          "  trainingNamespace:\n    default: research\n  paused: false\n")
    (tmp_path / "Pulumi.x.yaml").write_text("config:\n  aws:region: us-west-2\n  gpucluster:paused: true\n")
    raw = stackfile.read_stack_config("x", tmp_path)
    assert raw == {"gpucluster:trainingNamespace": "research", "gpucluster:paused": "true",
                   "aws:region": "us-west-2"}
