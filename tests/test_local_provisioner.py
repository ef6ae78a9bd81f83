"""The local stand-in for cluster-autoscaler's ProvisioningRequest processing, and the network shape of KWOK nodes.

Offline: the pure rules (local/autoscaler/rules.py), and the controller's passes
(local/autoscaler/provisioner.py) against an in-memory API. What the real Kueue does with
them is the e2e tier's.
"""

from __future__ import annotations

import copy
import datetime
import re
from collections import Counter
from decimal import Decimal
from typing import Any

import pytest

from local import nodes
from local.autoscaler import provisioner
from local.autoscaler import rules as ca
from tests.conftest import stack_config

LAYER = "topology.k8s.aws/network-node-layer-{}"
NOW = datetime.datetime(2026, 9, 1, 12, 0, 0, tzinfo=datetime.UTC)


def _pool_nodes(stack: str, pool: str, counts: dict[str, int] | None = None) -> list[dict]:
    cfg = stack_config(stack)
    return [n for n in nodes.nodes(cfg, "us-east-1a", "use1-az6", f"gpucluster-{stack}", counts)
            if n["metadata"]["labels"][nodes.NODEGROUP_LABEL] == f"gpucluster-{stack}-{pool}"]


# -- network shape ----------------------------------------------------------------------------------------------------

def test_prod_s_16_h100_nodes_sit_in_one_layer_1_node_2_spines_and_4_blocks_of_4():
    h100 = _pool_nodes("prod", "h100")
    assert len(h100) == 16
    by_layer = [Counter(n["metadata"]["labels"][LAYER.format(layer)] for n in h100) for layer in (1, 2, 3)]
    assert [sorted(c.values()) for c in by_layer] == [[16], [8, 8], [4, 4, 4, 4]]
    for node in h100:
        for layer in (1, 2, 3):
            assert re.fullmatch(r"nn-[0-9a-f]{17}", node["metadata"]["labels"][LAYER.format(layer)])
    # Each block hangs off one spine: nodes 0-3 and 4-7 under the first, 8-11 and 12-15 under the second.
    spine_of_block = {}
    for node in h100:
        labels = node["metadata"]["labels"]
        assert spine_of_block.setdefault(labels[LAYER.format(3)], labels[LAYER.format(2)]) == labels[LAYER.format(2)]
    blocks = [h100[i]["metadata"]["labels"][LAYER.format(3)] for i in range(16)]
    assert blocks == [blocks[0]] * 4 + [blocks[4]] * 4 + [blocks[8]] * 4 + [blocks[12]] * 4
    assert h100[0]["metadata"]["labels"][LAYER.format(2)] == h100[7]["metadata"]["labels"][LAYER.format(2)] != \
        h100[8]["metadata"]["labels"][LAYER.format(2)]


def test_dev_s_two_nodes_share_one_block_and_the_ids_are_the_same_every_time():
    dev = _pool_nodes("dev", "dev")
    assert len({tuple(sorted(n["metadata"]["labels"].items())) for n in dev}) == 2  # hostnames differ
    assert len({n["metadata"]["labels"][LAYER.format(3)] for n in dev}) == 1
    assert nodes.network_labels("dev", "g6e.xlarge", 1) == {
        k: v for k, v in dev[1]["metadata"]["labels"].items() if k.startswith("topology.k8s.aws/network-node-layer-")}
    assert nodes.network_node_id("h100", 3, 0) == nodes.network_node_id("h100", 3, 0) != nodes.network_node_id("h100", 3, 1)
    assert nodes.network_node_id("h100", 3, 0) != nodes.network_node_id("a100", 3, 0)


def test_a_four_layer_type_has_its_blocks_at_layer_4_and_spines_at_layer_3():
    labels = [nodes.network_labels("b200", "p6-b200.48xlarge", i) for i in range(9)]
    assert set(labels[0]) == {LAYER.format(n) for n in (1, 2, 3, 4)}
    assert len({ls[LAYER.format(1)] for ls in labels}) == len({ls[LAYER.format(2)] for ls in labels}) == 1
    assert len({ls[LAYER.format(3)] for ls in labels}) == 2  # nodes 0-7, then 8
    assert len({ls[LAYER.format(4)] for ls in labels}) == 3  # 0-3, 4-7, 8
    assert nodes.network_labels("g5", "g5.48xlarge", 0) == {}


