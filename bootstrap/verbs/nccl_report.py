"""`python -m bootstrap nccl-report LOGFILE`: judge an nccl-tests all_reduce_perf run; or compare a pool's domains.

    nccl-report LOGFILE [--instance-type T] [--json]
    nccl-report --stack S [--pool P] [--json]     # the pool's `fabric-test` runs, on the cluster

Reads the nccl-tests 2.x table (out-of-place and in-place columns), the
`# Avg bus bandwidth` line, the `#  Rank ... on <host>` lines and the
NCCL_DEBUG=INFO lines that tell which network NCCL chose. Prefixes added by
launchers (mpirun --tag-output `[1,0]<stdout>:`, srun -l `0: `, kubectl
--timestamps) are ignored.

With --stack it reads the pool's fabric tests (`python -m bootstrap
fabric-test`: one per network domain, one across two) from the cluster, each
launcher's log judged as above against the pool's type; one test prints the
report above, several a table by domain: the bus bandwidth at the largest
size, the verdict, and how far each domain is below the best. A domain more
than FLAG_BELOW_BEST_PCT below the best is flagged: a healthy pair's
run-to-run spread is a few percent (components.core.hardware.nccl), so twice
that is a slower network or node, even when it passes against the reference.

Exit 0: PASS. Exit 1: FAIL (socket fallback, bus bandwidth below
nccl.BUSBW_PASS_FRACTION of the expected value, #wrong > 0, no data rows; a
flagged domain; a test not finished). Exit 2: unreadable file, bad
arguments, the cluster unreachable, or no fabric tests of the pool.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any

from bootstrap.cluster import kinds
from bootstrap.cluster.api import ClusterUnreachable, Kube, KubeError
from bootstrap.jobs import fabric_domains, state
from bootstrap.jobs.logs import MPI_ROLE
from bootstrap.offline.nccl_log import (
    judge,
    parse_log,
)
from bootstrap.stackfile import StackFileError
from bootstrap.verbs.jobs import common
from bootstrap.verbs.jobs.fabric_test import pick_pool
from components.core import config
from components.core.hardware import catalog, nccl, topology
from components.core.kube import launcher

PROG = "python -m bootstrap nccl-report"
# A domain this far below the best is flagged. A healthy pair's run-to-run spread is a few percent
# (nccl.BUSBW_PASS_FRACTION's note): 10 % is about twice it, and half the 20 % the pass line allows, so a domain
# still passing against the reference is flagged against its peers before it fails.
FLAG_BELOW_BEST_PCT = 10.0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Judge an nccl-tests all_reduce_perf log: peak bus bandwidth, transport, #wrong.",
    )
    parser.add_argument("logfile", nargs="?", help="nccl-tests output (e.g. kubectl logs of the MPIJob launcher)")
    parser.add_argument("--instance-type", help="judge bus bandwidth against this type's reference")
    parser.add_argument("--pool", help="with --stack: the pool whose fabric tests to compare (default: the only one)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    common.add_cluster_args(parser)
    try:
        args = parser.parse_args(argv)
        if (args.logfile is None) == (args.stack is None):
            parser.error("give a LOGFILE, or --stack for a pool's fabric tests on the cluster")
        if args.stack and args.instance_type:
            parser.error("--instance-type: with --stack the pool's type is judged")
        if args.pool and not args.stack:
            parser.error("--pool: only with --stack")
    except SystemExit as exit_:  # usage errors (2) and --help (0) as a return code
        return exit_.code if isinstance(exit_.code, int) else 2
    if args.stack:
        return cluster_main(args)

    if args.instance_type is not None and args.instance_type not in catalog.CATALOG:
        print(f"nccl-report: error: --instance-type: got {args.instance_type}; known: "
              f"{', '.join(catalog.GPU_TYPES)}", file=sys.stderr)
        return 2
    try:
        with open(args.logfile, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError as err:
        print(f"nccl-report: error: cannot read {args.logfile}: {err.strerror or err}", file=sys.stderr)
        return 2

    report = {"file": args.logfile, **judge(parse_log(text), args.instance_type)}
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0 if report["verdict"] == "PASS" else 1


@dataclass(frozen=True)
class TestResult:
    """One fabric test as the cluster shows it; `report` is judge()'s, None until it has finished."""

    name: str
    domains: tuple[str, ...]
    record: dict[str, Any]
    finished: str | None  # Succeeded, Failed
    report: dict[str, Any] | None
    largest: tuple[int, float] | None  # (size in bytes, busbw GB/s) at the largest size the run reached


