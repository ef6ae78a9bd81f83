"""The plan's "Placement and admission" section: each job's and fabric test's placement, whether it can be met,
how it is admitted, what a partial scale-up costs, and the warnings (components.core.placement.plan)."""

from __future__ import annotations

import json

import pytest
import yaml

from bootstrap.offline import plan_report, plan_text
from components.core.kube import autoscaling, queueing
from components.core.placement import plan as placement
from components.core.placement import provisioning
from tests.conftest import ROOT, plan, recording, stack_config

P5 = 55.04  # p5.48xlarge, the catalog's us-east-1 list price per node-hour
HEADER = ("Placement and admission (Kueue topology-aware scheduling over the EKS network-node labels; atomic "
          "admission: a ProvisioningRequest for all of a job's nodes; README, How jobs run)")
LAYER3 = "preferred within one layer-3 network domain (topology.k8s.aws/network-node-layer-3): as close as Kueue can, " \
         "spread only when it must"
BOOKING_NOTE = ("  A partial scale-up on an atomic pool with a network topology: EC2 launches k < N of a job's nodes; "
                "Kueue never admits the job short of N Ready nodes (its topology pass), so the k bill for "
                "cluster-autoscaler's 10-min booking and then the pool's idleMinutes, and Kueue asks again, 6 attempts "
                "in all, then deactivates it; worst case per attempt: N-1 nodes x the pool's price x (10 min + "
                "idleMinutes). Nodes that take longer than the booking to become Ready (up to 25 min) normally cost a "
                "cold start a retry or two, not the job: a retry finds them Ready")
PODS_READY_NOTE = ("  A partial scale-up on a pool with no network topology or no atomic admission: EC2 launches k < N of "
                   "a job's nodes; Kueue admits the job (atomic: once the autoscaler has asked for all N), and the k "
                   "bill until Kueue evicts it 40m after admission without all of its pods ready (waitForPodsReady) "
                   "and requeues it, 6 attempts in all, then deactivates it; worst case per attempt: N-1 nodes x the "
                   "pool's price x 40m")
ATOMIC_NOTE = ("  Atomic admission on AWS: cluster-autoscaler asks for all N nodes at once and never starts a scale-up "
               "the node group cannot hold (maxNodes), so a job it cannot plan waits with no node; it says Provisioned "
               "once it has raised the group's desired size, before any node is Ready, and cannot make EC2's launch "
               "atomic (AtomicIncreaseSize is not implemented for AWS), so a shortfall of EC2 capacity still bills the "
               "nodes that did launch, as above. On a Capacity Block or ODCR whose free instances cover N the launch "
               "is all or nothing in practice: the capacity is held for you")
BOOKED, TIMED_OUT = "bookingExpiry", "podsReadyTimeout"
BLOCK = {"name": "block", "instanceType": "p5.48xlarge", "maxNodes": 4, "capacityType": "CAPACITY_BLOCK",
         "capacityReservationId": "cr-0123456789abcdef0"}


def job(name: str, pool: str, nodes: int, **more) -> dict:
    return {"name": name, "pool": pool, "nodes": nodes, "launcher": "torchrun", "image": "repo/train:1.0",
            "command": ["python", "train.py"], **more}


def placement_plan(pools: list, jobs: list, reserved: dict[str, int] | None = None) -> placement.PlacementPlan:
    cfg = stack_config("prod", {"gpucluster:gpuPools": pools, "gpucluster:jobs": jobs, "gpucluster:teams": []})
    return placement.plan(cfg, reserved)


def section(out: str) -> list[str]:
    return out.split(f"\n{HEADER}\n", 1)[1].split("\n\n", 1)[0].splitlines()


# -- the values it rests on -------------------------------------------------------------------------


def test_a_partial_scale_up_lasts_the_pods_ready_timeout_over_one_attempt_and_each_requeue():
    # Kueue v0.19.2 workload_controller.go triggerDeactivation: deactivated once requeueState.count + 1 >
    # backoffLimitCount, the count one more per eviction: admitted with counts 0..5, deactivated at the sixth timeout.
    assert (queueing.PODS_READY_TIMEOUT, queueing.REQUEUE_LIMIT) == ("40m", 5)
    assert placement.ATTEMPTS == 6
    assert (placement.BOOKING, placement.PODS_READY) == (BOOKED, TIMED_OUT)
    assert placement.timeout_minutes() == 40
    assert (placement.timeout_minutes("1h30m"), placement.timeout_minutes("90s")) == (90, 1.5)
    with pytest.raises(ValueError, match="not a duration"):
        placement.timeout_minutes("40 minutes")