def test_a_node_made_later_at_an_index_has_that_index_s_name_and_labels_and_names_never_repeat():
    cfg = stack_config("prod")
    group_index, group = next((i, g) for i, g in enumerate(nodes.node_groups(cfg)) if g.name == "h100")
    later = nodes.node(cfg, group, group_index, 13, "us-east-1a", "use1-az6", "gpucluster-prod")
    assert later == _pool_nodes("prod", "h100")[13]
    assert nodes.node_index(later) == (group_index, 13)
    names = {nodes.node(cfg, g, gi, i, "us-east-1a", "use1-az6", "c")["metadata"]["name"]
             for gi, g in enumerate(nodes.node_groups(cfg)) for i in range(450)}
    assert len(names) == 450 * len(nodes.node_groups(cfg))


# -- the rules ---------------------------------------------------------------------------------------------------------

# What Kueue's provisioning check puts in a PodTemplate for an h100 worker: the pod set's template merged with the
# flavor's node labels (podset.Merge), requests from limits.
WORKER = {"nodeSelector": {"gpucluster.io/pool": "h100"},
          "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
          "containers": [{"name": "worker", "resources": {"requests": {
              "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32", "cpu": "90", "memory": "900Gi"}}}]}


def _model(stack: str, counts: dict[str, int], capacity: dict[str, int]) -> tuple[list, list]:
    spec = {"stack": stack, "zone": "us-east-1a", "zoneId": "use1-az6", "clusterName": f"gpucluster-{stack}",
            "kubeletPort": 10250}
    p = provisioner.Provisioner(None, spec, api=object(), cfg=stack_config(stack))
    cfg = stack_config(stack)
    return p.model(nodes.nodes(cfg, "us-east-1a", "use1-az6", f"gpucluster-{stack}", counts), [], capacity)


