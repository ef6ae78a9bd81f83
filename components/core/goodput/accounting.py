"""Where a job's paid GPU-seconds went: the events of its life, the record that keeps them, its breakdown.

Standard library only (this file ships into the cluster). The controller calls observe() on what is live each
round, merge() into the job's record (a ConfigMap: names.RECORD_PREFIX + job, data[names.RECORD_KEY], since pods
and their logs go with each restart) and breakdown() for its metrics; `bootstrap report` does the same with what
it reads. Every second from the job's creation to its end (now, or the end of its idle tail) is exactly one phase of names.PHASES, in whole seconds, so the phases add up to the wall-clock time exactly:

- queued: the Workload waits for quota, from creation to the first QuotaReserved (or Admitted), and again from
  an eviction (once the evicted pods have terminated) to the next;
- scaling_up: from admission until every GPU pod of the first attempt is scheduled (PodScheduled): nodes added;
- pulling_image: from then until every container of the first attempt has started (pulls, init containers);
- initialising: from then to the first step line (imports, rendezvous, the pre-step check, loading a checkpoint);
- training: from the first step line on, between the step lines of the steps that were kept; with no step line
  at all (a script without them, or none yet) from the containers' start: an upper bound ("step_lines" false);
- checkpointing: inside each checkpoint line's start..end (wherever it falls: a checkpoint on SIGTERM too);
- lost_to_restarts: from a failure until the job passes the step it had reached before it: the partial step
  after the last step line, re-scheduling, re-pulling, re-initialising and the recomputed steps. A failure is a
  container that ended with a non-zero code, a pod deleted (remediation, eviction, the JobSet's restart), an
  eviction, a pod of a new restart attempt (jobset.sigs.k8s.io/restart-attempt) or a re-created pod of the same
  name (the MPI Operator's workers), or step numbers that go back. Without step lines, until containers start.
- idle_tail: from the job's end (Succeeded or Failed) until the first of: the nodes of its last attempt gone
  (when last seen); a pod not of the job (nor a DaemonSet's) scheduled on one of them (the next job's: they are
  its nodes now); the cap, the pool's idleMinutes + TAIL_MARGIN_MINUTES after the end (TAIL_CAP_MINUTES when the
  record does not know them). Until then, up to now. None on a pool whose nodes bill while queued (they stay: a
  reservation, minNodes). Once the tail is closed, the record is final: merge() leaves it as it is.

Where two apply, the first of idle_tail, checkpointing, queued, lost_to_restarts wins. GPU-seconds are seconds x
the job's GPUs (nodes x GPUs per node); paid GPU-seconds leave out queued unless the record says the pool's nodes
bill while the job waits ("bills_while_queued"); goodput = training / paid; useful steps = the highest step line
less the lowest plus one; cost per useful step = paid GPU-hours x "gpu_hour_usd" / useful steps.

Kubernetes times are whole seconds, truncated: a step line within FAILURE_SLACK after a failure's time is still
of the attempt that failed. Times the controller did not see (between two rounds) are what it saw last.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
from collections.abc import Iterable
from datetime import UTC, datetime

from . import names
from . import steps as step_lines

# The accounting API is this module's: observe() and the job's facts live in events.py, re-exported here.
from .events import _MERGED, FAILURE_SLACK, VERSION, job_gpus, job_pod_selector, observe, remediations  # noqa: F401

MAX_PODS, MAX_FAILURES, MAX_CHECKPOINTS, MAX_STARTS = 400, 400, 4000, 8  # a record stays far below 1 MiB
# The idle tail's cap. cluster-autoscaler removes a node idle for the pool's idleMinutes (at most 60:
# config/pools.py IDLE_MINUTES_MAX); draining a node without training pods and terminating the instance take
# a minute or two more (planning/teardown.py removal_minutes: idleMinutes + 2). Nodes alive after that are not
# idling for this job (another one's pods, a pod the controller does not see, a scale-down blocked): not its cost.
TAIL_MARGIN_MINUTES = 2
TAIL_CAP_MINUTES = 60  # when the record has no idleMinutes (its pool event did not say): the largest allowed
GANG_RESTART_SECONDS = 10  # failures this close are one restart of the gang (see _restarts)


def _key(e: dict) -> tuple:
    kind = e["type"]
    return {"created": (kind,), "pod": (kind, e.get("uid")), "node": (kind, e.get("node")),
            "step": (kind, e.get("step"), e.get("at")), "checkpoint": (kind, e.get("step"), e.get("start"), e.get("end")),
            "failure": (kind, e.get("at"), e.get("uid"), e.get("reason"))}.get(kind, (kind, e.get("at")))


def _merge_entry(old: dict, new: dict) -> dict:
    out = dict(old)
    if new["type"] == "node":  # seen: merge() moves it on once the job has finished
        out.update(created=old.get("created") or new.get("created"), gone=False)
        return out  # seen and reused: merge() sets them
    for k in ("created", "scheduled", "started"):  # the first seen
        known = [v for v in (old.get(k), new.get(k)) if v is not None]
        out[k] = min(known) if known else None
    out.update({k: new[k] for k in ("pod", "attempt", "node", "gpu") if new.get(k) is not None})
    out["ended"] = new.get("ended")  # as now: a container restarted in place runs again
    starts = sorted(set(old.get("starts") or []) | set(new.get("starts") or []))
    out["starts"] = starts[:1] + starts[1:][-(MAX_STARTS - 1):]
    return out


def _new_record(job: dict) -> dict:
    meta = job["metadata"]
    return {"version": VERSION, "namespace": meta.get("namespace"), "name": meta.get("name"), "kind": job.get("kind"),
            "uid": meta.get("uid"), "nodes": 0, "gpus_per_node": 0, "gpus": 0, "bills_while_queued": False,
            "gpu_hour_usd": None, "events": []}


def merge(record: dict | None, events: Iterable[dict], job: dict) -> dict:
    """The record with `events` in (a new one for a job it is not of); the input record is left as it was. A
    finished job's record whose idle tail is closed is final: returned as it was.

    An event {"type": "pool", "gpu_hour_usd", "bills_while_queued", "idle_minutes" (optional)} sets the pool's
    terms in the record."""
    meta = job["metadata"]
    fresh = record is None or record.get("version") != VERSION or record.get("uid") != meta.get("uid")
    out = _new_record(job) if fresh else json.loads(json.dumps(record))
    if not fresh and _closed(out):
        return out
    nodes, per_node = job_gpus(job)
    if nodes and per_node:
        out.update(nodes=nodes, gpus_per_node=per_node, gpus=nodes * per_node)
    kept = {_key(e): e for e in out["events"]}
    folded_until = (out.get("folded_checkpoints") or {}).get("until") or -math.inf
    observed, reused = [], []
    for e in events:
        kind = e["type"]
        if kind == "observed":
            observed.append(e)
        elif kind == "reused":
            reused.append(e)
        elif kind == "pool":
            out.update(gpu_hour_usd=e.get("gpu_hour_usd"), bills_while_queued=bool(e.get("bills_while_queued")))
            if e.get("idle_minutes") is not None:
                out["idle_minutes"] = e["idle_minutes"]
        elif kind == "checkpoint" and e["start"] <= folded_until:
            continue  # counted in folded_checkpoints already
        elif (key := _key(e)) in kept:
            if kind in _MERGED:
                kept[key] = _merge_entry(kept[key], e)
        else:
            kept[key] = dict(e)
    # When a node was last seen matters once the job has finished (its idle tail), up to the tail's cap: not
    # before nor after, so that a record changes only when something happens.
    done = min((e["at"] for e in kept.values() if e["type"] == "finished"), default=None)
    node_entries = [e for e in kept.values() if e["type"] == "node"]
    for o in (o for o in observed if o.get("nodes") is not None):
        for e in node_entries:
            e["gone"] = e["node"] not in o["nodes"]
            if done is not None and not e["gone"]:
                e["seen"] = max(e.get("seen") or 0.0, min(o["at"], done + _tail_cap(out)))
    for r in reused:  # only for the job's nodes: observe() does not know which they are
        for e in (e for e in node_entries if e["node"] == r["node"]):
            e["reused"] = min(e.get("reused") or r["at"], r["at"])
    out["events"] = _thin(list(kept.values()), out)
    return out


def _by_type(events: Iterable[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {k: [] for k in ("created", "quota_reserved", "admitted", "evicted", "finished",
                                                  "failure", "pod", "node", "step", "checkpoint")}
    for e in events:
        out.setdefault(e["type"], []).append(e)
    out["step"].sort(key=lambda e: (e["at"], e["step"]))
    out["checkpoint"].sort(key=lambda e: (e["start"], e["end"]))
    return out


def _failure_times(by: dict[str, list[dict]]) -> list[tuple[float, str]]:
    """(time, why) of every failure the events show, oldest first (the module's docstring lists them)."""
    out = [(e["at"], e.get("reason") or "failure") for e in by["failure"]]
    out += [(e["at"], f"evicted ({e.get('reason')})") for e in by["evicted"]]
    attempts: dict[int, float] = {}
    named: dict[str, list[float]] = {}
    for p in by["pod"]:
        if p.get("created") is None:
            continue
        if p.get("attempt"):
            attempts[p["attempt"]] = min(attempts.get(p["attempt"], math.inf), p["created"])
        named.setdefault(p.get("pod") or "", []).append(p["created"])
    out += [(at, f"restart attempt {n}") for n, at in attempts.items()]
    out += [(at, f"{name} re-created") for name, times in named.items() for at in sorted(times)[1:]]
    steps = by["step"]
    out += [(a["at"], f"step {b['step']} after step {a['step']}: restarted") for a, b in zip(steps, steps[1:])
            if b["step"] < a["step"] and b["at"] - a["at"] >= FAILURE_SLACK]
    return sorted(out)


def _thin(events: list[dict], record: dict) -> list[dict]:
    """The events a record keeps, within its caps: sparse steps, the newest checkpoints (older ones folded into a
    total), the first and newest pods and failures."""
    by = _by_type(events)
    failures = [at for at, _ in _failure_times(by)]
    by["step"] = step_lines.keep(by["step"], failures, FAILURE_SLACK)
    if len(by["checkpoint"]) > MAX_CHECKPOINTS:
        old, by["checkpoint"] = by["checkpoint"][:-MAX_CHECKPOINTS], by["checkpoint"][-MAX_CHECKPOINTS:]
        folded = record.setdefault("folded_checkpoints", {"count": 0, "seconds": 0.0, "until": None})
        folded.update(count=folded["count"] + len(old), until=max(folded["until"] or 0.0, old[-1]["start"]),
                      seconds=round(folded["seconds"] + sum(c["end"] - c["start"] for c in old), 3))
    by["pod"].sort(key=lambda p: p.get("created") or 0.0)
    by["failure"].sort(key=lambda f: f["at"])
    for kind, cap in (("pod", MAX_PODS), ("failure", MAX_FAILURES)):
        if len(by[kind]) > cap:
            by[kind] = by[kind][:cap // 4] + by[kind][-(cap - cap // 4):]
    kept = [e for group in by.values() for e in group]
    return sorted(kept, key=lambda e: (e.get("at") or e.get("start") or e.get("created") or 0.0, e["type"]))


# -- the breakdown ------------------------------------------------------------------------------------------


def _iso(at: float | None) -> str | None:
    return None if at is None else datetime.fromtimestamp(round(at), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _tail_cap(record: dict) -> float:
    minutes = record.get("idle_minutes")
    return 60.0 * (minutes + TAIL_MARGIN_MINUTES if minutes is not None else TAIL_CAP_MINUTES)


def _end(record: dict, by: dict[str, list[dict]], failures: list[tuple[float, str]], finished: float | None,
         now: float) -> tuple[float, bool]:
    """(The job's end, whether it is final): now for a job still running; else the end of its idle tail (the
    module's docstring), now while it is still open."""
    if finished is None:
        return now, False
    if record.get("bills_while_queued"):
        return finished, True
    gpu = [p for p in by["pod"] if p.get("gpu")] or by["pod"]
    attempts = [p["attempt"] for p in gpu if p.get("attempt") is not None]
    if attempts:
        last = [p for p in gpu if p.get("attempt") == max(attempts)]
    else:  # the pods made after the last failure that pods were made after
        since = max((at for at, _ in failures if any((p.get("created") or 0.0) > at for p in gpu)), default=-math.inf)
        last = [p for p in gpu if (p.get("created") or 0.0) >= since]
    final = {p["node"] for p in last if p.get("node")}
    entries = [n for n in by["node"] if n["node"] in final]
    if not entries:
        return finished, True
    cap = finished + _tail_cap(record)
    ends = [max(finished, n["reused"]) for n in entries if n.get("reused") is not None]
    if all(n.get("gone") for n in entries):
        ends.append(max(finished, *(n.get("seen") or finished for n in entries)))
    if ends or max(n.get("seen") or 0.0 for n in entries) >= cap:  # seen stops at the cap: merge()
        return min([cap, *ends]), True
    return min(cap, max(finished, now)), False


def _landmarks(record: dict, by: dict[str, list[dict]], failures: list[tuple[float, str]], admitted: float,
               end: float) -> tuple[float, float, float]:
    """When the first attempt's GPU pods were all scheduled, its containers all started, and the first step line;
    one not known yet is the next one known, or the end."""
    pods, first_failure = by["pod"], failures[0][0] if failures else math.inf
    attempts = [p["attempt"] for p in pods if p.get("attempt") is not None]
    first = ([p for p in pods if p.get("attempt") == min(attempts)] if attempts
             else [p for p in pods if (p.get("created") or 0.0) < first_failure])
    gpu = [p for p in first if p.get("gpu")] or first
    whole = bool(gpu) and len(gpu) >= (record.get("nodes") or 0)
    scheduled = max(p["scheduled"] for p in gpu) if whole and all(p.get("scheduled") for p in gpu) else None
    started = max(p["started"] for p in first) if whole and all(p.get("started") for p in first) else None
    stepped = by["step"][0]["at"] if by["step"] else started  # without step lines, training from the start
    stepped = end if stepped is None else stepped
    started = stepped if started is None else started
    scheduled = started if scheduled is None else scheduled
    scheduled = max(scheduled, admitted)
    started = max(started, scheduled)
    return scheduled, started, max(stepped, started)


def _lost(by: dict[str, list[dict]], failures: list[tuple[float, str]], end: float) -> list[tuple[float, float]]:
    """From the last step line before each failure (or the failure) to the first line past the step reached
    before it (without step lines: to the next container start)."""
    steps = by["step"]
    times, highest = [s["at"] for s in steps], list(itertools.accumulate((s["step"] for s in steps), max))
    starts = sorted({t for p in by["pod"] for t in (p.get("started"), *(p.get("starts") or [])) if t is not None})
    spans = []
    for at, _ in failures:
        n = bisect.bisect_left(times, at + FAILURE_SLACK)
        if steps:
            reached = highest[n - 1] if n else -1
            back = next((times[i] for i in range(n, len(steps)) if steps[i]["step"] >= reached), end)
            spans.append((times[n - 1] if n else at, back))
        else:
            spans.append((at, next((t for t in starts if t > at), end)))
    return spans


def _queued(by: dict[str, list[dict]], created: float, admitted: float | None, end: float) -> list[tuple]:
    """Before the first admission; after an eviction, once its pods have ended, until the next."""
    if admitted is None:
        return [(created, end)]
    admits = sorted(e["at"] for e in by["quota_reserved"] + by["admitted"])
    spans = [(created, admitted)]
    for evicted in (e["at"] for e in by["evicted"] if e["at"] >= admitted):
        back = next((a for a in admits if a > evicted), end)
        ended = [p["ended"] for p in by["pod"] if p.get("ended") and evicted <= p["ended"] < back]
        spans.append((max([evicted, *ended]), back))
    return spans


def _restarts(by: dict[str, list[dict]], failures: list[tuple[float, str]], finished: float | None) -> list[dict]:
    """One per group of failures with no container start between them (a gang fails together), or within
    GANG_RESTART_SECONDS of the group's first (the Job controller may re-create and start the failed pod before
    the JobSet restarts the whole gang); a finished job's last group, with nothing started after it, is how it
    ended, not a restart."""
    starts = sorted({t for p in by["pod"] for t in (p.get("started"), *(p.get("starts") or [])) if t is not None})
    groups: list[list[tuple[float, str]]] = []
    for at, why in failures:
        if groups and (at - groups[-1][0][0] <= GANG_RESTART_SECONDS
                       or not any(groups[-1][-1][0] < s <= at for s in starts)):
            groups[-1].append((at, why))
        else:
            groups.append([(at, why)])
    if finished is not None and groups and not any(s > groups[-1][-1][0] for s in starts):
        groups.pop()
    rank = ("remediation", "exited", "evicted", "deleted")  # the likeliest cause of a group first
    causes = [min(g, key=lambda f: next((i for i, word in enumerate(rank) if word in f[1]), len(rank)))
              for g in groups]
    return [{"at": _iso(at), "reason": why} for at, why in causes]


def _facts(record: dict, now: float) -> tuple:
    """(events by type, created, the finished event, finished, admitted, failures) of a record."""
    by = _by_type(record.get("events") or [])
    known = [t for e in record.get("events") or [] for t in (e.get("at"), e.get("created")) if t is not None]
    created = min((e["at"] for e in by["created"]), default=min(known, default=now))
    done = min(by["finished"], key=lambda e: e["at"], default=None)
    finished = done["at"] if done else None
    admits = sorted(e["at"] for e in by["quota_reserved"] + by["admitted"])
    admitted = admits[0] if admits else min((p["created"] for p in by["pod"] if p.get("created")), default=None)
    failures = [(at, why) for at, why in _failure_times(by)
                if admitted is not None and at >= admitted and (finished is None or at < finished)]
    return by, created, done, finished, admitted, failures


def _closed(record: dict) -> bool:
    """Whether the record is final: the job finished and its idle tail ended."""
    by, _, _, finished, _, failures = _facts(record, math.inf)
    return finished is not None and _end(record, by, failures, finished, math.inf)[1]


def breakdown(record: dict, now: float) -> dict:
    """Where the job's wall-clock time and GPU-seconds went, by names.PHASES (the module's docstring)."""
    by, created, done, finished, admitted, failures = _facts(record, now)
    pods, steps = by["pod"], by["step"]
    end = _end(record, by, failures, finished, now)[0]
    start, stop = round(created), max(round(created), round(end))

    def spans(found: Iterable[tuple[float, float]]) -> list[tuple[int, int]]:
        return [(max(start, round(a)), min(stop, round(b))) for a, b in found if round(b) > round(a)]

    checkpointing = spans((c["start"], c["end"]) for c in by["checkpoint"])
    queued = spans(_queued(by, created, admitted, end))
    lost = spans(_lost(by, failures, end))
    marks = [round(t) for t in _landmarks(record, by, failures, admitted, end)] if admitted is not None else [stop] * 3
    tail = round(finished) if finished is not None else None

    def phase(t: int) -> str:
        if tail is not None and t >= tail:
            return "idle_tail"
        for name, found in (("checkpointing", checkpointing), ("queued", queued), ("lost_to_restarts", lost)):
            if any(a <= t < b for a, b in found):
                return name
        return next((name for name, mark in zip(names.PHASES[1:4], marks) if t < mark), "training")

    points = sorted({start, stop, *(p for s in checkpointing + queued + lost for p in s),
                     *(p for p in (*marks, tail) if p is not None and start < p < stop)})
    phases = dict.fromkeys(names.PHASES, 0)
    for a, b in zip(points, points[1:]):
        phases[phase(a)] += b - a
    moved = min(round((record.get("folded_checkpoints") or {}).get("seconds") or 0), phases["training"])
    phases["training"] -= moved
    phases["checkpointing"] += moved
    gpus, price = record.get("gpus") or 0, record.get("gpu_hour_usd")
    paid = sum(v for k, v in phases.items() if k != "queued" or record.get("bills_while_queued"))
    useful = max(s["step"] for s in steps) - min(s["step"] for s in steps) + 1 if steps else None
    cost = round(paid * gpus / 3600 * price, 2) if price is not None else None
    failed = _restarts(by, failures, finished)
    return {
        "namespace": record.get("namespace"), "name": record.get("name"), "kind": record.get("kind"),
        "nodes": record.get("nodes"), "gpus_per_node": record.get("gpus_per_node"), "gpus": gpus,
        "created": _iso(created), "finished": _iso(finished), "outcome": done.get("outcome") if done else None,
        "end": _iso(stop), "wall_clock_seconds": stop - start, "phases": phases,
        "gpu_seconds": {k: v * gpus for k, v in phases.items()}, "paid_gpu_seconds": paid * gpus,
        "bills_while_queued": bool(record.get("bills_while_queued")),
        "goodput": round(phases["training"] / paid, 6) if paid else None,
        "step_lines": bool(steps), "steps": useful, "gpu_hour_usd": price, "cost_usd": cost,
        "cost_per_useful_step_usd": round(paid * gpus / 3600 * price / useful, 6) if price is not None and useful
        else None,
        "restarts": max(len(failed), max((p.get("attempt") or 0 for p in pods), default=0)), "failures": failed,
    }