def test_on_a_topology_pool_a_partial_scale_up_lasts_the_booking_and_idle_minutes_over_each_retry():
    # cluster-autoscaler-1.35.2 processors/provreq/processor.go: defaultReservationTime = 10 * time.Minute, then
    # BookingExpired; Kueue v0.19.2 provisioning/controller.go syncCheckStates retries while the request's attempt
    # <= backoffLimitCount: attempts 1..5 retried, the sixth rejected.
    assert placement.BOOKING_MINUTES == 10
    assert provisioning.RETRY_STRATEGY["backoffLimitCount"] == 5 and placement.CHECK_ATTEMPTS == 6
    # A retry comes 1 or 2 min after the booking ran out (backoffMaxSeconds), before a node idles out
    # (idleMinutes >= 1 by default 3): the next attempt re-books the nodes that came.
    assert provisioning.RETRY_STRATEGY["backoffMaxSeconds"] == 120
    # The nodes the note says may take longer than the booking to become Ready.
    assert autoscaling.MAX_NODE_PROVISION_MINUTES == 25 > placement.BOOKING_MINUTES


# -- the computation ------------------------------------------------------------------------------------


def test_prods_rows():
    rows = {r.name: r for r in placement.plan(stack_config("prod")).jobs}
    assert list(rows) == ["nccl-tests-h100", "llama-70b", "gpt-pretrain"]
    llama = rows["llama-70b"]
    assert (llama.policy, llama.layer, llama.none_because, llama.capacity, llama.can_be_met) == \
        ("preferred", 3, None, 16, True)
    assert (llama.placement_group, llama.atomic, llama.reservation) == (True, True, None)
    # p5 has 3 network layers and prod's h100 is atomic with idleMinutes 5: the 15 that came bill the 10-min booking
    # and 5 idle minutes, then Kueue asks again.
    assert stack_config("prod").pool("h100").idle_minutes == 5
    assert llama.partial == placement.PartialScaleUp(15, P5, 15, False, BOOKED, 6)
    assert (llama.partial.per_attempt_usd, llama.partial.all_attempts_usd) == (206.4, 1238.4)
    assert llama.partial.per_attempt_usd == round(15 * P5 * 15 / 60, 2)
    fabric = rows["nccl-tests-h100"]
    assert (fabric.fabric_test, fabric.nodes, fabric.policy, fabric.layer) == (True, 2, "preferred", 3)
    # One node for 15 minutes, six times.
    assert (fabric.partial.per_attempt_usd, fabric.partial.all_attempts_usd) == (13.76, 82.56)
    assert placement.plan(stack_config("prod")).warnings == ()


@pytest.mark.parametrize(("pool", "minutes", "released_by"), [
    ({"name": "p", "instanceType": "p4d.24xlarge", "maxNodes": 4, "idleMinutes": 7}, 17, BOOKED),
    # Atomic without a topology: Kueue admits at Provisioned=True, the pods-ready timeout releases the nodes.
    ({"name": "p", "instanceType": "p4d.24xlarge", "maxNodes": 4, "topology": "off"}, 40, TIMED_OUT),
    ({"name": "p", "instanceType": "g5.48xlarge", "maxNodes": 4}, 40, TIMED_OUT),
    # Not atomic (a fixed-size pool may keep its topology): admitted on quota, the same timeout.
    ({"name": "p", "instanceType": "p4d.24xlarge", "minNodes": 4, "maxNodes": 4, "atomicScaleUp": False}, 40,
     TIMED_OUT),
])
def test_what_releases_a_partial_scale_up_depends_on_topology_and_atomic_admission(pool, minutes, released_by):
    from components.core.hardware import catalog

    (row,) = placement_plan([pool], [job("j", "p", 3)]).jobs
    assert row.partial == placement.PartialScaleUp(2, catalog.price(pool["instanceType"]), minutes, False,
                                                   released_by, 6)