def test_a_pod_s_requests_are_its_containers_or_its_largest_init_container_and_overhead():
    spec = {"containers": [{"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
                           {"resources": {"requests": {"cpu": "1"}}}],
            "initContainers": [{"resources": {"requests": {"cpu": "4", "memory": "512Mi"}}}],
            "overhead": {"cpu": "100m"}}
    assert ca.pod_requests(spec) == {"cpu": Decimal("4.1"), "memory": Decimal(2**30), "pods": 1}


def test_a_4_node_job_fits_prod_s_free_h100_nodes_without_a_new_node():
    rooms, groups = _model("prod", {}, {})
    decision = ca.decide(ca.BEST_EFFORT_ATOMIC, ca.pods_of([(WORKER, 4)]), rooms, groups)
    assert (decision.provisioned, decision.on_existing, decision.new_nodes) == (True, 4, 0)
    assert ca.outcome(ca.BEST_EFFORT_ATOMIC, decision, {}) == (
        "Provisioned", "True", ("CapacityIsFound", "Capacity is found in the cluster"))


def test_with_no_h100_node_the_4_workers_need_4_new_nodes_of_the_h100_group_only():
    rooms, groups = _model("prod", {"h100": 0}, {})
    decision = ca.decide(ca.BEST_EFFORT_ATOMIC, ca.pods_of([(WORKER, 4)]), rooms, groups)
    assert (decision.provisioned, decision.group, decision.new_nodes, decision.on_existing) == (True, "h100", 4, 0)
    assert ca.outcome(ca.BEST_EFFORT_ATOMIC, decision, {}) == (
        "Provisioned", "True", ("CapacityIsProvisioned", "Capacity is found in the cluster"))


def test_capacity_for_3_of_4_nodes_asks_for_none():
    rooms, groups = _model("prod", {"h100": 0}, {"h100": 3})
    decision = ca.decide(ca.BEST_EFFORT_ATOMIC, ca.pods_of([(WORKER, 4)]), rooms, groups)
    assert (decision.provisioned, decision.new_nodes) == (False, 0)
    assert "h100 needs 4 new nodes but has 0 of at most 3" in decision.why
    assert ca.outcome(ca.BEST_EFFORT_ATOMIC, decision, {}) == (
        "Provisioned", "False", ("CapacityIsNotFound", "Capacity is not found, CA will try to find it later."))


def test_existing_free_nodes_count_against_the_limit_and_shrink_what_is_needed():
    rooms, groups = _model("prod", {"h100": 2}, {"h100": 4})
    decision = ca.decide(ca.BEST_EFFORT_ATOMIC, ca.pods_of([(WORKER, 4)]), rooms, groups)
    assert (decision.provisioned, decision.on_existing, decision.new_nodes) == (True, 2, 2)
    rooms, groups = _model("prod", {"h100": 2}, {"h100": 3})
    assert not ca.decide(ca.BEST_EFFORT_ATOMIC, ca.pods_of([(WORKER, 4)]), rooms, groups).provisioned
    # maxNodes caps what the capacity ConfigMap says.
    rooms, groups = _model("prod", {"h100": 0}, {"h100": 99})
    assert next(g for g in groups if g.name == "h100").limit == 16


def test_two_half_node_pods_share_one_new_node():
    half = copy.deepcopy(WORKER)
    half["containers"][0]["resources"]["requests"] = {"nvidia.com/gpu": "4"}
    rooms, groups = _model("prod", {"h100": 0}, {})
    assert ca.decide(ca.BEST_EFFORT_ATOMIC, ca.pods_of([(half, 3)]), rooms, groups).new_nodes == 2


def test_check_capacity_never_adds_nodes_and_fails_only_with_no_retry():
    rooms, groups = _model("prod", {"h100": 0}, {})
    decision = ca.decide(ca.CHECK_CAPACITY, ca.pods_of([(WORKER, 1)]), rooms, groups)
    assert (decision.provisioned, decision.new_nodes) == (False, 0)
    assert ca.outcome(ca.CHECK_CAPACITY, decision, {})[:2] == ("Provisioned", "False")
    assert ca.outcome(ca.CHECK_CAPACITY, decision, {"noRetry": "true"}) == (
        "Failed", "True", ("CapacityIsNotFound", "CA could not find requested capacity"))


def test_a_pod_lands_only_where_selector_affinity_and_taints_allow():
    labels = {"gpucluster.io/pool": "h100", "zone": "a"}
    gpu_taint = [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert ca.schedulable(WORKER, labels, gpu_taint)
    assert not ca.schedulable(WORKER, {**labels, "gpucluster.io/pool": "a100"}, gpu_taint)
    assert not ca.schedulable({**WORKER, "tolerations": []}, labels, gpu_taint)
    assert ca.schedulable({**WORKER, "tolerations": []}, labels, [{"key": "x", "effect": "PreferNoSchedule"}])
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]}}}
    assert not ca.schedulable({**WORKER, "affinity": affinity}, labels, gpu_taint)


def test_conditions_are_replaced_in_place_or_appended_with_ca_s_fields():
    accepted = ca.with_condition([], "Accepted", "True", ca.ACCEPTED_CONDITION, NOW, 1)
    assert accepted == [{"type": "Accepted", "status": "True", "observedGeneration": 1,
                         "lastTransitionTime": "2026-09-01T12:00:00Z", "reason": "Accepted",
                         "message": "ProvisioningRequest is accepted by ClusterAutoscaler"}]
    later = NOW + datetime.timedelta(seconds=5)
    both = ca.with_condition(accepted, "Provisioned", "False", ca.CAPACITY_NOT_FOUND, NOW, 1)
    again = ca.with_condition(both, "Accepted", "True", ca.ACCEPTED_CONDITION, later, 1)
    assert [c["type"] for c in again] == ["Accepted", "Provisioned"]
    assert again[0]["lastTransitionTime"] == "2026-09-01T12:00:05Z"  # AddOrUpdateCondition: always now


