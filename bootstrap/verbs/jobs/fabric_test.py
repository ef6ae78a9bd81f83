"""`python -m bootstrap fabric-test --stack S --pool P [--layer K]`: the fabric test in each network domain.

Reads the pool's Ready nodes, groups them by the EKS network-node label of
layer K (default: the pool's closest), and submits one 2-node nccl-tests
all_reduce MPIJob (the stack's fabric test, at its priority) pinned to each
domain that has 2 nodes, plus one pair across two domains: nccl-report
--stack S --pool P then compares them. A domain with one node is listed as
untested, and so is a node a job's GPU pods hold (the test would wait for
it); a pool without a network topology gets one test anywhere in it.
The previous run's tests of the pool are removed first. Each test's 2 nodes
bill while it runs (minutes).

Exit 0: submitted. Exit 1: nothing to test (no Ready nodes, or none labeled
yet). Exit 2: not submitted for another reason (the cluster, no such pool,
a --layer the pool lacks, a job of that name this verb did not create).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from bootstrap.cluster import kinds
from bootstrap.cluster.api import ClusterUnreachable, Kube, KubeError
from bootstrap.jobs import fabric_domains, ops
from bootstrap.stackfile import StackFileError
from bootstrap.verbs.jobs import common
from components.core import config
from components.core.kube import launcher, queueing
from components.core.kube.nodepool import POOL_LABEL
from components.core.placement.topology import pool_layers

PROG = "python -m bootstrap fabric-test"
GONE_WAIT_SECONDS = 120  # a deleted MPIJob goes once its pods have (foreground deletion)
POLL_SECONDS = 2


def main(argv: list[str], sleep: Callable[[float], None] = time.sleep,
         clock: Callable[[], float] = time.monotonic) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("--pool", help="the GPU pool (default: the stack's only one)")
    parser.add_argument("--layer", type=int, metavar="K",
                        help="group by topology.k8s.aws/network-node-layer-K (default: the pool's closest, its last)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    common.add_cluster_args(parser, stack_required=True)
    args = common.parse(parser, argv)
    if isinstance(args, int):
        return args
    try:
        cfg = common.load_stack(args)
        pool = pick_pool(cfg, args.pool)
        check_layer(pool, args.layer)
        kube, namespace = common.cluster(args, cfg)
        nodes = kube.list(kinds.NODE, selector=f"{POOL_LABEL}={pool.name}")
        pods = kube.list(kinds.POD, field_selector="status.phase!=Succeeded,status.phase!=Failed")
        previous = {j["metadata"]["name"] for j in kube.list(kinds.MPIJOB, namespace,
                                                             fabric_domains.selector(pool.name))}
        plan = fabric_domains.plan(pool, nodes, args.layer, fabric_domains.busy_nodes(pods, previous))
        removed, created = [], []
        if plan.tests:
            base = launcher.nccl_test_mpijob(pool, namespace, image_cache=ops.image_cache(kube, namespace))
            manifests = [fabric_domains.manifest(base, plan, test) for test in plan.tests]
            removed = remove_previous(kube, pool.name, namespace, [m["metadata"]["name"] for m in manifests],
                                      sleep, clock)
            for manifest in manifests:
                kube.create(kinds.MPIJOB, manifest)
                created.append(manifest["metadata"]["name"])
    except (config.ConfigError, StackFileError, ClusterUnreachable, KubeError, common.BadArgument) as err:
        return common.fail(PROG, err)
    if args.json:
        print(json.dumps(to_json(plan, namespace, removed), indent=2))
    else:
        print(render(plan, pool, namespace, removed, args.stack))
    return 0 if created else 1


def pick_pool(cfg: config.StackConfig, name: str | None):
    pools = [p for p in cfg.gpu_pools if name in (None, p.name)]
    if name is None and len(pools) > 1:
        raise common.BadArgument(f"the stack has {len(pools)} GPU pools: give --pool "
                                 f"({', '.join(p.name for p in pools)})")
    if not pools:
        raise common.BadArgument(f"no GPU pool {name!r} in stack {cfg.stack}; its pools: "
                                 f"{', '.join(p.name for p in cfg.gpu_pools) or '(none)'}")
    pool = pools[0]
    if pool.max_nodes < fabric_domains.TEST_NODES:
        raise common.BadArgument(f"pool {pool.name} has maxNodes {pool.max_nodes}: a fabric test needs "
                                 f"{fabric_domains.TEST_NODES} nodes")
    return pool


def check_layer(pool, layer: int | None) -> None:
    if layer is None:
        return
    layers = pool_layers(pool)
    if not layers:
        raise common.BadArgument(f"--layer {layer}: pool {pool.name} has no network topology "
                                 f"({fabric_domains.no_topology_reason(pool)})")
    if not 1 <= layer <= layers:
        raise common.BadArgument(f"--layer {layer}: {pool.instance_type} nodes have {layers} network layers "
                                 f"(1 to {layers})")


def remove_previous(kube: Kube, pool: str, namespace: str, names: list[str], sleep: Callable[[float], None],
                    clock: Callable[[], float]) -> list[str]:
    """Delete the pool's earlier fabric tests (their results would mix with this run's in nccl-report) and wait
    until they are gone; a job of one of `names` that this verb did not create is an error, left alone."""
    ours = {j["metadata"]["name"] for j in kube.list(kinds.MPIJOB, namespace, fabric_domains.selector(pool))}
    for name in names:
        if name not in ours and kube.get(kinds.MPIJOB, name, namespace) is not None:
            raise common.BadArgument(f"MPIJob {name} exists in {namespace} and is no fabric test of "
                                     f"`fabric-test`: `python -m bootstrap cancel {name}` first")
    for name in sorted(ours):
        kube.delete(kinds.MPIJOB, name, namespace)
    deadline = clock() + GONE_WAIT_SECONDS
    while any(kube.get(kinds.MPIJOB, name, namespace) is not None for name in ours):
        if clock() > deadline:
            raise common.BadArgument(f"the previous run's tests ({', '.join(sorted(ours))}) are still being deleted "
                                     f"after {GONE_WAIT_SECONDS} s: run this again in a minute")
        sleep(POLL_SECONDS)
    return sorted(ours)


def to_json(plan: fabric_domains.Plan, namespace: str, removed: list[str]) -> dict:
    tests = {d: t.name for t in plan.tests if len(t.domains) == 1 for d in t.domains}
    return {"pool": plan.pool, "namespace": namespace, "layer": plan.layer, "label": plan.label,
            "note": plan.note,
            "domains": [{"domain": d.id, "nodes": list(d.nodes), "test": tests.get(d.id)} for d in plan.domains],
            "unlabeled": list(plan.unlabeled), "busy": list(plan.busy),
            "tests": [{"name": t.name, "domains": list(t.domains), "hosts": list(t.hosts)} for t in plan.tests],
            "removed": removed}


def render(plan: fabric_domains.Plan, pool, namespace: str, removed: list[str], stack: str) -> str:
    ready = sum(len(d.nodes) for d in plan.domains) + len(plan.unlabeled)
    if plan.layer:
        lines = [f"pool {pool.name}: {count(ready, 'Ready node')} in {count(len(plan.domains), 'domain')} of "
                 f"{plan.label}", f"  {plan.note}"]
    else:
        lines = [f"pool {pool.name}: {plan.note}"]
    tests = {t.domains[0]: t.name for t in plan.tests if len(t.domains) == 1}
    for domain in plan.domains:
        size = count(len(domain.nodes), "node")
        lines.append(f"  {domain.id}: {size} -> {tests[domain.id]}" if domain.id in tests else
                     f"  {domain.id}: {size} ({', '.join(domain.nodes)}): untested, a test needs "
                     f"{fabric_domains.TEST_NODES}")
    for test in plan.tests:
        if len(test.domains) == 2:
            lines.append(f"  across {test.domains[0]} and {test.domains[1]}: {test.hosts[0]} and {test.hosts[1]}"
                         f" -> {test.name}")
        elif not test.domains:
            lines.append(f"  -> {test.name}")
    if plan.unlabeled:
        lines.append(f"  without {plan.label}: {', '.join(plan.unlabeled)}: untested")
    if plan.busy:
        lines.append(f"  running a job: {', '.join(plan.busy)}: untested (a test there would wait for the job)")
    if not plan.tests:
        return "\n".join(lines)
    if removed:
        lines.append(f"removed the previous run: {', '.join(removed)}")
    lines.append(f"submitted {count(len(plan.tests), 'MPIJob')} to {namespace}: {fabric_domains.TEST_NODES} x "
                 f"{pool.instance_type} each, priority {queueing.FABRIC_TEST_PRIORITY}, each at most "
                 f"{launcher.FABRIC_TEST_DEADLINE_SECONDS // 60} min once it runs")
    lines.append(f"compare them once they finish: python -m bootstrap nccl-report --stack {stack} --pool {pool.name}")
    return "\n".join(lines)


def count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
