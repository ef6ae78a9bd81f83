"""The goodput loop's own traces: a pre-step check that failed, and nodes the controller quarantined.

Sources (ours, components/core/goodput/names.py):
- the pre-step check (precheck.py) exits names.PRE_STEP_EXIT_CODE and leaves one JSON object under
  names.PRE_STEP_MESSAGE_KEY as the container's termination message, which the kubelet copies into
  status.containerStatuses[].state.terminated.message (or lastState after a restart), the same in
  every pod of the job: every node's verdict, the bus bandwidth measured and expected;
- the remediation controller (controller.py) taints a node names.QUARANTINE_TAINT_KEY=<reason>
  with names.EVIDENCE_ANNOTATION, and appends what it did (or, in dry-run, would have done) to
  the job object's names.REMEDIATIONS_ANNOTATION.
"""

from __future__ import annotations

import json
from typing import Any

from bootstrap.doctor.bundle import JOB_KINDS, Bundle, name
from bootstrap.doctor.findings import Evidence, Finding
from bootstrap.doctor.rules_pods import container_statuses
from components.core.goodput import events, names


def check_verdict(status: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """(the check's verdict, when it finished) from a container status that ended with the check's exit code."""
    for state in ("state", "lastState"):
        ended = (status.get(state) or {}).get("terminated") or {}
        if ended.get("exitCode") != names.PRE_STEP_EXIT_CODE:
            continue
        try:
            verdict = json.loads(ended.get("message") or "").get(names.PRE_STEP_MESSAGE_KEY)
        except (ValueError, AttributeError):
            verdict = None
        if isinstance(verdict, dict):
            return verdict, ended.get("finishedAt") or ""
    return None


def _failed_nodes(verdict: dict[str, Any]) -> dict[str, dict[str, Any]]:
    nodes = verdict.get("nodes") or {}
    return {n: v for n, v in nodes.items() if isinstance(v, dict) and v.get("verdict") == names.VERDICT_FAIL}


def _quarantined(bundle: Bundle, node: str) -> str | None:
    """The quarantine taint's reason on `node`, if the bundle has the node and it is tainted."""
    found = bundle.node(node)
    for taint in ((found or {}).get("spec") or {}).get("taints") or []:
        if taint.get("key") == names.QUARANTINE_TAINT_KEY:
            return taint.get("value") or "?"
    return None


def pre_step_check_failed(bundle: Bundle) -> list[Finding]:
    for pod in bundle.pods:
        for status in container_statuses(pod):
            found = check_verdict(status)
            if found is None:
                continue
            verdict, at = found
            failed = _failed_nodes(verdict)
            if not failed:
                continue
            blamed = ", ".join(f"{n} ({v.get('reason', '?')}: {v.get('detail', '')})".replace(": )", ")")
                               for n, v in sorted(failed.items()))
            busbw, expected = verdict.get("busbw_gbps"), verdict.get("expected_gbps")
            measured = (f"; all_reduce bus bandwidth {busbw:g} GB/s against {expected:g} GB/s expected"
                        if isinstance(busbw, (int, float)) and isinstance(expected, (int, float)) else "")
            quarantined = {n: _quarantined(bundle, n) for n in failed}
            if all(quarantined.values()):
                fix = ("the goodput controller quarantined it (taint gpucluster.io/quarantine, cordoned): the job "
                       "restarts on other nodes by itself; terminate the instance to replace it "
                       "(`kubectl describe node <node>` shows the evidence)")
            else:
                fix = ("the pool's remediation is off (or dry-run), so nothing kept the job off it: `kubectl cordon "
                       f"{' '.join(sorted(n for n, q in quarantined.items() if not q))}` and delete the job's pod on "
                       "it, or set gpuPools[].remediation: on")
            return [Finding("pre-step-check-failed", f"The pre-step check failed on {blamed}{measured}",
                            (Evidence("status", f"Pod/{name(pod)} container {status.get('name')}",
                                      f"terminated with exit code {names.PRE_STEP_EXIT_CODE}: "
                                      f"{json.dumps(verdict, sort_keys=True)}", at or None),),
                            fix, {"nodes": sorted(failed), "quarantined": sorted(n for n, q in quarantined.items()
                                                                                 if q)})]
    return []


def node_quarantined(bundle: Bundle) -> list[Finding]:
    """What the controller did to the job's nodes (or, in dry-run, would have), from the job's own record."""
    findings = []
    for kind in JOB_KINDS:
        for job in bundle.of(kind):
            records = events.remediations(job)
            if not records:
                continue
            evidence = tuple(Evidence("annotation", f"{kind}/{name(job)}",
                                      f"{r.get('action')} {r.get('node')} ({r.get('reason')}, mode {r.get('mode')})",
                                      r.get("at")) for r in records)
            done = [r for r in records if r.get("action") == names.ACTION_QUARANTINED]
            if done:
                title = (f"The goodput controller quarantined {len({r.get('node') for r in done})} node(s) under the "
                         f"job and restarted it: {', '.join(sorted({r.get('reason', '?') for r in done}))}")
                fix = ("nothing to do for the job (it resumes from its newest checkpoint on a replacement); a "
                       "quarantined node runs no new pod and cluster-autoscaler removes it once idle, except on a "
                       "pool at its minNodes, where it stays and holds a slot: the taint gpucluster.io/quarantine "
                       "names it; terminate the instance or put it back (README, Goodput)")
            else:
                title = (f"Dry run: the goodput controller would have quarantined "
                         f"{', '.join(sorted({r.get('node', '?') for r in records}))}")
                fix = ("the pool's remediation is dry-run, so the job still runs on it: check the evidence and set "
                       "gpuPools[].remediation: on to act, or cordon the node yourself")
            findings.append(Finding("node-quarantined", title, evidence, fix, {"records": records}))
    return findings
