"""Validation of the Kubernetes objects the program emits.

Core kinds go through kubernetes-validate --strict for the cluster's
version; custom resources through jsonschema against the upstream CRD
schemas in ../shared/schemas.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

SCHEMAS = Path(__file__).resolve().parent.parent.parent / "shared" / "schemas"


def k8s_objects(recording) -> list[dict[str, Any]]:
    """Plain Kubernetes objects (not Helm releases, ConfigFiles or providers)."""
    from bootstrap.offline.plan_report import kubernetes_objects

    return kubernetes_objects(recording)


def validate_core(obj: dict[str, Any], version: str) -> None:
    """Raise if `obj` is not valid for Kubernetes `version` (strict: no unknown fields)."""
    kubernetes_validate.validate(obj, version, strict=True)


def crd_schema(filename: str, version: str) -> dict[str, Any]:
    path = SCHEMAS / filename
    if not path.exists():
        pytest.skip(f"{path} not present: upstream CRD schemas are shipped in shared/schemas")
    crd = yaml.safe_load(path.read_text())
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            return v["schema"]["openAPIV3Schema"]
    raise AssertionError(f"{filename} has no version {version}")


def validate_custom(obj: dict[str, Any], filename: str) -> None:
    version = obj["apiVersion"].split("/")[-1]
    jsonschema.validate(obj, crd_schema(filename, version))
