"""What the pre-step check (precheck.py) judges and says: a node's own check, the all_reduce's bus bandwidth
against the pool's expected value, the pairs that find a slow node, and the termination message. Pure and
standard library only: tested without torch, and read by the e2e (tests/e2e) with a fake sysfs tree.

Bus bandwidth is nccl-tests' for all_reduce: algbw x 2(n-1)/n, algbw = bytes / 1e9 / seconds per operation
averaged over the ranks (NVIDIA/nccl-tests v2.19.6 doc/PERFORMANCE.md "AllReduce", src/all_reduce.cu
AllReduceGetBw, src/common.cu averaging deltaSec over the ranks). When the aggregate is slow, each node runs
with its ring neighbours (pair_rounds, disjoint pairs per round) and a node slow with every neighbour is blamed
(two nodes: both, the pair cannot tell them apart).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from . import names

INFINIBAND_CLASS = "class/infiniband"
# Under mpirun rank 0's verdict reaches the launcher on stdout, in numbered chunks ("<marker><i>/<n> <text>"):
# mpirun's --tag-output prefixes what it forwards ("[1,0]<stdout>:"), also inside a line longer than one read of
# the rank's pipe, and another rank's output may come between the parts; short lines, each flushed on its own,
# are read whole, and a prefix found inside one is dropped.
RESULT_MARKER = "gpucluster-pre-step-result "
CHUNK_CHARS = 200
MPI_TAG = re.compile(r"\[\d+,\d+\]<std(?:out|err)>:")
PREFIX = "gpucluster pre-step check:"
SYSTEMIC_REASON = "most-nodes-failed"

# 1 GiB: on 2x p5.48xlarge nccl-tests reaches 437 GB/s there, 0.90 of its 16 GiB peak of 487 GB/s (the
# expected value; awsome-distributed-training micro-benchmarks/nccl-tests/README.md "Results"; 2x p4de: 76.8 at
# 1 GiB, 0.98 of 78.3 at 2 GiB), 4.6 ms per operation on p5, 26 ms on p4de. nccl-report passes 0.8 of the peak
# (hardware/nccl.py BUSBW_PASS_FRACTION); at 1 GiB that is 0.8 x 0.90 = 0.72 of the expected value, rounded
# down for torch's per-call overhead and rings over more than 2 nodes: 0.7. NCCL on sockets (the pod's one IP
# interface instead of 32 EFA devices) falls far below; one lost device of 32 (3 %) does not.
SIZE_BYTES = 1 << 30
PASS_FRACTION = 0.7
# 2 warm-up operations (the first builds the communicator), then as many timed as fit BUDGET_SECONDS, at most
# MAX_ITERS (0.23 s on p5), at least 1 (a few seconds on sockets): the measurement stays seconds either way.
WARMUP, MAX_ITERS, BUDGET_SECONDS = 2, 50, 2.0
# The kubelet keeps at most 4096 bytes of a termination message (Kubernetes docs, "Determine the Reason for Pod
# Failure": "the total message length ... is limited to 4096 bytes").
MESSAGE_MAX_BYTES = 4096


def efa_devices(sysfs_root: str) -> list[str]:
    """RDMA devices under <sysfs_root>/class/infiniband that are EFA's (a device whose driver link names
    another driver is not; a tree without driver links, as in tests, counts every entry)."""
    path = os.path.join(sysfs_root, INFINIBAND_CLASS)
    try:
        entries = sorted(os.listdir(path))
    except OSError:
        return []
    out = []
    for name in entries:
        driver = os.path.join(path, name, "device", "driver")
        if not os.path.islink(driver) or os.path.basename(os.readlink(driver)) == "efa":
            out.append(name)
    return out


def verdict(result: str, reason: str, detail: str) -> dict[str, str]:
    return {"verdict": result, "reason": reason, "detail": detail}


def local_check(sysfs_root: str, expected_efa: int, node: str, gpus: int | None = None,
                expected_gpus: int = 0) -> dict[str, str]:
    """This node's own check: at least `expected_efa` EFA devices and (when `gpus` is given) `expected_gpus` GPUs
    visible. Returns {"node", "verdict", "reason", "detail"}; message() keeps all but "node"."""
    found = len(efa_devices(sysfs_root))
    if found < expected_efa:
        out = verdict(names.VERDICT_FAIL, "efa-missing",
                      f"{found} of {expected_efa} EFA devices under {os.path.join(sysfs_root, INFINIBAND_CLASS)}")
    elif gpus is not None and gpus < expected_gpus:
        out = verdict(names.VERDICT_FAIL, "gpus-missing", f"{gpus} of {expected_gpus} GPUs visible to CUDA")
    else:
        out = verdict(names.VERDICT_PASS, "ok", f"{found} EFA devices" + (f", {gpus} GPUs" if gpus is not None else ""))
    return {"node": node, **out}


def bus_bandwidth_gbps(size_bytes: int, seconds: float, ranks: int) -> float:
    """nccl-tests' all_reduce busbw: algbw (size / 1e9 / seconds) x 2(n-1)/n."""
    return size_bytes / 1e9 / max(seconds, 1e-9) * (2 * (ranks - 1) / ranks)