def test_a_request_not_provisioned_is_retried_after_a_doubling_backoff():
    failed = ca.with_condition([], "Provisioned", "False", ca.CAPACITY_NOT_FOUND, NOW, 1)
    assert ca.due_for_attempt([], NOW, 60)
    assert not ca.due_for_attempt(failed, NOW + datetime.timedelta(seconds=60), 60)
    assert ca.due_for_attempt(failed, NOW + datetime.timedelta(seconds=61), 60)
    assert [ca.next_backoff(b, 60, 600) for b in (None, 120, 240, 480)] == [120, 240, 480, 600]
    provisioned = ca.with_condition([], "Provisioned", "True", ca.CAPACITY_FOUND, NOW, 1)
    assert not ca.due_for_attempt(provisioned, NOW + datetime.timedelta(days=1), 0)


def test_a_booking_expires_after_the_booking_time_and_an_unprovisioned_request_after_7_days():
    provisioned = ca.with_condition([], "Provisioned", "True", ca.CAPACITY_PROVISIONED, NOW, 1)
    assert ca.booked(provisioned)
    assert ca.expiry(provisioned, "2026-09-01T11:00:00Z", NOW + datetime.timedelta(seconds=600), 600) is None
    assert ca.expiry(provisioned, "2026-09-01T11:00:00Z", NOW + datetime.timedelta(seconds=601), 600) == (
        "BookingExpired", ("CapacityReservationTimeExpired", "Capacity reservation time is expired"))
    expired = ca.with_condition(provisioned, "BookingExpired", "True", ca.BOOKING_EXPIRED_CONDITION, NOW, 1)
    assert not ca.booked(expired)
    assert ca.expiry([], "2026-08-25T11:59:59Z", NOW, 600) == ("Failed", ("Expired", "ProvisioningRequest is expired"))
    assert ca.BOOKING_SECONDS == 600


def test_a_missing_pod_template_reads_as_ca_s_error():
    assert ca.missing_templates(["a", "b"], ["a"]) == (
        "missing pod templates, 2 pod templates were referenced, 1 templates were missing: b")
    assert ca.missing_templates(["a"], ["a"]) is None


# -- the controller against an in-memory API ---------------------------------------------------------------------------

class FakeApi:
    """Nodes, pods, pod templates, ProvisioningRequests and ConfigMaps, as the controller reads and writes them."""

    def __init__(self, node_list: list[dict], capacity: dict[str, int] | None = None, **settings: float):
        self.objects: dict[str, dict[str, dict]] = {"nodes": {n["metadata"]["name"]: n for n in node_list},
                                                   "pods": {}, "podtemplates": {}, "provisioningrequests": {}}
        self.configmaps = {provisioner.CAPACITY_CONFIGMAP: provisioner.capacity_configmap(capacity or {}),
                           provisioner.SETTINGS_CONFIGMAP: provisioner.settings_configmap(**settings)}

    def items(self, path: str) -> list[dict]:
        return copy.deepcopy(list(self.objects[path.rsplit("/", 1)[1]].values()))

    def call(self, method: str, path: str, body: Any = None, patch: bool = False) -> Any:
        if "/configmaps/" in path:
            return copy.deepcopy(self.configmaps.get(path.rsplit("/", 1)[1]))
        if method == "POST" and path == "/api/v1/nodes":
            assert body["metadata"]["name"] not in self.objects["nodes"], "node names must stay unique"
            self.objects["nodes"][body["metadata"]["name"]] = copy.deepcopy(body)
            return body
        if method == "DELETE" and path.startswith("/api/v1/nodes/"):
            return self.objects["nodes"].pop(path.rsplit("/", 1)[1])
        if method == "PATCH" and path.endswith("/status"):
            pr = self.objects["provisioningrequests"][path.split("/")[-2]]
            pr["status"] = {**pr.get("status", {}), **body["status"]}
            return copy.deepcopy(pr)
        raise AssertionError(f"unexpected {method} {path}")

    def add_request(self, name: str, count: int, cls: str = ca.BEST_EFFORT_ATOMIC) -> None:
        self.objects["podtemplates"][f"ppt-{name}"] = {"metadata": {"namespace": "training", "name": f"ppt-{name}"},
                                                        "template": {"spec": WORKER}}
        self.objects["provisioningrequests"][name] = {
            "metadata": {"namespace": "training", "name": name, "uid": f"uid-{name}", "generation": 1,
                         "creationTimestamp": "2026-09-01T11:59:00Z"},
            "spec": {"provisioningClassName": cls, "podSets": [{"podTemplateRef": {"name": f"ppt-{name}"},
                                                                "count": count}]}}

    def conditions(self, name: str) -> dict[str, tuple[str, str]]:
        pr = self.objects["provisioningrequests"][name]
        return {c["type"]: (c["status"], c["reason"]) for c in pr.get("status", {}).get("conditions", [])}

    def pool_nodes(self, pool: str) -> list[dict]:
        return [n for n in self.objects["nodes"].values()
                if n["metadata"]["labels"][nodes.NODEGROUP_LABEL] == f"gpucluster-prod-{pool}"]


