"""What doctor reports: a cause, the evidence that names it (the exact line, where and when), the fix."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from bootstrap.doctor.bundle import event_time

# An ISO 8601 time near the start of a line (kubectl logs --timestamps, Python loggers, Megatron's
# "[2026-12-05 10:05:12]"), after a launcher prefix such as "[rank0]:" or "[1,0]<stdout>:".
_LINE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
_TIME_WITHIN = 48
# glog's prefix (PyTorch's C++ logs): "[rank8]:[E1205 10:42:17.201856419 ProcessGroupNCCL.cpp:632]", no year.
_GLOG_TIME = re.compile(r"\[[IWEF](\d{2})(\d{2}) (\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?)\d* ")


@dataclass(frozen=True)
class Evidence:
    """One observation: `where` is Kind/name (and container for logs), `text` exactly as read."""

    source: str  # log | event | condition | status | activity
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
