"""The config's documents: the editors' JSON Schema and the README's reference, generated from the one schema."""

from __future__ import annotations

import copy
import json
import re

import jsonschema
import pytest
import yaml

from bootstrap import stackfile
from components.core.config import docs
from components.core.problems import ConfigError
from components.core.stack_config import parse as parse_stack
from tests.conftest import stack_raw

STACKS = ("dev", "prod")


def stack_document(stack: str) -> dict:
    return yaml.safe_load(stackfile.stack_path(stack).read_text())


def schema_problems(document: dict) -> list[str]:
    """Where the shipped schema file refuses `document`: `config.<key>...` paths."""
    schema = json.loads(docs.SCHEMA_FILE.read_text())
    validator = jsonschema.Draft202012Validator(schema)
    return sorted(".".join(map(str, error.absolute_path)) for error in validator.iter_errors(document))


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
    assert (count["minimum"], count["maximum"], count["default"]) == (1, 20, 2)


def test_patterns_are_ones_editors_can_compile():
    # yaml-language-server evaluates patterns as JavaScript regular expressions:
    # no Python-only syntax (named groups (?P<...>), inline flags, \A, \Z).
    patterns = re.findall(r'"pattern": "((?:[^"\\]|\\.)*)"', docs.SCHEMA_FILE.read_text())
    assert patterns
    for pattern in patterns:
        assert not re.search(r"\(\?P|\(\?[aiLmsux]|\\A|\\Z", pattern), pattern


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


def stackfile_raw(document: dict) -> dict[str, str]:
    """The engine's view of a stack file document (as stackfile.read_stack_config gives it)."""
    return {key: stackfile._as_engine_string(value) for key, value in document["config"].items()}


def test_the_engine_view_of_a_document_is_the_stack_files():
    # stackfile_raw above reads a document as the stack loader does.
    assert stackfile.with_plan_standins(stackfile_raw(stack_document("prod")))[0] == stack_raw("prod")


def test_top_level_booleans_may_be_the_strings_pulumi_config_set_writes():
    # `pulumi config set gpucluster:paused true` stores the string "true".
    document = _set(stack_document("dev"), ("gpucluster:paused",), "true")
    assert schema_problems(document) == []
    nested = _set(stack_document("dev"), ("gpucluster:storage", "retainOnDestroy"), "false")
    assert schema_problems(nested) == ["config.gpucluster:storage.retainOnDestroy"]


def test_the_providers_keys_pass_and_the_region_is_required():
    document = stack_document("dev")
    document["config"]["aws:profile"] = "training"
    document["config"]["kubernetes:enableServerSideApply"] = "true"
    assert schema_problems(document) == []
    del document["config"]["aws:region"]
    assert schema_problems(document) == ["config"]


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
