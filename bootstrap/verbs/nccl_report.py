"""`python -m bootstrap nccl-report LOGFILE`: judge an nccl-tests all_reduce_perf run.

    nccl-report LOGFILE [--instance-type T] [--json]

Reads the nccl-tests 2.x table (out-of-place and in-place columns), the
`# Avg bus bandwidth` line, the `#  Rank ... on <host>` lines and the
NCCL_DEBUG=INFO lines that tell which network NCCL chose. Prefixes added by
launchers (mpirun --tag-output `[1,0]<stdout>:`, srun -l `0: `, kubectl
--timestamps) are ignored.

Exit 0: PASS. Exit 1: FAIL (socket fallback, bus bandwidth below
nccl.BUSBW_PASS_FRACTION of the expected value, #wrong > 0, no data rows).
Exit 2: unreadable file or bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys

from bootstrap.offline.nccl_log import (
    judge,
    parse_log,
)
from components.core.hardware import catalog


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bootstrap nccl-report",
        description="Judge an nccl-tests all_reduce_perf log: peak bus bandwidth, transport, #wrong.",
    )
    parser.add_argument("logfile", help="nccl-tests output (e.g. kubectl logs of the MPIJob launcher)")
    parser.add_argument("--instance-type", help="judge bus bandwidth against this type's reference")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # usage errors (2) and --help (0) as a return code
        return exit_.code if isinstance(exit_.code, int) else 2

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
