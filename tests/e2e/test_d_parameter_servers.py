"""d. The parameter-server JobSet through the real JobSet and Kueue: the parameter servers run before the chief is
created, and every TF_CONFIG address is a real pod's hostname and subdomain.

Neither shipped stack has a CPU pool, so this is prod with one added (the overrides tests/test_parameter_server.py
uses): its KWOK nodes, its ResourceFlavor and the ClusterQueue with its quota, all as the program renders them.
"""

from __future__ import annotations

import json

import pytest

from bootstrap import stackfile
from bootstrap.jobs import render
from components.core import versions
from components.core.kube import queueing
from components.core.teams import queues as team_queues
from local import controlplane, nodes

from .test_b_gangs import NAMESPACE, running, workload_of

CPU_POOL = {"name": "ps", "instanceType": "m7i.4xlarge", "maxNodes": 2}
PS_JOB = {"name": "tf-ps", "pool": "h100", "nodes": 2, "launcher": "ps", "psPool": "ps", "psReplicas": 2,
          "image": versions.DLC_PYTORCH_IMAGE, "command": ["python", "train.py"], "maxRestarts": 2,
          "startOnUp": False}


def _env(pod: dict) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env", [])}


@pytest.mark.stack("prod")
def test_parameter_servers_start_before_the_chief_and_tf_config_names_real_pods(cluster):
    local = cluster("prod")
    overrides = {"gpucluster:cpuPools": [CPU_POOL], "gpucluster:jobs": [PS_JOB]}
    cfg, _, _ = stackfile.load_stack("prod", standins=True, overrides=overrides)
    zone = local.rendered.report["gpuAvailabilityZone"]
    zone_id = next(z["zoneId"] for z in local.rendered.report["zones"] if z["name"] == zone)
    ps_nodes = [n for n in nodes.nodes(cfg, zone, zone_id, local.rendered.cluster_name,
                                       kubelet_port=controlplane.PORTS.kwok)
                if n["metadata"]["labels"].get("gpucluster.io/pool") == "ps"]
    assert len(ps_nodes) == 2
    pools = [*cfg.gpu_pools, *cfg.cpu_pools]
    # The training namespace's queue as the program renders it with prod's teams: in the cohort, with the
    # teams' guarantees taken out (a plain queue would take it out of the cohort for the tests after this one).
    queue = (team_queues.training_cluster_queue(pools, cfg.system_nodes, cfg.training_namespace, cfg.teams,
                                                cfg.stop_policy) if cfg.teams
             else queueing.cluster_queue(pools, cfg.system_nodes, cfg.training_namespace, cfg.stop_policy))
    local.apply([*ps_nodes, *queueing.resource_flavors(pools), queue], "the CPU pool's nodes, flavor and quota")
    manifest = render.build(cfg, 0, from_file=False).manifest
    assert manifest["kind"] == "JobSet"
    local.kubectl("create", "-f", "-", stdin=json.dumps(manifest))

    selector = "jobset.sigs.k8s.io/jobset-name=tf-ps"
    local.wait(lambda: workload_of(local, "JobSet", "tf-ps"), "the JobSet's workload")
    ps = local.wait(lambda: len(p := [x for x in running(local.pods(NAMESPACE, selector))
                                      if x["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == "ps"])
                    == 2 and p, "both parameter servers to run", timeout=120)
    chief = local.wait(lambda: [x for x in local.pods(NAMESPACE, selector)
                                if x["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == "chief"],
                       "the chief", timeout=120)
    gang = [x for x in local.pods(NAMESPACE, selector)
            if x["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] in ("ps", "worker")]
    assert len(gang) == 4
    ready = max(c["lastTransitionTime"] for p in gang for c in p["status"]["conditions"] if c["type"] == "Ready")
    assert chief[0]["metadata"]["creationTimestamp"] >= ready  # created once every ps and worker is ready
    # Its first contact, in an init container of the chief's own pod network, names every ps and worker.
    (init,) = chief[0]["spec"]["initContainers"]
    assert init["name"] == "first-contact" and "tf-ps-worker-0-1.tf-ps.training.svc:12345" in init["command"][2]
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in local.get("nodes")["items"]}
    assert {labels[p["spec"]["nodeName"]]["gpucluster.io/pool"] for p in ps} == {"ps"}

    pods = local.wait(lambda: len(p := running(local.pods(NAMESPACE, selector))) == 5 and p,
                      "ps, workers and chief to run", timeout=120)
    by_host = {(p["spec"].get("hostname"), p["spec"].get("subdomain")): p for p in pods}
    env = _env(chief[0])
    tf_config = json.loads(env["TF_CONFIG"].replace("$(GPUCLUSTER_TASK_INDEX)", "0"))
    addresses = [a for role in tf_config["cluster"].values() for a in role]
    assert len(addresses) == 5
    for address in addresses:
        host, port = address.rsplit(":", 1)
        hostname, subdomain = host.split(".")[:2]
        assert (hostname, subdomain) in by_host, (address, sorted(by_host))
        assert port == "12345"
    local.kubectl("delete", "jobset", "tf-ps", "-n", NAMESPACE)
