"""The controller's /metrics (Prometheus text format 0.0.4) and /healthz, over http.server (standard library).

Served: names.GPU_SECONDS_METRIC{namespace, gpucluster_job, phase} and names.GOODPUT_METRIC{namespace,
gpucluster_job} for every job of the last pass, REMEDIATIONS_METRIC{reason, action} counted since the start,
and LAST_PASS_METRIC. The job's own `namespace` label is kept by the ServiceMonitor's honorLabels
(goodput_agent.py): without it Prometheus would rename it exported_namespace for the target's namespace.
/healthz answers 200 while the last good pass is at most HEALTHY_PASSES intervals old.
"""

from __future__ import annotations

import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from . import names

REMEDIATIONS_METRIC = "gpucluster_goodput_remediations_total"
LAST_PASS_METRIC = "gpucluster_goodput_last_pass_timestamp_seconds"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
HEALTHY_PASSES = 3  # and at least a minute: the API server or Prometheus may be slow for a pass or two
HELP = {
    names.GPU_SECONDS_METRIC: ("gauge", "GPU-seconds a job has paid for, by phase (they add up to its GPUs x wall "
                                        "clock)"),
    names.GOODPUT_METRIC: ("gauge", "A job's training GPU-seconds over all it paid for"),
    REMEDIATIONS_METRIC: ("counter", "Nodes the goodput controller quarantined (or, dry-run, would have), by "
                                     "reason and action"),
    LAST_PASS_METRIC: ("gauge", "When the goodput controller last finished a pass (Unix seconds)"),
}


def escape(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def sample(metric: str, labels: dict[str, str], value: float) -> str:
    inner = ",".join(f'{k}="{escape(v)}"' for k, v in labels.items())
    number = "NaN" if math.isnan(value) else repr(float(value))
    return f"{metric}{{{inner}}} {number}" if inner else f"{metric} {number}"


class Metrics:
    """What the last pass found, swapped whole under a lock (the HTTP threads read it)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.job_lines: list[str] = []
        self.counts: dict[tuple[str, str], int] = {}
        self.last_pass: float | None = None
        self.interval = 10.0

    def jobs(self, found: list[tuple[str, str, dict[str, Any]]]) -> None:
        """(namespace, job, accounting breakdown: {"gpu_seconds": {phase: seconds}, "goodput": ratio or None})."""
        lines = []
        for namespace, job, breakdown in found:
            for phase in names.PHASES:
                seconds = (breakdown.get("gpu_seconds") or {}).get(phase, 0.0)
                lines.append(sample(names.GPU_SECONDS_METRIC, {"namespace": namespace, "gpucluster_job": job,
                                                               "phase": phase}, seconds))
        for namespace, job, breakdown in found:
            if breakdown.get("goodput") is not None:
                lines.append(sample(names.GOODPUT_METRIC, {"namespace": namespace, "gpucluster_job": job},
                                    breakdown["goodput"]))
        with self.lock:
            self.job_lines = lines

    def remediated(self, reason: str, action: str) -> None:
        with self.lock:
            self.counts[(reason, action)] = self.counts.get((reason, action), 0) + 1

    def passed(self, at: float, interval: float) -> None:
        with self.lock:
            self.last_pass, self.interval = at, interval

    def healthy(self, now: float) -> bool:
        with self.lock:
            return self.last_pass is not None and now - self.last_pass <= max(60.0, HEALTHY_PASSES * self.interval)

    def text(self) -> str:
        with self.lock:
            jobs, counts, last = list(self.job_lines), dict(self.counts), self.last_pass
        by_metric: dict[str, list[str]] = {m: [] for m in HELP}
        for line in jobs:
            by_metric[line.split("{", 1)[0]].append(line)
        for (reason, action), n in sorted(counts.items()):
            by_metric[REMEDIATIONS_METRIC].append(sample(REMEDIATIONS_METRIC, {"reason": reason, "action": action}, n))
        if last is not None:
            by_metric[LAST_PASS_METRIC].append(sample(LAST_PASS_METRIC, {}, last))
        out = []
        for metric, (kind, text) in HELP.items():
            if by_metric[metric]:
                out += [f"# HELP {metric} {text}", f"# TYPE {metric} {kind}", *by_metric[metric]]
        return "\n".join(out) + "\n"


def serve(metrics: Metrics, bind: str, port: int) -> ThreadingHTTPServer:
    """A started server: GET /metrics and /healthz; `.server_address` has the port (0: any free one)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.split("?")[0] == "/metrics":
                code, body, kind = 200, metrics.text(), CONTENT_TYPE
            elif self.path.split("?")[0] == "/healthz":
                ok = metrics.healthy(time.time())
                code, body, kind = (200, "ok\n", "text/plain") if ok else (503, "no pass lately\n", "text/plain")
            else:
                code, body, kind = 404, "not found\n", "text/plain"
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass  # a scrape every 30 s and probes: not worth a log line each

    server = ThreadingHTTPServer((bind, port), Handler)
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server
