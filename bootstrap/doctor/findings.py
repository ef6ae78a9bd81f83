"""What doctor reports: a cause, the evidence that names it (the exact line, where and when), the fix; and the report.

The report puts the causes first (evidence, fix), then what was read; or it is one JSON object for tools.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from typing import Any

from bootstrap.doctor.bundle import KINDS, Bundle, event_time

# An ISO 8601 time near the start of a line (kubectl logs --timestamps, Python loggers, Megatron's
# "[2026-12-05 10:05:12]"), after a launcher prefix such as "[rank0]:" or "[1,0]<stdout>:".
_LINE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
_TIME_WITHIN = 48
# glog's prefix (PyTorch's C++ logs): "[rank8]:[E1205 10:42:17.201856419 ProcessGroupNCCL.cpp:632]", no year.
_GLOG_TIME = re.compile(r"\[[IWEF](\d{2})(\d{2}) (\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?)\d* ")


@dataclass(frozen=True)
class Evidence:
    """One observation: `where` is Kind/name (and container for logs), `text` exactly as read."""

    source: str  # log | event | condition | status | activity | metric
    where: str
    text: str
    time: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"source": self.source, "where": self.where, "time": self.time, "text": self.text}


@dataclass(frozen=True)
class Finding:
    cause: str  # a stable id, e.g. "nccl-watchdog-timeout"
    title: str
    evidence: tuple[Evidence, ...]
    fix: str
    details: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        out = {"cause": self.cause, "title": self.title, "evidence": [e.as_json() for e in self.evidence],
               "fix": self.fix}
        if self.details:
            out["details"] = self.details
        return out


def line_time(line: str) -> str | None:
    """The line's own time: ISO 8601 as written, or glog's as "MM-DD HH:MM:SS" (glog prints no year)."""
    match = _LINE_TIME.search(line)
    if match and match.start() < _TIME_WITHIN:
        return match.group(0)
    glog = _GLOG_TIME.search(line)
    if glog and glog.start() < _TIME_WITHIN:
        return f"{glog.group(1)}-{glog.group(2)} {glog.group(3)}"
    return None


def log_evidence(pod: str, container: str, line: str, previous: bool = False) -> Evidence:
    where = f"Pod/{pod} container {container}" + (" (before its restart)" if previous else "")
    return Evidence("log", where, line.rstrip(), line_time(line))


def event_evidence(event: dict[str, Any]) -> Evidence:
    obj = event.get("involvedObject") or {}
    source = (event.get("source") or {}).get("component") or event.get("reportingComponent") or ""
    text = f"{event.get('type', 'Normal')} {event.get('reason', '')}: {event.get('message', '')}"
    where = f"{obj.get('kind', '?')}/{obj.get('name', '?')}" + (f" (from {source})" if source else "")
    return Evidence("event", where, text, event_time(event) or None)


def condition_evidence(obj: dict[str, Any], condition: dict[str, Any]) -> Evidence:
    text = (f"{condition.get('type')}={condition.get('status')} reason {condition.get('reason', '')}: "
            f"{condition.get('message', '')}").rstrip(": ")
    return Evidence("condition", f"{obj.get('kind')}/{obj['metadata']['name']}", text,
                    condition.get("lastTransitionTime") or condition.get("lastHeartbeatTime"))


def conditions(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return list((obj.get("status") or {}).get("conditions") or [])


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in conditions(obj) if c.get("type") == ctype), None)


# -- the report ----------------------------------------------------------------------------------


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


def report_json(bundle: Bundle, findings: list[Finding], source: str) -> dict[str, Any]:
    return {"healthy": not findings, "findings": [f.as_json() for f in findings],
            "read": read_summary(bundle, source)}


def _wrap(text: str, indent: str) -> list[str]:
    return textwrap.wrap(text, width=100, initial_indent=indent, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False) or [indent]


def report_text(bundle: Bundle, findings: list[Finding], source: str) -> str:
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
