"""Every Helm release the program installs: the pinned chart's own version, and values keys the chart has.

The charts' values.yaml and Chart.yaml at the pinned tags are vendored in
tests/upstream/charts (tests/upstream/SOURCES.yaml). A values key the chart
does not read is silently ignored by Helm, so a typo or a key renamed
upstream would otherwise pass every mock.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from components.core import versions
from tests import k8s
from tests.conftest import recording as shared_recording

CHARTS = k8s.UPSTREAM / "charts"

# chart name -> the pinned version (components/core/versions.py)
PINS = {
    "cluster-autoscaler": versions.CLUSTER_AUTOSCALER_CHART_VERSION,
    "kueue": versions.KUEUE_CHART_VERSION,
    "kubeflow-trainer": versions.TRAINER_CHART_VERSION,
    "nvidia-device-plugin": versions.NVIDIA_CHART_VERSION,
    "aws-efa-k8s-device-plugin": versions.EFA_CHART_VERSION,
    "kube-prometheus-stack": versions.KPS_CHART_VERSION,
    "dcgm-exporter": versions.DCGM_CHART_VERSION,
}


def chart_name(chart: str) -> str:
    """`oci://ghcr.io/kubeflow/charts/kubeflow-trainer` -> kubeflow-trainer."""
    return chart.rstrip("/").rsplit("/", 1)[-1]


def chart_file(name: str, version: str, filename: str) -> dict[str, Any]:
    path = CHARTS / f"{name}-{version}" / filename
    assert path.exists(), f"{path.relative_to(k8s.ROOT)} is not vendored (chart {name} {version})"
    return yaml.safe_load(path.read_text())


def unknown_keys(ours: Any, chart: Any, path: str = "") -> list[str]:
    """Key paths in `ours` the chart's defaults do not have.

    Below a key whose default is an empty mapping (nodeSelector: {},
    extraArgs: {}), a list or null, any keys are the user's to choose.
    """
    if not isinstance(ours, dict) or not isinstance(chart, dict) or not chart:
        return []
    found = []
    for key, value in ours.items():
        where = f"{path}.{key}" if path else key
        if key not in chart:
            found.append(where)
        else:
            found += unknown_keys(value, chart[key], where)
    return found


def test_unknown_keys_reads_nesting_and_free_form_maps():
    chart = {"image": {"tag": "", "repository": "x"}, "nodeSelector": {}, "tolerations": [], "rbac": None}
    ours = {"image": {"tag": "v1", "pullPolicy": "Always"}, "nodeSelector": {"a": "b"},
            "tolerations": [{"key": "k"}], "rbac": {"create": True}, "replicas": 2}
    assert unknown_keys(ours, chart) == ["image.pullPolicy", "replicas"]


@pytest.fixture(scope="module", params=["dev", "prod"])
def releases(request) -> list[dict[str, Any]]:

    recording = shared_recording(request.param)
    return [r.inputs for r in recording.of_type("kubernetes:helm.sh/v3:Release")]


def test_every_release_is_a_pinned_vendored_chart(releases, request):
    names = sorted(chart_name(r["chart"]) for r in releases)
    # prod has EFA pools and so installs every chart; dev's g6e.xlarge has no EFA, so no EFA plugin.
    expected = set(PINS) if request.node.callspec.params["releases"] == "prod" else set(PINS) - {
        "aws-efa-k8s-device-plugin"}
    assert names == sorted(expected)
    for release in releases:
        name = chart_name(release["chart"])
        assert release["version"] == PINS[name]
        meta = chart_file(name, release["version"], "Chart.yaml")
        assert (meta["name"], str(meta["version"])) == (name, PINS[name])


# Maps with non-empty defaults whose keys the chart's templates range over (any key is read).
FREE_FORM = {
    # templates/deployment.yaml at 9.59.0: `range $key, $value := .Values.extraArgs` -> --<key>=<value>
    "cluster-autoscaler": ("extraArgs",),
}
# Keys a chart's templates read that its values.yaml leaves out (each checked below against the
# vendored template that reads it).
TEMPLATE_ONLY = {
    "dcgm-exporter": {"customMetrics": "templates/metrics-configmap.yaml"},
}


# Maps a chart's template renders whole (`with .Values.<key>` then `toYaml .`): Kubernetes API objects rather
# than chart keys, so any field of their type may be set, whatever the default map holds. Each is checked
# against the vendored template that renders it, and what we set is validated as that API type.
# chart -> dotted key -> (template, where it lands in a Pod: "pod.securityContext", "container.<field>")
PASS_THROUGH = {
    "kubeflow-trainer": {"manager.securityContext": ("templates/manager/deployment.yaml", "container.securityContext")},
    "prometheus-node-exporter": {"securityContext": ("templates/daemonset.yaml", "pod.securityContext"),
                                 "containerSecurityContext": ("templates/daemonset.yaml", "container.securityContext")},
    "aws-efa-k8s-device-plugin": {"resources": ("templates/daemonset.yaml", "container.resources")},
}
# Where a subchart's values sit in its parent's (kube-prometheus-stack's dependencies, by name).
SUBCHART_OF = {"prometheus-node-exporter": ("kube-prometheus-stack", "prometheus-node-exporter")}


def test_pass_through_keys_are_rendered_whole_by_the_vendored_templates():
    for name, keys in PASS_THROUGH.items():
        (folder,) = CHARTS.glob(f"{name}-*")
        for key, (template, _) in keys.items():
            text = (folder / template).read_text()
            assert re.search(rf"with \.Values\.{re.escape(key)} \}}\}}\n[^\n]*\n[^\n]*toYaml \.", text), \
                f"{name} {template} does not render .Values.{key} whole"


def pod_with(where: str, value: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "i:1"}
    pod: dict[str, Any] = {"containers": [container]}
    scope, field = where.split(".")
    (pod if scope == "pod" else container)[field] = value
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": pod}


def test_pass_through_values_are_valid_api_objects(releases, request):
    checked = 0
    for release in releases:
        name = chart_name(release["chart"])
        tables = [(release["values"], PASS_THROUGH.get(name, {}))]
        tables += [(release["values"].get(key, {}), PASS_THROUGH.get(sub, {}))
                   for sub, (parent, key) in SUBCHART_OF.items() if parent == name]
        for values, keys in tables:
            for key, (_, where) in keys.items():
                value = values
                for part in key.split("."):
                    value = value.get(part, {})
                if value:
                    k8s.validate_core(pod_with(where, value), "1.35")
                    checked += 1
    # The Trainer manager's and node-exporter's two security contexts; prod's EFA plugin resources too.
    assert checked == (4 if request.node.callspec.params["releases"] == "prod" else 3)


def test_template_only_keys_are_read_by_the_vendored_templates():
    for name, keys in TEMPLATE_ONLY.items():
        for key, template in keys.items():
            text = (CHARTS / f"{name}-{PINS[name]}" / template).read_text()
            assert f".Values.{key}" in text, f"{name} {template} does not read .Values.{key}"


def merged(base: Any, over: Any) -> Any:
    """`over` on top of `base`, mappings merged key by key (as Helm merges a parent's values into a subchart's)."""
    if isinstance(base, dict) and isinstance(over, dict):
        return {**base, **{key: merged(base.get(key), value) for key, value in over.items()}}
    return over if over is not None else base


def chart_defaults(name: str, version: str, ours: dict[str, Any] | None = None,
                   pass_through: bool = True) -> dict[str, Any]:
    """The values a chart reads: its values.yaml, each dependency's under its name (or alias), merged.

    A dependency whose key `ours` sets must be vendored too: its keys are checked like the chart's.
    `pass_through`: the PASS_THROUGH maps emptied (any key of their API type is the chart's), for the
    key check; False keeps the chart's defaults there, for what Helm would render.
    """
    defaults = chart_file(name, version, "values.yaml")
    for dependency in chart_file(name, version, "Chart.yaml").get("dependencies") or ():
        key = dependency.get("alias") or dependency["name"]
        folder = CHARTS / f"{dependency['name']}-{dependency['version']}"
        if ours is not None and key in ours:
            assert folder.exists(), f"our values set {key}: vendor {folder.relative_to(k8s.ROOT)}"
        if folder.exists():
            defaults[key] = merged(chart_defaults(dependency["name"], str(dependency["version"]),
                                                  pass_through=pass_through), defaults.get(key))
    for key in FREE_FORM.get(name, ()):
        defaults[key] = {}
    for key in TEMPLATE_ONLY.get(name, {}):
        defaults.setdefault(key, None)
    if pass_through:
        for key in PASS_THROUGH.get(name, {}):
            *parents, last = key.split(".")
            node = defaults
            for part in parents:
                node = node[part]
            node[last] = {}
    return defaults


def test_merged_keeps_the_subchart_s_nested_keys():
    assert merged({"a": {"x": 1, "y": 2}, "b": 1}, {"a": {"y": 3}}) == {"a": {"x": 1, "y": 3}, "b": 1}


def test_a_dependency_s_values_are_read_under_its_name():
    defaults = chart_defaults("kubeflow-trainer", versions.TRAINER_CHART_VERSION)
    # trainer's own `jobset:` keys, and the jobset 0.12.0 chart's.
    assert {"install", "fullnameOverride", "image", "controller"} <= set(defaults["jobset"])


def test_release_values_are_keys_the_chart_reads(releases):
    unknown = {}
    for release in releases:
        name = chart_name(release["chart"])
        unknown[name] = unknown_keys(release["values"], chart_defaults(name, release["version"], release["values"]))
    assert unknown == {chart_name(r["chart"]): [] for r in releases}


def test_a_misspelt_key_is_caught(releases):
    (release,) = [r for r in releases if chart_name(r["chart"]) == "kueue"]
    values = {**release["values"], "controllerManger": {}}
    assert unknown_keys(values, chart_defaults("kueue", release["version"])) == ["controllerManger"]