def _controller(api: FakeApi) -> provisioner.Provisioner:
    spec = {"stack": "prod", "zone": "us-east-1a", "zoneId": "use1-az6", "clusterName": "gpucluster-prod",
            "kubeletPort": 10250}
    return provisioner.Provisioner(None, spec, api=api, cfg=stack_config("prod"))


def _prod_nodes(h100: int) -> list[dict]:
    return nodes.nodes(stack_config("prod"), "us-east-1a", "use1-az6", "gpucluster-prod", {"h100": h100})


T0 = NOW.timestamp()


def test_the_controller_creates_none_of_4_nodes_at_capacity_3_then_all_4_once_capacity_is_back():
    api = FakeApi(_prod_nodes(0), {"h100": 3}, retryInitialSeconds=5, bookingSeconds=30, idleSeconds=20)
    controller = _controller(api)
    api.add_request("job-a", 4)
    controller.pass_once(T0)
    assert api.pool_nodes("h100") == []
    assert api.conditions("job-a") == {"Accepted": ("True", "Accepted"), "Provisioned": ("False", "CapacityIsNotFound")}

    api.configmaps[provisioner.CAPACITY_CONFIGMAP] = provisioner.capacity_configmap({"h100": 16})
    controller.pass_once(T0 + 3)  # within the backoff: no new attempt
    assert api.pool_nodes("h100") == []
    controller.pass_once(T0 + 6)
    created = api.pool_nodes("h100")
    assert sorted(nodes.node_index(n)[1] for n in created) == [0, 1, 2, 3]
    assert len({n["metadata"]["labels"][LAYER.format(3)] for n in created}) == 1  # the first block
    assert {n["metadata"]["annotations"][provisioner.PROVISIONED_FOR_ANNOTATION] for n in created} == {"training/job-a"}
    assert api.conditions("job-a")["Provisioned"] == ("True", "CapacityIsProvisioned")

    # Booked, its pods not yet bound: a second request for 4 cannot use those nodes, so it gets 4 more.
    api.add_request("job-b", 4)
    controller.pass_once(T0 + 7)
    assert sorted(nodes.node_index(n)[1] for n in api.pool_nodes("h100")) == list(range(8))

    # Booking expires 30 s after Provisioned; nodes with no pod and no booking go after idleSeconds (a pass a second).
    for t in range(8, 39):
        controller.pass_once(T0 + t)
    assert api.conditions("job-a")["BookingExpired"] == ("True", "CapacityReservationTimeExpired")
    assert api.conditions("job-b")["BookingExpired"] == ("True", "CapacityReservationTimeExpired")
    for t in range(39, 56):
        controller.pass_once(T0 + t)
    assert len(api.pool_nodes("h100")) == 8
    for t in range(56, 59):
        controller.pass_once(T0 + t)
    assert api.pool_nodes("h100") == []
    assert len(api.pool_nodes("system")) == 3  # nodes it did not create are never its to remove


