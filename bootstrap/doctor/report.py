"""doctor's output: the causes first (evidence, fix), then what was read; or one JSON object for tools."""

from __future__ import annotations

import textwrap
from typing import Any

from bootstrap.doctor.bundle import KINDS, Bundle
from bootstrap.doctor.findings import Finding


def read_summary(bundle: Bundle, source: str) -> dict[str, Any]:
    """What the diagnosis rests on: counts per kind (None: not in the bundle), logs, scaling activities, notes."""
    return {
        "source": source,  # "cluster" or "bundle"
        "bundle": bundle.path,
        "namespace": bundle.namespace,
        "job": bundle.job,
        "cluster": bundle.cluster,
        "collectedAt": bundle.collected_at,
        "objects": {kind: (len(bundle.objects[kind]) if kind in bundle.objects else None) for kind in KINDS},
        "logs": len(bundle.logs),
        "previousLogs": len(bundle.previous_logs),
        "scalingActivities": None if bundle.scaling_activities is None else len(bundle.scaling_activities),
        "aws": (bundle.extra.get("aws") or {}).get("scalingActivities"),
        "notes": list(bundle.notes),
    }


def as_json(bundle: Bundle, findings: list[Finding], source: str) -> dict[str, Any]:
    return {"healthy": not findings, "findings": [f.as_json() for f in findings],
            "read": read_summary(bundle, source)}


def _wrap(text: str, indent: str) -> list[str]:
    return textwrap.wrap(text, width=100, initial_indent=indent, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False) or [indent]


def render(bundle: Bundle, findings: list[Finding], source: str) -> str:
    what = f"job {bundle.job}" if bundle.job else "every job"
    head = f"doctor: {what} in namespace {bundle.namespace}: "
    lines = [head + (f"{len(findings)} cause{'s' if len(findings) != 1 else ''} found" if findings
                     else "no known cause of trouble found")]
    for number, finding in enumerate(findings, 1):
        lines += ["", f"{number}. [{finding.cause}] {finding.title}"]
        for evidence in finding.evidence:
            when = evidence.time or ("no time in the line" if evidence.source == "log" else "no time recorded")
            lines.append(f"   {evidence.source}: {evidence.where}, {when}")
            lines.append(f"     {evidence.text}")
        lines += _wrap(f"fix: {finding.fix}", "   ")
    summary = read_summary(bundle, source)
    counts = ", ".join(f"{n} {kind}{'s' if n != 1 else ''}" for kind, n in summary["objects"].items() if n)
    read = [f"{counts or 'no objects'}; {summary['logs']} container log{'s' if summary['logs'] != 1 else ''}"
            + (f" ({summary['previousLogs']} more from before a restart)" if summary["previousLogs"] else "")]
    if summary["scalingActivities"] is not None:
        read.append(f"{summary['scalingActivities']} Auto Scaling activities")
    elif summary["aws"]:
        read.append(f"Auto Scaling activities {summary['aws']}")
    origin = f"the bundle in {bundle.path}/" if source == "bundle" else "the cluster"
    if source == "bundle" or bundle.path:
        origin += f", collected {bundle.collected_at}" if source == "bundle" else f" (bundle written to {bundle.path})"
    lines += [""] + _wrap(f"Read from {origin}: {'; '.join(read)}.", "")
    lines += [f"Note: {note}" for note in summary["notes"]]
    return "\n".join(lines)