def test_a_single_node_has_no_placement_and_no_partial_case():
    (smoke,) = placement.plan(stack_config("dev")).jobs
    assert (smoke.name, smoke.nodes, smoke.policy, smoke.layer, smoke.none_because) == \
        ("smoke", 1, "none", None, "a single node")
    assert (smoke.partial, smoke.atomic, smoke.capacity, smoke.can_be_met) == (None, True, 2, True)


@pytest.mark.parametrize(("pool", "placement_cfg", "because"), [
    ({"name": "p", "instanceType": "p4d.24xlarge", "maxNodes": 4, "topology": "off"}, None,
     "its pool's topology is off"),
    ({"name": "p", "instanceType": "g5.48xlarge", "maxNodes": 4}, None, "EKS labels no network layers on g5.48xlarge"),
    ({"name": "p", "instanceType": "p4d.24xlarge", "maxNodes": 4}, {"policy": "none"}, "policy none"),
])
def test_why_a_multi_node_job_has_no_placement(pool, placement_cfg, because):
    extra = {"placement": placement_cfg} if placement_cfg else {}
    (row,) = placement_plan([pool], [job("j", "p", 2, **extra)]).jobs
    assert (row.policy, row.layer, row.none_because) == ("none", None, because)


def test_a_spot_pool_that_may_launch_dearer_types_costs_its_dearest():
    from components.core.hardware import catalog

    pool = {"name": "spot", "instanceType": "p4d.24xlarge", "maxNodes": 4, "capacityType": "SPOT",
            "extraInstanceTypes": ["p4de.24xlarge"]}
    (row,) = placement_plan([pool], [job("j", "spot", 3)]).jobs
    assert catalog.price("p4de.24xlarge") > catalog.price("p4d.24xlarge")
    assert row.partial == placement.PartialScaleUp(2, catalog.price("p4de.24xlarge"), 13, False, BOOKED, 6)


def test_a_capacity_block_caps_what_can_be_met_and_holds_what_a_partial_scale_up_takes():
    jobs = [job("big", "block", 4), job("fits", "block", 2)]
    rows = {r.name: r for r in placement_plan([BLOCK], jobs, {"block": 2}).jobs}
    assert rows["big"].reservation == placement.Reservation("Capacity Block", "cr-0123456789abcdef0", 2, False)
    assert (rows["big"].capacity, rows["big"].can_be_met) == (2, False)
    # At most the block's 2 instances launch; they bill whether used or not.
    assert rows["big"].partial == placement.PartialScaleUp(2, P5, 13, True, BOOKED, 6)
    assert (rows["fits"].capacity, rows["fits"].can_be_met) == (2, True)
    # Not looked up (an ODCR never is): assumed maxNodes, as the cost estimate does.
    (unknown,) = placement_plan([BLOCK], [job("big", "block", 4)]).jobs
    assert (unknown.reservation.instances, unknown.reservation.assumed, unknown.can_be_met) == (4, True, True)


# -- warnings ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("pools", "jobs", "expected"), [
    ([BLOCK], [job("big", "block", 4)],
     [("error", "job big: 4 nodes, more than the 2 instances pool block's Capacity Block cr-0123456789abcdef0 holds "
                "(the pool launches only into it): it can never be placed; lower its nodes or reserve more")]),
    ([BLOCK], [job("wide", "block", 3, placement={"policy": "required"})],
     [("error", "job wide: required within one layer-3 network domain, but its 3 nodes are more than the 2 instances "
                "pool block's Capacity Block cr-0123456789abcdef0 holds (the pool launches only into it): no domain "
                "can ever hold them; lower its nodes or reserve more")]),
    ([{**BLOCK, "fabricTest": True}], [job("fits", "block", 2, placement={"policy": "required"})], []),
    ([{"name": "slow", "instanceType": "p5.48xlarge", "maxNodes": 16, "atomicScaleUp": False, "topology": "off"}],
     [job("j", "slow", 16), job("one", "slow", 1)],
     [("warning", "job j (16 nodes) on pool slow, whose atomicScaleUp is false: nodes arrive one by one; a partial "
                  "scale-up bills up to $550.40 per attempt (15 x p5.48xlarge x 40 min), $3,302.40 over 6 attempts")]),
    ([{"name": "slow", "instanceType": "p5.48xlarge", "maxNodes": 4, "atomicScaleUp": False, "topology": "off",
       "fabricTest": True,
       "capacityReservationId": "cr-0123456789abcdef1"}], [],
     [("warning", "the fabric test nccl-tests-slow (2 nodes) on pool slow, whose atomicScaleUp is false: nodes "
                  "arrive one by one; a partial scale-up holds up to 1 reserved node for 40 min per attempt ($36.69 "
                  "at the on-demand rate; the reservation bills whether used or not: nothing extra)")]),
])
def test_warnings(pools, jobs, expected):
    assert list(placement_plan(pools, jobs, {"block": 2}).warnings) == expected


