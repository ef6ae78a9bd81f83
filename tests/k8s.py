"""Validation of the Kubernetes objects the program emits.

Core kinds go through kubernetes-validate --strict for the cluster's
version; custom resources through jsonschema against the upstream CRDs
vendored in the repository (tests/upstream/SOURCES.yaml names each file's
tag and path), so a fresh clone validates everything.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = Path(__file__).resolve().parent / "upstream"
SOURCES = UPSTREAM / "SOURCES.yaml"
# The C loader where PyYAML has it: the Trainer CRDs are ~1 MB each.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def sources() -> list[dict[str, str]]:
    return yaml.load(SOURCES.read_text(), Loader=_Loader)


def crd_path(filename: str) -> Path:
    """The vendored copy of upstream CRD `filename` (e.g. kueue.x-k8s.io_clusterqueues.yaml)."""
    found = [ROOT / s["file"] for s in sources() if Path(s["file"]).name == filename]
    if not found:
        raise AssertionError(f"{filename} is not vendored: add it and its source to {SOURCES.relative_to(ROOT)}")
    return found[0]


def k8s_objects(recording) -> list[dict[str, Any]]:
    """Plain Kubernetes objects (not Helm releases, ConfigFiles or providers)."""
    from bootstrap.offline.plan_report import kubernetes_objects

    return kubernetes_objects(recording)


def validate_core(obj: dict[str, Any], version: str) -> None:
    """Raise if `obj` is not valid for Kubernetes `version` (strict: no unknown fields)."""
    kubernetes_validate.validate(obj, version, strict=True)


@functools.cache
def _crd(filename: str) -> dict[str, Any]:
    return yaml.load(crd_path(filename).read_bytes(), Loader=_Loader)


def crd_schema(filename: str, version: str) -> dict[str, Any]:
    """The openAPIV3Schema of `version` in the vendored CRD `filename`."""
    for v in _crd(filename)["spec"]["versions"]:
        if v["name"] == version:
            return v["schema"]["openAPIV3Schema"]
    raise AssertionError(f"{filename} has no version {version}")


def go_patterns(node: Any) -> Any:
    """The schema with Go (RE2) patterns Python's re refuses rewritten alike: `^(?i)x` -> `(?i)^x`."""
    if isinstance(node, dict):
        return {k: (v.replace("^(?i)", "(?i)^", 1) if k == "pattern" and isinstance(v, str) else go_patterns(v))
                for k, v in node.items()}
    if isinstance(node, list):
        return [go_patterns(v) for v in node]
    return node


@functools.cache
def _validator(filename: str, version: str) -> jsonschema.protocols.Validator:
    schema = go_patterns(crd_schema(filename, version))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def validate_custom(obj: dict[str, Any], filename: str) -> None:
    """Raise if `obj` is not valid against its apiVersion's schema in the vendored CRD `filename`."""
    version = obj["apiVersion"].split("/")[-1]
    _validator(filename, version).validate(obj)


def validate_all(objects: list[dict[str, Any]], version: str, crd_files: dict[str, str]) -> set[str]:
    """Validate each object (custom kinds against crd_files' vendored CRDs, the rest as core kinds of `version`,
    strict); the kinds seen."""
    kinds = set()
    for obj in objects:
        kinds.add(obj["kind"])
        if obj["kind"] in crd_files:
            validate_custom(obj, crd_files[obj["kind"]])
        else:
            validate_core(obj, version)
    return kinds
