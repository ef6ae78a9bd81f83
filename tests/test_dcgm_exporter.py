"""dcgm-exporter reads our counters: the pinned chart's templates, read, against the values we give it.

The chart (tests/upstream/charts/dcgm-exporter-4.8.2, NVIDIA/dcgm-exporter at 4.5.3-4.8.2) writes
`customMetrics` into a ConfigMap of a fixed name (templates/metrics-configmap.yaml) and hands the
exporter's pod `arguments`, `extraConfigMapVolumes` and `extraVolumeMounts` as they are
(templates/daemonset.yaml). Our counters are collected only if the `-f` file in our arguments is where
a volume of ours mounts that ConfigMap's key. These tests follow that chain offline; a Helm render of
the chart is the e2e tier's.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import PurePosixPath
from typing import Any

import yaml

from components.core import versions
from components.core.observability import prometheus_stack as ps
from tests import k8s

CHART = k8s.UPSTREAM / "charts" / f"dcgm-exporter-{versions.DCGM_CHART_VERSION}"
# The files the image ships in /etc/dcgm-exporter (docker/Dockerfile: COPY etc /etc/dcgm-exporter; etc/ at the tag).
IMAGE_COUNTER_FILES = {"default-counters.csv", "dcp-metrics-included.csv", "1.x-compatibility-metrics.csv"}


def template(name: str) -> str:
    return (CHART / "templates" / name).read_text()


def chart_values() -> dict[str, Any]:
    return yaml.safe_load((CHART / "values.yaml").read_text())


def effective(ours: dict[str, Any]) -> dict[str, Any]:
    """What the chart reads: its defaults with ours over them (Helm replaces a list; the keys here are top-level)."""
    return {**chart_values(), **ours}


def metrics_configmap(values: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """templates/metrics-configmap.yaml's name and, rendered as Helm would, its data when customMetrics is set."""
    text = template("metrics-configmap.yaml")
    (name,) = re.findall(r"^  name: ([\w.-]+)$", text, re.MULTILINE)
    branch = re.search(r"^data:\n\{\{- if \.Values\.customMetrics \}\}\n  (\w+): \|\n"
                       r"\{\{- \.Values\.customMetrics \| nindent (\d+) \}\}\n\{\{- else \}\}", text, re.MULTILINE)
    assert branch, "templates/metrics-configmap.yaml no longer writes customMetrics as it did"
    key, pad = branch[1], " " * int(branch[2])
    # `{{-` eats the newline after `|`; sprig's nindent is a newline, then every line padded.
    rendered = f"data:\n  {key}: |" + "\n" + pad + values["customMetrics"].replace("\n", "\n" + pad)
    return name, yaml.safe_load(rendered)["data"]


def counters_file(arguments: list[str]) -> str | None:
    """The file the exporter reads its counters from: `-f` / `--collectors` (pkg/cmd/app.go at the tag)."""
    for i, arg in enumerate(arguments):
        if arg in ("-f", "--collectors", "-collectors") and i + 1 < len(arguments):
            return arguments[i + 1]
        if arg.startswith(("-f=", "--collectors=", "-collectors=")):
            return arg.split("=", 1)[1]
    return None


def mounted_at(values: dict[str, Any], path: str) -> tuple[str, str] | None:
    """(ConfigMap, key) that extraConfigMapVolumes and extraVolumeMounts put at `path` in the exporter, if any."""
    volumes = {v["name"]: v for v in values.get("extraConfigMapVolumes") or ()}
    for mount in values.get("extraVolumeMounts") or ():
        config_map = volumes.get(mount["name"], {}).get("configMap")
        if not config_map:
            continue
        items = config_map.get("items")  # without items, every key is a file of its own name
        files = {item["path"]: item["key"] for item in items} if items else None
        if "subPath" in mount:
            if mount["mountPath"] != path:
                continue
            file = mount["subPath"]
        else:
            if PurePosixPath(path).parent != PurePosixPath(mount["mountPath"]):
                continue
            file = PurePosixPath(path).name
        key = files.get(file) if files is not None else file
        if key:
            return config_map["name"], key
    return None


# -- the chart's templates --------------------------------------------------------------------------------


def test_the_exporter_s_args_are_the_arguments_value_alone():
    text = template("daemonset.yaml")
    containers = text.split("      containers:\n", 1)[1]
    assert re.findall(r"^      - name: (\S+)", containers, re.MULTILINE) == ["exporter"]  # one container
    block = re.search(r"^        args:\n(.*?)^        env:\n", text, re.MULTILINE | re.DOTALL)[1]
    ranged = re.match(r"        \{\{- range \$\.Values\.arguments \}\}\n        - \{\{ \. \}\}\n        \{\{- end \}\}\n",
                      block)
    assert ranged, "templates/daemonset.yaml no longer passes .Values.arguments as the args"
    # The rest is the debug dump's flags, off unless debugDump.enabled.
    rest = block[ranged.end():]
    assert rest.startswith("        {{- if .Values.debugDump.enabled }}") and "collectors" not in rest
    assert not re.search(r"\"-f", rest)
    # Nor does the template set the flag's environment variable.
    assert "DCGM_EXPORTER_COLLECTORS" not in text
    values = ps.dcgm_values()
    assert not effective(values)["debugDump"]["enabled"]
    assert "DCGM_EXPORTER_COLLECTORS" not in str(values.get("extraEnv"))
    # `- {{ . }}` is unquoted: each argument must come back from YAML as the string we gave.
    assert yaml.safe_load("\n".join(f"- {arg}" for arg in values["arguments"])) == values["arguments"]