def cluster_main(args: argparse.Namespace) -> int:
    try:
        cfg = common.load_stack(args)
        pool = pick_pool(cfg, args.pool)
        kube, namespace = common.cluster(args, cfg)
        # `fabric-test`'s runs; without one, the stack's own fabric test (gpuPools[].fabricTest) when it exists.
        jobs = kube.list(kinds.MPIJOB, namespace, fabric_domains.selector(pool.name)) or \
            [j for j in [kube.get(kinds.MPIJOB, launcher.nccl_test_name(pool), namespace)] if j]
        # Within a domain first (by domain), then the pair across two.
        results = sorted((read_test(kube, job, namespace, pool.instance_type) for job in jobs),
                         key=lambda r: (len(r.domains) != 1, r.domains, r.name))
    except (config.ConfigError, StackFileError, ClusterUnreachable, KubeError, common.BadArgument) as err:
        return common.fail(PROG, err)
    if not results:
        print(f"nccl-report: error: no fabric tests of pool {pool.name} in {namespace}: run `python -m bootstrap "
              f"fabric-test --stack {args.stack} --pool {pool.name}` first", file=sys.stderr)
        return 2
    if len(results) == 1 and results[0].report is not None:
        report = {"file": f"{namespace}/{results[0].name}", **results[0].report}
        print(json.dumps(report, indent=2) if args.json else render(report))
        return 0 if report["verdict"] == "PASS" else 1
    table = compare(pool.name, pool.instance_type, results)
    print(json.dumps(table, indent=2) if args.json else render_domains(table))
    return 0 if table["verdict"] == "PASS" else 1