REPLACEMENT = ("pool {pool}: atomicScaleUp with no topology: after {causes}, a job's re-created pod gets no new node "
               "(cluster-autoscaler leaves pods that consume a ProvisioningRequest to it) and waits 30m for Kueue to "
               "requeue the job; set atomicScaleUp: false to have the autoscaler replace nodes as they go")


@pytest.mark.parametrize(("pool", "causes"), [
    # g5.48xlarge: EFA, but EKS labels no network layer on it, so its pool has no topology.
    ({"instanceType": "g5.48xlarge", "capacityType": "SPOT"}, "Spot reclaims"),
    ({"instanceType": "p5.48xlarge", "topology": "off", "minNodes": 4, "remediation": "on"},
     "the goodput controller's quarantines"),
    ({"instanceType": "g5.48xlarge", "capacityType": "SPOT", "remediation": "on"},
     "Spot reclaims and the goodput controller's quarantines"),
    ({"instanceType": "p5.48xlarge", "capacityType": "SPOT", "remediation": "on"}, None),  # a topology: Kueue swaps
    ({"instanceType": "g5.48xlarge", "capacityType": "SPOT", "atomicScaleUp": False}, None),
    ({"instanceType": "g5.48xlarge"}, None),  # on demand, no remediation: nothing re-creates its pods
])
def test_an_atomic_pool_without_a_topology_warns_when_its_pods_get_re_created(pool, causes):
    pools = [{"name": "gpus", "maxNodes": 4, **pool}]
    warnings = list(placement_plan(pools, [], {}).warnings)
    assert warnings == ([("warning", REPLACEMENT.format(pool="gpus", causes=causes))] if causes else [])