def test_the_daemonset_renders_our_volumes_mounts_and_annotations_whole():
    text = template("daemonset.yaml")
    volumes = re.search(r"\{\{- with \.Values\.extraConfigMapVolumes \}\}\n\s*\{\{- toYaml \. \| nindent 6 \}\}", text)
    mounts = re.search(r"\{\{- if \.Values\.extraVolumeMounts \}\}\n\s*\{\{- toYaml \.Values\.extraVolumeMounts "
                       r"\| nindent 8 \}\}", text)
    annotations = re.search(r"\{\{- if \.Values\.podAnnotations \}\}\n\s*annotations:\n"
                            r"\s*\{\{- toYaml \.Values\.podAnnotations \| nindent 8 \}\}", text)
    assert volumes and mounts and annotations
    # ...each where it belongs: the pod's volumes, the exporter's mounts, the pod template's metadata.
    assert text.index("      volumes:\n") < volumes.start() < text.index("      containers:\n")
    assert text.index("        volumeMounts:\n") < mounts.start() < text.index("        livenessProbe:\n")
    assert text.index("  template:\n    metadata:\n") < annotations.start() < text.index("    spec:\n      {{")
    # Nothing else in the pod mounts the metrics ConfigMap.
    name, _ = metrics_configmap(ps.dcgm_values())
    assert name not in text


# -- our values ------------------------------------------------------------------------------------------


def test_the_exporter_reads_our_counters_from_the_chart_s_configmap():
    values = ps.dcgm_values()
    name, data = metrics_configmap(values)
    (key,) = data
    assert (name, key) == (ps.DCGM_COUNTERS_CONFIGMAP, ps.DCGM_COUNTERS_KEY)
    # Our values alone name the file and mount it, whatever the chart's defaults are.
    path = counters_file(values.get("arguments") or [])
    assert path == ps.DCGM_COUNTERS_FILE, f"our arguments read {path!r}, not our counters file"
    assert mounted_at(values, path) == (name, key)
    assert mounted_at(effective(values), counters_file(effective(values)["arguments"])) == (name, key)
    # The ConfigMap holds our list, and it reads back as the exporter reads it: field, type, help.
    assert data[key] == ps.dcgm_counters_csv()
    rows = [tuple(part.strip() for part in line.split(",", 2)) for line in data[key].splitlines()
            if line.strip() and not line.startswith("#")]
    assert rows == list(ps.DCGM_COUNTERS)
    assert {"DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"} <= {row[0] for row in rows}


def test_the_chart_s_own_mount_is_lost_to_any_list_we_set_so_we_set_them_all():
    defaults = chart_values()
    name, key = ps.DCGM_COUNTERS_CONFIGMAP, ps.DCGM_COUNTERS_KEY
    # As shipped, the ConfigMap is mounted over the image's own default-counters.csv, which -f reads...
    shipped = counters_file(defaults["arguments"])
    assert shipped == "/etc/dcgm-exporter/default-counters.csv"
    assert mounted_at(defaults, shipped) == (name, key)
    # ...until one list of ours replaces the default: then -f reads the image's file, without a word.
    assert mounted_at({**defaults, "extraVolumeMounts": [{"name": "tmp", "mountPath": "/tmp"}]}, shipped) is None
    # Ours is a file the image lacks: without the mount the exporter stops ("Could not read metrics file").
    assert PurePosixPath(ps.DCGM_COUNTERS_FILE).name not in IMAGE_COUNTER_FILES
    assert PurePosixPath(ps.DCGM_COUNTERS_FILE).parent == PurePosixPath(shipped).parent


def test_the_exporter_s_pod_is_valid_with_our_args_volume_and_mount():
    values = ps.dcgm_values()
    kubelet = {"name": "pod-gpu-resources", "hostPath": {"path": "/var/lib/kubelet/pod-resources"}}
    container = {"name": "exporter", "image": "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless",
                 "args": values["arguments"],
                 "volumeMounts": [{"name": kubelet["name"], "readOnly": True,
                                   "mountPath": "/var/lib/kubelet/pod-resources"}, *values["extraVolumeMounts"]]}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "dcgm-exporter", "annotations": values["podAnnotations"]},
           "spec": {"volumes": [kubelet, *values["extraConfigMapVolumes"]], "containers": [container]}}
    k8s.validate_core(pod, "1.35")
    assert all(m["readOnly"] for m in values["extraVolumeMounts"])


def test_a_new_counter_list_rolls_the_exporter_pods():
    # A subPath mount never sees the ConfigMap change: the list's hash on the pod template does.
    values = ps.dcgm_values()
    assert values["podAnnotations"] == {
        ps.DCGM_COUNTERS_ANNOTATION: hashlib.sha256(values["customMetrics"].encode()).hexdigest()}
    assert "subPath" in values["extraVolumeMounts"][0]