def threshold_gbps(expected_gbps: float) -> float:
    return round(expected_gbps * PASS_FRACTION, 1)


def iterations_for(probe_seconds: float) -> int:
    """Timed operations after one took `probe_seconds` (the slowest rank's): what fits the budget."""
    return max(1, min(MAX_ITERS, int(BUDGET_SECONDS / probe_seconds) if probe_seconds > 0 else MAX_ITERS))


def pair_rounds(nodes: int) -> list[list[tuple[int, int]]]:
    """Each node with its ring neighbours (by node index), in rounds of disjoint pairs so no node's NICs carry two
    pairs at once: two rounds for an even count, three for an odd one (the closing pair alone)."""
    if nodes < 2:
        return []
    if nodes == 2:
        return [[(0, 1)]]
    ring = [(i, (i + 1) % nodes) for i in range(nodes)]
    if nodes % 2 == 0:
        return [ring[0::2], ring[1::2]]
    return [ring[0:nodes - 1:2], ring[1:nodes - 1:2], [ring[-1]]]


def judge(local: dict[str, dict[str, str]], busbw: float | None, expected_gbps: float,
          pairs: dict[tuple[str, str], float] | None = None) -> dict[str, dict[str, str]]:
    """Every node's verdict, from the local checks (node -> local_check()), the aggregate bus bandwidth and, when
    that was slow, the pairs' (node, node) -> GB/s. A node fails when its local check did or it was slow with
    every neighbour; one slow with some is peer-failed (its peer is to blame); of 2 slow nodes neither fails; and
    when more than half the nodes would fail, none does (systemic())."""
    if busbw is None or any(v["verdict"] != names.VERDICT_PASS for v in local.values()):
        return systemic({n: verdict(v["verdict"], v["reason"], v["detail"]) for n, v in local.items()})
    return systemic(_by_pairs(local, busbw, expected_gbps, pairs or {}))


