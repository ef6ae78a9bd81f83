"""A custom resource registered with every top-level field it has.

pulumi-kubernetes' CustomResource takes apiVersion, kind, metadata and spec
only; a WorkloadPriorityClass keeps `value` and `description` at the top
level, so it would be sent without them. The provider accepts any object
under the type token kubernetes:<apiVersion>:<kind>, which is what
CustomResource registers too.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s


class KubernetesObject(pulumi.CustomResource):
    def __init__(self, resource_name: str, obj: dict[str, Any], opts: pulumi.ResourceOptions | None = None):
        # The same provider plugin version as pulumi-kubernetes' own resources.
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=k8s._utilities.get_version()))
        super().__init__(f"kubernetes:{obj['apiVersion']}:{obj['kind']}", resource_name, dict(obj), opts)