def read_test(kube: Kube, job: dict[str, Any], namespace: str, instance_type: str) -> TestResult:
    """Its launcher's log judged (once it has finished), and its domains: those of the nodes its workers run on
    while they exist, else those it was pinned to (its record)."""
    name = job["metadata"]["name"]
    record = fabric_domains.read_record(job) or {}
    pods = kube.list(kinds.POD, namespace, f"{state.JOB_LABEL}={name}")
    workers = [p for p in pods if (p["metadata"].get("labels") or {}).get(MPI_ROLE) == "worker"]
    nodes = {n: kube.get(kinds.NODE, n) or {} for n in {(p.get("spec") or {}).get("nodeName") for p in workers} if n}
    domains = fabric_domains.domains_ran(workers, nodes, int(record.get("layer") or 0)) if record.get("layer") \
        else ()
    domains = domains or tuple(record.get("domains") or ())
    finished = "Succeeded" if state.condition(job, "Succeeded") else "Failed" if state.condition(job, "Failed") \
        else None
    if finished is None:
        return TestResult(name, domains, record, None, None, None)
    launchers = sorted((p for p in pods if (p["metadata"].get("labels") or {}).get(MPI_ROLE) == "launcher"),
                       key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"]))
    text = kube.pod_log(launchers[-1]["metadata"]["name"], namespace, "launcher") if launchers else ""
    log = parse_log(text)
    report = judge(log, instance_type)
    if finished == "Failed":
        report["reasons"].insert(0, "the job failed" + ("" if launchers else " (no launcher pod left to read)"))
        report["verdict"] = "FAIL"
    last = max(log.rows, key=lambda r: r.size_bytes, default=None)
    largest = (last.size_bytes, max(last.out_of_place_busbw, last.in_place_busbw)) if last else None
    return TestResult(name, domains, record, finished, report, largest)


def compare(pool: str, instance_type: str, results: list[TestResult]) -> dict[str, Any]:
    """The tests side by side: each one's bus bandwidth at its largest size and verdict; the spread between the
    best and the worst domain; a domain more than FLAG_BELOW_BEST_PCT below the best flagged."""
    within = [r for r in results if len(r.domains) == 1 and r.largest and r.largest[1] > 0]
    best = max(within, key=lambda r: r.largest[1], default=None)
    worst = min(within, key=lambda r: r.largest[1], default=None)
    layer = next((int(r.record["layer"]) for r in results if r.record.get("layer") is not None), 0)
    ref = nccl.busbw_reference(instance_type)
    rows, reasons = [], []
    for r in results:
        counts = r.record.get("domains") or {}
        below = round((1 - r.largest[1] / best.largest[1]) * 100, 1) if r.largest and best else None
        flagged = len(r.domains) == 1 and below is not None and below > FLAG_BELOW_BEST_PCT
        rows.append({"test": r.name, "domains": list(r.domains), "nodes": [counts.get(d) for d in r.domains],
                     "finished": r.finished, "verdict": r.report["verdict"] if r.report else None,
                     "size": nccl.format_bytes(r.largest[0]) if r.largest else None,
                     "size_bytes": r.largest[0] if r.largest else None,
                     "busbw_gbps": r.largest[1] if r.largest else None,
                     "below_best_pct": below, "flagged": flagged,
                     "reasons": r.report["reasons"] if r.report else []})
        where = " + ".join(r.domains) or "the pool"
        if r.report is None:
            reasons.append(f"{r.name} ({where}) has not finished: run this again when it has")
        elif r.report["verdict"] != "PASS":
            reasons.append(f"{r.name} ({where}) FAIL: {'; '.join(r.report['reasons'])}")
        if flagged:
            reasons.append(f"domain {r.domains[0]} is {below:.1f}% below the best, {best.domains[0]} "
                           f"({best.largest[1]:.2f} GB/s): more than {FLAG_BELOW_BEST_PCT:g}%, a slower network "
                           "node or a slow node in it; run fabric-test again to confirm, then check its nodes "
                           "(doctor, dcgmi diag) or cordon them")
    untested: dict[str, list[str]] = {}
    unlabeled: set[str] = set()
    for r in results:
        untested.update(r.record.get("untested") or {})
        unlabeled.update(r.record.get("unlabeled") or [])
    return {"pool": pool, "instance_type": instance_type, "layer": layer,
            "label": topology.layer_label(layer) if layer else None,
            "expected_busbw_gbps": ref.gbps if ref else None,
            "expected_size": nccl.format_bytes(ref.size_bytes) if ref else None,
            "expected_is_estimate": ref.estimate if ref else None,
            "pass_threshold_gbps": round(ref.gbps * nccl.BUSBW_PASS_FRACTION, 2) if ref else None,
            "flag_below_best_pct": FLAG_BELOW_BEST_PCT, "tests": rows,
            "best": {"domain": best.domains[0], "busbw_gbps": best.largest[1]} if best else None,
            "worst": {"domain": worst.domains[0], "busbw_gbps": worst.largest[1]} if worst else None,
            "spread_pct": round((1 - worst.largest[1] / best.largest[1]) * 100, 1) if best else None,
            "untested": dict(sorted(untested.items())), "unlabeled": sorted(unlabeled),
            "verdict": "FAIL" if reasons else "PASS", "reasons": reasons}


def render(report: dict) -> str:
    """The human report."""
    lines = [f"nccl-tests all_reduce report: {report['file']}"]
    if report["ranks"]:
        lines.append(f"Ranks:       {report['ranks']} on {report['nodes']} node(s)")
    lines.append(f"Transport:   {report['transport']}")
    if report["peak_busbw_gbps"] is not None:
        lines.append(f"Peak busbw:  {report['peak_busbw_gbps']:.2f} GB/s at {report['peak_size']}")
    if report["avg_busbw_gbps"] is not None:
        lines.append(f"Avg busbw:   {report['avg_busbw_gbps']:g} GB/s (# Avg bus bandwidth)")
    if report["expected_busbw_gbps"] is not None:
        lines.append(f"Expected:    {report['expected_busbw_gbps']:g} GB/s at {report['expected_size']} "
                     f"for 2x {report['instance_type']}"
                     f"{' (estimate)' if report['expected_is_estimate'] else ''}; "
                     f"pass at >= {report['pass_threshold_gbps']:.1f} GB/s")
    lines.append(f"#wrong:      {report['wrong']}")
    lines.append(f"Verdict:     {report['verdict']}")
    lines += [f"  - {reason}" for reason in report["reasons"]]
    lines += [f"Note: {note}" for note in report["notes"]]
    return "\n".join(lines)


def render_domains(table: dict[str, Any]) -> str:
    """The comparison as a table, one row per test and per untested domain."""
    where = f", domains of {table['label']}" if table["label"] else ""
    lines = [f"nccl-tests all_reduce by network domain: pool {table['pool']}, 2x {table['instance_type']} per "
             f"test{where}"]
    if table["expected_busbw_gbps"] is not None:
        lines.append(f"Expected:    {table['expected_busbw_gbps']:g} GB/s at {table['expected_size']} "
                     f"for 2x {table['instance_type']}{' (estimate)' if table['expected_is_estimate'] else ''}; "
                     f"pass at >= {table['pass_threshold_gbps']:.1f} GB/s")
    else:
        lines.append(f"Expected:    no bus bandwidth reference for {table['instance_type']} (no EFA)")
    best = (table["best"] or {}).get("domain")
    cells = [["DOMAIN", "NODES", "TEST", "SIZE", "BUSBW GB/s", "VERDICT", "VS BEST"]]
    for row in table["tests"]:
        if row["below_best_pct"] is None:
            versus = "-"
        elif row["domains"] == [best]:
            versus = "best"
        else:
            versus = f"{-row['below_best_pct']:+.1f}%" + (" (flagged)" if row["flagged"] else "")
        cells.append([" + ".join(row["domains"]) or "(anywhere)", "+".join(str(n or "?") for n in row["nodes"]) or "-",
                      row["test"], row["size"] or "-", "-" if row["busbw_gbps"] is None else f"{row['busbw_gbps']:.2f}",
                      row["verdict"] or "not finished", versus])
    for domain, nodes in table["untested"].items():
        cells.append([domain, str(len(nodes)), "-", "-", "-", "untested", "-"])
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in cells]
    if table["best"] and table["worst"] and table["best"]["domain"] != table["worst"]["domain"]:
        lines.append(f"Spread:      {table['spread_pct']:.1f}% between the best domain, {table['best']['domain']} "
                     f"({table['best']['busbw_gbps']:.2f} GB/s), and the worst, {table['worst']['domain']} "
                     f"({table['worst']['busbw_gbps']:.2f} GB/s); flagged beyond {table['flag_below_best_pct']:g}%")
    across = next((r for r in table["tests"] if len(r["domains"]) == 2 and r["busbw_gbps"] is not None), None)
    if across and table["best"]:
        lines.append(f"Across:      {across['busbw_gbps']:.2f} GB/s between two domains against "
                     f"{table['best']['busbw_gbps']:.2f} GB/s within the best one ({-across['below_best_pct']:+.1f}%)")
    if table["unlabeled"]:
        lines.append(f"Unlabeled:   {', '.join(table['unlabeled'])}: no {table['label']} label when the tests were "
                     "submitted, untested")
    lines.append(f"Verdict:     {table['verdict']}")
    lines += [f"  - {reason}" for reason in table["reasons"]]
    return "\n".join(lines)
