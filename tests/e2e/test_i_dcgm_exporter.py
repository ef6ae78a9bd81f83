"""dcgm-exporter is started reading our counters: proven on what helm renders and the DaemonSet controller makes.

The chart is the vendored copy of its templates that matter (tests/upstream/charts/dcgm-exporter-4.8.2: the
DaemonSet, the metrics ConfigMap, the helpers and values.yaml, byte-identical to NVIDIA/dcgm-exporter at
4.5.3-4.8.2): its module is not served by the Go module proxy. helm renders it with the values the stack
passes; the API server takes the DaemonSet and ConfigMap, and the pods the DaemonSet controller creates on
the GPU nodes are given `-f <file>` with that file mounted from the ConfigMap that holds our counters (KWOK
runs no exporter: what the exporter then reads is DCGM's business).
"""

from __future__ import annotations

import subprocess

import pytest
import yaml

from components.core.observability import prometheus_stack as ps
from local import build

from .conftest import ROOT

CHART = ROOT / "tests" / "upstream" / "charts" / "dcgm-exporter-4.8.2"


@pytest.mark.stack("dev")
def test_the_exporter_pods_read_our_counters_from_the_chart_s_configmap(cluster, tmp_path):
    local = cluster("dev")
    release = next(r for r in local.rendered.resources
                   if r["type"] == "kubernetes:helm.sh/v3:Release" and r["inputs"]["chart"] == "dcgm-exporter")
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(release["inputs"]["values"]))
    out = subprocess.run([str(build.binary("helm")), "template", "dcgm-exporter", str(CHART), "--namespace",
                          "monitoring", "--values", str(values)], capture_output=True, text=True, check=True).stdout
    objects = [o for o in yaml.safe_load_all(out) if o]
    for obj in objects:
        obj["metadata"]["namespace"] = "monitoring"
    configmap = next(o for o in objects if o["kind"] == "ConfigMap")
    # The chart's own templates/serviceaccount.yaml is not among the vendored files; the pods name it.
    account = {"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": "dcgm-exporter", "namespace": "monitoring"}}
    local.apply([account, *objects], "dcgm-exporter as helm renders it")

    gpu_nodes = local.get("nodes", selector="gpucluster.io/pool=dev")["items"]
    pods = local.wait(lambda: len(p := [p for p in local.pods("monitoring", "app.kubernetes.io/name=dcgm-exporter")
                                        if p["status"].get("phase") == "Running"]) == len(gpu_nodes) and p,
                      "a dcgm-exporter pod on every GPU node")
    container = pods[0]["spec"]["containers"][0]
    assert container["args"] == ["-f", ps.DCGM_COUNTERS_FILE]
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == ps.DCGM_COUNTERS_FILE)
    volume = next(v for v in pods[0]["spec"]["volumes"] if v["name"] == mount["name"])
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]
    item = next(i for i in volume["configMap"]["items"] if i["path"] == mount["subPath"])
    served = local.get("configmaps", configmap["metadata"]["name"], "monitoring")["data"][item["key"]]
    rows = [line.split(",")[0].strip() for line in served.splitlines() if line.strip() and not line.startswith("#")]
    assert {"DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"} <= set(rows)