def systemic(verdicts: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """More than half the nodes failing is not their fault: the image's NCCL or aws-ofi-nccl, a job env that takes
    NCCL off EFA, the pod's view of /sys/class/infiniband, a driver or AMI, or an expected value that is wrong for
    the type. Quarantining them would only make the autoscaler bring fresh nodes that fail the same way, so each
    failed node becomes peer-failed (SYSTEMIC_REASON), nobody is blamed, and the job runs."""
    bad = failed(verdicts)
    if len(bad) <= len(verdicts) // 2:
        return verdicts
    note = (f"{len(bad)} of {len(verdicts)} nodes failed: a fault of the job's image or setup, not of a node; "
            "no node is blamed")
    return {n: (verdict(names.VERDICT_PEER, SYSTEMIC_REASON, f"{v['reason']}: {v['detail']}; {note}")
                if n in bad else v) for n, v in verdicts.items()}


def _by_pairs(local: dict[str, dict[str, str]], busbw: float, expected_gbps: float,
              pairs: dict[tuple[str, str], float]) -> dict[str, dict[str, str]]:
    limit = threshold_gbps(expected_gbps)
    out = {}
    for node, own in local.items():
        mine = {(b if a == node else a): bw for (a, b), bw in pairs.items() if node in (a, b)}
        slow = {peer: bw for peer, bw in mine.items() if bw < limit}
        measured = "all_reduce " + ", ".join(f"with {peer} {bw:.1f} GB/s" for peer, bw in mine.items())
        if busbw >= limit or not slow:
            out[node] = verdict(names.VERDICT_PASS, "ok", measured if mine else own["detail"])
        elif len(local) == 2:
            # One pair cannot say which of its two nodes is slow: blame neither (the alerts watch the run).
            out[node] = verdict(names.VERDICT_PEER, "slow-pair", f"{measured}; pass at {limit:g} GB/s or more; "
                                                                  "2 nodes cannot tell which is slow")
        elif len(slow) == len(mine):
            out[node] = verdict(names.VERDICT_FAIL, "slow-all-reduce", f"{measured}; pass at {limit:g} GB/s or more")
        else:
            out[node] = verdict(names.VERDICT_PEER, "slow-peer", f"{measured}; pass at {limit:g} GB/s or more")
    return out


def failed(verdicts: dict[str, dict[str, Any]]) -> list[str]:
    return sorted(n for n, v in verdicts.items() if v.get("verdict") == names.VERDICT_FAIL)


def message(verdicts: dict[str, dict[str, Any]], busbw_gbps: float | None, expected_gbps: float | None,
            seconds: float, error: str | None = None) -> str:
    """The termination message: {names.PRE_STEP_MESSAGE_KEY: {"nodes", "busbw_gbps", "expected_gbps", "seconds"
    (, "error": why the check did not finish)}}, at most MESSAGE_MAX_BYTES: passing nodes' details go first,
    then passing and peer-failed nodes (counted in "omitted"), then failed nodes beyond what fits."""
    nodes = {n: {k: str(v.get(k, "")) for k in ("verdict", "reason", "detail")} for n, v in sorted(verdicts.items())}
    body: dict[str, Any] = {"nodes": nodes, "expected_gbps": expected_gbps, "seconds": round(seconds, 1),
                            "busbw_gbps": None if busbw_gbps is None else round(busbw_gbps, 1)}
    if error:
        body["error"] = error[:512]

    def dump() -> str:
        return json.dumps({names.PRE_STEP_MESSAGE_KEY: body}, sort_keys=True, separators=(",", ":"))

    def shorten(node: str, step: int) -> None:
        kind = nodes[node]["verdict"]
        if step == 0 and kind == names.VERDICT_PASS:
            nodes[node]["detail"] = ""
        elif (step == 1 and kind == names.VERDICT_PASS) or (step == 2 and kind == names.VERDICT_PEER) or step == 4:
            del nodes[node]
            body["omitted"] = len(verdicts) - len(nodes)
        elif step == 3:
            nodes[node]["detail"] = nodes[node]["detail"][:60]

    for step in range(5):
        for node in sorted(nodes, reverse=True):
            if len(dump().encode()) <= MESSAGE_MAX_BYTES:
                return dump()
            shorten(node, step)
    return dump()


def report_lines(text: str, enforced: bool = True) -> list[str]:
    """One line per node, then the bandwidth and the outcome, from a message (`enforced`: the pool fails jobs)."""
    body = json.loads(text)[names.PRE_STEP_MESSAGE_KEY]
    lines = [f"{PREFIX} node {n}: {'FAIL' if v['verdict'] == names.VERDICT_FAIL else v['verdict']} "
             f"({v['reason']}{': ' + v['detail'] if v['detail'] else ''})" for n, v in sorted(body["nodes"].items())]
    if body.get("omitted"):
        lines.append(f"{PREFIX} {body['omitted']} more node(s) left out of the 4096-byte message")
    expected, busbw = body.get("expected_gbps"), body.get("busbw_gbps")
    measured = (f"all_reduce bus bandwidth {busbw:g} GB/s, expected {expected:g} (pass at {threshold_gbps(expected):g})"
                if busbw is not None and expected else "no all_reduce")
    bad = failed(body["nodes"])
    everywhere = any(v["reason"] == SYSTEMIC_REASON for v in body["nodes"].values())
    outcome = (f"did not finish: {body['error']}" if body.get("error") else
               f"failed on {', '.join(bad)}" if bad else
               "failed on most nodes, so on none: look at the image and the job's NCCL setup" if everywhere
               else "passed")
    if exit_code(text, enforced):
        ends = f"exit {names.PRE_STEP_EXIT_CODE}, the job's command does not run"
    elif body.get("error"):
        ends = "the job's command runs anyway (a check that cannot finish never stops a job)"
    elif bad:
        ends = "the job's command runs anyway (the pool's remediation is not on: nothing would keep it off the node)"
    else:
        ends = "the job's command runs"
    return [*lines, f"{PREFIX} {measured}; {outcome} in {body['seconds']:g} s: {ends}"]


def readable(text: str) -> bool:
    try:
        return isinstance(json.loads(text)[names.PRE_STEP_MESSAGE_KEY]["nodes"], dict)
    except (ValueError, KeyError, TypeError):
        return False


def result_lines(text: str) -> list[str]:
    count = max(1, -(-len(text) // CHUNK_CHARS))
    return [f"{RESULT_MARKER}{i}/{count} {text[i * CHUNK_CHARS:(i + 1) * CHUNK_CHARS]}" for i in range(count)]


def assemble(payloads: list[str]) -> str:
    """The message from result_lines() as the launcher read them (what follows the marker on each line); "" when
    a chunk is missing or the whole does not read."""
    chunks: dict[int, str] = {}
    count = 0
    for payload in payloads:
        head, _, chunk = MPI_TAG.sub("", payload).partition(" ")
        index, _, total = head.partition("/")
        if index.isdigit() and total.isdigit():
            if index == "0":
                chunks = {}  # a newer message
            chunks[int(index)], count = chunk, int(total)
    text = "".join(chunks.get(i, "") for i in range(count))
    return text if len(chunks) == count and readable(text) else ""


def exit_code(text: str, enforced: bool) -> int:
    """86 when a node failed and the pool enforces the check; 0 otherwise, also when the check could not finish
    (its own fault must not stop a job)."""
    body = json.loads(text)[names.PRE_STEP_MESSAGE_KEY]
    return names.PRE_STEP_EXIT_CODE if enforced and not body.get("error") and failed(body["nodes"]) else 0