def test_a_booked_request_s_bound_pods_no_longer_hold_room_twice():
    api = FakeApi(_prod_nodes(4))
    controller = _controller(api)
    api.add_request("job-a", 4)
    controller.pass_once(T0)
    assert api.conditions("job-a")["Provisioned"] == ("True", "CapacityIsFound")
    for i, node in enumerate(api.pool_nodes("h100")):
        api.objects["pods"][f"w{i}"] = {
            "metadata": {"namespace": "training", "name": f"w{i}", "annotations": {ca.CONSUME_ANNOTATION: "job-a"}},
            "spec": {**WORKER, "nodeName": node["metadata"]["name"]}, "status": {"phase": "Running"}}
    api.add_request("job-b", 4)
    controller.pass_once(T0 + 1)
    # The 4 nodes are full with job-a's bound pods (its booking no longer counts them again): 4 new nodes.
    assert api.conditions("job-b")["Provisioned"] == ("True", "CapacityIsProvisioned")
    assert len(api.pool_nodes("h100")) == 8


def test_nothing_is_written_while_there_is_no_request_and_no_node_of_ours():
    api = FakeApi(_prod_nodes(16))
    writes = []
    api.call = lambda *args, **kw: writes.append(args)  # any GET of a ConfigMap would show here too
    _controller(api).pass_once(T0)
    assert writes == []


def test_a_request_whose_pod_template_is_gone_fails_as_ca_marks_it():
    api = FakeApi(_prod_nodes(16))
    api.add_request("job-a", 2)
    del api.objects["podtemplates"]["ppt-job-a"]
    _controller(api).pass_once(T0)
    assert api.conditions("job-a") == {"Failed": ("True", "FailedToCreatePods")}


def test_settings_are_named():
    assert provisioner.capacity_configmap({"h100": 3})["data"] == {"h100": "3"}
    with pytest.raises(ValueError, match="unknown provisioner settings: \\['booking'\\]"):
        provisioner.settings_configmap(booking=1)


def test_a_node_another_request_s_booking_sits_on_stays_until_that_booking_expires():
    api = FakeApi(_prod_nodes(0), retryInitialSeconds=1, bookingSeconds=30, idleSeconds=5)
    controller = _controller(api)
    api.add_request("job-a", 1)
    controller.pass_once(T0)
    assert len(api.pool_nodes("h100")) == 1
    del api.objects["provisioningrequests"]["job-a"]  # Kueue deletes a finished workload's request
    api.add_request("check", 1, ca.CHECK_CAPACITY)
    controller.pass_once(T0 + 1)
    assert api.conditions("check")["Provisioned"] == ("True", "CapacityIsFound")
    for t in range(2, 32):
        controller.pass_once(T0 + t)
    assert len(api.pool_nodes("h100")) == 1  # the check's booked pod holds it
    for t in range(32, 39):
        controller.pass_once(T0 + t)
    assert api.conditions("check")["BookingExpired"][0] == "True"
    assert api.pool_nodes("h100") == []


def test_the_crd_comes_from_the_api_version_kueue_requires():
    """The ProvisioningRequest API module the local control plane builds its CRD from is the one Kueue's go.mod, at
    the tag we pin, requires (vendored: tests/upstream/SOURCES.yaml; a fresh machine has no Go module cache)."""
    from local import versions
    from tests import k8s

    go_mods = [s for s in k8s.sources() if s["repo"] == "kubernetes-sigs/kueue" and s["path"] == "go.mod"]
    assert [s["tag"] for s in go_mods] == [versions.KUEUE.version]
    api = versions.PROVISIONING_REQUEST_API
    assert f"\t{api.module} {api.version}\n" in (k8s.ROOT / go_mods[0]["file"]).read_text()
    assert provisioner.CRD_NAME == "provisioningrequests.autoscaling.x-k8s.io"