# -- the report and its text -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def prod_report():
    result = plan("--stack", "prod", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_prod_report_json(prod_report):
    p = prod_report["placement"]
    assert (p["podsReadyTimeout"], p["podsReadyTimeoutMinutes"], p["attempts"], p["bookingMinutes"], p["warnings"]) \
        == ("40m", 40, 6, 10, [])
    assert [j["name"] for j in p["jobs"]] == [j["name"] for j in prod_report["jobs"]]
    assert p["jobs"][1] == {
        "name": "llama-70b", "fabricTest": False, "pool": "h100", "instanceType": "p5.48xlarge", "nodes": 16,
        "placement": {"policy": "preferred", "layer": 3, "label": "topology.k8s.aws/network-node-layer-3",
                      "noneBecause": None},
        "minNodes": 0, "maxNodes": 16, "capacityNodes": 16, "canBeMet": True, "reservation": None,
        "placementGroup": True, "admission": "atomic",
        "partialScaleUp": {"nodes": 15, "pricePerNodeHour": P5, "minutes": 15, "attempts": 6, "perAttemptUsd": 206.4,
                           "allAttemptsUsd": 1238.4, "withinReservation": False, "releasedBy": BOOKED}}


def test_the_prod_text():
    assert section(plan("--stack", "prod").stdout) == [
        f"  nccl-tests-h100 (fabric test): 2 nodes on h100, {LAYER3}; can be met at maxNodes (2 of 16); admitted "
        "atomically (one ProvisioningRequest per attempt for its 2 nodes); a partial scale-up bills up to $13.76 per "
        "attempt (1 x p5.48xlarge x 15 min: the 10-min booking, then idleMinutes 5), $82.56 over 6 attempts",
        f"  llama-70b: 16 nodes on h100, {LAYER3}; can be met at maxNodes (16 of 16); admitted atomically (one "
        "ProvisioningRequest per attempt for its 16 nodes); a partial scale-up bills up to $206.40 per attempt (15 x "
        "p5.48xlarge x 15 min: the 10-min booking, then idleMinutes 5), $1,238.40 over 6 attempts",
        f"  gpt-pretrain: 2 nodes on h100, {LAYER3}; can be met at maxNodes (2 of 16); admitted atomically (one "
        "ProvisioningRequest per attempt for its 2 nodes); a partial scale-up bills up to $13.76 per attempt (1 x "
        "p5.48xlarge x 15 min: the 10-min booking, then idleMinutes 5), $82.56 over 6 attempts",
        BOOKING_NOTE,
        ATOMIC_NOTE,
    ]


def test_the_dev_text_and_json():
    assert section(plan("--stack", "dev").stdout) == [
        "  smoke: 1 node on dev, placement none (a single node); can be met at maxNodes (1 of 2); admitted atomically; "
        "no partial scale-up (a single node)"]
    (smoke,) = json.loads(plan("--stack", "dev", "--json").stdout)["placement"]["jobs"]
    assert (smoke["placement"], smoke["admission"], smoke["partialScaleUp"]) == (
        {"policy": "none", "layer": None, "label": None, "noneBecause": "a single node"}, "atomic", None)


def test_a_required_job_says_what_can_be_met_means():
    jobs = [job("llama", "h100", 16, placement={"policy": "required", "layer": 2})]
    pools = [{"name": "h100", "instanceType": "p5.48xlarge", "minNodes": 16, "maxNodes": 16, "atomicScaleUp": False},
             {"name": "nopg", "instanceType": "p5.48xlarge", "maxNodes": 16, "placementGroup": "none"}]
    text = placement.render(placement_plan(pools, [*jobs, job("b", "nopg", 2, placement={"policy": "required"})])
                            .to_dict())
    assert text[2] == (
        "  llama: 16 nodes on h100, required within one layer-2 network domain (topology.k8s.aws/network-node-layer-2): "
        "it waits until one domain has all 16; can be met at maxNodes (16 of 16) if EC2 places them so: EC2 does not "
        "promise how many nodes share one layer-2 network node; the pool's cluster placement group packs its nodes "
        "close; admitted on quota (nodes arrive one by one); a partial scale-up bills up to $550.40 per attempt (15 x "
        "p5.48xlarge x 40 min), $3,302.40 over 6 attempts")
    # A pool that scales: the autoscaler knows no domains, so the job does not simply wait.
    assert text[3] == (
        "  b: 2 nodes on nopg, required within one layer-3 network domain (topology.k8s.aws/network-node-layer-3): the "
        "autoscaler adds nodes without regard to network domains, so if the 2 it gets do not share one, Kueue cannot "
        "place it, their 10-min booking expires and Kueue asks again, billing them each time (up to $23.85 per "
        "attempt: 2 x p5.48xlarge x 13 min; $143.10 over 6 attempts), then deactivates it; a retry mostly finds the "
        "same nodes (the autoscaler counts idle ones as capacity): prefer preferred, a broader layer or reserved "
        "capacity; can be met at maxNodes (2 of 16) if EC2 places them so: EC2 does not promise how many nodes "
        "share one layer-3 network node; the pool has no cluster placement group; admitted atomically (one "
        "ProvisioningRequest per attempt for its 2 nodes); a partial scale-up bills up to $11.93 per attempt (1 x p5.48xlarge x 13 min: the 10-min booking, then "
        "idleMinutes 3), $71.55 over 6 attempts")
    assert text[4:] == [BOOKING_NOTE, PODS_READY_NOTE, ATOMIC_NOTE, "  WARNING: job llama (16 nodes) on pool h100, "
                        "whose atomicScaleUp is false: nodes arrive one by one; a partial scale-up bills up to $550.40 "
                        "per attempt (15 x p5.48xlarge x 40 min), $3,302.40 over 6 attempts",
                        "  WARNING: pool h100 admits on quota while nopg scales up atomically: Kueue's blockAdmission "
                        "is then off for the whole cluster (it would stall the atomic pools' admission), so several "
                        "jobs there may each hold part of their nodes while they wait for the rest"]
    block = placement.render(placement_plan([BLOCK], [job("b", "block", 2, placement={"policy": "required"})],
                                            {"block": 2}).to_dict())
    assert block[2].startswith(
        "  b: 2 nodes on block, required within one layer-3 network domain (topology.k8s.aws/network-node-layer-3): it "
        "waits until one domain has all 2; can be met in its Capacity Block (2 of 2 instances) if EC2 places them so: "
        "EC2 does not promise how many nodes share one layer-3 network node; the Capacity Block fixes where its "
        "instances are (no placement group of ours);")


def test_the_section_is_all_the_text_it_adds():
    rec = recording("prod")
    report = plan_report.build_report(stack_config("prod"), rec, [])
    tree = plan_text.resource_tree(rec)
    full = plan_text.render(report, tree)
    start = full.index(f"\n\n{HEADER}\n")
    end = full.index("\n\n", start + 2)  # the next section (Goodput)
    assert full[:start] + full[end:] == plan_text.render({k: v for k, v in report.items() if k != "placement"}, tree)
    # After the jobs it speaks of.
    assert full.index("\nJobs (queued in Kueue") < start


def test_a_capacity_block_job_larger_than_the_block_through_the_cli(tmp_path):
    path = tmp_path / "Pulumi.block.yaml"
    document = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text())
    document["config"].update({
        "gpucluster:adminPrincipalArns": ["arn:aws:iam::210987654321:role/Admin"],
        "gpucluster:publicAccessCidrs": ["52.94.76.10/32"],
        "gpucluster:gpuPools": [BLOCK],
        "gpucluster:jobs": [job("big", "block", 4), job("pair", "block", 2)],
        "gpucluster:teams": [],
    })
    path.write_text(yaml.safe_dump(document))
    report = json.loads(plan("--stack", "block", "--stack-file", str(path), "--json").stdout)
    # The mocks' Capacity Block holds 2 instances (bootstrap/offline/mocks.py), as the cost line says.
    big, pair = report["placement"]["jobs"]
    assert big["reservation"] == {"kind": "Capacity Block", "id": "cr-0123456789abcdef0", "instances": 2,
                                  "assumed": False}
    assert (big["capacityNodes"], big["canBeMet"], pair["canBeMet"]) == (2, False, True)
    error = ("job big: 4 nodes, more than the 2 instances pool block's Capacity Block cr-0123456789abcdef0 holds (the "
             "pool launches only into it): it can never be placed; lower its nodes or reserve more")
    assert report["placement"]["warnings"] == [{"level": "error", "message": error}]
    lines = section(plan("--stack", "block", "--stack-file", str(path)).stdout)
    assert lines[0] == (
        f"  big: 4 nodes on block, {LAYER3}; can never be met: its Capacity Block holds 2 instances; admitted "
        "atomically (one ProvisioningRequest per attempt for its 4 nodes); a partial scale-up holds up to 2 reserved "
        "nodes for 13 min per attempt (the 10-min booking, then idleMinutes 3; $23.85 at the on-demand rate; the "
        "reservation bills whether used or not: nothing extra)")
    assert lines[1].startswith("  pair: 2 nodes on block, ") and \
        "; can be met in its Capacity Block (2 of 2 instances); " in lines[1]
    assert lines[-1] == f"  ERROR: {error}"


def test_a_pool_on_quota_beside_an_atomic_one_loses_the_block_and_the_plan_says_so():
    atomic = {"name": "h100", "instanceType": "p5.48xlarge", "maxNodes": 4}
    quota = {"name": "a10", "instanceType": "g5.48xlarge", "maxNodes": 4, "atomicScaleUp": False}
    single = {"name": "one", "instanceType": "g5.48xlarge", "maxNodes": 1, "atomicScaleUp": False}
    assert list(placement_plan([atomic, quota, single], []).warnings) == [(
        "warning", "pool a10 admits on quota while h100 scales up atomically: Kueue's blockAdmission is then off for "
                   "the whole cluster (it would stall the atomic pools' admission), so several jobs there may each "
                   "hold part of their nodes while they wait for the rest")]
    assert list(placement_plan([atomic], []).warnings) == []
    assert list(placement_plan([quota], []).warnings) == []  # no check: the block is on
