"""Kubernetes helpers the components share: whole custom objects, a chart in its own namespace."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s


class KubernetesObject(pulumi.CustomResource):
    """A custom resource registered with every top-level field it has.

    pulumi-kubernetes' CustomResource takes apiVersion, kind, metadata and
    spec only; a WorkloadPriorityClass keeps `value` and `description` at
    the top level, so it would be sent without them. The provider accepts
    any object under the type token kubernetes:<apiVersion>:<kind>, which is
    what CustomResource registers too.
    """

    def __init__(self, resource_name: str, obj: dict[str, Any], opts: pulumi.ResourceOptions | None = None):
        # The same provider plugin version as pulumi-kubernetes' own resources.
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=k8s._utilities.get_version()))
        super().__init__(f"kubernetes:{obj['apiVersion']}:{obj['kind']}", resource_name, dict(obj), opts)


def release_in_own_namespace(name: str, release_name: str, chart: str, version: str, namespace: str,
                             values: dict[str, Any], provider: k8s.Provider, parent: pulumi.Resource,
                             depends_on: Sequence[pulumi.Resource] = ()) -> k8s.helm.v3.Release:
    """A pinned Helm release in a namespace Pulumi owns (`{name}-ns`, `{name}`).

    The namespace is ours rather than the chart's create_namespace, so on
    destroy the release goes first and the namespace after it.
    """
    ns = k8s.core.v1.Namespace(
        f"{name}-ns", metadata={"name": namespace, "labels": {"app.kubernetes.io/part-of": "gpucluster"}},
        opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=list(depends_on)))
    return k8s.helm.v3.Release(
        name, name=release_name, chart=chart, version=version, namespace=namespace, values=values,
        opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=[ns, *depends_on]))
